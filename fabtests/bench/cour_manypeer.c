/*
 * cour_manypeer: what a receiver pays per peer as the number of peers N grows, for any provider
 * (-p courier, tcp, "udp;ofi_rxd"; FI_EP_RDM, tagged messages), all on 127.0.0.1.
 *
 *   cour_manypeer -p courier -n 1024        (fabtests/scripts/manypeer-bench.sh runs a series)
 *
 * The program forks before touching libfabric: the parent opens one fabric, domain and server
 * endpoint, the child its own fabric with N client endpoints (each with its own address: on
 * courier one UDP socket each). They swap fi_getname() addresses over a socketpair, which also
 * carries the "go" and "done" of every phase, so the parent's memory is the server's alone.
 * Progress is manual (asked for, and the program polls): both processes poll their CQs, also
 * while they wait for each other. Client 0, the sender of the rate test, has a domain and CQ of
 * its own, so that its progress never walks the N-1 idle clients, whose CQ it reads only with
 * a bounded share of its time: the rate is the server's.
 *
 * Measured in the parent (server), printed as a table and as `RESULT <name> <N> <value>`:
 *   idle_bytes_per_peer    VmRSS growth per peer from "all endpoints open, all addresses in
 *                          the AV, no contact yet" to "every client sent 8 B, the server
 *                          answered each with 8 B, then -s ms of idle progress"
 *   burst_bytes_per_peer   VmRSS growth per peer (same start) once every client has sent one
 *                          64 KiB message at once and the server has received all of them (with
 *                          burst_hwm_bytes_per_peer, the VmHWM growth); every payload's pattern
 *                          is checked. The server's receive buffers are allocated and touched
 *                          before the start, so only the provider's memory counts. With -U
 *                          (fan-in of unexpected messages) the server posts those receives only
 *                          once every client has posted its send and -s ms of progress have
 *                          passed: what the provider buffered for receives not yet posted is in
 *                          burst_hwm_bytes_per_peer
 *   burst_idle_bytes_per_peer
 *                          the same after another -s ms of idle progress: what is kept
 *   first_contact_ms       from the first client's first send to the server having all N
 *                          (first_contact_us_per_peer: divided by N). It includes the clients
 *                          process's own cost of progressing N endpoints through a handshake,
 *                          so it bounds the server's from above
 *   rate_msgs_per_s        8 B messages client 0 -> server while N-1 peers sit idle (after
 *                          that quiet period, so they are settled): windows of -W, each
 *                          acknowledged, with the next window's receives posted before the
 *                          acknowledgement (no unexpected-message path)
 *   av_bytes_per_entry,    one fi_av_insert of -A distinct synthetic sockaddr_in addresses
 *   av_ns_per_insert       (127.x.y.z:port, the server's own format) into a fresh FI_AV_TABLE;
 *                          entries returned as FI_ADDR_NOTAVAIL count as failures (av_failed).
 *                          It runs once the clients have exited
 * and client_ep_bytes, the clients process's growth per endpoint opened (the client side).
 * Memory figures move in pages (VmRSS is in kB), so at small N they are coarse.
 *
 * Limits: RLIMIT_NOFILE is raised to its hard limit and N capped by it, with a message. The
 * clients stop opening endpoints, with the figures, when N of them would take more than -m MB
 * (ofi_rxm takes tens of MB per endpoint). A provider that cannot open N endpoints in one
 * process, or fails any later step, makes the program print `FAIL <phase>: <reason>` (the
 * failing call and its error) and exit 1; results already measured are printed first. Every
 * wait is bounded by -T seconds per phase, and an alarm a little later ends a process stuck
 * inside a provider call; the insert test's fi_close(av) has 10 s, then is reported and left.
 */
#define _GNU_SOURCE

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ft_common.h"

#define MP_SMALL_LEN		8
#define MP_BURST_LEN		65536
#define MP_DEF_IDLE_MS		300
#define MP_DEF_RATE_SECS	2.0
#define MP_DEF_WINDOW		64
#define MP_DEF_AV_COUNT		100000
#define MP_DEF_TIMEOUT		60
#define MP_RATE_WARM_WINDOWS	8
#define MP_FD_RESERVE		64	/* descriptors beside the endpoints' sockets */
#define MP_CQ_BATCH		32
#define MP_CHECK_SPINS		64	/* read the clock once per this many empty polls */
#define MP_PEER_CHECK_NS	(100 * 1000 * 1000ULL)
#define MP_IDLE_CQ_NS		(10 * 1000 * 1000ULL)	/* idle clients' CQ: at most this often, */
#define MP_IDLE_CQ_SHARE	50			/* and at most 1/50 of the time */
#define MP_HARD_GRACE_S		10
#define MP_REPLY_XOR		0x5a5a5a5a00000000ULL
#define MP_AV_PORTS		16	/* synthetic addresses: this many ports per IP */
#define MP_AV_CLOSE_S		10	/* fi_close of the insert test's AV, at most */

/* Tags: the kind of message in bits 40.., the last rate window's flag, a client or sequence. */
#define MP_TAG_KIND_SHIFT	40
#define MP_TAG_LAST		(1ULL << 36)
#define MP_TAG_LOW		0xffffffffULL

enum mp_kind { MP_K_HELLO, MP_K_REPLY, MP_K_BURST, MP_K_RATE, MP_K_ACK, MP_K_MAX };

static const char *const mp_kind_name[MP_K_MAX] = {
	"first-contact messages", "replies", "64 KiB burst messages", "rate messages",
	"window acknowledgements",
};

static inline uint64_t mp_tag(enum mp_kind kind)
{
	return (uint64_t)(kind + 1) << MP_TAG_KIND_SHIFT;
}

enum mp_ctl_type {
	MP_CTL_NAME = 1,	/* parent -> child: the server's address */
	MP_CTL_NAMES,		/* child -> parent: open time, RSS growth, the N client addresses */
	MP_CTL_GO_HELLO,
	MP_CTL_DONE_HELLO,	/* child -> parent: time of the first send */
	MP_CTL_GO_BURST,
	MP_CTL_DONE_BURST,	/* child -> parent: time of the first send */
	MP_CTL_GO_RATE,
	MP_CTL_DONE_RATE,	/* child -> parent: messages timed, nanoseconds */
	MP_CTL_QUIT,
	MP_CTL_FAIL,		/* either way: the reason, text */
	MP_CTL_POSTED_BURST,	/* child -> parent (-U): every burst send is posted */
};

struct mp_ctl_hdr {
	uint32_t type;
	uint32_t len;
};

struct mp_opts {
	const char *prov;
	int nclients;
	int idle_ms;
	double rate_secs;	/* rate test length in seconds, or */
	long rate_msgs;		/* in messages; both 0: no rate test */
	long av_count;
	int window;
	int timeout_s;
	long mem_limit_mb;	/* clients process; -1: half of MemAvailable at start */
	bool no_shm;
	bool unexp_burst;	/* -U: the server posts the burst's receives after it arrived */
};

/* Every operation's context: the completion's op_context is the op. */
struct mp_op {
	struct fi_context2 ctx;
	uint32_t kind;
	uint32_t idx;		/* the client (or rate slot) whose buffer it uses */
	bool rx;
};

struct mp_mem {
	long rss_kb;
	long hwm_kb;
	long anon_kb, file_kb, shmem_kb;	/* VmRSS's parts, -1 where the kernel has none */
};

struct mp_results {
	bool have_idle, have_burst, have_burst_idle, have_contact, have_rate, have_av, have_ep;
	double idle_bpp, idle_hwm_bpp, burst_bpp, burst_hwm_bpp, burst_idle_bpp;
	double contact_ms, burst_ms, rate;
	double av_bpe, av_ns;
	long av_failed;
	double ep_bytes, ep_open_ms, insert_ms;
};

struct mp {
	struct mp_opts o;
	bool server;
	const char *role;
	int ctl;			/* our end of the socketpair */
	pid_t child;
	const char *phase;
	uint64_t deadline_ns;
	uint64_t next_peer_check_ns;
	uint64_t next_idle_cq_ns;
	unsigned int hot_spins;
	char why[512];			/* the first error, for the FAIL line */

	struct fi_info *info;
	struct fid_fabric *fabric;
	/*
	 * The server has one domain. The clients have two: client 0, the rate test's sender, is
	 * alone in domain 0 with CQ 0, so that its progress never walks the N-1 idle clients of
	 * domain 1 (which share CQ 1): the rate measured is the server's, not the sender's.
	 */
	int ndom;
	struct fid_domain *dom[2];
	struct fid_av *av[2];
	struct fid_mr *mr[2];
	void *desc[2];
	int nep;
	struct fid_ep **eps;
	int ncq;
	struct fid_cq **cqs;		/* cqs[d] belongs to dom[d] */
	int hot_cq;			/* -1: poll every CQ each spin; else this one, the others
					 * seldom (rate test: the idle peers) */
	fi_addr_t *peer;		/* server: the N clients; clients: the server in av[d] */
	size_t mem_limit_kb;		/* clients: their process may grow this much */
	char name[COUR_FT_MAX_NAME];	/* our (first) endpoint's address */
	size_t name_len;

	/* buffers, one registered arena */
	char *arena;
	size_t arena_len;
	char *small;			/* hello: N x 8 B */
	char *reply;			/* replies: N x 8 B */
	char *burst;			/* N x 64 KiB */
	char *rate;			/* window x 8 B */
	char *ack;			/* 8 B */
	struct mp_op *ops[MP_K_MAX];
	int window;

	uint64_t posted[MP_K_MAX];
	uint64_t done[MP_K_MAX];
	uint8_t *seen;			/* server: per client, a bit per kind received */
	uint64_t rate_first;		/* first sequence of the window in flight */
	uint64_t rate_win;		/* client: the window whose ack we wait for */
	bool rate_last;			/* server: the window received was the client's last */
	int bad;			/* a completion was wrong */
	bool abandoned;			/* a provider call never returned: leave libfabric alone */

	struct mp_mem mem_start, mem_idle, mem_burst, mem_burst_idle;
	struct mp_results r;
};

/* ---- errors and bounds ---- */

static int mp_fail(struct mp *mp, int ret, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int mp_fail(struct mp *mp, int ret, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "cour_manypeer (%s): %s\n", mp->role, msg);
	if (!mp->why[0])
		snprintf(mp->why, sizeof(mp->why), "%s", msg);
	return ret;
}

#define MP_FIERR(mp, ret, fmt, ...) \
	mp_fail(mp, (int)(ret), fmt " failed: %d (%s)", ##__VA_ARGS__, (int)(ret), \
		fi_strerror((int)-(ret)))

/* For the alarm's message: what the process was doing when a call never returned. */
static const char *mp_alarm_role = "";
static const char *mp_alarm_phase = "";

static void mp_write_str(const char *s)
{
	ssize_t ret = write(STDERR_FILENO, s, strlen(s));

	(void)ret;
}

/*
 * Armed around a provider call whose hang we report and survive (the insert test's fi_close):
 * the alarm jumps back out of it, and the process touches libfabric no more.
 */
static sigjmp_buf mp_alarm_jmp;
static volatile sig_atomic_t mp_alarm_jmp_armed;
/*
 * Set by the alarm at the phase's deadline: the waits look at it on every spin, so the deadline
 * is seen even when each provider call takes long. A second alarm, MP_HARD_GRACE_S later, ends
 * a process whose call never returned.
 */
static volatile sig_atomic_t mp_alarm_soft;

static void mp_alarm(int sig)
{
	(void)sig;
	if (mp_alarm_jmp_armed) {
		mp_alarm_jmp_armed = 0;
		siglongjmp(mp_alarm_jmp, 1);
	}
	if (!mp_alarm_soft) {
		mp_alarm_soft = 1;
		alarm(MP_HARD_GRACE_S);
		return;
	}
	mp_write_str("cour_manypeer (");
	mp_write_str(mp_alarm_role);
	mp_write_str("): hard timeout: a provider call blocked past the deadline in phase '");
	mp_write_str(mp_alarm_phase);
	mp_write_str("'\n");
	_exit(3);
}

/* Each phase gets the whole -T. */
static void mp_phase(struct mp *mp, const char *phase)
{
	mp->phase = phase;
	mp_alarm_role = mp->role;
	mp_alarm_phase = phase;
	mp->deadline_ns = cour_ft_now_ns() + (uint64_t)mp->o.timeout_s * 1000000000ULL;
	mp_alarm_soft = 0;
	alarm((unsigned)mp->o.timeout_s);
}

static int mp_check_deadline(struct mp *mp, const char *what)
{
	if (!mp_alarm_soft && cour_ft_now_ns() < mp->deadline_ns)
		return 0;
	return mp_fail(mp, -FI_ETIMEDOUT, "timed out after %d s in phase '%s' waiting for %s",
		       mp->o.timeout_s, mp->phase, what);
}

/* ---- memory ---- */

static int mp_mem_read(struct mp *mp, struct mp_mem *m)
{
	char line[256];
	FILE *f;

	m->rss_kb = m->hwm_kb = m->anon_kb = m->file_kb = m->shmem_kb = -1;
	f = fopen("/proc/self/status", "r");
	if (!f)
		return mp_fail(mp, -FI_EIO, "cannot open /proc/self/status: %s", strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "VmRSS:", 6))
			m->rss_kb = strtol(line + 6, NULL, 10);
		else if (!strncmp(line, "VmHWM:", 6))
			m->hwm_kb = strtol(line + 6, NULL, 10);
		else if (!strncmp(line, "RssAnon:", 8))
			m->anon_kb = strtol(line + 8, NULL, 10);
		else if (!strncmp(line, "RssFile:", 8))
			m->file_kb = strtol(line + 8, NULL, 10);
		else if (!strncmp(line, "RssShmem:", 9))
			m->shmem_kb = strtol(line + 9, NULL, 10);
	}
	fclose(f);
	if (m->rss_kb < 0 || m->hwm_kb < 0)
		return mp_fail(mp, -FI_EIO, "no VmRSS or VmHWM in /proc/self/status");
	return 0;
}

static double mp_per(long after_kb, long before_kb, long count)
{
	return (double)(after_kb - before_kb) * 1024.0 / (double)count;
}

/* ---- control channel (the socketpair) ---- */

static int mp_ctl_send(struct mp *mp, uint32_t type, const void *buf, size_t len)
{
	struct mp_ctl_hdr h = { .type = type, .len = (uint32_t)len };
	struct iovec iov[2] = {
		{ .iov_base = &h, .iov_len = sizeof(h) },
		{ .iov_base = (void *)buf, .iov_len = len },
	};
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = 2 };
	size_t left = sizeof(h) + len;
	ssize_t n;

	/* a blocking write: the peer reads every message soon, and the alarm bounds it */
	while (left) {
		n = sendmsg(mp->ctl, &msg, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return mp_fail(mp, -FI_EIO, "control channel: %s process gone (%s)",
				       mp->server ? "clients" : "server",
				       n < 0 ? strerror(errno) : "closed");
		left -= (size_t)n;
		while (msg.msg_iovlen && (size_t)n >= msg.msg_iov->iov_len) {
			n -= (ssize_t)msg.msg_iov->iov_len;
			msg.msg_iov++;
			msg.msg_iovlen--;
		}
		if (msg.msg_iovlen) {
			msg.msg_iov->iov_base = (char *)msg.msg_iov->iov_base + n;
			msg.msg_iov->iov_len -= (size_t)n;
		}
	}
	return 0;
}

static int mp_progress(struct mp *mp);

/* Exactly len bytes; the fabric keeps progressing meanwhile when progress is set. */
static int mp_ctl_read(struct mp *mp, void *buf, size_t len, bool progress, const char *what)
{
	struct pollfd p = { .fd = mp->ctl, .events = POLLIN };
	char *c = buf;
	ssize_t n;
	int ret;

	while (len) {
		ret = poll(&p, 1, progress ? 0 : 10);
		if (ret < 0 && errno != EINTR)
			return mp_fail(mp, -FI_EIO, "poll(control channel): %s", strerror(errno));
		if (ret > 0) {
			n = read(mp->ctl, c, len);
			if (n == 0)
				return mp_fail(mp, -FI_ECONNRESET, "the %s process went away "
					       "while we waited for %s",
					       mp->server ? "clients" : "server", what);
			if (n < 0 && errno != EINTR && errno != EAGAIN)
				return mp_fail(mp, -FI_EIO, "read(control channel): %s",
					       strerror(errno));
			if (n > 0) {
				c += n;
				len -= (size_t)n;
				continue;
			}
		}
		if (progress) {
			ret = mp_progress(mp);
			if (ret)
				return ret;
		}
		ret = mp_check_deadline(mp, what);
		if (ret)
			return ret;
	}
	return 0;
}

/* The peer's reason for failing, printed and kept as ours. */
static int mp_ctl_take_fail(struct mp *mp, uint32_t len)
{
	char text[512], sink[64];
	size_t keep = len < sizeof(text) - 1 ? len : sizeof(text) - 1, rest = len - keep;
	int ret;

	ret = mp_ctl_read(mp, text, keep, false, "the peer's failure message");
	while (!ret && rest) {
		size_t n = rest < sizeof(sink) ? rest : sizeof(sink);

		ret = mp_ctl_read(mp, sink, n, false, "the peer's failure message");
		rest -= n;
	}
	text[ret ? 0 : keep] = '\0';
	return mp_fail(mp, -FI_ECONNABORTED, "%s: %s", mp->server ? "clients" : "server", text);
}

/*
 * Receive a message of the expected type into buf (at most max bytes, *len set), progressing
 * the fabric while nothing has arrived when progress is set.
 */
static int mp_ctl_recv(struct mp *mp, uint32_t type, void *buf, size_t max, size_t *len,
		       bool progress, const char *what)
{
	struct mp_ctl_hdr h;
	int ret;

	ret = mp_ctl_read(mp, &h, sizeof(h), progress, what);
	if (ret)
		return ret;
	if (h.type == MP_CTL_FAIL)
		return mp_ctl_take_fail(mp, h.len);
	if (h.type != type || h.len > max)
		return mp_fail(mp, -FI_EOTHER, "control channel: message %u of %u bytes while "
			       "waiting for %s (type %u, at most %zu bytes)", h.type, h.len, what,
			       type, max);
	if (len)
		*len = h.len;
	return mp_ctl_read(mp, buf, h.len, false, what);
}

/*
 * Between fabric polls: the deadline, and now and then whether the other process failed (it
 * then sent its reason, or closed the channel), so that a dead peer ends the wait at once.
 */
static int mp_check(struct mp *mp, unsigned int *spins, const char *what)
{
	struct pollfd p = { .fd = mp->ctl, .events = POLLIN };
	struct mp_ctl_hdr h;
	uint64_t now;
	ssize_t n;
	int ret;

	if ((++*spins % MP_CHECK_SPINS) != 0 && !mp_alarm_soft)
		return 0;
	ret = mp_check_deadline(mp, what);
	if (ret)
		return ret;
	now = cour_ft_now_ns();
	if (now < mp->next_peer_check_ns)
		return 0;
	mp->next_peer_check_ns = now + MP_PEER_CHECK_NS;
	if (poll(&p, 1, 0) <= 0)
		return 0;
	n = recv(mp->ctl, &h, sizeof(h), MSG_PEEK | MSG_DONTWAIT);
	if (n == 0)
		return mp_fail(mp, -FI_ECONNRESET, "the %s process went away while we waited "
			       "for %s", mp->server ? "clients" : "server", what);
	if (n == (ssize_t)sizeof(h) && h.type == MP_CTL_FAIL) {
		n = read(mp->ctl, &h, sizeof(h));
		(void)n;
		return mp_ctl_take_fail(mp, h.len);
	}
	return 0;
}

/* ---- completions ---- */

static void mp_bad(struct mp *mp, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void mp_bad(struct mp *mp, const char *fmt, ...)
{
	char msg[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (!mp->bad)
		mp_fail(mp, -FI_EIO, "%s", msg);
	mp->bad = -FI_EIO;
}

static uint64_t mp_load64(const void *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* Server: one message of this kind from each client, whole, with that client's payload. */
static void mp_check_from_client(struct mp *mp, const struct mp_op *op,
				 const struct fi_cq_tagged_entry *c)
{
	bool hello = op->kind == MP_K_HELLO;
	size_t want = hello ? MP_SMALL_LEN : MP_BURST_LEN, bad_off;
	const char *buf = hello ? mp->small + (size_t)op->idx * MP_SMALL_LEN :
			  mp->burst + (size_t)op->idx * MP_BURST_LEN;
	uint64_t client = c->tag & MP_TAG_LOW;
	uint8_t bit = (uint8_t)(1u << op->kind);

	if (c->len != want || client >= (uint64_t)mp->o.nclients)
		mp_bad(mp, "%s: len %zu tag 0x%llx", mp_kind_name[op->kind], c->len,
		       (unsigned long long)c->tag);
	else if (mp->seen[client] & bit)
		mp_bad(mp, "%s: client %llu's arrived twice", mp_kind_name[op->kind],
		       (unsigned long long)client);
	else if (hello && mp_load64(buf) != client)
		mp_bad(mp, "first contact: client %llu sent %llu", (unsigned long long)client,
		       (unsigned long long)mp_load64(buf));
	else if (!hello && cour_ft_check(buf, want, client, &bad_off))
		mp_bad(mp, "burst: client %llu's message differs at offset %zu: 0x%02x, "
		       "expected 0x%02x", (unsigned long long)client, bad_off,
		       (uint8_t)buf[bad_off], cour_ft_pattern_byte(client, bad_off));
	else
		mp->seen[client] |= bit;
}

static void mp_check_rx(struct mp *mp, const struct mp_op *op, const struct fi_cq_tagged_entry *c)
{
	uint64_t low = c->tag & MP_TAG_LOW;

	switch (op->kind) {
	case MP_K_HELLO:
	case MP_K_BURST:
		mp_check_from_client(mp, op, c);
		break;
	case MP_K_REPLY:
		if (c->len != MP_SMALL_LEN ||
		    mp_load64(mp->reply + (size_t)op->idx * MP_SMALL_LEN) != (op->idx ^ MP_REPLY_XOR))
			mp_bad(mp, "client %u: wrong reply (len %zu)", op->idx, c->len);
		break;
	case MP_K_RATE:
		if (c->len != MP_SMALL_LEN || low < mp->rate_first ||
		    low >= mp->rate_first + (uint64_t)mp->window ||
		    mp_load64(mp->rate + (size_t)op->idx * MP_SMALL_LEN) != low)
			mp_bad(mp, "rate: message tag 0x%llx len %zu outside the window at %llu",
			       (unsigned long long)c->tag, c->len,
			       (unsigned long long)mp->rate_first);
		else if (c->tag & MP_TAG_LAST)
			mp->rate_last = true;
		break;
	case MP_K_ACK:
		if (c->len != MP_SMALL_LEN || mp_load64(mp->ack) != mp->rate_win)
			mp_bad(mp, "rate: acknowledgement %llu, expected window %llu",
			       (unsigned long long)mp_load64(mp->ack),
			       (unsigned long long)mp->rate_win);
		break;
	}
}

static int mp_read_err(struct mp *mp, struct fid_cq *cq)
{
	struct fi_cq_err_entry err = { 0 };
	const struct mp_op *op;
	const char *pstr;
	char pbuf[256];
	ssize_t ret;

	ret = fi_cq_readerr(cq, &err, 0);
	if (ret < 0)
		return MP_FIERR(mp, ret, "fi_cq_readerr");
	if (ret == 0)
		return 0;
	op = err.op_context;
	pstr = fi_cq_strerror(cq, err.prov_errno, err.err_data, pbuf, sizeof(pbuf));
	return mp_fail(mp, err.err ? -err.err : -FI_EOTHER, "completion error on %s (client %d): "
		       "%d (%s), provider: %d (%s)",
		       op && op->kind < MP_K_MAX ? mp_kind_name[op->kind] : "an unknown operation",
		       op ? (int)op->idx : -1, err.err, fi_strerror(err.err), err.prov_errno,
		       pstr ? pstr : "?");
}

static int mp_read_cq(struct mp *mp, struct fid_cq *cq)
{
	struct fi_cq_tagged_entry comp[MP_CQ_BATCH];
	ssize_t ret, i;

	ret = fi_cq_read(cq, comp, MP_CQ_BATCH);
	if (ret == -FI_EAGAIN || ret == 0)
		return 0;
	if (ret == -FI_EAVAIL)
		return mp_read_err(mp, cq);
	if (ret < 0)
		return MP_FIERR(mp, ret, "fi_cq_read");
	for (i = 0; i < ret; i++) {
		struct mp_op *op = comp[i].op_context;

		if (!op || op->kind >= MP_K_MAX) {
			mp_bad(mp, "completion with unknown context %p", (void *)op);
			continue;
		}
		mp->done[op->kind]++;
		if (op->rx)
			mp_check_rx(mp, op, &comp[i]);
	}
	return mp->bad;
}

static int mp_read_other_cqs(struct mp *mp)
{
	int i, ret;

	for (i = 0; i < mp->ncq; i++) {
		if (i == mp->hot_cq)
			continue;
		ret = mp_read_cq(mp, mp->cqs[i]);
		if (ret)
			return ret;
	}
	return 0;
}

static int mp_progress(struct mp *mp)
{
	uint64_t now;
	int ret;

	if (mp->hot_cq < 0)
		return mp_read_other_cqs(mp);
	ret = mp_read_cq(mp, mp->cqs[mp->hot_cq]);
	if (ret || mp->ncq == 1 || (++mp->hot_spins % MP_CHECK_SPINS) != 0)
		return ret;
	/*
	 * The idle clients still get their acknowledgements, but a pass over thousands of
	 * endpoints takes milliseconds (a socket each): spent in client 0's thread, it would cap
	 * the rate we measure at the sender, so it gets a bounded share of the time.
	 */
	now = cour_ft_now_ns();
	if (now < mp->next_idle_cq_ns)
		return 0;
	ret = mp_read_other_cqs(mp);
	mp->next_idle_cq_ns = cour_ft_now_ns();
	mp->next_idle_cq_ns += (mp->next_idle_cq_ns - now) * MP_IDLE_CQ_SHARE > MP_IDLE_CQ_NS ?
			       (mp->next_idle_cq_ns - now) * MP_IDLE_CQ_SHARE : MP_IDLE_CQ_NS;
	return ret;
}

static int mp_wait(struct mp *mp, enum mp_kind kind, uint64_t target)
{
	unsigned int spins = 0;
	int ret;

	while (mp->done[kind] < target) {
		ret = mp_progress(mp);
		if (!ret)
			ret = mp_check(mp, &spins, mp_kind_name[kind]);
		if (ret)
			return ret;
	}
	return 0;
}

/* Progress for ms milliseconds (the idle period: timers and lazy acknowledgements run). */
static int mp_idle(struct mp *mp, int ms)
{
	uint64_t end = cour_ft_now_ns() + (uint64_t)ms * 1000000ULL;
	unsigned int spins = 0;
	int ret;

	while (cour_ft_now_ns() < end) {
		ret = mp_progress(mp);
		if (!ret)
			ret = mp_check(mp, &spins, "the idle period to end");
		if (ret)
			return ret;
	}
	return 0;
}

/* ---- posting ---- */

static inline int mp_dom_of(const struct mp *mp, int epi)
{
	return epi == 0 || mp->ndom == 1 ? 0 : 1;
}

/* Clients: the server's address as endpoint epi's AV knows it. */
static inline fi_addr_t mp_server_addr(const struct mp *mp, int epi)
{
	return mp->peer[mp_dom_of(mp, epi)];
}

static ssize_t mp_try_post(struct mp *mp, struct mp_op *op, int epi, void *buf, size_t len,
			   fi_addr_t addr, uint64_t tag, uint64_t ignore)
{
	void *desc = mp->desc[mp_dom_of(mp, epi)];

	if (op->rx)
		return fi_trecv(mp->eps[epi], buf, len, desc, addr, tag, ignore, op);
	return fi_tsend(mp->eps[epi], buf, len, desc, addr, tag, op);
}

/* Post, retrying -FI_EAGAIN (a full queue) while the fabric progresses, until the deadline. */
static int mp_post(struct mp *mp, struct mp_op *op, int epi, void *buf, size_t len,
		   fi_addr_t addr, uint64_t tag, uint64_t ignore)
{
	unsigned int spins = 0;
	ssize_t ret;

	for (;;) {
		ret = mp_try_post(mp, op, epi, buf, len, addr, tag, ignore);
		if (ret == 0) {
			mp->posted[op->kind]++;
			return 0;
		}
		if (ret != -FI_EAGAIN)
			return MP_FIERR(mp, ret, "%s(%s, client %u)", op->rx ? "fi_trecv" : "fi_tsend",
					mp_kind_name[op->kind], op->idx);
		ret = mp_progress(mp);
		if (!ret)
			ret = mp_check(mp, &spins, "room in a queue to post");
		if (ret)
			return (int)ret;
	}
}

/*
 * Server: post the receives for one message per client, as many as the provider takes now
 * (a receive queue may be shorter than N); the rest go in as completions free room.
 */
static int mp_fill_rx(struct mp *mp, enum mp_kind kind)
{
	size_t len = kind == MP_K_HELLO ? MP_SMALL_LEN : MP_BURST_LEN;
	char *base = kind == MP_K_HELLO ? mp->small : mp->burst;
	ssize_t ret;

	while (mp->posted[kind] < (uint64_t)mp->o.nclients) {
		uint32_t slot = (uint32_t)mp->posted[kind];
		struct mp_op *op = &mp->ops[kind][slot];

		ret = mp_try_post(mp, op, 0, base + (size_t)slot * len, len, FI_ADDR_UNSPEC,
				  mp_tag(kind), MP_TAG_LOW);
		if (ret == -FI_EAGAIN)
			return 0;
		if (ret)
			return MP_FIERR(mp, ret, "fi_trecv(%s, receive %u of %d)",
					mp_kind_name[kind], slot + 1, mp->o.nclients);
		mp->posted[kind]++;
	}
	return 0;
}

/* Server: until one message of this kind has come from every client; *t_all its time. */
static int mp_recv_all(struct mp *mp, enum mp_kind kind, uint64_t *t_all)
{
	uint64_t target = (uint64_t)mp->o.nclients, filled_at = mp->done[kind];
	unsigned int spins = 0;
	int ret;

	while (mp->done[kind] < target) {
		if (mp->posted[kind] < target && mp->done[kind] != filled_at) {
			filled_at = mp->done[kind];
			ret = mp_fill_rx(mp, kind);
			if (ret)
				return ret;
		}
		ret = mp_progress(mp);
		if (!ret)
			ret = mp_check(mp, &spins, mp_kind_name[kind]);
		if (ret) {
			if (ret == -FI_ETIMEDOUT)
				fprintf(stderr, "cour_manypeer (server): %llu of %d %s received, %llu "
					"receives posted\n", (unsigned long long)mp->done[kind],
					mp->o.nclients, mp_kind_name[kind],
					(unsigned long long)mp->posted[kind]);
			return ret;
		}
	}
	*t_all = cour_ft_now_ns();
	return 0;
}

/* ---- opening ---- */

static int mp_getinfo(struct mp *mp)
{
	struct fi_info *hints, *list, *pick;
	int ret;

	hints = fi_allocinfo();
	if (!hints)
		return mp_fail(mp, -FI_ENOMEM, "fi_allocinfo: out of memory");
	hints->caps = FI_MSG | FI_TAGGED;
	hints->ep_attr->type = FI_EP_RDM;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	/* no FI_MR_ENDPOINT: one registration per process serves all its endpoints */
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
				      FI_MR_PROV_KEY;
	if (mp->o.prov) {
		hints->fabric_attr->prov_name = strdup(mp->o.prov);
		if (!hints->fabric_attr->prov_name) {
			fi_freeinfo(hints);
			return mp_fail(mp, -FI_ENOMEM, "strdup: out of memory");
		}
	}
	/* the program polls; a provider that only has automatic progress gets a second ask */
	hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	/* every endpoint binds 127.0.0.1 and a port of its own */
	ret = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), "127.0.0.1", NULL,
			 FI_SOURCE, hints, &list);
	if (ret == -FI_ENODATA) {
		hints->domain_attr->data_progress = FI_PROGRESS_UNSPEC;
		ret = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), "127.0.0.1",
				 NULL, FI_SOURCE, hints, &list);
	}
	fi_freeinfo(hints);
	if (ret)
		return MP_FIERR(mp, ret, "fi_getinfo(provider %s, rdm, msg|tagged, 127.0.0.1)",
				mp->o.prov ? mp->o.prov : "any");
	/* "-p courier" means courier itself, not a utility provider layered over it */
	for (pick = list; pick; pick = pick->next)
		if (!mp->o.prov || !strcmp(pick->fabric_attr->prov_name, mp->o.prov))
			break;
	mp->info = fi_dupinfo(pick ? pick : list);
	fi_freeinfo(list);
	if (!mp->info)
		return mp_fail(mp, -FI_ENOMEM, "fi_dupinfo: out of memory");
	return 0;
}

static int mp_arena(struct mp *mp)
{
	size_t n = (size_t)mp->o.nclients, off = 0;
	int ret;

	mp->window = mp->o.window;
	/* a window is posted before the acknowledgement that lets the client send it */
	if (mp->info->rx_attr->size && (size_t)mp->window > mp->info->rx_attr->size)
		mp->window = (int)mp->info->rx_attr->size;
	mp->arena_len = n * MP_BURST_LEN + 2 * n * MP_SMALL_LEN +
			(size_t)mp->window * MP_SMALL_LEN + MP_SMALL_LEN;
	ret = posix_memalign((void **)&mp->arena, COUR_FT_ALIGN, mp->arena_len);
	if (ret)
		return mp_fail(mp, -FI_ENOMEM, "posix_memalign(%zu): out of memory", mp->arena_len);
	/* touched now, so that none of it shows in the server's memory deltas */
	memset(mp->arena, 0, mp->arena_len);
	mp->burst = mp->arena + off;
	off += n * MP_BURST_LEN;
	mp->small = mp->arena + off;
	off += n * MP_SMALL_LEN;
	mp->reply = mp->arena + off;
	off += n * MP_SMALL_LEN;
	mp->rate = mp->arena + off;
	off += (size_t)mp->window * MP_SMALL_LEN;
	mp->ack = mp->arena + off;
	return 0;
}

static int mp_ops_alloc(struct mp *mp)
{
	size_t n = (size_t)mp->o.nclients;
	int k;

	for (k = 0; k < MP_K_MAX; k++) {
		size_t cnt = k == MP_K_RATE ? (size_t)mp->window : k == MP_K_ACK ? 1 : n;
		size_t i;

		mp->ops[k] = calloc(cnt, sizeof(*mp->ops[k]));
		if (!mp->ops[k])
			return mp_fail(mp, -FI_ENOMEM, "out of memory for %zu operations", cnt);
		for (i = 0; i < cnt; i++) {
			mp->ops[k][i].kind = (uint32_t)k;
			mp->ops[k][i].idx = (uint32_t)i;
			/* the server receives all but replies and acks; the clients the reverse */
			mp->ops[k][i].rx = mp->server == (k != MP_K_REPLY && k != MP_K_ACK);
		}
	}
	mp->seen = calloc(n, 1);
	return mp->seen ? 0 : mp_fail(mp, -FI_ENOMEM, "out of memory");
}

/* A domain with its AV, and the buffers registered in it if the provider wants that. */
static int mp_open_one_domain(struct mp *mp, int d, size_t av_count)
{
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE, .count = av_count };
	int ret;

	ret = fi_domain(mp->fabric, mp->info, &mp->dom[d], NULL);
	if (ret)
		return MP_FIERR(mp, ret, "fi_domain(%d)", d);
	mp->ndom++;
	ret = fi_av_open(mp->dom[d], &av_attr, &mp->av[d], NULL);
	if (ret)
		return MP_FIERR(mp, ret, "fi_av_open(count %zu)", av_count);
	if (mp->info->domain_attr->mr_mode & FI_MR_LOCAL) {
		ret = fi_mr_reg(mp->dom[d], mp->arena, mp->arena_len, FI_SEND | FI_RECV, 0, 1, 0,
				&mp->mr[d], NULL);
		if (ret)
			return MP_FIERR(mp, ret, "fi_mr_reg(%zu bytes)", mp->arena_len);
		mp->desc[d] = fi_mr_desc(mp->mr[d]);
	}
	return 0;
}

/* Fabric, domains, AVs, buffers: what both processes open before their endpoints. */
static int mp_open_domains(struct mp *mp, int ndom, size_t av_count)
{
	int d, ret;

	ret = mp_getinfo(mp);
	if (ret)
		return ret;
	ret = fi_fabric(mp->info->fabric_attr, &mp->fabric, NULL);
	if (ret)
		return MP_FIERR(mp, ret, "fi_fabric");
	ret = mp_arena(mp);
	for (d = 0; !ret && d < ndom; d++)
		ret = mp_open_one_domain(mp, d, av_count);
	return ret ? ret : mp_ops_alloc(mp);
}

/* One CQ per domain. */
static int mp_open_cqs(struct mp *mp, int ncq, size_t size)
{
	struct fi_cq_attr attr = {
		.format = FI_CQ_FORMAT_TAGGED,
		.wait_obj = FI_WAIT_NONE,
		.size = size,
	};
	int i, ret;

	mp->cqs = calloc((size_t)ncq, sizeof(*mp->cqs));
	if (!mp->cqs)
		return mp_fail(mp, -FI_ENOMEM, "out of memory");
	for (i = 0; i < ncq; i++) {
		ret = fi_cq_open(mp->dom[i], &attr, &mp->cqs[i], NULL);
		if (ret)
			return MP_FIERR(mp, ret, "fi_cq_open(%d of %d, size %zu)", i + 1, ncq, size);
		mp->ncq++;
	}
	return 0;
}

static int mp_open_ep(struct mp *mp, int i)
{
	const char *who = mp->server ? "server" : "client";
	int d = mp_dom_of(mp, i);
	struct fid_cq *cq = mp->cqs[d];
	bool permitted = false;
	struct fid_ep *ep;
	int ret;

	ret = fi_endpoint(mp->dom[d], mp->info, &ep, NULL);
	if (ret)
		return MP_FIERR(mp, ret, "fi_endpoint(%s %d of %d)", who, i + 1, mp->nep);
	mp->eps[i] = ep;
	ret = fi_ep_bind(ep, &mp->av[d]->fid, 0);
	if (ret)
		return MP_FIERR(mp, ret, "fi_ep_bind(%s %d of %d, av)", who, i + 1, mp->nep);
	ret = fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV);
	if (ret)
		return MP_FIERR(mp, ret, "fi_ep_bind(%s %d of %d, cq)", who, i + 1, mp->nep);
	if (mp->o.no_shm) {
		ret = fi_setopt(&ep->fid, FI_OPT_ENDPOINT, FI_COURIER_OPT_SHARED_MEMORY_PERMITTED,
				&permitted, sizeof(permitted));
		if (ret)
			return MP_FIERR(mp, ret, "fi_setopt(%s %d, SHARED_MEMORY_PERMITTED false)",
					who, i + 1);
	}
	ret = fi_enable(ep);
	if (ret)
		return MP_FIERR(mp, ret, "fi_enable(%s %d of %d)", who, i + 1, mp->nep);
	return 0;
}

/*
 * Clients: stop early, with the figures, when N endpoints would take more memory than the
 * limit (ofi_rxm takes tens of MB per endpoint) or more time than the phase has.
 */
static int mp_check_open(struct mp *mp, int opened, const struct mp_mem *m0)
{
	struct mp_mem m;
	double per_kb, need_kb;
	int ret;

	if (mp_alarm_soft || cour_ft_now_ns() >= mp->deadline_ns)
		return mp_fail(mp, -FI_ETIMEDOUT, "timed out after %d s opening endpoints: %d of "
			       "%d open", mp->o.timeout_s, opened, mp->nep);
	if (mp->server || (opened != 8 && opened % 64 != 0) || opened == mp->nep)
		return 0;
	ret = mp_mem_read(mp, &m);
	if (ret)
		return ret;
	per_kb = (double)(m.rss_kb - m0->rss_kb) / opened;
	need_kb = per_kb * mp->nep;
	if (mp->mem_limit_kb && need_kb > (double)mp->mem_limit_kb)
		return mp_fail(mp, -FI_ENOMEM, "%d endpoints would need %.0f MB (%.2f MB each "
			       "after %d), more than the clients' limit of %zu MB (-m)", mp->nep,
			       need_kb / 1024, per_kb / 1024, opened, mp->mem_limit_kb / 1024);
	return 0;
}

static int mp_open_eps(struct mp *mp, int nep)
{
	struct mp_mem m0;
	int i, ret;

	mp->eps = calloc((size_t)nep, sizeof(*mp->eps));
	if (!mp->eps)
		return mp_fail(mp, -FI_ENOMEM, "out of memory for %d endpoints", nep);
	mp->nep = nep;
	/* completions of both directions of every exchange can be unread at once */
	ret = mp_open_cqs(mp, mp->ndom, 2 * (size_t)mp->o.nclients + 1024);
	if (!ret)
		ret = mp_mem_read(mp, &m0);
	for (i = 0; !ret && i < nep; i++) {
		ret = mp_open_ep(mp, i);
		if (!ret)
			ret = mp_check_open(mp, i + 1, &m0);
	}
	if (ret)
		return ret;
	mp->name_len = sizeof(mp->name);
	ret = fi_getname(&mp->eps[0]->fid, mp->name, &mp->name_len);
	return ret ? MP_FIERR(mp, ret, "fi_getname") : 0;
}

static void mp_close_fid(struct mp *mp, struct fid *fid, const char *what)
{
	int ret;

	if (!fid)
		return;
	ret = fi_close(fid);
	if (ret)
		MP_FIERR(mp, ret, "fi_close(%s)", what);
}

static void mp_close(struct mp *mp)
{
	int i;

	for (i = 0; mp->eps && i < mp->nep; i++)
		mp_close_fid(mp, mp->eps[i] ? &mp->eps[i]->fid : NULL, "endpoint");
	for (i = 0; i < mp->ndom; i++)
		mp_close_fid(mp, mp->av[i] ? &mp->av[i]->fid : NULL, "av");
	for (i = 0; i < mp->ncq; i++)
		mp_close_fid(mp, &mp->cqs[i]->fid, "cq");
	for (i = 0; i < mp->ndom; i++) {
		mp_close_fid(mp, mp->mr[i] ? &mp->mr[i]->fid : NULL, "mr");
		mp_close_fid(mp, &mp->dom[i]->fid, "domain");
	}
	mp_close_fid(mp, mp->fabric ? &mp->fabric->fid : NULL, "fabric");
	if (mp->info)
		fi_freeinfo(mp->info);
	for (i = 0; i < MP_K_MAX; i++)
		free(mp->ops[i]);
	free(mp->eps);
	free(mp->cqs);
	free(mp->peer);
	free(mp->seen);
	free(mp->arena);
}

/* ---- the clients (child process) ---- */

/* NAMES: open time (ns), RSS growth (kB) for the N endpoints, then each address length-prefixed. */
static int mp_clients_send_names(struct mp *mp, uint64_t open_ns, int64_t rss_kb)
{
	size_t cap = 16 + (size_t)mp->nep * (4 + COUR_FT_MAX_NAME), off = 16;
	char *buf = malloc(cap);
	int i, ret = 0;

	if (!buf)
		return mp_fail(mp, -FI_ENOMEM, "out of memory");
	memcpy(buf, &open_ns, 8);
	memcpy(buf + 8, &rss_kb, 8);
	for (i = 0; i < mp->nep; i++) {
		size_t len = COUR_FT_MAX_NAME;
		uint32_t len32;

		ret = fi_getname(&mp->eps[i]->fid, buf + off + 4, &len);
		if (ret) {
			ret = MP_FIERR(mp, ret, "fi_getname(client %d)", i + 1);
			break;
		}
		len32 = (uint32_t)len;
		memcpy(buf + off, &len32, 4);
		off += 4 + len;
	}
	if (!ret)
		ret = mp_ctl_send(mp, MP_CTL_NAMES, buf, off);
	free(buf);
	return ret;
}

static int mp_clients_setup(struct mp *mp)
{
	char srv[COUR_FT_MAX_NAME];
	struct mp_mem m0, m1;
	uint64_t t0;
	size_t len;
	int d, i, ret;

	mp_phase(mp, "setup");
	ret = mp_open_domains(mp, mp->o.nclients > 1 ? 2 : 1, 1);
	if (!ret)
		ret = mp_mem_read(mp, &m0);
	t0 = cour_ft_now_ns();
	if (!ret)
		ret = mp_open_eps(mp, mp->o.nclients);
	if (!ret)
		ret = mp_mem_read(mp, &m1);
	if (ret)
		return ret;
	t0 = cour_ft_now_ns() - t0;
	for (i = 0; i < mp->nep; i++)
		cour_ft_fill(mp->burst + (size_t)i * MP_BURST_LEN, MP_BURST_LEN, (uint64_t)i);

	ret = mp_ctl_recv(mp, MP_CTL_NAME, srv, sizeof(srv), &len, false, "the server's address");
	if (ret)
		return ret;
	mp->peer = calloc((size_t)mp->ndom, sizeof(*mp->peer));
	if (!mp->peer)
		return mp_fail(mp, -FI_ENOMEM, "out of memory");
	for (d = 0; d < mp->ndom; d++) {
		ret = fi_av_insert(mp->av[d], srv, 1, &mp->peer[d], 0, NULL);
		if (ret != 1)
			return MP_FIERR(mp, ret < 0 ? ret : -FI_EINVAL, "fi_av_insert(the server)");
	}
	return mp_clients_send_names(mp, t0, m1.rss_kb - m0.rss_kb);
}

static int mp_clients_hello(struct mp *mp)
{
	int n = mp->o.nclients, i, ret;
	uint64_t t0;

	ret = mp_ctl_recv(mp, MP_CTL_GO_HELLO, NULL, 0, NULL, true, "the server's go");
	if (ret)
		return ret;
	mp_phase(mp, "first contact");
	/* each reply finds its receive posted */
	for (i = 0; i < n; i++) {
		ret = mp_post(mp, &mp->ops[MP_K_REPLY][i], i, mp->reply + (size_t)i * MP_SMALL_LEN,
			      MP_SMALL_LEN, mp_server_addr(mp, i), mp_tag(MP_K_REPLY) | (uint64_t)i, 0);
		if (ret)
			return ret;
		memcpy(mp->small + (size_t)i * MP_SMALL_LEN, &(uint64_t){ (uint64_t)i }, 8);
	}
	t0 = cour_ft_now_ns();
	for (i = 0; i < n; i++) {
		ret = mp_post(mp, &mp->ops[MP_K_HELLO][i], i, mp->small + (size_t)i * MP_SMALL_LEN,
			      MP_SMALL_LEN, mp_server_addr(mp, i), mp_tag(MP_K_HELLO) | (uint64_t)i, 0);
		if (ret)
			return ret;
	}
	ret = mp_wait(mp, MP_K_HELLO, (uint64_t)n);
	if (!ret)
		ret = mp_wait(mp, MP_K_REPLY, (uint64_t)n);
	return ret ? ret : mp_ctl_send(mp, MP_CTL_DONE_HELLO, &t0, sizeof(t0));
}

static int mp_clients_burst(struct mp *mp)
{
	int n = mp->o.nclients, i, ret;
	uint64_t t0;

	ret = mp_ctl_recv(mp, MP_CTL_GO_BURST, NULL, 0, NULL, true, "the server's go");
	if (ret)
		return ret;
	mp_phase(mp, "burst");
	t0 = cour_ft_now_ns();
	for (i = 0; i < n; i++) {
		ret = mp_post(mp, &mp->ops[MP_K_BURST][i], i, mp->burst + (size_t)i * MP_BURST_LEN,
			      MP_BURST_LEN, mp_server_addr(mp, i), mp_tag(MP_K_BURST) | (uint64_t)i, 0);
		if (ret)
			return ret;
	}
	/* unexpected at the server: a provider may complete our sends only once it posts */
	if (mp->o.unexp_burst) {
		ret = mp_ctl_send(mp, MP_CTL_POSTED_BURST, NULL, 0);
		if (ret)
			return ret;
	}
	ret = mp_wait(mp, MP_K_BURST, (uint64_t)n);
	return ret ? ret : mp_ctl_send(mp, MP_CTL_DONE_BURST, &t0, sizeof(t0));
}

/* Client 0 streams windows; the time runs from the first timed window to the last ack. */
static int mp_clients_rate(struct mp *mp)
{
	uint64_t start = 0, w, seq = 0, res[2];
	bool last = false;
	int j, ret;

	ret = mp_ctl_recv(mp, MP_CTL_GO_RATE, NULL, 0, NULL, true, "the server's go");
	if (ret)
		return ret;
	mp_phase(mp, "rate");
	mp->hot_cq = 0;
	for (w = 0; !last; w++) {
		if (w == MP_RATE_WARM_WINDOWS)
			start = cour_ft_now_ns();
		if (w >= MP_RATE_WARM_WINDOWS)
			last = mp->o.rate_msgs ?
			       (w + 1 - MP_RATE_WARM_WINDOWS) * (uint64_t)mp->window >=
			       (uint64_t)mp->o.rate_msgs :
			       (double)(cour_ft_now_ns() - start) >= mp->o.rate_secs * 1e9;
		mp->rate_win = w;
		ret = mp_post(mp, &mp->ops[MP_K_ACK][0], 0, mp->ack, MP_SMALL_LEN, mp->peer[0],
			      mp_tag(MP_K_ACK), 0);
		for (j = 0; !ret && j < mp->window; j++, seq++) {
			memcpy(mp->rate + (size_t)j * MP_SMALL_LEN, &seq, sizeof(seq));
			ret = mp_post(mp, &mp->ops[MP_K_RATE][j], 0,
				      mp->rate + (size_t)j * MP_SMALL_LEN, MP_SMALL_LEN, mp->peer[0],
				      mp_tag(MP_K_RATE) | (last ? MP_TAG_LAST : 0) |
				      (seq & MP_TAG_LOW), 0);
		}
		if (!ret)
			ret = mp_wait(mp, MP_K_RATE, mp->posted[MP_K_RATE]);
		if (!ret)
			ret = mp_wait(mp, MP_K_ACK, mp->posted[MP_K_ACK]);
		if (ret)
			return ret;
		if (w + 1 == MP_RATE_WARM_WINDOWS)
			mp_phase(mp, "rate");	/* the timed part gets a whole -T of its own */
	}
	res[0] = (w - MP_RATE_WARM_WINDOWS) * (uint64_t)mp->window;
	res[1] = cour_ft_now_ns() - start;
	mp->hot_cq = -1;
	return mp_ctl_send(mp, MP_CTL_DONE_RATE, res, sizeof(res));
}

static int mp_clients_main(struct mp *mp)
{
	int ret;

	ret = mp_clients_setup(mp);
	if (!ret)
		ret = mp_clients_hello(mp);
	if (!ret)
		ret = mp_clients_burst(mp);
	if (!ret && (mp->o.rate_msgs || mp->o.rate_secs > 0))
		ret = mp_clients_rate(mp);
	if (!ret) {
		mp_phase(mp, "end");
		ret = mp_ctl_recv(mp, MP_CTL_QUIT, NULL, 0, NULL, true, "the server's quit");
	}
	/* the server prints our reason in its FAIL line (unless it is the one that failed) */
	if (ret && ret != -FI_ECONNABORTED && ret != -FI_ECONNRESET)
		mp_ctl_send(mp, MP_CTL_FAIL, mp->why, strlen(mp->why));
	mp_phase(mp, "close");
	mp_close(mp);
	return ret ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* ---- the server (parent process) ---- */

static int mp_server_names(struct mp *mp)
{
	size_t cap = 16 + (size_t)mp->o.nclients * (4 + COUR_FT_MAX_NAME), len, off = 16;
	char *buf = malloc(cap);
	uint64_t open_ns, t0;
	int64_t rss_kb;
	int i, ret;

	if (!buf)
		return mp_fail(mp, -FI_ENOMEM, "out of memory");
	mp->peer = calloc((size_t)mp->o.nclients, sizeof(*mp->peer));
	ret = mp->peer ? mp_ctl_send(mp, MP_CTL_NAME, mp->name, mp->name_len) :
	      mp_fail(mp, -FI_ENOMEM, "out of memory");
	if (!ret)
		ret = mp_ctl_recv(mp, MP_CTL_NAMES, buf, cap, &len, false,
				  "the clients' addresses (the clients process opens its endpoints)");
	if (ret)
		goto out;
	memcpy(&open_ns, buf, 8);
	memcpy(&rss_kb, buf + 8, 8);
	mp->r.have_ep = true;
	mp->r.ep_open_ms = (double)open_ns / 1e6;
	mp->r.ep_bytes = (double)rss_kb * 1024.0 / mp->o.nclients;
	/* one insert per address, as addresses trickle in; the time is for the record */
	t0 = cour_ft_now_ns();
	for (i = 0; i < mp->o.nclients; i++) {
		uint32_t nlen;

		if (off + 4 > len)
			break;
		memcpy(&nlen, buf + off, 4);
		if (off + 4 + nlen > len)
			break;
		ret = fi_av_insert(mp->av[0], buf + off + 4, 1, &mp->peer[i], 0, NULL);
		if (ret != 1) {
			ret = MP_FIERR(mp, ret < 0 ? ret : -FI_EINVAL, "fi_av_insert(client %d)",
				       i + 1);
			goto out;
		}
		off += 4 + nlen;
	}
	mp->r.insert_ms = (double)(cour_ft_now_ns() - t0) / 1e6;
	ret = i < mp->o.nclients ?
	      mp_fail(mp, -FI_EOTHER, "the clients sent %d addresses of %d", i, mp->o.nclients) : 0;
out:
	free(buf);
	return ret;
}

static void mp_result(struct mp *mp, const char *name, double v, const char *fmt)
{
	printf("RESULT %s %d ", name, mp->o.nclients);
	printf(fmt, v);
	printf("\n");
	fflush(stdout);
}

static int mp_server_hello(struct mp *mp)
{
	int n = mp->o.nclients, i, ret;
	uint64_t t_all, t0;

	mp_phase(mp, "first contact");
	ret = mp_fill_rx(mp, MP_K_HELLO);
	if (!ret)
		ret = mp_mem_read(mp, &mp->mem_start);
	if (!ret)
		ret = mp_ctl_send(mp, MP_CTL_GO_HELLO, NULL, 0);
	if (!ret)
		ret = mp_recv_all(mp, MP_K_HELLO, &t_all);
	/* answered only once all are in, so the first-contact time is receiving alone */
	for (i = 0; !ret && i < n; i++) {
		uint64_t v = (uint64_t)i ^ MP_REPLY_XOR;

		memcpy(mp->reply + (size_t)i * MP_SMALL_LEN, &v, sizeof(v));
		ret = mp_post(mp, &mp->ops[MP_K_REPLY][i], 0, mp->reply + (size_t)i * MP_SMALL_LEN,
			      MP_SMALL_LEN, mp->peer[i], mp_tag(MP_K_REPLY) | (uint64_t)i, 0);
	}
	if (!ret)
		ret = mp_wait(mp, MP_K_REPLY, (uint64_t)n);
	if (!ret)
		ret = mp_ctl_recv(mp, MP_CTL_DONE_HELLO, &t0, sizeof(t0), NULL, true,
				  "the clients' replies");
	if (ret)
		return ret;
	mp->r.have_contact = true;
	mp->r.contact_ms = (double)(t_all - t0) / 1e6;
	mp_result(mp, "first_contact_ms", mp->r.contact_ms, "%.3f");
	mp_result(mp, "first_contact_us_per_peer", mp->r.contact_ms * 1e3 / n, "%.2f");

	mp_phase(mp, "idle");
	ret = mp_idle(mp, mp->o.idle_ms);
	if (!ret)
		ret = mp_mem_read(mp, &mp->mem_idle);
	if (ret)
		return ret;
	mp->r.have_idle = true;
	mp->r.idle_bpp = mp_per(mp->mem_idle.rss_kb, mp->mem_start.rss_kb, n);
	mp->r.idle_hwm_bpp = mp_per(mp->mem_idle.hwm_kb, mp->mem_start.hwm_kb, n);
	mp_result(mp, "idle_bytes_per_peer", mp->r.idle_bpp, "%.0f");
	mp_result(mp, "idle_hwm_bytes_per_peer", mp->r.idle_hwm_bpp, "%.0f");
	return 0;
}

static int mp_server_burst(struct mp *mp)
{
	int n = mp->o.nclients, ret;
	uint64_t t_all, t0;

	mp_phase(mp, "burst");
	if (mp->o.unexp_burst) {
		/* everything arrives before its receive: the provider holds what it accepts */
		ret = mp_ctl_send(mp, MP_CTL_GO_BURST, NULL, 0);
		if (!ret)
			ret = mp_ctl_recv(mp, MP_CTL_POSTED_BURST, NULL, 0, NULL, true,
					  "the clients' burst sends posted");
		if (!ret)
			ret = mp_idle(mp, mp->o.idle_ms);
		if (!ret)
			ret = mp_fill_rx(mp, MP_K_BURST);
	} else {
		ret = mp_fill_rx(mp, MP_K_BURST);
		if (!ret)
			ret = mp_ctl_send(mp, MP_CTL_GO_BURST, NULL, 0);
	}
	if (!ret)
		ret = mp_recv_all(mp, MP_K_BURST, &t_all);
	if (!ret)
		ret = mp_mem_read(mp, &mp->mem_burst);
	if (!ret)
		ret = mp_ctl_recv(mp, MP_CTL_DONE_BURST, &t0, sizeof(t0), NULL, true,
				  "the clients' send completions");
	if (ret)
		return ret;
	mp->r.have_burst = true;
	mp->r.burst_bpp = mp_per(mp->mem_burst.rss_kb, mp->mem_start.rss_kb, n);
	mp->r.burst_hwm_bpp = mp_per(mp->mem_burst.hwm_kb, mp->mem_start.hwm_kb, n);
	mp->r.burst_ms = (double)(t_all - t0) / 1e6;
	mp_result(mp, "burst_bytes_per_peer", mp->r.burst_bpp, "%.0f");
	mp_result(mp, "burst_hwm_bytes_per_peer", mp->r.burst_hwm_bpp, "%.0f");
	mp_result(mp, "burst_ms", mp->r.burst_ms, "%.3f");

	/* what the provider keeps of it; and the rate test's N-1 peers are idle, not settling */
	mp_phase(mp, "idle after burst");
	ret = mp_idle(mp, mp->o.idle_ms);
	if (!ret)
		ret = mp_mem_read(mp, &mp->mem_burst_idle);
	if (ret)
		return ret;
	mp->r.have_burst_idle = true;
	mp->r.burst_idle_bpp = mp_per(mp->mem_burst_idle.rss_kb, mp->mem_start.rss_kb, n);
	mp_result(mp, "burst_idle_bytes_per_peer", mp->r.burst_idle_bpp, "%.0f");
	return 0;
}

static int mp_server_post_window(struct mp *mp)
{
	int j, ret;

	for (j = 0; j < mp->window; j++) {
		ret = mp_post(mp, &mp->ops[MP_K_RATE][j], 0, mp->rate + (size_t)j * MP_SMALL_LEN,
			      MP_SMALL_LEN, FI_ADDR_UNSPEC, mp_tag(MP_K_RATE),
			      MP_TAG_LAST | MP_TAG_LOW);
		if (ret)
			return ret;
	}
	return 0;
}

static int mp_server_rate(struct mp *mp)
{
	uint64_t w, res[2];
	int ret;

	mp_phase(mp, "rate");
	ret = mp_server_post_window(mp);
	if (!ret)
		ret = mp_ctl_send(mp, MP_CTL_GO_RATE, NULL, 0);
	for (w = 0; !ret; w++) {
		ret = mp_wait(mp, MP_K_RATE, mp->posted[MP_K_RATE]);
		if (ret)
			break;
		mp->rate_first += (uint64_t)mp->window;
		if (!mp->rate_last)
			ret = mp_server_post_window(mp);
		/* the previous acknowledgement must have left the buffer */
		if (!ret)
			ret = mp_wait(mp, MP_K_ACK, mp->posted[MP_K_ACK]);
		if (!ret) {
			memcpy(mp->ack, &w, sizeof(w));
			ret = mp_post(mp, &mp->ops[MP_K_ACK][0], 0, mp->ack, MP_SMALL_LEN,
				      mp->peer[0], mp_tag(MP_K_ACK), 0);
		}
		if (mp->rate_last)
			break;
		if (w + 1 == MP_RATE_WARM_WINDOWS)
			mp_phase(mp, "rate");
	}
	if (!ret)
		ret = mp_wait(mp, MP_K_ACK, mp->posted[MP_K_ACK]);
	if (!ret)
		ret = mp_ctl_recv(mp, MP_CTL_DONE_RATE, res, sizeof(res), NULL, true,
				  "the rate test's result");
	if (ret)
		return ret;
	if (!res[1])
		return mp_fail(mp, -FI_EOTHER, "rate test: no time measured");
	mp->r.have_rate = true;
	mp->r.rate = (double)res[0] * 1e9 / (double)res[1];
	mp_result(mp, "rate_msgs_per_s", mp->r.rate, "%.0f");
	return 0;
}

/* Distinct addresses in the server's own format: 127.x.y.z, MP_AV_PORTS ports each. */
static int mp_av_addrs(struct mp *mp, long count, struct sockaddr_in **out)
{
	struct sockaddr_in base, *a;
	long i;

	if (mp->name_len != sizeof(base) || ((struct sockaddr *)mp->name)->sa_family != AF_INET) {
		printf("# av insert skipped: the server's address is not a sockaddr_in "
		       "(%zu bytes, family %d)\n", mp->name_len,
		       (int)((struct sockaddr *)mp->name)->sa_family);
		return 1;
	}
	memcpy(&base, mp->name, sizeof(base));
	a = calloc((size_t)count, sizeof(*a));
	if (!a)
		return mp_fail(mp, -FI_ENOMEM, "out of memory for %ld addresses", count);
	for (i = 0; i < count; i++) {
		uint32_t host = 1 + (uint32_t)(i / MP_AV_PORTS);	/* < 2^24 for any count */

		a[i] = base;
		a[i].sin_addr.s_addr = htonl(0x7f000000u | (host & 0xffffffu));
		a[i].sin_port = htons((uint16_t)(20000 + i % MP_AV_PORTS));
	}
	*out = a;
	return 0;
}

/*
 * Some providers take very long, or forever, to close an AV of many entries (ofi_rxd of
 * libfabric 1.17 spins with 2000): bounded, reported, and then the process ends without
 * another libfabric call. Returns nonzero if it was abandoned.
 */
static int mp_av_close(struct mp *mp, struct fid_av *av, long count)
{
	volatile uint64_t t0 = cour_ft_now_ns();
	int ret;

	mp_phase(mp, "av close");
	if (sigsetjmp(mp_alarm_jmp, 1) == 0) {
		mp_alarm_jmp_armed = 1;
		alarm(MP_AV_CLOSE_S);
		ret = fi_close(&av->fid);
		mp_alarm_jmp_armed = 0;
		mp_phase(mp, "av close");
		if (ret)
			MP_FIERR(mp, ret, "fi_close(the insert test's av)");
		printf("# fi_close of the insert test's AV: %.1f ms\n",
		       (double)(cour_ft_now_ns() - t0) / 1e6);
		return 0;
	}
	mp->abandoned = true;
	mp_fail(mp, -FI_ETIMEDOUT, "fi_close(av of %ld entries) did not return within %d s "
		"(the insert was measured; the process exits without closing the rest)", count,
		MP_AV_CLOSE_S);
	return 1;
}

static int mp_av_test(struct mp *mp)
{
	long count = mp->o.av_count, i, failed = 0;
	struct fi_av_attr attr = { .type = FI_AV_TABLE, .count = (size_t)count };
	struct sockaddr_in *addrs = NULL;
	struct mp_mem before, after;
	struct fid_av *av = NULL;
	uint64_t t0 = 0, t1 = 0;
	fi_addr_t *fa;
	int ret;

	mp_phase(mp, "av insert");
	ret = mp_av_addrs(mp, count, &addrs);
	if (ret)
		return ret > 0 ? 0 : ret;
	fa = malloc((size_t)count * sizeof(*fa));
	if (!fa) {
		free(addrs);
		return mp_fail(mp, -FI_ENOMEM, "out of memory");
	}
	memset(fa, 0, (size_t)count * sizeof(*fa));	/* touched: not the provider's */
	ret = mp_mem_read(mp, &before);
	if (!ret) {
		ret = fi_av_open(mp->dom[0], &attr, &av, NULL);
		if (ret)
			ret = MP_FIERR(mp, ret, "fi_av_open(count %ld) for the insert test", count);
	}
	if (!ret) {
		t0 = cour_ft_now_ns();
		ret = fi_av_insert(av, addrs, (size_t)count, fa, 0, NULL);
		t1 = cour_ft_now_ns();
		if (ret < 0)
			ret = MP_FIERR(mp, ret, "fi_av_insert(%ld addresses)", count);
		else {
			failed = count - ret;
			ret = mp_mem_read(mp, &after);
		}
	}
	if (!ret) {
		for (i = 0; i < count; i++)
			failed += fa[i] == FI_ADDR_NOTAVAIL;
		/* a provider may count FI_ADDR_NOTAVAIL entries out of its return value too */
		failed = failed > count ? count : failed;
		mp->r.have_av = true;
		mp->r.av_failed = failed;
		mp->r.av_bpe = mp_per(after.rss_kb, before.rss_kb, count);
		mp->r.av_ns = (double)(t1 - t0) / (double)count;
		mp_result(mp, "av_bytes_per_entry", mp->r.av_bpe, "%.1f");
		mp_result(mp, "av_ns_per_insert", mp->r.av_ns, "%.1f");
		mp_result(mp, "av_failed", (double)failed, "%.0f");
	}
	if (av && mp_av_close(mp, av, count))
		ret = ret ? ret : -FI_ETIMEDOUT;
	free(fa);
	free(addrs);
	return ret;
}

static void mp_print_header(struct mp *mp)
{
	const struct fi_info *info = mp->info;

	printf("# cour_manypeer: provider %s  fabric %s  domain %s  progress %s  "
	       "N %d clients  idle %d ms%s\n", info->fabric_attr->prov_name,
	       info->fabric_attr->name, info->domain_attr->name,
	       info->domain_attr->data_progress == FI_PROGRESS_AUTO ? "auto" : "manual",
	       mp->o.nclients, mp->o.idle_ms, mp->o.no_shm ? "  shared memory off" : "");
	printf("# clients process: %d endpoints opened in %.1f ms, RSS +%.0f bytes each; "
	       "server: fi_av_insert of their addresses, one by one, %.3f ms\n",
	       mp->o.nclients, mp->r.ep_open_ms, mp->r.ep_bytes, mp->r.insert_ms);
	fflush(stdout);
}

/* Where the growth is: heap (anon) or shared memory mapped from peers' rings (shmem). */
static void mp_print_mem(const char *what, const struct mp_mem *m, const struct mp_mem *start,
			 int n)
{
	if (m->rss_kb < 0 || start->rss_kb < 0)
		return;
	printf("#   %-22s %10ld %10ld %10ld %10ld %10ld   %+9.0f %+9.0f %+9.0f\n", what, m->rss_kb,
	       m->hwm_kb, m->anon_kb, m->file_kb, m->shmem_kb,
	       mp_per(m->anon_kb, start->anon_kb, n), mp_per(m->file_kb, start->file_kb, n),
	       mp_per(m->shmem_kb, start->shmem_kb, n));
}

static void mp_print_table(struct mp *mp)
{
	const struct mp_results *r = &mp->r;
	int n = mp->o.nclients;

	if (mp->mem_start.rss_kb >= 0) {
		printf("# server memory, kB%*s %10s %10s %10s %10s %10s   per peer, B: %5s %9s %9s\n",
		       5, "", "VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem", "anon", "file",
		       "shmem");
		mp_print_mem("before contact", &mp->mem_start, &mp->mem_start, n);
		if (r->have_idle)
			mp_print_mem("after hello + idle", &mp->mem_idle, &mp->mem_start, n);
		if (r->have_burst)
			mp_print_mem("after 64 KiB burst", &mp->mem_burst, &mp->mem_start, n);
		if (r->have_burst_idle)
			mp_print_mem("after burst + idle", &mp->mem_burst_idle, &mp->mem_start, n);
	}

	printf("# %-44s %8s %14s  %s\n", "measurement (server side)", "N", "value", "unit");
	if (r->have_ep)
		printf("  %-44s %8d %14.0f  %s\n", "client endpoint, memory each (client side)", n,
		       r->ep_bytes, "B");
	if (r->have_contact) {
		printf("  %-44s %8d %14.3f  %s\n", "first contact, all peers", n, r->contact_ms,
		       "ms");
		printf("  %-44s %8d %14.2f  %s\n", "first contact per peer", n,
		       r->contact_ms * 1e3 / n, "us");
	}
	if (r->have_idle) {
		printf("  %-44s %8d %14.0f  %s\n", "memory per peer, idle (VmRSS)", n, r->idle_bpp,
		       "B");
		printf("  %-44s %8d %14.0f  %s\n", "memory per peer, idle (VmHWM)", n,
		       r->idle_hwm_bpp, "B");
	}
	if (r->have_burst) {
		printf("  %-44s %8d %14.0f  %s\n", "memory per peer after 64 KiB burst (VmRSS)", n,
		       r->burst_bpp, "B");
		printf("  %-44s %8d %14.0f  %s\n", "memory per peer after 64 KiB burst (VmHWM)", n,
		       r->burst_hwm_bpp, "B");
		printf("  %-44s %8d %14.3f  %s\n", "burst, all received", n, r->burst_ms, "ms");
	}
	if (r->have_burst_idle)
		printf("  %-44s %8d %14.0f  %s\n", "memory per peer, burst + idle (VmRSS)", n,
		       r->burst_idle_bpp, "B");
	if (r->have_rate)
		printf("  %-44s %8d %14.0f  %s\n", "message rate 8 B, client 0, others idle", n,
		       r->rate, "msg/s");
	if (r->have_av) {
		char what[64];

		snprintf(what, sizeof(what), "fi_av_insert of %ld addresses, memory", mp->o.av_count);
		printf("  %-44s %8s %14.1f  %s\n", what, "-", r->av_bpe, "B/entry");
		snprintf(what, sizeof(what), "fi_av_insert of %ld addresses, time", mp->o.av_count);
		printf("  %-44s %8s %14.1f  %s\n", what, "-", r->av_ns, "ns/insert");
		if (r->av_failed)
			printf("  %-44s %8s %14ld  %s\n", "fi_av_insert: FI_ADDR_NOTAVAIL", "-",
			       r->av_failed, "entries");
	}
	fflush(stdout);
}

/* The child exits once told to quit; one that does not within the timeout is killed. */
static int mp_reap(struct mp *mp, bool failed)
{
	uint64_t end = cour_ft_now_ns() + (uint64_t)(failed ? 5 : mp->o.timeout_s) * 1000000000ULL;
	int status;
	pid_t p;

	while ((p = waitpid(mp->child, &status, WNOHANG)) == 0 && cour_ft_now_ns() < end)
		usleep(10000);
	if (p == 0) {
		kill(mp->child, SIGKILL);
		waitpid(mp->child, &status, 0);
		return failed ? -FI_ETIMEDOUT :
		       mp_fail(mp, -FI_ETIMEDOUT, "the clients process did not exit (closing its "
			       "endpoints) within %d s; killed", mp->o.timeout_s);
	}
	if (p < 0)
		return mp_fail(mp, -FI_EOTHER, "waitpid: %s", strerror(errno));
	if (failed || (WIFEXITED(status) && WEXITSTATUS(status) == 0))
		return 0;
	if (WIFSIGNALED(status))
		return mp_fail(mp, -FI_EOTHER, "the clients process died of signal %d",
			       WTERMSIG(status));
	return mp_fail(mp, -FI_EOTHER, "the clients process exited with status %d",
		       WEXITSTATUS(status));
}

static int mp_server_main(struct mp *mp)
{
	bool child_gone = false;
	int ret;

	mp_phase(mp, "setup");
	ret = mp_open_domains(mp, 1, (size_t)mp->o.nclients);
	if (!ret)
		ret = mp_open_eps(mp, 1);
	if (!ret)
		ret = mp_server_names(mp);
	if (!ret) {
		mp_print_header(mp);
		mp_result(mp, "client_ep_bytes", mp->r.ep_bytes, "%.0f");
		ret = mp_server_hello(mp);
	}
	if (!ret)
		ret = mp_server_burst(mp);
	if (!ret && (mp->o.rate_msgs || mp->o.rate_secs > 0))
		ret = mp_server_rate(mp);
	if (!ret) {
		mp_phase(mp, "clients exit");
		ret = mp_ctl_send(mp, MP_CTL_QUIT, NULL, 0);
		/* the insert test runs alone, with the clients closed */
		if (!ret)
			ret = mp_reap(mp, false);
		child_gone = true;
	}
	if (!ret && mp->o.av_count)
		ret = mp_av_test(mp);
	mp_print_table(mp);
	if (ret) {
		printf("FAIL %s: %s\n", mp->phase, mp->why[0] ? mp->why : fi_strerror(-ret));
		fflush(stdout);
	}
	if (mp->abandoned)
		_exit(EXIT_FAILURE);	/* no atexit: libfabric's own cleanup would hang too */
	/* a failed run closes the channel first: the clients see it and stop */
	close(mp->ctl);
	mp->ctl = -1;
	if (!child_gone)
		mp_reap(mp, true);
	mp_phase(mp, "close");
	mp_close(mp);
	return ret ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* ---- options and main ---- */

static void mp_usage(FILE *out, const char *prog)
{
	fprintf(out,
		"usage: %s [-p prov] [-n N] [-s idle_ms] [-R secs|count] [-W window] [-A count]\n"
		"          [-T secs] [-m MB] [-D] [-U] [-h]\n"
		"Server memory, first-contact time and message rate as the number of peers grows:\n"
		"one process with one server endpoint, a forked one with N client endpoints, on\n"
		"127.0.0.1. Prints a table and RESULT <name> <N> <value> lines; FAIL <phase>: <why>\n"
		"and exit status 1 on any error.\n"
		"  -p PROV   provider, e.g. courier, tcp, \"udp;ofi_rxd\" (default: libfabric's choice)\n"
		"  -n N      client endpoints (default 1; capped by RLIMIT_NOFILE's hard limit)\n"
		"  -s MS     idle period, progressing, before the idle memory is read (default %d)\n"
		"  -R LEN    rate test: \"2s\" for seconds, a plain number for messages, 0 to skip\n"
		"            (default %gs)\n"
		"  -W W      rate test window: messages per acknowledgement (default %d)\n"
		"  -A COUNT  addresses inserted in the AV insert test, 0 skips (default %d)\n"
		"  -T SECS   each phase fails after this long (default %d)\n"
		"  -m MB     the clients process stops opening endpoints when N of them would\n"
		"            take more than this (default: half of MemAvailable; 0: no limit)\n"
		"  -D        endpoints may not use shared memory (FI_OPT_SHARED_MEMORY_PERMITTED\n"
		"            false: courier; fails where not supported)\n"
		"  -U        fan-in of unexpected messages: the server posts the burst's receives\n"
		"            only after every client posted its send and -s ms have passed\n"
		"  -h        this help\n",
		prog, MP_DEF_IDLE_MS, MP_DEF_RATE_SECS, MP_DEF_WINDOW, MP_DEF_AV_COUNT,
		MP_DEF_TIMEOUT);
}

static int mp_parse_long(const char *arg, long min, long max, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(arg, &end, 10);
	if (errno || end == arg || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

static int mp_parse_rate(const char *arg, struct mp_opts *o)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(arg, &end);
	if (errno || end == arg || v < 0 || v > 1e12)
		return -1;
	if (!strcmp(end, "s")) {
		if (v > 3600)
			return -1;
		o->rate_secs = v;
		o->rate_msgs = 0;
		return 0;
	}
	if (*end || v != (double)(long)v)
		return -1;
	o->rate_msgs = (long)v;
	o->rate_secs = 0;
	return 0;
}

static int mp_parse(int argc, char **argv, struct mp_opts *o)
{
	long v;
	int c;

	*o = (struct mp_opts){
		.nclients = 1, .idle_ms = MP_DEF_IDLE_MS, .rate_secs = MP_DEF_RATE_SECS,
		.av_count = MP_DEF_AV_COUNT, .window = MP_DEF_WINDOW, .timeout_s = MP_DEF_TIMEOUT,
		.mem_limit_mb = -1,
	};
	while ((c = getopt(argc, argv, "p:n:s:R:W:A:T:m:DUh")) != -1) {
		int bad = 0;

		switch (c) {
		case 'p': o->prov = optarg; break;
		case 'n': bad = mp_parse_long(optarg, 1, 1 << 20, &v); o->nclients = (int)v; break;
		case 's': bad = mp_parse_long(optarg, 0, 600000, &v); o->idle_ms = (int)v; break;
		case 'R': bad = mp_parse_rate(optarg, o); break;
		case 'W': bad = mp_parse_long(optarg, 1, 1 << 16, &v); o->window = (int)v; break;
		case 'A': bad = mp_parse_long(optarg, 0, 1L << 24, &v); o->av_count = v; break;
		case 'T': bad = mp_parse_long(optarg, 1, 86400, &v); o->timeout_s = (int)v; break;
		case 'm': bad = mp_parse_long(optarg, 0, 1L << 30, &o->mem_limit_mb); break;
		case 'D': o->no_shm = true; break;
		case 'U': o->unexp_burst = true; break;
		case 'h': mp_usage(stdout, argv[0]); return 1;
		default: mp_usage(stderr, argv[0]); return -1;
		}
		if (bad) {
			fprintf(stderr, "cour_manypeer: bad value for -%c: %s\n", c, optarg);
			mp_usage(stderr, argv[0]);
			return -1;
		}
	}
	if (optind != argc) {
		mp_usage(stderr, argv[0]);
		return -1;
	}
	return 0;
}

/* What a provider may take for N client endpoints before the machine itself is at risk. */
static size_t mp_mem_limit_kb(const struct mp_opts *o)
{
	char line[256];
	long avail_kb = -1;
	FILE *f;

	if (o->mem_limit_mb >= 0)
		return (size_t)o->mem_limit_mb * 1024;
	f = fopen("/proc/meminfo", "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "MemAvailable:", 13))
			avail_kb = strtol(line + 13, NULL, 10);
	fclose(f);
	return avail_kb > 0 ? (size_t)avail_kb / 2 : 0;
}

/* Every client endpoint is at least one socket in the clients process: N must fit. */
static int mp_fd_limit(struct mp_opts *o)
{
	struct rlimit rl;
	rlim_t max_n;

	if (getrlimit(RLIMIT_NOFILE, &rl)) {
		fprintf(stderr, "cour_manypeer: getrlimit(RLIMIT_NOFILE): %s\n", strerror(errno));
		return -1;
	}
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl))
			fprintf(stderr, "cour_manypeer: setrlimit(RLIMIT_NOFILE, %llu): %s\n",
				(unsigned long long)rl.rlim_max, strerror(errno));
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	max_n = rl.rlim_cur > MP_FD_RESERVE ? rl.rlim_cur - MP_FD_RESERVE : 0;
	if (max_n < 1) {
		printf("FAIL setup: RLIMIT_NOFILE is %llu: no room for a client endpoint\n",
		       (unsigned long long)rl.rlim_cur);
		return -1;
	}
	if ((rlim_t)o->nclients > max_n) {
		printf("# N capped from %d to %llu: RLIMIT_NOFILE (hard limit %llu) less %d for the "
		       "rest; each client endpoint is at least one socket\n", o->nclients,
		       (unsigned long long)max_n, (unsigned long long)rl.rlim_max, MP_FD_RESERVE);
		o->nclients = (int)max_n;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct mp mp = { .hot_cq = -1, .ctl = -1 };
	pid_t parent = getpid();
	int sv[2], ret;

	ret = mp_parse(argc, argv, &mp.o);
	if (ret)
		return ret > 0 ? EXIT_SUCCESS : EXIT_FAILURE;
	if (mp_fd_limit(&mp.o))
		return EXIT_FAILURE;
	mp.mem_limit_kb = mp_mem_limit_kb(&mp.o);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGALRM, mp_alarm);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
		printf("FAIL setup: socketpair: %s\n", strerror(errno));
		return EXIT_FAILURE;
	}
	fflush(stdout);
	/* before libfabric is touched: each process opens its own fabric */
	mp.child = fork();
	if (mp.child < 0) {
		printf("FAIL setup: fork: %s\n", strerror(errno));
		return EXIT_FAILURE;
	}
	if (mp.child == 0) {
		/* the clients never outlive the server, whatever ends it */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(EXIT_FAILURE);
		close(sv[0]);
		mp.ctl = sv[1];
		mp.role = "clients";
		return mp_clients_main(&mp);
	}
	close(sv[1]);
	mp.ctl = sv[0];
	mp.server = true;
	mp.role = "server";
	return mp_server_main(&mp);
}
