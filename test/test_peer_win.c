/*
 * Windows sized by use (proto/cour_peer_win.c), over the capture wire: the send ring starts
 * at 4 slots and doubles to FI_COURIER_WINDOW with what is in flight, keeping every packet in
 * its slot across the 2^32 wrap; the receive ring exists only once a packet arrives early;
 * both are freed when the peer has been quiet for FI_COURIER_WIN_IDLE, and not while it
 * is busy. Parameters: window 16, credits 8, 928 payload bytes per packet, idle 200 ms.
 */
#include "test_capwire.h"

#include <criterion/criterion.h>

static struct cour_ep *ep;
static struct cour_peer *peer;
static char data[8192];

static void setup(void)
{
	capwire_params();
	/* room for the unexpected messages the tests send: 4 x 4000 bytes and more, in units of
	 * 256 bytes */
	cour_params.credits = 256;
	ep = capwire_open(FI_MSG | FI_TAGGED);
	peer = capwire_peer(ep);
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (char)(i * 11 + 5);
}

static void teardown(void)
{
	capwire_close(ep);
}

TestSuite(win, .init = setup, .fini = teardown, .timeout = 20);

#define TXSLOT ((uint64_t)sizeof(struct cour_txpkt))
#define RXSLOT ((uint64_t)sizeof(struct cour_rxslot))

/* Every packet in flight sits in its own slot, with the header and payload range it left with. */
static void assert_inflight_intact(void)
{
	for (uint32_t s = peer->tx_una; s != peer->tx_next; s++) {
		const struct cour_txpkt *slot = cour_txslot(peer, s);
		const struct capwire_pkt *p = NULL;

		for (size_t i = 0; i < capwire.count; i++)
			if (capwire.pkts[i].hdr.base.seq == s)
				p = &capwire.pkts[i];
		cr_assert_not_null(p, "seq %u was never sent", s);
		cr_assert_eq(slot->hdr.base.seq, s, "seq %u's slot holds seq %u", s,
			     slot->hdr.base.seq);
		cr_assert_eq(slot->hdr.msg.offset, p->hdr.msg.offset);
		cr_assert_eq(slot->len, p->plen);
		cr_assert_not_null(slot->txe);
	}
}

/* One eager message from the remote peer, seq, whose 4 payload bytes are its msg_id. */
static void rx_msg(uint32_t seq, uint32_t msg_id)
{
	struct cour_pkt_hdr h = capwire_hdr(peer, COUR_PKT_EAGER, seq, 0, 0, 8);

	h.msg.msg_id = msg_id;
	h.msg.total_len = sizeof(msg_id);
	capwire_rx(ep, &h, &msg_id, sizeof(msg_id));
}

/* Timers as if `ms` milliseconds had passed: the peer leaves the active list, parks, and its
 * windows go when the idle period is over. */
static void timers_after_ms(uint64_t base, uint64_t ms)
{
	cour_ep_timers(&ep->pep, base + ms * 1000);
}

Test(win, the_send_ring_doubles_with_what_is_in_flight_across_the_wrap)
{
	peer->tx_una = peer->tx_next = 0xfffffffau;
	cr_assert_null(peer->txwin, "no ring before the first packet");
	capwire_send(ep, data, 2000, (void *)1, 0);            /* 3 packets */
	cr_assert_eq(peer->txcap, 4);
	cr_assert_eq(ep->pep.stats.win_bytes, 4 * TXSLOT);
	assert_inflight_intact();
	capwire_send(ep, data + 2000, 2000, (void *)2, 0);     /* 6 */
	cr_assert_eq(peer->txcap, 8);
	cr_assert_eq(ep->pep.stats.win_grows, 2);
	cr_assert_eq(ep->pep.stats.win_bytes, 8 * TXSLOT);
	assert_inflight_intact();
	capwire_send(ep, data + 4000, 4000, (void *)3, 0);     /* 11 in flight */
	cr_assert_eq(peer->txcap, 16);
	cr_assert_eq(ep->pep.stats.win_grows, 3);
	cr_assert_eq(ep->pep.stats.win_bytes, 16 * TXSLOT);
	assert_inflight_intact();
	capwire_send(ep, data, 4000, (void *)4, 0);            /* 16: the ring stays at the max */
	cr_assert_eq(peer->tx_next, 0xfffffffau + 16);
	cr_assert_eq(peer->txcap, 16);
	assert_inflight_intact();

	capwire_ack(ep, 0xfffffffau + 16, 0, 8);
	cr_assert_eq(capwire_cq_count(&capwire.tx_cq), 4);
	for (size_t i = 0; i < 4; i++)
		cr_assert_eq(capwire_cq_entry(&capwire.tx_cq, i)->op_context, (void *)(i + 1));
}

Test(win, a_full_window_still_stops_the_sender)
{
	for (int i = 0; i < 4; i++)
		capwire_send(ep, data, 4000, NULL, 0);          /* 20 packets > window 16 */
	cr_assert_eq(peer->tx_next, 16);
	cr_assert_eq(peer->txcap, 16, "never beyond FI_COURIER_WINDOW");
	cr_assert_eq(ep->pep.stats.window_stalls, 1);
	capwire_ack(ep, 16, 0, 8);
	capwire_ack(ep, 20, 0, 8);
	cr_assert_eq(capwire_cq_count(&capwire.tx_cq), 4);
}

Test(win, a_ring_grown_under_holes_keeps_the_sacks)
{
	capwire_send(ep, data, 4 * CAPWIRE_ROOM, NULL, 0);     /* seqs 0..3 in 4 slots */
	capwire_ack(ep, 0, 0x6, 8);                             /* 2 and 3 arrived */
	cr_assert(cour_txslot(peer, 2)->sacked);
	capwire_send(ep, data, 4 * CAPWIRE_ROOM, NULL, 0);
	capwire_send(ep, data, 4 * CAPWIRE_ROOM, NULL, 0);     /* 12 in flight: 16 slots */
	cr_assert_eq(peer->txcap, 16);
	cr_assert(cour_txslot(peer, 2)->sacked);
	cr_assert(cour_txslot(peer, 3)->sacked);
	cr_assert_not(cour_txslot(peer, 1)->sacked);
	cr_assert_not(cour_txslot(peer, 10)->sacked, "a fresh slot is not SACKed");
	assert_inflight_intact();
}

Test(win, in_order_packets_need_no_receive_ring)
{
	for (uint32_t s = 0; s < 20; s++)
		rx_msg(s, s);
	cr_assert_eq(peer->rx_next, 20);
	cr_assert_null(peer->rxwin);
	cr_assert_eq(peer->rxcap, 0);
	cr_assert_eq(ep->pep.stats.win_bytes, 0);
}

Test(win, early_packets_grow_the_receive_ring_and_keep_their_order)
{
	struct cour_rxmsg *m;
	uint32_t want = 0;

	rx_msg(0, 0);
	rx_msg(3, 3);                                   /* one ahead of a hole: 4 slots */
	cr_assert_eq(peer->rxcap, 4);
	rx_msg(13, 13);                                 /* 12 past rx_next: 16 slots */
	cr_assert_eq(peer->rxcap, 16);
	cr_assert_eq(peer->rx_held, 2);
	cr_assert_eq(ep->pep.stats.win_bytes, 16 * RXSLOT);
	cr_assert_eq(capwire_last()->hdr.base.ack, 1);
	cr_assert_eq(capwire_last()->hdr.base.sack, 1u << 1 | 1u << 11,
		     "both held packets are still SACKed: %#x", capwire_last()->hdr.base.sack);
	for (uint32_t s = 1; s < 13; s++)
		if (s != 3)
			rx_msg(s, s);
	cr_assert_eq(peer->rx_next, 14);
	cr_assert_eq(peer->rx_held, 0);
	cr_assert_eq(ep->pep.rxbuf_pool.in_use, 0);
	DL_FOREACH(ep->pep.rxq->umsg, m) {
		uint32_t id;

		memcpy(&id, m->ubuf, sizeof(id));
		cr_assert_eq(id, want, "delivered %u where %u was due", id, want);
		want++;
	}
	cr_assert_eq(want, 14);
}

Test(win, a_quiet_peer_gives_its_windows_back_after_the_idle_period)
{
	uint64_t t0;

	capwire_send(ep, data, 3000, NULL, 0);
	rx_msg(1, 1);                                           /* a hole: a receive ring */
	rx_msg(0, 0);
	capwire_ack(ep, 4, 0, 8);
	/* the clock starts after the last packet: a slow machine took over a millisecond
	 * before it, and the delayed ACK was not yet due at "1 ms" */
	t0 = cour_now_us();
	cr_assert_eq(capwire_cq_count(&capwire.tx_cq), 1);
	cr_assert_eq(ep->pep.stats.win_bytes, 4 * TXSLOT + 4 * RXSLOT);

	timers_after_ms(t0, 1);          /* sends the delayed ACK, then leaves the active list */
	cr_assert_not(peer->on_active);
	cr_assert(peer->on_quiet);
	timers_after_ms(t0, 1 + 199);
	cr_assert_not_null(peer->txwin, "not quiet long enough");
	cour_peer_win_sweep(&ep->pep, t0 + 201 * 1000);
	cr_assert_null(peer->txwin);
	cr_assert_null(peer->rxwin);
	cr_assert_eq(peer->txcap + peer->rxcap, 0);
	cr_assert_eq(ep->pep.stats.win_bytes, 0);
	cr_assert_eq(ep->pep.stats.win_frees, 1);
	cr_assert_not(peer->on_quiet);

	/* and the peer works as before: a new ring, the same sequence space */
	capwire_clear();
	capwire_send(ep, data, 2000, (void *)9, 0);
	cr_assert_eq(peer->txcap, 4);
	cr_assert_eq(capwire_nth(COUR_PKT_EAGER, 0)->hdr.base.seq, 4);
	rx_msg(3, 3);
	cr_assert_eq(peer->rxcap, 4);
	rx_msg(2, 2);
	cr_assert_eq(peer->rx_next, 4);
	capwire_ack(ep, 7, 0, 8);
	cr_assert_eq(capwire_cq_count(&capwire.tx_cq), 2);
	cr_assert_eq(capwire_cq_entry(&capwire.tx_cq, 1)->op_context, (void *)9);
}

Test(win, a_peer_busy_again_keeps_its_windows)
{
	uint64_t t0 = cour_now_us();

	capwire_send(ep, data, 100, NULL, 0);
	capwire_ack(ep, 1, 0, 8);
	timers_after_ms(t0, 1);
	cr_assert(peer->on_quiet);
	capwire_send(ep, data, 100, NULL, 0);                   /* in flight again */
	cour_peer_win_sweep(&ep->pep, t0 + 500 * 1000);
	cr_assert_not_null(peer->txwin, "a ring in use is never freed");
	cr_assert_eq(ep->pep.stats.win_frees, 0);
	cr_assert_not(peer->on_quiet, "it parks again once it is quiet");
	capwire_ack(ep, 2, 0, 8);
	cr_assert_eq(capwire_cq_count(&capwire.tx_cq), 2);
}

Test(win, idle_zero_frees_at_the_first_quiet_pass)
{
	uint64_t t0 = cour_now_us();

	cour_params.win_idle_ms = 0;
	capwire_send(ep, data, 100, NULL, 0);
	capwire_ack(ep, 1, 0, 8);
	timers_after_ms(t0, 1);
	cr_assert_null(peer->txwin);
	cr_assert_eq(ep->pep.stats.win_frees, 1);
}
