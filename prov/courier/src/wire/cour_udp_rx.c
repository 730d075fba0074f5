/*
 * The UDP wire's receiving side: batch reads through recvmmsg, GRO trains split back into
 * datagrams, and big data read straight into place. The socket's setup and the ops table are
 * in cour_udp.c, the send batching in cour_udp_tx.c.
 */
#include "util/cour_util.h"
#include "util/cour_params.h"
#include "wire/cour_wire.h"
#include "wire/cour_trace.h"
#include "wire/cour_udp_int.h"

#include <netinet/in.h>

/*
 * Big data packets straight into place. A batch read puts every datagram in a packet buffer,
 * and the handler copies the payload on to the receive or the RMA region: for a stream of
 * 64 KB packets, or of GRO trains of 1.4 KB ones, that second copy costs as much as the
 * kernel's. So while such data streams in (rx_direct), each datagram's header is peeked first;
 * when the engine says where its payload belongs (rx->direct: for the engine, an in-order
 * RDATA, WRITE or READ_RESP piece), the datagram is read as header + that place, and
 * rx->placed checks and handles it. A GRO train is read the same way, as header, place,
 * header, place... for as many of its datagrams as the engine expects to continue the same
 * data (the rest into a packet buffer). Two system calls per datagram or train instead of a
 * share of one: worth it only for big ones, so a round that places nothing returns to
 * batches. Nor for a train that comes alone after an empty read and ends its message (a
 * ping-pong's 8 KiB message, say): one batch call and a copy from a buffer still in cache beat
 * the peek and an iovec per header and per payload (veth at MTU 1500: 10.6 against 13.6 us
 * one way for 8 KiB). The engine says when the message goes on (rx_direct_more): its later
 * trains stream in, and in place they move more (cour_bw -S 256k: 1.2x).
 */
/* The control data of one received datagram: the GRO segment size (0: a single datagram),
 * the socket's running count of drops and when the kernel took it. */
static uint32_t cour_udp_rx_ctl(struct cour_wire *w, struct msghdr *m)
{
	uint32_t gso = 0;

	w->rx_stamp_ns = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
		if (c->cmsg_level == IPPROTO_UDP && c->cmsg_type == UDP_GRO) {
			int v;

			memcpy(&v, CMSG_DATA(c), sizeof(v));
			gso = v > 0 ? (uint32_t)v : 0;
		} else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_RXQ_OVFL) {
			uint32_t drops;

			memcpy(&drops, CMSG_DATA(c), sizeof(drops));
			w->stats.sock_drops = drops;
		} else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
			struct timespec ts;

			memcpy(&ts, CMSG_DATA(c), sizeof(ts));
			w->rx_stamp_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
		}
	}
	return gso;
}

/* What a read of len bytes left in m: -1 if the datagram was cut short (longer than any
 * courier packet: counted and dropped), else its GRO segment size (0: one datagram). Either
 * way the capture has it. */
static int64_t cour_udp_rx_took(struct cour_wire *w, struct msghdr *m, size_t len)
{
	uint32_t gso = cour_udp_rx_ctl(w, m);

	if (gso >= len)
		gso = 0;
	if (COUR_UNLIKELY(w->trace))
		cour_trace_udp_rcvd(w, m, len, gso);
	if (m->msg_flags & MSG_TRUNC) {
		w->stats.rx_pkts++;
		cour_wire_drop(w, "larger than any courier packet");
		return -1;
	}
	return gso;
}

/* One buffer read from the socket: a datagram, or a GRO train of them split by the segment
 * size. A train's datagrams share the buffer, so the engine takes them borrowed (it copies
 * what it keeps); a lone datagram's buffer is its to keep. Returns the buffer to read into
 * next. */
static void *cour_udp_deliver(struct cour_wire *w, void *buf, size_t len, uint32_t gso,
			      const struct sockaddr_storage *sa, socklen_t sa_len)
{
	if (!gso || gso >= len) {
		w->stats.rx_pkts++;
		if (COUR_UNLIKELY(w->mac) && !cour_wire_rx_auth(w, buf, &len, sa, sa_len))
			return buf;
		return cour_wire_up(w, buf, len, sa, sa_len);
	}
	w->stats.gro_trains++;
	w->rx_borrowed = true;
	w->rx_train_len = len;
	w->rx_train_us = cour_now_us();
	/* a segment size that is not a multiple of 8 leaves later headers unaligned for the
	 * engine's structs: those go through an aligned buffer */
	void *align = (gso % 8) ? cour_pool_get(w->rxbuf_pool) : NULL;
	for (size_t off = 0; off < len; off += gso) {
		size_t seg = COUR_MIN((size_t)gso, len - off);
		void *pkt = (char *)buf + off;

		w->stats.rx_pkts++;
		w->stats.gro_segs++;
		if (off && align) {
			memcpy(align, pkt, seg);
			pkt = align;
		} else if (off && (gso % 8)) {
			cour_wire_drop(w, "no buffer to align a GRO segment");
			continue;
		}
		if (COUR_UNLIKELY(w->mac) && !cour_wire_rx_auth(w, pkt, &seg, sa, sa_len))
			continue;
		cour_wire_up(w, pkt, seg, sa, sa_len);
	}
	if (align)
		cour_pool_put(w->rxbuf_pool, align);
	w->rx_borrowed = false;
	w->rx_train_len = 0;
	w->rx_train_us = 0;
	return buf;
}

/* The most datagrams of a GRO train read into place (the kernel coalesces at most 64) */
#define COUR_UDP_TRAIN_MAX 64

/* Hand up datagram i of the train in buf (gso bytes apart) from its place in buf, through an
 * aligned buffer where the segment size leaves its header unaligned. checked: its trailer
 * was checked already and len is without it (else, with a key, it is checked here). */
static void cour_udp_train_seg(struct cour_wire *w, char *pkt, size_t len, bool checked,
			       void **align, const struct sockaddr_storage *sa, socklen_t sa_len)
{
	if ((uintptr_t)pkt % 8) {
		if (!*align)
			*align = cour_pool_get(w->rxbuf_pool);
		if (!*align) {
			cour_wire_drop(w, "no buffer to align a GRO segment");
			return;
		}
		memcpy(*align, pkt, len);
		pkt = *align;
	}
	if (!checked && w->mac && !cour_wire_rx_auth(w, pkt, &len, sa, sa_len))
		return;
	cour_wire_up(w, pkt, len, sa, sa_len);
}

/*
 * A GRO train of len bytes in datagrams of gso bytes, the first run of them read as hdrs[i] +
 * place (dst, payloads end to end) + trl[i] (with a key), the rest into buf at their offsets
 * in the train. Which of the first run really continue the data is known only now
 * (rx->in_run): one that does not got its payload in another piece's place, so it is copied
 * into buf, at its offset, before anything is handled (handling a piece can fill the places
 * after it, from held packets it releases). The bytes it left in that place belong to a
 * receive or an RMA write still in progress: the genuine piece overwrites them before anyone
 * may read them. With a key the same holds for a piece whose tag fails: it landed where only
 * the genuine piece belongs, and is dropped. Without a key, each stretch of pieces up to the
 * next one copied out goes to the engine in one call (placed_run), which looks up their
 * sender once; with one, each piece's tag is checked just before it is handled.
 */
static void cour_udp_train_placed(struct cour_wire *w, uint8_t (*hdrs)[COUR_WIRE_HDR_MAX],
				  const struct cour_mac_trailer *trl, char *dst, size_t run,
				  char *buf, size_t len, size_t gso,
				  const struct sockaddr_storage *sa, socklen_t sa_len)
{
	size_t hl = w->rx->hdr_len, tl = w->mac ? COUR_MAC_LEN : 0;
	size_t plen = gso - hl - tl, nseg = (len + gso - 1) / gso;
	bool out[COUR_UDP_TRAIN_MAX] = { false };
	void *align = NULL;

	for (size_t i = 1; i < run; i++) {
		size_t seg = COUR_MIN(gso, len - i * gso);

		if (w->rx->in_run(hdrs[0], hdrs[i], i, plen))
			continue;
		out[i] = true;
		memcpy(buf + i * gso, hdrs[i], hl);
		memcpy(buf + i * gso + hl, dst + i * plen, seg - hl - tl);
		if (tl)
			memcpy(buf + i * gso + seg - tl, &trl[i], tl);
	}
	w->stats.gro_trains++;
	w->rx_borrowed = true;
	w->rx_train_len = len;
	w->rx_train_us = cour_now_us();
	for (size_t i = 0; i < nseg; i++) {
		size_t seg = COUR_MIN(gso, len - i * gso);
		char *at = dst + i * plen;

		/* unkeyed, the pieces up to the next one copied out go to the engine together */
		if (i < run && !out[i] && !tl && w->rx->placed_run) {
			size_t n = 1, k;

			while (i + n < run && !out[i + n])
				n++;
			k = w->rx->placed_run(w->rx_arg, &hdrs[i], n, at, plen,
					      COUR_MIN(gso, len - (i + n - 1) * gso) - hl, sa, sa_len);
			w->stats.rx_pkts += k;
			w->stats.gro_segs += k;
			if (k == n) {
				i += n - 1;
				continue;
			}
			/* piece i + k, refused, is copied out and handled as a datagram */
			i += k;
			seg = COUR_MIN(gso, len - i * gso);
			at = dst + i * plen;
			w->stats.rx_pkts++;
			w->stats.gro_segs++;
			memcpy(buf + i * gso, hdrs[i], hl);
			memcpy(buf + i * gso + hl, at, seg - hl);
			cour_udp_train_seg(w, buf + i * gso, seg, true, &align, sa, sa_len);
			continue;
		}
		w->stats.rx_pkts++;
		w->stats.gro_segs++;
		if (i < run && !out[i]) {
			if (tl && !cour_wire_rx_auth_split(w, hdrs[i], hl, at, seg - hl - tl,
							   &trl[i], sa, sa_len))
				continue;
			/* still where the engine wants it now that the pieces before are in
			 * (one of them may have ended the session, or made this a duplicate) */
			if (w->rx->direct(w->rx_arg, hdrs[i], seg - tl, 0, NULL, sa, sa_len) == at) {
				w->rx->placed(w->rx_arg, hdrs[i], at, seg - tl, true, sa, sa_len);
				continue;
			}
			memcpy(buf + i * gso, hdrs[i], hl);
			memcpy(buf + i * gso + hl, at, seg - hl - tl);
			cour_udp_train_seg(w, buf + i * gso, seg - tl, true, &align, sa, sa_len);
			continue;
		}
		cour_udp_train_seg(w, buf + i * gso, seg, false, &align, sa, sa_len);
	}
	if (align)
		cour_pool_put(w->rxbuf_pool, align);
	w->rx_borrowed = false;
	w->rx_train_len = 0;
	w->rx_train_us = 0;
}

/* Where the payload of the datagram (or GRO train of gso-byte datagrams) of len bytes whose
 * header the wire peeked belongs, or NULL: the engine is asked about the datagrams it would
 * see, without their trailers. */
static char *cour_udp_direct_dst(struct cour_wire *w, const void *hdr, size_t len, size_t gso,
				 size_t *run, const struct sockaddr_storage *sa, socklen_t sa_len)
{
	size_t hl = w->rx->hdr_len, tl = w->mac ? COUR_MAC_LEN : 0;

	if (len < hl + tl + COUR_WIRE_DIRECT_MIN || len > w->rxbuf_size)
		return NULL;
	if (!gso)
		return w->rx->direct(w->rx_arg, hdr, len - tl, 0, NULL, sa, sa_len);
	size_t nseg = (len + gso - 1) / gso, last = len - (nseg - 1) * gso;

	/* (a last datagram too short for a trailer is no courier packet: read it as usual) */
	if (gso <= hl + tl || len > COUR_UDP_TRAIN_MAX * gso || last < hl + tl)
		return NULL;
	return w->rx->direct(w->rx_arg, hdr, len - nseg * tl, gso - tl, run, sa, sa_len);
}

static int cour_udp_poll_direct(struct cour_wire *w)
{
	size_t hl = w->rx->hdr_len, tl = w->mac ? COUR_MAC_LEN : 0;
	int n = 0, placed = 0;

	while (n < COUR_WIRE_RX_BATCH) {
		_Alignas(8) uint8_t hdrs[COUR_UDP_TRAIN_MAX][COUR_WIRE_HDR_MAX];
		struct cour_mac_trailer trl[COUR_UDP_TRAIN_MAX];
		/* (not zeroed: only the first cnt entries are ever read, and this runs per datagram) */
		struct iovec v[3 * COUR_UDP_TRAIN_MAX + 1];

		v[0] = (struct iovec){ .iov_base = hdrs[0], .iov_len = hl };
		struct msghdr m = {
			.msg_name = &w->rx_sa[0], .msg_namelen = sizeof(w->rx_sa[0]),
			.msg_iov = v, .msg_iovlen = 1,
			.msg_control = w->rx_ctl[0].buf, .msg_controllen = sizeof(w->rx_ctl[0].buf),
		};
		ssize_t len = recvmsg(w->fd, &m, MSG_PEEK | MSG_TRUNC | MSG_DONTWAIT);
		size_t gso, run = 1, cnt = 0;
		char *dst = NULL, *buf = w->rx_bufs[0];

		if (len < 0) {
			cour_udp_sock_error(w, errno);
			break;
		}
		n++;
		gso = cour_udp_rx_ctl(w, &m);
		if (gso >= (size_t)len)
			gso = 0;
		dst = cour_udp_direct_dst(w, hdrs[0], (size_t)len, gso, &run, &w->rx_sa[0],
					  m.msg_namelen);
		if (dst && !gso) {
			v[1] = (struct iovec){ .iov_base = dst, .iov_len = (size_t)len - hl - tl };
			v[2] = (struct iovec){ .iov_base = &trl[0], .iov_len = tl };
			cnt = tl ? 3 : 2;
		} else if (dst) {
			run = COUR_MIN(run, (size_t)COUR_UDP_TRAIN_MAX);
			for (size_t i = 0; i < run; i++) {
				size_t seg = COUR_MIN(gso, (size_t)len - i * gso);

				v[cnt++] = (struct iovec){ .iov_base = hdrs[i], .iov_len = hl };
				v[cnt++] = (struct iovec){ .iov_base = dst + i * (gso - hl - tl),
							   .iov_len = seg - hl - tl };
				if (tl)
					v[cnt++] = (struct iovec){ .iov_base = &trl[i],
								   .iov_len = tl };
			}
			if (run * gso < (size_t)len)
				v[cnt++] = (struct iovec){ .iov_base = buf + run * gso,
							   .iov_len = (size_t)len - run * gso };
		} else {
			v[0] = (struct iovec){ .iov_base = buf, .iov_len = w->rxbuf_size };
			cnt = 1;
		}
		m.msg_iovlen = cnt;
		m.msg_namelen = sizeof(w->rx_sa[0]);
		m.msg_control = w->rx_ctl[0].buf;
		m.msg_controllen = sizeof(w->rx_ctl[0].buf);
		m.msg_flags = 0;
		ssize_t got = recvmsg(w->fd, &m, MSG_DONTWAIT);
		if (got < 0)
			break;       /* (only a competing reader could have taken it) */
		int64_t gso2 = cour_udp_rx_took(w, &m, (size_t)got);
		if (gso2 < 0)
			continue;
		if (!dst) {
			w->rx_bufs[0] = cour_udp_deliver(w, buf, (size_t)got, (uint32_t)gso2,
							 &w->rx_sa[0], m.msg_namelen);
		} else if (got != len || (size_t)gso2 != gso) {
			/* the bytes that landed belong to a receive or write still in progress:
			 * the resent packets overwrite them before anyone may read them */
			w->stats.rx_pkts++;
			cour_wire_drop(w, "datagram changed between peek and read");
		} else if (!gso) {
			w->stats.rx_pkts++;
			/* (a forged one landed where only the genuine piece belongs) */
			if (tl && !cour_wire_rx_auth_split(w, hdrs[0], hl, dst,
							   (size_t)got - hl - tl, &trl[0],
							   &w->rx_sa[0], m.msg_namelen))
				continue;
			placed++;
			w->rx->placed(w->rx_arg, hdrs[0], dst, (size_t)got - tl, false,
				      &w->rx_sa[0], m.msg_namelen);
		} else {
			placed++;
			cour_udp_train_placed(w, hdrs, trl, dst, run, buf, (size_t)got, gso,
					      &w->rx_sa[0], m.msg_namelen);
		}
	}
	w->rx_single = !n;
	if (n && !placed)
		w->rx_direct = false;
	return n;
}

/* The doorbell socket (cour_udp.c): a few probes at most, read one at a time into the first
 * batch buffer (whose header every poll sets again) and handed up as any datagram. */
#define COUR_UDP_BELL_READS 16

int cour_udp_bell_poll(struct cour_wire *w)
{
	int n = 0;

	while (w->bell_fd >= 0 && n < COUR_UDP_BELL_READS) {
		struct iovec v = { .iov_base = w->rx_bufs[0], .iov_len = w->rxbuf_size };
		struct msghdr m = {
			.msg_name = &w->rx_sa[0], .msg_namelen = sizeof(w->rx_sa[0]),
			.msg_iov = &v, .msg_iovlen = 1,
			.msg_control = w->rx_ctl[0].buf, .msg_controllen = sizeof(w->rx_ctl[0].buf),
		};
		ssize_t got = recvmsg(w->bell_fd, &m, MSG_DONTWAIT);
		int64_t gso;

		if (got < 0) {
			cour_udp_sock_error(w, errno);  /* (ICMP errors may come here too) */
			break;
		}
		n++;
		w->stats.bell_rcvd++;
		gso = cour_udp_rx_took(w, &m, (size_t)got);
		if (gso < 0)
			continue;
		w->rx_bufs[0] = cour_udp_deliver(w, w->rx_bufs[0], (size_t)got, (uint32_t)gso,
						 &w->rx_sa[0], m.msg_namelen);
		if (!w->rx_bufs[0])
			break;
	}
	return n;
}

/* Arrival times for congestion control (w->stamps_want): a process descheduled for a while
 * is no queue in the network (proto/cour_cc.h). Once on, they stay on. */
static void cour_udp_stamps(struct cour_wire *w)
{
	int one = 1;

	w->stamps_on = w->stamps_want = true;
	if (setsockopt(w->fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one)))
		COUR_INFO(FI_LOG_EP_CTRL, "SO_TIMESTAMPNS: %s (congestion control counts the "
			  "time a datagram waits to be read as queueing)\n", strerror(errno));
}

int cour_udp_poll(struct cour_wire *w)
{
	int n, i;

	if (COUR_UNLIKELY(w->stamps_want != w->stamps_on))
		cour_udp_stamps(w);

	if (w->rx_direct && (!w->rx_single || w->rx_direct_more))
		return cour_udp_poll_direct(w);

	/* Only the headers the last call filled (and the first: the direct path takes its
	 * buffer) need setting again: setting all 64 was most of an empty poll's instructions,
	 * and a polling receiver makes many empty polls between two packets. */
	uint32_t stale = w->rx_stale ? w->rx_stale : COUR_WIRE_RX_BATCH;

	for (i = 0; i < (int)stale; i++) {
		w->rx_iov[i].iov_base = w->rx_bufs[i];
		w->rx_iov[i].iov_len = w->rxbuf_size;
		w->rx_msgs[i].msg_hdr.msg_name = &w->rx_sa[i];
		w->rx_msgs[i].msg_hdr.msg_namelen = sizeof(w->rx_sa[i]);
		w->rx_msgs[i].msg_hdr.msg_iov = &w->rx_iov[i];
		w->rx_msgs[i].msg_hdr.msg_iovlen = 1;
		w->rx_msgs[i].msg_hdr.msg_control = w->rx_ctl[i].buf;
		w->rx_msgs[i].msg_hdr.msg_controllen = sizeof(w->rx_ctl[i].buf);
		w->rx_msgs[i].msg_hdr.msg_flags = 0;
	}
	/* After an empty read the next datagram is most likely alone (a request, an answer):
	 * a batch read that gets one datagram goes on to look for a second, which costs
	 * 150-200 ns on the latency path (loopback: 0.96 against 0.75 us a call). So a read
	 * after an empty one takes one datagram, and a read after one that found data takes a
	 * batch. */
	if (w->rx_single) {
		ssize_t got = recvmsg(w->fd, &w->rx_msgs[0].msg_hdr, MSG_DONTWAIT);

		n = got < 0 ? -1 : 1;
		w->rx_msgs[0].msg_len = got < 0 ? 0 : (unsigned)got;
	} else {
		n = recvmmsg(w->fd, w->rx_msgs, COUR_WIRE_RX_BATCH, MSG_DONTWAIT, NULL);
	}
	w->rx_single = n <= 0;
	w->rx_stale = n > 0 ? (uint32_t)n : 1;  /* (a call that fails writes no header) */
	if (n > 1 && cour_params.cc)
		w->stamps_want = true;          /* a batch: traffic that congestion control sees */
	if (n <= 0) {
		if (n < 0)
			cour_udp_sock_error(w, errno);
		return 0;
	}
	/* the engine says, packet by packet, whether big data streams in (rx_direct) */
	w->rx_direct = w->rx_direct_more = false;
	for (i = 0; i < n; i++) {
		struct msghdr *m = &w->rx_msgs[i].msg_hdr;
		int64_t gso = cour_udp_rx_took(w, m, w->rx_msgs[i].msg_len);

		if (gso < 0)
			continue;
		w->rx_bufs[i] = cour_udp_deliver(w, w->rx_bufs[i], w->rx_msgs[i].msg_len,
						 (uint32_t)gso, &w->rx_sa[i], m->msg_namelen);
	}
	return n;
}
