/*
 * Shared contexts (fi_endpoint(3)): fi_srx_context and fi_stx_context.
 *
 * A shared receive context is a receive queue (struct cour_rxq, proto/cour_op.h) that the
 * endpoints bound to it use instead of their own: receives posted to it match messages that
 * arrive at any of them, and each completion goes to the CQ of the endpoint the message
 * arrived at, as the man page says. Posting goes through one of the bound, enabled endpoints
 * (any: they share the AV, which the man page requires), so a receive posted before any
 * endpoint is enabled is refused with -FI_EOPBADSTATE.
 *
 * A shared transmit context has nothing to share in courier: every endpoint keeps its own
 * send path (its socket, its window per peer), which is what a shared context of a NIC saves
 * queue space for. Binding one is accepted and counted, so it cannot be closed under its
 * endpoints.
 */
#include "cour_ep.h"

#include <stdlib.h>

struct cour_srx {
	struct fid_ep        ep_fid;      /* FI_CLASS_SRX_CTX */
	struct cour_domain  *domain;
	struct cour_rxq      rxq;
	int                  users;       /* endpoints bound; domain lock */
	uint64_t             op_flags;
};

struct cour_stx {
	struct fid_stx       stx_fid;     /* FI_CLASS_STX_CTX */
	struct cour_domain  *domain;
	int                  users;       /* endpoints bound; domain lock */
	bool                 closed;      /* fi_close came first: the last user frees it */
};

static void cour_stx_free(struct cour_stx *stx)
{
	cour_ref_dec(&stx->domain->refcnt);
	free(stx);
}

static struct fi_ops cour_srx_fi_ops, cour_stx_fi_ops;
static struct fi_ops_ep cour_srx_ep_ops, cour_stx_ep_ops;
static struct fi_ops_msg cour_srx_msg_ops;
static struct fi_ops_tagged cour_srx_tagged_ops;

static struct cour_srx *cour_srx_of(struct fid_ep *ep_fid)
{
	return COUR_CONTAINER_OF(ep_fid, struct cour_srx, ep_fid);
}

/* Lock held. An enabled endpoint taking from this context, to post through */
static struct cour_pep *cour_srx_any(struct cour_srx *srx)
{
	struct cour_pep *pep;

	DL_FOREACH2(srx->domain->pdom.peps, pep, pdom_next)
		if (pep->rxq == &srx->rxq)
			return pep;
	return NULL;
}

static ssize_t cour_srx_post(struct fid_ep *ep_fid, const struct iovec *iov, size_t count,
			     fi_addr_t src, uint64_t tag, uint64_t ignore, void *context,
			     uint64_t flags, bool tagged)
{
	struct cour_srx *srx = cour_srx_of(ep_fid);
	struct cour_pep *pep;
	ssize_t ret;

	cour_lock_acquire(&srx->domain->lock);
	pep = cour_srx_any(srx);
	if (pep) {
		ret = cour_msg_recv(pep, iov, count, src, tag, ignore, context, flags, tagged);
	} else {
		COUR_WARN(FI_LOG_EP_DATA, "receive posted to a shared context no enabled "
			  "endpoint uses yet\n");
		ret = -FI_EOPBADSTATE;
	}
	cour_lock_release(&srx->domain->lock);
	return ret;
}

#define COUR_IOV1(buf, len) (&(struct iovec){ .iov_base = (void *)(buf), .iov_len = (len) })

static ssize_t cour_srx_recv(struct fid_ep *ep, void *buf, size_t len, void *desc,
			     fi_addr_t src, void *context)
{
	return cour_srx_post(ep, COUR_IOV1(buf, len), 1, src, 0, 0, context,
			     cour_srx_of(ep)->op_flags, false);
}

static ssize_t cour_srx_recvv(struct fid_ep *ep, const struct iovec *iov, void **desc,
			      size_t count, fi_addr_t src, void *context)
{
	return cour_srx_post(ep, iov, count, src, 0, 0, context, cour_srx_of(ep)->op_flags,
			     false);
}

static ssize_t cour_srx_recvmsg(struct fid_ep *ep, const struct fi_msg *msg, uint64_t flags)
{
	return cour_srx_post(ep, msg->msg_iov, msg->iov_count, msg->addr, 0, 0, msg->context,
			     flags, false);
}

static ssize_t cour_srx_trecv(struct fid_ep *ep, void *buf, size_t len, void *desc,
			      fi_addr_t src, uint64_t tag, uint64_t ignore, void *context)
{
	return cour_srx_post(ep, COUR_IOV1(buf, len), 1, src, tag, ignore, context,
			     cour_srx_of(ep)->op_flags, true);
}

static ssize_t cour_srx_trecvv(struct fid_ep *ep, const struct iovec *iov, void **desc,
			       size_t count, fi_addr_t src, uint64_t tag, uint64_t ignore,
			       void *context)
{
	return cour_srx_post(ep, iov, count, src, tag, ignore, context,
			     cour_srx_of(ep)->op_flags, true);
}

static ssize_t cour_srx_trecvmsg(struct fid_ep *ep, const struct fi_msg_tagged *msg,
				 uint64_t flags)
{
	return cour_srx_post(ep, msg->msg_iov, msg->iov_count, msg->addr, msg->tag, msg->ignore,
			     msg->context, flags, true);
}

static ssize_t cour_srx_cancel(fid_t fid, void *context)
{
	struct cour_srx *srx = COUR_CONTAINER_OF(fid, struct cour_srx, ep_fid.fid);
	struct cour_pep *pep;
	ssize_t ret = -FI_ENOENT;

	cour_lock_acquire(&srx->domain->lock);
	pep = cour_srx_any(srx);
	if (pep)
		ret = cour_msg_cancel(pep, context);
	cour_lock_release(&srx->domain->lock);
	return ret;
}

static int cour_srx_close(struct fid *fid)
{
	struct cour_srx *srx = COUR_CONTAINER_OF(fid, struct cour_srx, ep_fid.fid);

	cour_lock_acquire(&srx->domain->lock);
	if (srx->users) {
		cour_lock_release(&srx->domain->lock);
		COUR_WARN(FI_LOG_EP_CTRL, "shared receive context still used by %d endpoint(s)\n",
			  srx->users);
		return -FI_EBUSY;
	}
	cour_lock_release(&srx->domain->lock);
	cour_pool_fini(&srx->rxq.rxe_pool);
	cour_ref_dec(&srx->domain->refcnt);
	free(srx);
	return 0;
}

int cour_srx_ctx(struct fid_domain *domain, struct fi_rx_attr *attr, struct fid_ep **rx_ep,
		 void *context)
{
	struct cour_domain *dom = COUR_CONTAINER_OF(domain, struct cour_domain, domain_fid);
	struct cour_srx *srx;

	if (!rx_ep)
		return -FI_EINVAL;
	srx = calloc(1, sizeof(*srx));
	if (!srx)
		return -FI_ENOMEM;
	cour_pool_init(&srx->rxq.rxe_pool, sizeof(struct cour_rxe), 64, 0);
	srx->domain = dom;
	srx->op_flags = attr ? attr->op_flags : 0;
	srx->ep_fid.fid.fclass = FI_CLASS_SRX_CTX;
	srx->ep_fid.fid.context = context;
	srx->ep_fid.fid.ops = &cour_srx_fi_ops;
	srx->ep_fid.ops = &cour_srx_ep_ops;
	srx->ep_fid.msg = &cour_srx_msg_ops;
	srx->ep_fid.tagged = &cour_srx_tagged_ops;
	cour_ref_inc(&dom->refcnt);
	*rx_ep = &srx->ep_fid;
	return 0;
}

int cour_srx_bind(struct cour_ep *ep, struct fid *bfid)
{
	struct cour_srx *srx = COUR_CONTAINER_OF(bfid, struct cour_srx, ep_fid.fid);

	if (bfid->ops != &cour_srx_fi_ops || srx->domain != ep->domain) {
		COUR_WARN(FI_LOG_EP_CTRL, "shared receive context of another domain\n");
		return -FI_EINVAL;
	}
	if (ep->pep.rxq != &ep->pep.own_rxq)
		return -FI_EALREADY;
	if (ep->pep.rxq->msg || ep->pep.rxq->tag) {
		COUR_WARN(FI_LOG_EP_CTRL, "the endpoint has receives of its own posted\n");
		return -FI_EOPBADSTATE;     /* they would be stranded */
	}
	ep->pep.rxq = &srx->rxq;
	ep->srx_fid = bfid;
	srx->users++;
	return 0;
}

void cour_srx_unbind(struct cour_ep *ep)
{
	if (ep->srx_fid)
		COUR_CONTAINER_OF(ep->srx_fid, struct cour_srx, ep_fid.fid)->users--;
	if (ep->stx_fid) {
		struct cour_stx *stx = COUR_CONTAINER_OF(ep->stx_fid, struct cour_stx, stx_fid.fid);

		if (!--stx->users && stx->closed)
			cour_stx_free(stx);
	}
	ep->srx_fid = ep->stx_fid = NULL;
	ep->pep.rxq = &ep->pep.own_rxq;
}

/* ---- shared transmit contexts ---- */

static int cour_stx_close(struct fid *fid)
{
	struct cour_stx *stx = COUR_CONTAINER_OF(fid, struct cour_stx, stx_fid.fid);

	/* Closed while endpoints still use it, it goes with the last of them: an endpoint's
	 * sends do not go through the context, which only names the sharing. Sandia OpenSHMEM
	 * closes its STXs before its target endpoint, which its default context shares. */
	cour_lock_acquire(&stx->domain->lock);
	if (stx->users) {
		stx->closed = true;
		cour_lock_release(&stx->domain->lock);
		COUR_INFO(FI_LOG_EP_CTRL, "shared transmit context closed while %d endpoint(s) "
			  "use it: freed with the last\n", stx->users);
		return 0;
	}
	cour_lock_release(&stx->domain->lock);
	cour_stx_free(stx);
	return 0;
}

int cour_stx_ctx(struct fid_domain *domain, struct fi_tx_attr *attr, struct fid_stx **stx_fid,
		 void *context)
{
	struct cour_domain *dom = COUR_CONTAINER_OF(domain, struct cour_domain, domain_fid);
	struct cour_stx *stx;

	if (!stx_fid)
		return -FI_EINVAL;
	stx = calloc(1, sizeof(*stx));
	if (!stx)
		return -FI_ENOMEM;
	stx->domain = dom;
	stx->stx_fid.fid.fclass = FI_CLASS_STX_CTX;
	stx->stx_fid.fid.context = context;
	stx->stx_fid.fid.ops = &cour_stx_fi_ops;
	stx->stx_fid.ops = &cour_stx_ep_ops;
	cour_ref_inc(&dom->refcnt);
	*stx_fid = &stx->stx_fid;
	return 0;
}

int cour_stx_bind(struct cour_ep *ep, struct fid *bfid)
{
	struct cour_stx *stx = COUR_CONTAINER_OF(bfid, struct cour_stx, stx_fid.fid);

	if (bfid->ops != &cour_stx_fi_ops || stx->domain != ep->domain) {
		COUR_WARN(FI_LOG_EP_CTRL, "shared transmit context of another domain\n");
		return -FI_EINVAL;
	}
	if (ep->stx_fid)
		return -FI_EALREADY;
	ep->stx_fid = bfid;
	stx->users++;
	return 0;
}

static struct fi_ops cour_srx_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = cour_srx_close,
	.bind = cour_no_bind,
	.control = cour_no_control,
	.ops_open = cour_no_ops_open,
	.tostr = cour_no_tostr,
	.ops_set = cour_no_ops_set,
};

static struct fi_ops cour_stx_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = cour_stx_close,
	.bind = cour_no_bind,
	.control = cour_no_control,
	.ops_open = cour_no_ops_open,
	.tostr = cour_no_tostr,
	.ops_set = cour_no_ops_set,
};

static ssize_t cour_stx_no_cancel(fid_t fid, void *context)
{
	return -FI_ENOENT;
}

static int cour_ctx_no_getopt(fid_t fid, int level, int optname, void *optval, size_t *optlen)
{
	return -FI_ENOPROTOOPT;
}

static int cour_ctx_no_setopt(fid_t fid, int level, int optname, const void *optval,
			      size_t optlen)
{
	return -FI_ENOPROTOOPT;
}

static struct fi_ops_ep cour_srx_ep_ops = {
	.size = sizeof(struct fi_ops_ep),
	.cancel = cour_srx_cancel,
	.getopt = cour_ctx_no_getopt,
	.setopt = cour_ctx_no_setopt,
};

static struct fi_ops_ep cour_stx_ep_ops = {
	.size = sizeof(struct fi_ops_ep),
	.cancel = cour_stx_no_cancel,
	.getopt = cour_ctx_no_getopt,
	.setopt = cour_ctx_no_setopt,
};

/* A receive context sends nothing */
static ssize_t cour_srx_no_send(struct fid_ep *ep, const void *buf, size_t len, void *desc,
				fi_addr_t dest, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t cour_srx_no_sendv(struct fid_ep *ep, const struct iovec *iov, void **desc,
				 size_t count, fi_addr_t dest, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t cour_srx_no_sendmsg(struct fid_ep *ep, const struct fi_msg *msg, uint64_t flags)
{
	return -FI_ENOSYS;
}

static ssize_t cour_srx_no_inject(struct fid_ep *ep, const void *buf, size_t len,
				  fi_addr_t dest)
{
	return -FI_ENOSYS;
}

static ssize_t cour_srx_no_senddata(struct fid_ep *ep, const void *buf, size_t len, void *desc,
				    uint64_t data, fi_addr_t dest, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t cour_srx_no_injectdata(struct fid_ep *ep, const void *buf, size_t len,
				      uint64_t data, fi_addr_t dest)
{
	return -FI_ENOSYS;
}

static ssize_t cour_srx_no_tsend(struct fid_ep *ep, const void *buf, size_t len, void *desc,
				 fi_addr_t dest, uint64_t tag, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t cour_srx_no_tsendv(struct fid_ep *ep, const struct iovec *iov, void **desc,
				  size_t count, fi_addr_t dest, uint64_t tag, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t cour_srx_no_tsendmsg(struct fid_ep *ep, const struct fi_msg_tagged *msg,
				    uint64_t flags)
{
	return -FI_ENOSYS;
}

static ssize_t cour_srx_no_tinject(struct fid_ep *ep, const void *buf, size_t len,
				   fi_addr_t dest, uint64_t tag)
{
	return -FI_ENOSYS;
}

static ssize_t cour_srx_no_tsenddata(struct fid_ep *ep, const void *buf, size_t len, void *desc,
				     uint64_t data, fi_addr_t dest, uint64_t tag, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t cour_srx_no_tinjectdata(struct fid_ep *ep, const void *buf, size_t len,
				       uint64_t data, fi_addr_t dest, uint64_t tag)
{
	return -FI_ENOSYS;
}

static struct fi_ops_msg cour_srx_msg_ops = {
	.size = sizeof(struct fi_ops_msg),
	.recv = cour_srx_recv,
	.recvv = cour_srx_recvv,
	.recvmsg = cour_srx_recvmsg,
	.send = cour_srx_no_send,
	.sendv = cour_srx_no_sendv,
	.sendmsg = cour_srx_no_sendmsg,
	.inject = cour_srx_no_inject,
	.senddata = cour_srx_no_senddata,
	.injectdata = cour_srx_no_injectdata,
};

static struct fi_ops_tagged cour_srx_tagged_ops = {
	.size = sizeof(struct fi_ops_tagged),
	.recv = cour_srx_trecv,
	.recvv = cour_srx_trecvv,
	.recvmsg = cour_srx_trecvmsg,
	.send = cour_srx_no_tsend,
	.sendv = cour_srx_no_tsendv,
	.sendmsg = cour_srx_no_tsendmsg,
	.inject = cour_srx_no_tinject,
	.senddata = cour_srx_no_tsenddata,
	.injectdata = cour_srx_no_tinjectdata,
};
