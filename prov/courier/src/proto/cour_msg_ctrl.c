/*
 * The engine's own messages (CTS, DONE and the other internal control txes) and the credits
 * of received messages: given back when the application consumes a message, or at once when an
 * unexpected message is buffered within FI_COURIER_UNEXP_MAX (so a sender never stalls behind
 * messages only unpostable receives would match).
 */
#include "proto/cour_engine.h"
#include "proto/cour_msg_int.h"

#include <stdlib.h>

/* ---- internal control messages (CTS, DONE) ---- */

void cour_send_ctrl(struct cour_peer *peer, uint8_t type, uint32_t msg_id, uint32_t rx_id,
		    uint64_t len)
{
	cour_send_ctrl_flags(peer, type, msg_id, rx_id, len, 0);
}

struct cour_txe *cour_ctrl_txe(struct cour_peer *peer, uint8_t type, uint32_t msg_id,
			       uint32_t rx_id, uint16_t flags)
{
	struct cour_txe *txe = cour_pool_get(&peer->ep->txe_pool);

	/* the txe pool has no cap (applications are held to tx_size by a count), so this
	 * only fails when malloc does */
	if (!txe) {
		COUR_WARN(FI_LOG_EP_DATA, "out of memory for a control message\n");
		return NULL;
	}
	memset(txe, 0, sizeof(*txe));   /* no payload: total_len 0 */
	txe->op_type = type;
	txe->msg_id = msg_id;
	txe->rx_id = rx_id;
	txe->hdr_flags = flags;
	return txe;
}

void cour_send_ctrl_flags(struct cour_peer *peer, uint8_t type, uint32_t msg_id,
			  uint32_t rx_id, uint64_t len, uint16_t flags)
{
	struct cour_txe *txe = cour_ctrl_txe(peer, type, msg_id, rx_id, flags);

	if (!txe)
		return;
	txe->msg_len = len;             /* CTS: the bytes the receiver accepts */
	cour_peer_enqueue(peer, txe);
}

/* A consumed message gives its credit back, unless it came in an earlier session of the
 * peer (complete unexpected messages outlive a reset): the new session never spent it. */
void cour_msg_credit_return(struct cour_peer *peer, const struct cour_rxmsg *m)
{
	if (m->session == peer->local_session && !m->credit_early)
		cour_peer_credit_return(peer);
}

/* What an unexpected message holds of ep->unexp_early while its credit is back. */
size_t cour_unexp_cost(const struct cour_rxmsg *m)
{
	return sizeof(*m) + (m->rts ? 0 : (size_t)m->total_len);
}

/*
 * An unexpected message that is buffered gives its credit back at once: a sender must never
 * stall behind messages that only receives the application has not posted yet would take
 * (MPI threads each posting after their sends; a sender that finalizes right after its
 * injects). Bounded by unexp_max bytes per endpoint: past it, credits come back only as
 * messages are received, which bounds the memory a flood of unexpected messages can take.
 */
void cour_unexp_credit_early(struct cour_peer *peer, struct cour_rxmsg *m)
{
	struct cour_pep *ep = peer->ep;
	size_t cost = cour_unexp_cost(m);

	if (m->nomem || ep->unexp_early + cost > cour_params.unexp_max)
		return;
	cour_msg_credit_return(peer, m);
	m->credit_early = true;
	ep->unexp_early += cost;
	ep->stats.unexp_credit_early++;
}

/* m leaves the unexpected queue (received or discarded): its early credit is settled. */
void cour_unexp_settle(struct cour_pep *ep, struct cour_rxmsg *m)
{
	if (m->credit_early)
		ep->unexp_early -= cour_unexp_cost(m);
}

