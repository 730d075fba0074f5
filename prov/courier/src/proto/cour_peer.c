/*
 * Peers, sessions and reliability, sending side: the send window, ACK/SACK processing,
 * retransmission, resets. Incoming packets are cour_peer_rx.c's, timers and liveness
 * cour_peer_live.c's. The design essay is at the top of cour_engine.h, struct cour_peer in
 * cour_peer.h.
 */
#include "proto/cour_engine.h"
#include "proto/cour_peer_int.h"
#include "proto/cour_rel.h"
#include "wire/cour_trace.h"

#include <stdlib.h>
#include <sys/random.h>

#define COUR_RTO_INIT_US 10000

uint32_t cour_session_new(void)
{
	uint32_t s = 0;

	while (!s) {
		if (getrandom(&s, sizeof(s), 0) != sizeof(s))
			s = (uint32_t)cour_now_us() * 2654435761u;
	}
	return s;
}

/* What the send window could hold anyway: the congestion window never needs more. */
static uint32_t cour_peer_cwnd_max(const struct cour_peer *peer)
{
	uint64_t w = COUR_MIN((uint64_t)cour_params.window * peer->mtu, cour_params.sockbuf / 2);

	return (uint32_t)COUR_MIN(w, (uint64_t)UINT32_MAX);
}

static void cour_peer_state_init(struct cour_peer *peer)
{
	uint64_t now = cour_now_us();

	cour_credit_peer_end(peer);             /* a loan ends with its session */
	peer->local_session = cour_session_new();
	peer->remote_session = 0;
	peer->session_offer = 0;
	peer->tx_una = peer->tx_next = 0;
	peer->inflight_bytes = 0;
	peer->sacked_bytes = 0;
	cour_cc_init(&peer->cc, peer->mtu, cour_peer_cwnd_max(peer),
		     (uint32_t)cour_params.cc_target_us, 0, now);
	peer->tx_credit_limit = (uint32_t)cour_params.credits;
	peer->tx_credit_used = 0;
	peer->credit_stalled = false;
	peer->short_rts = 0;
	peer->rts_plain = 0;
	peer->rts_plain_min = UINT32_MAX;
	peer->rts_cma = 0;
	peer->next_msg_id = 0;
	peer->srtt_us = peer->rttvar_us = 0;
	peer->stall_us = peer->stall_at_ms = 0;
	peer->rto_us = COUR_MAX((uint64_t)cour_params.rto_min_us, COUR_RTO_INIT_US);
	peer->rto_deadline = 0;
	peer->probe_shift = 0;
	peer->probe_out = false;
	peer->last_ack_us = now;
	peer->last_heard_us = now;
	peer->probe_deadline = 0;
	peer->refused_us = 0;
	peer->rx_next = 0;
	peer->rx_held = 0;
	peer->credits_granted = (uint32_t)cour_params.credits;
	peer->credits_sent = 0;
	peer->rx_units = 0;
	peer->ack_needed = false;
	peer->ack_for_answer = false;
	peer->answers = false;
	peer->ans_wait_us = 0;
	peer->rx_since_ack = 0;
	peer->rx_stamp_ns = 0;
	peer->ack_late_us = 0;
	peer->ack_deadline = 0;
	peer->rx_cur = NULL;
	peer->rx_rdv_pending = 0;
	peer->rx_split_pending = 0;
	peer->rx_rts_held = 0;
	peer->rma_rx_id = 0;
	peer->rma_rx_err = 0;
	peer->sack_valid = false;
}

static void cour_peer_free(struct cour_pep *ep, struct cour_peer *peer)
{
	HASH_DEL(ep->peers, peer);
	if (peer->on_active)
		DL_DELETE2(ep->active, peer, act_prev, act_next);
	if (ep->peer_last == peer)
		ep->peer_last = NULL;
	cour_shm_peer_detach(peer);
	cour_peer_win_free(peer);
	cour_credit_peer_end(peer);
	free(peer);
	ep->peer_count--;
}

/*
 * Anyone can send us packets from any address, and every sender with a session gets a peer:
 * a flood from spoofed addresses would grow memory without end. Past peer_cap peers, those
 * that never exchanged anything (nothing delivered, nothing sent, no work, not in the AV) are
 * freed: a genuine sender's state is never among them, as its first in-order packet already
 * made rx_next move. If too few go, the cap doubles, so the scan stays rare.
 */
#define COUR_PEER_CAP_MIN 1024
static void cour_peer_evict_strangers(struct cour_pep *ep)
{
	struct cour_peer *peer, *tmp;
	struct cour_rxmsg *m, *mtmp;
	size_t freed = 0;

	/* messages outlive their sender's session (a reset peer looks new): keep their peers */
	/* (a scalable endpoint's unexpected messages wait in its receive contexts' queues) */
	struct cour_rxq **qs = ep->nrxq ? ep->rxqs : &ep->rxq;
	uint32_t nq = ep->nrxq ? ep->nrxq : 1;

	for (uint32_t i = 0; i < nq; i++) {
		struct cour_rxq *q = qs[i];

		if (!q)
			continue;
		DL_FOREACH(q->umsg, m)
			if (m->peer)
				m->peer->pinned = true;
		DL_FOREACH(q->utag, m)
			if (m->peer)
				m->peer->pinned = true;
	}
	HASH_ITER(hh, ep->rdv_by_id, m, mtmp)
		if (m->peer)
			m->peer->pinned = true;
	HASH_ITER(hh, ep->peers, peer, tmp) {
		if (peer->pinned) {
			peer->pinned = false;
			continue;
		}
		if (peer->rx_next || peer->tx_next || peer->on_active || peer->ctrlq ||
		    peer->txq || peer->tx_inflight || peer->tx_wait || peer->rx_cur ||
		    peer->rx_rdv_pending || peer->rx_held || peer->shm ||
		    cour_peer_fi_addr(peer) != FI_ADDR_NOTAVAIL)
			continue;
		cour_peer_free(ep, peer);
		freed++;
	}
	ep->stats.peers_evicted += freed;
	if (ep->peer_count > ep->peer_cap / 2)
		ep->peer_cap *= 2;
	COUR_INFO(FI_LOG_EP_DATA, "freed %zu peers that never exchanged a packet; %zu left, "
		  "next look at %zu\n", freed, ep->peer_count, ep->peer_cap);
}

struct cour_peer *cour_peer_by_addr_locked(struct cour_pep *ep, const struct cour_addr *addr,
					    bool create)
{
	struct cour_peer *peer = ep->peer_last;

	/* packets come in runs from one peer: skip the hash for a repeat */
	if (COUR_LIKELY(peer && cour_addr_eq(&peer->addr, addr)))
		return peer;
	HASH_FIND(hh, ep->peers, addr, sizeof(*addr), peer);
	if (peer)
		ep->peer_last = peer;
	if (peer || !create)
		return peer;
	if (COUR_UNLIKELY(ep->peer_count >= COUR_MAX(ep->peer_cap, (size_t)COUR_PEER_CAP_MIN))) {
		if (!ep->peer_cap)
			ep->peer_cap = COUR_PEER_CAP_MIN;
		cour_peer_evict_strangers(ep);
	}
	peer = calloc(1, sizeof(*peer));
	if (!peer) {
		COUR_WARN(FI_LOG_EP_DATA, "out of memory for a peer\n");
		return NULL;
	}
	ep->peer_count++;
	peer->ep = ep;
	peer->addr = *addr;
	peer->sa_len = (socklen_t)cour_addr_to_sockaddr(addr, &peer->sa);
	peer->fi_addr = FI_ADDR_NOTAVAIL;
	peer->av_gen = UINT64_MAX;
	peer->pidfd = -1;
	cour_peer_mtu_set(peer, cour_wire_peer_mtu(ep, addr));
	peer->unroutable = !peer->mtu;
	cour_peer_state_init(peer);
	HASH_ADD(hh, ep->peers, addr, sizeof(peer->addr), peer);
	return peer;
}

/* The peer of fi_addr: a per-endpoint array caches the AV lookup and the hash lookup, and is
 * dropped whenever the AV removes anything (generation). */
struct cour_peer *cour_peer_get_locked(struct cour_pep *ep, fi_addr_t fi_addr)
{
	const struct cour_addr *addr;
	struct cour_peer *peer;

	if (COUR_UNLIKELY(!ep->av_gen))
		return NULL;
	if (COUR_UNLIKELY(ep->peer_cache_gen != *ep->av_gen)) {
		if (ep->peer_by_fiaddr)
			memset(ep->peer_by_fiaddr, 0,
			       ep->peer_cache_len * sizeof(*ep->peer_by_fiaddr));
		ep->peer_cache_gen = *ep->av_gen;
	}
	if (COUR_LIKELY(fi_addr < ep->peer_cache_len && ep->peer_by_fiaddr[fi_addr]))
		return ep->peer_by_fiaddr[fi_addr];

	addr = ep->up->av_lookup(ep, fi_addr);
	if (!addr)
		return NULL;
	peer = cour_peer_by_addr_locked(ep, addr, true);
	if (!peer)
		return NULL;
	if (fi_addr >= ep->peer_cache_len && fi_addr < (1u << 24)) {
		size_t n = COUR_MAX((size_t)fi_addr + 1, ep->peer_cache_len * 2);
		struct cour_peer **c = realloc(ep->peer_by_fiaddr, n * sizeof(*c));
		if (c) {
			memset(c + ep->peer_cache_len, 0, (n - ep->peer_cache_len) * sizeof(*c));
			ep->peer_by_fiaddr = c;
			ep->peer_cache_len = n;
		}
	}
	if (fi_addr < ep->peer_cache_len)
		ep->peer_by_fiaddr[fi_addr] = peer;
	return peer;
}

fi_addr_t cour_peer_fi_addr(struct cour_peer *peer)
{
	struct cour_pep *ep = peer->ep;

	if (!ep->av_gen)
		return FI_ADDR_NOTAVAIL;
	if (peer->av_gen != *ep->av_gen || peer->fi_addr == FI_ADDR_NOTAVAIL) {
		peer->fi_addr = ep->up->av_reverse(ep, &peer->addr);
		peer->av_gen = *ep->av_gen;
	}
	return peer->fi_addr;
}

void cour_peer_activate(struct cour_peer *peer)
{
	if (!peer->on_active) {
		DL_APPEND2(peer->ep->active, peer, act_prev, act_next);
		peer->on_active = true;
	}
}

static void cour_txe_move(struct cour_txe *txe, struct cour_txe **to)
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

void cour_peer_send_ack(struct cour_peer *peer, uint16_t flags)
{
	cour_peer_send_ack_via(peer, flags, false);
}

/* An ACK that answers a packet which came over UDP goes back over UDP (over_udp). In the
 * ring it would be a put into a peer that is still sending to us over UDP: at start-up, when
 * every pair of a host moves to its ring, those ACKs were more than half of all puts, and
 * each put may map one more page of the peer's ring in us (4 KiB per peer at 32 ranks). */
void cour_peer_send_ack_via(struct cour_peer *peer, uint16_t flags, bool over_udp)
{
	struct cour_pkt_hdr hdr;

	uint8_t bm[COUR_SACK_EXT_MAX];
	struct iovec iov = { .iov_base = bm, .iov_len = 0 };
	uint32_t w = peer->rxcap;

	/* Packets held beyond the header's 32 SACK bits would look lost to the sender: describe
	 * the whole window in the payload. */
	if (peer->rx_held && w - 1 > COUR_SACK_BITS) {
		memset(bm, 0, sizeof(bm));
		for (uint32_t i = 0; i + 1 < w && i < COUR_SACK_EXT_MAX * 8; i++)
			if (cour_rxslot_of(peer, peer->rx_next + 1 + i)->buf) {
				bm[i / 8] |= (uint8_t)(1u << (i % 8));
				iov.iov_len = i / 8 + 1;
			}
		if (iov.iov_len * 8 <= COUR_SACK_BITS)
			iov.iov_len = 0;        /* the header says it all */
	}
	/* an ACK of its own while one waited for our answer: none came in time (the ACK delay
	 * ran out, or the sender asked): the next last piece is acknowledged at its pass end */
	if (peer->ack_for_answer)
		peer->answers = false;
	memset(&hdr.base, 0, sizeof(hdr.base));
	hdr.base.type = COUR_PKT_ACK;
	hdr.base.flags = flags;
	/* an ACK is unsequenced: its seq field says how long, in us, we held the packet it
	 * acknowledges last since the kernel took it (0: unknown). The sender takes that
	 * from its RTT sample: time this process was not running is no queue in the network */
	if (peer->rx_stamp_ns) {
		uint64_t held = cour_us_since(cour_wall_ns(), peer->rx_stamp_ns) / 1000u;

		/* A DUP ACK answers a resend: once the packet was acknowledged, the hold is that
		 * ACK's, not the time since (the resend may answer a lost ACK: then that one was
		 * quick). A slow ACK drew the resend; a quick one, lost, did not say we were late. */
		if ((flags & COUR_F_DUP) && !peer->rx_since_ack)
			held = peer->ack_late_us;
		hdr.base.seq = (uint32_t)COUR_MIN(COUR_MAX(held, (uint64_t)1), (uint64_t)UINT32_MAX);
	}
	cour_hdr_finish(peer, &hdr, COUR_BASE_HDR_LEN, &iov, iov.iov_len ? 1 : 0);
	if ((over_udp ? cour_wire_send_now(peer->ep, &peer->sa, peer->sa_len, &hdr,
					   COUR_BASE_HDR_LEN, &iov, iov.iov_len ? 1 : 0) :
			cour_peer_send_now(peer, &hdr, COUR_BASE_HDR_LEN, &iov,
					   iov.iov_len ? 1 : 0)) == 0) {
		peer->ep->stats.acks_sent++;
		return;
	}
	/* the wire was full: try again soon */
	peer->ack_needed = true;
	peer->ack_deadline = cour_ep_clock(peer->ep) + (uint64_t)cour_params.ack_delay_us;
	cour_ep_timer_at(peer->ep, peer->ack_deadline);
	cour_peer_activate(peer);
}

void cour_send_reset(struct cour_pep *ep, struct cour_peer *peer, uint32_t their_session)
{
	cour_send_reset_from(ep, peer, peer->local_session, their_session);
}

void cour_send_reset_from(struct cour_pep *ep, struct cour_peer *peer, uint32_t ours,
			  uint32_t their_session)
{
	struct cour_pkt_hdr hdr;

	memset(&hdr.base, 0, sizeof(hdr.base));
	hdr.base.type = COUR_PKT_RESET;
	hdr.base.version = COUR_WIRE_VERSION;
	hdr.base.src_session = ours;
	hdr.base.dst_session = their_session;
	cour_hdr_seal(ep, &hdr, COUR_BASE_HDR_LEN, NULL, 0);
	cour_peer_send_now(peer, &hdr, COUR_BASE_HDR_LEN, NULL, 0);
}

static void cour_peer_fail_list(struct cour_peer *peer, struct cour_txe **list, int prov_errno)
{
	struct cour_txe *txe, *tmp;
	int err = cour_errno_fi(prov_errno) == FI_EHOSTUNREACH ? FI_EHOSTUNREACH :
		  prov_errno == COUR_E_PEER_RESET ? FI_ECONNRESET :
		  prov_errno == COUR_E_EP_CLOSED ? FI_ECANCELED : FI_EIO;

	DL_FOREACH_SAFE(*list, txe, tmp) {
		cour_txe_move(txe, NULL);
		cour_txe_complete(peer->ep, txe, err, prov_errno);
	}
}

/* Everything in flight with the peer dies with its session; the next packet starts a new one. */
void cour_peer_reset(struct cour_peer *peer, int prov_errno)
{
	struct cour_pep *ep = peer->ep;
	uint32_t w = peer->rxcap;

	if (COUR_UNLIKELY(ep->up->peer_lost != NULL))
		ep->up->peer_lost(ep, &peer->addr, prov_errno);
	/* the wire's batch may still point into the buffers of what fails below: out first,
	 * since the application may read the error (a progress thread's CQ) and free them
	 * before this pass would flush */
	if (!peer->via_shm)
		cour_wire_flush(ep);

	if (peer->txwin)
		for (uint32_t s = peer->tx_una; s != peer->tx_next; s++)
			cour_txslot(peer, s)->txe = NULL;
	if (peer->rxwin) {
		for (uint32_t i = 0; i < w; i++) {
			if (peer->rxwin[i].buf)
				cour_pool_put(&ep->rxbuf_pool, peer->rxwin[i].buf);
			peer->rxwin[i].buf = NULL;
		}
	}
	cour_peer_fail_list(peer, &peer->ctrlq, prov_errno);
	cour_peer_fail_list(peer, &peer->txq, prov_errno);
	cour_peer_fail_list(peer, &peer->tx_inflight, prov_errno);
	cour_peer_fail_list(peer, &peer->tx_wait, prov_errno);
	cour_msg_peer_reset(peer, prov_errno);
	cour_rma_split_peer_reset(peer);        /* before detach: it may ask if the peer lives */
	cour_shm_peer_detach(peer);
	cour_peer_state_init(peer);
}

/* Operations the peer still has of ours: packets to build or to be acknowledged, operations
 * waiting for its answer. What an endpoint's close lingers for. */
size_t cour_peer_tx_pending(const struct cour_peer *peer)
{
	const struct cour_txe *t;
	size_t n = 0;

	DL_FOREACH(peer->ctrlq, t)
		n++;
	DL_FOREACH(peer->txq, t)
		n++;
	DL_FOREACH(peer->tx_inflight, t)
		n++;
	DL_FOREACH(peer->tx_wait, t)
		n++;
	return n ? n : cour_peer_sending(peer);
}

void cour_peer_free_all(struct cour_pep *ep)
{
	struct cour_peer *peer, *tmp;

	HASH_ITER(hh, ep->peers, peer, tmp) {
		/* What the application already took must still be acknowledged: the sender's
		 * transmit completion waits for it, and a delayed ACK would otherwise die here. */
		if (peer->ack_needed)
			cour_peer_send_ack(peer, 0);
		cour_peer_reset(peer, COUR_E_EP_CLOSED);
		cour_peer_free(ep, peer);
	}
	free(ep->peer_by_fiaddr);
	ep->peer_by_fiaddr = NULL;
	ep->peer_cache_len = 0;
	ep->peer_last = NULL;
}
/* ---- a scalable endpoint's receive queues (cour_sep.c) ---- */

int cour_pep_rxq_open(struct cour_pep *ep, uint32_t i, struct cour_rxq **q)
{
	if (i >= ep->nrxq)
		return -FI_EINVAL;
	if (!ep->rxqs[i]) {
		/* kept until the endpoint closes: messages on their way may still name it */
		ep->rxqs[i] = calloc(1, sizeof(**q));
		if (!ep->rxqs[i])
			return -FI_ENOMEM;
		cour_pool_init(&ep->rxqs[i]->rxe_pool, sizeof(struct cour_rxe), 64, 0);
	}
	*q = ep->rxqs[i];
	return 0;
}

/* Operations of a transmit context that closes report to nobody. */
void cour_peer_disown_locked(struct cour_pep *ep, const void *owner)
{
	struct cour_peer *peer, *ptmp;
	struct cour_txe *txe;

	HASH_ITER(hh, ep->peers, peer, ptmp) {
		struct cour_txe *lists[] = { peer->ctrlq, peer->txq, peer->tx_inflight,
					     peer->tx_wait };

		for (size_t l = 0; l < sizeof(lists) / sizeof(lists[0]); l++)
			DL_FOREACH(lists[l], txe)
				if (txe->owner == owner)
					txe->owner = NULL;
	}
}

static void cour_pep_rxqs_free(struct cour_pep *ep)
{
	for (uint32_t i = 0; i < ep->nrxq; i++) {
		if (!ep->rxqs[i])
			continue;
		cour_pool_fini(&ep->rxqs[i]->rxe_pool);
		free(ep->rxqs[i]);
	}
	free(ep->rxqs);
	ep->rxqs = NULL;
	ep->nrxq = 0;
}

static void cour_pep_pools_fini(struct cour_pep *ep)
{
	cour_pep_rxqs_free(ep);
	cour_pool_fini(&ep->txe_pool);
	cour_pool_fini(&ep->own_rxq.rxe_pool);
	cour_pool_fini(&ep->rxmsg_pool);
	cour_pool_fini(&ep->inject_pool);
	cour_pool_fini(&ep->rxbuf_pool);
}

int cour_pep_open(struct cour_pep *ep, struct cour_pdom *pdom, const struct cour_up_ops *up,
		  const struct cour_addr *want)
{
	const struct cour_wire_ops *ops = cour_wire_lookup(cour_params.wire);
	int ret;

	if (!ops)
		return -FI_EINVAL;
	ep->pdom = pdom;
	ep->lock = pdom->lock;
	ep->up = up;
	/* a wire may need more than a packet: a GRO train is read whole, then split */
	ep->rxbuf_size = COUR_MAX((size_t)COUR_MAX_PKT, (size_t)COUR_WIRE_RXBUF_MIN) + 64;
	cour_pool_init(&ep->txe_pool, sizeof(struct cour_txe), 64, 0);
	cour_pool_init(&ep->own_rxq.rxe_pool, sizeof(struct cour_rxe), 64, 0);  /* size: a floor */
	if (!ep->rxq)
		ep->rxq = &ep->own_rxq;
	cour_pool_init(&ep->rxmsg_pool, sizeof(struct cour_rxmsg), 64, 0);
	/* inject copies, and the operands of atomics (with their compare values); grown about
	 * a MiB at a time, as each object's first word is written when a chunk is added */
	size_t inj = COUR_MAX(cour_params.inject_size, 2 * COUR_ATOMIC_MAX_BYTES);
	cour_pool_init(&ep->inject_pool, inj, COUR_MAX((size_t)4, ((size_t)1 << 20) / inj),
		       cour_params.tx_size);
	cour_pool_init(&ep->rxbuf_pool, ep->rxbuf_size, COUR_RX_BATCH, 1024);
	cour_wire_init(&ep->wire, ops, &cour_ep_wire_rx, ep, &ep->rxbuf_pool, ep->rxbuf_size);
	ep->wire.connect_to = ep->wire_peer;
	/* only the reliable endpoint's peers ever wait for an ACK of ours */
	if (pdom->bell_epfd > 0 && ep->type == FI_EP_RDM && cour_params.nudge_us)
		ep->wire.bell_epfd = pdom->bell_epfd;
	if (cour_params.fault) {
		ret = cour_fault_wrap(&ep->wire, cour_params.fault);
		if (ret)
			goto err_pools;
	}
	if (ep->auth_key_len) {
		ret = cour_wire_auth(&ep->wire, ep->auth_key, ep->auth_key_len,
				     (uint32_t)cour_params.auth_skew_s);
		if (ret)
			goto err_unwrap;
	}
	ret = ep->wire.ops->open(&ep->wire, want);
	if (ret)
		goto err_unwrap;
	if (ep->wire.mac && cour_addr_is_wildcard(&ep->wire.addr)) {
		/* a key's tag covers the sender's address (cour_mac.h), which a socket bound
		 * to every address does not know until the kernel picks one per datagram */
		COUR_WARN(FI_LOG_EP_CTRL, "an endpoint with a key cannot bind the wildcard "
			  "address: give it a host address (src_addr, FI_COURIER_IFACE_ADDR)\n");
		ep->wire.ops->close(&ep->wire);
		ret = -FI_EINVAL;
		goto err_unwrap;
	}
	cour_trace_open(&ep->wire);
	cour_shm_ep_open(ep);
	return 0;

err_unwrap:
	cour_wire_auth_fini(&ep->wire);
	cour_fault_unwrap(&ep->wire);
err_pools:
	cour_pep_pools_fini(ep);
	return ret;
}

void cour_pep_free(struct cour_pep *ep)
{
	cour_wire_auth_fini(&ep->wire);
	cour_trace_close(&ep->wire);
	cour_fault_unwrap(&ep->wire);
	cour_pep_pools_fini(ep);
}

void cour_txe_complete(struct cour_pep *ep, struct cour_txe *txe, int err, int prov_errno)
{
	if (!cour_txe_internal(txe)) {
		ep->up->tx_done(ep, txe, err, prov_errno);
		if (!err)
			ep->stats.tx_msgs++;
		ep->tx_outstanding--;
	}
	free(txe->snap);
	if (txe->inject_buf)
		cour_pool_put(&ep->inject_pool, txe->inject_buf);
	cour_pool_put(&ep->txe_pool, txe);
}

void cour_hdr_finish(struct cour_peer *peer, struct cour_pkt_hdr *hdr, size_t hdr_len,
		     const struct iovec *iov, size_t iovcnt)
{
	cour_hdr_finish_fields(peer, hdr);
	cour_hdr_seal(peer ? peer->ep : NULL, hdr, hdr_len, iov, iovcnt);
}

void cour_hdr_seal(struct cour_pep *ep, struct cour_pkt_hdr *hdr, size_t hdr_len,
		   const struct iovec *iov, size_t iovcnt)
{
	uint32_t crc;

	/* an ACK's payload (a SACK bitmap) and a HELLO's are always checked (cour_pkt_valid) */
	bool pcsum = cour_params.checksum ||
		     (iovcnt && (hdr->base.type == COUR_PKT_ACK || hdr->base.type == COUR_PKT_HELLO));

	if (pcsum)
		hdr->base.flags |= COUR_F_PCSUM;
	hdr->base.crc = 0;
	if (ep && ep->wire.mac) {
		hdr->base.flags |= COUR_F_MAC;
		/* the datagram's tag covers every byte: a crc would add nothing (unless asked) */
		if (!cour_params.checksum)
			return;
	}
	crc = cour_crc32c(0, hdr, hdr_len);
	if (pcsum)
		for (size_t i = 0; i < iovcnt; i++)
			crc = cour_crc32c(crc, iov[i].iov_base, iov[i].iov_len);
	hdr->base.crc = crc;
}

void cour_hdr_finish_fields(struct cour_peer *peer, struct cour_pkt_hdr *hdr)
{
	if (peer) {
		hdr->base.ack = peer->rx_next;
		hdr->base.sack = 0;
		if (peer->rx_held) {
			for (uint32_t i = 0; i < cour_sack_span(peer->rxcap); i++) {
				uint32_t s = peer->rx_next + 1 + i;
				if (cour_rxslot_of(peer, s)->buf)
					hdr->base.sack = cour_sack_mark(hdr->base.sack,
									peer->rx_next, s);
			}
		}
		hdr->base.credits = peer->credits_granted;
		hdr->base.src_session = peer->local_session;
		hdr->base.dst_session = peer->remote_session;
		peer->credits_sent = peer->credits_granted;
		/* Whatever we send carries the ACK: a pending delayed ACK is no longer needed.
		 * A packet of ours that carries it late says so (COUR_F_HELD): the time we held
		 * the peer's packet is no queue on the path, and only an ACK of its own says
		 * how long that was. Up to the target, the sample stays within one target of
		 * the queue: through shaped switch ports, where every host sends and receives,
		 * such samples are much of what shows the queue (docs/protocol.md). */
		hdr->base.flags &= (uint16_t)~COUR_F_HELD;
		if (peer->rx_since_ack) {
			uint64_t held = peer->rx_stamp_ns ?
				cour_us_since(cour_wall_ns(), peer->rx_stamp_ns) / 1000u : 0;

			peer->ack_late_us = (uint32_t)COUR_MIN(held, (uint64_t)UINT32_MAX);
			if (held > (uint64_t)cour_params.cc_target_us &&
			    hdr->base.type != COUR_PKT_ACK)
				hdr->base.flags |= COUR_F_HELD;
		}
		peer->ack_needed = false;
		peer->ack_for_answer = false;
		peer->rx_since_ack = 0;
	}
	hdr->base.version = COUR_WIRE_VERSION;
}

