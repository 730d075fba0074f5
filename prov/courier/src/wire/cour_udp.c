/*
 * The UDP wire: one non-blocking datagram socket per endpoint, packets batched through
 * sendmmsg/recvmmsg. Unreliable and unordered: the engine's reliability layer runs on top.
 *
 * The contract is in cour_wire.h.
 */
#include "cour_ep.h"
#include "proto/cour_rel.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <unistd.h>

#ifndef IP_MTU
#define IP_MTU 14
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

static void cour_udp_close(struct cour_ep *ep);
static int cour_udp_flush(struct cour_ep *ep);

/*
 * ICMP port unreachable is evidence that nothing listens at a peer's address any more (its
 * process died, its host lives): with IP_RECVERR the kernel queues it with the destination we
 * sent to, and the engine weighs it (cour_peer_refused). Every queued error (host or network
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

static void cour_udp_read_errors(struct cour_ep *ep)
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

		if (recvmsg(ep->fd, &m, MSG_ERRQUEUE | MSG_DONTWAIT) < 0)
			return;
		for (c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
			const struct sock_extended_err *e = (const void *)CMSG_DATA(c);

			if (!((c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_RECVERR) ||
			      (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_RECVERR)))
				continue;
			if (e->ee_errno == ECONNREFUSED)
				cour_peer_refused(ep, &dst, m.msg_namelen);
		}
	}
}

/* A send or receive failed with err: read the error queue unless the socket was only full or
 * empty. True for ECONNREFUSED, an ICMP answer to an earlier packet: nothing to warn about,
 * the engine weighs it (other errors are handled as they were before IP_RECVERR). */
static bool cour_udp_sock_error(struct cour_ep *ep, int err)
{
	if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR)
		return false;
	cour_udp_read_errors(ep);
	return err == ECONNREFUSED;
}

static int cour_udp_open(struct cour_ep *ep, const struct cour_addr *want)
{
	struct sockaddr_storage ss;
	socklen_t len;
	char str[80];
	int fd;

	len = (socklen_t)cour_addr_to_sockaddr(want, &ss);
	fd = socket(ss.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		COUR_WARN(FI_LOG_EP_CTRL, "socket: %s\n", strerror(errno));
		return -FI_ENOMEM;
	}
	if (bind(fd, (struct sockaddr *)&ss, len) != 0) {
		int err = errno;
		COUR_WARN(FI_LOG_EP_CTRL, "bind %s: %s\n", cour_addr_str(want, str, sizeof(str)),
			  strerror(err));
		close(fd);
		return err == EADDRINUSE ? -FI_EADDRINUSE :
		       err == EADDRNOTAVAIL ? -FI_EADDRNOTAVAIL : -FI_EINVAL;
	}
	cour_udp_recverr_on(fd, ss.ss_family == AF_INET);
	cour_udp_sockbuf(fd, SO_SNDBUF, SO_SNDBUFFORCE, cour_params.sockbuf);
	cour_udp_sockbuf(fd, SO_RCVBUF, SO_RCVBUFFORCE, cour_params.sockbuf);

	ep->bound_len = sizeof(ep->bound_sa);
	if (getsockname(fd, (struct sockaddr *)&ep->bound_sa, &ep->bound_len) != 0 ||
	    cour_addr_from_sockaddr(&ep->addr, &ep->bound_sa, ep->bound_len) != 0) {
		COUR_WARN(FI_LOG_EP_CTRL, "getsockname: %s\n", strerror(errno));
		close(fd);
		return -FI_EOTHER;
	}
	/* The app spoke IPv4 (or not): answer in the same family as it asked. */
	ep->addr.is_v4 = want->is_v4;
	ep->fd = fd;

	if (cour_wire_rxbufs_init(ep)) {
		cour_udp_close(ep);
		return -FI_ENOMEM;
	}
	COUR_INFO(FI_LOG_EP_CTRL, "endpoint bound to %s\n",
		  cour_addr_str(&ep->addr, str, sizeof(str)));
	return 0;
}

static void cour_udp_close(struct cour_ep *ep)
{
	cour_wire_rxbufs_fini(ep);
	if (ep->fd >= 0)
		close(ep->fd);
	ep->fd = -1;
}

/*
 * Largest datagram (our header included) worth sending to addr: the route's MTU, so that IP
 * never fragments (one lost fragment would cost the whole datagram). 0: this endpoint's
 * address cannot send there at all (bound to loopback, the peer on another host): connect()
 * on a probe socket bound like ours asks the routing table and sends nothing. Slow path: once
 * per peer.
 */
static uint32_t cour_udp_peer_mtu(struct cour_ep *ep, const struct cour_addr *addr)
{
	struct cour_addr mine = ep->addr;
	struct sockaddr_storage ss, me;
	socklen_t len = (socklen_t)cour_addr_to_sockaddr(addr, &ss), me_len;
	int mtu = 0, fd, err = 0;
	socklen_t olen = sizeof(mtu);
	uint32_t ip_udp = addr->is_v4 ? 28 : 48;

	if (cour_addr_is_loopback(addr))
		return cour_params.mtu ? (uint32_t)cour_params.mtu : COUR_MAX_PKT;
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
		return (uint32_t)cour_params.mtu;
	if (mtu <= (int)ip_udp + 512)
		return 1500 - ip_udp;
	return (uint32_t)COUR_MIN((uint32_t)mtu - ip_udp, (uint32_t)COUR_MAX_PKT);
}

void cour_hdr_finish(struct cour_peer *peer, struct cour_pkt_hdr *hdr, size_t hdr_len,
		     const struct iovec *iov, size_t iovcnt)
{
	uint32_t crc;

	if (peer) {
		hdr->base.ack = peer->rx_next;
		hdr->base.sack = 0;
		if (peer->rx_held && peer->rxwin) {
			uint32_t w = (uint32_t)cour_params.window;
			for (uint32_t i = 0; i < cour_sack_span(w); i++) {
				uint32_t s = peer->rx_next + 1 + i;
				if (peer->rxwin[s % w].buf)
					hdr->base.sack = cour_sack_mark(hdr->base.sack,
									peer->rx_next, s);
			}
		}
		hdr->base.credits = peer->credits_granted;
		hdr->base.src_session = peer->local_session;
		hdr->base.dst_session = peer->remote_session;
		peer->credits_sent = peer->credits_granted;
		/* Whatever we send carries the ACK: a pending delayed ACK is no longer needed. */
		peer->ack_needed = false;
		peer->rx_since_ack = 0;
	}
	/* an ACK's payload (a SACK bitmap) and a HELLO's are always checked (cour_pkt_valid) */
	bool pcsum = cour_params.checksum ||
		     (iovcnt && (hdr->base.type == COUR_PKT_ACK || hdr->base.type == COUR_PKT_HELLO));

	hdr->base.version = COUR_WIRE_VERSION;
	if (pcsum)
		hdr->base.flags |= COUR_F_PCSUM;
	hdr->base.crc = 0;
	crc = cour_crc32c(0, hdr, hdr_len);
	if (pcsum)
		for (size_t i = 0; i < iovcnt; i++)
			crc = cour_crc32c(crc, iov[i].iov_base, iov[i].iov_len);
	hdr->base.crc = crc;
}

static void cour_udp_queue(struct cour_ep *ep, struct cour_peer *peer, const struct cour_pkt_hdr *hdr,
		    size_t hdr_len, const struct iovec *iov, size_t iovcnt)
{
	uint32_t i = ep->tx_count;
	struct msghdr *m;

	assert(iovcnt <= COUR_IOV_MAX);
	memcpy(&ep->tx_hdrs[i], hdr, hdr_len);
	cour_hdr_finish(peer, &ep->tx_hdrs[i], hdr_len, iov, iovcnt);
	ep->tx_iov[i][0].iov_base = &ep->tx_hdrs[i];
	ep->tx_iov[i][0].iov_len = hdr_len;
	if (iovcnt)
		memcpy(&ep->tx_iov[i][1], iov, iovcnt * sizeof(*iov));
	m = &ep->tx_msgs[i].msg_hdr;
	m->msg_name = &peer->sa;
	m->msg_namelen = peer->sa_len;
	m->msg_iov = ep->tx_iov[i];
	m->msg_iovlen = iovcnt + 1;
	m->msg_control = NULL;
	m->msg_controllen = 0;
	m->msg_flags = 0;
	ep->tx_peer[i] = peer;
	ep->stats.tx_pkts++;
	for (size_t k = 0; k < iovcnt; k++)
		ep->stats.tx_bytes += iov[k].iov_len;
	if (++ep->tx_count == COUR_TX_BATCH)
		cour_udp_flush(ep);
}

static int cour_udp_flush(struct cour_ep *ep)
{
	uint32_t n = ep->tx_count, done = 0;
	int ret;

	if (!n)
		return 0;
	if (COUR_UNLIKELY(ep->fault)) {
		for (uint32_t i = 0; i < n; i++)
			cour_fault_sendmsg(ep, &ep->tx_msgs[i].msg_hdr);
		ep->tx_count = 0;
		return 0;
	}
	while (done < n) {
		ret = sendmmsg(ep->fd, &ep->tx_msgs[done], n - done, 0);
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

			if (!cour_udp_sock_error(ep, e) && e != EAGAIN && e != EWOULDBLOCK)
				COUR_WARN(FI_LOG_EP_DATA, "sendmmsg: %s\n", strerror(e));
		}
		ep->tx_blocked = true;
		done++;
	}
	ep->tx_count = 0;
	return 0;
}

static int cour_udp_send_now(struct cour_ep *ep, const struct sockaddr_storage *sa, socklen_t sa_len,
		      const void *hdr, size_t hdr_len, const struct iovec *iov, size_t iovcnt)
{
	struct cour_wire_msg w;

	cour_wire_msghdr(&w, sa, sa_len, hdr, hdr_len, iov, iovcnt);
	ep->stats.tx_pkts++;
	if (COUR_UNLIKELY(ep->fault))
		return cour_fault_sendmsg(ep, &w.m);
	while (sendmsg(ep->fd, &w.m, 0) < 0) {
		int e = errno;

		if (e == EINTR)
			continue;
		if (cour_udp_sock_error(ep, e) || e == EAGAIN || e == EWOULDBLOCK)
			return -FI_EAGAIN;
		COUR_WARN(FI_LOG_EP_DATA, "sendmsg: %s\n", strerror(e));
		return -FI_EIO;
	}
	return 0;
}

/*
 * Big data packets straight into place. A batch read puts every datagram in a packet buffer,
 * and the handler copies the payload on to the receive or the RMA region: for a stream of
 * 64 KB packets that second copy costs as much as the kernel's. So while such packets stream
 * in (rx_direct), each datagram's header is peeked first; when the engine says where its
 * payload belongs (an in-order RDATA or WRITE fragment, cour_ep_rx_direct), the datagram is
 * read as header + that place. Two system calls per packet instead of a share of one: worth
 * it only for big packets, so a round that meets none returns to batches.
 */
#define COUR_UDP_DIRECT_MIN 8192      /* payload bytes that make a packet worth reading in place */

/* The checksum of a datagram read as header + payload in place (cour_pkt_valid's, split) */
static bool cour_udp_placed_ok(struct cour_pkt_hdr *hdr, const void *payload, size_t len)
{
	uint32_t want = hdr->base.crc, crc;

	hdr->base.crc = 0;
	crc = cour_crc32c(0, hdr, sizeof(*hdr));
	if (hdr->base.flags & COUR_F_PCSUM)
		crc = cour_crc32c(crc, payload, len - sizeof(*hdr));
	hdr->base.crc = want;
	return crc == want;
}

static int cour_udp_poll_direct(struct cour_ep *ep)
{
	int n = 0, placed = 0;

	while (n < COUR_RX_BATCH) {
		struct cour_pkt_hdr hdr;
		struct iovec v[2] = { { .iov_base = &hdr, .iov_len = sizeof(hdr) } };
		struct msghdr m = {
			.msg_name = &ep->rx_sa[0], .msg_namelen = sizeof(ep->rx_sa[0]),
			.msg_iov = v, .msg_iovlen = 1,
		};
		ssize_t len = recvmsg(ep->fd, &m, MSG_PEEK | MSG_TRUNC | MSG_DONTWAIT);
		void *dst = NULL;

		if (len < 0) {
			cour_udp_sock_error(ep, errno);
			break;
		}
		n++;
		ep->stats.rx_pkts++;
		if ((size_t)len >= sizeof(hdr) + COUR_UDP_DIRECT_MIN && (size_t)len <= COUR_MAX_PKT)
			dst = cour_ep_rx_direct(ep, &hdr, (size_t)len, &ep->rx_sa[0], m.msg_namelen);
		if (dst) {
			v[1].iov_base = dst;
			v[1].iov_len = (size_t)len - sizeof(hdr);
			m.msg_iovlen = 2;
		} else {
			v[0].iov_base = ep->rx_bufs[0];
			v[0].iov_len = ep->rxbuf_size;
		}
		m.msg_namelen = sizeof(ep->rx_sa[0]);
		m.msg_flags = 0;
		ssize_t got = recvmsg(ep->fd, &m, MSG_DONTWAIT);
		if (got < 0)
			break;       /* (only a competing reader could have taken it) */
		if (m.msg_flags & MSG_TRUNC) {
			COUR_DROP_BAD(ep, "larger than any courier packet");
			continue;
		}
		if (dst && got == len && cour_udp_placed_ok(&hdr, dst, (size_t)got)) {
			placed++;
			ep->stats.rx_in_place++;
			cour_ep_rx_placed(ep, &hdr, (size_t)got, &ep->rx_sa[0], m.msg_namelen);
		} else if (dst) {
			/* the bytes that landed belong to a receive still in progress: the resent
			 * packet overwrites them before anyone may read them */
			COUR_DROP_BAD(ep, "payload read in place failed its checksum");
		} else {
			ep->rx_bufs[0] = cour_ep_rx_packet(ep, ep->rx_bufs[0], (size_t)got,
							   &ep->rx_sa[0], m.msg_namelen);
		}
	}
	if (n && !placed)
		ep->rx_direct = false;
	return n;
}

static int cour_udp_poll(struct cour_ep *ep)
{
	int n, i;
	bool big = false;

	if (ep->rx_direct)
		return cour_udp_poll_direct(ep);

	for (i = 0; i < COUR_RX_BATCH; i++) {
		ep->rx_iov[i].iov_base = ep->rx_bufs[i];
		ep->rx_iov[i].iov_len = ep->rxbuf_size;
		ep->rx_msgs[i].msg_hdr.msg_name = &ep->rx_sa[i];
		ep->rx_msgs[i].msg_hdr.msg_namelen = sizeof(ep->rx_sa[i]);
		ep->rx_msgs[i].msg_hdr.msg_iov = &ep->rx_iov[i];
		ep->rx_msgs[i].msg_hdr.msg_iovlen = 1;
		ep->rx_msgs[i].msg_hdr.msg_control = NULL;
		ep->rx_msgs[i].msg_hdr.msg_controllen = 0;
		ep->rx_msgs[i].msg_hdr.msg_flags = 0;
	}
	n = recvmmsg(ep->fd, ep->rx_msgs, COUR_RX_BATCH, MSG_DONTWAIT, NULL);
	if (n <= 0) {
		if (n < 0)
			cour_udp_sock_error(ep, errno);
		return 0;
	}
	for (i = 0; i < n; i++) {
		struct msghdr *m = &ep->rx_msgs[i].msg_hdr;

		ep->stats.rx_pkts++;
		if (m->msg_flags & MSG_TRUNC) {
			COUR_DROP_BAD(ep, "larger than any courier packet");
			continue;
		}
		big |= ep->rx_msgs[i].msg_len >= COUR_PKT_HDR_LEN + COUR_UDP_DIRECT_MIN &&
		       (((struct cour_base_hdr *)ep->rx_bufs[i])->type == COUR_PKT_RDATA ||
			((struct cour_base_hdr *)ep->rx_bufs[i])->type == COUR_PKT_WRITE);
		ep->rx_bufs[i] = cour_ep_rx_packet(ep, ep->rx_bufs[i], ep->rx_msgs[i].msg_len,
						   &ep->rx_sa[i], m->msg_namelen);
	}
	ep->rx_direct = big;
	return n;
}

static void cour_udp_send_raw(struct cour_ep *ep, const void *sa, socklen_t sa_len,
			      const char *buf, size_t len)
{
	if (sendto(ep->fd, buf, len, 0, sa, sa_len) < 0) {
		int e = errno;

		if (!cour_udp_sock_error(ep, e) && e != EAGAIN)
			COUR_DBG(FI_LOG_EP_DATA, "sendto: %s\n", strerror(e));
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
