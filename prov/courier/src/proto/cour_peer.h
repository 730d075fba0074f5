/*
 * A peer and its session: struct cour_peer, its window slots and the inline indexing of its
 * windows (the code is proto/cour_peer*.c). Operation records are in cour_op.h, the endpoint
 * in cour_pep.h; proto/cour_engine.h includes them all.
 */
#ifndef COUR_PEER_H
#define COUR_PEER_H

#include "util/cour_util.h"
#include "util/cour_addr.h"
#include "proto/cour_cc.h"
#include "proto/cour_wire_fmt.h"
#include "wire/cour_shm_ring.h"
#include "wire/cour_wire.h"

#include <sys/socket.h>
#include <uthash.h>

struct cour_pep;
struct cour_txe;
struct cour_rxmsg;

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
	uint32_t             run_bytes;       /* message bytes one GSO run of mtu-sized packets
					       * carries (cour_peer_mtu_set) */
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
	uint16_t             rts_cma;         /* RTS by single copy, not yet cleared (at most
					       * 65535 counted: it only chooses a path) */
	uint32_t             short_rts;       /* eager messages sent as RTS, not yet cleared */
	uint32_t             rts_plain;       /* RTS without single copy, not yet cleared */
	uint32_t             rts_plain_min;   /* the shortest of them since rts_plain was 0 */
	uint32_t             next_msg_id;
	/* the longest the peer's process left our packets unread lately (the holds its ACKs
	 * report, cour_peer_stall_note), and when that was last seen (ms, wrapping): the
	 * retransmit timer waits that long too */
	uint32_t             stall_us, stall_at_ms;
	uint64_t             srtt_us, rttvar_us, rto_us;
	uint64_t             rto_deadline;    /* 0: not armed */
	uint64_t             last_ack_us;     /* last time the peer acknowledged progress */
	bool                 tail_probed;     /* the tail probe went since that (peer_ack.c) */
	bool                 nudged;          /* ...and a probe for a late ACK (cour_peer_nudge) */
	/* its wait doubles per probe the peer got twice (a DUP ACK past probe_seq): a queue
	 * longer than two SRTTs must not draw a probe per flight, each a packet with no RTT
	 * sample (Karn), which kept SRTT where it was; each clean sample halves it back */
	uint8_t              probe_shift;
	bool                 probe_out;       /* probe_seq went as a probe, no DUP ACK yet */
	uint32_t             probe_seq;
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
	bool                 msg_sent;        /* a message of ours went to the peer since its
					       * last one came: the next does not answer one */
	bool                 answers;         /* ours went back within the ACK delay after its
					       * last waited one: the last ACK of the next rides
					       * on our answer (proto/cour_peer_rx.c) */
	bool                 ack_for_answer;  /* the delayed ACK pending waits for that answer */
	uint32_t             rx_since_ack;
	uint64_t             rx_stamp_ns;     /* when the kernel took the newest packet delivered
					       * in order (wire->rx_stamp_ns), 0: unknown; an
					       * ACK tells the sender how long we held it */
	uint32_t             ack_late_us;     /* ...until a packet of ours first acknowledged it
					       * (0: unknown): what a DUP ACK reports */
	uint32_t             ans_wait_us;     /* a waited message of the peer's ended then (the
					       * clock's low bits, never 0), and no message of
					       * ours went back since (0: none) */
	uint64_t             ack_deadline;
	struct cour_rxmsg   *rx_cur;          /* eager message being reassembled */
	uint32_t             rma_rx_id;       /* the WRITE whose fragments are arriving */
	int                  rma_rx_err;      /* ... refused already (prov_errno): ignore the rest */
	uint32_t             rx_rdv_pending;  /* our CTSes still waiting for the peer's RDATA */
	uint32_t             rx_split_pending; /* ...of them, split copies (its half to come) */
	uint32_t             rx_rts_held;     /* its RTS|WANT unexpected and not adopted: its
					       * later ones wait too (cour_rts_adopt) */
	uint32_t             rx_msg_seq;      /* the first piece of its newest message */

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
	uint32_t             inbox_last;      /* the gen of its last box we opened (0: none) */
	uint32_t             ring_puts;       /* packets we put into its ring (a box entry's stamp) */
	uint32_t             box_want;        /* small messages sent through its ring (a box of
					       * ours after COUR_BOX_AFTER of them) */
	uint32_t             ring_got;        /* the put index of its last ring packet handled */
	uint32_t             box_stamp;       /* its box entry waiting for a ring packet: stamp */
	bool                 box_blocked;     /* ...there is one */
};

/* Packets of ours to the peer built and not yet acknowledged (inflight_bytes counts the same
 * slots in bytes: both move together as tx_una passes them). */
static inline bool cour_peer_sending(const struct cour_peer *peer)
{
	return peer->tx_una != peer->tx_next;
}

/* May a send to a same-host peer go into its ring now, ahead of the engine? Only while nothing
 * sequenced waits to be put before it (queues empty, ring not refusing) and it asks no
 * fence or delivery complete, which take the engine's path. The short path and the direct
 * inject both ask this (cour_shm_peer.c, cour_msg_post.c). */
static inline bool cour_peer_ring_clear(const struct cour_peer *peer, uint64_t flags)
{
	return !peer->txq && !peer->ctrlq && !peer->shm_blocked &&
	       !(flags & (FI_DELIVERY_COMPLETE | FI_FENCE));
}

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

/* The peer's packet size, and what a GSO run of such packets carries: asked of every packet
 * queued (cour_wire_queue), so worked out here once rather than divided there. */
static inline void cour_peer_mtu_set(struct cour_peer *peer, uint32_t mtu)
{
	peer->mtu = mtu;
	peer->run_bytes = mtu > COUR_PKT_HDR_LEN ?
			  (COUR_WIRE_GSO_BYTES / mtu) * (mtu - (uint32_t)COUR_PKT_HDR_LEN) : 0;
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

#endif /* COUR_PEER_H */
