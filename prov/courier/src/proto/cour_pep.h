/*
 * The engine's endpoint (struct cour_pep), the interface through which it reports upward
 * (struct cour_up_ops) and its clock. Peers are in cour_peer.h, operation records and
 * receive queues in cour_op.h; proto/cour_engine.h includes them all.
 */
#ifndef COUR_PEP_H
#define COUR_PEP_H

#include "util/cour_util.h"
#include "util/cour_addr.h"
#include "util/cour_pool.h"
#include "proto/cour_op.h"
#include "proto/cour_wire_fmt.h"
#include "wire/cour_wire.h"
#include "wire/cour_shm_ring.h"

#include <rdma/fi_ext_courier.h>

struct cour_pdom;
struct cour_peer;
struct cour_region;

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
	uint8_t              shm_copy_tick;   /* big ring puts, one in COUR_SHM_RATE_EVERY timed */
	uint8_t              shm_copy_warm;   /* ...once this many went untimed */
	uint32_t             shm_copy_mbps;   /* their copy rate, MB/s (moving average), 0: none
					       * yet (proto/cour_cma.c) */
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
	struct cour_peer    *box_peers[COUR_BOX_COUNT]; /* ...and whose boxes we write, by index */
	uint32_t             boxes_out;       /* how many (cour_shm_boxes_sweep) */
	uint64_t             box_sweep_us;    /* when to look for quiet ones next (0: none) */
	uint64_t             box_head_seen[COUR_BOX_COUNT]; /* each one's head at the last look */
	bool                 box_blocked;     /* an inbox waits for the ring (cour_shm_poll) */
	bool                 rx_borrowed;     /* the packet being handled lives in the ring */
	uint64_t             rx_other_version; /* packets of another wire version (logged) */
	bool                 rx_placed;       /* ...its payload is already where it belongs */
	bool                 shm_armed;       /* we asked producers for a doorbell (sleeping) */
	uint64_t             udp_last_us;     /* when a polling caller last read the socket */
	uint32_t             udp_gap_us;      /* ...and when it reads it next (cour_progress.c) */
	uint64_t             udp_rx_us;       /* when the socket last had packets for us */
	uint64_t             heard_us;        /* when a peer's packet last came (cour_peer_nudge) */
	uint64_t             now_us;          /* the clock as this progress call read it */
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

/* The time, for the receive path: packets taken from a shm ring in one progress call share
 * the clock read that call made (a clock read costs as much as a small message's handling),
 * and the pieces of a GRO train, read in place or not, the reading taken when the wire read
 * it (wire->rx_train_us: a 64 KB train at MTU 1500 is 44 packets, and a reading each was
 * 5-7% of a receiver's time). */
static inline uint64_t cour_ep_clock(const struct cour_pep *ep)
{
	if (ep->rx_borrowed)
		return ep->now_us;
	return ep->wire.rx_train_us ? ep->wire.rx_train_us : cour_now_us();
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

#endif /* COUR_PEP_H */
