/*
 * The UDP wire's sending side: the batch a flush hands to the kernel, packed datagrams, GSO
 * runs through sendmmsg, and the sends that go out at once (send_now, send_raw). The socket's
 * setup and the ops table are in cour_udp.c, the receive path in cour_udp_rx.c.
 */
#include "util/cour_util.h"
#include "util/cour_params.h"
#include "wire/cour_wire.h"
#include "wire/cour_trace.h"
#include "wire/cour_udp_int.h"

#include <netinet/in.h>
#include <stdlib.h>

static void cour_udp_send_queued(struct cour_wire *w, bool part);
static bool cour_udp_same_dest(const struct msghdr *a, const struct msghdr *b);

/* Is queue entry i a pack (its bytes in the arena) rather than a header copy and payload? */
static bool cour_udp_is_pack(const struct cour_wire *w, uint32_t i)
{
	return w->tx_iov[i][0].iov_base != (const void *)w->tx_hdrs[i];
}

/* The open pack gets its count and length table: it is final. */
static void cour_udp_pack_close(struct cour_wire *w)
{
	uint32_t i = w->pack_open;
	char *p;
	size_t len;
	uint16_t n = (uint16_t)w->pack_n;

	if (i == UINT32_MAX)
		return;
	p = w->tx_iov[i][0].iov_base;
	len = w->tx_iov[i][0].iov_len;
	memcpy(p + 2, &n, sizeof(n));
	memcpy(p + len - 2 * (size_t)n, w->pack_lens, 2 * (size_t)n);
	w->tx_pack[i] = 0;      /* (kept for the next flush, it stays as it is) */
	w->pack_open = UINT32_MAX;
}

/* Copy one datagram (header, then payload) to at, zero-padded to a multiple of 8. */
static void cour_udp_pack_copy(char *at, const void *hdr, size_t hdr_len,
			       const struct iovec *iov, size_t iovcnt, size_t len)
{
	memcpy(at, hdr, hdr_len);
	at += hdr_len;
	for (size_t k = 0; k < iovcnt; k++) {
		memcpy(at, iov[k].iov_base, iov[k].iov_len);
		at += iov[k].iov_len;
	}
	memset(at, 0, cour_wire_pad8(len) - len);
}

/* Entry i's datagram (len bytes, no trailer) copied into the arena at start as the first
 * packet of a pack whose byte 1 is flags, and the entry pointed there: the pack, or NULL
 * (no arena). The caller writes the count and the length table. */
static char *cour_udp_pack_open(struct cour_wire *w, uint32_t i, size_t start, size_t len,
				uint8_t flags)
{
	struct msghdr *m = &w->tx_msgs[i].msg_hdr;
	char *p;

	if (!w->pack_arena && !(w->pack_arena = malloc(COUR_WIRE_PACK_ARENA)))
		return NULL;
	p = w->pack_arena + start;
	memset(p, 0, COUR_WIRE_PACK_HDR);
	p[0] = (char)COUR_WIRE_PACK_MARK;
	p[1] = (char)flags;
	cour_udp_pack_copy(p + COUR_WIRE_PACK_HDR, w->tx_iov[i][0].iov_base,
			   w->tx_iov[i][0].iov_len, &w->tx_iov[i][1], m->msg_iovlen - 1, len);
	w->tx_iov[i][0].iov_base = p;
	m->msg_iovlen = 1;
	return p;
}

/*
 * Put a datagram of len bytes into the pack that the queue's last entry is or becomes, if it
 * goes to the same address, both may be packed, and it fits: true when it joined. The last
 * entry is unsent, so unsigned: its bytes are still header and payload.
 */
static bool cour_udp_pack_join(struct cour_wire *w, const void *sa, socklen_t sa_len,
			       const void *hdr, size_t hdr_len, const struct iovec *iov,
			       size_t iovcnt, size_t len, uint32_t pack)
{
	uint32_t last = w->tx_count - 1, limit = COUR_MIN(pack, w->tx_pack[last]);
	struct msghdr want = { .msg_name = (void *)sa, .msg_namelen = sa_len };
	struct msghdr *m = &w->tx_msgs[last].msg_hdr;
	size_t size, start;
	char *p;

	limit = COUR_MIN(limit, (uint32_t)COUR_WIRE_PACK_BYTES);
	if (!cour_udp_same_dest(m, &want))
		return false;
	if (w->pack_open == last) {
		size = w->tx_iov[last][0].iov_len + cour_wire_pad8(len) + 2;
		start = (size_t)((char *)w->tx_iov[last][0].iov_base - w->pack_arena);
		if (w->pack_n == COUR_WIRE_PACK_CNT || size > limit ||
		    start + size > COUR_WIRE_PACK_ARENA)
			return false;
		p = (char *)w->tx_iov[last][0].iov_base + w->tx_iov[last][0].iov_len -
		    2 * (size_t)w->pack_n;
	} else {
		/* the last entry, alone so far, opens a pack */
		size_t first = w->tx_len[last] - (w->mac ? COUR_MAC_LEN : 0);

		start = cour_wire_pad8(w->pack_used);
		size = COUR_WIRE_PACK_HDR + cour_wire_pad8(first) + cour_wire_pad8(len) + 4;
		if (size > limit || start + size > COUR_WIRE_PACK_ARENA ||
		    !(p = cour_udp_pack_open(w, last, start, first, 0)))
			return false;
		w->pack_lens[0] = (uint16_t)first;
		w->pack_n = 1;
		w->pack_open = last;
		w->tx_pack[last] = limit;
		w->stats.packs++;
		w->stats.packed++;
		p += COUR_WIRE_PACK_HDR + cour_wire_pad8(first);
	}
	cour_udp_pack_copy(p, hdr, hdr_len, iov, iovcnt, len);
	w->pack_lens[w->pack_n++] = (uint16_t)len;
	w->tx_iov[last][0].iov_len = size;
	w->tx_len[last] = (uint32_t)size + (w->mac ? COUR_MAC_LEN : 0);
	w->pack_used = (uint32_t)(start + size);
	w->stats.packed++;
	return true;
}

void cour_udp_queue(struct cour_wire *w, const void *sa, socklen_t sa_len,
		    const void *hdr, size_t hdr_len, const struct iovec *iov, size_t iovcnt,
		    uint32_t pack)
{
	uint32_t i;
	size_t len = hdr_len;
	struct msghdr *m;

	assert(iovcnt <= COUR_WIRE_IOV_MAX && hdr_len <= COUR_WIRE_HDR_MAX);
	for (size_t k = 0; k < iovcnt; k++)
		len += iov[k].iov_len;
	bool join = pack != 0;

	if (len > COUR_WIRE_PACK_PKT)
		pack = 0;
	w->stats.tx_pkts++;
	w->stats.tx_bytes += len - hdr_len;
	if (pack && w->tx_count && w->tx_pack[w->tx_count - 1] &&
	    cour_udp_pack_join(w, sa, sa_len, hdr, hdr_len, iov, iovcnt, len, pack))
		return;
	cour_udp_pack_close(w);
	if (w->tx_count == COUR_WIRE_TX_BATCH)
		cour_udp_send_queued(w, true);
	i = w->tx_count++;
	w->tx_len[i] = (uint32_t)len + (w->mac ? COUR_MAC_LEN : 0);
	w->tx_pack[i] = pack;
	w->tx_join[i] = join;
	memcpy(w->tx_hdrs[i], hdr, hdr_len);
	w->tx_iov[i][0].iov_base = w->tx_hdrs[i];
	w->tx_iov[i][0].iov_len = hdr_len;
	if (iovcnt)
		memcpy(&w->tx_iov[i][1], iov, iovcnt * sizeof(*iov));
	m = &w->tx_msgs[i].msg_hdr;
	m->msg_name = (void *)sa;
	m->msg_namelen = sa_len;
	m->msg_iov = w->tx_iov[i];
	m->msg_iovlen = iovcnt + 1;      /* (signed when it leaves: cour_udp_out) */
	m->msg_control = NULL;
	m->msg_controllen = 0;
	m->msg_flags = 0;
}

static bool cour_udp_same_dest(const struct msghdr *a, const struct msghdr *b)
{
	return a->msg_name == b->msg_name ||
	       (a->msg_namelen == b->msg_namelen &&
		memcmp(a->msg_name, b->msg_name, a->msg_namelen) == 0);
}

/* Datagrams per GSO call at most, whatever their size. */
static uint32_t cour_udp_segs_max(void)
{
	return (uint32_t)COUR_MIN(cour_params.gso_segs, (size_t)COUR_WIRE_TX_BATCH);
}

/* The most datagrams of first's size one GSO call may carry. */
static uint32_t cour_udp_run_max(const struct cour_wire *w, uint32_t first)
{
	return COUR_MIN(cour_udp_segs_max(), COUR_WIRE_GSO_BYTES / w->tx_len[first]);
}

/*
 * Entry i, shorter than size, made a packed datagram of exactly size bytes (the rest zeros,
 * COUR_WIRE_PACK_PADDED), so that the GSO run from first goes on past it. A message's last
 * datagram is short, and a run cut there sends each message of a stream in GSO calls of its
 * own: the kernel's cost is per call and per train on both sides, so a stream of 8 KiB
 * messages at MTU 1500 (6 datagrams each) moved half what runs of 44 move (cour_bw between
 * two namespaces: 1.1-1.3 against 2.2 GB/s). Only where a datagram of size for the same
 * address follows that may join (the engine's say: the piece of a message no longer than a
 * run), both fit in the run, and the zeros cost at most an eighth of the run's bytes. The
 * receiver reads the run's first message into place and the rest of the train through a
 * packet buffer: worth it for messages that would leave in short runs of their own, not for
 * those that fill runs (128 KiB at MTU 1500: 0.77x), nor at bigger segments
 * (COUR_WIRE_PAD_RUN).
 */
static bool cour_udp_pad(struct cour_wire *w, uint32_t first, uint32_t i, uint32_t size,
			 uint32_t bytes)
{
	size_t tl = w->mac ? COUR_MAC_LEN : 0, len = w->tx_len[i] - tl, out = size - tl;
	size_t start = cour_wire_pad8(w->pack_used);
	uint16_t n = 1, l = (uint16_t)len;
	char *p;

	if (!cour_params.udp_pack || size * COUR_WIRE_PAD_RUN > COUR_WIRE_GSO_BYTES ||
	    i + 1 >= w->tx_count || w->tx_len[i + 1] != size || !w->tx_join[i + 1] ||
	    i + 2 - first > cour_udp_segs_max() || bytes + 2 * size > COUR_WIRE_GSO_BYTES ||
	    (size - w->tx_len[i]) * 8 > bytes + size || cour_udp_is_pack(w, i) ||
	    COUR_WIRE_PACK_HDR + cour_wire_pad8(len) + 2 > out ||
	    start + out > COUR_WIRE_PACK_ARENA ||
	    !cour_udp_same_dest(&w->tx_msgs[first].msg_hdr, &w->tx_msgs[i + 1].msg_hdr))
		return false;
	if (!(p = cour_udp_pack_open(w, i, start, len, COUR_WIRE_PACK_PADDED)))
		return false;
	memcpy(p + 2, &n, sizeof(n));
	memset(p + COUR_WIRE_PACK_HDR + cour_wire_pad8(len), 0,
	       out - COUR_WIRE_PACK_HDR - cour_wire_pad8(len) - 2);
	memcpy(p + out - 2, &l, sizeof(l));
	w->tx_iov[i][0].iov_len = out;
	w->tx_len[i] = size;
	w->tx_pack[i] = 0;
	w->pack_used = (uint32_t)(start + out);
	w->stats.pads++;
	return true;
}

/* How many queued datagrams from first on go out as one GSO call: same address, the size of
 * the first (the last of the run may be shorter, or one shorter is padded), within the
 * segment and byte bounds. */
static uint32_t cour_udp_run(struct cour_wire *w, uint32_t first)
{
	uint32_t size = w->tx_len[first], bytes = size, i = first + 1;
	uint32_t max = cour_udp_segs_max();

	if (!w->gso_on)
		return 1;
	while (i < w->tx_count && i - first < max && w->tx_len[i] <= size &&
	       bytes + w->tx_len[i] <= COUR_WIRE_GSO_BYTES &&
	       cour_udp_same_dest(&w->tx_msgs[first].msg_hdr, &w->tx_msgs[i].msg_hdr)) {
		if (w->tx_len[i] < size && !cour_udp_pad(w, first, i, size, bytes))
			return i + 1 - first;
		bytes += w->tx_len[i++];
	}
	return i - first;
}

/* out_msgs[k] := the run of segs datagrams from first: itself when alone, else their
 * iovecs back to back with UDP_SEGMENT = the first's size. */
static void cour_udp_out(struct cour_wire *w, uint32_t k, uint32_t first, uint32_t segs,
			 struct iovec **iov_free)
{
	struct msghdr *m = &w->out_msgs[k].msg_hdr;
	struct cmsghdr *c;

	/* with a key each datagram is signed now that it is final (a pack grows until then);
	 * the runs of one flush are disjoint, so each is signed once */
	for (uint32_t i = first; w->mac && i < first + segs; i++) {
		struct msghdr *d = &w->tx_msgs[i].msg_hdr;

		d->msg_iovlen = cour_wire_sign(w, d->msg_name, d->msg_namelen, w->tx_iov[i],
					       d->msg_iovlen, &w->tx_trl[i]);
	}
	w->out_first[k] = first;
	w->out_segs[k] = segs;
	*m = w->tx_msgs[first].msg_hdr;
	if (segs == 1)
		return;
	m->msg_iov = *iov_free;
	m->msg_iovlen = 0;
	for (uint32_t i = first; i < first + segs; i++) {
		const struct msghdr *d = &w->tx_msgs[i].msg_hdr;

		memcpy(m->msg_iov + m->msg_iovlen, d->msg_iov, d->msg_iovlen * sizeof(struct iovec));
		m->msg_iovlen += d->msg_iovlen;
	}
	*iov_free += m->msg_iovlen;
	m->msg_control = w->out_ctl[k].buf;
	m->msg_controllen = sizeof(w->out_ctl[k].buf);
	c = CMSG_FIRSTHDR(m);
	c->cmsg_level = IPPROTO_UDP;
	c->cmsg_type = UDP_SEGMENT;
	c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
	*(uint16_t *)(void *)CMSG_DATA(c) = (uint16_t)w->tx_len[first];
	w->stats.gso_sends++;
	w->stats.gso_segs += segs;
}

/* A GSO call the kernel refused as such (no checksum offload on the device, an old kernel):
 * GSO goes off for this socket, and the run is sent again datagram by datagram. */
static bool cour_udp_gso_refused(struct cour_wire *w, uint32_t k, int err)
{
	uint32_t first = w->out_first[k], segs = w->out_segs[k], done = 0;

	if (segs == 1 || (err != EIO && err != EINVAL && err != EOPNOTSUPP &&
			  err != ENOPROTOOPT && err != EMSGSIZE))
		return false;
	if (w->gso_on)
		COUR_WARN(FI_LOG_EP_DATA, "UDP GSO refused (%s): sending datagram by datagram\n",
			  strerror(err));
	w->gso_on = false;
	while (done < segs) {
		int ret = sendmmsg(w->fd, &w->tx_msgs[first + done], segs - done, 0);

		if (ret > 0 && COUR_UNLIKELY(w->trace))
			cour_trace_udp_sent_mmsg(w, &w->tx_msgs[first + done], (unsigned)ret);
		if (ret > 0)
			done += (uint32_t)ret;
		else if (ret < 0 && errno == EINTR)
			continue;
		else
			break;     /* the retransmit timer has the rest */
	}
	return true;
}

/* Move the queued datagrams from first on (never sent, so unsigned) to the front of the
 * queue. A pack's bytes stay where they are in the arena. */
static void cour_udp_keep(struct cour_wire *w, uint32_t first)
{
	uint32_t k = 0;

	for (uint32_t i = first; i < w->tx_count; i++, k++) {
		bool pack = cour_udp_is_pack(w, i);

		w->tx_len[k] = w->tx_len[i];
		w->tx_pack[k] = w->tx_pack[i];
		w->tx_join[k] = w->tx_join[i];
		if (!pack)
			memcpy(w->tx_hdrs[k], w->tx_hdrs[i], w->tx_iov[i][0].iov_len);
		memcpy(w->tx_iov[k], w->tx_iov[i], w->tx_msgs[i].msg_hdr.msg_iovlen *
		       sizeof(struct iovec));
		if (!pack)
			w->tx_iov[k][0].iov_base = w->tx_hdrs[k];
		w->tx_msgs[k] = w->tx_msgs[i];
		w->tx_msgs[k].msg_hdr.msg_iov = w->tx_iov[k];
	}
	w->tx_count = k;
}

/* Hand the queue to the kernel. With part, the queue is full mid-build: a last run that
 * could still grow (it ends at the queue's end with a full-size datagram, below the run's
 * bounds) stays queued to be continued, so a stream leaves in whole GSO runs (44 datagrams
 * at MTU 1500) instead of runs cut at the queue's end (44 + 20 for 64 queued). */
static void cour_udp_send_queued(struct cour_wire *w, bool part)
{
	struct iovec *iov_free = w->out_iov;
	uint32_t n = 0, done = 0, keep = w->tx_count;
	int ret;

	if (!w->tx_count)
		return;
	cour_udp_pack_close(w);
	for (uint32_t first = 0; first < w->tx_count; n++) {
		uint32_t segs = cour_udp_run(w, first);

		if (part && n && first + segs == w->tx_count && segs > 1 &&
		    w->tx_len[w->tx_count - 1] == w->tx_len[first] &&
		    segs < cour_udp_run_max(w, first)) {
			keep = first;
			break;
		}
		cour_udp_out(w, n, first, segs, &iov_free);
		first += segs;
	}
	while (done < n) {
		ret = sendmmsg(w->fd, &w->out_msgs[done], n - done, 0);
		if (ret > 0 && COUR_UNLIKELY(w->trace))
			cour_trace_udp_sent_mmsg(w, &w->out_msgs[done], (unsigned)ret);
		if (ret > 0) {
			done += (uint32_t)ret;
			continue;
		}
		if (ret < 0 && errno == EINTR)
			continue;
		/* EAGAIN (socket full) or a transient error such as ECONNREFUSED from an earlier
		 * ICMP: the unsent packets are in their peers' windows and the retransmit timer
		 * will resend them. Skip the one that failed so one bad destination cannot block
		 * the batch. */
		if (ret < 0) {
			int e = errno;

			if (cour_udp_gso_refused(w, done, e)) {
				done++;
				continue;
			}
			if (!cour_udp_sock_error(w, e) && e != EAGAIN && e != EWOULDBLOCK)
				COUR_WARN(FI_LOG_EP_DATA, "sendmmsg: %s\n", strerror(e));
		}
		w->tx_blocked = true;
		done++;
	}
	if (keep < w->tx_count) {
		cour_udp_keep(w, keep);
	} else {
		w->tx_count = 0;
		w->pack_used = 0;
	}
}

int cour_udp_flush(struct cour_wire *w)
{
	cour_udp_send_queued(w, false);
	return 0;
}

int cour_udp_send_now(struct cour_wire *w, const void *sa,
		      socklen_t sa_len, const void *hdr, size_t hdr_len,
		      const struct iovec *iov, size_t iovcnt)
{
	struct cour_wire_msg msg;

	cour_wire_msghdr(&msg, sa, sa_len, hdr, hdr_len, iov, iovcnt);
	msg.m.msg_iovlen = cour_wire_sign(w, sa, sa_len, msg.v, iovcnt + 1, &msg.t);
	w->stats.tx_pkts++;
	while (sendmsg(w->fd, &msg.m, 0) < 0) {
		int e = errno;

		if (e == EINTR)
			continue;
		if (cour_udp_sock_error(w, e) || e == EAGAIN || e == EWOULDBLOCK)
			return -FI_EAGAIN;
		COUR_WARN(FI_LOG_EP_DATA, "sendmsg: %s\n", strerror(e));
		return -FI_EIO;
	}
	if (COUR_UNLIKELY(w->trace))
		cour_trace_udp_sent(w, &msg.m);
	return 0;
}

void cour_udp_send_raw(struct cour_wire *w, const void *sa, socklen_t sa_len,
		       const char *buf, size_t len)
{
	struct iovec v = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr m = { .msg_name = (void *)sa, .msg_namelen = sa_len, .msg_iov = &v,
			    .msg_iovlen = 1 };

	if (sendmsg(w->fd, &m, 0) < 0) {
		int e = errno;

		if (!cour_udp_sock_error(w, e) && e != EAGAIN)
			COUR_DBG(FI_LOG_EP_DATA, "sendto: %s\n", strerror(e));
	} else if (COUR_UNLIKELY(w->trace)) {
		cour_trace_udp_sent(w, &m);
	}
}
