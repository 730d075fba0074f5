/*
 * Windows sized by use. A send slot is 120 bytes: a 256-slot ring from a peer's first packet
 * was 30 KB per peer ever contacted, 270 MB per rank in an 8,192-rank all-to-all. So a peer's
 * send ring starts at COUR_WIN_MIN slots and doubles while its packets in flight fill it, up
 * to FI_COURIER_WINDOW; its receive ring exists only once a packet arrives out of order (in
 * order needs no slot) and is sized to the furthest one held. A peer that leaves the active
 * list (nothing in flight, no timer) is parked on ep->quiet; FI_COURIER_WIN_IDLE later,
 * still quiet, both rings are freed and it keeps its record alone (and a same-host peer's
 * ring, mapped to write into, leaves our page tables: the pages are the peer's). The list is in parking
 * order, so the sweep looks only at its head: no scan of all peers, ever.
 *
 * Rings are indexed seq & (cap - 1): caps are powers of two, which keeps the index right
 * across the 2^32 wrap of sequence numbers; a resize re-lays the live range into the new ring.
 */
#include "proto/cour_engine.h"

#include <stdlib.h>

#define COUR_WIN_MIN 4u

static uint32_t cour_win_max(void)
{
	return (uint32_t)cour_params.window;
}

bool cour_peer_txwin_grow(struct cour_peer *peer)
{
	uint32_t used = peer->tx_next - peer->tx_una, cap;
	struct cour_txpkt *ring;

	if (used < peer->txcap)
		return true;
	cap = peer->txcap ? peer->txcap * 2 : COUR_MIN(COUR_WIN_MIN, cour_win_max());
	if (cap > cour_win_max())
		return false;
	ring = calloc(cap, sizeof(*ring));
	if (!ring) {
		COUR_WARN(FI_LOG_EP_DATA, "out of memory for a send window of %u slots\n", cap);
		return false;
	}
	for (uint32_t s = peer->tx_una; s != peer->tx_next; s++)
		ring[s & (cap - 1)] = *cour_txslot(peer, s);
	free(peer->txwin);
	peer->ep->stats.win_bytes += (uint64_t)(cap - peer->txcap) * sizeof(*ring);
	peer->ep->stats.win_grows++;
	peer->txwin = ring;
	peer->txcap = cap;
	return true;
}

bool cour_peer_rxwin_fit(struct cour_peer *peer, uint32_t seq)
{
	uint32_t span = seq - peer->rx_next, cap = peer->rxcap ? peer->rxcap : COUR_WIN_MIN;
	struct cour_rxslot *ring;

	if (COUR_LIKELY(span < peer->rxcap))
		return true;
	while (cap <= span)
		cap *= 2;
	if (cap > cour_win_max())
		cap = cour_win_max();      /* span < params.window: the caller checked */
	ring = calloc(cap, sizeof(*ring));
	if (!ring) {
		/* the packet is dropped (drop_no_buf) and comes again: nothing is lost */
		COUR_WARN(FI_LOG_EP_DATA, "out of memory for a receive window of %u slots\n", cap);
		return false;
	}
	/* everything held lies in (rx_next, rx_next + rxcap) */
	for (uint32_t i = 1; i < peer->rxcap; i++) {
		uint32_t s = peer->rx_next + i;

		ring[s & (cap - 1)] = *cour_rxslot_of(peer, s);
	}
	free(peer->rxwin);
	peer->ep->stats.win_bytes += (uint64_t)(cap - peer->rxcap) * sizeof(*ring);
	peer->ep->stats.win_grows++;
	peer->rxwin = ring;
	peer->rxcap = cap;
	return true;
}

/* Both rings go; only when nothing is in them. */
static void cour_peer_win_release(struct cour_peer *peer)
{
	struct cour_pep *ep = peer->ep;

	ep->stats.win_bytes -= (uint64_t)peer->txcap * sizeof(struct cour_txpkt) +
			       (uint64_t)peer->rxcap * sizeof(struct cour_rxslot);
	free(peer->txwin);
	free(peer->rxwin);
	peer->txwin = NULL;
	peer->rxwin = NULL;
	peer->txcap = peer->rxcap = 0;
}

static void cour_peer_unpark(struct cour_peer *peer)
{
	if (peer->on_quiet) {
		DL_DELETE2(peer->ep->quiet, peer, quiet_prev, quiet_next);
		peer->on_quiet = false;
	}
}

void cour_peer_win_quiet(struct cour_peer *peer, uint64_t now)
{
	if (!peer->txcap && !peer->rxcap)
		return;
	cour_peer_unpark(peer);          /* quiet again: the clock starts over, at the tail */
	peer->quiet_since = now;
	DL_APPEND2(peer->ep->quiet, peer, quiet_prev, quiet_next);
	peer->on_quiet = true;
}

/* At most COUR_WIN_SWEEP peers a call: thousands that went quiet together are freed over
 * several progress calls rather than in one long one. */
#define COUR_WIN_SWEEP 64

void cour_peer_win_sweep(struct cour_pep *ep, uint64_t now)
{
	uint64_t idle = (uint64_t)cour_params.win_idle_ms * 1000;
	struct cour_peer *peer;
	int n = 0;

	while ((peer = ep->quiet) && n++ < COUR_WIN_SWEEP &&
	       cour_us_since(now, peer->quiet_since) >= idle) {
		cour_peer_unpark(peer);
		/* busy since it parked: it parks again when it leaves the active list */
		if (peer->on_active || cour_peer_sending(peer) || peer->rx_held)
			continue;
		cour_peer_win_release(peer);
		if (peer->shm)
			cour_shm_ring_forget_pages(peer->shm);
		ep->stats.win_frees++;
	}
}

/* The peer is going away (its rings hold nothing the caller still needs). */
void cour_peer_win_free(struct cour_peer *peer)
{
	cour_peer_unpark(peer);
	cour_peer_win_release(peer);
}
