/*
 * Unit tests of counters (cour_cntr.c) through the fi_cntr_* API on a hand-built domain; the
 * engine is played by calling cour_cntr_inc_locked / cour_cntr_inc_err_locked directly.
 */
#include "fi/cour_cq.h"

#include "test_mcond.h"

#include <criterion/criterion.h>
#include <poll.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

/* from test_domain_stub.c; NULL when linked without it (see there) */
extern int cour_test_progress_calls __attribute__((weak));

static struct cour_domain dom;
/* only what fi_cntr_open needs: the domain is not under test */
static struct fi_ops_domain dom_ops = {
	.size = sizeof(struct fi_ops_domain),
	.cntr_open = cour_cntr_open,
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

TestSuite(cntr, .init = setup, .fini = teardown, .timeout = 20);

static struct fid_cntr *open_cntr(enum fi_wait_obj wait_obj)
{
	struct fi_cntr_attr attr = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = wait_obj };
	struct fid_cntr *c = NULL;
	int ret;

	ret = fi_cntr_open(&dom.domain_fid, &attr, &c, NULL);
	cr_assert_eq(ret, 0, "fi_cntr_open: %d", ret);
	cr_assert_not_null(c);
	return c;
}

static struct cour_cntr *cntr_of(struct fid_cntr *c)
{
	return COUR_CONTAINER_OF(c, struct cour_cntr, cntr_fid);
}

static void engine_inc(struct fid_cntr *c, int n, bool err)
{
	int i;

	cour_lock_acquire(&dom.lock);
	for (i = 0; i < n; i++) {
		if (err)
			cour_cntr_inc_err_locked(cntr_of(c));
		else
			cour_cntr_inc_locked(cntr_of(c));
	}
	cour_lock_release(&dom.lock);
}

static bool fd_readable(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	return poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLIN);
}

Test(cntr, add_set_read)
{
	struct fid_cntr *c = open_cntr(FI_WAIT_NONE);

	cr_assert_eq(fi_cntr_read(c), 0);
	cr_assert_eq(fi_cntr_readerr(c), 0);
	cr_assert_eq(fi_cntr_add(c, 5), 0);
	cr_assert_eq(fi_cntr_add(c, 7), 0);
	cr_assert_eq(fi_cntr_read(c), 12);
	cr_assert_eq(fi_cntr_readerr(c), 0, "add touched the error count");
	cr_assert_eq(fi_cntr_adderr(c, 3), 0);
	cr_assert_eq(fi_cntr_readerr(c), 3);
	cr_assert_eq(fi_cntr_read(c), 12, "adderr touched the success count");
	cr_assert_eq(fi_cntr_set(c, 1000), 0);
	cr_assert_eq(fi_cntr_read(c), 1000);
	cr_assert_eq(fi_cntr_seterr(c, 1), 0);
	cr_assert_eq(fi_cntr_readerr(c), 1);
	cr_assert_eq(fi_cntr_set(c, 0), 0);
	cr_assert_eq(fi_cntr_read(c), 0);
	cr_assert_eq(fi_cntr_add(c, UINT64_MAX - 1), 0);
	cr_assert_eq(fi_cntr_read(c), UINT64_MAX - 1);
	engine_inc(c, 1, false);
	cr_assert_eq(fi_cntr_read(c), UINT64_MAX);
	engine_inc(c, 4, true);
	cr_assert_eq(fi_cntr_readerr(c), 5);
	cr_assert_eq(fi_close(&c->fid), 0);
}

Test(cntr, reads_progress)
{
	struct fid_cntr *c = open_cntr(FI_WAIT_NONE);
	int before;

	if (!&cour_test_progress_calls)
		cr_skip_test("needs test_domain_stub.c");
	before = cour_test_progress_calls;
	fi_cntr_read(c);
	fi_cntr_readerr(c);
	cr_assert_eq(cour_test_progress_calls, before + 2);
	cr_assert_eq(fi_close(&c->fid), 0);
}

Test(cntr, bad_attrs)
{
	struct fi_cntr_attr attr = { .events = FI_CNTR_EVENTS_COMP + 1 };
	struct fid_cntr *c = NULL;

	cr_assert_eq(fi_cntr_open(&dom.domain_fid, &attr, &c, NULL), -FI_ENOSYS);
	attr.events = FI_CNTR_EVENTS_COMP;
	attr.flags = 1;
	cr_assert_eq(fi_cntr_open(&dom.domain_fid, &attr, &c, NULL), -FI_EINVAL);
	attr.flags = 0;
	attr.wait_obj = FI_WAIT_POLLFD;
	cr_assert_eq(fi_cntr_open(&dom.domain_fid, &attr, &c, NULL), -FI_ENOSYS);
	cr_assert_null(c);
	cr_assert_eq(dom.refcnt, 0);
}

/* fi_cntr(3) calls it invalid; courier polls (fabtests does it): a bounded wait that times
 * out, and succeeds once the value is there */
Test(cntr, wait_on_wait_none_polls)
{
	struct fid_cntr *c = open_cntr(FI_WAIT_NONE);
	uint64_t t0 = mc_now_ms();
	int fd;

	cr_assert_eq(fi_cntr_wait(c, 1, 30), -FI_ETIMEDOUT);
	cr_assert_geq(mc_now_ms() - t0, 30);
	cr_assert_eq(fi_cntr_add(c, 2), 0);
	cr_assert_eq(fi_cntr_wait(c, 2, 1000), 0);
	cr_assert_eq(fi_cntr_wait(c, 5, 50), -FI_ETIMEDOUT);
	cr_assert_eq(fi_control(&c->fid, FI_GETWAIT, &fd), -FI_ENODATA);
	cr_assert_eq(fi_close(&c->fid), 0);
}

Test(cntr, wait_already_met_and_timeout)
{
	struct fid_cntr *c = open_cntr(FI_WAIT_UNSPEC);
	uint64_t t0, dt;

	cr_assert_eq(fi_cntr_add(c, 3), 0);
	t0 = cour_now_us();
	cr_assert_eq(fi_cntr_wait(c, 3, 5000), 0);
	cr_assert_eq(fi_cntr_wait(c, 0, 0), 0);
	cr_assert_lt(cour_now_us() - t0, 100000);
	cr_assert_eq(fi_cntr_wait(c, 4, 0), -FI_ETIMEDOUT);
	t0 = cour_now_us();
	cr_assert_eq(fi_cntr_wait(c, 4, 150), -FI_ETIMEDOUT);
	dt = cour_now_us() - t0;
	cr_assert_geq(dt, 150000, "wait returned after %lu us, before its timeout", dt);
	cr_assert_lt(dt, 1500000, "wait took %lu us for a 150 ms timeout", dt);
	cr_assert_eq(fi_cntr_readerr(c), 0, "timeout changed the error count");
	cr_assert_eq(fi_close(&c->fid), 0);
}

struct bumper {
	struct fid_cntr *c;
	int              delay_ms;
	int              how;       /* 0: fi_cntr_add, 1: engine inc x5, 2: fi_cntr_adderr,
				     * 3: engine err inc, 4: fi_cntr_set */
};

static void *bumper_main(void *arg)
{
	struct bumper *b = arg;
	int i;

	usleep(b->delay_ms * 1000);
	switch (b->how) {
	case 0:
		fi_cntr_add(b->c, 5);
		break;
	case 1:
		/* one at a time, as completions would come */
		for (i = 0; i < 5; i++) {
			engine_inc(b->c, 1, false);
			usleep(2000);
		}
		break;
	case 2:
		fi_cntr_adderr(b->c, 1);
		break;
	case 3:
		engine_inc(b->c, 1, true);
		break;
	case 4:
		fi_cntr_set(b->c, 10);
		break;
	}
	return NULL;
}

static int wait_with_bumper(struct fid_cntr *c, int how, uint64_t threshold, uint64_t *dt)
{
	struct bumper b = { .c = c, .delay_ms = 100, .how = how };
	pthread_t th;
	uint64_t t0;
	int ret;

	cr_assert_eq(pthread_create(&th, NULL, bumper_main, &b), 0);
	t0 = cour_now_us();
	ret = fi_cntr_wait(c, threshold, 10000);
	*dt = cour_now_us() - t0;
	pthread_join(th, NULL);
	return ret;
}

static void check_wait_success(enum fi_wait_obj wo, int how)
{
	struct fid_cntr *c = open_cntr(wo);
	uint64_t dt;

	cr_assert_eq(wait_with_bumper(c, how, 5, &dt), 0);
	cr_assert_geq(fi_cntr_read(c), 5);
	cr_assert_geq(dt, 90000, "wait returned after %lu us, before the update", dt);
	cr_assert_lt(dt, 3000000, "update did not wake the wait (%lu us)", dt);
	cr_assert_eq(cntr_of(c)->waiters, 0);
	cr_assert_eq(fi_close(&c->fid), 0);
}

Test(cntr, wait_woken_by_add) { check_wait_success(FI_WAIT_UNSPEC, 0); }
Test(cntr, wait_woken_by_engine) { check_wait_success(FI_WAIT_UNSPEC, 1); }
Test(cntr, wait_woken_by_set) { check_wait_success(FI_WAIT_UNSPEC, 4); }
Test(cntr, wait_fd_woken_by_engine) { check_wait_success(FI_WAIT_FD, 1); }
Test(cntr, wait_yield_woken_by_add) { check_wait_success(FI_WAIT_YIELD, 0); }

static void check_wait_error(int how)
{
	struct fid_cntr *c = open_cntr(FI_WAIT_UNSPEC);
	uint64_t dt;

	/* errors that predate the wait do not end it */
	cr_assert_eq(fi_cntr_adderr(c, 2), 0);
	cr_assert_eq(wait_with_bumper(c, how, 5, &dt), -FI_EAVAIL);
	cr_assert_eq(fi_cntr_readerr(c), 3);
	cr_assert_eq(fi_cntr_read(c), 0);
	cr_assert_geq(dt, 90000);
	cr_assert_lt(dt, 3000000, "error did not wake the wait (%lu us)", dt);
	cr_assert_eq(fi_close(&c->fid), 0);
}

Test(cntr, wait_ended_by_adderr) { check_wait_error(2); }
Test(cntr, wait_ended_by_engine_error) { check_wait_error(3); }

Test(cntr, getwait_fd)
{
	struct fid_cntr *c = open_cntr(FI_WAIT_FD);
	enum fi_wait_obj wo = FI_WAIT_NONE;
	uint64_t flags = 1;
	int fd = -1;

	cr_assert_eq(fi_control(&c->fid, FI_GETWAIT, &fd), 0);
	cr_assert_geq(fd, 0);
	cr_assert_eq(fi_control(&c->fid, FI_GETWAITOBJ, &wo), 0);
	cr_assert_eq(wo, FI_WAIT_FD);
	cr_assert_eq(fi_control(&c->fid, FI_GETOPSFLAG, &flags), 0);
	cr_assert_eq(flags, 0);
	cr_assert_not(fd_readable(fd));
	engine_inc(c, 1, false);
	cr_assert(fd_readable(fd), "fd not readable after a completion");
	engine_inc(c, 1, false);
	cr_assert_eq(fi_cntr_read(c), 2);
	cr_assert_not(fd_readable(fd), "fd still readable after fi_cntr_read");
	engine_inc(c, 1, true);
	cr_assert(fd_readable(fd), "fd not readable after an error");
	cr_assert_eq(fi_cntr_readerr(c), 1);
	cr_assert_not(fd_readable(fd));
	fi_cntr_add(c, 1);
	cr_assert(fd_readable(fd), "fd not readable after fi_cntr_add");
	cr_assert_eq(fi_close(&c->fid), 0);
}

Test(cntr, close_refuses_while_bound)
{
	struct fid_cntr *c = open_cntr(FI_WAIT_UNSPEC);

	cr_assert_eq(dom.refcnt, 1);
	cour_ref_inc(&cntr_of(c)->refcnt);
	cr_assert_eq(fi_close(&c->fid), -FI_EBUSY);
	cour_ref_dec(&cntr_of(c)->refcnt);
	cr_assert_eq(fi_close(&c->fid), 0);
	cr_assert_eq(dom.refcnt, 0);
}

/* ---- FI_WAIT_MUTEX_COND (test_mcond.h) ---- */

static int cntr_ready(void *obj)
{
	return fi_cntr_read(obj) >= 3;
}

Test(cntr, mutex_cond_wakes_a_sleeper)
{
	struct fid_cntr *c = open_cntr(FI_WAIT_MUTEX_COND);
	struct mc_waiter w = { .ready = cntr_ready, .obj = c };
	enum fi_wait_obj obj = FI_WAIT_NONE;
	pthread_t t;

	cr_assert_eq(fi_control(&c->fid, FI_GETWAITOBJ, &obj), 0);
	cr_assert_eq(obj, FI_WAIT_MUTEX_COND);
	cr_assert_eq(fi_control(&c->fid, FI_GETWAIT, &w.mc), 0);
	cr_assert_eq(pthread_create(&t, NULL, mc_wait, &w), 0);
	usleep(200000);
	cr_assert_eq(fi_cntr_add(c, 1), 0);     /* below the waiter's threshold */
	usleep(50000);
	cr_assert_eq(fi_cntr_add(c, 2), 0);
	pthread_join(t, NULL);
	cr_assert(w.got, "the waiter never saw the counter reach 3");
	cr_assert_lt(w.waited_ms, 3000, "woken after %lu ms", (unsigned long)w.waited_ms);
	cr_assert_eq(fi_close(&c->fid), 0);
}
