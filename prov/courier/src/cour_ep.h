/*
 * The endpoint object: libfabric's fid_ep, its bindings (CQs, counters, AV), and the protocol
 * engine's endpoint it wraps (struct cour_pep, proto/cour_engine.h, where the reliability,
 * session and credit designs are written down).
 */
#ifndef COUR_EP_H
#define COUR_EP_H

#include "cour.h"
#include "cour_av.h"
#include "cour_cq.h"
#include "cour_cm.h"
#include "proto/cour_engine.h"

struct cour_ep {
	struct fid_ep        ep_fid;
	struct cour_domain  *domain;
	struct fi_info      *info;
	int                  refcnt;

	struct cour_cq      *tx_cq, *rx_cq;
	bool                 tx_selective, rx_selective;
	struct cour_cntr    *send_cntr, *recv_cntr;
	struct cour_cntr    *read_cntr, *write_cntr;        /* initiated RMA and atomics */
	struct cour_cntr    *rmt_read_cntr, *rmt_write_cntr; /* as the target (FI_RMA_EVENT) */
	struct cour_av      *av;
	struct cour_conn     conn;            /* FI_EP_MSG: the connection (cour_cm.h) */
	struct fid          *srx_fid, *stx_fid;  /* shared contexts bound (cour_srx.c) */

	struct cour_pep      pep;             /* the protocol engine's endpoint */
};

/* fi_ep_alias: the same endpoint with its own default operation flags (cour_ep.c). */
struct cour_ep_alias {
	struct fid_ep        ep_fid;
	struct cour_ep      *ep;
	uint64_t             tx_op_flags, rx_op_flags;
};
extern struct fi_ops cour_ep_alias_fi_ops;

static inline bool cour_ep_is_alias(const struct fid_ep *ep_fid)
{
	return COUR_UNLIKELY(ep_fid->fid.ops == &cour_ep_alias_fi_ops);
}

/* The endpoint behind an endpoint or one of its aliases (data transfer calls take both). */
static inline struct cour_ep *cour_ep_of(struct fid_ep *ep_fid)
{
	if (cour_ep_is_alias(ep_fid))
		return COUR_CONTAINER_OF(ep_fid, struct cour_ep_alias, ep_fid)->ep;
	return COUR_CONTAINER_OF(ep_fid, struct cour_ep, ep_fid);
}

/* The default flags of a transfer posted through ep_fid (an alias has its own). */
static inline uint64_t cour_ep_tx_flags(struct fid_ep *ep_fid)
{
	if (cour_ep_is_alias(ep_fid))
		return COUR_CONTAINER_OF(ep_fid, struct cour_ep_alias, ep_fid)->tx_op_flags;
	return COUR_CONTAINER_OF(ep_fid, struct cour_ep, ep_fid)->pep.tx_op_flags;
}

static inline uint64_t cour_ep_rx_flags(struct fid_ep *ep_fid)
{
	if (cour_ep_is_alias(ep_fid))
		return COUR_CONTAINER_OF(ep_fid, struct cour_ep_alias, ep_fid)->rx_op_flags;
	return COUR_CONTAINER_OF(ep_fid, struct cour_ep, ep_fid)->pep.rx_op_flags;
}

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

/* How the engine reports to an endpoint object (cour_ep.c); FI_EP_MSG endpoints' own. */
extern const struct cour_up_ops cour_ep_up, cour_ep_msg_up;

#endif
