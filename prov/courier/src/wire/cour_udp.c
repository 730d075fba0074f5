/*
 * The UDP wire: one non-blocking datagram socket per endpoint, packets batched through
 * sendmmsg/recvmmsg. Unreliable and unordered: the engine's reliability layer runs on top.
 *
 * At MTU 1500 a datagram carries 1.4 KB, and the kernel's cost per datagram (a trip through
 * the stack, the device, the receiver's socket) is what TCP avoids with its 64 KB segments.
 * UDP has the same tools: a flush sends each run of queued datagrams to one address, all of
 * one size but the last, as one UDP GSO call (UDP_SEGMENT: the stack carries the run as one
 * buffer and cuts it at the device, or not at all on veth and loopback), and the socket takes
 * coalesced trains with UDP GRO (UDP_GRO: one buffer and the segment size), which poll splits
 * back into datagrams. Every datagram keeps its own header, so a receiver without GRO, or a
 * path that splits the train, sees ordinary packets. A run stops at FI_COURIER_GSO_SEGS
 * datagrams and 64 KB: the burst TCP's segmentation offload hands a NIC, which switch queues
 * are built for. A kernel or device that refuses GSO turns it off for the socket (logged),
 * and the refused run goes out again as single datagrams.
 *
 * The contract is in cour_wire.h.
 */
#include "util/cour_util.h"
#include "util/cour_params.h"
#include "wire/cour_wire.h"
#include "wire/cour_trace.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <unistd.h>

#include <netinet/udp.h>

#ifndef IP_MTU
#define IP_MTU 14
#endif
#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif
#ifndef SO_RXQ_OVFL
#define SO_RXQ_OVFL 40
#endif

static void cour_udp_sockbuf(int fd, int opt, int force_opt, size_t want)
{
	int v = (int)COUR_MIN(want, (size_t)(1u << 30));

	/* As root the FORCE variant passes the rmem_max/wmem_max ceiling; otherwise take what
	 * the system allows. */
	if (setsockopt(fd, SOL_SOCKET, force_opt, &v, sizeof(v)) == 0)
		return;
	if (setsockopt(fd, SOL_SOCKET, opt, &v, sizeof(v)) != 0)
		COUR_INFO(FI_LOG_EP_CTRL, "setsockopt(%d, %d): %s\n", opt, v, strerror(errno));
}

static void cour_udp_close(struct cour_wire *w);
static int cour_udp_flush(struct cour_wire *w);
static void cour_udp_send_queued(struct cour_wire *w, bool part);

/* GSO and GRO where the kernel has them and the parameters allow; drops at the socket are
 * counted either way. What is in use shows in the statistics (udp_gso, udp_gro). */
static void cour_udp_offloads(struct cour_wire *w, int fd)
{
	int one = 1, seg = 0;
	socklen_t len = sizeof(seg);

	if (setsockopt(fd, SOL_SOCKET, SO_RXQ_OVFL, &one, sizeof(one)))
		COUR_INFO(FI_LOG_EP_CTRL, "SO_RXQ_OVFL: %s (socket drops not counted)\n",
			  strerror(errno));
	w->gso_on = cour_params.udp_gso && cour_params.gso_segs > 1 &&
		    getsockopt(fd, IPPROTO_UDP, UDP_SEGMENT, &seg, &len) == 0;
	w->gro_on = cour_params.udp_gro &&
		    setsockopt(fd, IPPROTO_UDP, UDP_GRO, &one, sizeof(one)) == 0;
	if (cour_params.udp_gso && !w->gso_on)
		COUR_INFO(FI_LOG_EP_CTRL, "UDP GSO unavailable: one system call per batch\n");
	if (cour_params.udp_gro && !w->gro_on)
		COUR_INFO(FI_LOG_EP_CTRL, "UDP GRO unavailable: one datagram per buffer\n");
}

/*
 * ICMP port unreachable is evidence that nothing listens at a peer's address any more (its
 * process died, its host lives): with IP_RECVERR the kernel queues it with the destination we
 * sent to, and the engine weighs it (rx->refused). Every queued error (host or network
 * unreachable, a local EMSGSIZE...) is also posted once on the socket, as the error of the
 * next send or receive: that is when the queue is read, whatever the error, so nothing stays
 * queued to make poll() report POLLERR for ever (the progress thread would spin on it).
 */
static void cour_udp_recverr_on(int fd, bool v4)
{
	int one = 1;

	if (setsockopt(fd, v4 ? IPPROTO_IP : IPPROTO_IPV6, v4 ? IP_RECVERR : IPV6_RECVERR, &one,
		       sizeof(one)))
		COUR_INFO(FI_LOG_EP_CTRL, "IP_RECVERR: %s (dead peers are found by silence only)\n",
			  strerror(errno));
}

static void cour_udp_read_errors(struct cour_wire *w)
{
	for (int n = 0; n < 64; n++) {
		struct sockaddr_storage dst;
		union { char buf[CMSG_SPACE(sizeof(struct sock_extended_err) +
					    sizeof(struct sockaddr_in6))]; struct cmsghdr c; } ctl;
		char data[64];
		struct iovec v = { .iov_base = data, .iov_len = sizeof(data) };
		struct msghdr m = { .msg_name = &dst, .msg_namelen = sizeof(dst), .msg_iov = &v,
				    .msg_iovlen = 1, .msg_control = ctl.buf,
				    .msg_controllen = sizeof(ctl.buf) };
		struct cmsghdr *c;

		if (recvmsg(w->fd, &m, MSG_ERRQUEUE | MSG_DONTWAIT) < 0)
			return;
		for (c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
			const struct sock_extended_err *e = (const void *)CMSG_DATA(c);

			if (!((c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_RECVERR) ||
			      (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_RECVERR)))
				continue;
			if (e->ee_errno == ECONNREFUSED)
				w->rx->refused(w->rx_arg, &dst, m.msg_namelen);
		}
	}
}

/* A send or receive failed with err: read the error queue unless the socket was only full or
 * empty. True for ECONNREFUSED, an ICMP answer to an earlier packet: nothing to warn about,
 * the engine weighs it (other errors are handled as they were before IP_RECVERR). */
static bool cour_udp_sock_error(struct cour_wire *w, int err)
{
	if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR)
		return false;
	cour_udp_read_errors(w);
	return err == ECONNREFUSED;
}

static int cour_udp_open(struct cour_wire *w, const struct cour_addr *want)
{
	struct sockaddr_storage ss;
	socklen_t len;
	char str[80];
	int fd;

	len = (socklen_t)cour_addr_to_sockaddr(want, &ss);
	fd = socket(ss.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		int err = errno;

		COUR_WARN(FI_LOG_EP_CTRL, "socket: %s\n", strerror(err));
		/* out of descriptors is not out of memory: the application can raise its limit */
		if (err == EMFILE || err == ENFILE)
			return -FI_EMFILE;
		return -FI_ENOMEM;
	}
	if (w->connect_to) {
		int one = 1;

		setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	}
	if (bind(fd, (struct sockaddr *)&ss, len) != 0) {
		int err = errno;
		COUR_WARN(FI_LOG_EP_CTRL, "bind %s: %s\n", cour_addr_str(want, str, sizeof(str)),
			  strerror(err));
		close(fd);
		return err == EADDRINUSE ? -FI_EADDRINUSE :
		       err == EADDRNOTAVAIL ? -FI_EADDRNOTAVAIL : -FI_EINVAL;
	}
	if (w->connect_to) {
		/* a connected socket outranks the listener's for its peer's datagrams */
		struct sockaddr_storage peer;
		socklen_t plen = (socklen_t)cour_addr_to_sockaddr(w->connect_to, &peer);

		if (connect(fd, (struct sockaddr *)&peer, plen) != 0) {
			int err = errno;

			COUR_WARN(FI_LOG_EP_CTRL, "connect %s: %s\n",
				  cour_addr_str(w->connect_to, str, sizeof(str)), strerror(err));
			close(fd);
			return -FI_EINVAL;
		}
	}
	cour_udp_recverr_on(fd, ss.ss_family == AF_INET);
	cour_udp_sockbuf(fd, SO_SNDBUF, SO_SNDBUFFORCE, cour_params.sockbuf);
	cour_udp_sockbuf(fd, SO_RCVBUF, SO_RCVBUFFORCE, cour_params.sockbuf);
	cour_udp_offloads(w, fd);

	w->bound_len = sizeof(w->bound_sa);
	if (getsockname(fd, (struct sockaddr *)&w->bound_sa, &w->bound_len) != 0 ||
	    cour_addr_from_sockaddr(&w->addr, &w->bound_sa, w->bound_len) != 0) {
		COUR_WARN(FI_LOG_EP_CTRL, "getsockname: %s\n", strerror(errno));
		close(fd);
		return -FI_EOTHER;
	}
	/* The app spoke IPv4 (or not): answer in the same family as it asked. */
	w->addr.is_v4 = want->is_v4;
	w->fd = fd;
	w->tx_count = w->pack_used = 0;
	w->pack_open = UINT32_MAX;

	if (cour_wire_rxbufs_init(w)) {
		cour_udp_close(w);
		return -FI_ENOMEM;
	}
	COUR_INFO(FI_LOG_EP_CTRL, "endpoint bound to %s\n",
		  cour_addr_str(&w->addr, str, sizeof(str)));
	return 0;
}

static void cour_udp_close(struct cour_wire *w)
{
	cour_wire_rxbufs_fini(w);
	free(w->pack_arena);
	w->pack_arena = NULL;
	w->pack_open = UINT32_MAX;
	w->tx_count = 0;        /* (what was queued is lost, as on any wire) */
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
}

/*
 * Largest datagram (our header included) worth sending to addr: the route's MTU, so that IP
 * never fragments (one lost fragment would cost the whole datagram). 0: this endpoint's
 * address cannot send there at all (bound to loopback, the peer on another host): connect()
 * on a probe socket bound like ours asks the routing table and sends nothing. Slow path: once
 * per peer.
 */
static uint32_t cour_udp_peer_mtu(struct cour_wire *w, const struct cour_addr *addr)
{
	struct cour_addr mine = w->addr;
	struct sockaddr_storage ss, me;
	socklen_t len = (socklen_t)cour_addr_to_sockaddr(addr, &ss), me_len;
	int mtu = 0, fd, err = 0;
	socklen_t olen = sizeof(mtu);
	uint32_t ip_udp = addr->is_v4 ? 28 : 48;

	/* a key's trailer comes on top of what the engine sends */
	uint32_t trl = w->mac ? COUR_MAC_LEN : 0;

	if (cour_addr_is_loopback(addr))
		return (cour_params.mtu ? (uint32_t)cour_params.mtu : COUR_WIRE_DGRAM_MAX) - trl;
	mine.port = 0;
	me_len = (socklen_t)cour_addr_to_sockaddr(&mine, &me);
	fd = socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd >= 0) {
		if (bind(fd, (struct sockaddr *)&me, me_len) || connect(fd, (struct sockaddr *)&ss, len))
			err = errno;
		else
			getsockopt(fd, ss.ss_family == AF_INET ? IPPROTO_IP : IPPROTO_IPV6,
				   ss.ss_family == AF_INET ? IP_MTU : IPV6_MTU, &mtu, &olen);
		close(fd);
	}
	if (err == EINVAL || err == ENETUNREACH || err == EAFNOSUPPORT || err == EADDRNOTAVAIL)
		return 0;
	if (cour_params.mtu)
		return (uint32_t)cour_params.mtu - trl;
	if (mtu <= (int)ip_udp + 512)
		return 1500 - ip_udp - trl;
	return (uint32_t)COUR_MIN((uint32_t)mtu - ip_udp, (uint32_t)COUR_WIRE_DGRAM_MAX) - trl;
}

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
		if (size > limit || start + size > COUR_WIRE_PACK_ARENA)
			return false;
		if (!w->pack_arena && !(w->pack_arena = malloc(COUR_WIRE_PACK_ARENA)))
			return false;
		p = w->pack_arena + start;
		memset(p, 0, COUR_WIRE_PACK_HDR);
		p[0] = (char)COUR_WIRE_PACK_MARK;
		cour_udp_pack_copy(p + COUR_WIRE_PACK_HDR, w->tx_iov[last][0].iov_base,
				   w->tx_iov[last][0].iov_len, &w->tx_iov[last][1],
				   m->msg_iovlen - 1, first);
		w->pack_lens[0] = (uint16_t)first;
		w->pack_n = 1;
		w->pack_open = last;
		w->tx_iov[last][0].iov_base = p;
		m->msg_iovlen = 1;
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

static void cour_udp_queue(struct cour_wire *w, const void *sa, socklen_t sa_len,
			   const void *hdr, size_t hdr_len, const struct iovec *iov, size_t iovcnt,
			   uint32_t pack)
{
	uint32_t i;
	size_t len = hdr_len;
	struct msghdr *m;

	assert(iovcnt <= COUR_WIRE_IOV_MAX && hdr_len <= COUR_WIRE_HDR_MAX);
	for (size_t k = 0; k < iovcnt; k++)
		len += iov[k].iov_len;
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

/* How many queued datagrams from first on go out as one GSO call: same address, the size of
 * the first (the last of the run may be shorter), within the segment and byte bounds. */
static uint32_t cour_udp_run(const struct cour_wire *w, uint32_t first)
{
	uint32_t size = w->tx_len[first], bytes = size, i = first + 1;
	uint32_t max = cour_udp_segs_max();

	if (!w->gso_on)
		return 1;
	while (i < w->tx_count && i - first < max && w->tx_len[i] <= size &&
	       bytes + w->tx_len[i] <= COUR_WIRE_GSO_BYTES &&
	       cour_udp_same_dest(&w->tx_msgs[first].msg_hdr, &w->tx_msgs[i].msg_hdr)) {
		bytes += w->tx_len[i];
		if (w->tx_len[i++] < size)
			break;
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

static int cour_udp_flush(struct cour_wire *w)
{
	cour_udp_send_queued(w, false);
	return 0;
}

static int cour_udp_send_now(struct cour_wire *w, const void *sa,
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
 * batches.
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
 * the genuine piece belongs, and is dropped.
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
	for (size_t i = 0; i < nseg; i++) {
		size_t seg = COUR_MIN(gso, len - i * gso);
		char *at = dst + i * plen;

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
		size_t gso2 = cour_udp_rx_ctl(w, &m);
		if (gso2 >= (size_t)got)
			gso2 = 0;
		if (COUR_UNLIKELY(w->trace))
			cour_trace_udp_rcvd(w, &m, (size_t)got, gso2);
		if (m.msg_flags & MSG_TRUNC) {
			w->stats.rx_pkts++;
			cour_wire_drop(w, "larger than any courier packet");
			continue;
		}
		if (!dst) {
			w->rx_bufs[0] = cour_udp_deliver(w, buf, (size_t)got, (uint32_t)gso2,
							 &w->rx_sa[0], m.msg_namelen);
		} else if (got != len || gso2 != gso) {
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
	if (n && !placed)
		w->rx_direct = false;
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

static int cour_udp_poll(struct cour_wire *w)
{
	int n, i;

	if (COUR_UNLIKELY(w->stamps_want != w->stamps_on))
		cour_udp_stamps(w);

	if (w->rx_direct)
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
	w->rx_direct = false;
	for (i = 0; i < n; i++) {
		struct msghdr *m = &w->rx_msgs[i].msg_hdr;
		uint32_t gso = cour_udp_rx_ctl(w, m);

		if (COUR_UNLIKELY(w->trace))
			cour_trace_udp_rcvd(w, m, w->rx_msgs[i].msg_len, gso);
		if (m->msg_flags & MSG_TRUNC) {
			w->stats.rx_pkts++;
			cour_wire_drop(w, "larger than any courier packet");
			continue;
		}
		w->rx_bufs[i] = cour_udp_deliver(w, w->rx_bufs[i], w->rx_msgs[i].msg_len, gso,
						 &w->rx_sa[i], m->msg_namelen);
	}
	return n;
}

static void cour_udp_send_raw(struct cour_wire *w, const void *sa, socklen_t sa_len,
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

const struct cour_wire_ops cour_udp_wire = {
	.name = "udp",
	.open = cour_udp_open,
	.close = cour_udp_close,
	.queue = cour_udp_queue,
	.flush = cour_udp_flush,
	.poll = cour_udp_poll,
	.send_now = cour_udp_send_now,
	.send_raw = cour_udp_send_raw,
	.peer_mtu = cour_udp_peer_mtu,
};
