/*
 * Unit tests of completion queues (cour_cq.c) through the fi_cq_* API on a hand-built domain;
 * the engine is played by calling the *_locked writers directly.
 */
#include "fi/cour_cq.h"
#include "proto/cour_errno.h"

#include "test_mcond.h"

#include <criterion/criterion.h>
#include <poll.h>
#include <pthread.h>
#include <time.h>
#include <stdlib.h>
#include <unistd.h>

/* from test_domain_stub.c; NULL when linked without it (see there) */
extern int cour_test_progress_calls __attribute__((weak));
extern void (*cour_test_progress_hook)(struct cour_domain *dom) __attribute__((weak));

static struct cour_domain dom;
/* only what fi_cq_open needs: the domain is not under test */
static struct fi_ops_domain dom_ops = {
	.size = sizeof(struct fi_ops_domain),
	.cq_open = cour_cq_open,
};

static void setup(void)
{
	memset(&dom, 0, sizeof(dom));
	cour_lock_init(&dom.lock, COUR_LOCK_MUTEX);
	dom.domain_fid.fid.fclass = FI_CLASS_DOMAIN;
	dom.domain_fid.ops = &dom_ops;
}

static void teardown(void)
{
	cr_expect_eq(dom.refcnt, 0, "objects left open on the domain: %d", dom.refcnt);
	cour_lock_destroy(&dom.lock);
}

TestSuite(cq, .init = setup, .fini = teardown, .timeout = 20);

static struct fid_cq *open_cq(enum fi_cq_format format, enum fi_wait_obj wait_obj, size_t size)
{
	struct fi_cq_attr attr = { .size = size, .format = format, .wait_obj = wait_obj };
	struct fid_cq *cq = NULL;
	int ret;

	ret = fi_cq_open(&dom.domain_fid, &attr, &cq, NULL);
	cr_assert_eq(ret, 0, "fi_cq_open: %d", ret);
	cr_assert_not_null(cq);
	return cq;
}

static struct cour_cq *cq_of(struct fid_cq *cq)
{
	return COUR_CONTAINER_OF(cq, struct cour_cq, cq_fid);
}

static struct cour_cq_entry mk(uintptr_t i)
{
	struct cour_cq_entry e = {
		.op_context = (void *)(0x1000 + i),
		.flags = FI_RECV | FI_TAGGED | FI_REMOTE_CQ_DATA,
		.len = 100 + i,
		.buf = (void *)(0x2000 + i),
		.data = 0xdada0000 + i,
		.tag = 0x7a600000 + i,
		.src = (fi_addr_t)(7 + i),
	};
	return e;
}

/* the engine's side: a success or an error completion, lock taken as the engine would have it */
static void put(struct fid_cq *cq, uintptr_t i)
{
	struct cour_cq_entry e = mk(i);
	int ret;

	cour_lock_acquire(&dom.lock);
	ret = cour_cq_write_locked(cq_of(cq), &e);
	cour_lock_release(&dom.lock);
	cr_assert_eq(ret, 0);
}

static void put_err(struct fid_cq *cq, uintptr_t i, int err, int prov_errno, size_t olen)
{
	struct cour_cq_entry e = mk(i);
	int ret;

	cour_lock_acquire(&dom.lock);
	ret = cour_cq_write_err_locked(cq_of(cq), &e, err, prov_errno, olen);
	cour_lock_release(&dom.lock);
	cr_assert_eq(ret, 0);
}

static void close_cq(struct fid_cq *cq)
{
	cr_assert_eq(fi_close(&cq->fid), 0);
}

static bool fd_readable(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	return poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLIN);
}

/* ---- formats ---- */

static const size_t fmt_size[] = {
	[FI_CQ_FORMAT_UNSPEC] = sizeof(struct fi_cq_entry),
	[FI_CQ_FORMAT_CONTEXT] = sizeof(struct fi_cq_entry),
	[FI_CQ_FORMAT_MSG] = sizeof(struct fi_cq_msg_entry),
	[FI_CQ_FORMAT_DATA] = sizeof(struct fi_cq_data_entry),
	[FI_CQ_FORMAT_TAGGED] = sizeof(struct fi_cq_tagged_entry),
};

/* Two entries read into a buffer full of 0xa5: each lands at its format's stride with exactly
 * its format's fields, and nothing past the second entry is touched. */
static void check_format(enum fi_cq_format fmt)
{
	struct fid_cq *cq = open_cq(fmt, FI_WAIT_NONE, 0);
	unsigned char raw[4 * sizeof(struct fi_cq_tagged_entry)];
	size_t sz = fmt_size[fmt], i;
	ssize_t ret;

	put(cq, 1);
	put(cq, 2);
	memset(raw, 0xa5, sizeof(raw));
	ret = fi_cq_read(cq, raw, 2);
	cr_assert_eq(ret, 2, "format %d: read %zd", fmt, ret);
	for (i = 0; i < 2; i++) {
		struct fi_cq_tagged_entry t;
		struct cour_cq_entry e = mk(i + 1);

		memset(&t, 0, sizeof(t));
		memcpy(&t, raw + i * sz, sz);
		cr_assert_eq(t.op_context, e.op_context, "format %d entry %zu context", fmt, i);
		if (fmt >= FI_CQ_FORMAT_MSG) {
			cr_assert_eq(t.flags, e.flags);
			cr_assert_eq(t.len, e.len);
		}
		if (fmt >= FI_CQ_FORMAT_DATA) {
			cr_assert_eq(t.buf, e.buf);
			cr_assert_eq(t.data, e.data);
		}
		if (fmt == FI_CQ_FORMAT_TAGGED)
			cr_assert_eq(t.tag, e.tag);
	}
	for (i = 2 * sz; i < sizeof(raw); i++)
		cr_assert_eq(raw[i], 0xa5, "format %d wrote byte %zu past 2 entries of %zu", fmt,
			     i, sz);
	close_cq(cq);
}

Test(cq, format_unspec_is_context) { check_format(FI_CQ_FORMAT_UNSPEC); }
Test(cq, format_context) { check_format(FI_CQ_FORMAT_CONTEXT); }
Test(cq, format_msg) { check_format(FI_CQ_FORMAT_MSG); }
Test(cq, format_data) { check_format(FI_CQ_FORMAT_DATA); }
Test(cq, format_tagged) { check_format(FI_CQ_FORMAT_TAGGED); }

Test(cq, bad_attrs)
{
	struct fi_cq_attr attr = { .format = FI_CQ_FORMAT_TAGGED + 7 };
	struct fid_cq *cq = NULL;

	cr_assert_eq(fi_cq_open(&dom.domain_fid, &attr, &cq, NULL), -FI_ENOSYS);
	attr.format = FI_CQ_FORMAT_MSG;
	attr.wait_obj = FI_WAIT_POLLFD;
	cr_assert_eq(fi_cq_open(&dom.domain_fid, &attr, &cq, NULL), -FI_ENOSYS);
	attr.wait_obj = FI_WAIT_SET;        /* without a set (test_wait.c has them) */
	cr_assert_eq(fi_cq_open(&dom.domain_fid, &attr, &cq, NULL), -FI_EINVAL);
	attr.wait_obj = FI_WAIT_UNSPEC;
	attr.wait_cond = FI_CQ_COND_THRESHOLD + 3;
	cr_assert_eq(fi_cq_open(&dom.domain_fid, &attr, &cq, NULL), -FI_EINVAL);
	cr_assert_null(cq, "out-parameter set on failure");
	cr_assert_eq(dom.refcnt, 0);
}

/* ---- reading ---- */

Test(cq, read_more_than_available)
{
	struct fid_cq *cq = open_cq(FI_CQ_FORMAT_CONTEXT, FI_WAIT_NONE, 0);
	struct fi_cq_entry ent[10];
	int i;

	cr_assert_eq(fi_cq_read(cq, ent, 10), -FI_EAGAIN);
	for (i = 0; i < 3; i++)
		put(cq, i);
	cr_assert_eq(fi_cq_read(cq, ent, 10), 3);
	for (i = 0; i < 3; i++)
		cr_assert_eq(ent[i].op_context, (void *)(uintptr_t)(0x1000 + i));
	cr_assert_eq(fi_cq_read(cq, ent, 10), -FI_EAGAIN);
	close_cq(cq);
}

Test(cq, read_count_zero_progresses)
{
	struct fid_cq *cq = open_cq(FI_CQ_FORMAT_CONTEXT, FI_WAIT_NONE, 0);
	struct fi_cq_entry ent;
	int before;

	if (!&cour_test_progress_calls)
		cr_skip_test("needs test_domain_stub.c");
	before = cour_test_progress_calls;
	cr_assert_eq(fi_cq_read(cq, NULL, 0), -FI_EAGAIN);
	cr_assert_eq(cour_test_progress_calls, before + 1, "fi_cq_read(count 0) did not progress");
	put(cq, 0);
	cr_assert_eq(fi_cq_read(cq, NULL, 0), 0);
	cr_assert_eq(cour_test_progress_calls, before + 2,
		     "fi_cq_read(count 0) with a completion waiting did not progress");
	/* a read that finds completions waiting returns them without a pass */
	cr_assert_eq(fi_cq_read(cq, &ent, 1), 1, "count 0 consumed the entry");
	cr_assert_eq(cour_test_progress_calls, before + 2);
	put_err(cq, 1, FI_EIO, COUR_E_SEND, 0);
	cr_assert_eq(fi_cq_read(cq, NULL, 0), -FI_EAVAIL);
	cr_assert_eq(cour_test_progress_calls, before + 3);
	/* nothing waiting: the read progresses */
	cr_assert_eq(fi_cq_read(cq, &ent, 1), -FI_EAVAIL);
	cr_assert_eq(cour_test_progress_calls, before + 4);
	close_cq(cq);
}

static struct fid_cq *hook_cq;

static void hook_write_once(struct cour_domain *d)
{
	if (hook_cq) {
		struct cour_cq_entry e = mk(42);

		cr_assert_eq(cour_cq_write_locked(cq_of(hook_cq), &e), 0);
		hook_cq = NULL;
	}
}

/* a completion produced by progress inside fi_cq_read is returned by that same call */
Test(cq, read_returns_what_its_progress_produced)
{
	struct fid_cq *cq = open_cq(FI_CQ_FORMAT_MSG, FI_WAIT_NONE, 0);
	struct fi_cq_msg_entry ent;
	struct fi_cq_err_entry err = { 0 };
	int before;

	if (!&cour_test_progress_hook)
		cr_skip_test("needs test_domain_stub.c");
	hook_cq = cq;
	cour_test_progress_hook = hook_write_once;
	cr_assert_eq(fi_cq_read(cq, &ent, 1), 1);
	cr_assert_eq(ent.op_context, (void *)0x102a);
	cr_assert_eq(ent.len, 142);
	cour_test_progress_hook = NULL;
	before = cour_test_progress_calls;
	cr_assert_eq(fi_cq_readerr(cq, &err, 0), -FI_EAGAIN);
	cr_assert_eq(cour_test_progress_calls, before + 1, "fi_cq_readerr did not progress");
	close_cq(cq);
}

Test(cq, readfrom_source)
{
	struct fid_cq *cq = open_cq(FI_CQ_FORMAT_DATA, FI_WAIT_NONE, 0);
	struct cour_cq_entry e = mk(5);
	struct fi_cq_data_entry ent[4];
	fi_addr_t src[4] = { 0xdead, 0xdead, 0xdead, 0xdead };

	put(cq, 0);
	e.src = FI_ADDR_NOTAVAIL;
	cour_lock_acquire(&dom.lock);
	cr_assert_eq(cour_cq_write_locked(cq_of(cq), &e), 0);
	cour_lock_release(&dom.lock);
	put(cq, 2);
	cr_assert_eq(fi_cq_readfrom(cq, ent, 4, src), 3);
	cr_assert_eq(src[0], 7);
	cr_assert_eq(src[1], FI_ADDR_NOTAVAIL);
	cr_assert_eq(src[2], 9);
	cr_assert_eq(src[3], 0xdead, "readfrom wrote a source past the entries read");
	cr_assert_eq(ent[1].op_context, (void *)0x1005);
	close_cq(cq);
}

/* successes and errors come out in the order they went in */
Test(cq, ordering_with_errors)
{
	struct fid_cq *cq = open_cq(FI_CQ_FORMAT_TAGGED, FI_WAIT_NONE, 4);
	struct fi_cq_tagged_entry ent[10];
	struct fi_cq_err_entry err;

	put(cq, 1);
	put(cq, 2);
	put_err(cq, 3, FI_ETRUNC, COUR_E_TRUNC, 30);
	put(cq, 4);
	put_err(cq, 5, FI_ECANCELED, COUR_E_CANCELED, 0);
	put_err(cq, 6, FI_EIO, COUR_E_UNREACHABLE, 0);
	put(cq, 7);

	memset(&err, 0, sizeof(err));
	cr_assert_eq(fi_cq_readerr(cq, &err, 0), -FI_EAGAIN, "error reported before successes");
	cr_assert_eq(fi_cq_read(cq, ent, 10), 2);
	cr_assert_eq(ent[0].tag, 0x7a600001);
	cr_assert_eq(ent[1].tag, 0x7a600002);
	cr_assert_eq(fi_cq_read(cq, ent, 10), -FI_EAVAIL);
	cr_assert_eq(fi_cq_read(cq, ent, 10), -FI_EAVAIL, "-FI_EAVAIL consumed something");
	cr_assert_eq(fi_cq_readerr(cq, &err, 0), 1);
	cr_assert_eq(err.tag, 0x7a600003);
	cr_assert_eq(err.err, FI_ETRUNC);
	cr_assert_eq(fi_cq_read(cq, ent, 10), 1);
	cr_assert_eq(ent[0].tag, 0x7a600004);
	cr_assert_eq(fi_cq_read(cq, ent, 10), -FI_EAVAIL);
	cr_assert_eq(fi_cq_readerr(cq, &err, 0), 1);
	cr_assert_eq(err.err, FI_ECANCELED);
	cr_assert_eq(fi_cq_read(cq, ent, 10), -FI_EAVAIL);
	cr_assert_eq(fi_cq_readerr(cq, &err, 0), 1);
	cr_assert_eq(err.err, FI_EIO);
	cr_assert_eq(err.prov_errno, COUR_E_UNREACHABLE);
	cr_assert_eq(fi_cq_read(cq, ent, 10), 1);
	cr_assert_eq(ent[0].tag, 0x7a600007);
	cr_assert_eq(fi_cq_read(cq, ent, 10), -FI_EAGAIN);
	cr_assert_eq(fi_cq_readerr(cq, &err, 0), -FI_EAGAIN);
	close_cq(cq);
}

Test(cq, readerr_fields_and_strerror)
{
	struct fid_cq *cq = open_cq(FI_CQ_FORMAT_CONTEXT, FI_WAIT_NONE, 0);
	struct fi_cq_err_entry err;
	char mine[64], small[8];
	const char *s;

	put_err(cq, 9, FI_ETRUNC, COUR_E_TRUNC, 4096);
	put_err(cq, 10, FI_EIO, COUR_E_BAD_KEY, 0);

	/* err_data_size 0: the provider's buffer (we have none) */
	memset(&err, 0xff, sizeof(err));
	err.err_data_size = 0;
	cr_assert_eq(fi_cq_readerr(cq, &err, 0), 1);
	cr_assert_eq(err.op_context, (void *)0x1009);
	cr_assert_eq(err.flags, FI_RECV | FI_TAGGED | FI_REMOTE_CQ_DATA);
	cr_assert_eq(err.len, 109);
	cr_assert_eq(err.buf, (void *)0x2009);
	cr_assert_eq(err.data, 0xdada0009);
	cr_assert_eq(err.tag, 0x7a600009);
	cr_assert_eq(err.olen, 4096);
	cr_assert_eq(err.err, FI_ETRUNC);
	cr_assert_eq(err.prov_errno, COUR_E_TRUNC);
	cr_assert_null(err.err_data);
	cr_assert_eq(err.err_data_size, 0);

	/* err_data_size > 0: the application's buffer stays, nothing copied */
	memset(&err, 0, sizeof(err));
	err.err_data = mine;
	err.err_data_size = sizeof(mine);
	cr_assert_eq(fi_cq_readerr(cq, &err, 0), 1);
	cr_assert_eq(err.err, FI_EIO);
	cr_assert_eq(err.prov_errno, COUR_E_BAD_KEY);
	cr_assert_eq(err.olen, 0);
	cr_assert_eq(err.err_data, mine);
	cr_assert_eq(err.err_data_size, 0);

	s = fi_cq_strerror(cq, COUR_E_TRUNC, NULL, NULL, 0);
	cr_assert_str_eq(s, "receive buffer smaller than the message");
	s = fi_cq_strerror(cq, COUR_E_BAD_KEY, NULL, mine, sizeof(mine));
	cr_assert_eq(s, mine);
	cr_assert_str_eq(mine, "remote key not registered at the target");
	s = fi_cq_strerror(cq, COUR_E_TRUNC, NULL, small, sizeof(small));
	cr_assert_str_eq(small, "receive");
	cr_assert_str_eq(fi_cq_strerror(cq, 9999, NULL, NULL, 0), "unknown courier error");
	close_cq(cq);
}

/* ---- growth ---- */

static void check_drain(struct fid_cq *cq, uintptr_t first, uintptr_t n)
{
	struct fi_cq_entry ent[7];
	uintptr_t next = first;
	ssize_t ret, i;
	int rounds = 0;

	while (next < first + n) {
		ret = fi_cq_read(cq, ent, 7);
		cr_assert_gt(ret, 0, "read %zd after %lu of %lu", ret, (unsigned long)(next - first),
			     (unsigned long)n);
		for (i = 0; i < ret; i++, next++)
			cr_assert_eq(ent[i].op_context, (void *)(0x1000 + next),
				     "entry %lu out of order", (unsigned long)next);
		cr_assert_lt(++rounds, 100000);
	}
	cr_assert_eq(fi_cq_read(cq, ent, 7), -FI_EAGAIN);
}

Test(cq, ring_grows_past_size)
{
	struct fid_cq *cq = open_cq(FI_CQ_FORMAT_CONTEXT, FI_WAIT_NONE, 16);
	uintptr_t i;

	cr_assert_eq(cq_of(cq)->ring_cap, 16);
	for (i = 0; i < 10000; i++)
		put(cq, i);
	cr_assert_eq(cq_of(cq)->count, 10000);
	check_drain(cq, 0, 10000);
	close_cq(cq);
}

/* growing while the ring has wrapped must keep the oldest entry first */
Test(cq, ring_grows_while_wrapped)
{
	struct fid_cq *cq = open_cq(FI_CQ_FORMAT_CONTEXT, FI_WAIT_NONE, 16);
	struct fi_cq_entry ent[16];
	uintptr_t i;

	for (i = 0; i < 12; i++)
		put(cq, i);
	cr_assert_eq(fi_cq_read(cq, ent, 10), 10);
	for (i = 12; i < 40; i++)	/* wraps at 16, then grows twice */
		put(cq, i);
	cr_assert_gt(cq_of(cq)->ring_cap, 16);
	check_drain(cq, 10, 30);
	close_cq(cq);
}

/* ---- blocking reads and wait objects ---- */

Test(cq, sread_times_out)
{
	struct fid_cq *cq = open_cq(FI_CQ_FORMAT_CONTEXT, FI_WAIT_UNSPEC, 0);
	struct fi_cq_entry ent;
	uint64_t t0, dt;

	t0 = cour_now_us();
	cr_assert_eq(fi_cq_sread(cq, &ent, 1, NULL, 0), -FI_EAGAIN);
	cr_assert_lt(cour_now_us() - t0, 50000, "timeout 0 blocked");
	t0 = cour_now_us();
	cr_assert_eq(fi_cq_sread(cq, &ent, 1, NULL, 150), -FI_EAGAIN);
	dt = cour_now_us() - t0;
	cr_assert_geq(dt, 150000, "sread returned after %lu us, before its timeout", dt);
	cr_assert_lt(dt, 1500000, "sread took %lu us for a 150 ms timeout", dt);
	close_cq(cq);
}

Test(cq, sread_on_wait_none_is_invalid)
{
	struct fid_cq *cq = open_cq(FI_CQ_FORMAT_CONTEXT, FI_WAIT_NONE, 0);
	struct fi_cq_entry ent;
	int fd;

	cr_assert_eq(fi_cq_sread(cq, &ent, 1, NULL, 10), -FI_EINVAL);
	cr_assert_eq(fi_cq_signal(cq), -FI_EINVAL);
	cr_assert_eq(fi_control(&cq->fid, FI_GETWAIT, &fd), -FI_ENODATA);
	close_cq(cq);
}

Test(cq, sread_returns_queued_error)
{
	struct fid_cq *cq = open_cq(FI_CQ_FORMAT_CONTEXT, FI_WAIT_UNSPEC, 0);
	struct fi_cq_entry ent;
	uint64_t t0 = cour_now_us();
	int before = &cour_test_progress_calls ? cour_test_progress_calls : 0;

	put_err(cq, 0, FI_EIO, COUR_E_SEND, 0);
	cr_assert_eq(fi_cq_sread(cq, &ent, 1, NULL, 2000), -FI_EAVAIL);
	cr_assert_lt(cour_now_us() - t0, 500000);
	if (&cour_test_progress_calls)
		cr_assert_gt(cour_test_progress_calls, before, "fi_cq_sread did not progress");
	close_cq(cq);
}

struct waker {
	struct fid_cq *cq;
	int            delay_ms;
	int            what;        /* 0: fi_cq_signal, 1..n: write that many completions */
};

static void *waker_main(void *arg)
{
	struct waker *w = arg;
	int i;

	usleep(w->delay_ms * 1000);
	if (!w->what)
		fi_cq_signal(w->cq);
	for (i = 0; i < w->what; i++)
		put(w->cq, 100 + i);
	return NULL;
}

static uint64_t sread_with_waker(struct fid_cq *cq, struct waker *w, void *buf, size_t count,
				 const void *cond, int timeout, ssize_t *ret)
{
	pthread_t th;
	uint64_t t0;

	w->cq = cq;
	cr_assert_eq(pthread_create(&th, NULL, waker_main, w), 0);
	t0 = cour_now_us();
	*ret = fi_cq_sread(cq, buf, count, cond, timeout);
	t0 = cour_now_us() - t0;
	pthread_join(th, NULL);
	return t0;
}

Test(cq, signal_wakes_sread)
{
	struct fid_cq *cq = open_cq(FI_CQ_FORMAT_CONTEXT, FI_WAIT_UNSPEC, 0);
	struct waker w = { .delay_ms = 100, .what = 0 };
	struct fi_cq_entry ent;
	uint64_t dt;
	ssize_t ret;

	dt = sread_with_waker(cq, &w, &ent, 1, NULL, 10000, &ret);
	cr_assert_eq(ret, -FI_EAGAIN);
	cr_assert_geq(dt, 90000, "sread returned after %lu us, before the signal", dt);
	cr_assert_lt(dt, 3000000, "fi_cq_signal did not wake sread (%lu us)", dt);
	close_cq(cq);
}

Test(cq, completion_wakes_sread, .timeout = 20)
{
	struct fid_cq *cq = open_cq(FI_CQ_FORMAT_CONTEXT, FI_WAIT_UNSPEC, 0);
	struct waker w = { .delay_ms = 100, .what = 1 };
	struct fi_cq_entry ent[4];
	uint64_t dt;
	ssize_t ret;

	dt = sread_with_waker(cq, &w, ent, 4, NULL, -1, &ret);
	cr_assert_eq(ret, 1);
	cr_assert_eq(ent[0].op_context, (void *)0x1064);
	cr_assert_lt(dt, 3000000, "completion did not wake sread (%lu us)", dt);
	cr_assert_eq(cq_of(cq)->waiters, 0);
	close_cq(cq);
}

Test(cq, sread_threshold)
{
	struct fi_cq_attr attr = { .format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_UNSPEC,
				   .wait_cond = FI_CQ_COND_THRESHOLD };
	struct waker w = { .delay_ms = 100, .what = 3 };
	struct fi_cq_entry ent[8];
	struct fid_cq *cq;
	size_t threshold = 4;
	ssize_t ret;
	uint64_t dt;

	cr_assert_eq(fi_cq_open(&dom.domain_fid, &attr, &cq, NULL), 0);
	put(cq, 0);
	/* 1 queued, 3 more arrive later: the threshold makes sread wait for all 4 */
	dt = sread_with_waker(cq, &w, ent, 8, &threshold, 5000, &ret);
	cr_assert_eq(ret, 4, "sread returned %zd before the threshold", ret);
	cr_assert_geq(dt, 90000);
	cr_assert_eq(ent[0].op_context, (void *)0x1000);
	cr_assert_eq(ent[3].op_context, (void *)0x1066);
	/* on timeout, what is there is returned */
	put(cq, 9);
	ret = fi_cq_sread(cq, ent, 8, &threshold, 50);
	cr_assert_eq(ret, 1);
	close_cq(cq);
}

Test(cq, getwait_fd_follows_queue)
{
	struct fid_cq *cq = open_cq(FI_CQ_FORMAT_CONTEXT, FI_WAIT_FD, 0);
	struct fi_cq_err_entry err = { 0 };
	struct fi_cq_entry ent[4];
	enum fi_wait_obj wo = FI_WAIT_NONE;
	int fd = -1;

	cr_assert_eq(fi_control(&cq->fid, FI_GETWAIT, &fd), 0);
	cr_assert_geq(fd, 0);
	cr_assert_eq(fi_control(&cq->fid, FI_GETWAITOBJ, &wo), 0);
	cr_assert_eq(wo, FI_WAIT_FD);
	cr_assert_not(fd_readable(fd));
	put(cq, 0);
	cr_assert(fd_readable(fd), "fd not readable with a completion queued");
	put(cq, 1);
	cr_assert_eq(fi_cq_read(cq, ent, 1), 1);
	cr_assert(fd_readable(fd), "fd cleared with a completion still queued");
	cr_assert_eq(fi_cq_read(cq, ent, 4), 1);
	cr_assert_not(fd_readable(fd), "fd readable on an empty CQ");
	put_err(cq, 2, FI_EIO, COUR_E_SEND, 0);
	cr_assert(fd_readable(fd), "fd not readable with an error queued");
	cr_assert_eq(fi_cq_readerr(cq, &err, 0), 1);
	cr_assert_not(fd_readable(fd));
	/* sread on FD works too */
	put(cq, 3);
	cr_assert_eq(fi_cq_sread(cq, ent, 4, NULL, 1000), 1);
	cr_assert_eq(ent[0].op_context, (void *)0x1003);
	cr_assert_not(fd_readable(fd));
	close_cq(cq);
}

Test(cq, unspec_wait_has_fd_for_sread)
{
	struct fid_cq *cq = open_cq(FI_CQ_FORMAT_CONTEXT, FI_WAIT_UNSPEC, 0);
	int fd = -1;

	cr_assert_eq(fi_control(&cq->fid, FI_GETWAIT, &fd), 0);
	cr_assert_geq(fd, 0);
	cr_assert_eq(fi_control(&cq->fid, FI_GETOPSFLAG, &fd), -FI_ENOSYS);
	close_cq(cq);
}

/* ---- lifetime ---- */

Test(cq, close_refuses_while_bound)
{
	struct fid_cq *cq = open_cq(FI_CQ_FORMAT_CONTEXT, FI_WAIT_FD, 0);

	cr_assert_eq(dom.refcnt, 1);
	put(cq, 0);
	put_err(cq, 1, FI_EIO, COUR_E_SEND, 0);
	cour_ref_inc(&cq_of(cq)->refcnt);
	cr_assert_eq(fi_close(&cq->fid), -FI_EBUSY);
	cr_assert_eq(dom.refcnt, 1);
	cour_ref_dec(&cq_of(cq)->refcnt);
	/* queued entries are freed with the CQ (ASan/valgrind check this) */
	close_cq(cq);
	cr_assert_eq(dom.refcnt, 0);
}

/* ---- FI_WAIT_MUTEX_COND (test_mcond.h) ---- */

static int cq_ready(void *obj)
{
	struct fi_cq_entry e;

	return fi_cq_read(obj, &e, 1) == 1;
}

Test(cq, mutex_cond_wakes_a_sleeper)
{
	struct fid_cq *cq = open_cq(FI_CQ_FORMAT_CONTEXT, FI_WAIT_MUTEX_COND, 0);
	struct mc_waiter w = { .ready = cq_ready, .obj = cq };
	enum fi_wait_obj obj = FI_WAIT_NONE;
	pthread_t t;

	cr_assert_eq(fi_control(&cq->fid, FI_GETWAITOBJ, &obj), 0);
	cr_assert_eq(obj, FI_WAIT_MUTEX_COND);
	cr_assert_eq(fi_control(&cq->fid, FI_GETWAIT, &w.mc), 0);
	cr_assert(w.mc.mutex && w.mc.cond);
	cr_assert_eq(pthread_create(&t, NULL, mc_wait, &w), 0);
	usleep(200000);                 /* asleep on the cond by now */
	put(cq, 1);
	pthread_join(t, NULL);
	cr_assert(w.got, "the waiter never saw the completion");
	cr_assert_lt(w.waited_ms, 3000, "woken after %lu ms: the wake was lost",
		     (unsigned long)w.waited_ms);
	close_cq(cq);
}
