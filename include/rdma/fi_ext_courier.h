/*
 * courier's extensions to the libfabric API. Include after <rdma/fabric.h>.
 */
#ifndef FI_EXT_COURIER_H
#define FI_EXT_COURIER_H

#include <stdint.h>
#include <rdma/fabric.h>
#include <rdma/fi_endpoint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * FI_OPT_SHARED_MEMORY_PERMITTED (bool, fi_setopt at level FI_OPT_ENDPOINT, before fi_enable):
 * false keeps every peer of the endpoint on UDP, same host or not. The option came with
 * libfabric 1.21's headers; courier takes it under the same value with older headers too.
 */
#define FI_COURIER_OPT_SHARED_MEMORY_PERMITTED 11
#if FI_MAJOR_VERSION > 1 || (FI_MAJOR_VERSION == 1 && FI_MINOR_VERSION >= 21)
_Static_assert(FI_OPT_SHARED_MEMORY_PERMITTED == FI_COURIER_OPT_SHARED_MEMORY_PERMITTED,
	       "FI_OPT_SHARED_MEMORY_PERMITTED moved");
#endif

/* Name for fi_open_ops on an endpoint fid: returns struct fi_courier_ops_ep. */
#define FI_COURIER_EP_OPS "courier_ep_ops_v2"

/*
 * Endpoint statistics: every counter since the endpoint was enabled, summed over its peers.
 * New counters are only ever appended, so a program built with an older header passes its
 * smaller size to get_stats and gets the counters it knows.
 */
struct fi_courier_stats {
	uint64_t tx_pkts, rx_pkts;          /* packets handed to / taken from the wire */
	uint64_t tx_bytes, rx_bytes;        /* payload bytes */
	uint64_t tx_msgs, rx_msgs;          /* messages completed */
	uint64_t acks_sent, acks_rcvd;      /* explicit ACK packets (piggy-backed ones not counted) */
	uint64_t retrans_timeout;           /* packets resent after the retransmit timer fired */
	uint64_t retrans_fast;              /* packets resent on duplicate ACKs or SACK holes */
	uint64_t dup_rcvd;                  /* packets already delivered, dropped */
	uint64_t ooo_rcvd;                  /* packets held for reordering */
	uint64_t drop_window;               /* dropped: beyond the receive window */
	uint64_t drop_bad_hdr;              /* dropped: version, type, length or checksum */
	uint64_t drop_stale_session;        /* dropped: for an earlier incarnation of either side */
	uint64_t drop_no_buf;               /* dropped: no receive buffer (will be resent) */
	uint64_t credit_stalls;             /* sends that waited for receiver credits */
	uint64_t window_stalls;             /* sends that waited for the send window */
	uint64_t unexpected_msgs;           /* messages that arrived before their receive */
	uint64_t peers_unreachable;         /* peers declared unreachable */
	uint64_t peers_reset;               /* peers seen restarting */
	uint64_t rtt_srtt_us;               /* smoothed RTT of the last peer measured */
	uint64_t fault_drops, fault_dups, fault_corrupts, fault_reorders; /* injected faults */
	uint64_t rma_served;                /* RMA and atomic operations executed as the target */
	uint64_t rma_refused;               /* ... refused as the target (key, bounds, access) */
	uint64_t rma_snapshots;             /* reads copied aside to keep WAR/SAR order or
					     * because their region was closed */
	/* same-host peers over shared memory (FI_COURIER_SHM) */
	uint64_t shm_peers;                 /* peers whose ring this endpoint mapped */
	uint64_t shm_tx_pkts, shm_rx_pkts;  /* packets through the rings (also in tx/rx_pkts) */
	uint64_t shm_ring_full;             /* sends that found the peer's ring full and waited */
	uint64_t shm_doorbells;             /* wake-ups sent to a peer sleeping on its socket */
	uint64_t shm_single_copy_bytes;     /* bytes moved by process_vm_readv/writev */
	uint64_t shm_copy_fallbacks;        /* single copies refused: copied through the ring */
	uint64_t shm_reclaimed;             /* ring cells of dead producers skipped */
	uint64_t rx_in_place;               /* UDP packets read straight into the receive or
					     * RMA region (no copy through a packet buffer) */
	uint64_t peers_evicted;             /* peers freed that never exchanged a packet (a
					     * flood from many addresses must not grow memory) */
	uint64_t shm_rma_split;             /* big RMA as the target whose copy the initiator
					     * shared (proto/cour_rma_split.c) */
	uint64_t shm_grants_revoked;        /* ... whose initiator half the target did itself
					     * (ordering, a slow or refusing initiator, closing) */
	uint64_t peer_silences;             /* peers we waited on past FI_COURIER_PEER_WARN */
	uint64_t unexp_credit_early;        /* unexpected messages whose credit went back when
					     * buffered (FI_COURIER_UNEXP_MAX) */
	uint64_t linger_waits;              /* closes that waited for sends to be delivered */
	uint64_t linger_lost;               /* operations still undelivered when the linger
					     * ran out (logged with their peer) */
	uint64_t peers_refused;             /* ICMP port unreachable for a peer's address */
	uint64_t shm_rma_pushed;            /* RMA writes this endpoint copied itself into a
					     * same-host target's published region (no round
					     * trip: proto/cour_rma_push.c) */
	uint64_t shm_push_notices;          /* ... and, as the target, the notices of such
					     * writes it raised events for */
	/* the UDP wire's batching (FI_COURIER_UDP_GSO, FI_COURIER_UDP_GRO) */
	uint64_t udp_gso, udp_gro;          /* 1: in use on this endpoint's socket now */
	uint64_t udp_gso_sends, udp_gso_segs; /* GSO calls, and the packets they carried */
	uint64_t udp_gro_trains, udp_gro_segs; /* coalesced buffers received, and their packets */
	uint64_t rx_sock_drops;             /* packets the kernel dropped: socket buffer full */
	/* per-peer memory (FI_COURIER_WIN_IDLE): windows grow with use, go back when quiet */
	uint64_t peers;                     /* peer records now (sessions, strangers included) */
	uint64_t win_bytes;                 /* bytes of send and receive windows held now */
	uint64_t win_grows, win_frees;      /* window (re)allocations, and windows freed idle */
	/* credits in bytes (FI_COURIER_CREDITS, _CREDITS_MAX, _UNEXP_MAX) */
	uint64_t unexp_bytes, unexp_peak;   /* unexpected messages buffered now, and at most */
	uint64_t credit_rts;                /* eager messages sent as RTS for lack of units */
	uint64_t credit_grants;             /* loans of units made to peers that ran short */
	uint64_t credit_refused;            /* ... cut short or refused: the budget was spent */
	uint64_t credit_repaid;             /* units taken back from loans for other peers */
	uint64_t rts_adopted;               /* unexpected RTS cleared into a buffer of ours
					     * (within FI_COURIER_UNEXP_MAX) */
	uint64_t retrans_probe;             /* tail probes: the newest packet resent two SRTTs
					     * after it left with nothing acknowledged */
	/* authentication (auth_key, FI_COURIER_AUTH_KEY_FILE) */
	uint64_t drop_bad_mac;              /* datagrams that failed it: another key, no key
					     * (or a key here and none there), or forged */
	uint64_t drop_replay;               /* authentic datagrams refused as copies: seen
					     * already, or stamped too far from our clock */
	/* same-host small messages (issue 31) */
	uint64_t shm_short;                 /* messages sent through a ring outside the
					     * sequence, completed as put (SHORT) */
	uint64_t shm_box;                   /* ...of them, through the peer's mailbox */
	uint64_t shm_box_rx;                /* messages taken from our peers' mailboxes */
	uint64_t shm_box_broken;            /* mailboxes given up: an entry broke the rules */
	/* packed datagrams (FI_COURIER_UDP_PACK) */
	uint64_t udp_packs, udp_packed;     /* datagrams sent packed, and the packets in them */
	uint64_t udp_packs_rcvd;            /* packed datagrams received */
	/* congestion control (FI_COURIER_CC): the last peer acknowledged, then totals */
	uint64_t cc_cwnd;                   /* its congestion window, bytes */
	uint64_t cc_base_rtt_us;            /* its lowest RTT: the path with empty queues */
	uint64_t cc_qdelay_us;              /* its queueing delay in the last round measured */
	uint64_t cc_cuts_delay;             /* windows cut: a round's queue above the target */
	uint64_t cc_cuts_loss;              /* ... a loss with a queue behind it */
	uint64_t cc_cuts_timeout;           /* ... the retransmit timer, nothing SACKed */
	uint64_t cc_loss_random;            /* losses with no queue behind them: not cut */
	uint64_t cc_compete;                /* peers that turned loss-based beside a flow
					     * that fills the queue (TCP) */
	uint64_t cc_stalls;                 /* rounds in which the window held sends back */
	uint64_t cc_rto_spurious;           /* timeouts undone: the peer had the packet, its
					     * process was late to acknowledge it */
	/* fresh sessions with a key (docs/protocol.md, Sessions) */
	uint64_t session_challenges;        /* RESETs that offered a session of ours to a
					     * sender claiming a new one of its own */
	uint64_t session_proofs;            /* sessions begun: the sender named our offer */
	uint64_t drop_unproven;             /* packets of a session not (yet) proven fresh */
	/* same-host mailboxes, again */
	uint64_t shm_box_freed;             /* mailboxes of pairs gone quiet given back */
	uint64_t rtt_stall_us;              /* the longest recent pause (packets held
					     * unread) of the last peer that reported one:
					     * its retransmit timer waits that much more */
	/* late ACKs (FI_COURIER_NUDGE) */
	uint64_t nudges;                    /* probes sent: a peer's ACK was late */
	uint64_t bell_rcvd;                 /* probes the doorbell socket took, each of
					     * which woke the progress thread */
	uint64_t rts_in_order;              /* eager messages sent as RTS behind a plain
					     * RTS of no greater length, to keep their order */
	uint64_t shm_split_rx;              /* same-host messages received by split copy
					     * (each process copied a part) */
	uint64_t udp_pads;                  /* short datagrams sent padded (a packed datagram
					     * of one) so that a GSO run goes on past them */
};

struct fi_courier_ops_ep {
	size_t size;                        /* sizeof(struct fi_courier_ops_ep) */
	/* Copy the endpoint's statistics into the first `size` bytes of `stats` (pass
	 * sizeof(*stats)): counters this courier does not have read 0. Returns 0 or a negative
	 * FI_* code (-FI_EINVAL: no buffer, or a size of no whole counter). */
	int (*get_stats)(struct fid_ep *ep, struct fi_courier_stats *stats, size_t size);
};

#ifdef __cplusplus
}
#endif

#endif /* FI_EXT_COURIER_H */
