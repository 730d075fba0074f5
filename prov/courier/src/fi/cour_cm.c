/*
 * FI_EP_MSG connection management, the endpoints' side: fi_connect, fi_accept, fi_shutdown
 * and the handshake the engine's progress runs for them (up ops cm_rx, cm_tick, peer_lost).
 * The passive endpoint and its connection requests are in cour_cm_passive.c; the design is
 * in cour_cm.h, the packets in proto/cour_wire_fmt.h. Domain lock held unless said.
 */
#include "cour_cm.h"
#include "cour_cq.h"
#include "cour_ep.h"

#include <stdlib.h>
#include <sys/random.h>

#define COUR_CM_RETRY_US     100000u   /* first resend of CONNREQ or ACCEPT */
#define COUR_CM_RETRY_MAX_US 1000000u
#define COUR_CM_SHUTDOWN_TRIES 5

static struct cour_ep *cour_cm_ep(struct cour_pep *pep)
{
	return cour_ep_of_pep(pep);
}

const struct cour_addr *cour_cm_peer(struct cour_conn *conn)
{
	return conn->has_peer && conn->state == COUR_CONN_CONNECTED ? &conn->peer : NULL;
}

fi_addr_t cour_cm_reverse(struct cour_conn *conn, const struct cour_addr *addr)
{
	return conn->has_peer && cour_addr_eq(addr, &conn->peer) ? 0 : FI_ADDR_NOTAVAIL;
}

static void cour_cm_event(struct cour_ep *ep, uint32_t event, const void *data, size_t len)
{
	struct fi_eq_cm_entry *entry = calloc(1, sizeof(*entry) + len);

	if (!entry) {
		COUR_WARN(FI_LOG_EP_CTRL, "no memory for a connection event (%u)\n", event);
		return;
	}
	entry->fid = &ep->ep_fid.fid;
	if (len)
		memcpy(entry->data, data, len);
	cour_eq_post(ep->conn.eq, event, entry, sizeof(*entry) + len);
	free(entry);
}

static void cour_cm_error(struct cour_ep *ep, int err, int prov_errno, const void *data,
			  size_t len)
{
	struct fi_eq_err_entry e = {
		.fid = &ep->ep_fid.fid,
		.context = ep->ep_fid.fid.context,
		.err = err,
		.prov_errno = prov_errno,
		.err_data = (void *)data,
		.err_data_size = len,
	};

	cour_eq_write_err(&ep->conn.eq->eq_fid, &e);
}

static void cour_cm_schedule(struct cour_ep *ep, uint64_t now)
{
	uint64_t d = (uint64_t)COUR_CM_RETRY_US << COUR_MIN(ep->conn.tries, 4u);

	ep->pep.cm_deadline = now + COUR_MIN(d, (uint64_t)COUR_CM_RETRY_MAX_US);
}

static int cour_cm_check(struct cour_ep *ep, const void *param, size_t len, const char *what)
{
	if (len > COUR_CM_DATA_MAX || (len && !param)) {
		COUR_WARN(FI_LOG_EP_CTRL, "%s: %zu bytes of data (at most %d)\n", what, len,
			  COUR_CM_DATA_MAX);
		return -FI_EINVAL;
	}
	if (!ep->conn.eq) {
		COUR_WARN(FI_LOG_EP_CTRL, "%s: no EQ bound to the endpoint\n", what);
		return -FI_ENOEQ;
	}
	return 0;
}

static uint64_t cour_cm_new_id(void)
{
	uint64_t id = 0;

	while (!id)
		if (getrandom(&id, sizeof(id), 0) != sizeof(id))
			id = cour_now_us() * 0x9E3779B97F4A7C15ull;
	return id;
}

int cour_cm_connect(struct fid_ep *ep_fid, const void *addr, const void *param,
			   size_t len)
{
	struct cour_ep *ep = cour_ep_of(ep_fid);
	struct cour_conn *c = &ep->conn;
	struct cour_addr to;
	uint64_t now = cour_now_us();
	int ret = cour_cm_check(ep, param, len, "fi_connect");

	if (ret)
		return ret;
	if (!addr || cour_addr_from_sockaddr(&to, addr,
					     ((const struct sockaddr *)addr)->sa_family == AF_INET ?
					     sizeof(struct sockaddr_in) :
					     sizeof(struct sockaddr_in6))) {
		COUR_WARN(FI_LOG_EP_CTRL, "fi_connect: not a sockaddr_in/in6 (family %d)\n",
			  addr ? ((const struct sockaddr *)addr)->sa_family : -1);
		return -FI_EINVAL;
	}
	if (!ep->pep.enabled) {
		ret = fi_enable(ep_fid);
		if (ret)
			return ret;
	}
	cour_lock_acquire(&ep->domain->lock);
	if (c->state != COUR_CONN_IDLE || c->conn_id) {
		cour_lock_release(&ep->domain->lock);
		COUR_WARN(FI_LOG_EP_CTRL, "fi_connect: only once in an endpoint's life\n");
		return -FI_EOPBADSTATE;
	}
	to.is_v4 = ep->pep.wire.addr.is_v4;
	c->target = to;
	c->conn_id = cour_cm_new_id();
	c->data_len = len;
	if (len)
		memcpy(c->data, param, len);
	c->state = COUR_CONN_CONNECTING;
	c->started_us = now;
	c->tries = 0;
	cour_pep_send_cm(&ep->pep, &c->target, COUR_CM_CONNREQ, c->conn_id, c->cookie, c->data,
			 len);
	cour_cm_schedule(ep, now);
	cour_lock_release(&ep->domain->lock);
	cour_domain_kick(ep->domain);
	return 0;
}

int cour_cm_accept(struct fid_ep *ep_fid, const void *param, size_t len)
{
	struct cour_ep *ep = cour_ep_of(ep_fid);
	struct cour_conn *c = &ep->conn;
	uint64_t now = cour_now_us();
	int ret = cour_cm_check(ep, param, len, "fi_accept");

	if (ret)
		return ret;
	if (!ep->pep.enabled) {
		ret = fi_enable(ep_fid);
		if (ret)
			return ret;
	}
	cour_lock_acquire(&ep->domain->lock);
	if (c->state != COUR_CONN_IDLE || !c->conn_id) {
		cour_lock_release(&ep->domain->lock);
		COUR_WARN(FI_LOG_EP_CTRL, "fi_accept: the endpoint was not opened from a "
			  "connection request, or already accepted\n");
		return -FI_EOPBADSTATE;
	}
	c->peer.is_v4 = ep->pep.wire.addr.is_v4;
	c->has_peer = true;
	c->gen++;
	c->data_len = len;
	if (len)
		memcpy(c->data, param, len);
	/* Connected now, as a TCP server is once it accepts: FI_CONNECTED here comes before
	 * the connecting side's (applications count on that order), and ACCEPT goes again
	 * until the peer answers ESTABLISHED or sends anything */
	c->state = COUR_CONN_CONNECTED;
	c->accept_pending = true;
	c->started_us = now;
	c->tries = 0;
	cour_cm_event(ep, FI_CONNECTED, NULL, 0);     /* (queued before the peer can answer) */
	cour_pep_send_cm(&ep->pep, &c->peer, COUR_CM_ACCEPT, c->conn_id, 0, c->data, len);
	cour_cm_schedule(ep, now);
	cour_lock_release(&ep->domain->lock);
	cour_domain_kick(ep->domain);
	return 0;
}

int cour_cm_shutdown(struct fid_ep *ep_fid, uint64_t flags)
{
	struct cour_ep *ep = cour_ep_of(ep_fid);
	struct cour_conn *c = &ep->conn;

	if (flags)
		return -FI_EBADFLAGS;
	cour_lock_acquire(&ep->domain->lock);
	/* a peer that shut down first still hears of ours: it may wait for its FI_SHUTDOWN */
	if (c->state != COUR_CONN_CONNECTED &&
	    (c->state != COUR_CONN_SHUTDOWN || !c->has_peer || c->shutdown_sent)) {
		bool done = c->state == COUR_CONN_SHUTDOWN;

		cour_lock_release(&ep->domain->lock);
		return done ? 0 : -FI_ENOTCONN;
	}
	c->state = COUR_CONN_SHUTDOWN;
	c->shutdown_sent = true;
	c->accept_pending = false;
	c->tries = 0;
	cour_pep_send_cm(&ep->pep, &c->peer, COUR_CM_SHUTDOWN, c->conn_id, 0, NULL, 0);
	cour_cm_schedule(ep, cour_now_us());
	cour_lock_release(&ep->domain->lock);
	cour_domain_kick(ep->domain);
	return 0;
}

int cour_cm_getpeer(struct fid_ep *ep_fid, void *addr, size_t *addrlen)
{
	struct cour_ep *ep = cour_ep_of(ep_fid);
	struct cour_addr peer;
	bool has;

	cour_lock_acquire(&ep->domain->lock);
	has = ep->conn.has_peer;
	peer = ep->conn.peer;
	cour_lock_release(&ep->domain->lock);
	return has ? cour_addr_name_out(&peer, addr, addrlen) : -FI_ENOTCONN;
}

void cour_cm_rx(struct cour_pep *pep, const struct cour_addr *from,
		const struct cour_cm_hdr *cm, uint64_t cookie, const uint8_t *data)
{
	struct cour_ep *ep = cour_cm_ep(pep);
	struct cour_conn *c = &ep->conn;
	bool ours = c->conn_id && cm->conn_id == c->conn_id;
	bool from_peer = ours && c->has_peer && cour_addr_eq(from, &c->peer);

	switch (cm->op) {
	case COUR_CM_ACCEPT:
		if (ours && c->state == COUR_CONN_CONNECTING) {
			c->peer = *from;
			c->has_peer = true;
			c->gen++;
			c->state = COUR_CONN_CONNECTED;
			pep->cm_deadline = 0;
			cour_pep_send_cm(pep, from, COUR_CM_ESTABLISHED, c->conn_id, 0, NULL, 0);
			cour_cm_event(ep, FI_CONNECTED, data, cm->data_len);
		} else if (from_peer) {
			/* our ESTABLISHED was lost */
			cour_pep_send_cm(pep, from, COUR_CM_ESTABLISHED, c->conn_id, 0, NULL, 0);
		}
		return;
	case COUR_CM_RETRY:
		/* (bound to our fresh conn_id: a recorded one names another) */
		if (ours && c->state == COUR_CONN_CONNECTING && cookie &&
		    cour_addr_eq(from, &c->target) && cookie != c->cookie) {
			c->cookie = cookie;
			cour_pep_send_cm(pep, &c->target, COUR_CM_CONNREQ, c->conn_id, c->cookie,
					 c->data, c->data_len);
		}
		return;
	case COUR_CM_REJECT:
		if (ours && c->state == COUR_CONN_CONNECTING &&
		    cour_addr_eq(from, &c->target)) {
			c->state = COUR_CONN_FAILED;
			pep->cm_deadline = 0;
			cour_cm_error(ep, FI_ECONNREFUSED, 0, data, cm->data_len);
		}
		return;
	case COUR_CM_ESTABLISHED:
		if (from_peer && c->accept_pending) {
			c->accept_pending = false;
			if (c->state == COUR_CONN_CONNECTED)
				pep->cm_deadline = 0;
		}
		return;
	case COUR_CM_SHUTDOWN:
		if (!from_peer)
			return;
		cour_pep_send_cm(pep, from, COUR_CM_SHUTDOWN_ACK, c->conn_id, 0, NULL, 0);
		if (c->shutdown_reported || c->closing)
			return;
		c->shutdown_reported = true;
		if (c->state != COUR_CONN_SHUTDOWN)
			pep->cm_deadline = 0;
		c->state = COUR_CONN_SHUTDOWN;
		cour_cm_event(ep, FI_SHUTDOWN, NULL, 0);
		return;
	case COUR_CM_SHUTDOWN_ACK:
		if (from_peer && c->shutdown_sent) {
			c->shutdown_acked = true;
			pep->cm_deadline = 0;
		}
		return;
	default:
		COUR_DROP_BAD(pep, "CM packet an endpoint does not take (CONNREQ)");
		return;
	}
}

void cour_cm_tick(struct cour_pep *pep, uint64_t now)
{
	struct cour_ep *ep = cour_cm_ep(pep);
	struct cour_conn *c = &ep->conn;
	bool expired = now - c->started_us >= (uint64_t)cour_params.peer_timeout_ms * 1000;

	pep->cm_deadline = 0;
	c->tries++;
	switch (c->state) {
	case COUR_CONN_CONNECTING:
		if (expired) {
			char str[80];

			COUR_WARN(FI_LOG_EP_CTRL, "connection to %s timed out after %d ms\n",
				  cour_addr_str(&c->target, str, sizeof(str)),
				  cour_params.peer_timeout_ms);
			c->state = COUR_CONN_FAILED;
			cour_cm_error(ep, FI_ETIMEDOUT, 0, NULL, 0);
			return;
		}
		cour_pep_send_cm(pep, &c->target, COUR_CM_CONNREQ, c->conn_id, c->cookie, c->data,
				 c->data_len);
		cour_cm_schedule(ep, now);
		return;
	case COUR_CONN_CONNECTED: {
		/* accepted: anything the peer sent says it has our ACCEPT */
		struct cour_peer *peer = cour_peer_by_addr_locked(pep, &c->peer, false);

		if (!c->accept_pending || (peer && peer->remote_session)) {
			c->accept_pending = false;
			return;
		}
		if (expired) {
			char str[80];

			COUR_WARN(FI_LOG_EP_CTRL, "accepted connection from %s: no answer in %d "
				  "ms; shut down\n", cour_addr_str(&c->peer, str, sizeof(str)),
				  cour_params.peer_timeout_ms);
			c->accept_pending = false;
			c->state = COUR_CONN_SHUTDOWN;
			c->shutdown_reported = true;
			cour_cm_event(ep, FI_SHUTDOWN, NULL, 0);
			return;
		}
		cour_pep_send_cm(pep, &c->peer, COUR_CM_ACCEPT, c->conn_id, 0, c->data, c->data_len);
		cour_cm_schedule(ep, now);
		return;
	}
	case COUR_CONN_SHUTDOWN:
		if (c->shutdown_sent && !c->shutdown_acked && c->tries < COUR_CM_SHUTDOWN_TRIES) {
			cour_pep_send_cm(pep, &c->peer, COUR_CM_SHUTDOWN, c->conn_id, 0, NULL, 0);
			cour_cm_schedule(ep, now);
		}
		return;
	default:
		return;
	}
}

void cour_cm_peer_lost(struct cour_pep *pep, const struct cour_addr *addr, int prov_errno)
{
	struct cour_ep *ep = cour_cm_ep(pep);
	struct cour_conn *c = &ep->conn;

	if (c->closing || !c->has_peer || !cour_addr_eq(addr, &c->peer) ||
	    c->state != COUR_CONN_CONNECTED ||
	    c->shutdown_reported)
		return;
	c->state = COUR_CONN_SHUTDOWN;
	c->shutdown_reported = true;
	pep->cm_deadline = 0;
	cour_cm_event(ep, FI_SHUTDOWN, NULL, 0);
}

void cour_cm_refused(struct cour_pep *pep, const struct cour_addr *addr)
{
	struct cour_ep *ep = cour_cm_ep(pep);
	struct cour_conn *c = &ep->conn;

	/* as TCP's connect to a closed port: refused at once, not after the timeout */
	if (c->state != COUR_CONN_CONNECTING || !cour_addr_eq(addr, &c->target))
		return;
	c->state = COUR_CONN_FAILED;
	pep->cm_deadline = 0;
	cour_cm_error(ep, FI_ECONNREFUSED, 0, NULL, 0);
}

void cour_cm_ep_close(struct cour_ep *ep)
{
	struct cour_conn *c = &ep->conn;

	c->closing = true;
	ep->pep.cm_deadline = 0;
	if (c->has_peer && c->state == COUR_CONN_CONNECTED)
		cour_pep_send_cm(&ep->pep, &c->peer, COUR_CM_SHUTDOWN, c->conn_id, 0, NULL, 0);
	if (c->eq)
		cour_ref_dec(&c->eq->refcnt);
	c->eq = NULL;
}
