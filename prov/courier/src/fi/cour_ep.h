/*
 * The endpoint object: libfabric's fid_ep, its bindings (CQs, counters, AV), and the protocol
 * engine's endpoint it wraps (struct cour_pep, proto/cour_pep.h; the reliability, session and
 * credit designs are written down in proto/cour_engine.h).
 */
#ifndef COUR_EP_H
#define COUR_EP_H

#include "cour_fi.h"
#include "cour_av.h"
#include "cour_cq.h"
#include "cour_cm.h"
#include "cour_attr.h"
#include "proto/cour_engine.h"

/* Where completions go: an endpoint's bindings, or a scalable endpoint context's. */
struct cour_sink {
	struct cour_cq      *tx_cq, *rx_cq;
	bool                 tx_selective, rx_selective;
	struct cour_cntr    *send_cntr, *recv_cntr;
	struct cour_cntr    *read_cntr, *write_cntr;        /* initiated RMA and atomics */
	struct cour_cntr    *rmt_read_cntr, *rmt_write_cntr; /* as the target (FI_RMA_EVENT) */
};

/* Bindings on a sink (cour_ep_ctrl.c), for endpoints and scalable endpoint contexts alike.
 * Lock held. 0 or -FI_*. */
int  cour_sink_bind_cq(struct cour_sink *b, struct cour_domain *dom, struct cour_cq *cq,
		       uint64_t flags);
int  cour_sink_bind_cntr(struct cour_sink *b, enum fi_ep_type type, struct cour_cntr *cntr,
			 uint64_t flags);
void cour_sink_release(struct cour_sink *b);

struct cour_sep_ctx;
struct cour_sink *cour_sep_ctx_sink(void *ctx);

struct cour_ep {
	struct fid_ep        ep_fid;
	struct cour_domain  *domain;
	struct fi_info      *info;
	int                  refcnt;

	struct cour_sink     b;
	struct cour_av      *av;
	struct cour_conn     conn;            /* FI_EP_MSG: the connection (cour_cm.h) */
	struct fid          *srx_fid, *stx_fid;  /* shared contexts bound (cour_srx.c) */
	/* a scalable endpoint (cour_sep.c): its contexts by index, NULL where none is open */
	struct cour_sep_ctx **tx_ctx, **rx_ctx;
	int                  ntx, nrx;

	struct cour_pep      pep;             /* the protocol engine's endpoint */
};

/* fi_ep_alias: the same endpoint with its own default operation flags (cour_ep_ctrl.c). */
struct cour_ep_alias {
	struct fid_ep        ep_fid;
	struct cour_ep      *ep;
	uint64_t             tx_op_flags, rx_op_flags;
};
extern struct fi_ops cour_ep_alias_fi_ops;

/* A scalable endpoint's transmit or receive context (cour_sep.c): posts go through the
 * endpoint's engine, completions to the context's own bindings. */
struct cour_sep_ctx {
	struct fid_ep        ep_fid;
	struct cour_ep      *sep;
	int                  index;
	bool                 rx;              /* a receive context, else a transmit one */
	bool                 enabled;
	uint64_t             op_flags;
	struct cour_sink     b;
	struct cour_rxq     *q;               /* rx: its queue (the endpoint's: it outlives us) */
};
extern struct fi_ops cour_sep_ctx_fi_ops, cour_sep_fi_ops;

/* A post names an endpoint (the fast path), an alias, a scalable endpoint's context, or the
 * scalable endpoint itself (which takes no transfers). */
extern struct fi_ops cour_ep_fi_ops;

static inline bool cour_ep_is_plain(const struct fid_ep *ep_fid)
{
	return COUR_LIKELY(ep_fid->fid.ops == &cour_ep_fi_ops);
}

static inline struct cour_sep_ctx *cour_ep_ctx_of(struct fid_ep *ep_fid)
{
	return ep_fid->fid.ops == &cour_sep_ctx_fi_ops ?
	       COUR_CONTAINER_OF(ep_fid, struct cour_sep_ctx, ep_fid) : NULL;
}

/* The endpoint behind an endpoint, an alias or a context (data transfer calls take all). */
static inline struct cour_ep *cour_ep_of(struct fid_ep *ep_fid)
{
	if (COUR_UNLIKELY(!cour_ep_is_plain(ep_fid))) {
		if (ep_fid->fid.ops == &cour_ep_alias_fi_ops)
			return COUR_CONTAINER_OF(ep_fid, struct cour_ep_alias, ep_fid)->ep;
		if (ep_fid->fid.ops == &cour_sep_ctx_fi_ops)
			return COUR_CONTAINER_OF(ep_fid, struct cour_sep_ctx, ep_fid)->sep;
	}
	return COUR_CONTAINER_OF(ep_fid, struct cour_ep, ep_fid);
}

/* The default flags of a transfer posted through ep_fid (an alias or context has its own). */
static inline uint64_t cour_ep_tx_flags(struct fid_ep *ep_fid)
{
	if (COUR_UNLIKELY(!cour_ep_is_plain(ep_fid))) {
		if (ep_fid->fid.ops == &cour_ep_alias_fi_ops)
			return COUR_CONTAINER_OF(ep_fid, struct cour_ep_alias, ep_fid)->tx_op_flags;
		if (ep_fid->fid.ops == &cour_sep_ctx_fi_ops)
			return COUR_CONTAINER_OF(ep_fid, struct cour_sep_ctx, ep_fid)->op_flags;
	}
	return COUR_CONTAINER_OF(ep_fid, struct cour_ep, ep_fid)->pep.tx_op_flags;
}

static inline uint64_t cour_ep_rx_flags(struct fid_ep *ep_fid)
{
	if (COUR_UNLIKELY(!cour_ep_is_plain(ep_fid))) {
		if (ep_fid->fid.ops == &cour_ep_alias_fi_ops)
			return COUR_CONTAINER_OF(ep_fid, struct cour_ep_alias, ep_fid)->rx_op_flags;
		if (ep_fid->fid.ops == &cour_sep_ctx_fi_ops)
			return COUR_CONTAINER_OF(ep_fid, struct cour_sep_ctx, ep_fid)->op_flags;
	}
	return COUR_CONTAINER_OF(ep_fid, struct cour_ep, ep_fid)->pep.rx_op_flags;
}

/* Around a post (lock held): a context's routing set in the engine, fi_rx_addr bits taken
 * off *addr (the receive context they name goes to the peer). 0, or -FI_* when the post is
 * not allowed through ep_fid. cour_post_end undoes it. */
int  cour_post_begin_slow(struct cour_ep *ep, struct fid_ep *ep_fid, bool recv, fi_addr_t *addr);
static inline int cour_post_begin(struct cour_ep *ep, struct fid_ep *ep_fid, bool recv,
				  fi_addr_t *addr)
{
	if (COUR_LIKELY(cour_ep_is_plain(ep_fid) && (!ep->av || !ep->av->rx_ctx_bits)))
		return 0;
	return cour_post_begin_slow(ep, ep_fid, recv, addr);
}

/* Undo what cour_post_begin_slow, an RMA part or a triggered post set for one post. */
static inline void cour_post_end(struct cour_ep *ep)
{
	ep->pep.tx_owner = NULL;
	ep->pep.tx_rx_ctx = 0;
	ep->pep.tx_group = NULL;
	ep->pep.tx_part = false;
	ep->pep.tx_whole_len = 0;
	if (COUR_UNLIKELY(ep->pep.nrxq))
		ep->pep.rxq = &ep->pep.own_rxq;  /* a scalable endpoint rests on its own queue,
						  * empty: its contexts post to theirs */
}

/* RMA with several remote iovecs (cour_rma.c): one of its parts completed (err, prov_errno:
 * its result); true when it was the last, with the whole operation in *whole and its
 * result (the first error) in err, prov_errno. Lock held. */
struct cour_rma_group {
	void                *context;
	void                *owner;
	uint64_t             op_flags, cq_flags;
	uint32_t             left, total;
	int                  err, prov_errno;
};
bool cour_rma_group_done(const struct cour_txe *txe, struct cour_txe *whole, int *err,
			 int *prov_errno);
/* Posting the parts (lock held): begin (0, or -FI_* and nothing posted), then for each part
 * next() and posted() with the engine's result: 0 go on; 1 stop, the operation was taken
 * (a later part failed: the whole completes in error); < 0 stop, nothing was posted and
 * the group is freed: return that. */
struct cour_rma_group *cour_rma_group_new(void *context, uint64_t flags, uint64_t cq_flags,
					  size_t n);
int  cour_rma_parts_begin(struct cour_ep *ep, struct fid_ep *ep_fid, fi_addr_t *addr,
			  uint64_t flags, size_t n);
void cour_rma_part_next(struct cour_ep *ep, struct cour_rma_group *g, bool last,
			uint64_t whole_len);
int  cour_rma_part_posted(struct cour_rma_group *g, ssize_t ret, size_t j, size_t n);

/* fi_scalable_ep (cour_sep.c); and what a scalable endpoint's close must check and free */
int  cour_sep_open(struct fid_domain *domain, struct fi_info *info, struct fid_ep **sep,
		   void *context);
int  cour_ep_open_common(struct fid_domain *domain, struct fi_info *info,
			 struct fid_ep **ep_fid, void *context, bool scalable);
int  cour_ep_close_common(struct cour_ep *ep);
int  cour_ep_bind_common(struct cour_ep *ep, struct fid *bfid, uint64_t flags);
int  cour_ep_enable_common(struct cour_ep *ep);
int  cour_ep_getopt_fid(fid_t fid, int level, int optname, void *optval, size_t *optlen);
int  cour_ep_setopt_fid(fid_t fid, int level, int optname, const void *optval, size_t optlen);
/* What cour_ep.c (open, enable, close), cour_ep_ctrl.c (the calls on an open endpoint, and
 * the ops tables open installs) and cour_ep_stats.c take from one another */
int  cour_ep_close(struct fid *fid);
int  cour_ep_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops,
		      void *context);
void cour_ep_print_stats(struct cour_ep *ep);   /* FI_COURIER_STATS, at close; lock held */
extern struct fi_ops_ep cour_ep_ops;
/* fi_ops_cm of an FI_EP_MSG endpoint; of an RDM or DGRAM one (names only) */
extern struct fi_ops_cm cour_msg_cm_ops, cour_cm_ops;
/* A closing context's triggered operations that never fired go. Lock held. */
void cour_trig_drop_owner_locked(struct cour_domain *dom, const struct cour_sep_ctx *x);

/* ---- triggered operations (cour_trigger.c, fi_trigger(3)) ----
 * A transfer posted with FI_TRIGGER waits, its arguments copied, until its counter reaches
 * the threshold; then it is posted as if just called. What is waited for is one of these. */
enum cour_trig_kind { COUR_TRIG_SEND, COUR_TRIG_RECV, COUR_TRIG_RMA, COUR_TRIG_ATOMIC };
struct cour_trig_op {
	int                  kind;
	const struct iovec  *iov;             /* SEND, RECV, RMA */
	size_t               count;
	fi_addr_t            addr;
	uint64_t             tag, ignore, raddr, key, data, flags, cq_flags;
	uint8_t              rma_type;
	bool                 tagged;
	void                *context;
	struct cour_atomic_args atomic;       /* ATOMIC */
	/* the routing a post through a scalable endpoint's context had (cour_post_begin) */
	void                *tx_owner;
	uint32_t             tx_rx_ctx;
	struct cour_rxq     *rx_q;
};
/* Defer op (flags hold FI_TRIGGER, context a struct fi_triggered_context); posts it at once
 * when its counter is already there. Lock held. 0 or -FI_*. */
ssize_t cour_trig_defer_locked(struct cour_ep *ep, const struct cour_trig_op *op);
/* A counter's value changed: triggers it satisfied become ready. Lock held. */
void cour_trig_check_locked(struct cour_domain *dom, struct cour_cntr *c);
/* Post the ready ones (the engine is not in the middle of anything). Lock held. */
void cour_trig_fire_locked(struct cour_domain *dom);
/* The endpoint closes: its triggered operations that never fired go. Lock held. */
void cour_trig_drop_ep_locked(struct cour_domain *dom, struct cour_ep *ep);
/* Post op now (the trigger fired, or none was asked for). Lock held. */
ssize_t cour_trig_post_locked(struct cour_ep *ep, const struct cour_trig_op *op);

static inline struct cour_ep *cour_ep_of_pep(struct cour_pep *pep)
{
	return COUR_CONTAINER_OF(pep, struct cour_ep, pep);
}

/* Shared contexts (cour_srx.c): the domain's fi_srx_context and fi_stx_context, binding
 * one to an endpoint (lock held), and letting both go at the endpoint's close */
int cour_srx_ctx(struct fid_domain *domain, struct fi_rx_attr *attr, struct fid_ep **rx_ep,
		 void *context);
int cour_stx_ctx(struct fid_domain *domain, struct fi_tx_attr *attr, struct fid_stx **stx,
		 void *context);
int cour_srx_bind(struct cour_ep *ep, struct fid *bfid);
int cour_stx_bind(struct cour_ep *ep, struct fid *bfid);
void cour_srx_unbind(struct cour_ep *ep);

void cour_ep_update_target_events(struct cour_ep *ep);

/* How the engine reports to an endpoint object (cour_ep.c); FI_EP_MSG endpoints' own. */
extern const struct cour_up_ops cour_ep_up, cour_ep_msg_up;

#endif
