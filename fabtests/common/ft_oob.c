/*
 * courier fabtests harness: the out-of-band TCP channel. It carries the run options, the
 * endpoint names and the barriers; it is never on a measured path.
 *
 * The socket is non-blocking so that every wait on it can also drive the fabric (manual-progress
 * providers acknowledge only from inside fi_cq_read) and check the deadline.
 */
#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ft_common.h"

/* Connection attempts are retried this often until the server listens. */
#define COUR_FT_CONNECT_RETRY_MS 50

static int cour_ft_remaining_ms(const struct cour_ft *ft, int cap)
{
	uint64_t now = cour_ft_now_ns();
	uint64_t left;

	if (now >= ft->deadline_ns)
		return 0;
	left = (ft->deadline_ns - now) / 1000000ULL;
	return left < (uint64_t)cap ? (int)left : cap;
}

static int cour_ft_set_nonblock(int fd)
{
	int flags = fcntl(fd, F_GETFL);

	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

static void cour_ft_record_local(struct cour_ft *ft)
{
	struct sockaddr_storage ss;
	socklen_t sslen = sizeof(ss);
	int one = 1;

	(void)setsockopt(ft->oob_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	ft->oob_local[0] = '\0';
	if (getsockname(ft->oob_fd, (struct sockaddr *)&ss, &sslen) == 0)
		getnameinfo((struct sockaddr *)&ss, sslen, ft->oob_local, sizeof(ft->oob_local),
			    NULL, 0, NI_NUMERICHOST);
}

static int cour_ft_resolve(const char *host, uint16_t port, bool passive, struct addrinfo **res)
{
	struct addrinfo hints = {
		.ai_family = AF_UNSPEC,
		.ai_socktype = SOCK_STREAM,
		.ai_flags = passive ? AI_PASSIVE : 0,
	};
	char service[8];
	int ret;

	snprintf(service, sizeof(service), "%u", port);
	ret = getaddrinfo(host, service, &hints, res);
	if (ret) {
		fprintf(stderr, "cour_ft: cannot resolve %s:%u: %s\n", host ? host : "*", port,
			gai_strerror(ret));
		return -FI_EINVAL;
	}
	return 0;
}

static int cour_ft_oob_listen_accept(struct cour_ft *ft)
{
	struct addrinfo *res;
	struct pollfd pfd;
	int one = 1;
	int ret;

	ret = cour_ft_resolve(ft->opts.bind_addr, ft->opts.oob_port, true, &res);
	if (ret)
		return ret;
	ft->listen_fd = socket(res->ai_family, res->ai_socktype, res->ai_protocol);
	if (ft->listen_fd < 0) {
		ret = -errno;
		perror("cour_ft: socket");
		goto free_res;
	}
	(void)setsockopt(ft->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(ft->listen_fd, res->ai_addr, res->ai_addrlen) || listen(ft->listen_fd, 1)) {
		ret = -errno;
		fprintf(stderr, "cour_ft: cannot listen on %s:%u: %s\n", ft->opts.bind_addr,
			ft->opts.oob_port, strerror(errno));
		goto free_res;
	}
	pfd.fd = ft->listen_fd;
	pfd.events = POLLIN;
	for (;;) {
		ret = poll(&pfd, 1, cour_ft_remaining_ms(ft, 1000));
		if (ret > 0)
			break;
		if (ret < 0 && errno != EINTR) {
			ret = -errno;
			perror("cour_ft: poll(listen)");
			goto free_res;
		}
		ret = cour_ft_check_deadline(ft, "a client to connect");
		if (ret)
			goto free_res;
	}
	ft->oob_fd = accept(ft->listen_fd, NULL, NULL);
	if (ft->oob_fd < 0) {
		ret = -errno;
		perror("cour_ft: accept");
		goto free_res;
	}
	ret = 0;
free_res:
	freeaddrinfo(res);
	if (ft->listen_fd >= 0) {
		close(ft->listen_fd);
		ft->listen_fd = -1;
	}
	return ret;
}

/* One non-blocking connect; 0, -FI_EAGAIN to try again later, or a hard error. */
static int cour_ft_try_connect(struct cour_ft *ft, const struct addrinfo *ai)
{
	struct pollfd pfd;
	socklen_t errlen;
	int fd, err = 0;

	fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
	if (fd < 0) {
		perror("cour_ft: socket");
		return -FI_EOTHER;
	}
	if (cour_ft_set_nonblock(fd))
		goto fail;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
		goto connected;
	if (errno != EINPROGRESS) {
		err = errno;
		goto retry;
	}
	pfd.fd = fd;
	pfd.events = POLLOUT;
	if (poll(&pfd, 1, cour_ft_remaining_ms(ft, 1000)) <= 0)
		goto retry;
	errlen = sizeof(err);
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &errlen) || err)
		goto retry;
connected:
	ft->oob_fd = fd;
	return 0;
retry:
	close(fd);
	/* the server may not listen yet, or not be up at all: both are worth another try */
	if (err == 0 || err == ECONNREFUSED || err == ETIMEDOUT || err == EHOSTUNREACH ||
	    err == ENETUNREACH || err == EINTR)
		return -FI_EAGAIN;
	fprintf(stderr, "cour_ft: connect: %s\n", strerror(err));
	return -FI_EOTHER;
fail:
	close(fd);
	return -FI_EOTHER;
}

static int cour_ft_oob_dial(struct cour_ft *ft)
{
	struct addrinfo *res, *ai;
	int ret;

	ret = cour_ft_resolve(ft->opts.dst_host, ft->opts.oob_port, false, &res);
	if (ret)
		return ret;
	for (;;) {
		for (ai = res; ai; ai = ai->ai_next) {
			ret = cour_ft_try_connect(ft, ai);
			if (ret != -FI_EAGAIN)
				goto out;
		}
		ret = cour_ft_check_deadline(ft, "the server to accept the connection");
		if (ret)
			goto out;
		usleep(COUR_FT_CONNECT_RETRY_MS * 1000);
	}
out:
	freeaddrinfo(res);
	return ret;
}

int cour_ft_oob_connect(struct cour_ft *ft)
{
	int ret;

	ret = ft->is_server ? cour_ft_oob_listen_accept(ft) : cour_ft_oob_dial(ft);
	if (ret)
		return ret;
	ret = cour_ft_set_nonblock(ft->oob_fd);
	if (ret) {
		fprintf(stderr, "cour_ft: fcntl(O_NONBLOCK): %s\n", strerror(-ret));
		return -FI_EOTHER;
	}
	cour_ft_record_local(ft);
	return 0;
}

void cour_ft_oob_close(struct cour_ft *ft)
{
	if (ft->oob_fd >= 0)
		close(ft->oob_fd);
	if (ft->listen_fd >= 0)
		close(ft->listen_fd);
	ft->oob_fd = ft->listen_fd = -1;
}

/* Wait for the socket to become ready while keeping the fabric going. */
static int cour_ft_oob_wait(struct cour_ft *ft, short events, const char *what)
{
	struct pollfd pfd = { .fd = ft->oob_fd, .events = events };
	int ret;

	if (ft->fabric_up) {
		ret = cour_ft_progress(ft);
		if (ret)
			return ret;
	}
	/* with a fabric to drive we spin; without one we may sleep a little */
	ret = poll(&pfd, 1, ft->fabric_up ? 0 : cour_ft_remaining_ms(ft, 10));
	if (ret < 0 && errno != EINTR) {
		perror("cour_ft: poll(oob)");
		return -FI_EOTHER;
	}
	return cour_ft_check_deadline(ft, what);
}

int cour_ft_oob_send(struct cour_ft *ft, const void *buf, size_t len)
{
	const char *p = buf;
	int ret;

	while (len) {
		ssize_t n = send(ft->oob_fd, p, len, MSG_NOSIGNAL);

		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
			fprintf(stderr, "cour_ft: oob send: %s (did the peer fail?)\n",
				strerror(errno));
			return -FI_ECONNRESET;
		}
		ret = cour_ft_oob_wait(ft, POLLOUT, "the oob channel to drain");
		if (ret)
			return ret;
	}
	return 0;
}

int cour_ft_oob_recv(struct cour_ft *ft, void *buf, size_t len)
{
	char *p = buf;
	int ret;

	while (len) {
		ssize_t n = recv(ft->oob_fd, p, len, 0);

		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n == 0) {
			fprintf(stderr, "cour_ft: the peer closed the oob connection "
				"(it failed or gave up; see its output)\n");
			return -FI_ECONNRESET;
		}
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
			fprintf(stderr, "cour_ft: oob recv: %s\n", strerror(errno));
			return -FI_ECONNRESET;
		}
		ret = cour_ft_oob_wait(ft, POLLIN, "the peer on the oob channel");
		if (ret)
			return ret;
	}
	return 0;
}

int cour_ft_oob_check_peer(struct cour_ft *ft)
{
	char c;
	ssize_t n;

	n = recv(ft->oob_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)))
		return 0;
	fprintf(stderr, "cour_ft: the peer closed the oob connection while we waited for "
		"completions (it failed or gave up; see its output)\n");
	return -FI_ECONNRESET;
}

int cour_ft_barrier(struct cour_ft *ft)
{
	char out = 'B', in = 0;
	int ret;

	/* One provider call before the peer hears from us: a progress thread that then serves
	 * the peer's operations on our memory takes the lock this call took, so ThreadSanitizer
	 * sees our writes to that memory ordered before its reads. (The real order runs through
	 * the other process; when the peer's byte was already here, nothing else took the lock,
	 * and test_rma.sh under TSan reported the fill of a read target racing with the read.) */
	ret = ft->fabric_up ? cour_ft_progress(ft) : 0;
	if (!ret)
		ret = cour_ft_oob_send(ft, &out, 1);
	if (!ret)
		ret = cour_ft_oob_recv(ft, &in, 1);
	if (!ret && in != 'B') {
		COUR_FT_ERR("oob barrier out of step (got 0x%02x)", (unsigned char)in);
		ret = -FI_EOTHER;
	}
	return ret;
}
