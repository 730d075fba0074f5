/*
 * Endpoints: the statistics extension (fi_open_ops FI_COURIER_EP_OPS, get_stats) and the report
 * FI_COURIER_STATS prints when an endpoint closes (cour_ep.c). The rest of the endpoint is in
 * cour_ep.c and cour_ep_ctrl.c.
 */
#include "cour_ep.h"

#include <stdio.h>

/* The engine's counters with the wire's (and its fault injector's) added in. */
static void cour_ep_stats_locked(struct cour_ep *ep, struct fi_courier_stats *s)
{
	const struct cour_wire_stats *w = &ep->pep.wire.stats;
	struct cour_fault_counts f;

	*s = ep->pep.stats;
	s->tx_pkts += w->tx_pkts;
	s->tx_bytes += w->tx_bytes;
	s->rx_pkts += w->rx_pkts;
	s->rx_in_place += w->rx_in_place;
	s->drop_bad_hdr += w->rx_bad;
	s->udp_gso = ep->pep.wire.gso_on;
	s->udp_gro = ep->pep.wire.gro_on;
	s->udp_gso_sends = w->gso_sends;
	s->udp_gso_segs = w->gso_segs;
	s->udp_gro_trains = w->gro_trains;
	s->udp_gro_segs = w->gro_segs;
	s->rx_sock_drops = w->sock_drops;
	s->udp_packs = w->packs;
	s->udp_packed = w->packed;
	s->udp_packs_rcvd = w->packs_rcvd;
	s->udp_pads = w->pads;
	s->bell_rcvd = w->bell_rcvd;
	s->peers = ep->pep.peer_count;
	cour_fault_counts(&ep->pep.wire, &f);
	s->fault_drops = f.drops;
	s->fault_dups = f.dups;
	s->fault_corrupts = f.corrupts;
	s->fault_reorders = f.reorders;
	if (ep->pep.wire.mac) {
		struct cour_mac_counts m;

		cour_mac_counts(ep->pep.wire.mac, &m);
		s->drop_bad_mac += m.forged;
		s->drop_replay += m.replayed;
	}
}

/* The caller's struct may be older (smaller) or newer (larger) than ours: counters are only
 * appended, so the common prefix means the same on both sides. */
static int cour_ep_get_stats(struct fid_ep *ep_fid, struct fi_courier_stats *stats, size_t size)
{
	struct cour_ep *ep = cour_ep_of(ep_fid);
	struct fi_courier_stats s;

	if (!stats || !size || size % sizeof(uint64_t))
		return -FI_EINVAL;
	cour_lock_acquire(&ep->domain->lock);
	cour_ep_stats_locked(ep, &s);
	cour_lock_release(&ep->domain->lock);
	memcpy(stats, &s, COUR_MIN(size, sizeof(s)));
	if (size > sizeof(s))
		memset((char *)stats + sizeof(s), 0, size - sizeof(s));
	return 0;
}

static struct fi_courier_ops_ep cour_ep_ext_ops = {
	.size = sizeof(struct fi_courier_ops_ep),
	.get_stats = cour_ep_get_stats,
};

int cour_ep_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops,
		     void *context)
{
	if (name && !strcmp(name, "courier_ep_ops_v1"))
		COUR_WARN(FI_LOG_EP_CTRL, "fi_open_ops: %s: get_stats now takes the size of the "
			  "caller's struct; rebuild with this fi_ext_courier.h (%s)\n", name,
			  FI_COURIER_EP_OPS);
	if (!name || strcmp(name, FI_COURIER_EP_OPS))
		return -FI_ENOSYS;
	*ops = &cour_ep_ext_ops;
	return 0;
}

/* Congestion control: the totals, then the window of each peer across the network (the
 * first COUR_CC_PRINT_PEERS of them). */
#define COUR_CC_PRINT_PEERS 16
static void cour_ep_print_cc(struct cour_ep *ep, const struct fi_courier_stats *s,
			     const char *me)
{
	static const char *const mode[] = { "delay", "compete", "probe" };
	struct cour_peer *peer, *tmp;
	char str[80];
	int n = 0;

	fprintf(stderr, "courier stats %s: cc_cwnd %" PRIu64 " cc_base_rtt_us %" PRIu64
		" cc_qdelay_us %" PRIu64 " cc_cuts_delay %" PRIu64 " cc_cuts_loss %" PRIu64
		" cc_cuts_timeout %" PRIu64 " cc_loss_random %" PRIu64 " cc_compete %" PRIu64
		" cc_stalls %" PRIu64 " cc_rto_spurious %" PRIu64 "\n", me, s->cc_cwnd,
		s->cc_base_rtt_us, s->cc_qdelay_us, s->cc_cuts_delay, s->cc_cuts_loss,
		s->cc_cuts_timeout, s->cc_loss_random, s->cc_compete, s->cc_stalls,
		s->cc_rto_spurious);
	HASH_ITER(hh, ep->pep.peers, peer, tmp) {
		if (peer->via_shm || !peer->cc.base_us)
			continue;
		if (n++ == COUR_CC_PRINT_PEERS)
			break;
		fprintf(stderr, "courier cc %s: peer %s cwnd %u ssthresh %u base_rtt_us %u "
			"qdelay_us %u srtt_us %" PRIu64 " mode %s\n", me,
			cour_addr_str(&peer->addr, str, sizeof(str)), peer->cc.cwnd,
			peer->cc.ssthresh, peer->cc.base_us, peer->cc.qdelay_us, peer->srtt_us,
			mode[peer->cc.mode]);
	}
}

void cour_ep_print_stats(struct cour_ep *ep)
{
	struct fi_courier_stats s;
	char str[80];

	cour_ep_stats_locked(ep, &s);
	fprintf(stderr, "courier stats %s: tx_pkts %" PRIu64 " rx_pkts %" PRIu64
		" tx_bytes %" PRIu64 " rx_bytes %" PRIu64 " tx_msgs %" PRIu64 " rx_msgs %" PRIu64
		" acks_sent %" PRIu64 " acks_rcvd %" PRIu64 " retrans_timeout %" PRIu64
		" retrans_fast %" PRIu64 " dup %" PRIu64 " ooo %" PRIu64 " drop_window %" PRIu64
		" drop_bad_hdr %" PRIu64 " drop_stale %" PRIu64 " drop_no_buf %" PRIu64
		" credit_stalls %" PRIu64 " window_stalls %" PRIu64 " unexpected %" PRIu64
		" unreachable %" PRIu64 " peer_resets %" PRIu64 " srtt_us %" PRIu64 " stall_us %" PRIu64
		" fault_drop %" PRIu64 " fault_dup %" PRIu64 " fault_corrupt %" PRIu64
		" fault_reorder %" PRIu64 " rx_in_place %" PRIu64 " peers_evicted %" PRIu64
		" peer_silences %" PRIu64 " unexp_credit_early %" PRIu64 " linger_waits %" PRIu64
		" linger_lost %" PRIu64 " peers_refused %" PRIu64 "\n",
		cour_addr_str(&ep->pep.wire.addr, str, sizeof(str)), s.tx_pkts, s.rx_pkts, s.tx_bytes,
		s.rx_bytes, s.tx_msgs, s.rx_msgs, s.acks_sent, s.acks_rcvd, s.retrans_timeout,
		s.retrans_fast, s.dup_rcvd, s.ooo_rcvd, s.drop_window, s.drop_bad_hdr,
		s.drop_stale_session, s.drop_no_buf, s.credit_stalls, s.window_stalls,
		s.unexpected_msgs, s.peers_unreachable, s.peers_reset, s.rtt_srtt_us, s.rtt_stall_us,
		s.fault_drops, s.fault_dups, s.fault_corrupts, s.fault_reorders, s.rx_in_place,
		s.peers_evicted, s.peer_silences, s.unexp_credit_early, s.linger_waits,
		s.linger_lost, s.peers_refused);
	if (ep->pep.shm_ring)
		fprintf(stderr, "courier stats %s: shm_peers %" PRIu64 " shm_tx_pkts %" PRIu64
			" shm_rx_pkts %" PRIu64 " shm_ring_full %" PRIu64 " shm_doorbells %" PRIu64
			" shm_single_copy_bytes %" PRIu64 " shm_copy_fallbacks %" PRIu64
			" shm_reclaimed %" PRIu64 " shm_rma_split %" PRIu64
			" shm_grants_revoked %" PRIu64 " shm_rma_pushed %" PRIu64
			" shm_push_notices %" PRIu64 " shm_short %" PRIu64 " shm_box %" PRIu64
			" shm_box_rx %" PRIu64 " shm_box_broken %" PRIu64 " shm_box_freed %" PRIu64
			" shm_copy_mbps %" PRIu32 "\n", str, s.shm_peers,
			s.shm_tx_pkts,
			s.shm_rx_pkts, s.shm_ring_full, s.shm_doorbells, s.shm_single_copy_bytes,
			s.shm_copy_fallbacks, cour_shm_ring_reclaimed(ep->pep.shm_ring),
			s.shm_rma_split, s.shm_grants_revoked, s.shm_rma_pushed,
			s.shm_push_notices, s.shm_short, s.shm_box, s.shm_box_rx, s.shm_box_broken,
			s.shm_box_freed, ep->pep.shm_copy_mbps);
	if (ep->pep.wire.base == &cour_udp_wire)
		fprintf(stderr, "courier stats %s: udp_gso %" PRIu64 " udp_gro %" PRIu64
			" udp_gso_sends %" PRIu64 " udp_gso_segs %" PRIu64 " udp_gro_trains %" PRIu64
			" udp_gro_segs %" PRIu64 " rx_sock_drops %" PRIu64 " udp_packs %" PRIu64
			" udp_packed %" PRIu64 " udp_packs_rcvd %" PRIu64 " udp_pads %" PRIu64 "\n",
			str, s.udp_gso, s.udp_gro, s.udp_gso_sends, s.udp_gso_segs,
			s.udp_gro_trains, s.udp_gro_segs, s.rx_sock_drops, s.udp_packs,
			s.udp_packed, s.udp_packs_rcvd, s.udp_pads);
	fprintf(stderr, "courier stats %s: peers %" PRIu64 " win_bytes %" PRIu64 " win_grows %"
		PRIu64 " win_frees %" PRIu64 "\n", str, s.peers, s.win_bytes, s.win_grows,
		s.win_frees);
	fprintf(stderr, "courier stats %s: unexp_bytes %" PRIu64 " unexp_peak %" PRIu64
		" credit_rts %" PRIu64 " credit_grants %" PRIu64 " credit_refused %" PRIu64
		" credit_repaid %" PRIu64 " rts_adopted %" PRIu64 " retrans_probe %" PRIu64
		" nudges %" PRIu64 " bell_rcvd %" PRIu64 " rts_in_order %" PRIu64
		" shm_split_rx %" PRIu64 "\n",
		str, s.unexp_bytes, s.unexp_peak, s.credit_rts, s.credit_grants, s.credit_refused,
		s.credit_repaid, s.rts_adopted, s.retrans_probe, s.nudges, s.bell_rcvd,
		s.rts_in_order, s.shm_split_rx);
	if (cour_params.cc && ep->pep.wire.base == &cour_udp_wire)
		cour_ep_print_cc(ep, &s, str);
	if (ep->pep.wire.mac || s.drop_bad_mac)
		fprintf(stderr, "courier stats %s: authenticated %d drop_bad_mac %" PRIu64
			" drop_replay %" PRIu64 "\n", str, ep->pep.wire.mac != NULL,
			s.drop_bad_mac, s.drop_replay);
	if (ep->pep.wire.mac)
		fprintf(stderr, "courier stats %s: session_challenges %" PRIu64 " session_proofs %"
			PRIu64 " drop_unproven %" PRIu64 "\n", str, s.session_challenges,
			s.session_proofs, s.drop_unproven);
}
