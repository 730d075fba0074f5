/*
 * FI_EP_MSG connection management, the passive side: the passive endpoint (its socket, its
 * listener thread), connection requests and their cookies, fi_reject, and handing a request to
 * the endpoint that accepts it. The connecting and accepting endpoints' side is in cour_cm.c;
 * the design is in cour_cm.h, the packets in proto/cour_wire_fmt.h.
 */
#include "cour_cm.h"
#include "cour_attr.h"
#include "cour_cq.h"
#include "cour_ep.h"

#include <nettle/hmac.h>
#include <poll.h>
#include <stdlib.h>
#include <time.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <unistd.h>

#define COUR_CM_BACKLOG      128       /* requests reported and not yet answered */
#define COUR_CM_REQS_MAX     4096      /* requests remembered (to answer duplicates) */
#define COUR_CM_REQ_KEEP_US  60000000u /* how long an answered request is remembered */

enum { COUR_REQ_PENDING, COUR_REQ_TAKEN, COUR_REQ_REJECTED };

struct cour_connreq {
	struct fid            fid;       /* FI_CLASS_CONNREQ: info->handle of FI_CONNREQ */
	struct cour_connreq  *prev, *next;
	struct cour_cm_pep   *pep;
	struct cour_addr      from;      /* the connecting endpoint */
	uint64_t              conn_id;
	uint64_t              seen_us;
	int                   state;
	size_t                rej_len;
	uint8_t               rej[COUR_CM_DATA_MAX];
};

struct cour_cm_pep {
	struct fid_pep        pep_fid;
	struct cour_fabric   *fabric;
	struct fi_info       *info;
	struct cour_eq       *eq;
	int                   fd;        /* the listening UDP socket */
	int                   wake_fd;   /* eventfd: the thread's way out */
	struct cour_addr      addr;
	bool                  listening;
	struct cour_thread    thread;    /* the listener, entered while it runs */
	pthread_mutex_t       lock;      /* reqs, nreqs, npending */
	struct cour_connreq  *reqs;      /* utlist DL, oldest first */
	struct cour_mac      *mac;       /* with a key (cour_auth.c): under lock too */
	uint8_t               cookie_key[32];   /* with a key: this passive endpoint's alone */
	size_t                nreqs, npending, backlog;
};

static struct fi_ops cour_connreq_fi_ops;
static struct fi_ops cour_cm_pep_fi_ops;

static int cour_cm_socket(const struct cour_addr *want, struct cour_addr *got)
{
	union cour_sockaddr sa;
	struct sockaddr_storage ss;
	socklen_t len = (socklen_t)cour_addr_to_sockaddr(want, &sa);
	int fd = socket(sa.sa.sa_family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	int one = 1;

	if (fd < 0) {
		COUR_WARN(FI_LOG_EP_CTRL, "passive endpoint socket: %s\n", strerror(errno));
		return errno == EMFILE || errno == ENFILE ? -FI_EMFILE : -FI_ENOMEM;
	}
	/* Accepted endpoints bind the same port, each connected to its peer (cour_udp.c), so
	 * the listener takes SO_REUSEPORT; that would let a second listener share the port
	 * too, so a plain socket first makes sure nothing holds it (as TCP's bind would) */
	if (want->port) {
		int probe = socket(sa.sa.sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		int busy = probe >= 0 && bind(probe, &sa.sa, len) != 0 && errno == EADDRINUSE;

		if (probe >= 0)
			close(probe);
		if (busy) {
			char str[80];

			COUR_WARN(FI_LOG_EP_CTRL, "passive endpoint: %s is in use\n",
				  cour_addr_str(want, str, sizeof(str)));
			close(fd);
			return -FI_EADDRINUSE;
		}
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	if (bind(fd, &sa.sa, len) != 0) {
		int e = errno;
		char str[80];

		COUR_WARN(FI_LOG_EP_CTRL, "passive endpoint: bind %s: %s\n",
			  cour_addr_str(want, str, sizeof(str)), strerror(e));
		close(fd);
		return e == EADDRINUSE ? -FI_EADDRINUSE : -FI_EINVAL;
	}
	len = sizeof(ss);
	getsockname(fd, (struct sockaddr *)&ss, &len);
	cour_addr_from_sockaddr(got, &ss, len);
	got->is_v4 = want->is_v4;
	return fd;
}

static void cour_cm_pep_send(struct cour_cm_pep *pep, const struct cour_addr *to, uint32_t op,
			     uint64_t id, uint64_t cookie, const void *data, size_t len)
{
	_Alignas(8) char buf[COUR_CM_DGRAM_MAX];
	union cour_sockaddr sa;
	size_t n = cour_cm_pack(buf, pep->mac, &pep->addr, to, op, id, cookie, data, len);
	socklen_t sl = (socklen_t)cour_addr_to_sockaddr(to, &sa);

	if (sendto(pep->fd, buf, n, 0, &sa.sa, sl) < 0)
		COUR_DBG(FI_LOG_EP_CTRL, "passive endpoint: sendto: %s\n", strerror(errno));
}

/* Lock held. Forget answered requests past their time, and the oldest answered ones past the
 * cap; pending ones stay (the application holds their handle). */
static void cour_cm_reqs_trim(struct cour_cm_pep *pep, uint64_t now)
{
	struct cour_connreq *r, *tmp;

	DL_FOREACH_SAFE(pep->reqs, r, tmp) {
		if (r->state == COUR_REQ_PENDING)
			continue;
		if (now - r->seen_us < COUR_CM_REQ_KEEP_US && pep->nreqs <= COUR_CM_REQS_MAX)
			continue;
		DL_DELETE(pep->reqs, r);
		pep->nreqs--;
		free(r);
	}
}

/* A CONNREQ: report a new one (FI_CONNREQ), answer a duplicate of a rejected one again */
static void cour_cm_pep_connreq(struct cour_cm_pep *pep, const struct cour_addr *from,
				const struct cour_cm_hdr *cm, const uint8_t *data)
{
	struct fi_eq_cm_entry *entry;
	struct cour_connreq *r;
	struct fi_info *info;
	uint64_t now = cour_now_us();
	union cour_sockaddr sa;
	size_t sl;

	pthread_mutex_lock(&pep->lock);
	DL_FOREACH(pep->reqs, r)
		if (r->conn_id == cm->conn_id && cour_addr_eq(&r->from, from))
			break;
	if (r) {
		r->seen_us = now;
		if (r->state == COUR_REQ_REJECTED)
			cour_cm_pep_send(pep, from, COUR_CM_REJECT, r->conn_id, 0, r->rej, r->rej_len);
		pthread_mutex_unlock(&pep->lock);
		return;      /* pending: the application has it; taken: the endpoint answers */
	}
	cour_cm_reqs_trim(pep, now);
	if (pep->npending >= pep->backlog || pep->nreqs >= 2 * COUR_CM_REQS_MAX) {
		pthread_mutex_unlock(&pep->lock);
		COUR_INFO(FI_LOG_EP_CTRL, "passive endpoint: backlog of %zu requests full; the "
			  "connecting side tries again\n", pep->backlog);
		return;
	}
	r = calloc(1, sizeof(*r));
	info = fi_dupinfo(pep->info);
	entry = calloc(1, sizeof(*entry) + cm->data_len);
	if (!r || !info || !entry)
		goto nomem;
	r->fid.fclass = FI_CLASS_CONNREQ;
	r->fid.ops = &cour_connreq_fi_ops;
	r->pep = pep;
	r->from = *from;
	r->conn_id = cm->conn_id;
	r->seen_us = now;
	r->state = COUR_REQ_PENDING;
	/* the accepting endpoint binds the listener's address too, connected to the peer */
	free(info->src_addr);
	sl = cour_addr_to_sockaddr(&pep->addr, &sa);
	info->src_addr = malloc(sl);
	if (!info->src_addr)
		goto nomem;
	memcpy(info->src_addr, &sa, sl);
	info->src_addrlen = sl;
	free(info->dest_addr);
	sl = cour_addr_to_sockaddr(from, &sa);
	info->dest_addr = malloc(sl);
	if (!info->dest_addr)
		goto nomem;
	memcpy(info->dest_addr, &sa, sl);
	info->dest_addrlen = sl;
	info->handle = &r->fid;
	entry->fid = &pep->pep_fid.fid;
	entry->info = info;
	if (cm->data_len)
		memcpy(entry->data, data, cm->data_len);
	DL_APPEND(pep->reqs, r);
	pep->nreqs++;
	pep->npending++;
	pthread_mutex_unlock(&pep->lock);
	if (cour_eq_post(pep->eq, FI_CONNREQ, entry, sizeof(*entry) + cm->data_len) < 0) {
		pthread_mutex_lock(&pep->lock);
		DL_DELETE(pep->reqs, r);
		pep->nreqs--;
		pep->npending--;
		pthread_mutex_unlock(&pep->lock);
		fi_freeinfo(info);
		free(r);
	}
	free(entry);
	return;
nomem:
	pthread_mutex_unlock(&pep->lock);
	COUR_WARN(FI_LOG_EP_CTRL, "passive endpoint: no memory for a connection request\n");
	if (info)
		info->handle = NULL;
	fi_freeinfo(info);
	free(entry);
	free(r);
}

/*
 * With a key, a CONNREQ is reported only with a cookie this passive endpoint gave its sender
 * for this conn_id within the last minute (COUR_CM_RETRY): an HMAC, under a secret of this
 * passive endpoint alone, of the sender's address, the conn_id and the half minute. A CONNREQ
 * an attacker recorded, even seconds ago from a passive endpoint that ran before this one on
 * the same address, carries no cookie this one gave; one that carries such a cookie is a copy
 * the key's replay window refuses (cour_mac.h). Stateless, so a flood of them costs no memory.
 */
#define COUR_CM_COOKIE_EPOCH_S 30
static uint64_t cour_cm_cookie(const struct cour_cm_pep *pep, const struct cour_addr *from,
			       uint64_t conn_id, uint32_t epoch)
{
	struct hmac_sha256_ctx h;
	uint8_t d[SHA256_DIGEST_SIZE];
	uint64_t c;

	hmac_sha256_set_key(&h, sizeof(pep->cookie_key), pep->cookie_key);
	hmac_sha256_update(&h, sizeof(from->ip), from->ip);
	hmac_sha256_update(&h, sizeof(from->port), (const uint8_t *)&from->port);
	hmac_sha256_update(&h, sizeof(conn_id), (const uint8_t *)&conn_id);
	hmac_sha256_update(&h, sizeof(epoch), (const uint8_t *)&epoch);
	hmac_sha256_digest(&h, sizeof(d), d);
	memcpy(&c, d, sizeof(c));
	return c ? c : 1;        /* 0 means none */
}

static uint32_t cour_cm_epoch(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint32_t)(ts.tv_sec / COUR_CM_COOKIE_EPOCH_S);
}

/* Whether a keyed CONNREQ may be reported: its cookie is ours; else it is answered RETRY. */
static bool cour_cm_pep_fresh(struct cour_cm_pep *pep, const struct cour_addr *from,
			      const struct cour_cm_hdr *cm, uint64_t cookie)
{
	uint32_t e = cour_cm_epoch();
	uint64_t now = cour_cm_cookie(pep, from, cm->conn_id, e);

	if (cookie && (cookie == now || cookie == cour_cm_cookie(pep, from, cm->conn_id, e - 1)))
		return true;
	pthread_mutex_lock(&pep->lock);
	cour_cm_pep_send(pep, from, COUR_CM_RETRY, cm->conn_id, now, NULL, 0);
	pthread_mutex_unlock(&pep->lock);
	return false;
}

/* The listener returns when its eventfd turns readable. */
static void cour_cm_listener_stop(void *arg)
{
	cour_fd_kick(((struct cour_cm_pep *)arg)->wake_fd);
}

/* A keyed passive endpoint hears only what its key authenticates, as the active endpoints'
 * wires do (the lock: fi_reject signs with the same MAC from the application's thread) */
static bool cour_cm_pep_auth(struct cour_cm_pep *pep, const void *buf, size_t *len,
			     const struct sockaddr_storage *ss, socklen_t sl)
{
	bool ok;

	pthread_mutex_lock(&pep->lock);
	ok = cour_mac_accept(pep->mac, &pep->addr, buf, len, ss, sl);
	pthread_mutex_unlock(&pep->lock);
	return ok;
}

static void *cour_cm_listener(void *arg)
{
	struct cour_cm_pep *pep = arg;
	_Alignas(8) char buf[COUR_CM_DGRAM_MAX + 1];

	for (;;) {
		struct pollfd p[2] = { { .fd = pep->fd, .events = POLLIN },
				       { .fd = pep->wake_fd, .events = POLLIN } };

		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		for (int n = 0; n < 64; n++) {
			struct sockaddr_storage ss;
			socklen_t sl = sizeof(ss);
			ssize_t len = recvfrom(pep->fd, buf, sizeof(buf), 0, (struct sockaddr *)&ss,
					       &sl);
			struct cour_cm_hdr cm;
			struct cour_addr from;
			const uint8_t *data;
			uint64_t cookie;

			if (len < 0)
				break;
			if (pep->mac && !cour_cm_pep_auth(pep, buf, (size_t *)&len, &ss, sl))
				continue;
			if (!cour_cm_unpack(buf, (size_t)len, pep->mac != NULL, &cm, &cookie,
					    &data) ||
			    cour_addr_from_sockaddr(&from, &ss, sl) != 0) {
				COUR_DBG(FI_LOG_EP_CTRL, "passive endpoint: dropped a datagram that "
					 "is no CM packet\n");
				continue;
			}
			from.is_v4 = pep->addr.is_v4;
			if (cm.op == COUR_CM_CONNREQ &&
			    (!pep->mac || cour_cm_pep_fresh(pep, &from, &cm, cookie)))
				cour_cm_pep_connreq(pep, &from, &cm, data);
		}
	}
	return NULL;
}

static int cour_cm_pep_listen(struct fid_pep *pep_fid)
{
	struct cour_cm_pep *pep = COUR_CONTAINER_OF(pep_fid, struct cour_cm_pep, pep_fid);
	int ret;

	if (pep->listening)
		return 0;
	if (pep->fd < 0) {
		COUR_WARN(FI_LOG_EP_CTRL, "fi_listen: an active endpoint took this address\n");
		return -FI_EOPBADSTATE;
	}
	if (!pep->eq) {
		COUR_WARN(FI_LOG_EP_CTRL, "fi_listen: no EQ bound to the passive endpoint\n");
		return -FI_ENOEQ;
	}
	ret = cour_thread_start(&pep->thread, cour_cm_listener, pep, cour_cm_listener_stop);
	if (ret) {
		COUR_WARN(FI_LOG_EP_CTRL, "fi_listen: no thread: %s\n", strerror(ret));
		return -FI_ENOMEM;
	}
	pep->listening = true;
	return 0;
}

static int cour_cm_pep_reject(struct fid_pep *pep_fid, fid_t handle, const void *param,
			      size_t len)
{
	struct cour_cm_pep *pep = COUR_CONTAINER_OF(pep_fid, struct cour_cm_pep, pep_fid);
	struct cour_connreq *r;

	if (len > COUR_CM_DATA_MAX || (len && !param)) {
		COUR_WARN(FI_LOG_EP_CTRL, "fi_reject: %zu bytes of data (at most %d)\n", len,
			  COUR_CM_DATA_MAX);
		return -FI_EINVAL;
	}
	pthread_mutex_lock(&pep->lock);
	DL_FOREACH(pep->reqs, r)
		if (&r->fid == handle)
			break;
	if (!r || r->state != COUR_REQ_PENDING) {
		pthread_mutex_unlock(&pep->lock);
		COUR_WARN(FI_LOG_EP_CTRL, "fi_reject: not a pending request of this endpoint\n");
		return -FI_EINVAL;
	}
	r->state = COUR_REQ_REJECTED;
	pep->npending--;
	r->rej_len = len;
	if (len)
		memcpy(r->rej, param, len);
	cour_cm_pep_send(pep, &r->from, COUR_CM_REJECT, r->conn_id, 0, r->rej, r->rej_len);
	pthread_mutex_unlock(&pep->lock);
	return 0;
}

int cour_cm_ep_from_request(struct cour_conn *conn, fid_t handle)
{
	struct cour_connreq *r;
	struct cour_cm_pep *pep;

	if (!handle || handle->fclass != FI_CLASS_CONNREQ || handle->ops != &cour_connreq_fi_ops)
		return -FI_EINVAL;
	r = COUR_CONTAINER_OF(handle, struct cour_connreq, fid);
	pep = r->pep;
	pthread_mutex_lock(&pep->lock);
	if (r->state != COUR_REQ_PENDING) {
		pthread_mutex_unlock(&pep->lock);
		return -FI_EINVAL;
	}
	r->state = COUR_REQ_TAKEN;
	pep->npending--;
	conn->peer = r->from;
	conn->has_peer = false;      /* until fi_accept */
	conn->conn_id = r->conn_id;
	pthread_mutex_unlock(&pep->lock);
	return 0;
}

int cour_cm_pep_give_addr(fid_t handle, struct cour_addr *addr)
{
	struct cour_cm_pep *pep;

	if (!handle || handle->fclass != FI_CLASS_PEP || handle->ops != &cour_cm_pep_fi_ops)
		return -FI_EINVAL;
	pep = COUR_CONTAINER_OF(handle, struct cour_cm_pep, pep_fid.fid);
	if (pep->listening) {
		COUR_WARN(FI_LOG_EP_CTRL, "fi_endpoint: the passive endpoint in info->handle "
			  "listens: its address is in use\n");
		return -FI_EBUSY;
	}
	/* the active endpoint binds the address the passive one reserved: it lets it go */
	if (pep->fd >= 0)
		close(pep->fd);
	pep->fd = -1;
	*addr = pep->addr;
	return 0;
}

static int cour_connreq_close(struct fid *fid)
{
	return 0;      /* the passive endpoint owns requests and frees them */
}

static int cour_cm_pep_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct cour_cm_pep *pep = COUR_CONTAINER_OF(fid, struct cour_cm_pep, pep_fid.fid);

	if (bfid->fclass != FI_CLASS_EQ) {
		COUR_WARN(FI_LOG_EP_CTRL, "a passive endpoint binds an EQ only\n");
		return -FI_EINVAL;
	}
	if (pep->listening)
		return -FI_EOPBADSTATE;
	if (pep->eq)
		cour_ref_dec(&pep->eq->refcnt);
	pep->eq = COUR_CONTAINER_OF(bfid, struct cour_eq, eq_fid.fid);
	cour_ref_inc(&pep->eq->refcnt);
	return 0;
}

static int cour_cm_pep_close(struct fid *fid)
{
	struct cour_cm_pep *pep = COUR_CONTAINER_OF(fid, struct cour_cm_pep, pep_fid.fid);
	struct cour_connreq *r, *tmp;

	if (pep->listening) {
		cour_cm_listener_stop(pep);
		cour_thread_join(&pep->thread);
	}
	DL_FOREACH_SAFE(pep->reqs, r, tmp) {
		DL_DELETE(pep->reqs, r);
		free(r);
	}
	if (pep->eq)
		cour_ref_dec(&pep->eq->refcnt);
	if (pep->fd >= 0)
		close(pep->fd);
	close(pep->wake_fd);
	pthread_mutex_destroy(&pep->lock);
	cour_mac_free(pep->mac);
	explicit_bzero(pep->cookie_key, sizeof(pep->cookie_key));
	fi_freeinfo(pep->info);
	cour_ref_dec(&pep->fabric->refcnt);
	free(pep);
	return 0;
}

static int cour_cm_pep_getname(fid_t fid, void *addr, size_t *addrlen)
{
	struct cour_cm_pep *pep = COUR_CONTAINER_OF(fid, struct cour_cm_pep, pep_fid.fid);

	return cour_addr_name_out(&pep->addr, addr, addrlen);
}

static int cour_cm_pep_setname(fid_t fid, void *addr, size_t addrlen)
{
	struct cour_cm_pep *pep = COUR_CONTAINER_OF(fid, struct cour_cm_pep, pep_fid.fid);
	struct cour_addr want, got;
	int fd;

	if (pep->listening)
		return -FI_EOPBADSTATE;
	if (cour_addr_from_sockaddr(&want, addr, addrlen)) {
		COUR_WARN(FI_LOG_EP_CTRL, "fi_setname: not a sockaddr_in/in6\n");
		return -FI_EINVAL;
	}
	want.is_v4 = ((const struct sockaddr *)addr)->sa_family == AF_INET;
	fd = cour_cm_socket(&want, &got);
	if (fd < 0)
		return fd;
	if (pep->fd >= 0)
		close(pep->fd);
	pep->fd = fd;
	pep->addr = got;
	return 0;
}

static int cour_cm_getopt(int optname, void *optval, size_t *optlen)
{
	if (optname != FI_OPT_CM_DATA_SIZE)
		return -FI_ENOPROTOOPT;
	if (!optval || !optlen || *optlen < sizeof(size_t)) {
		if (optlen)
			*optlen = sizeof(size_t);
		return -FI_ETOOSMALL;
	}
	*(size_t *)optval = COUR_CM_DATA_MAX;
	*optlen = sizeof(size_t);
	return 0;
}

static int cour_cm_pep_getopt(fid_t fid, int level, int optname, void *optval, size_t *optlen)
{
	if (level != FI_OPT_ENDPOINT)
		return -FI_ENOPROTOOPT;
	return cour_cm_getopt(optname, optval, optlen);
}

static int cour_cm_pep_setopt(fid_t fid, int level, int optname, const void *optval,
			      size_t optlen)
{
	return -FI_ENOPROTOOPT;
}

static int cour_cm_pep_control(struct fid *fid, int command, void *arg)
{
	struct cour_cm_pep *pep = COUR_CONTAINER_OF(fid, struct cour_cm_pep, pep_fid.fid);

	if (command != FI_BACKLOG || !arg)
		return -FI_ENOSYS;
	if (*(int *)arg <= 0)
		return -FI_EINVAL;
	pthread_mutex_lock(&pep->lock);
	pep->backlog = (size_t)*(int *)arg;
	pthread_mutex_unlock(&pep->lock);
	return 0;
}

static struct fi_ops cour_cm_pep_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = cour_cm_pep_close,
	.bind = cour_cm_pep_bind,
	.control = cour_cm_pep_control,
	.ops_open = cour_no_ops_open,
	.tostr = cour_no_tostr,
	.ops_set = cour_no_ops_set,
};

static struct fi_ops_ep cour_cm_pep_ep_ops = {
	.size = sizeof(struct fi_ops_ep),
	.getopt = cour_cm_pep_getopt,
	.setopt = cour_cm_pep_setopt,
};

static struct fi_ops_cm cour_cm_pep_cm_ops = {
	.size = sizeof(struct fi_ops_cm),
	.setname = cour_cm_pep_setname,
	.getname = cour_cm_pep_getname,
	.getpeer = cour_no_getpeer,
	.connect = cour_no_connect,
	.listen = cour_cm_pep_listen,
	.accept = cour_no_accept,
	.reject = cour_cm_pep_reject,
	.shutdown = cour_no_shutdown,
	.join = cour_no_join,
};

static struct fi_ops cour_connreq_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = cour_connreq_close,
	.bind = cour_no_bind,
	.control = cour_no_control,
	.ops_open = cour_no_ops_open,
	.tostr = cour_no_tostr,
	.ops_set = cour_no_ops_set,
};

/* The passive endpoint's secret: the info's (ep_attr's, else domain_attr's), else the key
 * file's, as the endpoints that connect to it have theirs. */
static int cour_cm_pep_key(struct cour_cm_pep *pep)
{
	void *key;
	size_t len;
	int ret = cour_auth_key(pep->info, true, &key, &len);

	if (ret || !len)
		return ret;
	pep->mac = cour_mac_new(key, len, (uint32_t)cour_params.auth_skew_s);
	cour_auth_key_free(key, len);
	while (getrandom(pep->cookie_key, sizeof(pep->cookie_key), 0) !=
	       (ssize_t)sizeof(pep->cookie_key))
		;
	return pep->mac ? 0 : -FI_ENOMEM;
}

int cour_passive_ep(struct fid_fabric *fabric, struct fi_info *info, struct fid_pep **pep_fid,
		    void *context)
{
	struct cour_fabric *fab = COUR_CONTAINER_OF(fabric, struct cour_fabric, fabric_fid);
	struct cour_addr want;
	struct cour_cm_pep *pep;
	int ret;

	if (!info || !pep_fid || !info->ep_attr || info->ep_attr->type != FI_EP_MSG) {
		COUR_WARN(FI_LOG_EP_CTRL, "fi_passive_ep: needs an FI_EP_MSG info\n");
		return -FI_EINVAL;
	}
	ret = cour_info_check(info);
	if (ret)
		return ret;
	ret = cour_attr_bind_addr(info, &want);
	if (ret)
		return ret;
	pep = calloc(1, sizeof(*pep));
	if (!pep)
		return -FI_ENOMEM;
	pep->info = fi_dupinfo(info);
	pep->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!pep->info || pep->wake_fd < 0) {
		ret = -FI_ENOMEM;
		goto err;
	}
	pep->fd = cour_cm_socket(&want, &pep->addr);
	if (pep->fd < 0) {
		ret = pep->fd;
		goto err;
	}
	ret = cour_cm_pep_key(pep);
	if (ret)
		goto err_fd;
	if (pep->mac && cour_addr_is_wildcard(&pep->addr)) {
		/* (the key's tag covers our address: cour_mac.h) */
		COUR_WARN(FI_LOG_EP_CTRL, "a passive endpoint with a key cannot bind the wildcard "
			  "address: give it a host address\n");
		cour_mac_free(pep->mac);
		ret = -FI_EINVAL;
		goto err_fd;
	}
	pthread_mutex_init(&pep->lock, NULL);
	pep->backlog = COUR_CM_BACKLOG;
	pep->fabric = fab;
	pep->pep_fid.fid.fclass = FI_CLASS_PEP;
	pep->pep_fid.fid.context = context;
	pep->pep_fid.fid.ops = &cour_cm_pep_fi_ops;
	pep->pep_fid.ops = &cour_cm_pep_ep_ops;
	pep->pep_fid.cm = &cour_cm_pep_cm_ops;
	cour_ref_inc(&fab->refcnt);
	*pep_fid = &pep->pep_fid;
	return 0;
err_fd:
	close(pep->fd);
err:
	if (pep->wake_fd >= 0)
		close(pep->wake_fd);
	fi_freeinfo(pep->info);
	free(pep);
	return ret;
}
