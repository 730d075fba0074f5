/*
 * cour_udp_ceiling: what bare UDP moves from one host to another with no protocol at all, the
 * ceiling any provider built on UDP sockets meets on that link and those cpus. The client
 * streams -n messages of -S bytes (after -w warmup messages) out of a window of -W message
 * buffers, as back-to-back datagrams of the path MTU in UDP GSO calls of up to 64 KB; the
 * server reads them with UDP GRO into as many buffers. No header, no acknowledgement, no
 * retransmission, no flow control: what the receiver could not take is simply missing, and
 * the figure is the rate of what arrived (the share lost is printed beside it).
 *
 * Same command line and output as cour_bw (`RESULT bw <size> <MB/s>` from the client), so
 * eth-bench.sh runs it as one more column, "udp-ceiling", in the bandwidth rows. -p is
 * accepted and ignored: libfabric is not used. Needs UDP_SEGMENT and UDP_GRO (Linux 5.0).
 */
#define _GNU_SOURCE

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/udp.h>	/* UDP_SEGMENT, UDP_GRO (glibc 2.29) */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ft_common.h"

#define UC_IP_UDP_HDR	28		/* IPv4 + UDP headers in each datagram */
#define UC_GSO_BYTES	65000		/* payload per GSO call: what courier's wire sends */
#define UC_SOCKBUF	(8 << 20)
#define UC_QUIET_MS	100		/* the server stops this long after the last datagram */
#define UC_IDLE_CHECK	256		/* empty reads between looks at the oob socket */
#define UC_MIN(a, b)	((a) < (b) ? (a) : (b))

struct uc {
	struct cour_ft ft;
	size_t size;		/* message size */
	uint64_t total;		/* bytes the client sends, warmup included */
	uint64_t warm;		/* of which warmup */
	char *ring;		/* window x size */
	size_t ring_len;
	int fd;
};

/* The server's report: what arrived, and in how long once the warmup was in. */
struct uc_report {
	uint64_t received;	/* all bytes */
	uint64_t timed;		/* bytes after the warmup */
	uint64_t ns;
};

static int uc_fail(const char *what)
{
	fprintf(stderr, "cour_udp_ceiling: %s: %s\n", what, strerror(errno));
	return -1;
}

static int uc_socket(void)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int big = UC_SOCKBUF;

	if (fd < 0)
		return uc_fail("socket");
	/* FORCE past the sysctl limits when root, the plain options otherwise */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big)) < 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big)) < 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
	return fd;
}

/* Server: a GRO socket on the oob address, its port to the client. */
static int uc_server_open(struct uc *u)
{
	const char *host = u->ft.opts.bind_addr ? u->ft.opts.bind_addr : "127.0.0.1";
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	int one = 1;
	uint16_t port;

	u->fd = uc_socket();
	if (u->fd < 0)
		return -1;
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
		fprintf(stderr, "cour_udp_ceiling: -B %s: not an IPv4 address\n", host);
		return -1;
	}
	if (setsockopt(u->fd, IPPROTO_UDP, UDP_GRO, &one, sizeof(one)) < 0)
		return uc_fail("UDP_GRO");
	if (bind(u->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    getsockname(u->fd, (struct sockaddr *)&sa, &len) < 0)
		return uc_fail("bind");
	port = sa.sin_port;
	return cour_ft_oob_send(&u->ft, &port, sizeof(port));
}

/* Client: connected to the server's port; the datagram size the path MTU allows. */
static int uc_client_open(struct uc *u, size_t *seg)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_DGRAM }, *ai;
	int pmtu = IP_PMTUDISC_DO, mtu = 0;
	socklen_t len = sizeof(mtu);
	uint16_t port;
	int ret;

	ret = cour_ft_oob_recv(&u->ft, &port, sizeof(port));
	if (ret)
		return ret;
	u->fd = uc_socket();
	if (u->fd < 0)
		return -1;
	ret = getaddrinfo(u->ft.opts.dst_host, NULL, &hints, &ai);
	if (ret) {
		fprintf(stderr, "cour_udp_ceiling: %s: %s\n", u->ft.opts.dst_host,
			gai_strerror(ret));
		return -1;
	}
	((struct sockaddr_in *)ai->ai_addr)->sin_port = port;
	ret = connect(u->fd, ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(ai);
	if (ret < 0)
		return uc_fail("connect");
	/* the route's MTU, and no fragmentation: a datagram is one wire packet */
	if (setsockopt(u->fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu)) < 0 ||
	    getsockopt(u->fd, IPPROTO_IP, IP_MTU, &mtu, &len) < 0)
		return uc_fail("IP_MTU");
	if (mtu <= UC_IP_UDP_HDR) {
		fprintf(stderr, "cour_udp_ceiling: path MTU %d\n", mtu);
		return -1;
	}
	*seg = (size_t)mtu - UC_IP_UDP_HDR;
	return 0;
}

/* One GSO call: len bytes from offset off of the stream, datagrams of seg bytes. */
static ssize_t uc_send_run(struct uc *u, uint64_t off, size_t len, size_t seg)
{
	union { char buf[CMSG_SPACE(sizeof(uint16_t))]; struct cmsghdr align; } ctl;
	struct iovec iov[2];
	struct msghdr m = { .msg_iov = iov, .msg_control = ctl.buf };
	size_t at = off % u->ring_len, first = UC_MIN(len, u->ring_len - at);
	struct cmsghdr *c;

	/* a run that crosses the end of the window continues at its start */
	iov[0] = (struct iovec){ .iov_base = u->ring + at, .iov_len = first };
	iov[1] = (struct iovec){ .iov_base = u->ring, .iov_len = len - first };
	m.msg_iovlen = len > first ? 2 : 1;
	if (len > seg) {
		m.msg_controllen = sizeof(ctl.buf);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = IPPROTO_UDP;
		c->cmsg_type = UDP_SEGMENT;
		c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
		*(uint16_t *)(void *)CMSG_DATA(c) = (uint16_t)seg;
	}
	return sendmsg(u->fd, &m, 0);
}

static int uc_client(struct uc *u)
{
	size_t seg = 0, run;
	uint64_t off = 0, t_send;
	struct uc_report rep;
	char sz[16];
	int ret;

	ret = uc_client_open(u, &seg);
	if (ret)
		return ret;
	if (seg > 65507)
		seg = 65507;		/* the largest UDP payload over IPv4 (loopback's MTU is 64 KiB) */
	run = seg > UC_GSO_BYTES / 2 ? seg : (UC_GSO_BYTES / seg) * seg;
	ret = cour_ft_barrier(&u->ft);
	if (ret)
		return ret;
	t_send = cour_ft_now_ns();
	while (off < u->total) {
		size_t len = (size_t)UC_MIN((uint64_t)run, u->total - off);
		ssize_t n = uc_send_run(u, off, len, seg);

		if (n < 0) {
			/* a full queue on the way (ENOBUFS) drops like any full queue; the
			 * rest of the errors end the run */
			if (errno == EINTR || errno == ENOBUFS || errno == EAGAIN)
				continue;
			return uc_fail("sendmsg");
		}
		off += (uint64_t)n;
		if (cour_ft_check_deadline(&u->ft, "sending"))
			return -1;
	}
	t_send = cour_ft_now_ns() - t_send;
	ret = cour_ft_oob_send(&u->ft, &off, sizeof(off));
	if (!ret)
		ret = cour_ft_oob_recv(&u->ft, &rep, sizeof(rep));
	if (ret)
		return ret;
	if (!rep.timed || !rep.ns) {
		fprintf(stderr, "cour_udp_ceiling: nothing arrived after the warmup "
			"(%llu of %llu bytes in all)\n", (unsigned long long)rep.received,
			(unsigned long long)off);
		return -1;
	}
	cour_ft_size_str(u->size, sz, sizeof(sz));
	/* the table line must come right before RESULT: eth-bench reads the message count
	 * and window from it */
	printf("# sent at %.2f MB/s, %zu datagrams per GSO call\n", off * 1e3 / (double)t_send,
	       run / seg);
	printf("#       size       msgs   window         MB/s  lost\n");
	printf("%11s %10ld %8d %12.2f  %.2f%% of %zu-byte datagrams\n", sz,
	       u->ft.opts.iterations, u->ft.opts.window, rep.timed * 1e3 / (double)rep.ns,
	       100.0 * (double)(off - rep.received) / (double)off, seg);
	printf("RESULT bw %zu %.2f\n", u->size, rep.timed * 1e3 / (double)rep.ns);
	return 0;
}

static int uc_server(struct uc *u)
{
	struct uc_report rep = { 0 };
	uint64_t sent = 0, start_ns = 0, last_ns = 0, start_bytes = 0, done_ns = 0, idle = 0;
	struct pollfd oob = { .fd = u->ft.oob_fd, .events = POLLIN };
	size_t pos = 0;
	int ret;

	ret = uc_server_open(u);
	if (!ret)
		ret = cour_ft_barrier(&u->ft);
	if (ret)
		return ret;
	for (;;) {
		size_t room = UC_MIN((size_t)65536, u->ring_len - pos);
		ssize_t n = recv(u->fd, u->ring + pos, room, MSG_DONTWAIT);
		uint64_t now = cour_ft_now_ns();

		if (n > 0) {
			rep.received += (uint64_t)n;
			last_ns = now;
			if (!start_ns && rep.received >= u->warm) {
				start_ns = now;
				start_bytes = rep.received;
			}
			/* a read never straddles the end: short of room, start over */
			pos += (size_t)n;
			if (u->ring_len - pos < 65536)
				pos = 0;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return uc_fail("recv");
		/* spin as the providers do (a sleeping reader loses what overflows the socket
		 * meanwhile); look at the oob socket and the clock now and then */
		if (++idle % UC_IDLE_CHECK)
			continue;
		/* the client has sent everything: stop once nothing came for a while */
		if (done_ns && now - (last_ns > done_ns ? last_ns : done_ns) >=
			       UC_QUIET_MS * 1000000ULL)
			break;
		if (cour_ft_check_deadline(&u->ft, "receiving"))
			return -1;
		if (!done_ns && poll(&oob, 1, 0) > 0) {
			ret = cour_ft_oob_recv(&u->ft, &sent, sizeof(sent));
			if (ret)
				return ret;
			done_ns = cour_ft_now_ns();
		}
	}
	if (start_ns && last_ns > start_ns) {
		rep.timed = rep.received - start_bytes;
		rep.ns = last_ns - start_ns;
	}
	printf("# udp_ceiling (server): %llu of %llu bytes arrived\n",
	       (unsigned long long)rep.received, (unsigned long long)sent);
	return cour_ft_oob_send(&u->ft, &rep, sizeof(rep));
}

int main(int argc, char **argv)
{
	struct uc u = { .fd = -1 };
	struct cour_ft_opts opts;
	long iters, warm;
	int ret;

	cour_ft_opts_init(&opts);
	opts.test_name = "udp_ceiling";
	opts.sizes[0] = 1 << 20;
	opts.nsizes = 1;
	ret = cour_ft_parse_opts(&opts, argc, argv, NULL, NULL, NULL,
				 "bare UDP GSO/GRO stream, client to server, no protocol; "
				 "-S size (first only), -n messages, -w warmup, -W window");
	if (ret)
		return ret > 0 ? 0 : 2;
	memset(&u.ft, 0, sizeof(u.ft));
	u.ft.opts = opts;
	u.ft.is_server = opts.dst_host == NULL;
	u.ft.listen_fd = u.ft.oob_fd = -1;
	u.ft.deadline_ns = cour_ft_now_ns() + (uint64_t)opts.timeout_s * 1000000000ULL;
	ret = cour_ft_oob_connect(&u.ft);
	if (!ret)
		ret = cour_ft_sync_opts(&u.ft);
	if (ret)
		goto out;
	u.size = u.ft.opts.sizes[0];
	iters = u.ft.opts.iterations > 0 ? u.ft.opts.iterations : 1024;
	warm = u.ft.opts.warmup >= 0 ? u.ft.opts.warmup : 64;
	u.ft.opts.iterations = iters;
	if (u.ft.opts.window <= 0)
		u.ft.opts.window = 64;
	u.warm = (uint64_t)warm * u.size;
	u.total = (uint64_t)(iters + warm) * u.size;
	u.ring_len = u.size * (size_t)u.ft.opts.window;
	if (u.ring_len < (1 << 20))
		u.ring_len = 1 << 20;	/* whole 64 KB reads always fit */
	u.ring = malloc(u.ring_len);
	if (!u.ring || u.size == 0) {
		ret = -1;
		fprintf(stderr, "cour_udp_ceiling: no memory for %zu bytes\n", u.ring_len);
		goto out;
	}
	memset(u.ring, 0x5a, u.ring_len);
	printf("# udp_ceiling (%s)  no provider: bare UDP, GSO and GRO\n",
	       u.ft.is_server ? "server" : "client");
	fflush(stdout);
	ret = u.ft.is_server ? uc_server(&u) : uc_client(&u);
out:
	if (u.fd >= 0)
		close(u.fd);
	free(u.ring);
	cour_ft_oob_close(&u.ft);
	if (ret)
		fprintf(stderr, "cour_udp_ceiling: failed\n");
	return ret ? 1 : 0;
}
