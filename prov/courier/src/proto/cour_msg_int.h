/*
 * Shared between the two halves of messaging: cour_msg_proto.c (packets in) and
 * cour_msg_post.c (application calls). Lock held for all of them.
 */
#ifndef COUR_MSG_INT_H
#define COUR_MSG_INT_H

#include "proto/cour_engine.h"

void cour_msg_report_rx(struct cour_pep *ep, struct cour_rxe *rxe, uint64_t flags, size_t len,
			size_t olen, void *buf, uint64_t tag, uint64_t data, fi_addr_t src,
			int err, int prov_errno);
/*
 * A directed receive for want takes a message from src (the fi_addr_t its peer reverse-maps
 * to): the same fi_addr_t, or another insertion of the same address. The AV gives every
 * insertion of an address its own fi_addr_t (cour_av.c) and a peer reports one of them, while
 * the application may post with any: Open MPI inserts the remote group again in
 * MPI_Intercomm_create and receives from it by the new fi_addr_t.
 */
static inline bool cour_msg_src_match(struct cour_pep *ep, fi_addr_t want, fi_addr_t src)
{
	if (want == FI_ADDR_UNSPEC || want == src)
		return true;
	return src != FI_ADDR_NOTAVAIL && ep->up->av_same(ep, want, src);
}
struct cour_rxe *cour_msg_find_rxe(struct cour_pep *ep, bool tagged, uint64_t tag, fi_addr_t src);
/* May a new message from peer take a plain posted receive without a record of its own
 * (cour_msg_short_posted), or be read into it before it is matched (cour_msg_place.c)? Not
 * on receive contexts, behind RMA to order, inside another message, or with grants open. */
static inline bool cour_msg_plain_path(const struct cour_peer *peer,
				       const struct cour_pkt_hdr *hdr)
{
	return !(peer->ep->nrxq || peer->ctrlq || peer->rx_cur || peer->grants_open ||
		 (hdr->base.flags & COUR_F_RXCTX));
}
static inline struct cour_rxe **cour_rxq(struct cour_pep *ep, bool tagged)
{
	return tagged ? &ep->rxq->tag : &ep->rxq->msg;
}
/* m was unexpected (already off its queue): give it rxe and finish what can be finished. */
/* true: rxe is retired (consumed, or a full multi-receive): it may be gone, do not touch it */
bool cour_msg_bind_unexp(struct cour_pep *ep, struct cour_rxmsg *m, struct cour_rxe *rxe);
/* a datagram, described by m on the caller's stack, into rxe */
void cour_msg_bind_dgram(struct cour_pep *ep, struct cour_rxmsg *m, struct cour_rxe *rxe,
			 const char *payload, fi_addr_t src);
/* a matched message that will never finish: its receive completes with err */
void cour_msg_fail_matched(struct cour_pep *ep, struct cour_rxmsg *m, int err, int prov_errno);
/* drop an unexpected message; consumed: the application discarded it (credit goes back,
 * and a rendezvous sender is told to send nothing) rather than its session dying */
void cour_msg_discard(struct cour_pep *ep, struct cour_rxmsg *m, bool consumed);

/* Rendezvous receives waiting for RDATA, found by rx_id; each peer counts its own so that its
 * timers know to watch it for liveness. */
static inline void cour_rdv_add(struct cour_pep *ep, struct cour_rxmsg *m)
{
	HASH_ADD(hh, ep->rdv_by_id, rx_id, sizeof(m->rx_id), m);
	m->peer->rx_rdv_pending++;
	m->peer->rx_split_pending += m->split != 0;
}

static inline void cour_rdv_del(struct cour_pep *ep, struct cour_rxmsg *m)
{
	HASH_DEL(ep->rdv_by_id, m);
	m->peer->rx_rdv_pending--;
	m->peer->rx_split_pending -= m->split != 0;
}

/* credits of received messages (cour_credit.c) */
void cour_msg_credit_return(struct cour_peer *peer, const struct cour_rxmsg *m);
size_t cour_unexp_cost(const struct cour_rxmsg *m);
bool cour_unexp_affordable(const struct cour_pep *ep, size_t bytes);
void cour_unexp_add(struct cour_peer *peer, struct cour_rxmsg *m);
void cour_unexp_settle(struct cour_pep *ep, struct cour_rxmsg *m);

#endif
