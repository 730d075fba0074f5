/*
 * Credit flow control, counted in bytes. A receiver must be able to buffer every eager message
 * a sender starts before the application has posted its receive; credits bound that, so what
 * the receiver can be made to hold is its own choice and not a multiple of how many peers it
 * has (the gemini and usnic seeds: per-peer buffers grow O(N) per process, O(N^2) per job).
 *
 *  - A message costs cour_credit_cost units of COUR_CREDIT_UNIT bytes: 1 + len / unit eager,
 *    1 for an RTS (rendezvous data lands only in a posted buffer).
 *  - Every peer starts with FI_COURIER_CREDITS units (64: 64 small messages, 16 KiB), a small
 *    grant: N peers that never asked for more can make us hold N x that, no more.
 *  - A sender short of units for an eager message sends it as an RTS instead (one unit, and it
 *    says COUR_F_WANT), and so the eager messages behind it until that RTS is cleared, so that
 *    messages up to eager_max still complete in the order sent; one with no unit at all
 *    stalls and says WANT in an ACK. The receiver
 *    then lends it more, up to FI_COURIER_CREDITS_MAX, out of the endpoint's budget
 *    (FI_COURIER_UNEXP_MAX), which unexpected messages whose credit went back early share.
 *  - Grants are cumulative (the header carries a limit), so a loan comes back only as the
 *    peer's later messages are consumed: while other peers are refused for lack of budget,
 *    consumed units of peers holding loans repay them instead of being granted again.
 * Nothing here can deadlock: a sender with one unit can always announce its next message, and
 * an RTS holds only a record until a receive takes it.
 */
#include "proto/cour_engine.h"
#include "proto/cour_msg_int.h"

/* Units the peer may have unconsumed at us now. */
static uint32_t cour_grant_win(const struct cour_peer *peer)
{
	return (uint32_t)cour_params.credits + peer->grant_extra;
}

/* What is left of the budget that loans and early-returned unexpected messages share. */
static size_t cour_budget_room(const struct cour_pep *ep)
{
	size_t used = ep->unexp_early + ep->grant_extra * COUR_CREDIT_UNIT;

	return used < cour_params.unexp_max ? cour_params.unexp_max - used : 0;
}

/* ---- sender ---- */

/* Announce an eager message instead (RTS|WANT), zero-copy from the same buffer once the
 * receiver has a place for it; the receiver may adopt it into a buffer of its own, so it
 * still completes before its receive is posted, as eager. Until it is cleared the peer's later
 * eager messages go the same way (cour_credit_take). */
static void cour_txe_eager_to_rts(struct cour_peer *peer, struct cour_txe *txe)
{
	txe->op_type = COUR_PKT_RTS;
	txe->total_len = 0;
	if (cour_cma_msg_usable(peer, txe->msg_len, txe->iov_count))
		txe->hdr_flags |= COUR_F_CMA;
	txe->hdr_flags |= COUR_F_WANT;
	txe->short_rts = true;
	peer->short_rts++;
}

/* Its CTS came: messages behind it need no longer wait to keep their order. */
void cour_credit_rts_cleared(struct cour_peer *peer, struct cour_txe *txe)
{
	if (txe->short_rts) {
		txe->short_rts = false;
		peer->short_rts--;
	}
	if (txe->rts_plain) {
		txe->rts_plain = false;
		if (!--peer->rts_plain)
			peer->rts_plain_min = UINT32_MAX;
	}
	if (txe->rts_cma) {
		txe->rts_cma = false;
		peer->rts_cma--;
	}
}

bool cour_credit_take(struct cour_peer *peer, struct cour_txe *txe)
{
	uint32_t avail = cour_seq_lt(peer->tx_credit_used, peer->tx_credit_limit) ?
			 peer->tx_credit_limit - peer->tx_credit_used : 0;
	uint32_t cost = cour_credit_cost(txe->op_type, txe->total_len);
	/* an RTS waits ahead whose data may come in packets after its CTS: a short one (the
	 * receiver may adopt it, cour_rts_adopt) or a plain one */
	bool plain_ahead = peer->rts_plain || peer->short_rts;

	/* Behind an eager message sent as RTS, later ones go as RTS too until it is cleared:
	 * sent eager they would complete before it, out of the order they were sent in. The
	 * same holds behind a plain RTS for a message at least as long: to a same-host peer the
	 * length from which a message goes by rendezvous moves (cour_cma_msg_min), so one
	 * message may go as RTS and the next of its size eagerly. It goes as an eager one sent
	 * as RTS, so that the shorter ones behind it follow it as well. */
	if (COUR_UNLIKELY(txe->op_type == COUR_PKT_EAGER && peer->rts_plain &&
			  txe->msg_len >= peer->rts_plain_min && avail)) {
		cour_txe_eager_to_rts(peer, txe);
		peer->ep->stats.rts_in_order++;
		cost = 1;
	}
	if (COUR_UNLIKELY(cost > avail || (peer->short_rts && txe->op_type == COUR_PKT_EAGER))) {
		if (avail && txe->op_type == COUR_PKT_EAGER) {
			cour_txe_eager_to_rts(peer, txe);
			peer->ep->stats.credit_rts++;
			cost = 1;
		} else {
			if (!peer->credit_stalled) {
				peer->ep->stats.credit_stalls++;
				peer->last_heard_us = cour_now_us();
				peer->credit_stalled = true;
				cour_peer_send_ack(peer, COUR_F_WANT);
			}
			return false;
		}
	}
	/* A single-copy rendezvous completes the moment it is matched (split, once our half is
	 * in: cour_msg_proto.c keeps those in order): behind one whose data may still come in
	 * packets (a short RTS, even one offering single copy, or a plain one sent before the
	 * peer's ring was mapped) it goes plain too, its data behind the other's */
	if (txe->op_type == COUR_PKT_RTS) {
		if (COUR_UNLIKELY(plain_ahead))
			txe->hdr_flags &= (uint16_t)~COUR_F_CMA;
		if (!(txe->hdr_flags & COUR_F_CMA)) {
			txe->rts_plain = true;
			peer->rts_plain++;
			if (txe->msg_len < peer->rts_plain_min)
				peer->rts_plain_min = (uint32_t)txe->msg_len;
		} else if (peer->rts_cma < UINT16_MAX) {
			txe->rts_cma = true;
			peer->rts_cma++;
		}
	}
	peer->credit_stalled = false;
	peer->probe_deadline = 0;
	peer->tx_credit_used += cost;
	return true;
}

/* A message sent outside the sequence (SHORT, cour_short_send): its cost if the units are
 * there and no eager message sent as RTS waits ahead of it, else 0 and the engine sends it.
 * The caller adds the cost to tx_credit_used once the message is in the ring. */
uint32_t cour_credit_short(const struct cour_peer *peer, uint64_t len)
{
	uint32_t avail = cour_seq_lt(peer->tx_credit_used, peer->tx_credit_limit) ?
			 peer->tx_credit_limit - peer->tx_credit_used : 0;
	uint32_t cost = cour_credit_cost(COUR_PKT_EAGER, len);

	return cost <= avail && !peer->short_rts &&
	       !(peer->rts_plain && len >= peer->rts_plain_min) ? cost : 0;
}

/* ---- receiver ---- */

/* A grant waits for a packet of ours to ride on while the peer still has half of what we told
 * it: it is not short of units. Sent on its own, it is an ACK the peer must handle, and
 * between two processes of a host a put into the peer's ring that may map one more page of
 * it in us: one such ACK per pair that exchanged a single message was 4 KiB per same-host
 * peer of a rank's resident memory (fabtests/mpi/peer-mem.sh). */
static void cour_grant_schedule(struct cour_peer *peer)
{
	struct cour_pep *ep = peer->ep;

	if (peer->ack_needed || peer->credits_granted == peer->credits_sent ||
	    peer->credits_sent - peer->rx_units >= cour_grant_win(peer) / 2)
		return;
	peer->ack_needed = true;
	peer->ack_deadline = cour_ep_clock(ep) + (uint64_t)cour_params.ack_delay_us;
	cour_ep_timer_at(ep, peer->ack_deadline);
	cour_peer_activate(peer);
}

bool cour_credit_admit(struct cour_peer *peer, unsigned type, uint64_t total_len)
{
	uint32_t cost = cour_credit_cost(type, total_len);

	if (!cour_seq_le(peer->rx_units + cost, peer->credits_granted))
		return false;
	peer->rx_units += cost;
	/* (the peer may have passed half of what we told it with units we already freed) */
	if (COUR_UNLIKELY(peer->credits_granted != peer->credits_sent))
		cour_grant_schedule(peer);
	return true;
}

/* Units the peer's messages no longer hold: granted again, or kept to repay a loan others need.
 * A grant rides on the next packet to the peer, or on an ACK after the ACK delay once the peer
 * has used half of what we told it (cour_grant_schedule): a peer that answers what it sent (a
 * ping-pong, a halo exchange) gets it with the answer. An ACK of its own costs both sides a
 * system call on the message's path (an 8 KiB ping-pong over veth at MTU 1500: 11.7 against
 * 7.5 us, docs/performance.md). Only a peer that has used all we told it gets its grant at
 * once; one short of units for a message asks (WANT, cour_credit_want). */
void cour_peer_credit_return(struct cour_peer *peer, uint32_t units)
{
	struct cour_pep *ep = peer->ep;

	if (COUR_UNLIKELY(ep->grant_short && peer->grant_extra)) {
		uint32_t repay = COUR_MIN(units, peer->grant_extra);

		peer->grant_extra -= repay;
		ep->grant_extra -= repay;
		ep->stats.credit_repaid += repay;
		units -= repay;
		if (cour_budget_room(ep) >= cour_params.unexp_max / 4)
			ep->grant_short = false;
		if (!units)
			return;
	}
	peer->credits_granted += units;
	if (cour_seq_le(peer->credits_sent, peer->rx_units)) {
		cour_peer_send_ack(peer, 0);
		return;
	}
	cour_grant_schedule(peer);
}

/* The peer said WANT (len: the message it sent as an RTS for lack of units, or 0): lend it
 * twice its window, or twice that message, within credits_max and the budget; the new limit
 * goes out at once. */
void cour_credit_want(struct cour_peer *peer, uint64_t len)
{
	struct cour_pep *ep = peer->ep;
	uint32_t win = cour_grant_win(peer), want, add;
	size_t room;

	want = COUR_MAX(2 * win, 2 * cour_credit_cost(COUR_PKT_EAGER, len));
	want = COUR_MIN(want, (uint32_t)cour_params.credits_max);
	if (want <= win)
		return;
	room = cour_budget_room(ep) / COUR_CREDIT_UNIT;
	add = (uint32_t)COUR_MIN((size_t)(want - win), room);
	if (add < want - win) {
		ep->grant_short = true;
		ep->stats.credit_refused++;
	}
	if (!add)
		return;
	peer->grant_extra += add;
	ep->grant_extra += add;
	peer->credits_granted += add;
	ep->stats.credit_grants++;
	cour_peer_send_ack(peer, 0);
}

/* The peer's session ends (reset, or the record is freed): its loan goes back. */
void cour_credit_peer_end(struct cour_peer *peer)
{
	peer->ep->grant_extra -= peer->grant_extra;
	peer->grant_extra = 0;
}

/* ---- messages ---- */

/* A consumed message gives its units back, unless it came in an earlier session of the peer
 * (complete unexpected messages outlive a reset): the new session never spent them. */
void cour_msg_credit_return(struct cour_peer *peer, const struct cour_rxmsg *m)
{
	if (m->session == peer->local_session && !m->credit_early)
		cour_peer_credit_return(peer, m->units);
}

/* What an unexpected message holds of the endpoint's memory. */
size_t cour_unexp_cost(const struct cour_rxmsg *m)
{
	return sizeof(*m) + (m->rts ? 0 : (size_t)m->total_len);
}

bool cour_unexp_affordable(const struct cour_pep *ep, size_t bytes)
{
	return bytes <= cour_budget_room(ep);
}

/*
 * An unexpected message is counted, and gives its credit back at once if the budget allows: a
 * sender must never stall behind messages that only receives the application has not posted
 * yet would take (MPI threads each posting after their sends; a sender that finalizes right
 * after its injects). Past the budget, units come back only as messages are received.
 */
void cour_unexp_add(struct cour_peer *peer, struct cour_rxmsg *m)
{
	struct cour_pep *ep = peer->ep;
	size_t cost = cour_unexp_cost(m);

	m->unexp_cost = cost;
	ep->stats.unexp_bytes += cost;
	if (ep->stats.unexp_bytes > ep->stats.unexp_peak)
		ep->stats.unexp_peak = ep->stats.unexp_bytes;
	if (m->nomem || cost > cour_budget_room(ep))
		return;
	cour_msg_credit_return(peer, m);
	m->credit_early = true;
	ep->unexp_early += cost;
	ep->stats.unexp_credit_early++;
}

/* m leaves the unexpected queue (received or discarded): its counts are settled. */
void cour_unexp_settle(struct cour_pep *ep, struct cour_rxmsg *m)
{
	if (m->held) {
		m->held = false;
		m->peer->rx_rts_held--;
	}
	ep->stats.unexp_bytes -= m->unexp_cost;
	if (m->credit_early)
		ep->unexp_early -= m->unexp_cost;
	m->unexp_cost = 0;
}
