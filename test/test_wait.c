/*
 * Wait sets (cour_wait.c): fi_wait_open's checks, members of every kind (a CQ, a counter, an
 * EQ) making the set ready exactly while they have something to report, the set's fd for an
 * application that polls it itself, fi_wait progressing its members' domains before it sleeps,
 * sleeping until a member is signaled or the timeout, and a set kept open while members use it.
 */
/* libfabric 2.x deprecates poll and wait sets; courier still serves them (applications built
 * against 1.x call them), so these tests call them on purpose */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include "fi/cour_cq.h"

#include <criterion/criterion.h>
#include <poll.h>
#include <pthread.h>
#include <unistd.h>

extern void (*cour_test_progress_hook)(struct cour_domain *dom) __attribute__((weak));

static struct cour_fabric fab, other_fab;
static struct cour_domain dom;
static struct fi_ops_fabric fab_ops = {
	.size = sizeof(struct fi_ops_fabric),
	.eq_open = cour_eq_open,
	.wait_open = cour_wait_open,
};
static struct fi_ops_domain dom_ops = {
	.size = sizeof(struct fi_ops_domain),
	.cq_open = cour_cq_open,
	.cntr_open = cour_cntr_open,
};

static void setup(void)
{
	memset(&fab, 0, sizeof(fab));
	memset(&other_fab, 0, sizeof(other_fab));
	fab.fabric_fid.fid.fclass = FI_CLASS_FABRIC;
	fab.fabric_fid.ops = &fab_ops;
	other_fab.fabric_fid.fid.fclass = FI_CLASS_FABRIC;
	other_fab.fabric_fid.ops = &fab_ops;
	memset(&dom, 0, sizeof(dom));
	cour_lock_init(&dom.lock, COUR_LOCK_MUTEX);
	dom.domain_fid.fid.fclass = FI_CLASS_DOMAIN;
	dom.domain_fid.ops = &dom_ops;
	dom.fabric = &fab;
}

static void teardown(void)
{
	if (&cour_test_progress_hook)
		cour_test_progress_hook = NULL;
	cr_expect_eq(dom.refcnt, 0, "objects left open on the domain: %d", dom.refcnt);
	cr_expect_eq(fab.refcnt, 0, "objects left open on the fabric: %d", fab.refcnt);
	cour_lock_destroy(&dom.lock);
}

TestSuite(wait, .init = setup, .fini = teardown, .timeout = 20);

static struct fid_wait *open_set(void)
{
	struct fi_wait_attr attr = { .wait_obj = FI_WAIT_UNSPEC };
	struct fid_wait *ws = NULL;

	cr_assert_eq(fi_wait_open(&fab.fabric_fid, &attr, &ws), 0);
	cr_assert_not_null(ws);
	return ws;
}

static struct fid_cq *open_cq(struct fid_wait *ws)
{
	struct fi_cq_attr attr = { .format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_SET,
				   .wait_set = ws };
	struct fid_cq *cq = NULL;

	cr_assert_eq(fi_cq_open(&dom.domain_fid, &attr, &cq, NULL), 0);
	return cq;
}

static void put(struct fid_cq *cq, uintptr_t i)
{
	struct cour_cq_entry e = { .op_context = (void *)i, .flags = FI_SEND | FI_MSG };

	cour_lock_acquire(&dom.lock);
	cr_assert_eq(cour_cq_write_locked(COUR_CONTAINER_OF(cq, struct cour_cq, cq_fid), &e), 0);
	cour_lock_release(&dom.lock);
}

static bool fd_readable(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	return poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLIN);
}

Test(wait, open_checks_its_arguments)
{
	struct fi_wait_attr attr = { .wait_obj = FI_WAIT_UNSPEC, .flags = 1 };
	struct fid_wait *ws = NULL;

	cr_assert_eq(fi_wait_open(&fab.fabric_fid, &attr, &ws), -FI_EBADFLAGS);
	attr.flags = 0;
	attr.wait_obj = FI_WAIT_MUTEX_COND;
	cr_assert_eq(fi_wait_open(&fab.fabric_fid, &attr, &ws), -FI_ENOSYS);
	attr.wait_obj = FI_WAIT_SET;
	cr_assert_eq(fi_wait_open(&fab.fabric_fid, &attr, &ws), -FI_ENOSYS);
	cr_assert_null(ws);
	attr.wait_obj = FI_WAIT_FD;
	cr_assert_eq(fi_wait_open(&fab.fabric_fid, &attr, &ws), 0);
	cr_assert_eq(fi_close(&ws->fid), 0);
}

Test(wait, every_kind_of_member_makes_the_set_ready_while_it_has_something)
{
	struct fid_wait *ws = open_set();
	struct fid_cq *cq = open_cq(ws);
	struct fi_cntr_attr cattr = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_SET,
				      .wait_set = ws };
	struct fi_eq_attr eattr = { .wait_obj = FI_WAIT_SET, .wait_set = ws };
	struct fi_eq_entry ee = { .context = (void *)7 };
	struct fi_cq_entry ce;
	struct fid_cntr *cntr;
	struct fid_eq *eq;
	uint32_t event;
	int fd = -1;

	cr_assert_eq(fi_cntr_open(&dom.domain_fid, &cattr, &cntr, NULL), 0);
	cr_assert_eq(fi_eq_open(&fab.fabric_fid, &eattr, &eq, NULL), 0);
	cr_assert_eq(fi_control(&ws->fid, FI_GETWAIT, &fd), 0);
	cr_assert_geq(fd, 0);
	cr_assert_eq(fi_wait(ws, 0), -FI_ETIMEDOUT, "nothing to report yet");
	cr_assert_not(fd_readable(fd));

	put(cq, 1);
	cr_assert_eq(fi_wait(ws, 0), 0);
	cr_assert(fd_readable(fd), "the set's fd says so too");
	cr_assert_eq(fi_cq_read(cq, &ce, 1), 1);
	cr_assert_eq(ce.op_context, (void *)1);
	cr_assert_eq(fi_wait(ws, 0), -FI_ETIMEDOUT, "read: not ready any more");

	cour_lock_acquire(&dom.lock);
	cour_cntr_inc_locked(COUR_CONTAINER_OF(cntr, struct cour_cntr, cntr_fid));
	cour_lock_release(&dom.lock);
	cr_assert_eq(fi_wait(ws, 0), 0, "a counter that changed");
	cr_assert_eq(fi_cntr_read(cntr), 1);
	cr_assert_eq(fi_wait(ws, 0), -FI_ETIMEDOUT, "its change read");

	cr_assert_eq(fi_eq_write(eq, FI_NOTIFY, &ee, sizeof(ee), 0), (ssize_t)sizeof(ee));
	cr_assert_eq(fi_wait(ws, 0), 0, "an EQ event");
	cr_assert_eq(fi_eq_read(eq, &event, &ee, sizeof(ee), 0), (ssize_t)sizeof(ee));
	cr_assert_eq(fi_wait(ws, 0), -FI_ETIMEDOUT);
	cr_assert_not(fd_readable(fd));

	cr_assert_eq(fi_close(&ws->fid), -FI_EBUSY, "members use it");
	cr_assert_eq(fi_close(&eq->fid), 0);
	cr_assert_eq(fi_close(&cntr->fid), 0);
	cr_assert_eq(fi_close(&cq->fid), 0);
	cr_assert_eq(fi_close(&ws->fid), 0);
}

static struct fid_cq *late_cq;

static void *put_later(void *arg)
{
	usleep(50 * 1000);
	put(late_cq, 5);
	return arg;
}

Test(wait, fi_wait_sleeps_until_a_member_is_signaled_or_the_timeout)
{
	struct fid_wait *ws = open_set();
	uint64_t t0;
	pthread_t t;

	late_cq = open_cq(ws);
	t0 = cour_now_us();
	cr_assert_eq(fi_wait(ws, 60), -FI_ETIMEDOUT);
	cr_assert_geq(cour_now_us() - t0, 60000, "woke before its timeout");
	cr_assert_eq(pthread_create(&t, NULL, put_later, NULL), 0);
	t0 = cour_now_us();
	cr_assert_eq(fi_wait(ws, 10000), 0);
	cr_assert_lt(cour_now_us() - t0, 5000000, "not woken by the completion");
	pthread_join(t, NULL);
	cr_assert_eq(fi_close(&late_cq->fid), 0);
	cr_assert_eq(fi_close(&ws->fid), 0);
}

static struct fid_cq *hook_cq;

static void complete_in_progress(struct cour_domain *d)
{
	struct cour_cq_entry e = { .op_context = (void *)9, .flags = FI_RECV | FI_MSG };

	cour_test_progress_hook = NULL;
	cr_assert_eq(cour_cq_write_locked(COUR_CONTAINER_OF(hook_cq, struct cour_cq, cq_fid),
					  &e), 0);
}

Test(wait, fi_wait_progresses_its_members_domains_first)
{
	struct fid_wait *ws = open_set();

	if (!&cour_test_progress_hook)
		cr_skip_test("linked without the domain double");
	hook_cq = open_cq(ws);
	cour_test_progress_hook = complete_in_progress;
	cr_assert_eq(fi_wait(ws, 0), 0, "what progress completes is seen without a sleep");
	cr_assert_eq(fi_close(&hook_cq->fid), 0);
	cr_assert_eq(fi_close(&ws->fid), 0);
}

Test(wait, a_member_needs_a_set_of_its_own_fabric)
{
	struct fi_wait_attr attr = { .wait_obj = FI_WAIT_UNSPEC };
	struct fi_cq_attr cattr = { .format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_SET };
	struct fid_wait *ws;
	struct fid_cq *cq = NULL;

	cr_assert_eq(fi_cq_open(&dom.domain_fid, &cattr, &cq, NULL), -FI_EINVAL, "no set");
	cr_assert_eq(fi_wait_open(&other_fab.fabric_fid, &attr, &ws), 0);
	cattr.wait_set = ws;
	cr_assert_eq(fi_cq_open(&dom.domain_fid, &cattr, &cq, NULL), -FI_EINVAL,
		     "another fabric's set");
	cattr.wait_set = (struct fid_wait *)&dom.domain_fid;
	cr_assert_eq(fi_cq_open(&dom.domain_fid, &cattr, &cq, NULL), -FI_EINVAL, "not a set");
	cr_assert_null(cq);
	cr_assert_eq(fi_close(&ws->fid), 0);
	cr_assert_eq(other_fab.refcnt, 0);
}
