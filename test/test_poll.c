/*
 * Unit tests of poll sets (cour_poll.c) through fi_poll_open / fi_poll_add / fi_poll_del /
 * fi_poll on a hand-built domain. The engine is played by the *_locked writers, some of them
 * from inside progress (the stub's hook), since fi_poll must report what its own progress
 * produced.
 */
/* libfabric 2.x deprecates poll and wait sets; courier still serves them (applications built
 * against 1.x call them), so these tests call them on purpose */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include "fi/cour_cq.h"

#include <criterion/criterion.h>

extern int cour_test_progress_calls __attribute__((weak));
extern void (*cour_test_progress_hook)(struct cour_domain *dom) __attribute__((weak));

static struct cour_domain dom, other;
static struct fi_ops_domain dom_ops = {
	.size = sizeof(struct fi_ops_domain),
	.cq_open = cour_cq_open,
	.cntr_open = cour_cntr_open,
	.poll_open = cour_poll_open,
};

static void init_dom(struct cour_domain *d)
{
	memset(d, 0, sizeof(*d));
	cour_lock_init(&d->lock, COUR_LOCK_MUTEX);
	d->domain_fid.fid.fclass = FI_CLASS_DOMAIN;
	d->domain_fid.ops = &dom_ops;
}

static void setup(void)
{
	init_dom(&dom);
	init_dom(&other);
}

static void teardown(void)
{
	cr_expect_eq(dom.refcnt, 0, "objects left open on the domain: %d", dom.refcnt);
	cour_lock_destroy(&dom.lock);
	cour_lock_destroy(&other.lock);
	if (&cour_test_progress_hook)
		cour_test_progress_hook = NULL;
}

TestSuite(poll, .init = setup, .fini = teardown, .timeout = 20);

static struct fid_cq *open_cq(struct cour_domain *d, void *ctx)
{
	struct fi_cq_attr attr = { .format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_NONE };
	struct fid_cq *cq = NULL;

	cr_assert_eq(fi_cq_open(&d->domain_fid, &attr, &cq, ctx), 0);
	return cq;
}

static struct fid_cntr *open_cntr(void *ctx)
{
	struct fi_cntr_attr attr = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_NONE };
	struct fid_cntr *c = NULL;

	cr_assert_eq(fi_cntr_open(&dom.domain_fid, &attr, &c, ctx), 0);
	return c;
}

static struct fid_poll *open_poll(void)
{
	struct fi_poll_attr attr = { 0 };
	struct fid_poll *ps = NULL;

	cr_assert_eq(fi_poll_open(&dom.domain_fid, &attr, &ps), 0);
	cr_assert_not_null(ps);
	return ps;
}

static void cq_put(struct fid_cq *cq, uintptr_t ctx, bool err)
{
	struct cour_cq_entry e = { .op_context = (void *)ctx, .flags = FI_SEND | FI_MSG };
	struct cour_cq *c = COUR_CONTAINER_OF(cq, struct cour_cq, cq_fid);

	cour_lock_acquire(&dom.lock);
	if (err)
		cr_assert_eq(cour_cq_write_err_locked(c, &e, FI_EIO, 0, 0), 0);
	else
		cr_assert_eq(cour_cq_write_locked(c, &e), 0);
	cour_lock_release(&dom.lock);
}

static void cntr_inc(struct fid_cntr *c, bool err)
{
	struct cour_cntr *cc = COUR_CONTAINER_OF(c, struct cour_cntr, cntr_fid);

	cour_lock_acquire(&dom.lock);
	if (err)
		cour_cntr_inc_err_locked(cc);
	else
		cour_cntr_inc_locked(cc);
	cour_lock_release(&dom.lock);
}

static bool has(void **ctx, int n, void *want)
{
	for (int i = 0; i < n; i++)
		if (ctx[i] == want)
			return true;
	return false;
}

static int A, B, C, D;   /* the members' contexts */

/* A CQ is reported exactly while it holds a completion or an error; a counter once per change */
Test(poll, reports_what_has_events)
{
	struct fid_poll *ps = open_poll();
	struct fid_cq *cq1 = open_cq(&dom, &A), *cq2 = open_cq(&dom, &B);
	struct fid_cntr *c = open_cntr(&C);
	struct fi_cq_entry ent;
	struct fi_cq_err_entry ee = { 0 };
	void *ctx[8];
	int n;

	cr_assert_eq(fi_poll_add(ps, &cq1->fid, 0), 0);
	cr_assert_eq(fi_poll_add(ps, &cq2->fid, 0), 0);
	cr_assert_eq(fi_poll_add(ps, &c->fid, 0), 0);
	cr_assert_eq(fi_poll(ps, ctx, 8), 0, "nothing happened yet");

	cq_put(cq2, 1, false);
	cntr_inc(c, false);
	n = fi_poll(ps, ctx, 8);
	cr_assert_eq(n, 2);
	cr_assert(has(ctx, n, &B) && has(ctx, n, &C));
	/* the CQ still holds its entry: reported again; the counter did not move: not */
	n = fi_poll(ps, ctx, 8);
	cr_assert_eq(n, 1);
	cr_assert_eq(ctx[0], &B);
	cr_assert_eq(fi_cq_read(cq2, &ent, 1), 1);
	cr_assert_eq(fi_poll(ps, ctx, 8), 0, "drained");

	/* an error completion counts as something to read, an error count as a change */
	cq_put(cq1, 2, true);
	cntr_inc(c, true);
	n = fi_poll(ps, ctx, 8);
	cr_assert_eq(n, 2);
	cr_assert(has(ctx, n, &A) && has(ctx, n, &C));
	cr_assert_eq(fi_cq_read(cq1, &ent, 1), -FI_EAVAIL);
	cr_assert_eq(fi_cq_readerr(cq1, &ee, 0), 1);
	cr_assert_eq(fi_poll(ps, ctx, 8), 0);

	/* the application's own set or add is not an event (fi_poll(3)) */
	cr_assert_eq(fi_cntr_add(c, 5), 0);
	cr_assert_eq(fi_poll(ps, ctx, 8), 0, "fi_cntr_add reset the baseline");
	cr_assert_eq(fi_cntr_set(c, 0), 0);
	cr_assert_eq(fi_poll(ps, ctx, 8), 0, "fi_cntr_set reset the baseline");
	cntr_inc(c, false);
	cr_assert_eq(fi_poll(ps, ctx, 8), 1);

	cr_assert_eq(fi_poll_del(ps, &cq1->fid, 0), 0);
	cr_assert_eq(fi_poll_del(ps, &cq2->fid, 0), 0);
	cr_assert_eq(fi_poll_del(ps, &c->fid, 0), 0);
	cr_assert_eq(fi_close(&ps->fid), 0);
	cr_assert_eq(fi_close(&cq1->fid), 0);
	cr_assert_eq(fi_close(&cq2->fid), 0);
	cr_assert_eq(fi_close(&c->fid), 0);
}

/* fi_poll progresses the domain, and reports what that progress completed */
static struct fid_cq *hook_cq;
static void complete_during_progress(struct cour_domain *d)
{
	struct cour_cq_entry e = { .op_context = (void *)7, .flags = FI_RECV | FI_MSG };

	if (hook_cq) {
		cr_assert_eq(cour_cq_write_locked(COUR_CONTAINER_OF(hook_cq, struct cour_cq, cq_fid),
						  &e), 0);
		hook_cq = NULL;
	}
}

Test(poll, progresses_the_domain)
{
	struct fid_poll *ps;
	struct fid_cq *cq;
	void *ctx[2];
	int before;

	if (!&cour_test_progress_hook)
		cr_skip_test("linked without test_domain_stub.c");
	ps = open_poll();
	cq = open_cq(&dom, &D);
	cr_assert_eq(fi_poll_add(ps, &cq->fid, 0), 0);
	before = cour_test_progress_calls;
	hook_cq = cq;
	cour_test_progress_hook = complete_during_progress;
	cr_assert_eq(fi_poll(ps, ctx, 2), 1, "the completion its progress made");
	cr_assert_eq(ctx[0], &D);
	cr_assert_gt(cour_test_progress_calls, before);
	cr_assert_eq(fi_poll_del(ps, &cq->fid, 0), 0);
	cr_assert_eq(fi_close(&ps->fid), 0);
	cr_assert_eq(fi_close(&cq->fid), 0);
}

/* more ready members than room: count of them now, the rest next time, none lost */
Test(poll, count_limits_and_nothing_is_lost)
{
	struct fid_poll *ps = open_poll();
	struct fid_cntr *c[4];
	void *ctx[2];
	int ctxs[4], seen[4] = { 0 }, n;

	for (int i = 0; i < 4; i++) {
		c[i] = open_cntr(&ctxs[i]);
		cr_assert_eq(fi_poll_add(ps, &c[i]->fid, 0), 0);
		cntr_inc(c[i], false);
	}
	for (int round = 0; round < 2; round++) {
		n = fi_poll(ps, ctx, 2);
		cr_assert_eq(n, 2, "round %d", round);
		for (int k = 0; k < n; k++)
			for (int i = 0; i < 4; i++)
				seen[i] += ctx[k] == &ctxs[i];
	}
	for (int i = 0; i < 4; i++)
		cr_assert_eq(seen[i], 1, "counter %d reported %d times", i, seen[i]);
	cr_assert_eq(fi_poll(ps, ctx, 2), 0);
	for (int i = 0; i < 4; i++) {
		cr_assert_eq(fi_poll_del(ps, &c[i]->fid, 0), 0);
		cr_assert_eq(fi_close(&c[i]->fid), 0);
	}
	cr_assert_eq(fi_close(&ps->fid), 0);
}

/* every misuse gets its error, and nothing is held that should not be */
Test(poll, errors)
{
	struct fi_poll_attr bad = { .flags = 1 };
	struct fid_poll *ps = NULL, *ps2;
	struct fid_cq *cq = open_cq(&dom, &A), *foreign = open_cq(&other, &B);
	void *ctx[1];

	cr_assert_eq(fi_poll_open(&dom.domain_fid, &bad, &ps), -FI_EINVAL);
	cr_assert_null(ps);
	ps = open_poll();
	ps2 = open_poll();
	cr_assert_eq(fi_poll_add(ps, &cq->fid, 1), -FI_EINVAL, "reserved flags");
	cr_assert_eq(fi_poll_add(ps, NULL, 0), -FI_EINVAL, "no fid");
	cr_assert_eq(fi_poll_del(ps, NULL, 0), -FI_EINVAL, "no fid");
	cr_assert_eq(fi_poll_open(&dom.domain_fid, NULL, NULL), -FI_EINVAL, "nowhere to put it");
	cr_assert_eq(fi_poll_add(ps, &ps2->fid, 0), -FI_EINVAL, "a poll set is no member");
	cr_assert_eq(fi_poll_add(ps, &foreign->fid, 0), -FI_EINVAL, "another domain's CQ");
	cr_assert_eq(fi_poll_del(ps, &cq->fid, 0), -FI_ENOENT, "not a member");
	cr_assert_eq(fi_poll_add(ps, &cq->fid, 0), 0);
	cr_assert_eq(fi_poll_add(ps, &cq->fid, 0), -FI_EALREADY);
	cr_assert_eq(fi_poll(ps, ctx, 0), -FI_EINVAL);
	cr_assert_eq(fi_poll(ps, NULL, 1), -FI_EINVAL);
	/* a member cannot be closed, nor a set that holds one */
	cr_assert_eq(fi_close(&cq->fid), -FI_EBUSY);
	cr_assert_eq(fi_close(&ps->fid), -FI_EBUSY);
	cr_assert_eq(fi_poll_del(ps, &cq->fid, 0), 0);
	cr_assert_eq(fi_close(&ps->fid), 0);
	cr_assert_eq(fi_close(&ps2->fid), 0);
	cr_assert_eq(fi_close(&cq->fid), 0);
	cr_assert_eq(fi_close(&foreign->fid), 0);
	cr_assert_eq(other.refcnt, 0);
}
