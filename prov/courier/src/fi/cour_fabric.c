/*
 * The fabric object: the root that domains and event queues are opened from.
 */
#include "cour_fi.h"
#include "cour_cq.h"
#include "cour_cm.h"

#include <stdlib.h>

static int cour_fabric_close(struct fid *fid)
{
	struct cour_fabric *fab = COUR_CONTAINER_OF(fid, struct cour_fabric, fabric_fid.fid);

	if (cour_ref_get(&fab->refcnt)) {
		COUR_WARN(FI_LOG_FABRIC, "fabric close with %d objects still open\n",
			  cour_ref_get(&fab->refcnt));
		return -FI_EBUSY;
	}
	free(fab);
	return 0;
}

static int cour_no_domain2(struct fid_fabric *fabric, struct fi_info *info,
			   struct fid_domain **dom, uint64_t flags, void *context)
{
	if (flags)
		return -FI_EBADFLAGS;
	return cour_domain_open(fabric, info, dom, context);
}

/*
 * fi_trywait: is it safe to block on these objects' fds now? Progress each one's domain first
 * (what already arrived must not wait behind the sleep), then say -FI_EAGAIN if one holds
 * something unread, or if nothing would wake its fd when a packet arrives: the application
 * polls only our fd, not the sockets, so under manual progress without the progress thread
 * (FI_COURIER_MANUAL_THREAD=0) only reading the object makes progress.
 */
static int cour_fabric_trywait(struct fid_fabric *fabric, struct fid **fids, int count)
{
	for (int i = 0; i < count; i++) {
		struct cour_cq *cq = NULL;
		struct cour_cntr *c = NULL;
		struct cour_domain *dom;
		bool unread;

		switch (fids[i]->fclass) {
		case FI_CLASS_CQ:
			cq = COUR_CONTAINER_OF(fids[i], struct cour_cq, cq_fid.fid);
			dom = cq->domain;
			break;
		case FI_CLASS_CNTR:
			c = COUR_CONTAINER_OF(fids[i], struct cour_cntr, cntr_fid.fid);
			dom = c->domain;
			break;
		case FI_CLASS_EQ:
			continue;       /* level-triggered: readable exactly while it holds events */
		default:
			COUR_WARN(FI_LOG_FABRIC, "fi_trywait on fclass %zu: only CQs, counters "
				  "and EQs have wait objects\n", fids[i]->fclass);
			return -FI_EINVAL;
		}
		cour_lock_acquire(&dom->lock);
		cour_domain_progress_locked(dom);
		unread = cq ? !cour_cq_empty_locked(cq) : c->fd_armed;  /* counter: a change */
		cour_lock_release(&dom->lock);
		if (unread || !dom->thread_running)
			return -FI_EAGAIN;
	}
	return 0;
}

static struct fi_ops cour_fabric_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = cour_fabric_close,
	.bind = cour_no_bind,
	.control = cour_no_control,
	.ops_open = cour_no_ops_open,
	.tostr = cour_no_tostr,
	.ops_set = cour_no_ops_set,
};

static struct fi_ops_fabric cour_fabric_ops = {
	.size = sizeof(struct fi_ops_fabric),
	.domain = cour_domain_open,
	.passive_ep = cour_passive_ep,
	.eq_open = cour_eq_open,
	.wait_open = cour_wait_open,
	.trywait = cour_fabric_trywait,
	.domain2 = cour_no_domain2,
};

int cour_fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context)
{
	struct cour_fabric *fab;

	if (attr && attr->name && strcmp(attr->name, COUR_FABRIC_NAME)) {
		COUR_WARN(FI_LOG_FABRIC, "unknown fabric name %s\n", attr->name);
		return -FI_ENODATA;
	}
	fab = calloc(1, sizeof(*fab));
	if (!fab)
		return -FI_ENOMEM;
	fab->fabric_fid.fid.fclass = FI_CLASS_FABRIC;
	fab->fabric_fid.fid.context = context;
	fab->fabric_fid.fid.ops = &cour_fabric_fi_ops;
	fab->fabric_fid.ops = &cour_fabric_ops;
	*fabric = &fab->fabric_fid;
	return 0;
}
