/*
 * Timers and liveness: what the engine does when nothing arrives. Each progress pass runs the
 * timers of the active peers only (cour_ep_timers): delayed ACKs, retransmission, HELLOs
 * asked again, and, for a peer that owes us something, the question whether it is alive. A
 * peer is alive while anything of it arrives on any wire or it answers a probe; it is dead on
 * evidence (its process exited, its host refused us) or after FI_COURIER_PEER_TIMEOUT of
 * silence counted from when we began to wait, with a warning at FI_COURIER_PEER_WARN.
 */
#include "proto/cour_engine.h"
#include "proto/cour_peer_int.h"
#include "proto/cour_rel.h"

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
		  (double)quiet_us / 1e6, cour_peer_sending(peer) ? " unacknowledged packets"
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
	const struct cour_txpkt *head = peer->txwin && cour_peer_sending(peer) ?
					cour_txslot(peer, peer->tx_una) : NULL;
	uint64_t now = cour_now_us();
	char str[80];

	/* what the engine believed, for whoever reads this after a hang that should not be */
	bool gone = cour_shm_peer_gone(peer);
	bool refused = !gone && cour_peer_refused_dead(peer, now);

	COUR_WARN(FI_LOG_EP_DATA, "peer %s unreachable: %s%.1f s%s; failing its "
		  "operations (sessions %08x/%08x, tx_una %u tx_next %u rx_next %u held %u, "
		  "head type %u tries %u sent %" PRIu64 " us ago, srtt %" PRIu64 " rto %" PRIu64
		  " us, last ack %" PRIu64 " us ago, last heard %" PRIu64 " us ago, lists %c%c%c%c, "
		  "shm %d pid %u)\n", cour_addr_str(&peer->addr, str, sizeof(str)),
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
		  peer->shm != NULL, peer->shm ? peer->shm_pid : 0);
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
	/* a credit-stalled sender asks again for units: its first WANT may have been lost */
	cour_peer_send_ack(peer, COUR_F_PROBE | (peer->credit_stalled ? COUR_F_WANT : 0));
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

	DL_FOREACH_SAFE2(ep->active, peer, tmp, act_next) {
		uint64_t hole_due, tail_due, nudge_due;

		if (COUR_UNLIKELY(peer->unroutable))
			cour_peer_unroutable(peer);
		if (peer->ack_needed && now >= peer->ack_deadline)
			cour_peer_send_ack(peer, 0);
		if (COUR_UNLIKELY(cour_shm_hello_pending(peer)))
			cour_shm_hello_again(peer);

		if (peer->shm_blocked && cour_peer_shm_retry(peer, now))
			cour_peer_push(peer);
		hole_due = cour_peer_hole_timer(peer, now);
		tail_due = cour_peer_tail_probe(peer, now);
		nudge_due = cour_peer_nudge(peer, now);
		if (peer->rto_deadline && now >= peer->rto_deadline) {
			uint64_t quiet = cour_us_since(now, peer->last_ack_us);

			if (quiet >= (uint64_t)cour_params.peer_timeout_ms * 1000 ||
			    cour_peer_dead_by_evidence(peer, now)) {
				cour_peer_unreachable(peer, quiet);
			} else if (peer->via_shm) {
				/* a full ring, not a loss: cour_peer_shm_retry resends in order;
				 * but a peer that takes nothing for long is quiet all the same */
				cour_peer_silence_warn(peer, quiet);
				peer->rto_deadline = now + peer->rto_us;
			} else {
				cour_peer_silence_warn(peer, quiet);
				/* Resend the unacknowledged head of the window, then back off. The
				 * oldest packet goes even when SACKed (RFC 2018's rule). A peer that
				 * answers while it delivers held packets (an RMA_RESP for the write
				 * the last one completed) acknowledges up to the next held one, which
				 * an earlier ACK SACKed: if the ACKs after that are lost, every packet
				 * in flight is SACKed and only a copy of the oldest draws the
				 * cumulative ACK again. */
				uint32_t n = 0;
				for (uint32_t s = peer->tx_una; s != peer->tx_next &&
				     n <= COUR_SACK_BITS; s++, n++) {
					struct cour_txpkt *slot = cour_txslot(peer, s);
					if (slot->sacked && s != peer->tx_una)
						continue;
					cour_slot_send(peer, slot, now);
					ep->stats.retrans_timeout++;
				}
				cour_wire_flush(ep);
				/* SACKs show the peer receives: a lost resend, not congestion */
				if (!cour_peer_last_sacked(peer, &(uint32_t){ 0 })) {
					peer->rto_us = COUR_MIN(peer->rto_us * 2,
								(uint64_t)cour_params.rto_max_us);
					if (cour_params.cc &&
					    cour_cc_timeout(&peer->cc, peer->tx_next, now))
						ep->stats.cc_cuts_timeout++;
					else if (cour_params.cc)
						ep->stats.cc_loss_random++;
				}
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
			cour_peer_win_quiet(peer, now);
			continue;
		}
		if (peer->rto_deadline && (!next || peer->rto_deadline < next))
			next = peer->rto_deadline;
		if (hole_due && (!next || hole_due < next))
			next = hole_due;
		if (tail_due && (!next || tail_due < next))
			next = tail_due;
		if (nudge_due && (!next || nudge_due < next))
			next = nudge_due;
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
	if (ep->quiet)
		cour_peer_win_sweep(ep, now);
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
	if (COUR_UNLIKELY(ep->up->cm_refused != NULL))
		ep->up->cm_refused(ep, &a);     /* a CONNREQ nobody listens for */
	peer = cour_peer_by_addr_locked(ep, &a, false);
	if (!peer)
		return;
	ep->stats.peers_refused++;
	peer->refused_us = cour_ep_clock(ep);
	if (!peer->refused_us)
		peer->refused_us = 1;
	cour_peer_activate(peer);
}

