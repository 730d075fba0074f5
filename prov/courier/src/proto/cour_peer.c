/*
 * Peers and sessions: finding and keeping them, the ACKs and RESETs we send, resets, the
 * endpoint's protocol state, headers finished for the wire. What is sent to a peer (its queues,
 * the send window's slots, pushes) is cour_peer_tx.c's, ACK/SACK processing and retransmission
 * cour_peer_ack.c's, incoming packets cour_peer_rx.c's, timers and liveness cour_peer_live.c's.
 * The design essay is at the top of cour_engine.h, struct cour_peer in cour_peer.h.
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

