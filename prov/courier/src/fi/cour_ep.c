/*
 * Endpoints: opening, enabling and closing the fid_ep object, and how the engine reports to it
 * (struct cour_up_ops: finished sends and receives, target events). The calls on an open
 * endpoint (bind, names, options, cancel, fi_control, aliases) are in cour_ep_ctrl.c, the
 * statistics extension in cour_ep_stats.c.
 */
#include "cour_ep.h"
#include "cour_attr.h"
#include "cour_mr.h"

#include <stdlib.h>

#define COUR_MIN_MULTI_RECV_DEFAULT 64

extern struct fi_ops_msg cour_msg_ops;
extern struct fi_ops_tagged cour_tagged_ops;
extern struct fi_ops_rma cour_no_rma_ops, cour_rma_ops;
extern struct fi_ops_atomic cour_no_atomic_ops, cour_atomic_ops;

/* ---- what the engine reports (struct cour_up_ops) ---- */

static void cour_ep_tx_done(struct cour_pep *pep, const struct cour_txe *txe, int err,
			    int prov_errno)
{
	struct cour_ep *ep = cour_ep_of_pep(pep);
	struct cour_txe whole;

	/* one part of an RMA with several remote iovecs: the whole completes with the last */
	if (COUR_UNLIKELY(txe->group)) {
		if (!cour_rma_group_done(txe, &whole, &err, &prov_errno))
			return;
		txe = &whole;
	}
	const struct cour_sink *b = txe->owner ? cour_sep_ctx_sink(txe->owner) : &ep->b;
	struct cour_cq_entry e = {
		.op_context = txe->context,
		.flags = txe->cq_flags & ~COUR_CQF_NOCOMP,
		.len = err ? txe->msg_len : 0,
		.src = FI_ADDR_NOTAVAIL,
		.tag = err ? txe->tag : 0,
	};

	/* fi_cntr(3): reads and fetching atomics count as reads, writes and plain atomics as
	 * writes, messages as sends */
	struct cour_cntr *cntr = (txe->cq_flags & FI_READ) ? b->read_cntr :
				 (txe->cq_flags & FI_WRITE) ? b->write_cntr : b->send_cntr;

	if (err) {
		/* errors are reported even for inject and unsignalled sends */
		if (b->tx_cq)
			cour_cq_write_err_locked(b->tx_cq, &e, err, prov_errno, 0);
		if (cntr)
			cour_cntr_inc_err_locked(cntr);
		return;
	}
	if (b->tx_cq && !(txe->cq_flags & COUR_CQF_NOCOMP) &&
	    (!b->tx_selective || (txe->op_flags & FI_COMPLETION)))
		cour_cq_write_locked(b->tx_cq, &e);
	if (cntr)
		cour_cntr_inc_locked(cntr);
}

static void cour_ep_rx_done(struct cour_pep *pep, const struct cour_rxq *q,
			    const struct cour_cq_entry *e, uint64_t op_flags, int err,
			    int prov_errno, size_t olen)
{
	struct cour_ep *ep = cour_ep_of_pep(pep);
	const struct cour_sink *b = q && q->owner ? cour_sep_ctx_sink(q->owner) : &ep->b;

	if (COUR_UNLIKELY(q && q->closed))
		return;         /* its receive context was closed: nobody reads its completions */
	if (err) {
		if (b->rx_cq)
			cour_cq_write_err_locked(b->rx_cq, e, err, prov_errno, olen);
		if (b->recv_cntr)
			cour_cntr_inc_err_locked(b->recv_cntr);
		return;
	}
	if (b->rx_cq && (!b->rx_selective || (op_flags & FI_COMPLETION)))
		cour_cq_write_locked(b->rx_cq, e);
	if (b->recv_cntr)
		cour_cntr_inc_locked(b->recv_cntr);
}

/* The endpoint's remote counters and the region's counter each move once for one event,
 * even when one counter is bound for both FI_REMOTE_READ and FI_REMOTE_WRITE. */
static void cour_ep_target_done(struct cour_pep *pep, struct cour_region *r, uint64_t events,
				const struct cour_cq_entry *cq_data)
{
	struct cour_ep *ep = cour_ep_of_pep(pep);
	/* a scalable endpoint's target events go to its receive context 0 */
	const struct cour_sink *b = pep->nrxq && pep->rxqs[0] && pep->rxqs[0]->owner ?
				    cour_sep_ctx_sink(pep->rxqs[0]->owner) : &ep->b;
	struct cour_cntr *w = (events & FI_REMOTE_WRITE) ? b->rmt_write_cntr : NULL;
	struct cour_cntr *rd = (events & FI_REMOTE_READ) ? b->rmt_read_cntr : NULL;

	if (w)
		cour_cntr_inc_locked(w);
	if (rd && rd != w)
		cour_cntr_inc_locked(rd);
	if (r && (r->counted & events))
		cour_cntr_inc_locked(cour_mr_of_region(r)->cntr);
	if (cq_data && b->rx_cq)
		cour_cq_write_locked(b->rx_cq, cq_data);
}

static const struct cour_addr *cour_ep_av_lookup(struct cour_pep *pep, fi_addr_t fi_addr)
{
	struct cour_ep *ep = cour_ep_of_pep(pep);

	return ep->av ? cour_av_lookup_locked(ep->av, fi_addr) : NULL;
}

static fi_addr_t cour_ep_av_reverse(struct cour_pep *pep, const struct cour_addr *addr)
{
	struct cour_ep *ep = cour_ep_of_pep(pep);

	return ep->av ? cour_av_reverse_locked(ep->av, addr) : FI_ADDR_NOTAVAIL;
}

static bool cour_ep_av_same(struct cour_pep *pep, fi_addr_t a, fi_addr_t b)
{
	struct cour_ep *ep = cour_ep_of_pep(pep);

	return ep->av && cour_av_same_locked(ep->av, a, b);
}

static void cour_ep_domain_progress(struct cour_pep *pep)
{
	cour_domain_progress_locked(cour_ep_of_pep(pep)->domain);
}

const struct cour_up_ops cour_ep_up = {
	.tx_done = cour_ep_tx_done,
	.rx_done = cour_ep_rx_done,
	.target_done = cour_ep_target_done,
	.av_lookup = cour_ep_av_lookup,
	.av_reverse = cour_ep_av_reverse,
	.av_same = cour_ep_av_same,
	.progress = cour_ep_domain_progress,
};

/* A connected endpoint has no AV: every address names its one peer (fi_addr 0) */
static const struct cour_addr *cour_ep_msg_lookup(struct cour_pep *pep, fi_addr_t fi_addr)
{
	return cour_cm_peer(&cour_ep_of_pep(pep)->conn);
}

static fi_addr_t cour_ep_msg_reverse(struct cour_pep *pep, const struct cour_addr *addr)
{
	return cour_cm_reverse(&cour_ep_of_pep(pep)->conn, addr);
}

static bool cour_ep_msg_same(struct cour_pep *pep, fi_addr_t a, fi_addr_t b)
{
	return true;
}

const struct cour_up_ops cour_ep_msg_up = {
	.tx_done = cour_ep_tx_done,
	.rx_done = cour_ep_rx_done,
	.target_done = cour_ep_target_done,
	.av_lookup = cour_ep_msg_lookup,
	.av_reverse = cour_ep_msg_reverse,
	.av_same = cour_ep_msg_same,
	.progress = cour_ep_domain_progress,
	.cm_rx = cour_cm_rx,
	.cm_tick = cour_cm_tick,
	.peer_lost = cour_cm_peer_lost,
	.cm_refused = cour_cm_refused,
};

/* ---- enable, close and open ---- */

int cour_ep_enable_common(struct cour_ep *ep)
{
	struct cour_domain *dom = ep->domain;
	uint64_t caps = ep->info->caps;

	if (ep->pep.enabled)
		return 0;
	if (ep->pep.type == FI_EP_MSG && !ep->conn.eq) {
		COUR_WARN(FI_LOG_EP_CTRL, "fi_enable: no EQ bound to a connected endpoint\n");
		return -FI_ENOEQ;
	}
	if (!ep->av && ep->pep.type != FI_EP_MSG) {
		COUR_WARN(FI_LOG_EP_CTRL, "fi_enable: no address vector bound\n");
		return -FI_ENOAV;
	}
	if (ep->ntx || ep->nrx)
		;       /* a scalable endpoint: its contexts have the bindings */
	else if (((caps & FI_SEND) || !(caps & (FI_SEND | FI_RECV))) && !ep->b.tx_cq &&
		 !ep->b.send_cntr) {
		COUR_WARN(FI_LOG_EP_CTRL, "fi_enable: no transmit CQ or counter bound\n");
		return -FI_ENOCQ;
	}
	if (!ep->ntx && !ep->nrx &&
	    ((caps & FI_RECV) || !(caps & (FI_SEND | FI_RECV))) && !ep->b.rx_cq &&
	    !ep->b.recv_cntr) {
		COUR_WARN(FI_LOG_EP_CTRL, "fi_enable: no receive CQ or counter bound\n");
		return -FI_ENOCQ;
	}
	cour_lock_acquire(&dom->lock);
	DL_APPEND2(dom->pdom.peps, &ep->pep, pdom_prev, pdom_next);
	ep->pep.enabled = true;
	(void)cour_wire_bell_arm(&ep->pep.wire);        /* the thread reads enabled ones */
	cour_rma_push_offer_all(&ep->pep);
	cour_lock_release(&dom->lock);
	cour_domain_kick(dom);
	return 0;
}

/*
 * Data accepted is data delivered: an inject that returned, or a send the application did
 * not wait for, still goes out after fi_close (MPICH finalizes right after its injects).
 * Progress until every peer has taken everything (or was found dead, which fails it), at
 * most linger_ms; what is left then is logged with its peer and counted.
 */
static bool cour_ep_tx_pending(const struct cour_ep *ep)
{
	struct cour_peer *peer, *tmp;

	HASH_ITER(hh, ep->pep.peers, peer, tmp)
		if (cour_peer_tx_pending(peer))
			return true;
	return false;
}

static void cour_ep_linger(struct cour_ep *ep)
{
	struct cour_domain *dom = ep->domain;
	uint64_t deadline = cour_now_us() + (uint64_t)cour_params.linger_ms * 1000;
	struct cour_peer *peer, *tmp;
	char str[80], me[80];

	if (!cour_ep_tx_pending(ep))
		return;
	ep->pep.stats.linger_waits++;
	for (;;) {
		if (cour_now_us() >= deadline)
			break;
		cour_domain_progress_locked(dom);
		if (!cour_ep_tx_pending(ep))
			return;
		cour_lock_release(&dom->lock);
		cour_domain_wait(dom, -1, 10);
		cour_lock_acquire(&dom->lock);
	}
	HASH_ITER(hh, ep->pep.peers, peer, tmp) {
		size_t n = cour_peer_tx_pending(peer);

		if (!n)
			continue;
		ep->pep.stats.linger_lost += n;
		COUR_WARN(FI_LOG_EP_CTRL, "endpoint %s closed with %zu operation(s) to %s not "
			  "delivered after FI_COURIER_LINGER=%d ms: they are lost\n",
			  cour_addr_str(&ep->pep.wire.addr, me, sizeof(me)), n,
			  cour_addr_str(&peer->addr, str, sizeof(str)), cour_params.linger_ms);
	}
}

int cour_ep_close(struct fid *fid)
{
	return cour_ep_close_common(COUR_CONTAINER_OF(fid, struct cour_ep, ep_fid.fid));
}

int cour_ep_close_common(struct cour_ep *ep)
{
	struct cour_domain *dom = ep->domain;

	/* FI_MR_ENDPOINT regions bound to us (cour_mr.c), aliases and a scalable endpoint's
	 * contexts hold a reference: they close first */
	if (cour_ref_get(&ep->refcnt) > 0) {
		COUR_WARN(FI_LOG_EP_CTRL, "endpoint still used by %d memory region(s), aliases "
			  "or contexts\n", cour_ref_get(&ep->refcnt));
		return -FI_EBUSY;
	}
	cour_lock_acquire(&dom->lock);
	cour_trig_drop_ep_locked(dom, ep);
	if (ep->pep.enabled) {
		cour_ep_linger(ep);
		DL_DELETE2(dom->pdom.peps, &ep->pep, pdom_prev, pdom_next);
	}
	if (ep->pep.type == FI_EP_MSG)
		cour_cm_ep_close(ep);     /* after the linger: the data goes first */
	ep->pep.enabled = false;
	cour_peer_free_all(&ep->pep);
	cour_msg_ep_close(&ep->pep);
	if (cour_params.stats)
		cour_ep_print_stats(ep);
	cour_shm_ep_close(&ep->pep);
	ep->pep.wire.ops->close(&ep->pep.wire);
	cour_sink_release(&ep->b);
	if (ep->av)
		cour_ref_dec(&ep->av->refcnt);
	cour_srx_unbind(ep);
	cour_lock_release(&dom->lock);

	cour_pep_free(&ep->pep);
	fi_freeinfo(ep->info);
	cour_ref_dec(&dom->refcnt);
	free(ep->tx_ctx);
	free(ep->rx_ctx);
	free(ep);
	return 0;
}

int cour_ep_open(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep_fid,
		 void *context)
{
	return cour_ep_open_common(domain, info, ep_fid, context, false);
}

int cour_ep_open_common(struct fid_domain *domain, struct fi_info *info,
			struct fid_ep **ep_fid, void *context, bool scalable)
{
	struct cour_domain *dom = COUR_CONTAINER_OF(domain, struct cour_domain, domain_fid);
	struct cour_addr want;
	struct cour_ep *ep;
	int ret;

	/* an info edited after fi_getinfo may ask for what courier does not do: say so now */
	ret = cour_info_check(info);
	if (ret)
		return ret;
	ret = cour_attr_bind_addr(info, &want);
	if (ret)
		return ret;
	if (!scalable && info->ep_attr &&
	    ((info->ep_attr->tx_ctx_cnt > 1 && info->ep_attr->tx_ctx_cnt != FI_SHARED_CONTEXT) ||
	     (info->ep_attr->rx_ctx_cnt > 1 && info->ep_attr->rx_ctx_cnt != FI_SHARED_CONTEXT))) {
		COUR_WARN(FI_LOG_EP_CTRL, "fi_endpoint with %zu transmit and %zu receive contexts: "
			  "more than one is a scalable endpoint (fi_scalable_ep)\n",
			  info->ep_attr->tx_ctx_cnt, info->ep_attr->rx_ctx_cnt);
		return -FI_EINVAL;
	}
	ep = calloc(1, sizeof(*ep));
	if (!ep)
		return -FI_ENOMEM;
	ep->info = fi_dupinfo(info);
	if (!ep->info) {
		free(ep);
		return -FI_ENOMEM;
	}
	ep->domain = dom;
	ep->pep.type = info->ep_attr->type;
	ep->pep.caps = info->caps;
	ep->pep.tx_op_flags = info->tx_attr ? info->tx_attr->op_flags : 0;
	ep->pep.rx_op_flags = info->rx_attr ? info->rx_attr->op_flags : 0;
	ep->pep.min_multi_recv = COUR_MIN_MULTI_RECV_DEFAULT;
	if (info->ep_attr->type == FI_EP_MSG && info->handle &&
	    info->handle->fclass == FI_CLASS_PEP) {
		ret = cour_cm_pep_give_addr(info->handle, &want);
		if (ret)
			goto err_free;
	} else if (info->ep_attr->type == FI_EP_MSG && info->handle &&
		   cour_cm_ep_from_request(&ep->conn, info->handle)) {
		COUR_WARN(FI_LOG_EP_CTRL, "info->handle is no pending connection request\n");
		ret = -FI_EINVAL;
		goto err_free;
	}
	if (info->ep_attr->type == FI_EP_MSG) {
		ep->pep.av_gen = &ep->conn.gen;
		if (ep->conn.conn_id)      /* accepting: share the listener's port */
			ep->pep.wire_peer = &ep->conn.peer;
	}
	/* its own secret, else the domain's (read by cour_pep_open only) */
	if (info->ep_attr->auth_key_size) {
		ret = cour_auth_key_ok(info->ep_attr->auth_key_size, "ep_attr->auth_key");
		if (ret)
			goto err_free;
		ep->pep.auth_key = info->ep_attr->auth_key;
		ep->pep.auth_key_len = info->ep_attr->auth_key_size;
	} else {
		ep->pep.auth_key = dom->auth_key;
		ep->pep.auth_key_len = dom->auth_key_len;
	}
	ret = cour_pep_open(&ep->pep, &dom->pdom,
			    info->ep_attr->type == FI_EP_MSG ? &cour_ep_msg_up : &cour_ep_up, &want);
	ep->pep.auth_key = NULL;
	if (ret)
		goto err_free;

	ep->ep_fid.fid.fclass = FI_CLASS_EP;
	ep->ep_fid.fid.context = context;
	ep->ep_fid.fid.ops = &cour_ep_fi_ops;
	ep->ep_fid.ops = &cour_ep_ops;
	ep->ep_fid.cm = ep->pep.type == FI_EP_MSG ? &cour_msg_cm_ops : &cour_cm_ops;
	ep->ep_fid.msg = &cour_msg_ops;   /* the generic path tells RDM from DGRAM */
	ep->ep_fid.tagged = &cour_tagged_ops;
	/* one-sided operations need the reliable engine */
	ep->ep_fid.rma = ep->pep.type != FI_EP_DGRAM ? &cour_rma_ops : &cour_no_rma_ops;
	ep->ep_fid.atomic = ep->pep.type != FI_EP_DGRAM ? &cour_atomic_ops : &cour_no_atomic_ops;
	cour_ref_inc(&dom->refcnt);
	*ep_fid = &ep->ep_fid;
	return 0;

err_free:
	fi_freeinfo(ep->info);
	free(ep);
	return ret;
}
