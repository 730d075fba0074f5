/*
 * Peers, sending side: the txes queued to a peer (control first, then messages as credits
 * allow), the send window's slots built from them (one by one, or a run of a data message's
 * packets at once), each sent over the peer's ring or queued on the wire, and the push that
 * does it as far as the windows let it. What comes back (ACKs, SACKs, resends) is
 * cour_peer_ack.c's; the peer itself, cour_peer.c's.
 */
#include "proto/cour_engine.h"
#include "proto/cour_peer_int.h"
#include "proto/cour_rel.h"

void cour_txe_move(struct cour_txe *txe, struct cour_txe **to)
{
	if (txe->list)
		DL_DELETE(*txe->list, txe);
	txe->list = to;
	if (to)
		DL_APPEND(*to, txe);
}

void cour_peer_enqueue(struct cour_peer *peer, struct cour_txe *txe)
{
	/* Only messages need credits; the rest goes first, unless FI_FENCE holds it behind
	 * the messages already queued (in order, without taking a credit). */
	bool ctrl = !cour_pkt_needs_credit(txe->op_type) &&
		    !((txe->op_flags & FI_FENCE) && peer->txq);

	txe->peer = peer;
	txe->list = NULL;
	if (COUR_UNLIKELY(peer->unroutable)) {
		/* failed by the next timer pass (cour_peer_unroutable), never sent */
		cour_txe_move(txe, ctrl ? &peer->ctrlq : &peer->txq);
		cour_peer_activate(peer);
		peer->ep->next_timer = 0;
		return;
	}
	/* the first sends to a peer ask whether it shares our host (proto/cour_shm_peer.c) */
	if (COUR_UNLIKELY(peer->hello_tries < COUR_HELLO_TRIES && !peer->peer_mapped &&
			  peer->ep->shm_ring))
		cour_shm_hello_again(peer);     /* (and cour_ep_timers asks again) */
	cour_txe_move(txe, ctrl ? &peer->ctrlq : &peer->txq);
	cour_peer_activate(peer);
	cour_peer_push(peer);
}

/* A txe whose packets are all acknowledged moves on: complete, or wait for CTS/DONE. */
void cour_txe_check_done(struct cour_peer *peer, struct cour_txe *txe)
{
	if (txe->pkts_out || txe->built < txe->total_len || txe->list != &peer->tx_inflight)
		return;
	switch (txe->op_type) {
	case COUR_PKT_RTS:
		cour_txe_move(txe, &peer->tx_wait);     /* CTS turns it into RDATA */
		txe->state = COUR_TXE_WAIT_CTS;
		return;
	case COUR_PKT_EAGER:
		if (txe->hdr_flags & COUR_F_DC) {
			cour_txe_move(txe, &peer->tx_wait);
			txe->state = COUR_TXE_WAIT_DONE;
			return;
		}
		break;
	case COUR_PKT_RDATA:
		if (txe->split_wait) {          /* until the receiver's DONE: it reads our buffer */
			cour_txe_move(txe, &peer->tx_wait);
			txe->state = COUR_TXE_WAIT_DONE;
			return;
		}
		break;
	case COUR_PKT_WRITE:
	case COUR_PKT_READ_REQ:
	case COUR_PKT_ATOMIC:
		if (!txe->resp_done) {
			cour_txe_move(txe, &peer->tx_wait);
			txe->state = COUR_TXE_WAIT_RESP;
			return;
		}
		cour_txe_move(txe, NULL);
		cour_txe_complete(peer->ep, txe, txe->resp_err ? cour_errno_fi(txe->resp_err) : 0,
					   txe->resp_err);
		return;
	default:
		break;
	}
	cour_txe_move(txe, NULL);
	cour_txe_complete(peer->ep, txe, 0, 0);
}

/* Where in the wire's flush the slot's packet goes (cour_pep.flush_gen). */
static void cour_slot_flush_note(struct cour_pep *ep, struct cour_txpkt *slot, uint64_t now)
{
	/* (the wire flushes a full batch before it takes the next packet) */
	if (ep->wire.tx_count == COUR_WIRE_TX_BATCH && ep->flush_queued)
		cour_flush_close(ep, ep->flush_first_us, now);
	if (!ep->flush_queued)
		ep->flush_first_us = now;
	slot->flush_gen = ep->flush_gen;
	slot->flush_off = (uint16_t)COUR_MIN(ep->flush_queued / 128, (uint64_t)UINT16_MAX);
	ep->flush_queued += slot->len + COUR_PKT_HDR_LEN;
}

void cour_slot_send(struct cour_peer *peer, struct cour_txpkt *slot, uint64_t now)
{
	struct iovec iov[COUR_IOV_MAX];
	size_t n = 0;

	if (slot->len)
		n = cour_iov_slice(slot->txe->iov, slot->txe->iov_count, slot->offset, slot->len,
				   iov);
	if (peer->via_shm) {
		/* the ring is reliable: in it means acknowledged (cour_peer_shm_release) */
		if (cour_shm_send(peer, &slot->hdr, COUR_PKT_HDR_LEN, iov, n) == 0) {
			slot->sent_us = now;
			slot->tries++;
			return;
		}
		slot->sent_us = 0;
		if (!peer->shm_blocked && !peer->shm_retrying)
			peer->ep->stats.shm_ring_full++;     /* once per wait, not per retry */
		peer->shm_blocked = true;
		peer->ep->tx_blocked = true;    /* the next progress call retries */
		return;
	}
	slot->sent_us = now;
	slot->tries++;
	if (peer->ep->wire.stamps_on)
		cour_slot_flush_note(peer->ep, slot, now);
	cour_wire_queue(peer->ep, peer, &slot->hdr, COUR_PKT_HDR_LEN, iov, n);
}

void cour_peer_resend_window(struct cour_peer *peer, uint64_t now)
{
	if (peer->via_shm || !cour_peer_sending(peer))
		return;
	for (uint32_t s = peer->tx_una; s != peer->tx_next; s++) {
		struct cour_txpkt *slot = cour_txslot(peer, s);

		if (!slot->sacked)
			cour_slot_send(peer, slot, now);
	}
	cour_wire_flush(peer->ep);
}

/* Packets in the peer's ring are delivered: release them in order up to the first one the
 * ring refused. */
static void cour_peer_shm_release(struct cour_peer *peer, uint64_t now)
{
	uint32_t una = peer->tx_una;

	while (cour_peer_sending(peer) && cour_txslot(peer, peer->tx_una)->sent_us) {
		cour_slot_release(peer, cour_txslot(peer, peer->tx_una));
		peer->tx_una++;
	}
	/* (a retry into a ring that stays full is no sign of life: the silence clock runs on) */
	if (peer->tx_una != una)
		peer->last_ack_us = now;
	if (!cour_peer_sending(peer))
		peer->rto_deadline = 0;
}

/* Resend, in order, what a full ring refused; false while the ring stays full. */
bool cour_peer_shm_retry(struct cour_peer *peer, uint64_t now)
{
	peer->shm_blocked = false;
	peer->shm_retrying = true;
	for (uint32_t s = peer->tx_una; s != peer->tx_next && !peer->shm_blocked; s++)
		cour_slot_send(peer, cour_txslot(peer, s), now);
	peer->shm_retrying = false;
	cour_peer_shm_release(peer, now);
	return !peer->shm_blocked;
}

/* Types whose txe carries payload bytes [0, total_len); the others are one bare header. */
static const bool cour_pkt_has_payload[COUR_PKT_TYPE_MAX] = {
	[COUR_PKT_EAGER] = true,
	[COUR_PKT_RDATA] = true,
	[COUR_PKT_WRITE] = true,
	[COUR_PKT_READ_RESP] = true,
	[COUR_PKT_RMA_RESP] = true,
	[COUR_PKT_ATOMIC] = true,
};

/* Room for one more packet. A peer whose ring we mapped while UDP packets were in flight
 * gets nothing more over UDP: once those are acknowledged (at once: a receiver acknowledges
 * a mapped peer's UDP packets without delay) everything moves to the ring. Sending on over
 * UDP instead kept a busy stream off the ring for good, as the window never emptied. */
static bool cour_peer_window_open(struct cour_peer *peer)
{
	return peer->tx_next - peer->tx_una < (uint32_t)cour_params.window &&
	       peer->inflight_bytes < cour_params.sockbuf / 2 && !peer->shm_blocked &&
	       !(peer->shm && !peer->via_shm) && cour_peer_txwin_room(peer) &&
	       cour_peer_cc_open(peer);
}

/* txe's header as every packet of it carries it, seq and offset aside; the peer's fields and
 * the checksum are filled when a packet leaves (cour_hdr_finish). */
static void cour_txe_hdr(const struct cour_txe *txe, struct cour_pkt_hdr *hdr)
{
	memset(hdr, 0, sizeof(*hdr));
	hdr->base.type = txe->op_type;
	hdr->base.flags = txe->hdr_flags;
	hdr->msg.msg_id = txe->msg_id;
	hdr->msg.rx_id = txe->rx_id;
	hdr->msg.tag = txe->tag;
	hdr->msg.data = txe->data;
	hdr->msg.total_len = txe->msg_len;
	hdr->msg.raddr = txe->raddr;
}

/* A packet of len payload bytes from txe->built goes into the window's next slot. */
static struct cour_txpkt *cour_peer_take_slot(struct cour_peer *peer, struct cour_txe *txe,
					      uint64_t len)
{
	struct cour_txpkt *slot = cour_txslot(peer, peer->tx_next);   /* window_open made room */

	slot->txe = txe;
	slot->offset = txe->built;
	slot->len = (uint32_t)len;
	slot->tries = 0;
	slot->sacked = false;
	peer->tx_next++;
	peer->inflight_bytes += len + COUR_PKT_HDR_LEN;
	txe->built += len;
	txe->pkts_out++;
	return slot;
}

/* After txe's packets were built: once all are, it waits for their ACKs; false then. */
static bool cour_txe_built_more(struct cour_peer *peer, struct cour_txe *txe)
{
	/* single-packet types are built once; data types when every byte is in a packet */
	if (txe->built < txe->total_len)
		return true;
	cour_txe_move(txe, &peer->tx_inflight);
	txe->state = COUR_TXE_WAIT_ACK;
	return false;
}

static void cour_peer_rto_arm(struct cour_peer *peer, uint64_t now)
{
	if (!peer->rto_deadline) {
		peer->rto_deadline = now + peer->rto_us;
		cour_ep_timer_at(peer->ep, peer->rto_deadline);
	}
}

/* Build the next packet of txe into the window; false when txe has nothing more to build. */
static bool cour_peer_build(struct cour_peer *peer, struct cour_txe *txe, uint64_t now)
{
	uint32_t room = peer->mtu - (uint32_t)COUR_PKT_HDR_LEN;
	uint64_t len = 0, off = txe->built;
	struct cour_txpkt *slot;

	if (cour_pkt_has_payload[txe->op_type])
		len = COUR_MIN(txe->total_len - txe->built, (uint64_t)room);
	if (!cour_peer_sending(peer))
		peer->last_ack_us = now;    /* the silence clock starts with the first packet out */
	if (!peer->via_shm)
		cour_cc_sending(&peer->cc, cour_peer_pipe(peer), now);
	slot = cour_peer_take_slot(peer, txe, len);
	cour_txe_hdr(txe, &slot->hdr);
	slot->hdr.base.seq = peer->tx_next - 1;
	/* single copy: the peer moves the bytes itself, from or to this address */
	slot->hdr.msg.offset = (txe->hdr_flags & COUR_F_CMA) && txe->iov_count &&
			       txe->op_type != COUR_PKT_RDATA ?
			       (uint64_t)(uintptr_t)txe->iov[0].iov_base : off;
	cour_slot_send(peer, slot, now);
	cour_peer_rto_arm(peer, now);

	bool more = cour_txe_built_more(peer, txe);
	/* after the move: releasing the last packet may complete txe */
	if (peer->via_shm)
		cour_peer_shm_release(peer, now);
	return more;
}

/* Payload data over UDP: the packets the windows let go are built in one loop
 * (cour_peer_build_run) */
static bool cour_peer_runs(const struct cour_peer *peer, const struct cour_txe *txe)
{
	return !peer->via_shm && cour_pkt_has_payload[txe->op_type] &&
	       !(txe->hdr_flags & COUR_F_CMA) &&
	       txe->total_len - txe->built > peer->mtu - (uint32_t)COUR_PKT_HDR_LEN;
}

/* cour_peer_build for as many of txe's packets as the windows let go, what they share worked
 * out once: the header but seq and offset, the peer's ACK fields (nothing arrives meanwhile),
 * the congestion window's clock, the timer. Each packet is then a copy of that header, its
 * checksum and the wire's queue entry: a 256 KiB message is 189 packets at MTU 1500, and
 * building them one by one took more of a ping-pong's hop than the gaps between its GSO calls
 * left (cour_peer_build: about 600 instructions a packet). */
static void cour_peer_build_run(struct cour_peer *peer, struct cour_txe *txe, uint64_t now)
{
	struct cour_pep *ep = peer->ep;
	uint32_t room = peer->mtu - (uint32_t)COUR_PKT_HDR_LEN;
	bool join = cour_wire_joins(peer, txe->msg_len);
	struct cour_pkt_hdr tmpl;
	struct iovec iov[COUR_IOV_MAX];

	if (!cour_peer_sending(peer))
		peer->last_ack_us = now;
	cour_cc_sending(&peer->cc, cour_peer_pipe(peer), now);
	cour_txe_hdr(txe, &tmpl);
	cour_hdr_finish_fields(peer, &tmpl);
	do {
		uint64_t len = COUR_MIN(txe->total_len - txe->built, (uint64_t)room);
		struct cour_txpkt *slot = cour_peer_take_slot(peer, txe, len);
		size_t n = 1;

		slot->hdr = tmpl;
		slot->hdr.base.seq = peer->tx_next - 1;
		slot->hdr.msg.offset = slot->offset;
		tmpl.base.flags &= (uint16_t)~COUR_F_HELD;    /* (the first says it: finish_fields) */
		if (txe->iov_count == 1) {
			iov[0].iov_base = (char *)txe->iov[0].iov_base + slot->offset;
			iov[0].iov_len = len;
		} else {
			n = cour_iov_slice(txe->iov, txe->iov_count, slot->offset, len, iov);
		}
		slot->sent_us = now;
		slot->tries = 1;
		if (ep->wire.stamps_on)
			cour_slot_flush_note(ep, slot, now);
		cour_hdr_seal(ep, &slot->hdr, COUR_PKT_HDR_LEN, iov, n);
		ep->wire.ops->queue(&ep->wire, &peer->sa, peer->sa_len, &slot->hdr,
				    COUR_PKT_HDR_LEN, iov, n,
				    cour_wire_pack_limit(peer, join, len + COUR_PKT_HDR_LEN));
	} while (txe->built < txe->total_len && cour_peer_window_open(peer));
	cour_peer_rto_arm(peer, now);
	cour_txe_built_more(peer, txe);
}

void cour_peer_push(struct cour_peer *peer)
{
	struct cour_pep *ep = peer->ep;
	uint32_t in_flight = peer->tx_next - peer->tx_una;    /* before this push */
	uint64_t now;

	if (!peer->ctrlq && !peer->txq)
		return;
	/* to the ring once nothing sent over UDP is unacknowledged: the ring's packets count as
	 * acknowledged the moment they are in, which is only right in order */
	if (peer->shm && !peer->via_shm && !cour_peer_sending(peer))
		peer->via_shm = true;
	now = peer->via_shm ? cour_ep_clock_refresh(ep, false) : cour_now_us();
	uint32_t first = peer->tx_next;
	while (peer->ctrlq && cour_peer_window_open(peer)) {
		if (cour_peer_runs(peer, peer->ctrlq))
			cour_peer_build_run(peer, peer->ctrlq, now);   /* rendezvous data, RMA */
		else
			cour_peer_build(peer, peer->ctrlq, now);
	}
	while (peer->txq && cour_peer_window_open(peer)) {
		struct cour_txe *txe = peer->txq;

		if (txe->built == 0 && cour_pkt_needs_credit(txe->op_type) &&
		    !cour_credit_take(peer, txe))
			break;
		if (cour_peer_runs(peer, txe))
			cour_peer_build_run(peer, txe, now);
		else
			while (cour_peer_build(peer, txe, now) && cour_peer_window_open(peer))
				;
	}
	/* the newest packet: the tail probe watches it (cour_peer_tail_probe), and the
	 * question for a late ACK (cour_peer_nudge); every packet of this push left at now */
	if (peer->tx_next != first && peer->srtt_us && !peer->via_shm) {
		cour_ep_timer_at(ep, now + cour_peer_probe_wait(peer));
		if (cour_params.nudge_us && !peer->nudged)
			cour_ep_timer_at(ep, now + cour_peer_nudge_wait(peer));
	}
	if ((peer->ctrlq || peer->txq) && !cour_peer_window_open(peer) && !peer->shm_blocked) {
		ep->stats.window_stalls++;
		if (!cour_peer_cc_open(peer) && cour_cc_blocked(&peer->cc)) {
			ep->stats.cc_stalls++;
			ep->wire.stamps_want = true;    /* (wire/cour_wire.h) */
		}
	}
	/* A send posted while many of the peer's packets are in flight leaves with the next
	 * progress pass, batched with those posted meanwhile (one GSO call for a run): the ACKs
	 * those packets draw bring that pass at the latest. Counted before this push: what it
	 * built itself draws no ACK until it is sent (one big message must not wait). Posted
	 * with few in flight (a pingpong), it leaves now. */
	if (!ep->in_progress && !peer->via_shm && in_flight >= COUR_DEFER_INFLIGHT) {
		ep->tx_deferred = true;
		return;
	}
	cour_wire_flush(ep);
}
