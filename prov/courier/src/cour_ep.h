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

static inline struct cour_ep *cour_ep_of(struct fid_ep *ep_fid)
{
	return COUR_CONTAINER_OF(ep_fid, struct cour_ep, ep_fid);
}

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
