/*
 * Test doubles for the unit tests of CQs, counters and EQs (test_cq, test_cntr, test_eq), which
 * link cour_cq.c, cour_cntr.c and cour_eq.c directly instead of libcourier_core.la: the domain's
 * progress and wait (in place of cour_progress.c) and the parts of cour_init.c the objects need
 * (cour_prov, the cour_no_* slots; cour_init.c itself would drag in getinfo and the fabric).
 *
 * The doubles count progress calls and let a test play the engine during progress, which is how
 * the tests check that every read and wait drives progress. The tests reach them through weak
 * references: linked against libcourier_core.la without this file they still pass, skipping
 * only those checks.
 */
#include "fi/cour_fi.h"

#include <poll.h>

struct fi_provider cour_prov = {
	.version = COUR_PROV_VERSION,
	.fi_version = COUR_FI_VERSION,
	.name = COUR_PROV_NAME,
};

/* how many times progress ran, and a callback that plays the engine during progress */
int cour_test_progress_calls;
void (*cour_test_progress_hook)(struct cour_domain *dom);

void cour_domain_progress_locked(struct cour_domain *dom)
{
	cour_lock_assert_held(&dom->lock);
	__atomic_add_fetch(&cour_test_progress_calls, 1, __ATOMIC_RELAXED);
	if (cour_test_progress_hook)
		cour_test_progress_hook(dom);
}

/* (no rings here: every poll is a full pass) */
void cour_domain_poll_locked(struct cour_domain *dom)
{
	cour_domain_progress_locked(dom);
}

int64_t cour_domain_next_timer_locked(struct cour_domain *dom, uint64_t now)
{
	return -1;
}

int cour_domain_poll_fds_locked(struct cour_domain *dom, struct pollfd *pfds, int max)
{
	return 0;
}

/* No endpoints and no timers: only extra_fd can wake us. */
void cour_domain_wait(struct cour_domain *dom, int extra_fd, int timeout_ms)
{
	struct pollfd pfd = { .fd = extra_fd, .events = POLLIN };

	poll(&pfd, extra_fd >= 0 ? 1 : 0, timeout_ms);
}

void cour_domains_wait(struct cour_domain **doms, int ndoms, int extra_fd, int timeout_ms)
{
	cour_domain_wait(ndoms ? doms[0] : NULL, extra_fd, timeout_ms);
}

int cour_no_close(struct fid *fid) { return -FI_ENOSYS; }
int cour_no_bind(struct fid *fid, struct fid *bfid, uint64_t flags) { return -FI_ENOSYS; }
int cour_no_control(struct fid *fid, int command, void *arg) { return -FI_ENOSYS; }
int cour_no_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops, void *context)
{
	return -FI_ENOSYS;
}
int cour_no_tostr(const struct fid *fid, char *buf, size_t len) { return -FI_ENOSYS; }
int cour_no_ops_set(struct fid *fid, const char *name, uint64_t flags, void *ops, void *context)
{
	return -FI_ENOSYS;
}

/* Triggered operations (cour_trigger.c) need endpoints: no test linking this stub posts one,
 * so no counter here ever has a trigger waiting on it. */
struct cour_cntr;
void cour_trig_check_locked(struct cour_domain *dom, struct cour_cntr *c);
void cour_trig_fire_locked(struct cour_domain *dom);
void cour_trig_check_locked(struct cour_domain *dom, struct cour_cntr *c)
{
	(void)dom;
	(void)c;
}

void cour_trig_fire_locked(struct cour_domain *dom)
{
	(void)dom;
}
