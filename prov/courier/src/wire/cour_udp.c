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
 * This file sets the socket up and takes it down, reads its error queue and asks the routing
 * table for MTUs; the send batching (queue, packs, GSO runs) is in cour_udp_tx.c and the
 * receive path (recvmmsg, GRO trains, reads into place) in cour_udp_rx.c.
 *
 * The contract is in cour_wire.h.
 */
#include "util/cour_util.h"
#include "util/cour_params.h"
#include "wire/cour_wire.h"
#include "wire/cour_udp_int.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/errqueue.h>
#include <linux/filter.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#ifndef SO_ATTACH_REUSEPORT_CBPF
#define SO_ATTACH_REUSEPORT_CBPF 51
#endif

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

static void cour_udp_close(struct cour_wire *w);

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
 * The doorbell. A progress thread that stands back while its application polls sleeps on its
 * wake fd alone, not on this socket, or every packet would wake it and take a CPU from the
 * application. When the application then computes for a while, nobody reads the socket, and
 * a peer waiting for our ACK (its send completes with it) waits for the computation. The
 * waiting peer asks with a probe (an ACK|PROBE, proto/cour_peer_ack.c); the kernel hands
 * those, and nothing else, to a second socket on the same port, which the thread always
 * sleeps on, through the epoll set bell_epfd (cour_wire_bell_arm, once the endpoint is
 * enabled). How: both sockets join one SO_REUSEPORT group whose classic BPF program picks
 * the socket by the datagram's first bytes (rx->bell_at); ICMP errors, which the kernel
 * matches to the group by hash, may reach either (cour_udp_read_errors reads both).
 * The data socket is bound first without SO_REUSEPORT, so the port it gets is free (an
 * automatic bind may pick a port that sockets with SO_REUSEPORT of the same user share);
 * the flag set after the bind lets only the doorbell join it. Any step refused: no
 * doorbell, and probes reach the data socket as before.
 */
static void cour_udp_recverr_on(int fd, bool v4);
static void cour_udp_bell_shut(struct cour_wire *w, int b);

static void cour_udp_bell_open(struct cour_wire *w)
{
	const struct cour_wire_rx_ops *rx = w->rx;
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_B | BPF_ABS, rx->bell_at[0]),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, rx->bell_is[0], 0, 3),
		BPF_STMT(BPF_LD | BPF_B | BPF_ABS, rx->bell_at[1]),
		BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, rx->bell_is[1], 0, 1),
		BPF_STMT(BPF_RET | BPF_K, 1),           /* the doorbell, second in the group */
		BPF_STMT(BPF_RET | BPF_K, 0),           /* the data socket (a short datagram too) */
	};
	struct sock_fprog prog = { .len = COUR_ARRAY_SIZE(f), .filter = f };
	int one = 1, b;

	if (w->bell_epfd <= 0 || w->connect_to || !rx->bell_is[0])
		return;
	b = socket(w->bound_sa.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (b < 0)
		goto fail;
	cour_udp_recverr_on(b, w->bound_sa.ss_family == AF_INET);
	if (setsockopt(w->fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) ||
	    setsockopt(b, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) ||
	    bind(b, (struct sockaddr *)&w->bound_sa, w->bound_len) ||
	    setsockopt(b, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog, sizeof(prog)))
		goto fail;
	w->bell_fd = b;
	return;
fail:
	COUR_INFO(FI_LOG_EP_CTRL, "no doorbell socket: %s (a peer waiting for an ACK while the "
		  "application computes waits for its next call)\n", strerror(errno));
	cour_udp_bell_shut(w, b);
}

/* No doorbell after all (b: its socket, or -1): the port is the data socket's alone again,
 * and probes reach it as any datagram */
static void cour_udp_bell_shut(struct cour_wire *w, int b)
{
	int zero = 0;

	if (b >= 0)
		close(b);
	w->bell_fd = -1;
	(void)setsockopt(w->fd, SOL_SOCKET, SO_REUSEPORT, &zero, sizeof(zero));
}

/* (Only the thread reads the doorbell, when the set wakes it: one it cannot watch would
 * keep the probes for nobody, so it goes.) */
int cour_wire_bell_arm(struct cour_wire *w)
{
	struct epoll_event ev = { .events = EPOLLIN };

	if (w->bell_fd < 0 || w->bell_epfd <= 0)
		return 0;
	if (epoll_ctl(w->bell_epfd, EPOLL_CTL_ADD, w->bell_fd, &ev) == 0 || errno == EEXIST)
		return 0;
	COUR_INFO(FI_LOG_EP_CTRL, "doorbell not watched: %s (probes go to the data socket)\n",
		  strerror(errno));
	cour_udp_bell_shut(w, w->bell_fd);
	return -FI_EOTHER;
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

static void cour_udp_read_errors_of(struct cour_wire *w, int fd);

/* (ICMP errors about what we sent reach either socket of the port: the kernel matches them to
 * the group by hash, not by the doorbell's program, which reads only received datagrams) */
void cour_udp_read_errors(struct cour_wire *w)
{
	cour_udp_read_errors_of(w, w->fd);
	if (w->bell_fd >= 0)
		cour_udp_read_errors_of(w, w->bell_fd);
}

static void cour_udp_read_errors_of(struct cour_wire *w, int fd)
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

		if (recvmsg(fd, &m, MSG_ERRQUEUE | MSG_DONTWAIT) < 0)
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
	cour_udp_bell_open(w);
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
	if (w->bell_fd >= 0)
		close(w->bell_fd);      /* (which takes it out of the epoll set) */
	w->fd = w->bell_fd = -1;
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
	.bell = cour_udp_bell_poll,
};
