/*
 * Completion counters (fi_cntr(3)): a success count and an error count, guarded like everything
 * in the domain by the progress lock.
 *
 * Waking: fi_cntr_wait sleeps in cour_domain_wait on signal_fd, and every change kicks the fd
 * while someone sleeps (waiters > 0). With FI_WAIT_FD the application may poll the fd itself:
 * then a change also makes it readable (once: fd_armed), and fi_cntr_read / fi_cntr_readerr,
 * which report the change, make it unreadable again.
 */
#include "cour_cq.h"
#include "cour_ep.h"

#include <stdlib.h>
#include <unistd.h>

static struct fi_ops_cntr cour_cntr_ops;
static struct fi_ops cour_cntr_fi_ops;

static void cour_cntr_notify_locked(struct cour_cntr *c)
{
	if (c->signal_fd < 0)
		return;
	if (COUR_UNLIKELY(c->mc))
		cour_mcond_signal(c->mc);       /* every change: waiters compare their threshold */
	if (__atomic_load_n(&c->waiters, __ATOMIC_ACQUIRE) > 0 ||
	    (c->wait_obj == FI_WAIT_FD && !c->fd_armed)) {
		cour_fd_kick(c->signal_fd);
		c->fd_armed = true;
	}
}

static void cour_cntr_disarm_locked(struct cour_cntr *c)
{
	if (c->fd_armed) {
		cour_fd_drain(c->signal_fd);
		c->fd_armed = false;
	}
}

void cour_cntr_inc_locked(struct cour_cntr *c)
{
	cour_lock_assert_held(&c->domain->lock);
	__atomic_add_fetch(&c->value, 1, __ATOMIC_RELEASE);
	cour_cntr_notify_locked(c);
	if (COUR_UNLIKELY(c->domain->trig_wait))
		cour_trig_check_locked(c->domain, c);
}

void cour_cntr_inc_err_locked(struct cour_cntr *c)
{
	cour_lock_assert_held(&c->domain->lock);
	__atomic_add_fetch(&c->err, 1, __ATOMIC_RELEASE);
	cour_cntr_notify_locked(c);
}

/* fi_cntr_read and fi_cntr_readerr: progress first, so that polling a counter is enough to
 * make manual progress (a poll: OpenSHMEM waits in loops of these). */
static uint64_t cour_cntr_get(struct cour_cntr *c, volatile uint64_t *field)
{
	struct cour_domain *dom = c->domain;
	uint64_t v;

	cour_lock_acquire(&dom->lock);
	cour_domain_poll_locked(dom);
	cour_cntr_disarm_locked(c);
	v = __atomic_load_n(field, __ATOMIC_ACQUIRE);
	cour_lock_release(&dom->lock);
	return v;
}

static uint64_t cour_cntr_read(struct fid_cntr *cntr_fid)
{
	struct cour_cntr *c = COUR_CONTAINER_OF(cntr_fid, struct cour_cntr, cntr_fid);

	return cour_cntr_get(c, &c->value);
}

static uint64_t cour_cntr_readerr(struct fid_cntr *cntr_fid)
{
	struct cour_cntr *c = COUR_CONTAINER_OF(cntr_fid, struct cour_cntr, cntr_fid);

	return cour_cntr_get(c, &c->err);
}

/* add/set on value or err: the application's updates wake waiters like the engine's do */
static int cour_cntr_update(struct cour_cntr *c, volatile uint64_t *field, uint64_t v, bool add)
{
	struct cour_domain *dom = c->domain;

	cour_lock_acquire(&dom->lock);
	if (add)
		__atomic_add_fetch(field, v, __ATOMIC_RELEASE);
	else
		__atomic_store_n(field, v, __ATOMIC_RELEASE);
	/* fi_poll(3): a poll set reports changes since the application's last set or add */
	c->poll_value = __atomic_load_n(&c->value, __ATOMIC_RELAXED);
	c->poll_err = __atomic_load_n(&c->err, __ATOMIC_RELAXED);
	cour_cntr_notify_locked(c);
	if (COUR_UNLIKELY(dom->trig_wait)) {
		cour_trig_check_locked(dom, c);
		cour_trig_fire_locked(dom);
	}
	cour_lock_release(&dom->lock);
	return 0;
}

static int cour_cntr_add(struct fid_cntr *cntr_fid, uint64_t value)
{
	struct cour_cntr *c = COUR_CONTAINER_OF(cntr_fid, struct cour_cntr, cntr_fid);

	return cour_cntr_update(c, &c->value, value, true);
}

static int cour_cntr_set(struct fid_cntr *cntr_fid, uint64_t value)
{
	struct cour_cntr *c = COUR_CONTAINER_OF(cntr_fid, struct cour_cntr, cntr_fid);

	return cour_cntr_update(c, &c->value, value, false);
}

static int cour_cntr_adderr(struct fid_cntr *cntr_fid, uint64_t value)
{
	struct cour_cntr *c = COUR_CONTAINER_OF(cntr_fid, struct cour_cntr, cntr_fid);

	return cour_cntr_update(c, &c->err, value, true);
}

static int cour_cntr_seterr(struct fid_cntr *cntr_fid, uint64_t value)
{
	struct cour_cntr *c = COUR_CONTAINER_OF(cntr_fid, struct cour_cntr, cntr_fid);

	return cour_cntr_update(c, &c->err, value, false);
}

/*
 * fi_cntr_wait: 0 once value >= threshold; -FI_EAVAIL as soon as the error count differs from
 * what it was on entry (fi_cntr(3): any change of the error value unblocks the waiter);
 * -FI_ETIMEDOUT when timeout ms pass first.
 */
static int cour_cntr_wait(struct fid_cntr *cntr_fid, uint64_t threshold, int timeout)
{
	struct cour_cntr *c = COUR_CONTAINER_OF(cntr_fid, struct cour_cntr, cntr_fid);
	struct cour_domain *dom = c->domain;
	uint64_t deadline = timeout >= 0 ? cour_now_us() + (uint64_t)timeout * 1000 : 0;
	uint64_t err0;
	bool slept = false;
	int left, ret;

	if (c->signal_fd < 0) {
		/* fi_cntr(3) calls this invalid, but applications (libfabric's own fabtests
		 * among them) do it and other providers serve it: poll, progressing, napping
		 * at most 1 ms on the sockets (an fi_cntr_add from another thread has no fd) */
		if (!c->warned_none) {
			c->warned_none = true;
			COUR_INFO(FI_LOG_CNTR, "fi_cntr_wait on an FI_WAIT_NONE counter: polling\n");
		}
	}
	err0 = __atomic_load_n(&c->err, __ATOMIC_ACQUIRE);
	for (;;) {
		cour_lock_acquire(&dom->lock);
		if (slept) {
			/* Only the last sleeper clears the fd: another thread counted in waiters
			 * may not have reached its poll yet, and the kick is its wake-up too. */
			if (__atomic_sub_fetch(&c->waiters, 1, __ATOMIC_ACQ_REL) == 0) {
				cour_fd_drain(c->signal_fd);
				c->fd_armed = false;
			}
		}
		cour_domain_progress_locked(dom);
		left = cour_wait_remaining_ms(deadline);
		if (__atomic_load_n(&c->value, __ATOMIC_ACQUIRE) >= threshold)
			ret = 0;
		else if (__atomic_load_n(&c->err, __ATOMIC_ACQUIRE) != err0)
			ret = -FI_EAVAIL;
		else if (left == 0)
			ret = -FI_ETIMEDOUT;
		else
			ret = 1;
		if (ret <= 0) {
			cour_lock_release(&dom->lock);
			return ret;
		}
		if (c->signal_fd < 0) {
			cour_lock_release(&dom->lock);
			cour_domain_wait(dom, -1, left < 0 || left > 1 ? 1 : left);
			continue;
		}
		/* counted under the lock: an update after this point sees us and kicks the fd */
		__atomic_add_fetch(&c->waiters, 1, __ATOMIC_RELEASE);
		cour_lock_release(&dom->lock);
		cour_domain_wait(dom, c->signal_fd, left);
		slept = true;
	}
}

static int cour_cntr_control(struct fid *fid, int command, void *arg)
{
	struct cour_cntr *c = COUR_CONTAINER_OF(fid, struct cour_cntr, cntr_fid.fid);

	switch (command) {
	case FI_GETOPSFLAG:
		/* counters have no operation flags of their own */
		if (!arg)
			return -FI_EINVAL;
		*(uint64_t *)arg = 0;
		return 0;
	default:
		if (c->mc)
			return cour_mcond_getwait(c->mc, command, arg);
		return cour_wait_getwait(c->wait_obj == FI_WAIT_FD ||
					 c->wait_obj == FI_WAIT_UNSPEC ? c->signal_fd : -1,
					 command, arg);
	}
}

static int cour_cntr_close(struct fid *fid)
{
	struct cour_cntr *c = COUR_CONTAINER_OF(fid, struct cour_cntr, cntr_fid.fid);
	struct cour_domain *dom = c->domain;

	if (cour_ref_get(&c->refcnt) > 0) {
		COUR_WARN(FI_LOG_CNTR, "counter still bound to %d object(s)\n",
			  cour_ref_get(&c->refcnt));
		return -FI_EBUSY;
	}
	if (c->wait_set)
		cour_wait_set_leave(c->wait_set, dom, c->signal_fd);
	if (c->signal_fd >= 0)
		close(c->signal_fd);
	if (c->mc) {
		cour_lock_acquire(&dom->lock);
		cour_domain_mcond_del_locked(dom, c->mc);
		cour_lock_release(&dom->lock);
		cour_mcond_free(c->mc);
	}
	free(c);
	cour_ref_dec(&dom->refcnt);
	return 0;
}

int cour_cntr_open(struct fid_domain *domain, struct fi_cntr_attr *attr,
		   struct fid_cntr **cntr_fid, void *context)
{
	struct cour_domain *dom = COUR_CONTAINER_OF(domain, struct cour_domain, domain_fid);
	struct fi_cntr_attr def = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_NONE };
	struct cour_cntr *c;
	int ret;

	if (!cntr_fid)
		return -FI_EINVAL;
	if (!attr)
		attr = &def;
	if (attr->events != FI_CNTR_EVENTS_COMP) {
		COUR_WARN(FI_LOG_CNTR, "counter events %d not supported (FI_CNTR_EVENTS_COMP only)\n",
			  (int)attr->events);
		return -FI_ENOSYS;
	}
	if (attr->flags) {
		COUR_WARN(FI_LOG_CNTR, "counter flags 0x%llx: reserved, must be 0\n",
			  (unsigned long long)attr->flags);
		return -FI_EINVAL;
	}

	c = calloc(1, sizeof(*c));
	if (!c) {
		COUR_WARN(FI_LOG_CNTR, "no memory for a counter\n");
		return -FI_ENOMEM;
	}
	ret = cour_wait_fd_open(attr->wait_obj, FI_LOG_CNTR, "fi_cntr_open", &c->signal_fd);
	if (!ret && attr->wait_obj == FI_WAIT_SET) {
		ret = cour_wait_set_join(attr->wait_set, dom->fabric, dom, c->signal_fd,
					 FI_LOG_CNTR, "fi_cntr_open");
		if (ret)
			close(c->signal_fd);
		c->wait_set = attr->wait_set;
	}
	if (ret) {
		free(c);
		return ret;
	}
	c->domain = dom;
	/* in a wait set: an FI_WAIT_FD counter whose fd the set watches */
	c->wait_obj = attr->wait_obj == FI_WAIT_SET ? FI_WAIT_FD : attr->wait_obj;
	c->events = attr->events;
	c->cntr_fid.fid.fclass = FI_CLASS_CNTR;
	c->cntr_fid.fid.context = context;
	c->cntr_fid.fid.ops = &cour_cntr_fi_ops;
	c->cntr_fid.ops = &cour_cntr_ops;
	if (attr->wait_obj == FI_WAIT_MUTEX_COND) {
		c->mc = cour_mcond_new();
		if (!c->mc) {
			close(c->signal_fd);
			free(c);
			return -FI_ENOMEM;
		}
		cour_lock_acquire(&dom->lock);
		cour_domain_mcond_add_locked(dom, c->mc);
		cour_lock_release(&dom->lock);
	}
	cour_ref_inc(&dom->refcnt);
	*cntr_fid = &c->cntr_fid;
	return 0;
}

static struct fi_ops_cntr cour_cntr_ops = {
	.size = sizeof(struct fi_ops_cntr),
	.read = cour_cntr_read,
	.readerr = cour_cntr_readerr,
	.add = cour_cntr_add,
	.set = cour_cntr_set,
	.wait = cour_cntr_wait,
	.adderr = cour_cntr_adderr,
	.seterr = cour_cntr_seterr,
};

static struct fi_ops cour_cntr_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = cour_cntr_close,
	.bind = cour_no_bind,
	.control = cour_cntr_control,
	.ops_open = cour_no_ops_open,
	.tostr = cour_no_tostr,
	.ops_set = cour_no_ops_set,
};
