/*
 * Peers, sessions and reliability, sending side and timers: the send window, ACK/SACK
 * processing, retransmission, liveness, resets. Incoming packets are cour_peer_rx.c's. The
 * design essay is in cour_ep.h above struct cour_peer.
 */
#include "proto/cour_engine.h"
#include "proto/cour_rel.h"

#include <stdlib.h>
#include <sys/random.h>

#define COUR_RTO_INIT_US 10000

static uint32_t cour_session_new(void)
{
	uint32_t s = 0;

	while (!s) {
		if (getrandom(&s, sizeof(s), 0) != sizeof(s))
			s = (uint32_t)cour_now_us() * 2654435761u;
	}
	return s;
}

static void cour_peer_state_init(struct cour_peer *peer)
{
	uint64_t now = cour_now_us();

	peer->local_session = cour_session_new();
	peer->remote_session = 0;
	peer->tx_una = peer->tx_next = 0;
	peer->inflight_bytes = 0;
	peer->tx_credit_limit = (uint32_t)cour_params.credits;
	peer->tx_credit_used = 0;
	peer->credit_stalled = false;
	peer->next_msg_id = 0;
	peer->srtt_us = peer->rttvar_us = 0;
	peer->rto_us = COUR_MAX((uint64_t)cour_params.rto_min_us, COUR_RTO_INIT_US);
	peer->rto_deadline = 0;
	peer->last_ack_us = now;
	peer->last_heard_us = now;
	peer->probe_deadline = 0;
	peer->refused_us = 0;
	peer->rx_next = 0;
	peer->rx_held = 0;
	peer->credits_granted = (uint32_t)cour_params.credits;
	peer->credits_sent = 0;
	peer->rx_msgs = 0;
	peer->ack_needed = false;
	peer->rx_since_ack = 0;
	peer->ack_deadline = 0;
	peer->rx_cur = NULL;
	peer->rx_rdv_pending = 0;
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
	free(peer->txwin);
	free(peer->rxwin);
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
	DL_FOREACH(ep->unexp_msg, m)
		if (m->peer)
			m->peer->pinned = true;
	DL_FOREACH(ep->unexp_tag, m)
		if (m->peer)
			m->peer->pinned = true;
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
	peer->mtu = cour_wire_peer_mtu(ep, addr);
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
		memset(ep->peer_by_fiaddr, 0, ep->peer_cache_len * sizeof(*ep->peer_by_fiaddr));
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
	/* the first sends to a peer ask whether it shares our host (wire/cour_shm.c) */
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

static void cour_slot_send(struct cour_peer *peer, struct cour_txpkt *slot, uint64_t now)
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
	cour_wire_queue(peer->ep, peer, &slot->hdr, COUR_PKT_HDR_LEN, iov, n);
}

static void cour_slot_release(struct cour_peer *peer, struct cour_txpkt *slot);

/* Packets in the peer's ring are delivered: release them in order up to the first one the
 * ring refused. */
static void cour_peer_shm_release(struct cour_peer *peer, uint64_t now)
{
	uint32_t w = (uint32_t)cour_params.window;

	while (peer->tx_una != peer->tx_next && peer->txwin[peer->tx_una % w].sent_us) {
		cour_slot_release(peer, &peer->txwin[peer->tx_una % w]);
		peer->tx_una++;
	}
	peer->last_ack_us = now;
	if (peer->tx_una == peer->tx_next)
		peer->rto_deadline = 0;
}

/* Resend, in order, what a full ring refused; false while the ring stays full. */
static bool cour_peer_shm_retry(struct cour_peer *peer, uint64_t now)
{
	uint32_t w = (uint32_t)cour_params.window;

	peer->shm_blocked = false;
	peer->shm_retrying = true;
	for (uint32_t s = peer->tx_una; s != peer->tx_next && !peer->shm_blocked; s++)
		cour_slot_send(peer, &peer->txwin[s % w], now);
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

/* Build the next packet of txe into the window; false when txe has nothing more to build. */
static bool cour_peer_build(struct cour_peer *peer, struct cour_txe *txe, uint64_t now)
{
	uint32_t w = (uint32_t)cour_params.window;
	struct cour_txpkt *slot = &peer->txwin[peer->tx_next % w];
	uint32_t room = peer->mtu - (uint32_t)COUR_PKT_HDR_LEN;
	uint64_t len = 0;

	if (cour_pkt_has_payload[txe->op_type])
		len = COUR_MIN(txe->total_len - txe->built, (uint64_t)room);

	memset(&slot->hdr, 0, sizeof(slot->hdr));
	slot->hdr.base.type = txe->op_type;
	slot->hdr.base.flags = txe->hdr_flags;
	slot->hdr.base.seq = peer->tx_next;
	slot->hdr.msg.msg_id = txe->msg_id;
	slot->hdr.msg.rx_id = txe->rx_id;
	slot->hdr.msg.tag = txe->tag;
	slot->hdr.msg.data = txe->data;
	slot->hdr.msg.total_len = txe->msg_len;
	/* single copy: the peer moves the bytes itself, from or to this address */
	slot->hdr.msg.offset = (txe->hdr_flags & COUR_F_CMA) && txe->iov_count &&
			       txe->op_type != COUR_PKT_RDATA ?
			       (uint64_t)(uintptr_t)txe->iov[0].iov_base : txe->built;
	slot->hdr.msg.raddr = txe->raddr;
	slot->txe = txe;
	slot->offset = txe->built;
	slot->len = (uint32_t)len;
	slot->tries = 0;
	slot->sacked = false;

	if (peer->tx_una == peer->tx_next)
		peer->last_ack_us = now;    /* the silence clock starts with the first packet out */
	peer->tx_next++;
	peer->inflight_bytes += len + COUR_PKT_HDR_LEN;
	txe->built += len;
	txe->pkts_out++;
	cour_slot_send(peer, slot, now);
	if (!peer->rto_deadline) {
		peer->rto_deadline = now + peer->rto_us;
		cour_ep_timer_at(peer->ep, peer->rto_deadline);
	}

	/* single-packet types are built once; data types when every byte is in a packet */
	bool more = txe->built < txe->total_len;
	if (!more) {
		cour_txe_move(txe, &peer->tx_inflight);
		txe->state = COUR_TXE_WAIT_ACK;
	}
	/* after the move: releasing the last packet may complete txe */
	if (peer->via_shm)
		cour_peer_shm_release(peer, now);
	return more;
}

/* Room for one more packet. A peer whose ring we mapped while UDP packets were in flight
 * gets nothing more over UDP: once those are acknowledged (at once: a receiver acknowledges
 * a mapped peer's UDP packets without delay) everything moves to the ring. Sending on over
 * UDP instead kept a busy stream off the ring for good, as the window never emptied. */
static bool cour_peer_window_open(struct cour_peer *peer)
{
	return peer->tx_next - peer->tx_una < (uint32_t)cour_params.window &&
	       peer->inflight_bytes < cour_params.sockbuf / 2 && !peer->shm_blocked &&
	       !(peer->shm && !peer->via_shm);
}

void cour_peer_push(struct cour_peer *peer)
{
	struct cour_pep *ep = peer->ep;
	uint64_t now;

	if (!peer->ctrlq && !peer->txq)
		return;
	if (COUR_UNLIKELY(!peer->txwin)) {
		peer->txwin = calloc(cour_params.window, sizeof(*peer->txwin));
		if (!peer->txwin) {
			COUR_WARN(FI_LOG_EP_DATA, "out of memory for a send window\n");
			return;
		}
	}
	/* to the ring once nothing sent over UDP is unacknowledged: the ring's packets count as
	 * acknowledged the moment they are in, which is only right in order */
	if (peer->shm && !peer->via_shm && peer->tx_una == peer->tx_next)
		peer->via_shm = true;
	now = cour_now_us();
	while (peer->ctrlq && cour_peer_window_open(peer))
		cour_peer_build(peer, peer->ctrlq, now);
	while (peer->txq && cour_peer_window_open(peer)) {
		struct cour_txe *txe = peer->txq;

		if (txe->built == 0 && cour_pkt_needs_credit(txe->op_type)) {
			if (!cour_seq_lt(peer->tx_credit_used, peer->tx_credit_limit)) {
				if (!peer->credit_stalled) {
					ep->stats.credit_stalls++;
					peer->last_heard_us = cour_now_us();
				}
				peer->credit_stalled = true;
				break;
			}
			peer->credit_stalled = false;
			peer->probe_deadline = 0;
			peer->tx_credit_used++;
		}
		while (cour_peer_build(peer, txe, now) && cour_peer_window_open(peer))
			;
	}
	if ((peer->ctrlq || peer->txq) && !cour_peer_window_open(peer) && !peer->shm_blocked)
		ep->stats.window_stalls++;
	cour_wire_flush(ep);
}

static void cour_peer_rtt_sample(struct cour_peer *peer, uint64_t rtt)
{
	struct cour_rtt_est est = {
		.srtt_us = peer->srtt_us, .rttvar_us = peer->rttvar_us, .rto_us = peer->rto_us,
	};

	cour_rtt_update(&est, rtt, (uint64_t)cour_params.rto_min_us,
			(uint64_t)cour_params.rto_max_us);
	peer->srtt_us = est.srtt_us;
	peer->rttvar_us = est.rttvar_us;
	peer->rto_us = est.rto_us;
	peer->ep->stats.rtt_srtt_us = peer->srtt_us;
}

/* The timeout the current estimate gives, without a new sample: ends a backoff. */
static void cour_peer_rto_from_srtt(struct cour_peer *peer)
{
	struct cour_rtt_est est = { .srtt_us = peer->srtt_us, .rttvar_us = peer->rttvar_us };

	peer->rto_us = cour_rtt_rto(&est, (uint64_t)cour_params.rto_min_us,
				    (uint64_t)cour_params.rto_max_us);
}

static void cour_slot_release(struct cour_peer *peer, struct cour_txpkt *slot)
{
	struct cour_txe *txe = slot->txe;

	peer->inflight_bytes -= slot->len + COUR_PKT_HDR_LEN;
	slot->txe = NULL;
	if (txe) {
		txe->pkts_out--;
		cour_txe_check_done(peer, txe);
	}
}

/* The highest SACKed sequence number still in the window, or false if nothing is SACKed.
 * Kept as packets are SACKed, so the timer pass and every ACK need no window scan. */
static bool cour_peer_last_sacked(const struct cour_peer *peer, uint32_t *last)
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
	uint32_t w = (uint32_t)cour_params.window, s, last, above = 0;
	uint64_t again = COUR_MAX(peer->srtt_us + 4 * peer->rttvar_us, 50u);
	bool sent = false;

	if (!cour_peer_last_sacked(peer, &last))
		return;
	for (s = last;; s--) {
		struct cour_txpkt *slot = &peer->txwin[s % w];

		if (slot->sacked) {
			above++;
		} else if ((slot->tries == 1 && above >= 3) ||
			   (slot->tries > 1 && cour_us_since(now, slot->sent_us) >= again)) {
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
static uint64_t cour_peer_hole_timer(struct cour_peer *peer, uint64_t now)
{
	uint32_t w = (uint32_t)cour_params.window, last;
	uint64_t again = COUR_MAX(2 * peer->srtt_us, 200u), due = 0;
	bool sent = false;

	if (!peer->txwin || peer->tx_una == peer->tx_next || !cour_peer_last_sacked(peer, &last))
		return 0;
	for (uint32_t s = peer->tx_una; s != last; s++) {
		struct cour_txpkt *slot = &peer->txwin[s % w];

		if (slot->sacked)
			continue;
		if (cour_us_since(now, slot->sent_us) >= again) {
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

/* The acknowledgement fields of any valid packet from the peer. */
static void cour_peer_sack_one(struct cour_peer *peer, uint32_t s, uint64_t now,
			       struct cour_txpkt **fresh)
{
	struct cour_txpkt *slot = &peer->txwin[s % (uint32_t)cour_params.window];

	if (!cour_seq_lt(s, peer->tx_next) || slot->sacked)
		return;
	if (slot->tries == 1 && slot->sent_us)
		*fresh = slot;     /* SACKed as soon as it arrived: a clean RTT sample */
	slot->sacked = true;
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

	if (cour_seq_gt(h->credits, peer->tx_credit_limit) &&
	    cour_seq_le(h->credits - (uint32_t)cour_params.credits, peer->tx_credit_used + 1u))
		peer->tx_credit_limit = h->credits;

	if (!peer->txwin || peer->tx_una == peer->tx_next)
		goto push;
	if (cour_seq_gt(h->ack, peer->tx_una) && cour_seq_le(h->ack, peer->tx_next)) {
		struct cour_txpkt *last = &peer->txwin[(h->ack - 1) % w];
		bool clean = last->tries == 1 && last->sent_us && !last->sacked;

		/* Karn's rule over the whole range: a packet the receiver held behind a hole is
		 * released only when the hole is repaired, so its age measures the repair, not
		 * the path. Sample only when nothing the ACK releases was sent twice. */
		for (uint32_t s = peer->tx_una; clean && s != h->ack; s++)
			clean = peer->txwin[s % w].tries <= 1;
		if (clean)
			cour_peer_rtt_sample(peer, cour_us_since(now, last->sent_us));
		else if (peer->srtt_us)
			cour_peer_rto_from_srtt(peer);   /* new data got through: undo the backoff */
		while (peer->tx_una != h->ack) {
			cour_slot_release(peer, &peer->txwin[peer->tx_una % w]);
			peer->tx_una++;
		}
		peer->last_ack_us = now;
		peer->silence_warned = false;
		peer->rto_deadline = peer->tx_una == peer->tx_next ? 0 : now + peer->rto_us;
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
		if (fresh)
			cour_peer_rtt_sample(peer, cour_us_since(now, fresh->sent_us));
		peer->last_ack_us = now;
		cour_peer_fast_rexmit(peer, now);
	}
push:
	cour_peer_push(peer);
}

void cour_peer_send_ack(struct cour_peer *peer, uint16_t flags)
{
	struct cour_pkt_hdr hdr;

	uint8_t bm[COUR_SACK_EXT_MAX];
	struct iovec iov = { .iov_base = bm, .iov_len = 0 };
	uint32_t w = (uint32_t)cour_params.window;

	/* Packets held beyond the header's 32 SACK bits would look lost to the sender: describe
	 * the whole window in the payload. */
	if (peer->rx_held && peer->rxwin && w - 1 > COUR_SACK_BITS) {
		memset(bm, 0, sizeof(bm));
		for (uint32_t i = 0; i + 1 < w && i < COUR_SACK_EXT_MAX * 8; i++)
			if (peer->rxwin[(peer->rx_next + 1 + i) % w].buf) {
				bm[i / 8] |= (uint8_t)(1u << (i % 8));
				iov.iov_len = i / 8 + 1;
			}
		if (iov.iov_len * 8 <= COUR_SACK_BITS)
			iov.iov_len = 0;        /* the header says it all */
	}
	memset(&hdr.base, 0, sizeof(hdr.base));
	hdr.base.type = COUR_PKT_ACK;
	hdr.base.flags = flags;
	cour_hdr_finish(peer, &hdr, COUR_BASE_HDR_LEN, &iov, iov.iov_len ? 1 : 0);
	if (cour_peer_send_now(peer, &hdr, COUR_BASE_HDR_LEN, &iov, iov.iov_len ? 1 : 0) == 0) {
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
	struct cour_pkt_hdr hdr;

	memset(&hdr.base, 0, sizeof(hdr.base));
	hdr.base.type = COUR_PKT_RESET;
	hdr.base.version = COUR_WIRE_VERSION;
	hdr.base.src_session = peer->local_session;
	hdr.base.dst_session = their_session;
	hdr.base.crc = cour_crc32c(0, &hdr, COUR_BASE_HDR_LEN);
	cour_peer_send_now(peer, &hdr, COUR_BASE_HDR_LEN, NULL, 0);
}

/* Grant one more eager message to the peer; the grant rides on the next packet, or on an ACK
 * soon if half the credits are waiting to go back. */
void cour_peer_credit_return(struct cour_peer *peer)
{
	peer->credits_granted++;
	if (peer->credits_granted - peer->credits_sent >= (uint32_t)cour_params.credits / 2) {
		cour_peer_send_ack(peer, 0);
		return;
	}
	if (!peer->ack_needed) {
		peer->ack_needed = true;
		peer->ack_deadline = cour_ep_clock(peer->ep) + (uint64_t)cour_params.ack_delay_us;
		cour_ep_timer_at(peer->ep, peer->ack_deadline);
	}
	cour_peer_activate(peer);
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
	uint32_t w = (uint32_t)cour_params.window;

	if (peer->txwin)
		for (uint32_t s = peer->tx_una; s != peer->tx_next; s++)
			peer->txwin[s % w].txe = NULL;
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

/* Silence this long is said once (it may be a debugger or a descheduled process): what we
 * wait for and when the peer will be given up. */
static void cour_peer_silence_warn(struct cour_peer *peer, uint64_t quiet_us)
{
	char str[80];

	if (peer->silence_warned || quiet_us < (uint64_t)cour_params.peer_warn_ms * 1000)
		return;
	peer->silence_warned = true;
	peer->ep->stats.peer_silences++;
	COUR_WARN(FI_LOG_EP_DATA, "peer %s has not answered for %.1f s while we wait on it (for%s%s%s"
		  "); still trying: it is declared unreachable after FI_COURIER_PEER_TIMEOUT=%d ms "
		  "of silence\n", cour_addr_str(&peer->addr, str, sizeof(str)),
		  (double)quiet_us / 1e6, peer->tx_una != peer->tx_next ? " unacknowledged packets"
		  : "", peer->tx_wait ? " operations awaiting its answer" : "",
		  peer->credit_stalled ? " messages waiting for its credits" : "",
		  cour_params.peer_timeout_ms);
}

/* Refused (ICMP) and silent since, past a grace for a restart on the same port. */
static bool cour_peer_refused_dead(const struct cour_peer *peer, uint64_t now)
{
	return peer->refused_us && peer->refused_us >= peer->last_heard_us &&
	       cour_us_since(now, peer->last_heard_us) >=
	       (uint64_t)cour_params.refused_grace_ms * 1000;
}

/* Dead on evidence: its process exited (same host), or its host refuses our packets. */
static bool cour_peer_dead_by_evidence(struct cour_peer *peer, uint64_t now)
{
	return cour_shm_peer_gone(peer) || cour_peer_refused_dead(peer, now);
}

static void cour_peer_unreachable(struct cour_peer *peer, uint64_t quiet_us)
{
	uint32_t w = (uint32_t)cour_params.window;
	const struct cour_txpkt *head = peer->txwin && peer->tx_una != peer->tx_next ?
					&peer->txwin[peer->tx_una % w] : NULL;
	uint64_t now = cour_now_us();
	char str[80];

	/* what the engine believed, for whoever reads this after a hang that should not be */
	bool gone = cour_shm_peer_gone(peer);
	bool refused = !gone && cour_peer_refused_dead(peer, now);

	COUR_WARN(FI_LOG_EP_DATA, "peer %s unreachable: %s%.1f s%s; failing its "
		  "operations (sessions %08x/%08x, tx_una %u tx_next %u rx_next %u held %u, "
		  "head type %u tries %u sent %" PRIu64 " us ago, srtt %" PRIu64 " rto %" PRIu64
		  " us, last ack %" PRIu64 " us ago, last heard %" PRIu64 " us ago, lists %c%c%c%c, "
		  "shm %d)\n", cour_addr_str(&peer->addr, str, sizeof(str)),
		  gone ? "its process exited (after waiting " :
		  refused ? "its host says nothing listens at its address any more (ICMP port "
			    "unreachable; silent for " : "no answer for ",
		  (double)quiet_us / 1e6, gone || refused ? ")" : ", past FI_COURIER_PEER_TIMEOUT",
		  peer->local_session, peer->remote_session,
		  peer->tx_una, peer->tx_next, peer->rx_next, peer->rx_held,
		  head ? head->hdr.base.type : 0, head ? head->tries : 0,
		  head && head->sent_us ? cour_us_since(now, head->sent_us) : 0, peer->srtt_us,
		  peer->rto_us, cour_us_since(now, peer->last_ack_us),
		  cour_us_since(now, peer->last_heard_us), peer->ctrlq ? 'c' : '-',
		  peer->txq ? 'q' : '-', peer->tx_inflight ? 'i' : '-', peer->tx_wait ? 'w' : '-',
		  peer->shm != NULL);
	peer->ep->stats.peers_unreachable++;
	cour_peer_reset(peer, COUR_E_UNREACHABLE);
}

/* A peer the wire cannot send to from this endpoint's address: what waits for it fails now,
 * with the reason said once. */
static void cour_peer_unroutable(struct cour_peer *peer)
{
	struct cour_pep *ep = peer->ep;
	char str[80], me[80];

	if (peer->unroutable == 1) {
		peer->unroutable = 2;
		COUR_WARN(FI_LOG_EP_DATA, "peer %s cannot be reached from this endpoint's address "
			  "%s: failing its operations with FI_EHOSTUNREACH%s\n",
			  cour_addr_str(&peer->addr, str, sizeof(str)),
			  cour_addr_str(&ep->wire.addr, me, sizeof(me)),
			  cour_addr_is_loopback(&ep->wire.addr) ?
			  " (an endpoint bound to loopback reaches only this host: set "
			  "FI_COURIER_IFACE_ADDR to an address, interface or subnet of this host's "
			  "network, such as eth0 or 10.1.0.0/16)" : " (no route)");
	}
	ep->stats.peers_unreachable++;
	cour_peer_reset(peer, COUR_E_NO_ROUTE);
}

/* With nothing unacknowledged no retransmit timer runs, yet a sender may be credit-stalled or
 * waiting for a CTS or DONE, and a receiver for RDATA: if the peer died after acknowledging
 * everything, only asking it for an ACK now and then tells.  The answer carries no PROBE flag,
 * so two waiting peers cannot ping-pong. */
#define COUR_PROBE_US 100000
static void cour_peer_probe(struct cour_peer *peer, uint64_t now)
{
	uint64_t quiet;

	if (!peer->probe_deadline) {
		/* silence counts from now: a peer that had nothing to say to us before we began
		 * to wait on it was not silent (it was declared dead 0.1 s into a wait) */
		peer->probe_deadline = now + COUR_PROBE_US;
		peer->wait_since_us = now;
		peer->silence_warned = false;
		return;
	}
	if (now < peer->probe_deadline)
		return;
	quiet = cour_us_since(now, COUR_MAX(peer->last_heard_us, peer->wait_since_us));
	if (quiet >= (uint64_t)cour_params.peer_timeout_ms * 1000 ||
	    cour_peer_dead_by_evidence(peer, now)) {
		cour_peer_unreachable(peer, quiet);
		return;
	}
	cour_peer_silence_warn(peer, quiet);
	cour_peer_send_ack(peer, COUR_F_PROBE);
	peer->probe_deadline = now + COUR_PROBE_US;
}

static bool cour_peer_needs_probe(const struct cour_peer *peer)
{
	if (peer->rto_deadline)
		return false;       /* the retransmit timer watches the peer already */
	return (peer->credit_stalled && peer->txq) || peer->tx_wait || peer->rx_rdv_pending ||
	       peer->rx_cur;
}

/* Timers of every active peer: delayed ACKs, retransmission, unreachable peers. */
void cour_ep_timers(struct cour_pep *ep, uint64_t now)
{
	struct cour_peer *peer, *tmp;
	uint64_t next = 0;
	uint32_t w = (uint32_t)cour_params.window;

	DL_FOREACH_SAFE2(ep->active, peer, tmp, act_next) {
		uint64_t hole_due;

		if (COUR_UNLIKELY(peer->unroutable))
			cour_peer_unroutable(peer);
		if (peer->ack_needed && now >= peer->ack_deadline)
			cour_peer_send_ack(peer, 0);
		if (COUR_UNLIKELY(cour_shm_hello_pending(peer)))
			cour_shm_hello_again(peer);

		if (peer->shm_blocked && cour_peer_shm_retry(peer, now))
			cour_peer_push(peer);
		hole_due = cour_peer_hole_timer(peer, now);
		if (peer->rto_deadline && now >= peer->rto_deadline) {
			uint64_t quiet = cour_us_since(now, peer->last_ack_us);

			if (quiet >= (uint64_t)cour_params.peer_timeout_ms * 1000 ||
			    cour_peer_dead_by_evidence(peer, now)) {
				cour_peer_unreachable(peer, quiet);
			} else if (peer->via_shm) {
				/* a full ring, not a loss: cour_peer_shm_retry resends in order */
				peer->rto_deadline = now + peer->rto_us;
			} else {
				cour_peer_silence_warn(peer, quiet);
				/* resend the unacknowledged head of the window, then back off */
				uint32_t n = 0;
				for (uint32_t s = peer->tx_una; s != peer->tx_next &&
				     n <= COUR_SACK_BITS; s++, n++) {
					struct cour_txpkt *slot = &peer->txwin[s % w];
					if (slot->sacked)
						continue;
					cour_slot_send(peer, slot, now);
					ep->stats.retrans_timeout++;
				}
				cour_wire_flush(ep);
				/* SACKs show the peer receives: a lost resend, not congestion */
				if (!cour_peer_last_sacked(peer, &(uint32_t){ 0 }))
					peer->rto_us = COUR_MIN(peer->rto_us * 2,
								(uint64_t)cour_params.rto_max_us);
				peer->rto_deadline = now + peer->rto_us;
			}
		}
		if (peer->txq || peer->ctrlq)
			cour_peer_push(peer);
		if (cour_peer_needs_probe(peer))
			cour_peer_probe(peer, now);
		else
			peer->probe_deadline = 0;

		if (!peer->rto_deadline && !peer->ack_needed && !peer->txq && !peer->ctrlq &&
		    !peer->probe_deadline && !cour_shm_hello_pending(peer)) {
			DL_DELETE2(ep->active, peer, act_prev, act_next);
			peer->on_active = false;
			continue;
		}
		if (peer->rto_deadline && (!next || peer->rto_deadline < next))
			next = peer->rto_deadline;
		if (hole_due && (!next || hole_due < next))
			next = hole_due;
		if (peer->ack_needed && (!next || peer->ack_deadline < next))
			next = peer->ack_deadline;
		if ((peer->txq || peer->ctrlq) && (!next || now + 1000 < next))
			next = now + 1000;  /* blocked on credits or window: look again soon */
		if (peer->probe_deadline && (!next || peer->probe_deadline < next))
			next = peer->probe_deadline;
		if (cour_shm_hello_pending(peer) && (!next || peer->hello_next_us < next))
			next = peer->hello_next_us;
	}
	ep->next_timer = next;
}

/*
 * Evidence of death across hosts: the peer's host answered a packet of ours with ICMP port
 * unreachable. Weighed in the timers (cour_peer_dead_by_evidence): a peer heard since, or
 * still within a short grace (a restart in progress on the same port), is not dead.
 */
void cour_peer_refused(struct cour_pep *ep, const struct sockaddr_storage *sa, socklen_t sa_len)
{
	struct cour_addr a;
	struct cour_peer *peer;

	if (cour_addr_from_sockaddr(&a, sa, sa_len))
		return;
	a.is_v4 = ep->wire.addr.is_v4;
	peer = cour_peer_by_addr_locked(ep, &a, false);
	if (!peer)
		return;
	ep->stats.peers_refused++;
	peer->refused_us = cour_ep_clock(ep);
	if (!peer->refused_us)
		peer->refused_us = 1;
	cour_peer_activate(peer);
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
	return n ? n : peer->tx_una != peer->tx_next;
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
	uint32_t crc;

	if (peer) {
		hdr->base.ack = peer->rx_next;
		hdr->base.sack = 0;
		if (peer->rx_held && peer->rxwin) {
			uint32_t w = (uint32_t)cour_params.window;
			for (uint32_t i = 0; i < cour_sack_span(w); i++) {
				uint32_t s = peer->rx_next + 1 + i;
				if (peer->rxwin[s % w].buf)
					hdr->base.sack = cour_sack_mark(hdr->base.sack,
									peer->rx_next, s);
			}
		}
		hdr->base.credits = peer->credits_granted;
		hdr->base.src_session = peer->local_session;
		hdr->base.dst_session = peer->remote_session;
		peer->credits_sent = peer->credits_granted;
		/* Whatever we send carries the ACK: a pending delayed ACK is no longer needed. */
		peer->ack_needed = false;
		peer->rx_since_ack = 0;
	}
	/* an ACK's payload (a SACK bitmap) and a HELLO's are always checked (cour_pkt_valid) */
	bool pcsum = cour_params.checksum ||
		     (iovcnt && (hdr->base.type == COUR_PKT_ACK || hdr->base.type == COUR_PKT_HELLO));

	hdr->base.version = COUR_WIRE_VERSION;
	if (pcsum)
		hdr->base.flags |= COUR_F_PCSUM;
	hdr->base.crc = 0;
	crc = cour_crc32c(0, hdr, hdr_len);
	if (pcsum)
		for (size_t i = 0; i < iovcnt; i++)
			crc = cour_crc32c(crc, iov[i].iov_base, iov[i].iov_len);
	hdr->base.crc = crc;
}

