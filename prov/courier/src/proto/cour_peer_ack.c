/*
 * Acknowledgements arriving: the cumulative ACK and SACK of every valid packet from a peer
 * release window slots and complete operations, give RTT samples (Karn's rule: none from a
 * resent packet) and with them the retransmit timeout, and show holes below SACKed packets,
 * which fast retransmit resends at most once per SRTT.
 */
#include "proto/cour_engine.h"
#include "proto/cour_peer_int.h"
#include "proto/cour_rel.h"

/* How long the packet being handled waited in our socket for this process (its kernel
 * arrival stamp; 0: not stamped). */
static uint64_t cour_peer_rx_wait(const struct cour_peer *peer)
{
	const struct cour_pep *ep = peer->ep;

	if (!ep->wire.rx_stamp_ns || ep->rx_borrowed)
		return 0;
	return cour_us_since(cour_wall_ns(), ep->wire.rx_stamp_ns) / 1000u;
}

/* When the slot's packet left: its share of the way through the flush that took it, when
 * that is known (cour_pep.flush_t0). */
static uint64_t cour_slot_left(const struct cour_peer *peer, const struct cour_txpkt *slot)
{
	const struct cour_pep *ep = peer->ep;
	uint8_t ago = (uint8_t)(ep->flush_gen - slot->flush_gen);
	uint32_t g = slot->flush_gen % COUR_FLUSH_HIST;
	uint64_t dt, bytes, left;

	if (!ep->wire.stamps_on || !ago || ago >= COUR_FLUSH_HIST)
		return slot->sent_us;
	dt = cour_us_since(ep->flush_t1[g], ep->flush_t0[g]);
	bytes = ep->flush_bytes[g];
	left = ep->flush_t0[g] +
	       (bytes ? dt * COUR_MIN((uint64_t)slot->flush_off * 128, bytes) / bytes : 0);
	return COUR_MAX(left, slot->sent_us);
}

/*
 * The part of an RTT sample spent in the network, for slot acknowledged now: without its
 * wait in our own flush (cour_slot_left), the time the ACK waited in our socket, nor the time
 * the peer held the packet (an ACK's seq field, hold; 0: not known). 0: the parts do not add
 * up (another clock), no sample for congestion control.
 */
static uint64_t cour_peer_net_rtt(const struct cour_peer *peer, const struct cour_txpkt *slot,
				  uint64_t now, uint64_t hold)
{
	uint64_t rtt = cour_us_since(now, cour_slot_left(peer, slot));
	uint64_t wait = cour_peer_rx_wait(peer);

	return wait + hold < rtt ? rtt - wait - hold : 0;
}

/*
 * A receiver whose process stops reading for a while (it computes, it verifies what came,
 * the scheduler took its CPU, its progress thread naps) holds our packets unacknowledged for
 * that long. The RTT estimate forgets such a hold within a few samples, and a timeout that
 * fires during one is never sampled (Karn), so with only the estimate every pause longer than
 * the timer's floor resends a window the peer already has. The ACKs that end a pause say how
 * long it held the packet they acknowledge: the longest of those lately is added to the
 * timer, and forgotten by halves, a second at a time, once no pause that long recurs.
 */
#define COUR_STALL_MEMORY_MS 1000
static void cour_peer_stall_note(struct cour_peer *peer, uint64_t hold, uint64_t now)
{
	uint32_t now_ms = (uint32_t)(now / 1000);

	hold = COUR_MIN(hold, (uint64_t)cour_params.rto_max_us);
	if (hold >= peer->stall_us) {
		peer->stall_us = (uint32_t)hold;
		peer->stall_at_ms = now_ms;
	} else if (now_ms - peer->stall_at_ms > COUR_STALL_MEMORY_MS) {
		peer->stall_us = COUR_MAX((uint32_t)hold, peer->stall_us / 2);
		peer->stall_at_ms = now_ms;
	}
	peer->ep->stats.rtt_stall_us = peer->stall_us;
}

/* The timer for an estimate's timeout: that, and the peer's pauses */
static void cour_peer_rto_set(struct cour_peer *peer, uint64_t est_rto)
{
	peer->rto_us = COUR_MIN(est_rto + peer->stall_us, (uint64_t)cour_params.rto_max_us);
}

/* rtt for the retransmit timer (all of it: a late ACK is late whatever the cause), net
 * for congestion control (cour_peer_net_rtt, 0: none). */
static void cour_peer_rtt_sample(struct cour_peer *peer, uint64_t rtt, uint64_t net,
				 uint64_t now)
{
	struct cour_rtt_est est = {
		.srtt_us = peer->srtt_us, .rttvar_us = peer->rttvar_us, .rto_us = peer->rto_us,
	};

	cour_rtt_update(&est, rtt, (uint64_t)cour_params.rto_min_us,
			(uint64_t)cour_params.rto_max_us);
	peer->srtt_us = est.srtt_us;
	peer->rttvar_us = est.rttvar_us;
	cour_peer_rto_set(peer, est.rto_us);
	peer->ep->stats.rtt_srtt_us = peer->srtt_us;
	if (net)
		cour_cc_sample(&peer->cc, net, now);
}

/* The timeout the current estimate gives, without a new sample: ends a backoff. */
static void cour_peer_rto_from_srtt(struct cour_peer *peer)
{
	struct cour_rtt_est est = { .srtt_us = peer->srtt_us, .rttvar_us = peer->rttvar_us };

	cour_peer_rto_set(peer, cour_rtt_rto(&est, (uint64_t)cour_params.rto_min_us,
					     (uint64_t)cour_params.rto_max_us));
}

void cour_slot_release(struct cour_peer *peer, struct cour_txpkt *slot)
{
	struct cour_txe *txe = slot->txe;

	peer->inflight_bytes -= slot->len + COUR_PKT_HDR_LEN;
	if (slot->sacked) {
		peer->sacked_bytes -= slot->len + COUR_PKT_HDR_LEN;
		slot->sacked = false;
	}
	slot->txe = NULL;
	if (txe) {
		txe->pkts_out--;
		cour_txe_check_done(peer, txe);
	}
}

static void cour_peer_cc_event(struct cour_peer *peer, enum cour_cc_event ev)
{
	struct fi_courier_stats *st = &peer->ep->stats;

	switch (ev) {
	case COUR_CC_EV_CUT_DELAY: st->cc_cuts_delay++; break;
	case COUR_CC_EV_CUT_LOSS: st->cc_cuts_loss++; break;
	case COUR_CC_EV_LOSS_RANDOM: st->cc_loss_random++; break;
	case COUR_CC_EV_COMPETE: st->cc_compete++; break;
	default: break;
	}
}

void cour_peer_cc_loss(struct cour_peer *peer)
{
	if (!peer->via_shm && cour_params.cc)
		cour_peer_cc_event(peer, cour_cc_loss(&peer->cc, peer->tx_una, peer->tx_next));
}

/* acked: bytes this ACK took off the network (released or SACKed). */
static void cour_peer_cc_acked(struct cour_peer *peer, uint64_t acked, uint64_t now)
{
	struct cour_cc *cc = &peer->cc;
	struct fi_courier_stats *st = &peer->ep->stats;

	if (peer->via_shm || !cour_params.cc)
		return;
	cour_peer_cc_event(peer, cour_cc_acked(cc, acked, peer->tx_una, peer->tx_next, now,
					       cour_wall_us));
	st->cc_cwnd = cc->cwnd;
	st->cc_base_rtt_us = cc->base_us;
	st->cc_qdelay_us = cc->qdelay_us;
}

/* The highest SACKed sequence number still in the window, or false if nothing is SACKed.
 * Kept as packets are SACKed, so the timer pass and every ACK need no window scan. */
bool cour_peer_last_sacked(const struct cour_peer *peer, uint32_t *last)
{
	if (!peer->sack_valid || cour_seq_lt(peer->sack_hi, peer->tx_una))
		return false;
	*last = peer->sack_hi;
	return true;
}

/*
 * Fast retransmit, hole by hole: a packet not SACKed while three later ones are (the usual
 * duplicate threshold, which tolerates mild reordering) is resent once; a resent one is resent
 * again only when its copy had time to be SACKed (SRTT + 4 RTTVAR) and was not. Nothing here
 * backs off: SACKs prove the peer receives, so these are losses, not congestion or death.
 */
static void cour_peer_fast_rexmit(struct cour_peer *peer, uint64_t now)
{
	uint32_t s, last, above = 0;
	uint64_t again = COUR_MAX(peer->srtt_us + 4 * peer->rttvar_us, 50u);
	bool sent = false;

	if (!cour_peer_last_sacked(peer, &last))
		return;
	for (s = last;; s--) {
		struct cour_txpkt *slot = cour_txslot(peer, s);

		if (slot->sacked) {
			above++;
		} else if ((slot->tries == 1 && above >= 3) ||
			   (slot->tries > 1 && cour_us_since(now, slot->sent_us) >= again)) {
			cour_peer_cc_loss(peer);
			cour_slot_send(peer, slot, now);
			peer->ep->stats.retrans_fast++;
			sent = true;
		}
		if (s == peer->tx_una)
			break;
	}
	if (sent)
		cour_wire_flush(peer->ep);
}

/*
 * Holes below SACKed packets that no ACK comes to repair (their resend was lost too, or the
 * peer's ACKs were): resend each whose last copy is older than two SRTTs, from the timer,
 * without touching the RTO, which stays for tail loss and dead peers. Returns when to look
 * again, 0 if there is no hole.
 */
uint64_t cour_peer_hole_timer(struct cour_peer *peer, uint64_t now)
{
	uint32_t last;
	uint64_t again = COUR_MAX(2 * peer->srtt_us, 200u), due = 0;
	bool sent = false;

	if (!peer->txwin || !cour_peer_sending(peer) || !cour_peer_last_sacked(peer, &last))
		return 0;
	for (uint32_t s = peer->tx_una; s != last; s++) {
		struct cour_txpkt *slot = cour_txslot(peer, s);

		if (slot->sacked)
			continue;
		if (cour_us_since(now, slot->sent_us) >= again) {
			cour_peer_cc_loss(peer);
			cour_slot_send(peer, slot, now);
			peer->ep->stats.retrans_fast++;
			sent = true;
		}
		if (!due || slot->sent_us + again < due)
			due = slot->sent_us + again;
	}
	if (sent) {
		cour_wire_flush(peer->ep);
		peer->rto_deadline = now + peer->rto_us;   /* progress: the RTO starts over */
	}
	return due;
}

/*
 * Tail loss: when the last packets of a flight are lost, no later packet arrives to be SACKed
 * and show the hole, and only the RTO notices (milliseconds under loss, doubling). Instead,
 * two SRTTs (and the peer's ACK delay) after the newest packet left, with nothing
 * acknowledged since, that packet is sent again, once: its ACK either moves the window or
 * SACKs it above the hole, which fast retransmit and the hole timer then repair. A probe
 * the peer got twice (its DUP ACK) was early, and the wait doubles (peer->probe_shift). Returns
 * when to look again, 0 if nothing is to watch.
 */
#define COUR_PROBE_SHIFT_MAX 3    /* 8 x (2 SRTT + ACK delay) at most: the RTO comes anyway */

uint64_t cour_peer_probe_wait(const struct cour_peer *peer)
{
	/* never before the shortest RTO could fire: a receiver that progresses late (a busy
	 * application under manual progress) must not draw a duplicate every flight */
	return COUR_MAX((2 * peer->srtt_us + (uint64_t)cour_params.ack_delay_us) <<
			peer->probe_shift, (uint64_t)cour_params.rto_min_us);
}

uint64_t cour_peer_tail_probe(struct cour_peer *peer, uint64_t now)
{
	struct cour_txpkt *slot;
	uint64_t due;

	if (!peer->txwin || peer->via_shm || peer->tail_probed || !peer->srtt_us ||
	    !cour_peer_sending(peer))
		return 0;
	slot = cour_txslot(peer, peer->tx_next - 1);
	if (slot->sacked || !slot->sent_us)
		return 0;
	due = COUR_MAX(slot->sent_us, peer->last_ack_us) + cour_peer_probe_wait(peer);
	if (now < due)
		return due;
	peer->tail_probed = true;
	peer->probe_seq = peer->tx_next - 1;
	peer->probe_out = true;
	cour_slot_send(peer, slot, now);
	peer->ep->stats.retrans_probe++;
	cour_wire_flush(peer->ep);
	return 0;
}

/*
 * A late ACK. Our send completes when the peer acknowledges it, and a peer whose application
 * computes between calls acknowledges when its progress thread runs; that thread stands back
 * while the application polls, and wakes for the doorbell (wire/cour_udp.c), which takes
 * only probes. So when the newest packet's ACK is late (two SRTTs and the peer's ACK delay,
 * at least FI_COURIER_NUDGE us) a probe asks for it, once a flight: the answer comes at once
 * from a peer that reads its socket, and from one that computes within a thread's wake-up,
 * instead of at its next call (a halo whose other rank computes 1 ms waited the whole ms).
 * A resend would carry the same question, at a packet's cost and only after the RTO's
 * floor. Returns when to look again, 0 if nothing is to watch.
 */
uint64_t cour_peer_nudge_wait(const struct cour_peer *peer)
{
	/* the path's round trip and its queue, not SRTT: SRTT holds the peer's late ACKs */
	uint64_t rtt = peer->cc.base_us ? (uint64_t)peer->cc.base_us + peer->cc.qdelay_us :
		       peer->srtt_us;

	return COUR_MAX(2 * rtt + (uint64_t)cour_params.ack_delay_us,
			(uint64_t)cour_params.nudge_us);
}

uint64_t cour_peer_nudge(struct cour_peer *peer, uint64_t now)
{
	struct cour_txpkt *slot;
	uint64_t due;

	/* (with more queued for the peer this is a stream, whose ACKs the window waits for
	 * anyway: a probe would only wake the peer's thread beside a polling application) */
	if (!cour_params.nudge_us || !peer->txwin || peer->via_shm || peer->nudged ||
	    !peer->srtt_us || !cour_peer_sending(peer) || peer->txq || peer->ctrlq)
		return 0;
	slot = cour_txslot(peer, peer->tx_next - 1);
	if (slot->sacked || !slot->sent_us)
		return 0;
	/* and nobody else has spoken since: an endpoint that hears from other peers is busy
	 * with them, and so, on a crowded node, are the cpus its late peer waits for (four
	 * ranks on two cpus: a probe each time a rank lost its cpu, whose thread then took
	 * one from a rank at work, cost a quarter of the random updates' rate) */
	due = COUR_MAX(COUR_MAX(slot->sent_us, peer->last_ack_us), peer->ep->heard_us) +
	      cour_peer_nudge_wait(peer);
	if (now < due)
		return due;
	peer->nudged = true;
	peer->ep->stats.nudges++;
	cour_peer_send_ack(peer, COUR_F_PROBE);
	return 0;
}

/* The acknowledgement fields of any valid packet from the peer. */
static void cour_peer_sack_one(struct cour_peer *peer, uint32_t s, uint64_t now,
			       struct cour_txpkt **fresh)
{
	struct cour_txpkt *slot;

	if (!cour_seq_lt(s, peer->tx_next))
		return;
	slot = cour_txslot(peer, s);
	if (slot->sacked)
		return;
	if (slot->tries == 1 && slot->sent_us)
		*fresh = slot;     /* SACKed as soon as it arrived: a clean RTT sample */
	slot->sacked = true;
	peer->sacked_bytes += slot->len + COUR_PKT_HDR_LEN;
	if (!peer->sack_valid || cour_seq_gt(s, peer->sack_hi)) {
		peer->sack_hi = s;
		peer->sack_valid = true;
	}
}

/* ext: the ACK's full-window SACK bitmap (bit i: packet ack + 1 + i), or NULL. */
void cour_peer_ack(struct cour_peer *peer, const struct cour_base_hdr *h, uint64_t now,
			  const uint8_t *ext, size_t extlen)
{
	uint32_t w = (uint32_t)cour_params.window;
	uint64_t pipe = cour_peer_pipe(peer);
	uint64_t hold = h->type == COUR_PKT_ACK ? h->seq : 0;
	uint32_t una0 = peer->tx_una;

	cour_credit_granted(peer, h->credits);

	/* a resend the peer had already: how late its ACK was (cour_peer_send_ack_via), which
	 * usually came before this one and moved everything */
	if (hold && (h->flags & COUR_F_DUP) && peer->srtt_us) {
		cour_peer_stall_note(peer, hold, now);
		cour_peer_rto_from_srtt(peer);
	}
	if (!peer->txwin || !cour_peer_sending(peer))
		goto push;
	if (cour_seq_gt(h->ack, peer->tx_una) && cour_seq_le(h->ack, peer->tx_next)) {
		struct cour_txpkt *last = cour_txslot(peer, h->ack - 1);
		bool clean = last->tries == 1 && last->sent_us && !last->sacked;

		if (hold && !(h->flags & COUR_F_DUP))
			cour_peer_stall_note(peer, hold, now);

		/* Karn's rule over the whole range: a packet the receiver held behind a hole is
		 * released only when the hole is repaired, so its age measures the repair, not
		 * the path. Sample only when nothing the ACK releases was sent twice. */
		for (uint32_t s = peer->tx_una; clean && s != h->ack; s++)
			clean = cour_txslot(peer, s)->tries <= 1;
		/* An ACK riding on the peer's data carries no hold time. When it left late
		 * (COUR_F_HELD: after the peer's own sending, which in a halo of 1 MiB at MTU
		 * 1500 is over 100 us of copying), its sample serves the timer only. */
		if (clean) {
			uint64_t rtt = cour_us_since(now, last->sent_us);

			cour_peer_rtt_sample(peer, rtt, !(h->flags & COUR_F_HELD) ?
					     cour_peer_net_rtt(peer, last, now, hold) : 0, now);
			if (peer->probe_shift)
				peer->probe_shift--;
		}

		else if (peer->srtt_us)
			cour_peer_rto_from_srtt(peer);   /* new data got through: undo the backoff */
		while (peer->tx_una != h->ack) {
			cour_slot_release(peer, cour_txslot(peer, peer->tx_una));
			peer->tx_una++;
		}
		peer->last_ack_us = now;
		peer->tail_probed = peer->nudged = false;
		peer->silence_warned = false;
		peer->rto_deadline = cour_peer_sending(peer) ? now + peer->rto_us : 0;
		if (peer->rto_deadline)
			cour_ep_timer_at(peer->ep, peer->rto_deadline);
	}
	if ((h->sack || extlen) && peer->tx_una == h->ack) {
		struct cour_txpkt *fresh = NULL;

		for (uint32_t s = h->ack + 1; s != h->ack + 1 + COUR_SACK_BITS; s++)
			if (cour_sack_has(h->sack, h->ack, s))
				cour_peer_sack_one(peer, s, now, &fresh);
		for (uint32_t i = 0; i < extlen * 8 && i + 1 < w; i++)
			if (ext[i / 8] >> (i % 8) & 1)
				cour_peer_sack_one(peer, h->ack + 1 + i, now, &fresh);
		/* (for the timer only: the hold an ACK reports is its cumulative packet's, not
		 * this one's, and a receiver's hold around a hole is long, and no queue) */
		if (fresh)
			cour_peer_rtt_sample(peer, cour_us_since(now, fresh->sent_us), 0, now);
		peer->last_ack_us = now;
		peer->tail_probed = peer->nudged = false;
		cour_peer_fast_rexmit(peer, now);
	}
	cour_peer_cc_acked(peer, pipe - cour_peer_pipe(peer), now);
push:
	/* the probed packet reached the peer twice: the probe was early */
	if (COUR_UNLIKELY(peer->probe_out && h->type == COUR_PKT_ACK &&
			  (h->flags & COUR_F_DUP) && cour_seq_gt(h->ack, peer->probe_seq))) {
		peer->probe_out = false;
		if (peer->probe_shift < COUR_PROBE_SHIFT_MAX)
			peer->probe_shift++;
	}
	/* (the hold speaks of the packet the ACK moved past: only an ACK that moved counts) */
	if (COUR_UNLIKELY(peer->cc.rto_at_us) && cour_params.cc && !peer->via_shm &&
	    cour_cc_rto_spurious(&peer->cc, h->type == COUR_PKT_ACK && (h->flags & COUR_F_DUP),
				 peer->tx_una != una0 ? hold : 0, now - cour_peer_rx_wait(peer),
				 4 * peer->srtt_us + 10000))
		peer->ep->stats.cc_rto_spurious++;
	cour_peer_push(peer);
}

