/*
 * The protocol engine: its endpoint (struct cour_pep), peers, transmit and receive entries,
 * registered regions, and the narrow interface through which it reports upward.
 *
 * The engine includes only proto/, wire/ and util/ headers (scripts/check-layers.sh). It never
 * writes a CQ, counter or EQ and never reads an AV or MR object: the object layer gives each
 * endpoint a struct cour_up_ops (cour_ep.c) and the engine reports finished operations, target
 * events and remote CQ data through it, and asks it for AV lookups. Registered regions are the
 * engine's (struct cour_region, checked at the target on every RMA and atomic); struct cour_mr
 * wraps one.
 *
 * Reliability (per pair of endpoints, the usnic design with SACK; see docs/protocol.md):
 *   - Every sequenced packet has a 32-bit seq; comparisons use cour_seq_* only.
 *   - Sender: window slots [tx_una, tx_next) hold packets not yet acknowledged; those in
 *     [tx_next_send, tx_next) are built but not yet on the wire (the socket was full).
 *     An ACK moves tx_una; SACK bits mark later packets received so they are never resent.
 *   - Receiver: processes packets strictly in seq order (this is what makes FI_ORDER_SAS and
 *     reassembly simple); packets inside the window but early are held in rx slots, never
 *     dropped; duplicates are dropped and answered with an immediate ACK (their ACK was lost).
 *   - ACKs are delayed up to ack_delay so they can ride on data going the other way, but go out
 *     at once after an out-of-order or duplicate packet, or every COUR_ACK_EVERY packets.
 *   - Retransmit timeout from measured RTT (SRTT + 4 RTTVAR, Karn's rule: no sample from a
 *     resent packet), doubled on each expiry up to rto_max. Fast retransmit: once an ACK shows a
 *     hole below a SACKed packet, the hole is resent at most once per SRTT.
 *   - A peer with pending work that acknowledges nothing for peer_timeout is unreachable: every
 *     operation to it completes in error and its state starts over with a new session.
 * Sessions: src/dst_session nonces in every header. A packet for an older session of ours is
 * answered with RESET; a packet or RESET showing a new session of the peer means the peer
 * restarted: operations to the old one complete in error, state starts over.
 * Credits (the GASNet design, in bytes: proto/cour_credit.c): a sender may have at most its grant
 * of credit units in eager messages and RTS that the receiver has not yet consumed; the receiver
 * grants them again as the application consumes them, and lends more to a peer that runs short.
 * Control packets (ACK, RESET, CTS, DONE, RDATA) need no credit, so the protocol cannot deadlock.
 *
 * The structures have headers of their own, included here: the operation records
 * (cour_op.h), the peer and its windows (cour_peer.h), the endpoint, its upward interface and
 * its clock (cour_pep.h), registered regions (cour_region.h). This header adds the engine's
 * constants and what its files offer one another and the object layer.
 */
#ifndef COUR_ENGINE_H
#define COUR_ENGINE_H

#include "util/cour_util.h"
#include "proto/cour_cc.h"
#include "proto/cour_errno.h"
#include "proto/cour_op.h"
#include "proto/cour_pdom.h"
#include "proto/cour_pep.h"
#include "proto/cour_peer.h"
#include "proto/cour_region.h"
#include "proto/cour_wire_fmt.h"
#include "wire/cour_wire.h"
#include "wire/cour_shm_ring.h"
#include "util/cour_addr.h"
#include "util/cour_params.h"
#include "util/cour_pool.h"

#include <rdma/fi_atomic.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_ext_courier.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <uthash.h>
#include <utlist.h>

#define COUR_ACK_EVERY   8     /* in-order packets after which an ACK goes out at once */
#define COUR_ACK_TRAIN   64    /* ...for pieces of a GRO train with more of their message
				* behind them, at most (else a quarter window) */
#define COUR_DEFER_INFLIGHT 16 /* packets in flight past which a post's flush waits for
				* the next progress pass (proto/cour_peer.c) */
#define COUR_RX_BATCH    COUR_WIRE_RX_BATCH
_Static_assert(COUR_PKT_HDR_LEN <= COUR_WIRE_HDR_MAX, "a packet header fits a wire's");
_Static_assert(COUR_MAX_PKT == COUR_WIRE_DGRAM_MAX, "the engine's largest packet is the wire's");
#define COUR_HELLO_TRIES 8     /* HELLOs to a peer that does not answer (proto/cour_shm_peer.c) */
#define COUR_HELLO_GAP_US 1000 /* before the second; doubling */
#define COUR_BOX_AFTER   16     /* small messages through a peer's ring before its mailbox */
/* cq_flags bit (unused by libfabric) marking a send that reports no success completion,
 * as fi_inject asks; masked off before anything reaches a CQ */
#define COUR_CQF_NOCOMP  (1ULL << 62)
#define COUR_EAGER_LIMIT (1u << 24) /* largest eager message a receiver accepts */

/* Every packet dropped as malformed is counted, and said why at debug level. */
#define COUR_DROP_BAD(ep, why) do { \
	(ep)->stats.drop_bad_hdr++; \
	COUR_DBG(FI_LOG_EP_DATA, "dropped packet: %s\n", why); \
} while (0)

#ifndef COUR_MAX_MSG_SIZE
#define COUR_MAX_MSG_SIZE  ((1ULL << 32) - 1)
#endif /* COUR_ENGINE_H */
#ifndef COUR_DGRAM_MAX_MSG
#define COUR_DGRAM_MAX_MSG (COUR_MAX_PKT - 80)
#endif /* COUR_ENGINE_H */

/* ---- the engine's endpoint (proto/cour_peer.c) ---- */
/* Pools, the wire FI_COURIER_WIRE names (fault-injecting if FI_COURIER_FAULT says so), bound
 * to want, and the same-host ring: 0, or the error (logged), with nothing left to free.
 * type, caps and the op flags are the caller's to set first. */
int  cour_pep_open(struct cour_pep *ep, struct cour_pdom *pdom, const struct cour_up_ops *up,
		   const struct cour_addr *want);
/* After the wire and the ring are closed (and the peers freed): the pools and the decorator. */
void cour_pep_free(struct cour_pep *ep);

/* ---- completion of transmits (proto/cour_peer.c) ---- */
/* Report txe upward (unless it is the engine's own) and give its resources back. */
void cour_txe_complete(struct cour_pep *ep, struct cour_txe *txe, int err, int prov_errno);
/* Scalable endpoints: receive queue i (made on first use, kept until the endpoint closes);
 * a closing transmit context's operations lose their owner. Lock held. */
int  cour_pep_rxq_open(struct cour_pep *ep, uint32_t i, struct cour_rxq **q);
void cour_peer_disown_locked(struct cour_pep *ep, const void *owner);
/* Free the receives posted to ep->rxq, without completions (its context closes). */
void cour_msg_flush_posted(struct cour_pep *ep);

/* ---- proto/cour_peer.c: peers, sessions, reliability ---- */
struct cour_peer *cour_peer_get_locked(struct cour_pep *ep, fi_addr_t fi_addr);
struct cour_peer *cour_peer_by_addr_locked(struct cour_pep *ep, const struct cour_addr *addr,
					    bool create);
void cour_peer_free_all(struct cour_pep *ep);
/* The wire learned that nothing listens at sa (ICMP port unreachable): evidence of death. */
void cour_peer_refused(struct cour_pep *ep, const struct sockaddr_storage *sa, socklen_t sa_len);
/* CM packets (proto/cour_cm_wire.c) */
#define COUR_CM_DGRAM_MAX (COUR_CM_PKT_MAX + COUR_MAC_LEN)   /* a CM packet and its trailer */
/* A CM packet from self to to into buf (COUR_CM_DGRAM_MAX bytes): with mac, signed, its
 * trailer included in the length returned. */
size_t cour_cm_pack(void *buf, struct cour_mac *mac, const struct cour_addr *self,
		    const struct cour_addr *to, uint32_t op, uint64_t conn_id, uint64_t cookie,
		    const void *data, size_t len);
bool cour_cm_unpack(const void *buf, size_t len, bool keyed, struct cour_cm_hdr *cm,
		    uint64_t *cookie, const uint8_t **data);
void cour_pep_send_cm(struct cour_pep *ep, const struct cour_addr *to, uint32_t op,
		      uint64_t conn_id, uint64_t cookie, const void *data, size_t len);
void cour_ep_rx_cm(struct cour_pep *ep, const void *buf, size_t len, const struct cour_addr *from);
/* Operations of ours the peer has not yet taken or answered (0: nothing owed). */
size_t cour_peer_tx_pending(const struct cour_peer *peer);
/* cour_peer_tx_pending(peer) == 0, without counting */
static inline bool cour_peer_tx_idle(const struct cour_peer *peer)
{
	return !peer->ctrlq && !peer->txq && !peer->tx_inflight && !peer->tx_wait &&
	       !cour_peer_sending(peer);
}
fi_addr_t cour_peer_fi_addr(struct cour_peer *peer);
void cour_peer_push(struct cour_peer *peer);          /* build and send what the window allows */
void cour_peer_enqueue(struct cour_peer *peer, struct cour_txe *txe);
/* txe's packets may all be acknowledged: complete it or let it wait for the target. */
void cour_txe_check_done(struct cour_peer *peer, struct cour_txe *txe);
void cour_peer_reset(struct cour_peer *peer, int prov_errno);
void cour_peer_activate(struct cour_peer *peer);

void cour_ep_timers(struct cour_pep *ep, uint64_t now);
void *cour_ep_rx_packet(struct cour_pep *ep, void *buf, size_t len,
			const struct sockaddr_storage *sa, socklen_t sa_len);
/* Credits (proto/cour_credit.c). Sender: take what txe's first packet costs, or turn an
 * eager message into an RTS, or stall (false). Receiver: admit a new message within the
 * grant (false: beyond it), give consumed units back, lend more to a peer that wants them. */
bool cour_credit_take(struct cour_peer *peer, struct cour_txe *txe);
uint32_t cour_credit_short(const struct cour_peer *peer, uint64_t len);
bool cour_credit_admit(struct cour_peer *peer, unsigned type, uint64_t total_len);
void cour_peer_credit_return(struct cour_peer *peer, uint32_t units);
void cour_credit_want(struct cour_peer *peer, uint64_t len);
/* Sender: the peer's grant, as a packet or a mailbox entry carries it, taken if it moves the
 * limit forward and no further than a window ahead of use (an old or forged value moves
 * nothing). true if it moved. */
static inline bool cour_credit_granted(struct cour_peer *peer, uint32_t credits)
{
	if (!cour_seq_gt(credits, peer->tx_credit_limit) ||
	    !cour_seq_le(credits - COUR_CREDIT_WIN_MAX, peer->tx_credit_used))
		return false;
	peer->tx_credit_limit = credits;
	return true;
}
void cour_credit_peer_end(struct cour_peer *peer);
void cour_credit_rts_cleared(struct cour_peer *peer, struct cour_txe *txe);
/* The acknowledgement fields of any valid packet from the peer (ext: an ACK's SACK bitmap). */
void cour_peer_ack(struct cour_peer *peer, const struct cour_base_hdr *h, uint64_t now,
		   const uint8_t *ext, size_t extlen);
/* "Your view of my session is stale": to a packet for an earlier session of ours. */
void cour_send_reset(struct cour_pep *ep, struct cour_peer *peer, uint32_t their_session);
/* A RESET from a session of ours we name (a challenge offers one: proto/cour_peer_rx.c) */
void cour_send_reset_from(struct cour_pep *ep, struct cour_peer *peer, uint32_t ours,
			  uint32_t their_session);
/* A random nonzero session nonce. */
uint32_t cour_session_new(void);
/* Send again, now, every packet of the window not yet acknowledged or SACKed: the peer
 * dropped them unread (it asked for proof of a fresh session first). */
void cour_peer_resend_window(struct cour_peer *peer, uint64_t now);
void cour_peer_send_ack(struct cour_peer *peer, uint16_t flags);
void cour_peer_send_ack_via(struct cour_peer *peer, uint16_t flags, bool over_udp);

/* ---- proto/cour_msg_proto.c: message protocols and matching ---- */
/* The peer for dest and a free txe, or -FI_EINVAL (not in the AV, logged) / -FI_EAGAIN. */
int  cour_txe_get(struct cour_pep *ep, fi_addr_t dest, const char *what, struct cour_peer **peer,
		  struct cour_txe **txe);
/* The data txe sends: the caller's iovecs, or (inject) a copy; -FI_EAGAIN without a buffer. */
int  cour_txe_set_data(struct cour_pep *ep, struct cour_txe *txe, const struct iovec *iov,
		       size_t count, bool inject);
int  cour_msg_send(struct cour_pep *ep, const struct iovec *iov, size_t count, fi_addr_t dest,
		   uint64_t tag, uint64_t data, void *context, uint64_t flags, uint64_t cq_flags);
int  cour_msg_recv(struct cour_pep *ep, const struct iovec *iov, size_t count, fi_addr_t src,
		   uint64_t tag, uint64_t ignore, void *context, uint64_t flags, bool tagged);
int  cour_msg_cancel(struct cour_pep *ep, void *context);
/* Deliver an in-order sequenced message packet (EAGER/RTS/CTS/RDATA/DONE). */
void cour_msg_handle(struct cour_peer *peer, const struct cour_pkt_hdr *hdr,
		     const char *payload, size_t plen);
void cour_msg_handle_dgram(struct cour_pep *ep, const struct cour_pkt_hdr *hdr,
			   const char *payload, size_t plen, const struct cour_addr *from);
/* A peer's partial receive state dies with its session. */
void cour_msg_peer_reset(struct cour_peer *peer, int prov_errno);
void cour_msg_ep_close(struct cour_pep *ep);

/* ---- proto/cour_msg_place.c: where a payload may be read into place (changes nothing) ---- */
void *cour_msg_rdata_dest(struct cour_peer *peer, const struct cour_pkt_hdr *hdr, size_t plen);
void *cour_msg_eager_dest(struct cour_peer *peer, const struct cour_pkt_hdr *hdr, size_t plen);
/* (the same for RMA, in cour_rma_proto.c) */
void *cour_rma_write_dest(struct cour_peer *peer, const struct cour_pkt_hdr *hdr, size_t plen);
void *cour_rma_read_dest(struct cour_peer *peer, const struct cour_pkt_hdr *hdr, size_t plen);

/* ---- proto/cour_rma_proto.c: RMA and atomics ---- */
int  cour_rma_post(struct cour_pep *ep, uint8_t type, const struct iovec *iov, size_t count,
		   fi_addr_t dest, uint64_t raddr, uint64_t key, uint64_t data, void *context,
		   uint64_t flags, uint64_t cq_flags);
/* WRITE, READ_REQ, READ_RESP, RMA_RESP, ATOMIC, in order from the peer */
void cour_rma_handle(struct cour_peer *peer, const struct cour_pkt_hdr *hdr,
		     const char *payload, size_t plen);
/* Before a packet that may change target memory: reads from that memory not yet sent are
 * copied aside, so the change cannot reach them (WAR, SAR). */
void cour_rma_order_guard(struct cour_peer *peer);
/* Report one target event (FI_REMOTE_WRITE and/or FI_REMOTE_READ) on region r, with a
 * completion carrying remote CQ data (cq_data) or none (NULL). */
void cour_rma_target_event(struct cour_pep *ep, struct cour_region *r, uint64_t events,
			   const struct cour_cq_entry *cq_data, uint16_t hdr_flags);
/* The target's last word on an operation: prov_errno, or success with its remote events
 * (FI_RMA_EVENT counters, remote CQ data for a write). */
void cour_rma_target_finish(struct cour_peer *peer, uint8_t type, uint32_t msg_id,
			    uint16_t hdr_flags, uint64_t total, uint64_t data, struct cour_region *mr,
			    int prov_errno);
struct cour_txe *cour_rma_find_op(struct cour_peer *peer, uint32_t id);
/* A region is closing: reads still served from it are copied aside, and copies shared with
 * initiators and windows offered to them end first (nothing lands after fi_close). */
void cour_rma_mr_closing(struct cour_pdom *pdom, const struct cour_region *mr);

/* ---- proto/cour_rma_split.c: big RMA with a same-host peer, copied by both sides ---- */
#define COUR_SPLIT_MIN (256u << 10)         /* RMA from this size on */
#define COUR_MSG_SPLIT_MIN (128u << 10)     /* messages (proto/cour_msg_proto.c) */
/* Target, for a checked single-copy WRITE or READ_REQ: true if it is now shared */
bool cour_rma_split_try(struct cour_peer *peer, const struct cour_pkt_hdr *hdr, char *dst,
			struct cour_region *mr);
void cour_rma_split_grant_rx(struct cour_peer *peer, const struct cour_pkt_hdr *hdr);
void cour_rma_split_done_rx(struct cour_peer *peer, const struct cour_pkt_hdr *hdr);
/* Target, before an operation from peer touches [lo, hi) of our memory (all: or anything):
 * its earlier shared copies there are finished first, so order holds (RAW, WAR, WAW, SAW) */
void cour_rma_split_guard_slow(struct cour_peer *peer, const char *lo, const char *hi, bool all);
static inline void cour_rma_split_guard(struct cour_peer *peer, const char *lo, const char *hi,
					bool all)
{
	if (COUR_UNLIKELY(peer->grants_open))
		cour_rma_split_guard_slow(peer, lo, hi, all);
}
void cour_rma_split_expire(struct cour_pep *ep, uint64_t now);
uint64_t cour_rma_split_deadline(const struct cour_pep *ep);  /* 0: none */
void cour_rma_split_mr_closing(struct cour_pdom *pdom, const struct cour_region *mr);
/* the peer's session ends (or ours): its leases are taken back, nothing is answered */
void cour_rma_split_peer_reset(struct cour_peer *peer);
/* ---- proto/cour_rma_push.c: same-host writes the initiator copies itself ---- */
void cour_rma_push_offer(struct cour_pep *ep, struct cour_region *mr); /* lock held, each: */
void cour_rma_push_offer_all(struct cour_pep *ep);                   /* endpoint enabled */
void cour_rma_push_mr_ready(struct cour_pdom *pdom, struct cour_region *mr); /* enabled */
void cour_rma_push_mr_counted(struct cour_pdom *pdom, const struct cour_region *mr);
void cour_rma_push_mr_closing(struct cour_pdom *pdom, const struct cour_region *mr);
void cour_rma_push_ep_close(struct cour_pep *ep);
void cour_rma_push_rx(struct cour_peer *peer, const struct cour_pkt_hdr *hdr, size_t plen);
/* Initiator: true if txe (a single-copy WRITE, all fields set) was written and completed */
bool cour_rma_push_try(struct cour_peer *peer, struct cour_txe *txe);
/* ---- proto/cour_atomic_proto.c ---- */
#define COUR_ATOMIC_MAX_BYTES 512   /* operand bytes per atomic (and as many compare bytes) */
struct cour_atomic_args {
	int                  kind;            /* enum cour_atomic_kind */
	enum fi_op           op;
	enum fi_datatype     dt;
	const struct fi_ioc *iov, *compare;
	struct fi_ioc       *result;
	size_t               count, compare_count, result_count;
	fi_addr_t            dest;
	uint64_t             addr, key, data, flags;
	void                *context;
	bool                 silent;          /* fi_inject_atomic: no completion, errors only */
};
int  cour_atomic_post(struct cour_pep *ep, const struct cour_atomic_args *a);

/* an ATOMIC packet at the target */
void cour_atomic_handle(struct cour_peer *peer, const struct cour_pkt_hdr *hdr,
			const char *payload, size_t plen);
/* Send an internal control txe: (type, msg_id, rx_id, len) and no payload. */
void cour_send_ctrl(struct cour_peer *peer, uint8_t type, uint32_t msg_id, uint32_t rx_id,
		    uint64_t len);

/* ---- the wire (wire/cour_wire.h): calls through the endpoint's ops table ---- */
/* Finish a header for sending: current ack/sack/credits and the checksum (proto/cour_peer.c). */
void cour_hdr_finish(struct cour_peer *peer, struct cour_pkt_hdr *hdr, size_t hdr_len,
		     const struct iovec *iov, size_t iovcnt);
/* ...all but the checksum (crc 0): for a sequenced packet into a peer's ring, which checks
 * none (cour_pkt_valid). A same-host ring is memory both processes map: a checksum there
 * catches no corruption a wire makes, authenticates nothing (any process of the user may
 * write the ring), and cost the sender and the receiver a twelfth of their time each at
 * 7 M small messages a second. A packet that leaves by UDP is always finished whole. */
void cour_hdr_finish_fields(struct cour_peer *peer, struct cour_pkt_hdr *hdr);
/* cour_hdr_finish without the peer's fields (a RESET names sessions of its own): flags
 * PCSUM and, with ep's key, MAC; the crc. */
void cour_hdr_seal(struct cour_pep *ep, struct cour_pkt_hdr *hdr, size_t hdr_len,
		   const struct iovec *iov, size_t iovcnt);
/* What the endpoint's wire hands up (proto/cour_peer_rx.c). */
extern const struct cour_wire_rx_ops cour_ep_wire_rx;

/* A piece of a message that fits one GSO run may join the run before it (a short datagram
 * there padded): a longer message's pieces make runs of their own, and the receiver would
 * copy those the run before carried. */
static inline bool cour_wire_joins(const struct cour_peer *peer, uint64_t msg_len)
{
	return peer->mtu > COUR_PKT_HDR_LEN && msg_len <= peer->run_bytes;
}

/* What the wire may pack a datagram of len bytes into (cour_wire_ops.queue's pack): up to the
 * peer's MTU with the peer's next small packets, or 0. */
static inline uint32_t cour_wire_pack_limit(const struct cour_peer *peer, bool join, size_t len)
{
	return cour_params.udp_pack && (join || len <= COUR_WIRE_PACK_PKT) ? peer->mtu : 0;
}

/* A sequenced packet to the peer over the wire: hdr (the window slot's copy) is finished in
 * place, the wire copies it. */
static inline void cour_wire_queue(struct cour_pep *ep, struct cour_peer *peer,
				   struct cour_pkt_hdr *hdr, size_t hdr_len,
				   const struct iovec *iov, size_t iovcnt)
{
	size_t len = hdr_len;
	bool join = cour_wire_joins(peer, hdr->msg.total_len);

	for (size_t k = 0; k < iovcnt; k++)
		len += iov[k].iov_len;
	cour_hdr_finish(peer, hdr, hdr_len, iov, iovcnt);
	ep->wire.ops->queue(&ep->wire, &peer->sa, peer->sa_len, hdr, hdr_len, iov, iovcnt,
			    cour_wire_pack_limit(peer, join, len));
}

#define COUR_FLUSH_HIST 16
static inline void cour_flush_close(struct cour_pep *ep, uint64_t t0, uint64_t t1)
{
	uint32_t g = ep->flush_gen % COUR_FLUSH_HIST;

	ep->flush_t0[g] = t0;
	ep->flush_t1[g] = t1;
	ep->flush_bytes[g] = ep->flush_queued;
	ep->flush_queued = 0;
	ep->flush_gen++;
}

/* (a flush's packets are timed from its system call, not from when they were built: the
 * engine may have built them a while before, waiting for ACKs or the next pass, and that
 * wait is the window's own, which the window must not shrink for) */
static inline int cour_wire_flush(struct cour_pep *ep)
{
	uint64_t t0;
	int ret;

	if (!ep->flush_queued)
		return ep->wire.ops->flush(&ep->wire);
	t0 = cour_now_us();
	ret = ep->wire.ops->flush(&ep->wire);
	cour_flush_close(ep, t0, cour_now_us());
	return ret;
}

static inline int cour_wire_poll(struct cour_pep *ep)
{
	return ep->wire.ops->poll(&ep->wire);
}

static inline int cour_wire_send_now(struct cour_pep *ep, const void *sa,
				     socklen_t sa_len, const void *hdr, size_t hdr_len,
				     const struct iovec *iov, size_t iovcnt)
{
	return ep->wire.ops->send_now(&ep->wire, sa, sa_len, hdr, hdr_len, iov, iovcnt);
}

static inline uint32_t cour_wire_peer_mtu(struct cour_pep *ep, const struct cour_addr *addr)
{
	return ep->wire.ops->peer_mtu(&ep->wire, addr);
}

/* ---- proto/cour_shm_peer.c: same-host peers ---- */
int  cour_shm_ep_open(struct cour_pep *ep);     /* 0 even when shm stays off (logged) */
void cour_shm_ep_close(struct cour_pep *ep);
void cour_shm_hello_send(struct cour_peer *peer, uint32_t flags);
void cour_shm_hello_again(struct cour_peer *peer);
/* asked once and not answered (the peer has not mapped our ring, or does not poll the box
 * the HELLO named): asked again, on a timer, until COUR_HELLO_TRIES */
static inline bool cour_shm_hello_pending(const struct cour_peer *peer)
{
	return peer->hello_tries && peer->hello_tries < COUR_HELLO_TRIES &&
	       (!peer->peer_mapped || (peer->box.gen && !peer->box.closing && !peer->box.live));
}
void cour_shm_hello_handle(struct cour_peer *peer, const struct cour_shm_hello *h);
void cour_shm_peer_detach(struct cour_peer *peer);
/* Give back the boxes of pairs gone quiet (progress, at ep->box_sweep_us). */
void cour_shm_boxes_sweep(struct cour_pep *ep, uint64_t now);
bool cour_shm_peer_gone(struct cour_peer *peer);
/* A sequenced packet into the peer's ring: 0, or -FI_EAGAIN when it is full. */
int  cour_shm_send(struct cour_peer *peer, const struct cour_pkt_hdr *hdr, size_t hdr_len,
		   const struct iovec *iov, size_t iovcnt);
/* A finished unsequenced packet to the peer, through its ring if mapped. */
int  cour_peer_send_now(struct cour_peer *peer, const void *hdr, size_t hdr_len,
			const struct iovec *iov, size_t iovcnt);
/* An inject with no counter to move reports nothing (the common MPI send): nobody waits for
 * its ACK. */
static inline bool cour_tx_unwatched(const struct cour_pep *ep, uint64_t cq_flags)
{
	return (cq_flags & COUR_CQF_NOCOMP) && !ep->tx_owner && !ep->tx_counted;
}

/* An application's send that completes as it is posted (a datagram, a SHORT): tx_done is
 * given the fields of a txe it reads, and no others (a txe is 464 bytes: clearing one was a
 * third of a short send's own instructions). */
static inline void cour_tx_done_now(struct cour_pep *ep, void *context, uint64_t flags,
				    uint64_t cq_flags, size_t len, uint64_t tag)
{
	struct cour_txe t;

	if (cour_tx_unwatched(ep, cq_flags))
		return;
	t.group = NULL;
	t.owner = ep->tx_owner;
	t.context = context;
	t.op_flags = flags;
	t.cq_flags = cq_flags;
	t.msg_len = len;
	t.tag = tag;
	ep->up->tx_done(ep, &t, 0, 0);
}

/* A send of one packet to a peer whose ring is in use (peer->via_shm, the caller checks), put
 * there as SHORT and completed at once, without the engine: true if done, false if the engine
 * must send it (not eligible, or the ring is full). */
bool cour_short_send(struct cour_pep *ep, struct cour_peer *peer, const struct iovec *iov,
		     size_t count, size_t len, uint64_t tag, uint64_t data, void *context,
		     uint64_t flags, uint64_t cq_flags);
/* The same for one buffer, from the API call itself when the peer's mailbox takes it (no
 * iovec array, no cour_msg_send): false, with nothing sent, for the whole path. Lock held. */
bool cour_short_send1(struct cour_pep *ep, fi_addr_t dest, const void *buf, size_t len,
		      uint64_t tag, uint64_t data, void *context, uint64_t flags,
		      uint64_t cq_flags);
/* The receiver's side of it, when a plain receive waits (cour_msg_proto.c), and of an EAGER
 * message of one packet: false, having changed nothing, for the whole path. */
bool cour_msg_short_posted(struct cour_peer *peer, const struct cour_pkt_hdr *hdr,
			   const char *payload, size_t plen);
int  cour_shm_poll(struct cour_pep *ep);
/* The peer's mailbox entries stamped before its ring put `before` (it is being handled). */
void cour_shm_box_drain(struct cour_peer *peer, uint32_t before);
void cour_peer_rx_box(struct cour_peer *peer, const struct cour_box_ent *e, const void *payload);
bool cour_shm_arm(struct cour_pep *ep);         /* before sleeping: false if packets wait */
void cour_shm_disarm(struct cour_pep *ep);

/* ---- proto/cour_cma.c: single copy with same-host peers ---- */
void   cour_cma_measure(void);        /* what a pull costs here, once per process */
bool   cour_cma_rma_usable(const struct cour_peer *peer, size_t len, size_t count);
bool   cour_cma_msg_usable(const struct cour_peer *peer, size_t len, size_t count);
/* The longest message of count iovecs sent with flags that goes eager now: longer ones go as
 * RTS */
size_t cour_cma_eager_max(const struct cour_peer *peer, size_t count, uint64_t flags);
/* 0; -FI_EPERM: refused (logged, counted, peer->cma_off); -FI_EFAULT: bad address */
int    cour_cma_pull(struct cour_peer *peer, const struct iovec *local, size_t nlocal,
		     uint64_t raddr, size_t len);
int    cour_cma_push(struct cour_peer *peer, const struct iovec *local, size_t nlocal,
		     uint64_t raddr, size_t len);
void   cour_send_ctrl_flags(struct cour_peer *peer, uint8_t type, uint32_t msg_id,
			    uint32_t rx_id, uint64_t len, uint16_t flags);
/* A zeroed internal txe (type, msg_id, rx_id, flags) for the caller to fill and enqueue;
 * NULL (logged) when out of memory. */
struct cour_txe *cour_ctrl_txe(struct cour_peer *peer, uint8_t type, uint32_t msg_id,
			       uint32_t rx_id, uint16_t flags);
/* An operation whose packets must all be built again (answers changed the plan): its window
 * slots forget it and it queues anew. */
void   cour_txe_requeue(struct cour_peer *peer, struct cour_txe *txe);
void   cour_txe_detach_slots(struct cour_peer *peer, struct cour_txe *txe);

#endif /* COUR_ENGINE_H */
