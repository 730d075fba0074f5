/*
 * The shared-memory receive ring (wire/cour_shm_ring.[ch]): packets and tags arrive exactly,
 * full and oversized puts are refused cleanly, producers in other processes attach through
 * /proc and keep their order, a producer killed while holding a cell costs one skipped cell
 * and nothing else while a slow one loses nothing, the wake-up flag rings once per arming, and
 * garbage in the mapping is refused or survived without a hang.
 *
 * Children are forked processes: they report through their exit status (never cr_assert),
 * die with the test (PR_SET_PDEATHSIG) and stop by themselves at a deadline.
 */
#define COUR_SHM_RING_TESTING
#include "fi/cour_fi.h"
#include "wire/cour_shm_ring.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* One timeout for all: Criterion 2.4's runner leaks a timeout record (LeakSanitizer fails the
 * ASan run) when tests of one program have different timeouts. Each test bounds itself. */
TestSuite(shm_ring, .timeout = 60);

/*
 * The ring is linked alone, without libfabric (whose start-up costs every Criterion worker
 * 0.4 s): cour_prov and the two logging entry points are ours. They count warnings, so tests
 * check that a reclaim or a refused attach is logged, and print them when SHM_RING_LOG is set.
 */
struct fi_provider cour_prov = { .name = "courier" };
static int warnings;

int fi_log_enabled(const struct fi_provider *prov, enum fi_log_level level,
		   enum fi_log_subsys subsys)
{
	return prov == &cour_prov;
}

void fi_log(const struct fi_provider *prov, enum fi_log_level level, enum fi_log_subsys subsys,
	    const char *func, int line, const char *fmt, ...)
{
	va_list ap;

	if (level == FI_LOG_WARN)
		warnings++;
	if (!getenv("SHM_RING_LOG"))
		return;
	va_start(ap, fmt);
	fprintf(stderr, "[%d] %s: ", (int)getpid(), func);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}

#define DEADLINE_US 10000000ull      /* any child or wait loop gives up after 10 s */

struct tpkt {                        /* the hdr of every test packet */
	uint32_t id;                 /* producer */
	uint32_t seq;                /* its packet number */
	uint32_t len;                /* pattern bytes after this header */
};

static uint8_t pattern(uint32_t id, uint32_t seq, size_t i)
{
	return (uint8_t)(seq * 131u + id * 17u + i * 7u + (i >> 8));
}

static uint32_t size_of(uint32_t id, uint32_t seq, uint32_t max)
{
	return (seq * 37u + id * 101u) % (max - sizeof(struct tpkt) + 1);
}

static void make_tag(uint8_t *tag, uint32_t id)
{
	for (int i = 0; i < 28; i++)
		tag[i] = (uint8_t)(id * 3 + i);
}

/* hdr then the pattern split over two iovecs */
static int put_pkt(struct cour_shm_ring *r, uint32_t id, uint32_t seq, uint32_t len, bool *wake)
{
	static uint8_t buf[65536];
	struct tpkt h = { .id = id, .seq = seq, .len = len };
	uint8_t tag[28];
	struct iovec iov[2];

	for (uint32_t i = 0; i < len; i++)
		buf[i] = pattern(id, seq, i);
	make_tag(tag, id);
	iov[0].iov_base = buf;
	iov[0].iov_len = len / 3;
	iov[1].iov_base = buf + len / 3;
	iov[1].iov_len = len - len / 3;
	return cour_shm_ring_put(r, tag, sizeof(tag), &h, sizeof(h), iov, 2, wake);
}

/* put, retrying while full, until the deadline: 0 or the error */
static int put_pkt_retry(struct cour_shm_ring *r, uint32_t id, uint32_t seq, uint32_t len,
			 uint64_t deadline)
{
	int ret;

	while ((ret = put_pkt(r, id, seq, len, NULL)) == -FI_EAGAIN && cour_now_us() < deadline)
		sched_yield();
	return ret;
}

/* 0 if p is packet (id, seq) intact, else a code saying what differs */
static int check_pkt(const void *p, uint32_t len, const void *tag, uint32_t tag_len,
		     uint32_t id, uint32_t seq)
{
	const struct tpkt *h = p;
	const uint8_t *d = (const uint8_t *)p + sizeof(*h);
	uint8_t want_tag[28];

	if (len < sizeof(*h))
		return 1;
	if (h->id != id || h->seq != seq)
		return 2;
	if (h->len != len - sizeof(*h))
		return 3;
	for (uint32_t i = 0; i < h->len; i++)
		if (d[i] != pattern(id, seq, i))
			return 4;
	make_tag(want_tag, id);
	if (tag_len != sizeof(want_tag) || memcmp(tag, want_tag, sizeof(want_tag)))
		return 5;
	return 0;
}

/* the next packet, polling until the deadline; NULL if none came */
static const void *wait_pkt(struct cour_shm_ring *r, uint32_t *len, const void **tag,
			    uint32_t *tag_len, uint64_t deadline)
{
	const void *p;

	while (!(p = cour_shm_ring_peek(r, len, tag, tag_len)) && cour_now_us() < deadline)
		sched_yield();
	return p;
}

static void child_init(pid_t parent)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(99);
}

/* fork a producer that attaches and sends count packets as producer id; exit 0 on success */
static pid_t spawn_producer(const struct cour_shm_locator *loc, uint32_t id, uint32_t count,
			    uint32_t max)
{
	pid_t parent = getpid(), pid = fork();
	struct cour_shm_ring *r;
	uint64_t deadline;

	if (pid)
		return pid;
	child_init(parent);
	deadline = cour_now_us() + DEADLINE_US;
	if (cour_shm_ring_attach(loc, &r))
		_exit(10);
	for (uint32_t s = 0; s < count; s++)
		if (put_pkt_retry(r, id, s, size_of(id, s, max), deadline))
			_exit(11);
	cour_shm_ring_close(r);
	_exit(0);
}

/* the child's exit status, or -1 (killed at the deadline) */
static int reap(pid_t pid)
{
	uint64_t deadline = cour_now_us() + DEADLINE_US;
	int st;

	while (cour_now_us() < deadline) {
		pid_t w = waitpid(pid, &st, WNOHANG);

		if (w == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		usleep(1000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

/* wait for one byte from a child */
static bool wait_byte(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char c;

	return poll(&p, 1, (int)(DEADLINE_US / 1000)) == 1 && read(fd, &c, 1) == 1;
}

Test(shm_ring, create_checks_geometry)
{
	const uint32_t bad[][2] = { { 0, 256 }, { 1, 256 }, { 3, 256 }, { 131072, 256 },
				    { 8, 63 }, { 8, 65537 }, { 8, 0 } };
	struct cour_shm_ring *r = NULL;
	struct cour_shm_locator loc = { 0 };

	for (size_t i = 0; i < COUR_ARRAY_SIZE(bad); i++) {
		cr_assert_eq(cour_shm_ring_create(bad[i][0], bad[i][1], &r, &loc), -FI_EINVAL,
			     "%u cells of %u", bad[i][0], bad[i][1]);
		cr_assert_null(r, "out-parameter set on failure");
	}
	cr_assert_eq(warnings, (int)COUR_ARRAY_SIZE(bad), "each refusal is logged");
	cr_assert_eq(cour_shm_ring_create(2, 64, &r, &loc), 0);
	cr_assert_eq(cour_shm_ring_payload_max(r), 64);
	cr_assert_eq(loc.pid, (uint32_t)getpid());
	cr_assert_neq(loc.nonce, 0);
	cr_assert_geq(loc.bytes, sizeof(struct cour_shm_hdr) + 2 * 128);
	cour_shm_ring_close(r);
}

/* the file's pages that hold data (tmpfs allocates a page at its first write) */
static long ring_pages(const struct cour_shm_locator *loc)
{
	struct stat st;

	cr_assert_eq(fstat(loc->fd, &st), 0);
	return (long)(st.st_blocks * 512 / 4096);
}

/* Creating a ring writes only its header: an endpoint nobody on this host sends to (Open
 * MPI's one-sided endpoint on one host) costs one page of shared memory, not its 64 KiB of
 * slots. Slots are written as positions reach them, a page per sixteen, and after laps of
 * small packets the ring holds its header and its slots, no cell. */
Test(shm_ring, a_ring_costs_the_pages_its_packets_reached)
{
	struct cour_shm_ring *own, *prod;
	struct cour_shm_locator loc;
	const void *p, *t;
	uint32_t len, tl;
	bool wake = false;

	cr_assert_eq(cour_shm_ring_create(256, 16384, &own, &loc), 0);
	cr_assert_eq(ring_pages(&loc), 1, "a new ring: its header page only, %ld", ring_pages(&loc));
	cr_assert_eq(cour_shm_ring_attach(&loc, &prod), 0);
	cr_assert_eq(ring_pages(&loc), 1, "attaching writes nothing");
	for (uint32_t i = 0; i < 600; i++) {
		cr_assert_eq(put_pkt(prod, 3, i, 40, &wake), 0, "put %u", i);
		if (i == 0)
			cr_assert_eq(ring_pages(&loc), 2, "one packet: one slot page more");
		p = cour_shm_ring_peek(own, &len, &t, &tl);
		cr_assert_not_null(p, "packet %u", i);
		cr_assert_eq(check_pkt(p, len, t, tl, 3, i), 0, "packet %u", i);
		cour_shm_ring_pop(own);
	}
	cr_assert_eq(ring_pages(&loc), 1 + 256 * COUR_SHM_SLOT / 4096,
		     "after laps of small packets: header and slots, %ld", ring_pages(&loc));
	cr_assert_null(cour_shm_ring_peek(own, &len, &t, &tl));
	cour_shm_ring_close(prod);
	cour_shm_ring_close(own);
}

Test(shm_ring, hdr_iovecs_and_tag_arrive_exactly)
{
	struct cour_shm_ring *own, *prod;
	struct cour_shm_locator loc;
	uint8_t hdr[12], a[5], c[40], tag[28], want[57];
	struct iovec iov[3] = { { a, sizeof(a) }, { c, 0 }, { c, sizeof(c) } };
	const void *p, *p2, *t;
	uint32_t len, tl;
	bool wake = false;

	for (size_t i = 0; i < sizeof(hdr); i++)
		hdr[i] = (uint8_t)(0xa0 + i);
	for (size_t i = 0; i < sizeof(a); i++)
		a[i] = (uint8_t)(0x10 + i);
	for (size_t i = 0; i < sizeof(c); i++)
		c[i] = (uint8_t)(0x50 + i);
	make_tag(tag, 7);
	memcpy(want, hdr, 12);
	memcpy(want + 12, a, 5);
	memcpy(want + 17, c, 40);

	cr_assert_eq(cour_shm_ring_create(8, 256, &own, &loc), 0);
	cr_assert_eq(cour_shm_ring_attach(&loc, &prod), 0, "attach to ourselves through /proc");
	cr_assert_null(cour_shm_ring_peek(own, &len, &t, &tl), "a new ring is empty");

	cr_assert_eq(cour_shm_ring_put(prod, tag, sizeof(tag), hdr, sizeof(hdr), iov, 3, &wake), 0);
	cr_assert_not(wake, "nobody armed");
	p = cour_shm_ring_peek(own, &len, &t, &tl);
	cr_assert_not_null(p);
	cr_assert_eq(len, 57);
	cr_assert_arr_eq(p, want, 57);
	cr_assert_eq(tl, 28);
	cr_assert_arr_eq(t, tag, 28);
	p2 = cour_shm_ring_peek(own, &len, NULL, NULL);
	cr_assert_eq(p2, p, "peek again: the same packet until pop");
	cour_shm_ring_pop(own);
	cr_assert_null(cour_shm_ring_peek(own, &len, &t, &tl));
	cour_shm_ring_pop(own);                 /* nothing peeked: no effect */

	/* no tag, no iovec; the owner's handle may put too */
	cr_assert_eq(cour_shm_ring_put(own, NULL, 0, hdr, 3, NULL, 0, NULL), 0);
	p = cour_shm_ring_peek(own, &len, &t, &tl);
	cr_assert_not_null(p);
	cr_assert_eq(len, 3);
	cr_assert_eq(tl, 0);
	cr_assert_arr_eq(p, hdr, 3);
	cour_shm_ring_pop(own);
	cr_assert_null(cour_shm_ring_peek(own, &len, &t, &tl));
	cr_assert_eq(cour_shm_ring_reclaimed(own), 0);
	cour_shm_ring_close(prod);
	cour_shm_ring_close(own);
}

Test(shm_ring, full_ring_refuses_and_loses_nothing)
{
	struct cour_shm_ring *r;
	struct cour_shm_locator loc;
	uint8_t big[300] = { 0 };
	struct iovec iov = { big, 256 - 12 };
	uint32_t seq = 0, next = 0, len, tl;
	const void *p, *t;

	cr_assert_eq(cour_shm_ring_create(8, 256, &r, &loc), 0);
	/* too large, by one byte or by far, or with an oversized tag: refused, nothing reserved */
	cr_assert_eq(cour_shm_ring_put(r, NULL, 0, big, 13, &iov, 1, NULL), -FI_EMSGSIZE);
	iov.iov_len = SIZE_MAX;
	cr_assert_eq(cour_shm_ring_put(r, NULL, 0, big, 13, &iov, 1, NULL), -FI_EMSGSIZE);
	cr_assert_eq(cour_shm_ring_put(r, big, 33, big, 13, NULL, 0, NULL), -FI_EINVAL);
	iov.iov_len = 256 - 12;
	cr_assert_eq(cour_shm_ring_put(r, big, 32, big, 12, &iov, 1, NULL), 0, "exactly a cell");
	p = cour_shm_ring_peek(r, &len, &t, &tl);
	cr_assert_not_null(p);
	cr_assert_eq(len, 256);
	cour_shm_ring_pop(r);

	/* five laps: fill until refused, then drain; the order and every byte survive */
	for (int lap = 0; lap < 5; lap++) {
		int n = 0;

		while (n < 100 && put_pkt(r, 1, seq, size_of(1, seq, 256), NULL) == 0) {
			seq++;
			n++;
		}
		cr_assert_eq(n, 8, "lap %d: a ring of 8 cells took %d", lap, n);
		cr_assert_eq(put_pkt(r, 1, seq, 10, NULL), -FI_EAGAIN);
		cr_assert_eq(cour_shm_ring_arm(r), false, "full: not safe to sleep");
		for (int i = 0; i < n; i++, next++) {
			p = cour_shm_ring_peek(r, &len, &t, &tl);
			cr_assert_not_null(p, "lap %d packet %d", lap, i);
			cr_assert_eq(check_pkt(p, len, t, tl, 1, next), 0, "packet %u", next);
			cour_shm_ring_pop(r);
		}
		cr_assert_null(cour_shm_ring_peek(r, &len, &t, &tl));
	}
	cr_assert_eq(next, 40);
	cr_assert_eq(warnings, 3, "the three refused puts are logged, a full ring is not");
	cour_shm_ring_close(r);
}

Test(shm_ring, forked_child_sends_in_order)
{
	const uint32_t count = 20000, max = 1024;
	struct cour_shm_ring *r;
	struct cour_shm_locator loc;
	uint64_t deadline;
	pid_t pid;

	cr_assert_eq(cour_shm_ring_create(64, max, &r, &loc), 0);
	pid = spawn_producer(&loc, 3, count, max);
	cr_assert_gt(pid, 0);
	deadline = cour_now_us() + DEADLINE_US;
	for (uint32_t s = 0; s < count; s++) {
		const void *p, *t;
		uint32_t len, tl;

		p = wait_pkt(r, &len, &t, &tl, deadline);
		cr_assert_not_null(p, "packet %u never came", s);
		cr_assert_eq(check_pkt(p, len, t, tl, 3, s), 0, "packet %u", s);
		cour_shm_ring_pop(r);
	}
	cr_assert_eq(reap(pid), 0);
	cr_assert_null(cour_shm_ring_peek(r, &(uint32_t){ 0 }, NULL, NULL), "nothing extra");
	cour_shm_ring_close(r);
}

Test(shm_ring, attach_refuses_wrong_locators)
{
	struct cour_shm_ring *r, *p = NULL;
	struct cour_shm_locator loc, bad;
	int pipefd[2];

	cr_assert_eq(cour_shm_ring_create(4, 64, &r, &loc), 0);

	bad = loc;
	bad.nonce ^= 1;
	cr_assert_eq(cour_shm_ring_attach(&bad, &p), -FI_EINVAL, "wrong nonce");
	bad = loc;
	bad.nonce = 0;
	cr_assert_eq(cour_shm_ring_attach(&bad, &p), -FI_EINVAL, "zero nonce");
	bad = loc;
	bad.bytes += 4096;
	cr_assert_eq(cour_shm_ring_attach(&bad, &p), -FI_EINVAL, "wrong size");
	bad = loc;
	bad.pid = COUR_SHM_PID_MASK;            /* above any pid_max: no such process */
	cr_assert_eq(kill((pid_t)bad.pid, 0), -1);
	cr_assert_eq(cour_shm_ring_attach(&bad, &p), -FI_ENOENT, "no such process");
	bad = loc;
	bad.fd = 1000;
	cr_assert_eq(fcntl(1000, F_GETFD), -1);
	cr_assert_eq(cour_shm_ring_attach(&bad, &p), -FI_ENOENT, "no such fd");
	cr_assert_eq(pipe(pipefd), 0);
	bad = loc;
	bad.fd = pipefd[0];
	cr_assert_eq(cour_shm_ring_attach(&bad, &p), -FI_EINVAL, "a pipe");
	close(pipefd[0]);
	close(pipefd[1]);
	cr_assert_null(p, "out-parameter untouched on failure");

	cr_assert_eq(cour_shm_ring_attach(&loc, &p), 0, "the right locator still works");
	cour_shm_ring_close(p);
	p = NULL;
	cour_shm_ring_close(r);
	{
		int ret = cour_shm_ring_attach(&loc, &p);

		cr_assert(ret == -FI_ENOENT || ret == -FI_EINVAL, "after close: %d", ret);
		cr_assert_null(p);
	}
	/* a ring that is not there (its process gone, no such fd, the ring after close) is a
	 * peer that exited or closed its endpoint: said at info level; the other refusals warn */
	cr_assert_eq(warnings, 4, "each refused attach is logged once");
}

/* another user may not open our fd table (as root: the child drops to nobody) */
Test(shm_ring, other_user_gets_eacces)
{
	struct cour_shm_ring *r;
	struct cour_shm_locator loc;
	pid_t pid, parent = getpid();

	if (geteuid() != 0)
		cr_skip_test("needs root to become another user");
	cr_assert_eq(cour_shm_ring_create(4, 64, &r, &loc), 0);
	pid = fork();
	if (!pid) {
		struct cour_shm_ring *c;
		int ret;

		child_init(parent);
		if (setgid(65534) || setuid(65534))
			_exit(10);
		ret = cour_shm_ring_attach(&loc, &c);
		_exit(ret == -FI_EACCES ? 0 : ret == 0 ? 11 : 12);
	}
	cr_assert_eq(reap(pid), 0, "1x: attached, 12: another error");
	cour_shm_ring_close(r);
}

Test(shm_ring, three_producers_keep_order)
{
	enum { NPROD = 3 };
	const uint32_t count = 200000, max = 1100;
	struct cour_shm_ring *r;
	struct cour_shm_locator loc;
	uint32_t next[NPROD] = { 0 }, total = 0;
	uint64_t bytes = 0, t0, deadline;
	pid_t pid[NPROD];

	cr_assert_eq(cour_shm_ring_create(256, max, &r, &loc), 0);
	t0 = cour_now_us();
	deadline = t0 + 4 * DEADLINE_US;
	for (int i = 0; i < NPROD; i++)
		pid[i] = spawn_producer(&loc, (uint32_t)i + 1, count, max);
	while (total < NPROD * count) {
		const struct tpkt *h;
		const void *t;
		uint32_t len, tl, id;
		int bad;

		h = wait_pkt(r, &len, &t, &tl, deadline);
		cr_assert_not_null(h, "stalled after %u packets", total);
		cr_assert_geq(len, sizeof(*h));
		id = h->id;
		cr_assert(id >= 1 && id <= NPROD, "producer %u", id);
		bad = check_pkt(h, len, t, tl, id, next[id - 1]);
		cr_assert_eq(bad, 0, "producer %u packet %u (got seq %u): %d", id, next[id - 1],
			     h->seq, bad);
		cr_assert_eq(len, sizeof(*h) + size_of(id, next[id - 1], max));
		next[id - 1]++;
		bytes += len;
		total++;
		cour_shm_ring_pop(r);
	}
	for (int i = 0; i < NPROD; i++) {
		cr_assert_eq(reap(pid[i]), 0, "producer %d", i + 1);
		cr_assert_eq(next[i], count);
	}
	cr_assert_null(cour_shm_ring_peek(r, &(uint32_t){ 0 }, NULL, NULL));
	cr_assert_eq(cour_shm_ring_reclaimed(r), 0);
	cr_assert_eq(warnings, 0);
	cr_log_info("3 producers: %u packets, %.1f MB in %.2f s: %.0f packets/s\n", total,
		    bytes / 1e6, (cour_now_us() - t0) / 1e6,
		    total / ((cour_now_us() - t0) / 1e6));
	cour_shm_ring_close(r);
}

/* fork a child that reserves a cell, tells us (one byte on the pipe), then waits to be killed */
static pid_t spawn_dead_reserver(const struct cour_shm_locator *loc, bool advance_tail, int wfd)
{
	pid_t parent = getpid(), pid = fork();
	struct cour_shm_ring *r;
	uint64_t pos;

	if (pid)
		return pid;
	child_init(parent);
	if (cour_shm_ring_attach(loc, &r) || cour_shm_ring_reserve(r, &pos, advance_tail))
		_exit(10);
	if (write(wfd, "r", 1) != 1)
		_exit(11);
	for (int i = 0; i < 100; i++)
		usleep(100000);
	_exit(12);
}

static void dead_reserver(bool advance_tail)
{
	const uint32_t count = 2000, max = 512;
	struct cour_shm_ring *r;
	struct cour_shm_locator loc;
	const void *p, *t;
	uint32_t len, tl;
	uint64_t t0, deadline;
	int pipefd[2], st;
	pid_t dead, prod;

	cr_assert_eq(cour_shm_ring_create(64, max, &r, &loc), 0);
	cr_assert_eq(put_pkt(r, 9, 0, 100, NULL), 0, "one packet before the dead cell");
	cr_assert_eq(pipe(pipefd), 0);
	dead = spawn_dead_reserver(&loc, advance_tail, pipefd[1]);
	cr_assert(wait_byte(pipefd[0]), "the child never reserved");
	cr_assert_eq(kill(dead, SIGKILL), 0);
	cr_assert_eq(waitpid(dead, &st, 0), dead, "reaped: kill(pid, 0) must say ESRCH");
	cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	t0 = cour_now_us();
	prod = spawn_producer(&loc, 4, count, max);

	deadline = t0 + DEADLINE_US;
	p = wait_pkt(r, &len, &t, &tl, deadline);
	cr_assert_not_null(p);
	cr_assert_eq(check_pkt(p, len, t, tl, 9, 0), 0);
	cour_shm_ring_pop(r);
	for (uint32_t s = 0; s < count; s++) {
		p = wait_pkt(r, &len, &t, &tl, deadline);
		cr_assert_not_null(p, "packet %u of the live producer never came", s);
		cr_assert_eq(check_pkt(p, len, t, tl, 4, s), 0, "packet %u", s);
		cour_shm_ring_pop(r);
	}
	cr_assert_geq(cour_now_us() - t0, 90000, "reclaimed before the cell was stuck 100 ms");
	cr_assert_eq(cour_shm_ring_reclaimed(r), 1);
	cr_assert_eq(cour_shm_ring_corrupt(r), 0);
	cr_assert_eq(warnings, 1, "the reclaim is logged");
	cr_assert_eq(reap(prod), 0);
	cr_assert_null(cour_shm_ring_peek(r, &len, &t, &tl));
	cr_assert(cour_shm_ring_arm(r), "empty again");
	close(pipefd[0]);
	close(pipefd[1]);
	cour_shm_ring_close(r);
}

Test(shm_ring, producer_killed_holding_a_cell)
{
	dead_reserver(true);
}

Test(shm_ring, producer_killed_before_moving_the_tail)
{
	dead_reserver(false);
}

/*
 * Producers killed at random instants, mid-stream: whatever of theirs arrives is intact and
 * gap-free (0..k-1), the steady producer beside them loses nothing, and the ring drains.
 */
Test(shm_ring, producers_killed_at_random_never_corrupt)
{
	enum { ROUNDS = 6, NVICT = 2, STEADY = 5000 };
	const uint32_t max = 600;
	struct cour_shm_ring *r;
	struct cour_shm_locator loc;
	unsigned seed = 5;
	uint64_t kills = 0, victim_pkts = 0;

	cr_assert_eq(cour_shm_ring_create(32, max, &r, &loc), 0);
	for (uint32_t round = 0; round < ROUNDS; round++) {
		uint32_t steady_id = 100 + round, next[NVICT + 1] = { 0 };
		uint64_t now = cour_now_us(), kill_at, last = now, deadline = now + DEADLINE_US;
		pid_t vict[NVICT], steady;
		bool killed = false, steady_done = false;
		int st;

		for (int k = 0; k < NVICT; k++)
			vict[k] = spawn_producer(&loc, 10 + round * NVICT + (uint32_t)k, UINT32_MAX,
						 max);
		steady = spawn_producer(&loc, steady_id, STEADY, max);
		kill_at = now + 1000 + (uint64_t)(rand_r(&seed) % 20000);
		for (;;) {
			const struct tpkt *h;
			const void *t;
			uint32_t len, tl, slot;

			now = cour_now_us();
			cr_assert_lt(now, deadline, "round %u: stuck, steady at %u", round,
				     next[NVICT]);
			if (!killed && now >= kill_at) {
				for (int k = 0; k < NVICT; k++) {
					cr_assert_eq(kill(vict[k], SIGKILL), 0);
					cr_assert_eq(waitpid(vict[k], &st, 0), vict[k]);
				}
				killed = true;
				kills += NVICT;
			}
			if (!steady_done && waitpid(steady, &st, WNOHANG) == steady) {
				cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "steady: %#x", st);
				steady_done = true;
			}
			h = cour_shm_ring_peek(r, &len, &t, &tl);
			if (!h) {
				/* drained: every child gone and nothing for 3 stuck periods */
				if (killed && steady_done && now - last > 300000)
					break;
				sched_yield();
				continue;
			}
			last = now;
			cr_assert_geq(len, sizeof(*h));
			if (h->id == steady_id)
				slot = NVICT;
			else
				slot = h->id - 10 - round * NVICT;
			cr_assert_leq(slot, NVICT, "round %u: producer %u", round, h->id);
			cr_assert_eq(check_pkt(h, len, t, tl, h->id, next[slot]), 0,
				     "round %u producer %u: packet %u, wanted %u", round, h->id,
				     h->seq, next[slot]);
			next[slot]++;
			cour_shm_ring_pop(r);
		}
		cr_assert_eq(next[NVICT], STEADY, "round %u: the steady producer lost packets", round);
		for (int k = 0; k < NVICT; k++)
			victim_pkts += next[k];
	}
	cr_assert_leq(cour_shm_ring_reclaimed(r), kills);
	cr_assert_eq(cour_shm_ring_corrupt(r), 0);
	cr_log_info("random kills: %" PRIu64 " victims, %" PRIu64 " of their packets, %" PRIu64
		    " cells reclaimed\n", kills, victim_pkts, cour_shm_ring_reclaimed(r));
	cour_shm_ring_close(r);
}

Test(shm_ring, slow_live_reserver_keeps_its_cell)
{
	const uint32_t max = 512;
	struct cour_shm_ring *r;
	struct cour_shm_locator loc;
	const void *p, *t;
	uint32_t len, tl;
	uint64_t t0, deadline;
	int pipefd[2];
	pid_t slow, prod, parent = getpid();

	cr_assert_eq(cour_shm_ring_create(16, max, &r, &loc), 0);
	cr_assert_eq(pipe(pipefd), 0);
	slow = fork();
	if (!slow) {
		struct cour_shm_ring *c;
		uint8_t buf[300], tag[28];
		struct tpkt h = { .id = 5, .seq = 0, .len = sizeof(buf) };
		struct iovec iov = { buf, sizeof(buf) };
		uint64_t pos;

		child_init(parent);
		for (size_t i = 0; i < sizeof(buf); i++)
			buf[i] = pattern(5, 0, i);
		make_tag(tag, 5);
		if (cour_shm_ring_attach(&loc, &c) || cour_shm_ring_reserve(c, &pos, true))
			_exit(10);
		if (write(pipefd[1], "r", 1) != 1)
			_exit(11);
		usleep(500000);         /* preempted for half a second, as on a loaded host */
		if (cour_shm_ring_commit(c, pos, tag, sizeof(tag), &h, sizeof(h), &iov, 1, NULL))
			_exit(12);
		_exit(0);
	}
	cr_assert(wait_byte(pipefd[0]));
	t0 = cour_now_us();
	prod = spawn_producer(&loc, 6, 100, max);
	deadline = t0 + DEADLINE_US;
	p = wait_pkt(r, &len, &t, &tl, deadline);
	cr_assert_not_null(p);
	cr_assert_geq(cour_now_us() - t0, 300000, "the slow packet came before it was written");
	cr_assert_eq(check_pkt(p, len, t, tl, 5, 0), 0, "the slow packet, whole and first");
	cour_shm_ring_pop(r);
	for (uint32_t s = 0; s < 100; s++) {
		p = wait_pkt(r, &len, &t, &tl, deadline);
		cr_assert_not_null(p);
		cr_assert_eq(check_pkt(p, len, t, tl, 6, s), 0, "packet %u", s);
		cour_shm_ring_pop(r);
	}
	cr_assert_eq(cour_shm_ring_reclaimed(r), 0, "a live producer's cell was taken");
	cr_assert_eq(cour_shm_ring_corrupt(r), 0);
	cr_assert_eq(warnings, 0);
	cr_assert_eq(reap(slow), 0);
	cr_assert_eq(reap(prod), 0);
	close(pipefd[0]);
	close(pipefd[1]);
	cour_shm_ring_close(r);
}

Test(shm_ring, arm_wakes_once)
{
	struct cour_shm_ring *own, *prod;
	struct cour_shm_locator loc;
	uint32_t len;
	bool wake;

	cr_assert_eq(cour_shm_ring_create(8, 64, &own, &loc), 0);
	cr_assert_eq(cour_shm_ring_attach(&loc, &prod), 0);
	cr_assert(cour_shm_ring_arm(own), "empty: safe to sleep");
	wake = false;
	cr_assert_eq(put_pkt(prod, 1, 0, 8, &wake), 0);
	cr_assert(wake, "the first put after arming wakes");
	for (uint32_t s = 1; s < 4; s++) {
		wake = false;
		cr_assert_eq(put_pkt(prod, 1, s, 8, &wake), 0);
		cr_assert_not(wake, "put %u: woken already", s);
	}
	cr_assert_not(cour_shm_ring_arm(own), "packets wait: not safe to sleep");
	wake = false;
	cr_assert_eq(put_pkt(prod, 1, 4, 8, &wake), 0);
	cr_assert_not(wake, "a failed arm leaves no flag behind");
	for (int i = 0; i < 5; i++) {
		cr_assert_not_null(cour_shm_ring_peek(own, &len, NULL, NULL));
		cour_shm_ring_pop(own);
	}
	cr_assert(cour_shm_ring_arm(own));
	cour_shm_ring_disarm(own);
	wake = false;
	cr_assert_eq(put_pkt(prod, 1, 5, 8, &wake), 0);
	cr_assert_not(wake, "disarmed");
	cr_assert_not_null(cour_shm_ring_peek(own, &len, NULL, NULL));
	cour_shm_ring_pop(own);

	/* a put without a wake pointer leaves the flag for someone else */
	cr_assert(cour_shm_ring_arm(own));
	cr_assert_eq(put_pkt(prod, 1, 6, 8, NULL), 0);
	wake = false;
	cr_assert_eq(put_pkt(prod, 1, 7, 8, &wake), 0);
	cr_assert(wake);
	cour_shm_ring_close(prod);
	cour_shm_ring_close(own);
}

/* producers in several processes race for one arming: exactly one of them rings */
Test(shm_ring, one_doorbell_among_racing_producers)
{
	enum { NPROD = 4, ROUNDS = 20 };
	struct cour_shm_ring *r;
	struct cour_shm_locator loc;
	uint32_t len;

	cr_assert_eq(cour_shm_ring_create(16, 64, &r, &loc), 0);
	for (int round = 0; round < ROUNDS; round++) {
		pid_t pid[NPROD], parent = getpid();
		int go[2], wakes = 0;

		cr_assert_eq(pipe(go), 0);
		cr_assert(cour_shm_ring_arm(r));
		for (int i = 0; i < NPROD; i++) {
			pid[i] = fork();
			if (!pid[i]) {
				struct cour_shm_ring *c;
				bool wake = false;
				char b;

				child_init(parent);
				close(go[1]);
				if (cour_shm_ring_attach(&loc, &c))
					_exit(10);
				if (read(go[0], &b, 1) != 0)        /* start together */
					_exit(11);
				if (put_pkt(c, (uint32_t)i + 1, 0, 8, &wake))
					_exit(12);
				_exit(wake ? 1 : 0);
			}
		}
		close(go[0]);
		close(go[1]);
		for (int i = 0; i < NPROD; i++) {
			int st = reap(pid[i]);

			cr_assert(st == 0 || st == 1, "round %d child %d: %d", round, i, st);
			wakes += st;
		}
		cr_assert_eq(wakes, 1, "round %d: %d doorbells for one arming", round, wakes);
		for (int i = 0; i < NPROD; i++) {
			cr_assert_not_null(cour_shm_ring_peek(r, &len, NULL, NULL));
			cour_shm_ring_pop(r);
		}
		cr_assert_null(cour_shm_ring_peek(r, &len, NULL, NULL));
	}
	cour_shm_ring_close(r);
}

/* map a ring's file a second time, through /proc, to write what a stray writer would */
static void *map_again(const struct cour_shm_locator *loc)
{
	char path[64];
	void *m;
	int fd;

	snprintf(path, sizeof(path), "/proc/%u/fd/%d", loc->pid, loc->fd);
	fd = open(path, O_RDWR);
	cr_assert_geq(fd, 0);
	m = mmap(NULL, loc->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	cr_assert_neq(m, MAP_FAILED);
	close(fd);
	return m;
}

Test(shm_ring, corrupted_header_is_refused)
{
	struct cour_shm_ring *r, *p = NULL;
	struct cour_shm_locator loc;
	struct cour_shm_hdr *h, good;

	cr_assert_eq(cour_shm_ring_create(8, 128, &r, &loc), 0);
	h = map_again(&loc);
	good = *h;
	for (int f = 0; f < 9; f++) {
		switch (f) {
		case 0: h->magic ^= 0x100; break;
		case 1: h->version = COUR_SHM_VERSION + 1; break;
		case 2: h->hdr_size = 128; break;
		case 3: h->nonce ^= 1; break;
		case 4: h->bytes += 4096; break;
		case 5: h->ncells = 12; break;
		case 6: h->ncells = 1u << 24; break;     /* cells far past the end */
		case 7: h->cell_payload = 64; break;    /* the stride no longer matches */
		case 8: h->cell_size = 64; break;
		}
		cr_assert_eq(cour_shm_ring_attach(&loc, &p), -FI_EINVAL, "field %d", f);
		cr_assert_null(p);
		*h = good;
		cr_assert_eq(cour_shm_ring_attach(&loc, &p), 0, "restored after field %d", f);
		cour_shm_ring_close(p);
		p = NULL;
	}
	munmap(h, loc.bytes);
	cour_shm_ring_close(r);
}

Test(shm_ring, bogus_memfd_is_refused)
{
	struct cour_shm_ring *r, *p = NULL;
	struct cour_shm_locator loc, fake;
	uint8_t *m;
	int fd;

	cr_assert_eq(cour_shm_ring_create(8, 128, &r, &loc), 0);
	fd = memfd_create("bogus", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, (off_t)loc.bytes), 0);
	m = mmap(NULL, loc.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	cr_assert_neq(m, MAP_FAILED);
	fake = loc;
	fake.fd = fd;

	/* an exact copy of a ring, but anyone may shrink it under us: refused (SIGBUS danger) */
	memcpy(m, cour_shm_ring_base(r), loc.bytes);
	cr_assert_eq(cour_shm_ring_attach(&fake, &p), -FI_EINVAL, "unsealed");
	cr_assert_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
	cr_assert_eq(cour_shm_ring_attach(&fake, &p), 0, "the same, sealed, is a ring");
	cour_shm_ring_close(p);
	p = NULL;

	/* garbage of the right size */
	srand(7);
	for (uint64_t i = 0; i < loc.bytes; i++)
		m[i] = (uint8_t)rand();
	cr_assert_eq(cour_shm_ring_attach(&fake, &p), -FI_EINVAL, "garbage");
	cr_assert_null(p);
	munmap(m, loc.bytes);
	close(fd);
	cour_shm_ring_close(r);
}

Test(shm_ring, corrupt_cells_are_skipped)
{
	struct cour_shm_ring *r;
	struct cour_shm_locator loc;
	struct cour_shm_slot *c0;
	const void *p, *t;
	uint32_t len, tl;
	uint64_t t0;

	cr_assert_eq(cour_shm_ring_create(8, 128, &r, &loc), 0);
	c0 = (struct cour_shm_slot *)((uint8_t *)cour_shm_ring_base(r) + cour_shm_slot_off(0));
	cr_assert_eq(((struct cour_shm_hdr *)cour_shm_ring_base(r))->cell_size, 128);

	/* a published packet longer than a cell: skipped at once */
	cr_assert_eq(put_pkt(r, 1, 0, 20, NULL), 0);
	cr_assert_eq(put_pkt(r, 1, 1, 20, NULL), 0);
	c0->len = 129;
	p = cour_shm_ring_peek(r, &len, &t, &tl);
	cr_assert_not_null(p);
	cr_assert_eq(check_pkt(p, len, t, tl, 1, 1), 0);
	cour_shm_ring_pop(r);
	cr_assert_eq(cour_shm_ring_corrupt(r), 1);

	/* a tag longer than the tag field: the same */
	cr_assert_eq(put_pkt(r, 1, 2, 20, NULL), 0);
	cr_assert_eq(put_pkt(r, 1, 3, 20, NULL), 0);
	((struct cour_shm_slot *)((uint8_t *)c0 + 2 * COUR_SHM_SLOT))->tag_len = 33;
	p = cour_shm_ring_peek(r, &len, &t, &tl);
	cr_assert_not_null(p);
	cr_assert_eq(check_pkt(p, len, t, tl, 1, 3), 0);
	cour_shm_ring_pop(r);
	cr_assert_eq(cour_shm_ring_corrupt(r), 2);

	/* a state word no step writes (state 3) at the head: reset after it stays 100 ms */
	cr_assert_eq(put_pkt(r, 1, 4, 20, NULL), 0);
	cr_assert_eq(put_pkt(r, 1, 5, 20, NULL), 0);
	*(uint64_t *)((uint8_t *)cour_shm_ring_base(r) + cour_shm_slot_off(4)) =
		cour_shm_lap_word(7, 4, 3, 0);
	t0 = cour_now_us();
	p = wait_pkt(r, &len, &t, &tl, t0 + DEADLINE_US);
	cr_assert_not_null(p);
	cr_assert_geq(cour_now_us() - t0, 90000);
	cr_assert_eq(check_pkt(p, len, t, tl, 1, 5), 0);
	cour_shm_ring_pop(r);
	cr_assert_eq(cour_shm_ring_corrupt(r), 3);
	cr_assert_eq(cour_shm_ring_reclaimed(r), 0);
	cr_assert_eq(warnings, 3);
	cr_assert_null(cour_shm_ring_peek(r, &len, &t, &tl));
	cour_shm_ring_close(r);
}

/* random words everywhere producers and the consumer look: every call returns, and fast */
Test(shm_ring, garbage_never_hangs)
{
	struct cour_shm_ring *own, *prod;
	struct cour_shm_locator loc;
	struct cour_shm_hdr *h;
	uint64_t worst = 0, t_end, next_scramble = 0, calls = 0, got = 0;
	unsigned seed = 11;

	cr_assert_eq(cour_shm_ring_create(16, 128, &own, &loc), 0);
	cr_assert_eq(cour_shm_ring_attach(&loc, &prod), 0);
	h = cour_shm_ring_base(own);
	t_end = cour_now_us() + 1500000;
	for (int round = 0; round < 100000 && cour_now_us() < t_end; round++) {
		if (cour_now_us() >= next_scramble) {
			/* the header's counters and every cell's state word and lengths, every
			 * 250 ms: long enough for the consumer to reset some garbage at the head */
			next_scramble = cour_now_us() + 250000;
			h->tail = (uint64_t)rand_r(&seed) << 32 | (uint64_t)rand_r(&seed);
			h->armed = (uint32_t)rand_r(&seed);
			for (int i = 0; i < 16; i++) {
				struct cour_shm_slot *c = (struct cour_shm_slot *)
					((uint8_t *)h + cour_shm_slot_off((uint32_t)i));
				uint64_t *st = &c->state;

				*st = (uint64_t)rand_r(&seed) << 33 ^ (uint64_t)rand_r(&seed);
				if (rand_r(&seed) & 1)  /* some plausible: right lap, random state */
					*st = cour_shm_lap_word(15, (uint64_t)i,
								(unsigned)rand_r(&seed) & 3,
								(uint32_t)rand_r(&seed));
				c->len = (uint32_t)rand_r(&seed) % 300;
				c->tag_len = (uint32_t)rand_r(&seed) % 40;
			}
		}
		{
			uint64_t t0 = cour_now_us(), dt;
			const void *p, *t;
			uint32_t len, tl;
			bool wake = false;
			int ret = put_pkt(prod, 1, (uint32_t)round, 16, &wake);

			cr_assert(ret == 0 || ret == -FI_EAGAIN, "put: %d", ret);
			p = cour_shm_ring_peek(own, &len, &t, &tl);
			if (p) {
				cr_assert_leq(len, 128);
				cr_assert_leq(tl, COUR_SHM_TAG_MAX);
				got++;
				cour_shm_ring_pop(own);
			}
			(void)cour_shm_ring_arm(own);
			cour_shm_ring_disarm(own);
			dt = cour_now_us() - t0;
			worst = COUR_MAX(worst, dt);
			calls++;
			usleep(20);
		}
	}
	cr_assert_gt(calls, 1000);
	cr_assert_lt(worst, 50000, "one round of calls took %" PRIu64 " us", worst);
	cr_assert_gt(cour_shm_ring_corrupt(own) + got, 0, "the consumer saw something");
	cr_log_info("garbage: %" PRIu64 " rounds, worst %" PRIu64 " us, %" PRIu64 " delivered, %"
		    PRIu64 " reset or skipped\n", calls, worst, got, cour_shm_ring_corrupt(own));
	cour_shm_ring_close(prod);
	cour_shm_ring_close(own);
}

/* ---- grants: leases on the owner's memory ---- */

Test(shm_ring, grant_lifecycle)
{
	struct cour_shm_ring *own, *prod;
	struct cour_shm_locator loc;
	uint32_t slot, s2;
	uint64_t gen, g2;

	cr_assert_eq(cour_shm_ring_create(8, 128, &own, &loc), 0);
	cr_assert_eq(cour_shm_ring_attach(&loc, &prod), 0);

	/* taken, copied, done: the owner sees DONE, and the word is the producer's */
	cr_assert_eq(cour_shm_grant_open(own, &slot, &gen), 0);
	cr_assert_eq(cour_shm_grants_open(own), 1);
	cr_assert_not(cour_shm_grant_take(prod, slot, gen + 1), "another generation");
	cr_assert_not(cour_shm_grant_take(prod, COUR_SHM_GRANTS, gen), "no such slot");
	cr_assert(cour_shm_grant_take(prod, slot, gen));
	cr_assert_not(cour_shm_grant_take(prod, slot, gen), "taken once only");
	cr_assert_eq(cour_shm_grant_revoke(own, slot, gen), COUR_GRANT_BUSY);
	cour_shm_grant_finish(prod, slot, gen, true);
	cr_assert_eq(cour_shm_grant_revoke(own, slot, gen), COUR_GRANT_DONE);
	cour_shm_grant_close(own, slot);
	cr_assert_eq(cour_shm_grants_open(own), 0);

	/* revoked first: the producer can no longer take it, even with the right generation */
	cr_assert_eq(cour_shm_grant_open(own, &s2, &g2), 0);
	cr_assert_eq(s2, slot, "a closed slot is reused");
	cr_assert_neq(g2, gen, "with a new generation");
	cr_assert_not(cour_shm_grant_take(prod, s2, gen), "the old lease's packet, late");
	cr_assert_eq(cour_shm_grant_revoke(own, s2, g2), COUR_GRANT_REVOKED);
	cr_assert_not(cour_shm_grant_take(prod, s2, g2));
	cour_shm_grant_close(own, s2);

	/* a failed copy reads as FAILED; a word nobody should write, too */
	cr_assert_eq(cour_shm_grant_open(own, &slot, &gen), 0);
	cr_assert(cour_shm_grant_take(prod, slot, gen));
	cour_shm_grant_finish(prod, slot, gen, false);
	cr_assert_eq(cour_shm_grant_revoke(own, slot, gen), COUR_GRANT_FAILED);
	cour_shm_grant_close(own, slot);
	cr_assert_eq(cour_shm_grant_open(own, &slot, &gen), 0);
	((struct cour_shm_hdr *)cour_shm_ring_base(own))->grant[slot] = ~0ull;
	cr_assert_eq(cour_shm_grant_revoke(own, slot, gen), COUR_GRANT_FAILED);
	cour_shm_grant_close(own, slot);

	/* a producer cannot open leases, and the table has an end */
	cr_assert_eq(cour_shm_grant_open(prod, &slot, &gen), -FI_EAGAIN);
	for (int i = 0; i < COUR_SHM_GRANTS; i++)
		cr_assert_eq(cour_shm_grant_open(own, &slot, &gen), 0, "lease %d", i);
	cr_assert_eq(cour_shm_grant_open(own, &slot, &gen), -FI_EAGAIN);
	cr_assert_eq(cour_shm_grants_open(own), COUR_SHM_GRANTS);
	cour_shm_ring_close(prod);
	cour_shm_ring_close(own);
}

/* A producer in another process holds a lease while it copies: the owner's revoke waits it
 * out (BUSY) and then sees the copy's bytes; a lease revoked first is never taken. */
Test(shm_ring, grant_across_processes)
{
	struct cour_shm_ring *own;
	struct cour_shm_locator loc;
	uint32_t slot;
	uint64_t gen;
	int go[2], ready[2];
	pid_t parent = getpid(), pid;
	volatile uint64_t *target = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
					  MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	cr_assert_neq((void *)target, MAP_FAILED);
	cr_assert_eq(cour_shm_ring_create(8, 128, &own, &loc), 0);
	cr_assert_eq(cour_shm_grant_open(own, &slot, &gen), 0);
	cr_assert_eq(pipe(go), 0);
	cr_assert_eq(pipe(ready), 0);
	pid = fork();
	if (!pid) {
		struct cour_shm_ring *prod;
		char c = 0;

		child_init(parent);
		if (cour_shm_ring_attach(&loc, &prod) || !cour_shm_grant_take(prod, slot, gen))
			_exit(10);
		if (write(ready[1], &c, 1) != 1 || !wait_byte(go[0]))
			_exit(11);
		*target = 0x5a5a5a5a;               /* "the copy" */
		cour_shm_grant_finish(prod, slot, gen, true);
		/* the second lease was revoked before we got here */
		if (!wait_byte(go[0]) || cour_shm_grant_take(prod, slot, gen + 1))
			_exit(12);
		_exit(0);
	}
	cr_assert(wait_byte(ready[0]), "the child took the lease");
	cr_assert_eq(cour_shm_grant_revoke(own, slot, gen), COUR_GRANT_BUSY);
	cr_assert_eq(write(go[1], "g", 1), 1);
	uint64_t deadline = cour_now_us() + DEADLINE_US;
	enum cour_shm_grant_state st;
	while ((st = cour_shm_grant_revoke(own, slot, gen)) == COUR_GRANT_BUSY &&
	       cour_now_us() < deadline)
		sched_yield();
	cr_assert_eq(st, COUR_GRANT_DONE);
	cr_assert_eq(*target, 0x5a5a5a5a, "the copy is visible once the lease ended");
	cour_shm_grant_close(own, slot);
	cr_assert_eq(cour_shm_grant_open(own, &slot, &gen), 0);
	cr_assert_eq(cour_shm_grant_revoke(own, slot, gen), COUR_GRANT_REVOKED);
	cr_assert_eq(write(go[1], "g", 1), 1);
	cr_assert_eq(reap(pid), 0);
	cour_shm_ring_close(own);
	munmap((void *)target, 4096);
}

/* Pages of [base, base + len) present in our page table (/proc/self/pagemap bit 63). */
static int pages_present(const void *base, size_t len)
{
	long page = sysconf(_SC_PAGESIZE);
	int fd = open("/proc/self/pagemap", O_RDONLY), n = 0;

	cr_assert_geq(fd, 0);
	for (uintptr_t a = (uintptr_t)base; a < (uintptr_t)base + len; a += (uintptr_t)page) {
		uint64_t e = 0;

		cr_assert_eq(pread(fd, &e, sizeof(e), (off_t)(a / (uintptr_t)page * sizeof(e))),
			     (ssize_t)sizeof(e));
		n += (int)(e >> 63);
		if (e >> 63 && getenv("PM_SHOW"))
			fprintf(stderr, " %lu", (unsigned long)((a - (uintptr_t)base) / (uintptr_t)page));
	}
	close(fd);
	return n;
}

/*
 * What a peer's ring costs a producer in resident memory, and how it gives it back once the
 * peer is quiet (the packets it put must survive that): the header's page, the pages of the
 * slots it took (sixteen to a page) and the pages of the cells its big packets went to. Not
 * the pages around them that the owner's use put in the page cache: a read fault on a shared
 * mapping maps those too (the kernel's fault-around), which the layout keeps away from the
 * header and the puts avoid by never reading a state word. A 256-cell ring of 16 KiB cells,
 * as the engine makes.
 */
Test(shm_ring, a_producer_maps_only_what_it_uses)
{
	struct cour_shm_ring *own, *prod;
	struct cour_shm_locator loc;
	const void *p, *t;
	uint32_t len, tl;

	cr_assert_eq(cour_shm_ring_create(256, 16384 + 128, &own, &loc), 0);
	/* the owner's traffic fills the page cache around where a producer will look */
	for (uint32_t i = 0; i < 40; i++) {
		cr_assert_eq(put_pkt(own, 9, i, 2000, NULL), 0);
		cr_assert_not_null(cour_shm_ring_peek(own, &len, &t, &tl));
		cour_shm_ring_pop(own);
	}
	cr_assert_eq(cour_shm_ring_attach(&loc, &prod), 0);
	cr_assert_eq(put_pkt(prod, 1, 0, 20, NULL), 0);
	cr_assert_eq(put_pkt(prod, 1, 1, 20, NULL), 0);
	int n = pages_present(cour_shm_ring_base(prod), (size_t)loc.bytes);
	cr_log_info("producer maps %d pages of %zu\n", n, (size_t)loc.bytes / 4096);
	/* the header and the page of the two slots (positions 40 and 41) */
	cr_assert_leq(n, 2, "a producer that put two small packets maps %d pages", n);
	/* a quiet peer's ring leaves our page tables; what we put there stays the owner's */
	cour_shm_ring_forget_pages(prod);
	cr_assert_eq(pages_present(cour_shm_ring_base(prod), (size_t)loc.bytes), 0);
	cr_assert_eq(put_pkt(prod, 1, 2, 3000, NULL), 0);
	n = pages_present(cour_shm_ring_base(prod), (size_t)loc.bytes);
	/* the header, its slot's page, its cell's (two: this one straddles a page boundary) */
	cr_assert_leq(n, 4, "a 3000-byte packet maps %d pages", n);
	for (uint32_t seq = 0; seq < 3; seq++) {
		p = cour_shm_ring_peek(own, &len, &t, &tl);
		cr_assert_not_null(p, "packet %u", seq);
		cr_assert_eq(check_pkt(p, len, t, tl, 1, seq), 0, "packet %u", seq);
		cour_shm_ring_pop(own);
	}
	cour_shm_ring_forget_pages(own);       /* the owner's own mapping is never dropped */
	cr_assert_gt(pages_present(cour_shm_ring_base(own), (size_t)loc.bytes), 4);
	cour_shm_ring_close(prod);
	cour_shm_ring_close(own);
}

/*
 * Small packets live in their slots: an owner that carried laps of them has made resident the
 * header and the slots (created so), not one page of the 4 MiB of cells; a packet exactly the
 * slot's size and one a byte over arrive whole either way.
 */
Test(shm_ring, small_packets_stay_in_the_slots)
{
	struct cour_shm_ring *own;
	struct cour_shm_locator loc;
	const size_t hdr = sizeof(struct tpkt);
	const void *p, *t;
	uint32_t len, tl, seq = 0;
	uint8_t *base;
	size_t cells_off = cour_shm_cell_off(256, 16384 + 128, 0);
	const uint32_t inl = COUR_SHM_SLOT_ROOM - 28;   /* the longest packet in a slot, tag 28 */

	cr_assert_eq(cour_shm_ring_create(256, 16384 + 128, &own, &loc), 0);
	base = cour_shm_ring_base(own);
	for (int lap = 0; lap < 4; lap++) {
		for (uint32_t i = 0; i < 256; i++, seq++) {
			uint32_t plen = i % 3 == 0 ? inl - hdr : 1 + i % 100;

			cr_assert_eq(put_pkt(own, 2, seq, plen, NULL), 0, "put %u", seq);
			p = cour_shm_ring_peek(own, &len, &t, &tl);
			cr_assert_not_null(p, "packet %u", seq);
			cr_assert_eq(len, hdr + plen);
			cr_assert_eq(check_pkt(p, len, t, tl, 2, seq), 0, "packet %u", seq);
			cour_shm_ring_pop(own);
		}
	}
	int in_cells = pages_present(base + cells_off, (size_t)loc.bytes - cells_off);
	int all = pages_present(base, (size_t)loc.bytes);

	cr_log_info("owner after 1024 small packets: %d pages, %d of them cells\n", all, in_cells);
	cr_assert_eq(in_cells, 0, "small packets touched %d pages of cells", in_cells);
	cr_assert_leq(all, 1 + 256 * COUR_SHM_SLOT / 4096, "header and slots only, not %d", all);

	/* either side of the boundary, with other packets around */
	for (uint32_t k = 0; k < 4; k++, seq++) {
		uint32_t plen = (uint32_t)(inl - hdr) + k % 2;

		cr_assert_eq(put_pkt(own, 3, seq, plen, NULL), 0);
	}
	for (uint32_t k = 0; k < 4; k++) {
		p = cour_shm_ring_peek(own, &len, &t, &tl);
		cr_assert_not_null(p);
		cr_assert_eq(len, inl + k % 2);
		cr_assert_eq(check_pkt(p, len, t, tl, 3, seq - 4 + k), 0, "packet %u", k);
		cour_shm_ring_pop(own);
	}
	cr_assert_gt(pages_present(base + cells_off, (size_t)loc.bytes - cells_off), 0,
		     "the packets over the slot's size went to cells");
	cour_shm_ring_close(own);
}
