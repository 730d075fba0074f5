/*
 * Scalable endpoints (fi_scalable_ep, fi_tx_context, fi_rx_context; fi_endpoint(3)).
 *
 * A scalable endpoint is one engine endpoint (one address, one socket, one set of peer
 * sessions) with several transmit and receive contexts. A transmit context posts through the
 * endpoint's engine; each operation carries the context (txe->owner), so its completion goes
 * to the context's CQ and counters. A receive context owns a receive queue of the endpoint
 * (pep.rxqs[i]): receives posted to it match only messages that name it, and complete on its
 * bindings. A sender names a receive context with fi_rx_addr (the AV's rx_ctx_bits: the top
 * bits of the fi_addr_t); EAGER and RTS packets carry the index (COUR_F_RXCTX), and a message
 * that names none goes to context 0. RMA and atomics target the endpoint's memory whatever
 * context they name; their target events (FI_RMA_EVENT counters, remote CQ data) go to
 * receive context 0.
 *
 * Choices where the man page leaves room:
 * - The endpoint takes no transfers itself (-FI_EOPNOTSUPP): its contexts do. It binds an AV
 *   (and nothing else), and is enabled after or before its contexts; posting needs both.
 * - A context is enabled with or without a CQ or counter (a receive context may serve only
 *   as an RMA target); a post on one that has neither is refused with -FI_ENOCQ, since its
 *   completion, or its error, would have nowhere to go.
 * - Memory regions of an FI_MR_ENDPOINT domain bind to the scalable endpoint (or to one of
 *   its contexts, which stands for it): any context's RMA may then reach them.
 * - A message for a receive context this endpoint does not have (or that was closed) is
 *   dropped at the target and logged there (its sender has already been told it was sent).
 * - A closed receive context keeps its queue until the endpoint closes (messages already on
 *   their way may still name it); they are dropped, and receives posted to it are freed
 *   without completions.
 * - At most COUR_SEP_MAX_CTX contexts of each kind (domain max_ep_tx_ctx / max_ep_rx_ctx).
 */
#include "cour_attr.h"
#include "cour_ep.h"

#include <inttypes.h>
#include <stdlib.h>

static struct fi_ops_ep cour_sep_ctx_ep_ops, cour_sep_ep_ops;
extern struct fi_ops_msg cour_msg_ops;
extern struct fi_ops_tagged cour_tagged_ops;
extern struct fi_ops_rma cour_rma_ops;
extern struct fi_ops_atomic cour_atomic_ops;

struct cour_sink *cour_sep_ctx_sink(void *ctx)
{
	return &((struct cour_sep_ctx *)ctx)->b;
}

static bool cour_sep_ctx_bound(const struct cour_sep_ctx *x)
{
	const struct cour_sink *b = &x->b;

	return b->tx_cq || b->rx_cq || b->send_cntr || b->recv_cntr || b->read_cntr ||
	       b->write_cntr;
}

int cour_post_begin_slow(struct cour_ep *ep, struct fid_ep *ep_fid, bool recv, fi_addr_t *addr)
{
	struct cour_sep_ctx *x = cour_ep_ctx_of(ep_fid);

	if (ep_fid->fid.ops == &cour_sep_fi_ops) {
		COUR_WARN(FI_LOG_EP_DATA, "a transfer posted on a scalable endpoint: post it on "
			  "one of its contexts\n");
		return -FI_EOPNOTSUPP;
	}
	if (x) {
		if (x->rx != recv) {
			COUR_WARN(FI_LOG_EP_DATA, "a %s posted on a %s context\n",
				  recv ? "receive" : "transfer", x->rx ? "receive" : "transmit");
			return -FI_EOPNOTSUPP;
		}
		if (!x->enabled || !ep->pep.enabled) {
			COUR_WARN(FI_LOG_EP_DATA, "post on a context whose %s is not enabled\n",
				  x->enabled ? "scalable endpoint" : "context");
			return -FI_EOPBADSTATE;
		}
		if (!cour_sep_ctx_bound(x)) {
			COUR_WARN(FI_LOG_EP_DATA, "a %s posted on %s context %d, which has no CQ or "
				  "counter bound\n", recv ? "receive" : "transfer",
				  recv ? "receive" : "transmit", x->index);
			return -FI_ENOCQ;
		}
		if (recv)
			ep->pep.rxq = x->q;
		else
			ep->pep.tx_owner = x;
	}
	if (ep->av && ep->av->rx_ctx_bits && *addr != FI_ADDR_UNSPEC &&
	    *addr != FI_ADDR_NOTAVAIL) {
		unsigned shift = 64u - (unsigned)ep->av->rx_ctx_bits;

		if (!recv)
			ep->pep.tx_rx_ctx = (uint32_t)(*addr >> shift);
		*addr &= (1ull << shift) - 1;
	}
	return 0;
}

/* ---- contexts ---- */

static struct cour_sep_ctx *cour_ctx_of_fid(struct fid *fid)
{
	return COUR_CONTAINER_OF(fid, struct cour_sep_ctx, ep_fid.fid);
}

static int cour_sep_ctx_close(struct fid *fid)
{
	struct cour_sep_ctx *x = cour_ctx_of_fid(fid);
	struct cour_ep *ep = x->sep;
	struct cour_domain *dom = ep->domain;

	cour_lock_acquire(&dom->lock);
	cour_trig_drop_owner_locked(dom, x);
	if (x->rx) {
		/* receives still posted go without completions; the queue stays the endpoint's */
		struct cour_rxq *saved = ep->pep.rxq;

		ep->pep.rxq = x->q;
		cour_msg_flush_posted(&ep->pep);
		ep->pep.rxq = saved;
		x->q->closed = true;
		x->q->owner = NULL;
		ep->rx_ctx[x->index] = NULL;
		cour_ep_update_target_events(ep);
	} else {
		ep->tx_ctx[x->index] = NULL;
		/* operations still in flight lose their owner: their completions go nowhere */
		cour_peer_disown_locked(&ep->pep, x);
	}
	cour_sink_release(&x->b);
	cour_lock_release(&dom->lock);
	cour_ref_dec(&ep->refcnt);
	free(x);
	return 0;
}

static int cour_sep_ctx_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct cour_sep_ctx *x = cour_ctx_of_fid(fid);
	struct cour_ep *ep = x->sep;
	int ret;

	if (x->enabled) {
		COUR_WARN(FI_LOG_EP_CTRL, "bind to a context after its fi_enable\n");
		return -FI_EOPBADSTATE;
	}
	cour_lock_acquire(&ep->domain->lock);
	switch (bfid->fclass) {
	case FI_CLASS_CQ:
		/* a transmit context's CQ takes its sends, a receive context's its receives */
		flags &= ~(FI_TRANSMIT | FI_RECV);
		flags |= x->rx ? FI_RECV : FI_TRANSMIT;
		ret = cour_sink_bind_cq(&x->b, ep->domain,
					COUR_CONTAINER_OF(bfid, struct cour_cq, cq_fid.fid), flags);
		break;
	case FI_CLASS_CNTR:
		ret = cour_sink_bind_cntr(&x->b, FI_EP_RDM,
					  COUR_CONTAINER_OF(bfid, struct cour_cntr, cntr_fid.fid),
					  flags);
		if (!ret && x->rx)
			cour_ep_update_target_events(ep);
		break;
	default:
		COUR_WARN(FI_LOG_EP_CTRL, "a context binds CQs and counters, not class %zu\n",
			  bfid->fclass);
		ret = -FI_EINVAL;
	}
	cour_lock_release(&ep->domain->lock);
	return ret;
}

static int cour_sep_ctx_control(struct fid *fid, int command, void *arg)
{
	struct cour_sep_ctx *x = cour_ctx_of_fid(fid);
	uint64_t *flags = arg;

	switch (command) {
	case FI_ENABLE:
		/* fi_endpoint(3) asks for bindings only of a context "making use of" them: Open
		 * MPI's btl/ofi enables receive contexts that serve as RMA targets with none. A
		 * post that would need them is refused (cour_post_begin_slow). */
		x->enabled = true;
		return 0;
	case FI_GETOPSFLAG:
		if (!flags)
			return -FI_EINVAL;
		*flags = x->op_flags;
		return 0;
	case FI_SETOPSFLAG:
		if (!flags)
			return -FI_EINVAL;
		x->op_flags = *flags & ~(FI_TRANSMIT | FI_RECV);
		return 0;
	default:
		return -FI_ENOSYS;
	}
}

static ssize_t cour_sep_ctx_cancel(fid_t fid, void *context)
{
	struct cour_sep_ctx *x = cour_ctx_of_fid(fid);
	struct cour_ep *ep = x->sep;
	ssize_t ret = -FI_ENOENT;

	if (!x->rx)
		return ret;             /* sends are never canceled */
	cour_lock_acquire(&ep->domain->lock);
	ep->pep.rxq = x->q;
	ret = cour_msg_cancel(&ep->pep, context);
	cour_post_end(ep);
	cour_lock_release(&ep->domain->lock);
	return ret;
}

static int cour_sep_ctx_getopt(fid_t fid, int level, int optname, void *optval, size_t *optlen)
{
	return fi_getopt(&cour_ctx_of_fid(fid)->sep->ep_fid.fid, level, optname, optval, optlen);
}

static int cour_sep_ctx_setopt(fid_t fid, int level, int optname, const void *optval,
			       size_t optlen)
{
	return fi_setopt(&cour_ctx_of_fid(fid)->sep->ep_fid.fid, level, optname, optval, optlen);
}

static ssize_t cour_sep_ctx_rx_left(struct fid_ep *ep_fid)
{
	struct cour_sep_ctx *x = cour_ep_ctx_of(ep_fid);

	if (!x->rx)
		return 0;
	return x->q->rxe_pool.in_use < cour_params.rx_size ?
	       (ssize_t)(cour_params.rx_size - x->q->rxe_pool.in_use) : 1;
}

static ssize_t cour_sep_ctx_tx_left(struct fid_ep *ep_fid)
{
	struct cour_sep_ctx *x = cour_ep_ctx_of(ep_fid);

	return x->rx ? 0 : (ssize_t)(cour_params.tx_size - x->sep->pep.tx_outstanding);
}

static int cour_sep_ctx_open(struct fid_ep *sep_fid, int index, bool rx, uint64_t op_flags,
			     struct fid_ep **out, void *context)
{
	struct cour_ep *ep = COUR_CONTAINER_OF(sep_fid, struct cour_ep, ep_fid);
	int n = rx ? ep->nrx : ep->ntx;
	struct cour_sep_ctx **slot, *x;
	int ret = 0;

	if (!out || index < 0 || index >= n) {
		COUR_WARN(FI_LOG_EP_CTRL, "%s context %d: this scalable endpoint has %d\n",
			  rx ? "receive" : "transmit", index, n);
		return -FI_EINVAL;
	}
	x = calloc(1, sizeof(*x));
	if (!x)
		return -FI_ENOMEM;
	x->sep = ep;
	x->index = index;
	x->rx = rx;
	x->op_flags = op_flags;
	x->ep_fid.fid.fclass = rx ? FI_CLASS_RX_CTX : FI_CLASS_TX_CTX;
	x->ep_fid.fid.context = context;
	x->ep_fid.fid.ops = &cour_sep_ctx_fi_ops;
	x->ep_fid.ops = &cour_sep_ctx_ep_ops;
	x->ep_fid.msg = &cour_msg_ops;
	x->ep_fid.tagged = &cour_tagged_ops;
	x->ep_fid.rma = &cour_rma_ops;
	x->ep_fid.atomic = &cour_atomic_ops;

	cour_lock_acquire(&ep->domain->lock);
	slot = rx ? &ep->rx_ctx[index] : &ep->tx_ctx[index];
	if (*slot) {
		COUR_WARN(FI_LOG_EP_CTRL, "%s context %d is already open\n",
			  rx ? "receive" : "transmit", index);
		ret = -FI_EBUSY;
	} else if (rx) {
		ret = cour_pep_rxq_open(&ep->pep, (uint32_t)index, &x->q);
		if (!ret) {
			x->q->owner = x;
			x->q->closed = false;
		}
	}
	if (!ret)
		*slot = x;
	cour_lock_release(&ep->domain->lock);
	if (ret) {
		free(x);
		return ret;
	}
	cour_ref_inc(&ep->refcnt);
	*out = &x->ep_fid;
	return 0;
}

static int cour_sep_tx_ctx(struct fid_ep *sep, int index, struct fi_tx_attr *attr,
			   struct fid_ep **tx_ep, void *context)
{
	struct cour_ep *ep = COUR_CONTAINER_OF(sep, struct cour_ep, ep_fid);

	return cour_sep_ctx_open(sep, index, false,
				 attr ? attr->op_flags : ep->pep.tx_op_flags, tx_ep, context);
}

static int cour_sep_rx_ctx(struct fid_ep *sep, int index, struct fi_rx_attr *attr,
			   struct fid_ep **rx_ep, void *context)
{
	struct cour_ep *ep = COUR_CONTAINER_OF(sep, struct cour_ep, ep_fid);

	return cour_sep_ctx_open(sep, index, true,
				 attr ? attr->op_flags : ep->pep.rx_op_flags, rx_ep, context);
}

/* ---- the scalable endpoint ---- */

static int cour_sep_no_tx_ctx(struct fid_ep *ep, int index, struct fi_tx_attr *attr,
			      struct fid_ep **tx_ep, void *context)
{
	return -FI_ENOSYS;
}

static int cour_sep_no_rx_ctx(struct fid_ep *ep, int index, struct fi_rx_attr *attr,
			      struct fid_ep **rx_ep, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t cour_sep_no_cancel(fid_t fid, void *context)
{
	return -FI_ENOENT;      /* nothing is ever posted on the endpoint itself */
}

static ssize_t cour_sep_no_size_left(struct fid_ep *ep)
{
	return -FI_EOPNOTSUPP;
}

static int cour_sep_close(struct fid *fid)
{
	struct cour_ep *ep = COUR_CONTAINER_OF(fid, struct cour_ep, ep_fid.fid);
	int ret = cour_ep_close_common(ep);   /* refuses while a context is open */

	return ret;
}

static int cour_sep_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct cour_ep *ep = COUR_CONTAINER_OF(fid, struct cour_ep, ep_fid.fid);

	if (!bfid || bfid->fclass != FI_CLASS_AV) {
		COUR_WARN(FI_LOG_EP_CTRL, "a scalable endpoint binds an AV; CQs and counters "
			  "bind to its contexts\n");
		return -FI_EINVAL;
	}
	return cour_ep_bind_common(ep, bfid, flags);
}

static int cour_sep_control(struct fid *fid, int command, void *arg)
{
	struct cour_ep *ep = COUR_CONTAINER_OF(fid, struct cour_ep, ep_fid.fid);

	if (command == FI_ENABLE)
		return cour_ep_enable_common(ep);
	return -FI_ENOSYS;
}

int cour_sep_open(struct fid_domain *domain, struct fi_info *info, struct fid_ep **sep,
		  void *context)
{
	struct cour_ep *ep;
	struct fid_ep *f;
	size_t ntx, nrx;
	int ret;

	if (!info || !info->ep_attr || info->ep_attr->type != FI_EP_RDM) {
		COUR_WARN(FI_LOG_EP_CTRL, "scalable endpoints are FI_EP_RDM endpoints\n");
		return -FI_EINVAL;
	}
	ntx = info->ep_attr->tx_ctx_cnt ? info->ep_attr->tx_ctx_cnt : 1;
	nrx = info->ep_attr->rx_ctx_cnt ? info->ep_attr->rx_ctx_cnt : 1;
	if (ntx > COUR_SEP_MAX_CTX || nrx > COUR_SEP_MAX_CTX) {
		COUR_WARN(FI_LOG_EP_CTRL, "%zu transmit and %zu receive contexts: at most %d of "
			  "each (not FI_SHARED_CONTEXT)\n", ntx, nrx, COUR_SEP_MAX_CTX);
		return -FI_EINVAL;
	}
	ret = cour_ep_open_common(domain, info, &f, context, true);
	if (ret)
		return ret;
	ep = COUR_CONTAINER_OF(f, struct cour_ep, ep_fid);
	ep->ntx = (int)ntx;
	ep->nrx = (int)nrx;
	ep->tx_ctx = calloc(ntx, sizeof(*ep->tx_ctx));
	ep->rx_ctx = calloc(nrx, sizeof(*ep->rx_ctx));
	ep->pep.rxqs = calloc(nrx, sizeof(*ep->pep.rxqs));
	if (!ep->tx_ctx || !ep->rx_ctx || !ep->pep.rxqs) {
		fi_close(&f->fid);
		return -FI_ENOMEM;
	}
	ep->pep.nrxq = (uint32_t)nrx;
	ep->ep_fid.fid.fclass = FI_CLASS_SEP;
	ep->ep_fid.fid.ops = &cour_sep_fi_ops;
	ep->ep_fid.ops = &cour_sep_ep_ops;
	*sep = f;
	return 0;
}

struct fi_ops cour_sep_ctx_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = cour_sep_ctx_close,
	.bind = cour_sep_ctx_bind,
	.control = cour_sep_ctx_control,
	.ops_open = cour_no_ops_open,
	.tostr = cour_no_tostr,
	.ops_set = cour_no_ops_set,
};

static struct fi_ops_ep cour_sep_ctx_ep_ops = {
	.size = sizeof(struct fi_ops_ep),
	.cancel = cour_sep_ctx_cancel,
	.getopt = cour_sep_ctx_getopt,
	.setopt = cour_sep_ctx_setopt,
	.tx_ctx = cour_sep_no_tx_ctx,
	.rx_ctx = cour_sep_no_rx_ctx,
	.rx_size_left = cour_sep_ctx_rx_left,
	.tx_size_left = cour_sep_ctx_tx_left,
};

struct fi_ops cour_sep_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = cour_sep_close,
	.bind = cour_sep_bind,
	.control = cour_sep_control,
	.ops_open = cour_no_ops_open,
	.tostr = cour_no_tostr,
	.ops_set = cour_no_ops_set,
};

static struct fi_ops_ep cour_sep_ep_ops = {
	.size = sizeof(struct fi_ops_ep),
	.cancel = cour_sep_no_cancel,
	.getopt = cour_ep_getopt_fid,
	.setopt = cour_ep_setopt_fid,
	.tx_ctx = cour_sep_tx_ctx,
	.rx_ctx = cour_sep_rx_ctx,
	.rx_size_left = cour_sep_no_size_left,
	.tx_size_left = cour_sep_no_size_left,
};
