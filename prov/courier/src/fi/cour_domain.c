/*
 * The domain: owner of the progress lock, the endpoints it progresses, the memory regions, and
 * the progress thread when data progress is automatic (cour_progress.c).
 */
#include "cour_fi.h"
#include "cour_attr.h"
#include "cour_ep.h"
#include "cour_mr.h"

#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

int cour_progress_thread_start(struct cour_domain *dom);
void cour_progress_thread_stop(struct cour_domain *dom);

static int cour_domain_close(struct fid *fid)
{
	struct cour_domain *dom = COUR_CONTAINER_OF(fid, struct cour_domain, domain_fid.fid);

	if (cour_ref_get(&dom->refcnt)) {
		COUR_WARN(FI_LOG_DOMAIN, "domain close with %d objects still open\n",
			  cour_ref_get(&dom->refcnt));
		return -FI_EBUSY;
	}
	cour_progress_thread_stop(dom);
	close(dom->wake_fd);
	if (dom->pdom.bell_epfd > 0)
		close(dom->pdom.bell_epfd);
	cour_lock_destroy(&dom->lock);
	cour_ref_dec(&dom->fabric->refcnt);
	fi_freeinfo(dom->info);
	cour_auth_key_free(dom->auth_key, dom->auth_key_len);
	free(dom);
	return 0;
}

static int cour_no_query_collective(struct fid_domain *domain, enum fi_collective_op coll,
				    struct fi_collective_attr *attr, uint64_t flags)
{
	return -FI_ENOSYS;
}

static int cour_domain_endpoint2(struct fid_domain *domain, struct fi_info *info,
				 struct fid_ep **ep, uint64_t flags, void *context)
{
	if (flags)
		return -FI_EBADFLAGS;
	return cour_ep_open(domain, info, ep, context);
}

static struct fi_ops cour_domain_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = cour_domain_close,
	.bind = cour_no_bind,
	.control = cour_no_control,
	.ops_open = cour_no_ops_open,
	.tostr = cour_no_tostr,
	.ops_set = cour_no_ops_set,
};

static struct fi_ops_domain cour_domain_ops = {
	.size = sizeof(struct fi_ops_domain),
	.av_open = cour_av_open,
	.cq_open = cour_cq_open,
	.endpoint = cour_ep_open,
	.scalable_ep = cour_sep_open,
	.cntr_open = cour_cntr_open,
	.poll_open = cour_poll_open,
	.stx_ctx = cour_stx_ctx,
	.srx_ctx = cour_srx_ctx,
	.query_atomic = cour_domain_query_atomic,
	.query_collective = cour_no_query_collective,
	.endpoint2 = cour_domain_endpoint2,
};

static struct fi_ops_mr cour_domain_mr_ops = {
	.size = sizeof(struct fi_ops_mr),
	.reg = cour_mr_reg,
	.regv = cour_mr_regv,
	.regattr = cour_mr_regattr,
};

int cour_domain_open(struct fid_fabric *fabric, struct fi_info *info, struct fid_domain **domain,
		     void *context)
{
	struct cour_fabric *fab = COUR_CONTAINER_OF(fabric, struct cour_fabric, fabric_fid);
	struct fi_domain_attr *da = info ? info->domain_attr : NULL;
	struct cour_domain *dom;
	int ret;

	if (da && da->name && strcmp(da->name, COUR_DOMAIN_NAME)) {
		COUR_WARN(FI_LOG_DOMAIN, "unknown domain name %s\n", da->name);
		return -FI_EINVAL;
	}
	dom = calloc(1, sizeof(*dom));
	if (!dom)
		return -FI_ENOMEM;
	dom->info = fi_dupinfo(info);
	if (!dom->info) {
		ret = -FI_ENOMEM;
		goto err_free;
	}
	ret = cour_auth_key(info, false, &dom->auth_key, &dom->auth_key_len);
	if (ret)
		goto err_info;
	dom->fabric = fab;
	dom->threading = da && da->threading != FI_THREAD_UNSPEC ? da->threading : FI_THREAD_SAFE;
	dom->data_progress = da && (da->data_progress == FI_PROGRESS_MANUAL ||
				    (int)da->data_progress == COUR_PROGRESS_CONTROL_UNIFIED ||
				    (int)da->control_progress == COUR_PROGRESS_CONTROL_UNIFIED) ?
			     FI_PROGRESS_MANUAL : FI_PROGRESS_AUTO;
	dom->mr_mode = da ? (uint64_t)da->mr_mode : 0;
	/* The libfabric man pages let a provider progress more than asked: under manual
	 * progress a thread still serves RMA and atomics aimed at us while the application
	 * computes (MPICH's atomics waited for their target to poll). */
	dom->progress_thread_on = dom->data_progress == FI_PROGRESS_AUTO ||
				  cour_params.manual_thread;
	/* A real mutex wherever two threads can meet. Progress runs every endpoint of the
	 * domain, so FI_THREAD_FID, _ENDPOINT and _COMPLETION, which let threads work on
	 * different objects of one domain at once, need it as much as FI_THREAD_SAFE; only
	 * FI_THREAD_DOMAIN without a progress thread is free of it (cour_attr_lock_needed). */
	cour_lock_init(&dom->lock, cour_attr_lock_kind(dom->threading, dom->progress_thread_on));
	dom->pdom.lock = &dom->lock;
	dom->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (dom->wake_fd < 0) {
		COUR_WARN(FI_LOG_DOMAIN, "eventfd: %s\n", strerror(errno));
		ret = -FI_ENOMEM;
		goto err_info;
	}
	/* the endpoints' doorbells, for the thread to sleep on (none: probes reach the sockets) */
	dom->pdom.bell_epfd = dom->progress_thread_on && cour_params.nudge_us ?
			      epoll_create1(EPOLL_CLOEXEC) : -1;
	dom->domain_fid.fid.fclass = FI_CLASS_DOMAIN;
	dom->domain_fid.fid.context = context;
	dom->domain_fid.fid.ops = &cour_domain_fi_ops;
	dom->domain_fid.ops = &cour_domain_ops;
	dom->domain_fid.mr = &cour_domain_mr_ops;
	if (dom->progress_thread_on) {
		ret = cour_progress_thread_start(dom);
		if (ret)
			goto err_fd;
	}
	cour_ref_inc(&fab->refcnt);
	*domain = &dom->domain_fid;
	return 0;

err_fd:
	close(dom->wake_fd);
	if (dom->pdom.bell_epfd > 0)
		close(dom->pdom.bell_epfd);
err_info:
	fi_freeinfo(dom->info);
	cour_auth_key_free(dom->auth_key, dom->auth_key_len);
err_free:
	free(dom);
	return ret;
}
