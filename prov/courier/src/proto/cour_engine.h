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
 */
#ifndef COUR_ENGINE_H
#define COUR_ENGINE_H

#include "util/cour_util.h"
#include "proto/cour_cc.h"
#include "proto/cour_errno.h"
#include "proto/cour_pdom.h"
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

#define COUR_IOV_MAX     8     /* iov_limit advertised (tx and rx) */
#define COUR_ACK_EVERY   8     /* in-order packets after which an ACK goes out at once */
#define COUR_ACK_TRAIN   64    /* ...for pieces of a GRO train with more of their message
				* behind them, at most (else a quarter window) */
#define COUR_DEFER_INFLIGHT 16 /* packets in flight past which a post's flush waits for
				* the next progress pass (proto/cour_peer.c) */
#define COUR_RX_BATCH    COUR_WIRE_RX_BATCH
_Static_assert(COUR_IOV_MAX <= COUR_WIRE_IOV_MAX, "a packet's payload iovecs fit a wire's");
_Static_assert(COUR_PKT_HDR_LEN <= COUR_WIRE_HDR_MAX, "a packet header fits a wire's");
_Static_assert(COUR_MAX_PKT == COUR_WIRE_DGRAM_MAX, "the engine's largest packet is the wire's");
#define COUR_HELLO_TRIES 8     /* HELLOs to a peer that does not answer (proto/cour_shm_peer.c) */
#define COUR_HELLO_GAP_US 1000 /* before the second; doubling */
/* cq_flags bit (unused by libfabric) marking a send that reports no success completion,
 * as fi_inject asks; masked off before anything reaches a CQ */
#define COUR_CQF_NOCOMP  (1ULL << 62)
#define COUR_EAGER_LIMIT (1u << 24) /* largest eager message a receiver accepts */

struct cour_pep;
struct cour_peer;
struct cour_region;

enum cour_txe_state {
	COUR_TXE_QUEUED,      /* in peer->txq: packets still to be built */
	COUR_TXE_WAIT_ACK,    /* every packet built; waiting for acknowledgements */
	COUR_TXE_WAIT_CTS,    /* RTS acknowledged or not; waiting for the receiver's CTS */
	COUR_TXE_WAIT_DONE,   /* acknowledged; waiting for DONE (FI_DELIVERY_COMPLETE) */
	COUR_TXE_WAIT_RESP,   /* RMA or atomic acknowledged; waiting for the target's answer */
};

/* One send operation (or one internal control message when op_type is CTS or DONE). */
struct cour_txe {
	struct cour_txe     *next, *prev;     /* one of the peer's txe lists */
	struct cour_txe    **list;            /* which one */
	struct cour_peer    *peer;
	uint8_t              op_type;         /* EAGER, RTS (becomes RDATA), WRITE, READ_REQ, ATOMIC;
					       * internal: CTS, DONE, READ_RESP, RMA_RESP */
	uint8_t              state;
	uint16_t             hdr_flags;       /* COUR_F_* */
	uint32_t             msg_id;
	uint32_t             rx_id;           /* RDATA: the receiver's id from CTS */
	void                *context;
	void                *owner;           /* a scalable endpoint's transmit context: where
					       * its completion goes (NULL: the endpoint's) */
	void                *group;           /* one part of an RMA with several remote iovecs:
					       * the object layer completes the whole once */
	uint64_t             op_flags;        /* FI_COMPLETION, FI_INJECT, FI_DELIVERY_COMPLETE... */
	uint64_t             cq_flags;        /* FI_SEND | FI_MSG or FI_TAGGED */
	uint64_t             tag, data;
	uint64_t             total_len;       /* bytes this txe sends (RDATA: accepted by CTS) */
	uint64_t             msg_len;         /* the application's message length */
	uint64_t             built;           /* bytes put into packets so far */
	uint32_t             pkts_out;        /* packets built and not yet acknowledged */
	uint32_t             iov_count;
	struct iovec         iov[COUR_IOV_MAX];
	void                *inject_buf;      /* copy of the data for FI_INJECT (ep->inject_pool) */
	/* RMA and atomics (tag holds the key) */
	uint64_t             raddr;           /* target address (or offset) of byte 0 */
	uint64_t             received;        /* READ_REQ: bytes of READ_RESP placed so far */
	bool                 resp_done;       /* the target's answer arrived (RMA_RESP/all data) */
	bool                 split_wait;      /* split copy: the receiver still reads our buffer */
	bool                 notice;          /* the engine's own RDATA (a split hole filled) */
	bool                 short_rts;       /* an eager message sent as RTS (cour_credit.c) */
	bool                 rts_plain;       /* an RTS without single copy, waiting for CTS */
	uint64_t             split_at;        /* split copy: where the receiver's half ends... */
	uint64_t             split_base;      /* ...and its buffer (byte 0), for a refused half */
	int                  resp_err;        /* ... and its courier prov_errno, 0: success */
	void                *snap;            /* READ_RESP: private copy of the data (malloc) */
	uint32_t             res_count;       /* fetching atomics: where the old values go */
	struct iovec         res_iov[COUR_IOV_MAX];
};

/* The iovecs of bytes [off, off + len) of iov[0..count): at most count of them, in out. */
static inline size_t cour_iov_slice(const struct iovec *iov, size_t count, uint64_t off,
				    size_t len, struct iovec *out)
{
	size_t n = 0;

	for (size_t i = 0; i < count && len; i++) {
		size_t l = iov[i].iov_len;
		if (off >= l) {
			off -= l;
			continue;
		}
		out[n].iov_base = (char *)iov[i].iov_base + off;
		out[n].iov_len = COUR_MIN(l - off, len);
		len -= out[n].iov_len;
		off = 0;
		n++;
	}
	return n;
}

/* Packet types whose txe is the engine's own, never reported to the application. */
static inline bool cour_txe_internal(const struct cour_txe *txe)
{
	return txe->op_type == COUR_PKT_CTS || txe->op_type == COUR_PKT_DONE ||
	       txe->op_type == COUR_PKT_READ_RESP || txe->op_type == COUR_PKT_RMA_RESP ||
	       txe->notice;
}

/* One posted receive. */
struct cour_rxe {
	struct cour_rxe     *next, *prev;     /* q->msg / tag */
	struct cour_rxq     *q;               /* the queue it was posted to */
	void                *context;
	uint64_t             op_flags;        /* FI_COMPLETION, FI_MULTI_RECV, FI_PEEK, FI_CLAIM.. */
	uint64_t             tag, ignore;
	fi_addr_t            src;             /* FI_ADDR_UNSPEC: any */
	uint32_t             iov_count;
	struct iovec         iov[COUR_IOV_MAX];
	size_t               buf_len;         /* sum of iov */
	/* FI_MULTI_RECV: bytes of iov[0] handed out so far and slices still being filled */
	size_t               multi_off;
	uint32_t             multi_pending;
	bool                 multi_retired;
};

/*
 * A message being received: matched (into an rxe slice) or unexpected (into its own buffer).
 * For rendezvous the sender's data arrives later as RDATA keyed by rx_id.
 */
struct cour_rxmsg {
	struct cour_rxmsg   *next, *prev;     /* ep->rxq->umsg / utag while unexpected */
	UT_hash_handle       hh;              /* ep->rdv_by_id while waiting for RDATA */
	struct cour_peer    *peer;
	struct cour_rxe     *rxe;             /* NULL while unexpected */
	struct cour_rxq     *q;               /* the queue it arrived at */
	uint32_t             rx_id;
	uint32_t             msg_id;          /* the sender's id (RTS, DONE) */
	uint32_t             session;         /* the peer session (our nonce) it arrived in */
	uint16_t             hdr_flags;
	bool                 rts;             /* rendezvous: no data until CTS */
	bool                 claimed;         /* FI_CLAIM: reserved for claim_ctx */
	bool                 nomem;           /* unexpected copy failed: report FI_ENOMEM */
	bool                 discard;         /* FI_DISCARD: drop the data as it arrives */
	bool                 credit_early;    /* unexpected: credit given back when buffered */
	bool                 adopting;        /* an RTS we cleared before its receive, whose data
					       * still comes as RDATA (in rdv_by_id) into ubuf or
					       * the receive: then it is an eager message */
	uint32_t             units;           /* credit units it took */
	size_t               unexp_cost;      /* bytes it counts in stats.unexp_bytes, 0: none */
	fi_addr_t            dgram_src;       /* datagrams have no peer: their source */
	struct cour_pep     *dgram_ep;        /* ...and where an unexpected one arrived */
	void                *claim_ctx;
	uint64_t             tag, data;
	uint64_t             total_len;       /* the sender's message length */
	uint64_t             received;        /* bytes arrived so far */
	/* where the data goes: the matched rxe's buffer (from slice_off) or the unexpected copy */
	char                *ubuf;            /* unexpected: malloc'd total_len bytes */
	size_t               slice_off;       /* multi-recv: offset of this message in iov[0] */
	size_t               accept_len;      /* bytes the receiver keeps (truncation) */
	uint64_t             cma_addr;        /* RTS|CMA: the sender's buffer, to pull from */
	uint64_t             split;           /* split copy: the sender writes from here on */
	bool                 split_failed;    /* ...and our own half could not be pulled */
	bool                 split_hole;      /* ...refused: the sender writes it (DONE asked) */
	uint64_t             hole_filled;     /* ...or sends it in packets: bytes of it arrived */
};

/* Send-window slot: everything needed to (re)build one sequenced packet. */
struct cour_txpkt {
	struct cour_txe     *txe;             /* owner of the payload; NULL for bare control */
	uint64_t             offset;          /* payload: txe bytes [offset, offset + len) */
	uint32_t             len;
	uint32_t             tries;
	uint64_t             sent_us;         /* 0: built but never on the wire */
	bool                 sacked;
	uint8_t              flush_gen;       /* ep->flush_gen when last queued, and the bytes */
	uint16_t             flush_off;       /* queued before it, 128s (cour_slot_left) */
	struct cour_pkt_hdr  hdr;             /* everything but the fields filled at send time */
};

/* Receive-window slot: an early packet held until the ones before it arrive. */
struct cour_rxslot {
	void                *buf;             /* from ep->rxbuf_pool; NULL: empty */
	uint32_t             len;
};

enum cour_peer_state {
	COUR_PEER_IDLE,       /* no session with the peer yet, or reset */
	COUR_PEER_ACTIVE,
};

struct cour_peer {
	UT_hash_handle       hh;              /* ep->peers, keyed on addr */
	struct cour_peer    *act_next, *act_prev; /* ep->active: peers with timers or work */
	bool                 on_active;
	struct cour_peer    *quiet_next, *quiet_prev; /* ep->quiet: windows kept while idle */
	bool                 on_quiet;
	uint64_t             quiet_since;
	struct cour_pep      *ep;
	struct cour_addr     addr;
	union cour_sockaddr  sa;
	socklen_t            sa_len;
	fi_addr_t            fi_addr;         /* cached reverse lookup; see av_gen */
	uint64_t             av_gen;
	uint32_t             mtu;             /* payload bytes per packet for this peer */
	uint8_t              unroutable;      /* 1: the wire cannot send there (peer_mtu 0):
					       * its operations fail at once; 2: and said so */

	uint32_t             local_session, remote_session;
	/* with a key: the session of ours offered, while one lives, to a sender that claims a
	 * new one (0: none), and when a challenge last offered one (proto/cour_peer_rx.c) */
	uint32_t             session_offer;
	uint64_t             challenge_us;

	/* transmit side */
	uint32_t             tx_una, tx_next;
	struct cour_txpkt   *txwin;           /* send ring, txcap slots (proto/cour_peer_win.c) */
	uint32_t             txcap;           /* 0: none; a power of two <= params.window */
	uint64_t             inflight_bytes;  /* of packets built and not acknowledged */
	uint64_t             sacked_bytes;    /* ...of them SACKed: no longer on the network */
	struct cour_cc       cc;              /* congestion window (proto/cour_cc.h) */
	/* Every unfinished txe of the peer is on exactly one of these lists (utlist DL): */
	struct cour_txe     *ctrlq;           /* CTS, DONE, RDATA: need no credit, go first */
	struct cour_txe     *txq;             /* EAGER, RTS: packets left to build */
	struct cour_txe     *tx_inflight;     /* all packets built, waiting for ACKs */
	struct cour_txe     *tx_wait;         /* waiting for CTS or DONE */
	uint32_t             sack_hi;         /* highest SACKed seq, if sack_valid and >= tx_una */
	bool                 sack_valid;
	uint32_t             tx_credit_limit; /* from the peer's headers (credit units) */
	uint32_t             tx_credit_used;  /* units of eager messages + RTS sent */
	bool                 credit_stalled;  /* counted once per stall */
	uint32_t             short_rts;       /* eager messages sent as RTS, not yet cleared */
	uint32_t             rts_plain;       /* RTS without single copy, not yet cleared */
	uint32_t             next_msg_id;
	uint64_t             srtt_us, rttvar_us, rto_us;
	uint64_t             rto_deadline;    /* 0: not armed */
	uint64_t             last_ack_us;     /* last time the peer acknowledged progress */
	bool                 tail_probed;     /* the tail probe went since that (peer_ack.c) */
	uint64_t             last_heard_us;   /* last valid packet of any kind from the peer */
	uint64_t             probe_deadline;  /* waiting on the peer: next liveness probe, 0: none */
	uint64_t             wait_since_us;   /* ...since then (silence before it is not silence) */
	uint64_t             refused_us;      /* its host said no one listens there (ICMP), 0: no */
	bool                 silence_warned;  /* said once per silence that it is long */

	/* receive side */
	uint32_t             rx_next;
	struct cour_rxslot  *rxwin;           /* early packets held, rxcap slots, only once
					       * one arrives out of order */
	uint32_t             rxcap;
	uint32_t             rx_held;
	uint32_t             credits_granted; /* cumulative limit we advertise (units) */
	uint32_t             credits_sent;    /* the limit last put on the wire */
	uint32_t             rx_units;        /* units of the messages the peer started */
	uint32_t             grant_extra;     /* units lent beyond FI_COURIER_CREDITS */
	bool                 ack_needed;
	uint32_t             rx_since_ack;
	uint64_t             rx_stamp_ns;     /* when the kernel took the newest packet delivered
					       * in order (wire->rx_stamp_ns), 0: unknown; an
					       * ACK tells the sender how long we held it */
	uint64_t             ack_deadline;
	struct cour_rxmsg   *rx_cur;          /* eager message being reassembled */
	uint32_t             rma_rx_id;       /* the WRITE whose fragments are arriving */
	int                  rma_rx_err;      /* ... refused already (prov_errno): ignore the rest */
	uint32_t             rx_rdv_pending;  /* our CTSes still waiting for the peer's RDATA */

	/* same host (proto/cour_shm_peer.c): the peer's ring, mapped once its HELLO arrived */
	struct cour_shm_ring *shm;
	bool                 via_shm;         /* sequenced packets go through shm (in order) */
	bool                 shm_blocked;     /* its ring was full: resend from tx_una first */
	bool                 shm_retrying;
	uint8_t              hello_tries;     /* HELLOs we sent unasked (a lost one is resent) */
	uint64_t             hello_next_us;   /* not before then */
	int                  pidfd;           /* the peer's process, -1: none */
	uint32_t             shm_pid;
	uint64_t             shm_nonce;
	bool                 cma_off;         /* we cannot single-copy with it (kernel said no) */
	uint64_t             push_held_us;    /* when its ring was last seen held by its owner */
	bool                 peer_mapped;     /* it mapped our ring (its HELLO said) */
	bool                 peer_pulls;      /* it can single-copy with us (its HELLO said) */
	bool                 pinned;          /* messages refer to it (cour_peer_evict_strangers) */
	uint32_t             grants_open;     /* its RMA copies shared with it (ep->grants) */
	/* mailboxes (wire/cour_shm_box.h): ours to it in our file, its to us in its file */
	struct cour_box_tx   box;
	struct cour_box_rx   inbox;
	uint32_t             ring_puts;       /* packets we put into its ring (a box entry's stamp) */
	uint32_t             ring_got;        /* the put index of its last ring packet handled */
	uint32_t             box_stamp;       /* its box entry waiting for a ring packet: stamp */
	bool                 box_blocked;     /* ...there is one */
};

/* Target side of a big RMA whose copy the initiator shares (proto/cour_rma_split.c): we copy
 * [0, split), the initiator [split, total) under a lease in our ring. */
struct cour_grant {
	struct cour_grant   *next, *prev;     /* ep->grants, oldest first */
	struct cour_peer    *peer;
	struct cour_region  *mr;              /* its region: closing it settles the grant first */
	uint8_t              type;            /* WRITE or READ_REQ */
	uint16_t             hdr_flags;       /* the request's (COUR_F_CQ_DATA) */
	uint32_t             msg_id;
	uint32_t             slot;            /* the lease in our ring */
	uint64_t             gen;
	uint64_t             data;            /* remote CQ data */
	uint64_t             total, split;
	char                *dst;             /* our memory of byte 0 */
	uint64_t             iaddr;           /* the initiator's buffer of byte 0 */
	uint64_t             opened_us;
};

/* Every packet dropped as malformed is counted, and said why at debug level. */
#define COUR_DROP_BAD(ep, why) do { \
	(ep)->stats.drop_bad_hdr++; \
	COUR_DBG(FI_LOG_EP_DATA, "dropped packet: %s\n", why); \
} while (0)

/*
 * Posted receives and unexpected messages: an endpoint's own, or a shared receive context's
 * (fi_srx_context) that several endpoints of one domain take from. A message that arrives at
 * one of them is matched against the shared receives and reported to that endpoint's CQ; an
 * unexpected message keeps its peer (m->peer->ep: where it arrived) while it waits here.
 */
struct cour_rxq {
	struct cour_rxe     *msg, *tag;       /* posted receives, utlist DL, in posting order */
	struct cour_rxmsg   *umsg, *utag;     /* unexpected messages, in arrival order */
	struct cour_pool     rxe_pool;
	size_t               dgram_bytes;     /* unexpected datagrams held (FI_EP_DGRAM) */
	void                *owner;           /* a scalable endpoint's receive context: where
					       * its completions go (NULL: the endpoint's) */
	bool                 closed;          /* ...closed: arrivals dropped, completions too */
};

/*
 * The engine's endpoint: what the protocol needs of an RDM or DGRAM endpoint, embedded in the
 * object layer's struct cour_ep. Guarded by the domain's progress lock (fi/cour_fi.h), which *lock
 * points to.
 */
struct cour_pep {
	struct cour_pdom    *pdom;            /* the engine's half of the domain */
	struct cour_pep     *pdom_next, *pdom_prev;  /* pdom->peps, while enabled */
	struct cour_lock    *lock;            /* the domain's progress lock */
	const struct cour_up_ops *up;         /* how it reports upward (the object layer) */
	const uint64_t      *av_gen;          /* the bound AV's generation (NULL: no AV) */
	enum fi_ep_type      type;
	uint64_t             caps;
	bool                 enabled;
	uint64_t             tx_op_flags, rx_op_flags;
	size_t               min_multi_recv;
	uint64_t             target_events;   /* FI_REMOTE_READ/WRITE: counted on the endpoint */

	/* the wire, chosen at open (wire/cour_wire.h): its fd, bound address and batches */
	struct cour_wire     wire;
	bool                 tx_blocked;      /* a ring was full: retry in the next progress */
	bool                 in_progress;     /* cour_ep_progress is running */
	bool                 tx_deferred;     /* packets queued in the wire for the next pass */
	/* while the wire stamps arrivals (congestion control measures delay): for each of the
	 * last COUR_FLUSH_HIST flushes, when it began and ended and the bytes it took. Sending
	 * a big window takes a while, and a packet's wait there is no queue in the network: it
	 * left about its share of the way through (cour_slot_left). A flush the wire makes
	 * itself (its batch full) counts as one, from its first packet's queueing */
	uint8_t              flush_gen;
	uint64_t             flush_queued, flush_first_us;
	uint64_t             flush_t0[16], flush_t1[16], flush_bytes[16];
	/* same-host peers (proto/cour_shm_peer.c): our receive ring, NULL when shm is off */
	struct cour_shm_ring *shm_ring;
	struct cour_shm_locator shm_loc;
	struct cour_peer    *inboxes[COUR_BOX_COUNT];   /* peers whose boxes we poll */
	uint32_t             ninboxes;
	bool                 box_blocked;     /* an inbox waits for the ring (cour_shm_poll) */
	bool                 rx_borrowed;     /* the packet being handled lives in the ring */
	uint64_t             rx_other_version; /* packets of another wire version (logged) */
	bool                 rx_placed;       /* ...its payload is already where it belongs */
	bool                 shm_armed;       /* we asked producers for a doorbell (sleeping) */
	uint64_t             udp_last_us;     /* when a polling caller last read the socket */
	uint32_t             udp_gap_us;      /* ...and when it reads it next (cour_progress.c) */
	uint64_t             udp_rx_us;       /* when the socket last had packets for us */
	uint64_t             now_us;          /* the clock as this progress call read it */
	uint64_t             train_us;        /* read once per GRO train read in place */
	bool                 train_clock;     /* handling a piece of that train: use train_us */
	uint64_t             ticks_last;      /* ...and the time-stamp counter then */

	size_t               tx_outstanding;  /* application sends not yet completed */
	struct cour_grant   *grants;          /* RMA copies shared with initiators */
	struct cour_region  *win_mr[COUR_SHM_WINDOWS]; /* regions offered in our ring's windows */

	/* engine state */
	struct cour_peer    *peers;           /* uthash on addr */
	struct cour_peer    *peer_last;       /* the last one looked up by address */
	size_t               peer_count, peer_cap;  /* peers, and when to free strangers */
	struct cour_peer   **peer_by_fiaddr;  /* cache indexed by fi_addr_t */
	size_t               peer_cache_len;
	uint64_t             peer_cache_gen;
	struct cour_peer    *active;          /* DL via act_next/act_prev */
	struct cour_peer    *quiet;           /* left active holding windows, oldest first */
	uint64_t             quiet_swept_us;  /* the clock at the last look at them */
	struct cour_rxq     *rxq;             /* &own_rxq, or a shared receive context's; on a
					       * scalable endpoint the context being posted to or
					       * the one a message being handled names */
	struct cour_rxq      own_rxq;
	/* scalable endpoints (cour_sep.c): receive context i's queue (NULL until opened) */
	struct cour_rxq    **rxqs;
	uint32_t             nrxq;
	/* what the object layer posts through: set around a post, under the lock */
	void                *tx_owner;        /* a transmit context, copied into each txe */
	bool                 tx_counted;      /* a counter is bound to the endpoint itself */
	uint32_t             tx_rx_ctx;       /* receive context a send names (fi_rx_addr) */
	void                *tx_group;        /* RMA parts: their group, copied into each txe */
	bool                 tx_part;         /* ...and this part is not the last (COUR_F_PART) */
	uint32_t             tx_whole_len;    /* ...the operation's bytes, on its last write */
	struct cour_rxmsg   *rdv_by_id;       /* uthash on rx_id */
	uint32_t             next_rx_id;
	uint64_t             next_timer;      /* earliest deadline among active peers, 0: none */
	uint64_t             cm_deadline;     /* FI_EP_MSG: when up->cm_tick runs, 0: never */
	/* FI_EP_MSG accepting endpoint: its socket shares the listener's port, connected to
	 * this peer (wire connect_to); set before cour_pep_open */
	const struct cour_addr *wire_peer;
	/* the secret every datagram is authenticated with (wire/cour_mac.h), or none (len 0):
	 * set before cour_pep_open, read only there */
	const void          *auth_key;
	size_t               auth_key_len;

	struct cour_pool     txe_pool, rxmsg_pool, inject_pool, rxbuf_pool;
	size_t               unexp_early;     /* bytes of unexpected messages whose credit is back */
	size_t               grant_extra;     /* credit units lent to peers beyond the first grant */
	bool                 grant_short;     /* a peer was refused a loan: loans are repaid */
	size_t               rxbuf_size;

	struct fi_courier_stats stats;        /* the engine's; the wire counts its own */
};

/*
 * A registered memory region as the target checks it (struct cour_mr wraps one). Remote
 * addresses name byte 0 as `start`: its virtual address under FI_MR_VIRT_ADDR, else the
 * registration's offset.
 */
struct cour_region {
	UT_hash_handle       hh;              /* pdom->regions, on key */
	uint64_t             key;
	uint64_t             access;          /* FI_REMOTE_READ | FI_REMOTE_WRITE | ... */
	void                *base;            /* lowest address of the region */
	size_t               len;             /* one contiguous region (mr_iov_limit is 1) */
	uint64_t             start;
	uint64_t             counted;         /* events a counter bound to the region counts */
	struct cour_pep     *only;            /* FI_MR_ENDPOINT: the one endpoint it serves */
	bool                 enabled;         /* FI_MR_ENDPOINT regions: after fi_mr_enable */
};


/*
 * Check a remote access that arrived on endpoint ep, at the target: the key exists in ep's
 * domain and the region is enabled (under FI_MR_ENDPOINT: and bound to ep, else the key is
 * unknown to ep), [addr, addr+len) is inside the region and access is allowed. On success
 * sets *ptr to local memory (and *reg) and returns 0; else a COUR_E_* code (COUR_E_BAD_KEY,
 * COUR_E_BOUNDS, COUR_E_ACCESS). Lock held. (proto/cour_region.c)
 */
int cour_region_check(struct cour_pep *ep, uint64_t key, uint64_t addr, size_t len,
		      uint64_t access, void **ptr, struct cour_region **reg);
/* Add r to the domain (its key unique there: 0) or -FI_ENOKEY; remove it. Lock held. */
int  cour_region_add(struct cour_pdom *pdom, struct cour_region *r);
void cour_region_del(struct cour_pdom *pdom, struct cour_region *r);
struct cour_region *cour_region_find(struct cour_pdom *pdom, uint64_t key);

/*
 * What the engine reports upward and asks of the object layer. One table per endpoint kind
 * (cour_ep.c's is the only one outside tests); every call is made with the lock held.
 *
 *   tx_done      an application's send, RMA or atomic finished: err 0, or its error with
 *                the courier prov_errno (the engine frees txe after the call);
 *   rx_done      a receive finished (e: the completion's fields, op_flags: the receive's,
 *                err or olen: an error completion, truncation when olen);
 *   target_done  we were the target of an RMA or atomic that raised events (FI_REMOTE_READ
 *                and/or FI_REMOTE_WRITE) on region r (NULL: none known); cq_data: a
 *                completion carrying the initiator's remote CQ data, else NULL;
 *   av_lookup    the address of fi_addr in the bound AV, or NULL;
 *   av_reverse   the fi_addr of an address (FI_ADDR_NOTAVAIL when not inserted);
 *   av_same      do two fi_addr name the same address (two insertions of one peer)?
 *   progress     run the progress of the whole domain (a post out of resources makes room).
 */
struct cour_cq_entry;
struct cour_up_ops {
	void (*tx_done)(struct cour_pep *ep, const struct cour_txe *txe, int err, int prov_errno);
	void (*rx_done)(struct cour_pep *ep, const struct cour_rxq *q,
			const struct cour_cq_entry *e, uint64_t op_flags, int err, int prov_errno,
			size_t olen);
	void (*target_done)(struct cour_pep *ep, struct cour_region *r, uint64_t events,
			    const struct cour_cq_entry *cq_data);
	const struct cour_addr *(*av_lookup)(struct cour_pep *ep, fi_addr_t fi_addr);
	fi_addr_t (*av_reverse)(struct cour_pep *ep, const struct cour_addr *addr);
	bool (*av_same)(struct cour_pep *ep, fi_addr_t a, fi_addr_t b);
	void (*progress)(struct cour_pep *ep);
	/* FI_EP_MSG only (NULL otherwise): a checked CM packet from `from`; the CM timer
	 * (cm_deadline) expired; the session with a peer ended in error (prov_errno), so every
	 * operation to it failed; ICMP port unreachable from addr */
	void (*cm_rx)(struct cour_pep *ep, const struct cour_addr *from,
		      const struct cour_cm_hdr *cm, uint64_t cookie, const uint8_t *data);
	void (*cm_tick)(struct cour_pep *ep, uint64_t now);
	void (*peer_lost)(struct cour_pep *ep, const struct cour_addr *addr, int prov_errno);
	/* ICMP port unreachable from addr: nothing listens there */
	void (*cm_refused)(struct cour_pep *ep, const struct cour_addr *addr);
};

/* The fields of one completion, as the engine reports it and a CQ keeps it. */
struct cour_cq_entry {
	void                *op_context;
	uint64_t             flags;
	size_t               len;
	void                *buf;
	uint64_t             data;
	uint64_t             tag;
	fi_addr_t            src;             /* for fi_cq_readfrom: FI_ADDR_NOTAVAIL when unknown */
};

#ifndef COUR_MAX_MSG_SIZE
#define COUR_MAX_MSG_SIZE  ((1ULL << 32) - 1)
#endif /* COUR_ENGINE_H */
#ifndef COUR_DGRAM_MAX_MSG
#define COUR_DGRAM_MAX_MSG (COUR_MAX_PKT - 80)
#endif /* COUR_ENGINE_H */

/* The time, for the receive path: packets taken from a shm ring in one progress call share
 * the clock read that call made (a clock read costs as much as a small message's handling). */
static inline uint64_t cour_ep_clock(const struct cour_pep *ep)
{
	if (ep->rx_borrowed)
		return ep->now_us;
	return ep->train_clock ? ep->train_us : cour_now_us();
}

/*
 * The clock, for an endpoint polled in a tight loop beside busy rings: a clock read costs a
 * quarter of an empty pass, so it is taken again only once the time-stamp counter has moved
 * COUR_TICKS_GAP (a few microseconds on any x86 of 2..5 GHz: the granularity of timers and
 * of the socket gap then). Elsewhere, and after a sleep, every pass reads the clock. A counter
 * that goes backwards (another core's) only makes the pass read the clock. A send to a
 * same-host peer reads it this way too (cour_peer_push): the ring needs no timer finer
 * than that.
 */
#if defined(__x86_64__)
#include <x86intrin.h>
#define COUR_TICKS_GAP 8192
static inline uint64_t cour_ep_clock_refresh(struct cour_pep *ep, bool force)
{
	uint64_t t = __rdtsc();

	if (force || t - ep->ticks_last >= COUR_TICKS_GAP) {
		ep->ticks_last = t;
		ep->now_us = cour_now_us();
	}
	return ep->now_us;
}
#else
static inline uint64_t cour_ep_clock_refresh(struct cour_pep *ep, bool force)
{
	return ep->now_us = cour_now_us();
}
#endif

/* A deadline set outside cour_ep_timers: the progress loop must not sleep past it. */
static inline void cour_ep_timer_at(struct cour_pep *ep, uint64_t t)
{
	if (!ep->next_timer || t < ep->next_timer)
		ep->next_timer = t;
}

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
	       peer->tx_una == peer->tx_next;
}
fi_addr_t cour_peer_fi_addr(struct cour_peer *peer);
void cour_peer_push(struct cour_peer *peer);          /* build and send what the window allows */
void cour_peer_enqueue(struct cour_peer *peer, struct cour_txe *txe);
/* txe's packets may all be acknowledged: complete it or let it wait for the target. */
void cour_txe_check_done(struct cour_peer *peer, struct cour_txe *txe);
void cour_peer_reset(struct cour_peer *peer, int prov_errno);
void cour_peer_activate(struct cour_peer *peer);

/*
 * Windows sized by use (proto/cour_peer_win.c): a peer's rings hold what it has in flight,
 * not FI_COURIER_WINDOW slots from its first packet. Indexing is seq & (cap - 1).
 */
static inline struct cour_txpkt *cour_txslot(const struct cour_peer *peer, uint32_t seq)
{
	return &peer->txwin[seq & (peer->txcap - 1)];
}

static inline struct cour_rxslot *cour_rxslot_of(const struct cour_peer *peer, uint32_t seq)
{
	return &peer->rxwin[seq & (peer->rxcap - 1)];
}

/* Room in the send ring for packet tx_next (grows it); false: at FI_COURIER_WINDOW or no
 * memory. Checked for every packet built: the common case stays inline. */
bool cour_peer_txwin_grow(struct cour_peer *peer);
static inline bool cour_peer_txwin_room(struct cour_peer *peer)
{
	return COUR_LIKELY(peer->tx_next - peer->tx_una < peer->txcap) ||
	       cour_peer_txwin_grow(peer);
}
/* Room in the receive ring for seq (rx_next < seq < rx_next + params.window); false: no
 * memory (the packet is dropped and comes again). */
bool cour_peer_rxwin_fit(struct cour_peer *peer, uint32_t seq);
/* The peer left the active list: its windows go back after FI_COURIER_WIN_IDLE quiet. */
void cour_peer_win_quiet(struct cour_peer *peer, uint64_t now);
void cour_peer_win_sweep(struct cour_pep *ep, uint64_t now);
void cour_peer_win_free(struct cour_peer *peer);
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

/* ---- proto/cour_msg_proto.c: message protocols and matching ---- */
/* The peer for dest and a free txe, or -FI_EINVAL (not in the AV, logged) / -FI_EAGAIN. */
int  cour_txe_get(struct cour_pep *ep, fi_addr_t dest, const char *what, struct cour_peer **peer,
		  struct cour_txe **txe);
/* The data txe sends: the caller's iovecs, or (inject) a copy; -FI_EAGAIN without a buffer. */
int  cour_txe_set_data(struct cour_pep *ep, struct cour_txe *txe, const struct iovec *iov,
		       size_t count, size_t len, bool inject);
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

void *cour_msg_rdata_dest(struct cour_peer *peer, const struct cour_pkt_hdr *hdr, size_t plen);
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
#define COUR_SPLIT_MIN (256u << 10)         /* messages and RMA from this size on */
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

/* A sequenced packet to the peer over the wire: hdr (the window slot's copy) is finished in
 * place, the wire copies it. */
static inline void cour_wire_queue(struct cour_pep *ep, struct cour_peer *peer,
				   struct cour_pkt_hdr *hdr, size_t hdr_len,
				   const struct iovec *iov, size_t iovcnt)
{
	cour_hdr_finish(peer, hdr, hdr_len, iov, iovcnt);
	/* the wire may pack it with the peer's next small packets, up to the peer's MTU */
	ep->wire.ops->queue(&ep->wire, &peer->sa, peer->sa_len, hdr, hdr_len, iov, iovcnt,
			    cour_params.udp_pack ? peer->mtu : 0);
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
/* asked once and not answered: asked again, on a timer, until COUR_HELLO_TRIES */
static inline bool cour_shm_hello_pending(const struct cour_peer *peer)
{
	return peer->hello_tries && peer->hello_tries < COUR_HELLO_TRIES && !peer->peer_mapped;
}
void cour_shm_hello_handle(struct cour_peer *peer, const struct cour_shm_hello *h);
void cour_shm_peer_detach(struct cour_peer *peer);
bool cour_shm_peer_gone(struct cour_peer *peer);
/* A sequenced packet into the peer's ring: 0, or -FI_EAGAIN when it is full. */
int  cour_shm_send(struct cour_peer *peer, const struct cour_pkt_hdr *hdr, size_t hdr_len,
		   const struct iovec *iov, size_t iovcnt);
/* A finished unsequenced packet to the peer, through its ring if mapped. */
int  cour_peer_send_now(struct cour_peer *peer, const void *hdr, size_t hdr_len,
			const struct iovec *iov, size_t iovcnt);
/* An application's send that completes as it is posted (a datagram, a SHORT): tx_done is
 * given the fields of a txe it reads, and no others (a txe is 464 bytes: clearing one was a
 * third of a short send's own instructions). */
static inline void cour_tx_done_now(struct cour_pep *ep, void *context, uint64_t flags,
				    uint64_t cq_flags, size_t len, uint64_t tag)
{
	struct cour_txe t;

	/* an inject with no counter to move reports nothing (the common MPI send) */
	if ((cq_flags & COUR_CQF_NOCOMP) && !ep->tx_owner && !ep->tx_counted)
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
bool   cour_cma_rma_usable(const struct cour_peer *peer, size_t len, size_t count);
bool   cour_cma_msg_usable(const struct cour_peer *peer, size_t len, size_t count);
size_t cour_cma_eager_max(const struct cour_peer *peer);
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
