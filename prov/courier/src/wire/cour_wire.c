/*
 * What every wire shares: the lookup by name, the receive batch's buffers, and building one
 * datagram's msghdr.
 */
#include "util/cour_util.h"
#include "wire/cour_wire.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

static const struct cour_wire_ops *const cour_wires[] = {
	&cour_udp_wire,
	&cour_loop_wire,
};

const struct cour_wire_ops *cour_wire_lookup(const char *name)
{
	if (!name || !*name)
		return &cour_udp_wire;
	for (size_t i = 0; i < COUR_ARRAY_SIZE(cour_wires); i++)
		if (!strcmp(cour_wires[i]->name, name))
			return cour_wires[i];
	COUR_WARN(FI_LOG_EP_CTRL, "FI_COURIER_WIRE=%s: no such wire (udp, loop)\n", name);
	return NULL;
}

void cour_wire_init(struct cour_wire *w, const struct cour_wire_ops *ops,
		    const struct cour_wire_rx_ops *rx, void *rx_arg, struct cour_pool *rxbuf_pool,
		    size_t rxbuf_size)
{
	memset(w, 0, offsetof(struct cour_wire, rx_bufs));
	memset(w->rx_bufs, 0, sizeof(w->rx_bufs));
	w->ops = w->base = ops;
	w->fd = w->bell_fd = w->bell_epfd = -1;
	w->rx = rx;
	w->rx_arg = rx_arg;
	w->rxbuf_pool = rxbuf_pool;
	w->rxbuf_size = rxbuf_size;
}

int cour_wire_rxbufs_init(struct cour_wire *w)
{
	w->rx_stale = 0;
	for (int i = 0; i < COUR_WIRE_RX_BATCH; i++) {
		w->rx_bufs[i] = cour_pool_get(w->rxbuf_pool);
		if (!w->rx_bufs[i]) {
			cour_wire_rxbufs_fini(w);
			return -FI_ENOMEM;
		}
	}
	return 0;
}

void cour_wire_rxbufs_fini(struct cour_wire *w)
{
	for (int i = 0; i < COUR_WIRE_RX_BATCH; i++) {
		if (w->rx_bufs[i])
			cour_pool_put(w->rxbuf_pool, w->rx_bufs[i]);
		w->rx_bufs[i] = NULL;
	}
}

void cour_wire_msghdr(struct cour_wire_msg *w, const void *sa, socklen_t sa_len, const void *hdr,
		      size_t hdr_len, const struct iovec *iov, size_t iovcnt)
{
	w->v[0].iov_base = (void *)hdr;
	w->v[0].iov_len = hdr_len;
	if (iovcnt)
		memcpy(&w->v[1], iov, iovcnt * sizeof(*iov));
	memset(&w->m, 0, sizeof(w->m));
	w->m.msg_name = (void *)sa;
	w->m.msg_namelen = sa_len;
	w->m.msg_iov = w->v;
	w->m.msg_iovlen = iovcnt + 1;
}

/* A packed datagram of len bytes (trailer checked and gone) in buf, which stays the wire's:
 * each packet is handed up borrowed, once the whole layout has proved sound (cour_wire.h).
 * Its lengths come from the network, so every one is checked before any packet is used. */
void cour_wire_unpack(struct cour_wire *w, char *buf, size_t len,
		      const struct sockaddr_storage *sa, socklen_t sa_len)
{
	bool borrowed = w->rx_borrowed;
	size_t train = w->rx_train_len, off = COUR_WIRE_PACK_HDR, tbl;
	uint16_t n, l;
	uint32_t zero;

	if (len < COUR_WIRE_PACK_HDR + 2)
		goto bad;
	memcpy(&n, buf + 2, sizeof(n));
	memcpy(&zero, buf + 4, sizeof(zero));
	if ((buf[1] & ~COUR_WIRE_PACK_PADDED) || zero || !n ||
	    len < COUR_WIRE_PACK_HDR + 2 * (size_t)n)
		goto bad;
	tbl = len - 2 * (size_t)n;
	for (uint16_t i = 0; i < n; i++) {
		memcpy(&l, buf + tbl + 2 * (size_t)i, sizeof(l));
		if (!l || off + cour_wire_pad8(l) > tbl)
			goto bad;
		off += cour_wire_pad8(l);
	}
	if (off != tbl && !(buf[1] & COUR_WIRE_PACK_PADDED))
		goto bad;
	w->stats.packs_rcvd++;
	w->stats.rx_pkts += n - 1u;
	w->rx_borrowed = true;
	off = COUR_WIRE_PACK_HDR;
	for (uint16_t i = 0; i < n; i++) {
		memcpy(&l, buf + tbl + 2 * (size_t)i, sizeof(l));
		w->rx_train_len = l;    /* (small packets: no stream of big data) */
		w->rx->packet(w->rx_arg, buf + off, l, sa, sa_len);
		off += cour_wire_pad8(l);
	}
	w->rx_borrowed = borrowed;
	w->rx_train_len = train;
	return;
bad:
	cour_wire_drop(w, "packed datagram whose layout is broken");
}

void cour_wire_drop(struct cour_wire *w, const char *why)
{
	w->stats.rx_bad++;
	COUR_DBG(FI_LOG_EP_DATA, "dropped datagram: %s\n", why);
}

int cour_wire_auth(struct cour_wire *w, const void *key, size_t len, uint32_t skew_s)
{
	struct cour_mac *m = cour_mac_new(key, len, skew_s);

	if (!m)
		return len < COUR_MAC_KEY_MIN || len > COUR_MAC_KEY_MAX ? -FI_EINVAL : -FI_ENOMEM;
	cour_mac_free(w->mac);
	w->mac = m;
	return 0;
}

void cour_wire_auth_fini(struct cour_wire *w)
{
	cour_mac_free(w->mac);
	w->mac = NULL;
}

/* A refusal: counted by the MAC; said with the sender's address, the first and every 1024th */
static void cour_wire_auth_refused(struct cour_mac *m, enum cour_mac_verdict v,
				   const struct sockaddr_storage *sa, socklen_t sa_len)
{
	struct cour_mac_counts c;
	struct cour_addr from;
	char str[80] = "?";

	if (!cour_mac_log_due(m))
		return;
	cour_mac_counts(m, &c);
	if (cour_addr_from_sockaddr(&from, sa, sa_len) == 0)
		cour_addr_str(&from, str, sizeof(str));
	COUR_WARN(FI_LOG_EP_DATA, "datagram from %s dropped: %s (so far %" PRIu64
		  " failed authentication, %" PRIu64 " replayed or stale)\n", str,
		  v == COUR_MAC_FORGED ? "it fails authentication (another key, or none, or "
					 "forged)" :
		  v == COUR_MAC_STALE ? "stamped too far from our clock (a replay, or clocks "
					"further apart than FI_COURIER_AUTH_SKEW)" :
		  "a copy of one already accepted", c.forged, c.replayed);
}

void cour_mac_ends_sa(struct cour_mac_ends *e, const struct cour_addr *self, const void *sa,
		      socklen_t sa_len, bool out)
{
	struct cour_addr a;

	if (cour_addr_from_sockaddr(&a, sa, sa_len) != 0)
		memset(&a, 0, sizeof(a));
	cour_mac_ends_of(e, out ? self : &a, out ? &a : self);
}

void cour_wire_sign_buf(struct cour_wire *w, const void *sa, socklen_t sa_len, void *buf,
			size_t len)
{
	struct cour_mac_ends e;

	cour_mac_ends_sa(&e, &w->addr, sa, sa_len, true);
	cour_mac_sign_buf(w->mac, &e, buf, len);
}

bool cour_mac_accept(struct cour_mac *m, const struct cour_addr *self, const void *buf,
		     size_t *len, const struct sockaddr_storage *sa, socklen_t sa_len)
{
	struct cour_mac_ends e;
	enum cour_mac_verdict v;

	cour_mac_ends_sa(&e, self, sa, sa_len, false);
	v = cour_mac_check_buf(m, &e, buf, *len);

	if (COUR_LIKELY(v == COUR_MAC_OK)) {
		*len -= COUR_MAC_LEN;
		return true;
	}
	cour_wire_auth_refused(m, v, sa, sa_len);
	return false;
}

bool cour_wire_rx_auth(struct cour_wire *w, const void *buf, size_t *len,
		       const struct sockaddr_storage *sa, socklen_t sa_len)
{
	return !w->mac || cour_mac_accept(w->mac, &w->addr, buf, len, sa, sa_len);
}

bool cour_wire_rx_auth_split(struct cour_wire *w, const void *hdr, size_t hdr_len,
			     const void *payload, size_t plen, const struct cour_mac_trailer *t,
			     const struct sockaddr_storage *sa, socklen_t sa_len)
{
	struct iovec v[2] = { { (void *)hdr, hdr_len }, { (void *)payload, plen } };
	struct cour_mac_ends e;
	enum cour_mac_verdict r;

	cour_mac_ends_sa(&e, &w->addr, sa, sa_len, false);
	r = cour_mac_check(w->mac, &e, v, 2, t);

	if (COUR_LIKELY(r == COUR_MAC_OK))
		return true;
	cour_wire_auth_refused(w->mac, r, sa, sa_len);
	return false;
}
