/*
 * Shared between the peer (cour_peer.c), the sending side of reliability (cour_peer_tx.c), the
 * acknowledgements it gets (cour_peer_ack.c) and its timers (cour_peer_live.c). Lock held for
 * all of them.
 */
#ifndef COUR_PEER_INT_H
#define COUR_PEER_INT_H

#include "proto/cour_engine.h"

/* txe off the list it is on (if any) and onto the end of to (if not NULL). */
void cour_txe_move(struct cour_txe *txe, struct cour_txe **to);
/* (Re)send one window slot: over the peer's ring if it has one, else queued on the wire. */
void cour_slot_send(struct cour_peer *peer, struct cour_txpkt *slot, uint64_t now);
/* Resend, in order, what a full ring refused; false while the ring stays full. */
bool cour_peer_shm_retry(struct cour_peer *peer, uint64_t now);
/* A slot acknowledged (or in the ring): its txe learns, the slot empties. */
void cour_slot_release(struct cour_peer *peer, struct cour_txpkt *slot);
/* The highest SACKed sequence number still in the window, or false if nothing is SACKed. */
bool cour_peer_last_sacked(const struct cour_peer *peer, uint32_t *last);
/* Holes below a SACKed packet resent from the timer; when to look again, 0: no hole. */
uint64_t cour_peer_hole_timer(struct cour_peer *peer, uint64_t now);
uint64_t cour_peer_tail_probe(struct cour_peer *peer, uint64_t now);
uint64_t cour_peer_nudge_wait(const struct cour_peer *peer);
uint64_t cour_peer_nudge(struct cour_peer *peer, uint64_t now);
uint64_t cour_peer_probe_wait(const struct cour_peer *peer);

/* Bytes on the network toward the peer: built, not acknowledged, not SACKed. */
static inline uint64_t cour_peer_pipe(const struct cour_peer *peer)
{
	return peer->inflight_bytes - peer->sacked_bytes;
}

/* Does the congestion window let one more packet go? Rings are no network. */
static inline bool cour_peer_cc_open(const struct cour_peer *peer)
{
	return peer->via_shm || !cour_params.cc || cour_cc_open(&peer->cc, cour_peer_pipe(peer));
}

/* A packet of the peer found lost: the congestion window decides what it means. */
void cour_peer_cc_loss(struct cour_peer *peer);

#endif
