/*
 * Poll sets (fi_poll(3)): one call that progresses a domain and says which of a set of its
 * CQs and counters have something to read. A CQ is reported while it holds a completion or an
 * error; a counter once its success or error value moved since the last fi_poll that reported
 * it, or since the application last set or added to it (cour_cntr.c keeps that baseline).
 *
 * A poll set belongs to one domain and holds only that domain's CQs and counters: fi_poll
 * progresses that domain, so a member of another one could be reported late or never. Members
 * are held (their close says -FI_EBUSY) until removed; the set holds its domain. Everything
 * here runs under the domain's progress lock, which also guards the member list.
 */
#include "cour_cq.h"

#include <stdlib.h>
#include <utlist.h>

struct cour_poll_member {
	struct fid              *fid;
	struct cour_poll_member *next, *prev;
};

struct cour_pollset {
	struct fid_poll          poll_fid;
	struct cour_domain      *domain;
	struct cour_poll_member *members;
};

static struct fi_ops_poll cour_poll_ops;
static struct fi_ops cour_poll_fi_ops;

static struct cour_pollset *cour_pollset_of(struct fid_poll *p)
{
	return COUR_CONTAINER_OF(p, struct cour_pollset, poll_fid);
}

/* The member's domain and reference count, or NULL for what a poll set cannot hold. */
static struct cour_domain *cour_poll_target(struct fid *fid, int **refcnt)
{
	struct cour_cq *cq;
	struct cour_cntr *c;

	switch (fid->fclass) {
	case FI_CLASS_CQ:
		cq = COUR_CONTAINER_OF(fid, struct cour_cq, cq_fid.fid);
		*refcnt = &cq->refcnt;
		return cq->domain;
	case FI_CLASS_CNTR:
		c = COUR_CONTAINER_OF(fid, struct cour_cntr, cntr_fid.fid);
		*refcnt = &c->refcnt;
		return c->domain;
	default:
		return NULL;
	}
}

static struct cour_poll_member *cour_poll_find(struct cour_pollset *ps, struct fid *fid)
{
	struct cour_poll_member *m;

	DL_FOREACH(ps->members, m)
		if (m->fid == fid)
			return m;
	return NULL;
}

static int cour_poll_add(struct fid_poll *pollset, struct fid *fid, uint64_t flags)
{
	struct cour_pollset *ps = cour_pollset_of(pollset);
	struct cour_poll_member *m;
	struct cour_domain *dom;
	int *refcnt, ret = 0;

	if (!fid || flags) {
		COUR_WARN(FI_LOG_DOMAIN, "fi_poll_add: %s\n", fid ? "flags are reserved" : "no fid");
		return -FI_EINVAL;
	}
	dom = cour_poll_target(fid, &refcnt);
	if (!dom) {
		COUR_WARN(FI_LOG_DOMAIN, "fi_poll_add: fclass %zu (only CQs and counters)\n",
			  fid->fclass);
		return -FI_EINVAL;
	}
	if (dom != ps->domain) {
		COUR_WARN(FI_LOG_DOMAIN, "fi_poll_add: the object belongs to another domain\n");
		return -FI_EINVAL;
	}
	cour_lock_acquire(&dom->lock);
	if (cour_poll_find(ps, fid)) {
		ret = -FI_EALREADY;
		goto out;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		ret = -FI_ENOMEM;
		goto out;
	}
	m->fid = fid;
	DL_APPEND(ps->members, m);
	cour_ref_inc(refcnt);
out:
	cour_lock_release(&dom->lock);
	return ret;
}

static int cour_poll_del(struct fid_poll *pollset, struct fid *fid, uint64_t flags)
{
	struct cour_pollset *ps = cour_pollset_of(pollset);
	struct cour_poll_member *m;
	int *refcnt = NULL;

	if (!fid || flags)
		return -FI_EINVAL;
	cour_lock_acquire(&ps->domain->lock);
	m = cour_poll_find(ps, fid);
	if (m) {
		DL_DELETE(ps->members, m);
		if (cour_poll_target(fid, &refcnt))     /* always: only targets get in */
			cour_ref_dec(refcnt);
		free(m);
	}
	cour_lock_release(&ps->domain->lock);
	if (!m) {
		COUR_WARN(FI_LOG_DOMAIN, "fi_poll_del: not in this poll set\n");
		return -FI_ENOENT;
	}
	return 0;
}

/* Has the member something to say? A counter's baseline moves when it is reported. */
static bool cour_poll_ready_locked(struct fid *fid)
{
	struct cour_cntr *c;
	uint64_t v, e;

	if (fid->fclass == FI_CLASS_CQ)
		return !cour_cq_empty_locked(COUR_CONTAINER_OF(fid, struct cour_cq, cq_fid.fid));
	c = COUR_CONTAINER_OF(fid, struct cour_cntr, cntr_fid.fid);
	v = __atomic_load_n(&c->value, __ATOMIC_ACQUIRE);
	e = __atomic_load_n(&c->err, __ATOMIC_ACQUIRE);
	if (v == c->poll_value && e == c->poll_err)
		return false;
	c->poll_value = v;
	c->poll_err = e;
	return true;
}

static int cour_poll_poll(struct fid_poll *pollset, void **context, int count)
{
	struct cour_pollset *ps = cour_pollset_of(pollset);
	struct cour_poll_member *m;
	int n = 0;

	if (count <= 0 || !context) {
		COUR_WARN(FI_LOG_DOMAIN, "fi_poll: %s\n", count <= 0 ? "count <= 0" : "no array");
		return -FI_EINVAL;
	}
	cour_lock_acquire(&ps->domain->lock);
	cour_domain_progress_locked(ps->domain);
	DL_FOREACH(ps->members, m) {
		if (n == count)
			break;   /* the rest say so next time: a counter keeps its baseline till then */
		if (cour_poll_ready_locked(m->fid))
			context[n++] = m->fid->context;
	}
	cour_lock_release(&ps->domain->lock);
	return n;
}

static int cour_poll_close(struct fid *fid)
{
	struct cour_pollset *ps = COUR_CONTAINER_OF(fid, struct cour_pollset, poll_fid.fid);
	bool busy;

	/* fi_poll(3): a set that still holds members cannot be closed */
	cour_lock_acquire(&ps->domain->lock);
	busy = ps->members != NULL;
	cour_lock_release(&ps->domain->lock);
	if (busy) {
		COUR_WARN(FI_LOG_DOMAIN, "poll set still holds CQs or counters: fi_poll_del them\n");
		return -FI_EBUSY;
	}
	cour_ref_dec(&ps->domain->refcnt);
	free(ps);
	return 0;
}

int cour_poll_open(struct fid_domain *domain, struct fi_poll_attr *attr,
		   struct fid_poll **pollset)
{
	struct cour_domain *dom = COUR_CONTAINER_OF(domain, struct cour_domain, domain_fid);
	struct cour_pollset *ps;

	if (!pollset)
		return -FI_EINVAL;
	if (attr && attr->flags) {
		COUR_WARN(FI_LOG_DOMAIN, "fi_poll_open: flags are reserved, must be 0\n");
		return -FI_EINVAL;
	}
	ps = calloc(1, sizeof(*ps));
	if (!ps)
		return -FI_ENOMEM;
	ps->domain = dom;
	ps->poll_fid.fid.fclass = FI_CLASS_POLL;
	ps->poll_fid.fid.ops = &cour_poll_fi_ops;
	ps->poll_fid.ops = &cour_poll_ops;
	cour_ref_inc(&dom->refcnt);
	*pollset = &ps->poll_fid;
	return 0;
}

static struct fi_ops_poll cour_poll_ops = {
	.size = sizeof(struct fi_ops_poll),
	.poll = cour_poll_poll,
	.poll_add = cour_poll_add,
	.poll_del = cour_poll_del,
};

static struct fi_ops cour_poll_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = cour_poll_close,
	.bind = cour_no_bind,
	.control = cour_no_control,
	.ops_open = cour_no_ops_open,
	.tostr = cour_no_tostr,
	.ops_set = cour_no_ops_set,
};
