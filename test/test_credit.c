/*
 * Credits in bytes (proto/cour_credit.c) over the capture wire (test_capwire.h): what a message
 * costs, what a sender short of units does (an RTS, or a stall that says WANT), what a receiver
 * admits, lends out of its budget (FI_COURIER_UNEXP_MAX) and takes back, and the RTS it clears
 * into its own buffer (adopted) so that the send completes before its receive is posted.
 * Parameters: credits 8 units (of 256 bytes), credits_max 64, eager_max 4096, 928 payload bytes per
 * packet; no budget unless a test gives one.
 */
#include "test_capwire.h"
#include "proto/cour_msg_int.h"

#include <criterion/criterion.h>

static struct cour_ep *ep;
static struct cour_peer *peer;
static uint32_t next_seq;
static uint64_t tag;                       /* of the messages that arrive next */
static char data[8192];

static void setup(void)
{
	capwire_params();
	cour_params.credits_max = 64;
	ep = capwire_open(FI_MSG | FI_TAGGED);
	peer = capwire_peer(ep);
	next_seq = 0;
	tag = 0x77;
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (char)(i * 13 + 5);
}

static void teardown(void)
{
	capwire_close(ep);
}

TestSuite(credit, .init = setup, .fini = teardown, .timeout = 20);

/* The ACK packets we sent that carry flag. */
static size_t acks_with(uint16_t flag)
{
	size_t n = 0;

	for (size_t i = 0; i < capwire_count(COUR_PKT_ACK); i++)
		if (capwire_nth(COUR_PKT_ACK, i)->hdr.base.flags & flag)
			n++;
	return n;
}

/* The grant we advertise now, as the next packet would carry it. */
static uint32_t granted(void)
{
	return peer->credits_granted;
}

/* From the remote peer, next in sequence: an RTS for len bytes (flags: WANT...), or a whole
 * one-packet eager message. */
static void arrive_rts(uint32_t msg_id, uint64_t len, uint16_t flags)
{
	struct cour_pkt_hdr h = capwire_hdr(peer, COUR_PKT_RTS, next_seq, 0, 0, 8);

	h.base.flags = COUR_F_TAGGED | flags;
	h.msg.msg_id = msg_id;
	h.msg.tag = tag;
	h.msg.total_len = len;
	capwire_rx(ep, &h, NULL, 0);
	cr_assert_eq(peer->rx_next, ++next_seq, "the RTS was not accepted");
}

/* A whole eager message of len bytes, in as many packets as it takes; false: refused. */
static bool arrive_eager(uint32_t msg_id, size_t len)
{
	uint64_t bad = ep->pep.stats.drop_bad_hdr;
	size_t off = 0;

	do {
		struct cour_pkt_hdr h = capwire_hdr(peer, COUR_PKT_EAGER, next_seq, 0, 0, 8);
		size_t n = COUR_MIN(len - off, (size_t)CAPWIRE_ROOM);

		h.base.flags = COUR_F_TAGGED;
		h.msg.msg_id = msg_id;
		h.msg.tag = tag;
		h.msg.total_len = len;
		h.msg.offset = off;
		capwire_rx(ep, &h, data + off, n);
		if (ep->pep.stats.drop_bad_hdr != bad)
			return false;
		cr_assert_eq(peer->rx_next, ++next_seq, "a fragment was not accepted");
		off += n;
	} while (off < len);
	return true;
}

static void arrive_rdata(uint32_t rx_id, uint64_t off, size_t len)
{
	struct cour_pkt_hdr h = capwire_hdr(peer, COUR_PKT_RDATA, next_seq, 0, 0, 8);

	h.msg.rx_id = rx_id;
	h.msg.offset = off;
	capwire_rx(ep, &h, data + off, len);
	cr_assert_eq(peer->rx_next, ++next_seq, "the RDATA was not accepted");
}

static int post(void *buf, size_t len, void *ctx)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len };

	return cour_msg_recv(&ep->pep, &iov, 1, FI_ADDR_UNSPEC, tag, 0, ctx, 0, true);
}

/* ---- the cost ---- */

Test(credit, a_message_costs_one_unit_and_one_per_256_bytes)
{
	cr_assert_eq(COUR_CREDIT_UNIT, 256);
	cr_assert_eq(cour_credit_cost(COUR_PKT_EAGER, 0), 1);
	cr_assert_eq(cour_credit_cost(COUR_PKT_EAGER, 255), 1);
	cr_assert_eq(cour_credit_cost(COUR_PKT_EAGER, 256), 2);
	cr_assert_eq(cour_credit_cost(COUR_PKT_EAGER, 65536), 257);
	cr_assert_eq(cour_credit_cost(COUR_PKT_RTS, 1u << 30), 1, "an RTS holds only a record");
}

/* ---- sender ---- */

Test(credit, an_eager_message_short_of_units_goes_as_an_rts_that_wants_more)
{
	const struct capwire_pkt *rts;

	for (int i = 0; i < 3; i++)
		capwire_send(ep, data, 10, NULL, 0);
	capwire_send(ep, data, 1023, NULL, 0);     /* 4 units: 5 left, still eager */
	cr_assert_eq(peer->tx_credit_used, 7);
	capwire_send(ep, data, 768, NULL, 0);      /* 4 units, 1 left: announced instead */
	cr_assert_eq(capwire_count(COUR_PKT_RTS), 1);
	rts = capwire_nth(COUR_PKT_RTS, 0);
	cr_assert(rts->hdr.base.flags & COUR_F_WANT);
	cr_assert_eq(rts->plen, 0, "no payload goes before the receiver clears it");
	cr_assert_eq(peer->tx_credit_used, 8);
	cr_assert_eq(ep->pep.stats.credit_rts, 1);
	cr_assert_not(peer->credit_stalled);
	capwire_send(ep, data, 10, NULL, 0);       /* no unit at all: it waits */
	cr_assert(peer->credit_stalled);
	cr_assert_eq(capwire_count(COUR_PKT_EAGER), 3 + 2, "three small ones, 1023 bytes in 2");
}

Test(credit, eager_messages_behind_a_short_rts_wait_for_it_to_keep_their_order)
{
	struct cour_pkt_hdr cts;

	for (int i = 0; i < 5; i++)
		capwire_send(ep, data, 10, NULL, 0);
	capwire_send(ep, data, 4000, NULL, 0);     /* 4 units, 3 left: an RTS */
	capwire_send(ep, data, 10, NULL, 0);       /* 1 unit would do, but it would overtake */
	cr_assert_eq(capwire_count(COUR_PKT_RTS), 2);
	cr_assert_eq(capwire_count(COUR_PKT_EAGER), 5);
	cr_assert_eq(peer->short_rts, 2);
	/* the receiver clears the first: the next small message may go eager again only once
	 * the second is cleared too */
	cts = capwire_hdr(peer, COUR_PKT_CTS, next_seq++, 7, 0, 8);
	cts.msg.msg_id = capwire_nth(COUR_PKT_RTS, 0)->hdr.msg.msg_id;
	cts.msg.rx_id = 1;
	cts.msg.total_len = 4000;
	capwire_rx(ep, &cts, NULL, 0);
	cr_assert_eq(peer->short_rts, 1);
	cr_assert_eq(capwire_count(COUR_PKT_RDATA), 5, "its data follows in order");
	cts.base.seq = next_seq++;
	cts.msg.msg_id = capwire_nth(COUR_PKT_RTS, 1)->hdr.msg.msg_id;
	cts.msg.rx_id = 2;
	cts.msg.total_len = 10;
	capwire_rx(ep, &cts, NULL, 0);
	cr_assert_eq(peer->short_rts, 0);
	capwire_send(ep, data, 10, NULL, 0);
	cr_assert_eq(capwire_count(COUR_PKT_EAGER), 6);
	cr_assert_eq(capwire_count(COUR_PKT_RTS), 2);
}

/* A size's way may change between two messages (to a same-host peer, with the ring's copy rate):
 * here eager_max moves up under a plain RTS, and a message of the RTS's length or more that
 * would now go eagerly goes as an eager one sent as RTS (WANT), not counted as short of credit;
 * a shorter one before it stays eager, and one after it follows it as RTS. */
Test(credit, an_eager_message_behind_a_plain_rts_no_longer_than_it_goes_as_rts_too)
{
	struct cour_pkt_hdr cts;
	const struct capwire_pkt *rts;

	peer->tx_credit_limit = 100;               /* credit is not what this is about */
	capwire_send(ep, data, 5000, NULL, 0);     /* above eager_max: a plain RTS */
	cr_assert_eq(capwire_count(COUR_PKT_RTS), 1);
	cr_assert_eq(peer->rts_plain, 1);
	cour_params.eager_max = 8192;
	capwire_send(ep, data, 4500, NULL, 0);     /* shorter: eager, as a size of its own */
	cr_assert_eq(capwire_count(COUR_PKT_EAGER), 5);
	capwire_send(ep, data, 6000, NULL, 0);     /* eager now, but it would overtake */
	cr_assert_eq(capwire_count(COUR_PKT_RTS), 2);
	rts = capwire_nth(COUR_PKT_RTS, 1);
	cr_assert(rts->hdr.base.flags & COUR_F_WANT, "as an eager one sent as RTS (adoptable)");
	cr_assert_eq(rts->hdr.msg.total_len, 6000);
	cr_assert_eq(peer->rts_plain, 2);
	cr_assert_eq(peer->short_rts, 1);
	cr_assert_eq(ep->pep.stats.rts_in_order, 1);
	cr_assert_eq(ep->pep.stats.credit_rts, 0, "not for lack of credit");
	capwire_send(ep, data, 100, NULL, 0);      /* shorter, behind it: it follows */
	cr_assert_eq(capwire_count(COUR_PKT_RTS), 3);
	cr_assert_eq(capwire_count(COUR_PKT_EAGER), 5);
	/* all three cleared: the length goes eagerly again */
	for (int i = 0; i < 3; i++) {
		cts = capwire_hdr(peer, COUR_PKT_CTS, next_seq++, 7, 0, 8);
		cts.msg.msg_id = capwire_nth(COUR_PKT_RTS, (size_t)i)->hdr.msg.msg_id;
		cts.msg.rx_id = (uint32_t)i + 1;
		cts.msg.total_len = i == 0 ? 5000 : i == 1 ? 6000 : 100;
		capwire_rx(ep, &cts, NULL, 0);
	}
	cr_assert_eq(peer->rts_plain, 0);
	cr_assert_eq(peer->short_rts, 0);
	capwire_send(ep, data, 6000, NULL, 0);
	cr_assert_eq(capwire_count(COUR_PKT_RTS), 3);
	cr_assert_eq(ep->pep.stats.rts_in_order, 1);
}

Test(credit, a_stall_says_want_once_and_units_release_it)
{
	for (int i = 0; i < 9; i++)
		capwire_send(ep, data, 10, NULL, 0);
	cr_assert_eq(capwire_count(COUR_PKT_EAGER), 8);
	cr_assert_eq(acks_with(COUR_F_WANT), 1, "the stalled sender asks for more");
	capwire_send(ep, data, 10, NULL, 0);
	cr_assert_eq(acks_with(COUR_F_WANT), 1, "once per stall");
	capwire_ack(ep, 8, 0, 24);                 /* lent 16 more */
	cr_assert_eq(capwire_count(COUR_PKT_EAGER), 10);
	cr_assert_not(peer->credit_stalled);
}

/* ---- receiver ---- */

Test(credit, a_message_beyond_the_grant_in_bytes_is_refused)
{
	/* 8 units: 1536 bytes (7) and 100 (1) fill them; the next 100 bytes are one too many */
	cr_assert(arrive_eager(1, 1536));
	cr_assert(arrive_eager(2, 100));
	cr_assert_eq(peer->rx_units, 8);
	cr_assert_not(arrive_eager(3, 100), "a sender that ignores the grant is refused");
	cr_assert_eq(ep->pep.stats.unexp_bytes, 2 * sizeof(struct cour_rxmsg) + 1636);
	cr_assert_eq(ep->pep.stats.unexp_peak, ep->pep.stats.unexp_bytes);
}

static void arrive_want_ack(void)
{
	struct cour_pkt_hdr h = capwire_hdr(peer, COUR_PKT_ACK, 0, 0, 0, 8);

	h.base.flags = COUR_F_WANT;
	capwire_rx(ep, &h, NULL, 0);
}

Test(credit, want_lends_twice_the_window_up_to_credits_max)
{
	cour_params.unexp_max = 1 << 20;
	arrive_want_ack();
	cr_assert_eq(peer->grant_extra, 8);
	cr_assert_eq(granted(), 16);
	cr_assert_eq(capwire_last()->hdr.base.type, COUR_PKT_ACK, "the loan goes out at once");
	cr_assert_eq(capwire_last()->hdr.base.credits, 16);
	arrive_want_ack();
	arrive_want_ack();
	arrive_want_ack();
	cr_assert_eq(granted(), 64, "never beyond credits_max");
	cr_assert_eq(ep->pep.grant_extra, 56);
	cr_assert_eq(ep->pep.stats.credit_grants, 3);
	/* an RTS sent for lack of units asks for room for twice its message: 4000 bytes, 16
	 * units (32 for two), is below the window already */
	arrive_rts(1, 4000, COUR_F_WANT);
	cr_assert_eq(ep->pep.stats.credit_grants, 3);
}

Test(credit, an_exhausted_budget_lends_what_is_left_and_loans_are_repaid)
{
	char buf[64];

	cour_params.unexp_max = 6 * COUR_CREDIT_UNIT;
	arrive_want_ack();
	cr_assert_eq(peer->grant_extra, 6, "6 units of budget for the 8 wanted");
	cr_assert_eq(ep->pep.stats.credit_refused, 1);
	cr_assert_eq(granted(), 14);
	/* consumed messages now repay the loan instead of being granted again */
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(post(buf, sizeof(buf), NULL), 0);
		cr_assert(arrive_eager((uint32_t)i, 10));
	}
	cr_assert_eq(capwire_cq_count(&capwire.rx_cq), 2);
	cr_assert_eq(peer->grant_extra, 4);
	cr_assert_eq(ep->pep.stats.credit_repaid, 2);
	cr_assert_eq(granted(), 14);
	/* a quarter of the budget is free again: consumed units are granted again */
	cr_assert_not(ep->pep.grant_short);
	cr_assert_eq(post(buf, sizeof(buf), NULL), 0);
	cr_assert(arrive_eager(2, 10));
	cr_assert_eq(peer->grant_extra, 4);
	cr_assert_eq(granted(), 15);
}

Test(credit, a_loan_ends_with_the_session)
{
	cour_params.unexp_max = 1 << 20;
	arrive_want_ack();
	cr_assert_eq(ep->pep.grant_extra, 8);
	cour_peer_reset(peer, COUR_E_PEER_RESET);
	cr_assert_eq(ep->pep.grant_extra, 0);
	cr_assert_eq(peer->grant_extra, 0);
	cr_assert_eq(peer->credits_granted, 8);
}

/* ---- an RTS cleared into our buffer before its receive ---- */

/* The CTS we sent last: its rx_id, after checking what it accepts. */
static uint32_t cts_for(uint32_t msg_id, uint64_t len)
{
	size_t n = capwire_count(COUR_PKT_CTS);
	const struct capwire_pkt *cts;

	cr_assert_gt(n, 0, "no CTS was sent");
	cts = capwire_nth(COUR_PKT_CTS, n - 1);
	cr_assert_eq(cts->hdr.msg.msg_id, msg_id);
	cr_assert_eq(cts->hdr.msg.total_len, len);
	return cts->hdr.msg.rx_id;
}

Test(credit, an_affordable_unexpected_rts_is_cleared_into_our_buffer)
{
	char buf[4096] = { 0 };
	uint32_t rx_id;

	cour_params.unexp_max = 1 << 20;
	arrive_rts(9, 3000, COUR_F_WANT);
	rx_id = cts_for(9, 3000);
	cr_assert_eq(ep->pep.stats.rts_adopted, 1);
	arrive_rdata(rx_id, 0, 928);
	arrive_rdata(rx_id, 928, 928);
	arrive_rdata(rx_id, 1856, 928);
	arrive_rdata(rx_id, 2784, 216);
	cr_assert_eq(ep->pep.stats.unexp_bytes, sizeof(struct cour_rxmsg) + 3000);
	cr_assert_eq(capwire_cq_count(&capwire.rx_cq), 0, "no receive yet");
	cr_assert_eq(post(buf, sizeof(buf), (void *)0x99), 0);
	cr_assert_eq(capwire_cq_count(&capwire.rx_cq), 1);
	cr_assert_eq(capwire_cq_entry(&capwire.rx_cq, 0)->len, 3000);
	cr_assert_eq(capwire_cq_entry(&capwire.rx_cq, 0)->op_context, (void *)0x99);
	cr_assert_arr_eq(buf, data, 3000);
	cr_assert_eq(ep->pep.stats.unexp_bytes, 0);
}

Test(credit, a_receive_posted_while_an_adopted_message_arrives_takes_the_rest)
{
	char buf[2000] = { 0 };
	uint32_t rx_id;

	cour_params.unexp_max = 1 << 20;
	arrive_rts(4, 3000, COUR_F_WANT);
	rx_id = cts_for(4, 3000);
	arrive_rdata(rx_id, 0, 928);
	cr_assert_eq(post(buf, sizeof(buf), (void *)0x44), 0);
	cr_assert_eq(capwire_cq_count(&capwire.rx_cq), 0);
	arrive_rdata(rx_id, 928, 928);
	arrive_rdata(rx_id, 1856, 928);
	arrive_rdata(rx_id, 2784, 216);
	/* truncated: 2000 of 3000 bytes */
	cr_assert_eq(capwire_cq_err_count(&capwire.rx_cq), 1);
	cr_assert_eq(capwire_cq_err(&capwire.rx_cq, 0)->err, FI_ETRUNC);
	cr_assert_eq(capwire_cq_err(&capwire.rx_cq, 0)->olen, 1000);
	cr_assert_arr_eq(buf, data, sizeof(buf));
	cr_assert_null(ep->pep.rdv_by_id);
}

Test(credit, an_rts_is_left_waiting_without_budget_delivery_complete_or_want)
{
	cr_assert_eq(cour_params.unexp_max, 0);
	arrive_rts(1, 3000, COUR_F_WANT);
	cour_params.unexp_max = 1 << 20;
	arrive_rts(2, 3000, COUR_F_DC | COUR_F_WANT);
	arrive_rts(3, 5000, COUR_F_WANT);        /* over eager_max: a rendezvous of its own */
	arrive_rts(4, 3000, 0);                  /* the sender chose rendezvous (a single copy) */
	cr_assert_eq(capwire_count(COUR_PKT_CTS), 0);
	cr_assert_eq(ep->pep.stats.rts_adopted, 0);
}

Test(credit, a_reset_drops_an_adopted_message_still_arriving)
{
	uint32_t rx_id;

	cour_params.unexp_max = 1 << 20;
	arrive_rts(6, 3000, COUR_F_WANT);
	rx_id = cts_for(6, 3000);
	arrive_rdata(rx_id, 0, 928);
	cour_peer_reset(peer, COUR_E_PEER_RESET);
	cr_assert_null(ep->pep.rxq->utag);
	cr_assert_null(ep->pep.rdv_by_id);
	cr_assert_eq(ep->pep.stats.unexp_bytes, 0);
	cr_assert_eq(peer->rx_rdv_pending, 0);
}

/* The fuzzer found it: an adopted message the application discarded while its data still
 * arrived is no longer unexpected; a reset must not unlink it from that queue again. */
Test(credit, a_reset_after_an_adopted_message_was_discarded_keeps_the_queue_whole)
{
	char buf[64];
	uint32_t rx_id;

	cour_params.unexp_max = 1 << 20;
	tag = 1;
	cr_assert(arrive_eager(1, 10));
	tag = 2;
	arrive_rts(2, 3000, COUR_F_WANT);
	rx_id = cts_for(2, 3000);
	arrive_rdata(rx_id, 0, 928);
	tag = 3;
	cr_assert(arrive_eager(3, 10));
	tag = 2;
	cr_assert_eq(cour_msg_recv(&ep->pep, NULL, 0, FI_ADDR_UNSPEC, 2, 0, NULL,
				   FI_PEEK | FI_DISCARD, true), 0);
	tag = 1;
	cr_assert_eq(post(buf, sizeof(buf), NULL), 0);    /* the first one leaves the queue */
	cour_peer_reset(peer, COUR_E_PEER_RESET);
	cr_assert_not_null(ep->pep.rxq->utag);
	cr_assert_eq(ep->pep.rxq->utag->tag, 3, "the third message stays, alone");
	cr_assert_null(ep->pep.rxq->utag->next);
	cr_assert_eq(ep->pep.rxq->utag->prev, ep->pep.rxq->utag, "and the queue's tail is it");
	cr_assert_null(ep->pep.rdv_by_id);
}

/* The fuzzer again: an adopted message of 0 bytes has all its bytes from the start, but its
 * one empty RDATA is still to come; it must stay where that RDATA finds it. */
Test(credit, an_adopted_message_of_no_bytes_waits_for_its_empty_rdata)
{
	char buf[16];
	uint32_t rx_id;

	cour_params.unexp_max = 1 << 20;
	arrive_rts(7, 0, COUR_F_WANT);
	rx_id = cts_for(7, 0);
	cr_assert_eq(post(buf, sizeof(buf), (void *)0x70), 0);
	cr_assert_eq(capwire_cq_count(&capwire.rx_cq), 0, "not before its RDATA");
	cr_assert_not_null(ep->pep.rdv_by_id);
	arrive_rdata(rx_id, 0, 0);
	cr_assert_eq(capwire_cq_count(&capwire.rx_cq), 1);
	cr_assert_eq(capwire_cq_entry(&capwire.rx_cq, 0)->len, 0);
	cr_assert_null(ep->pep.rdv_by_id);
	/* and one discarded before its RDATA goes when that comes */
	arrive_rts(8, 0, COUR_F_WANT);
	rx_id = cts_for(8, 0);
	cr_assert_eq(cour_msg_recv(&ep->pep, NULL, 0, FI_ADDR_UNSPEC, tag, 0, NULL,
				   FI_PEEK | FI_DISCARD, true), 0);
	cr_assert_not_null(ep->pep.rdv_by_id);
	arrive_rdata(rx_id, 0, 0);
	cr_assert_null(ep->pep.rdv_by_id);
	cr_assert_null(ep->pep.rxq->utag);
}

/* The engine's hint to the UDP wire (wire/cour_wire.h): while an eager message of 8 KiB or more
 * arrives in GRO trains, the wire reads in place (rx_direct); only a message that goes on past
 * the piece just handled has later trains that will queue up (rx_direct_more). A lone train
 * that ends its message is read whole: cour_udp_poll. */
#define HINT_LEN 20000

/* An endpoint whose peer sends a HINT_LEN eager message as pieces of GRO trains */
static void open_for_hints(void)
{
	capwire_close(ep);
	capwire_params();
	cour_params.credits = cour_params.credits_max = 128;
	cour_params.eager_max = 65536;
	ep = capwire_open(FI_MSG | FI_TAGGED);
	peer = capwire_peer(ep);
}

/* The piece at off of that message, as the wire hands up a train's, carrying ack; the hint
 * cleared before it, so what it says is this piece's. Returns the offset after it. */
static size_t hint_piece(size_t off, uint32_t ack)
{
	static char big[HINT_LEN];
	struct cour_pkt_hdr h = capwire_hdr(peer, COUR_PKT_EAGER, next_seq, ack, 0, 8);
	size_t n = COUR_MIN(HINT_LEN - off, (size_t)CAPWIRE_ROOM);

	h.base.flags = COUR_F_TAGGED;
	h.msg.msg_id = 1;
	h.msg.tag = tag;
	h.msg.total_len = HINT_LEN;
	h.msg.offset = off;
	ep->pep.wire.rx_borrowed = true;
	ep->pep.wire.rx_train_len = 64000;
	ep->pep.wire.rx_direct = ep->pep.wire.rx_direct_more = false;
	capwire_rx(ep, &h, big + off, n);
	ep->pep.wire.rx_borrowed = false;
	cr_assert_eq(peer->rx_next, ++next_seq, "the piece at %zu was not accepted", off);
	return off + n;
}

Test(credit, the_wire_is_told_whether_an_eager_message_goes_on)
{
	size_t off = 0, pieces = 0;

	open_for_hints();
	do {
		off = hint_piece(off, 0);
		pieces++;
		cr_assert(ep->pep.wire.rx_direct, "piece %zu: no hint to read in place", pieces);
		cr_assert_eq(ep->pep.wire.rx_direct_more, off < HINT_LEN, "piece %zu at %zu of %d",
			     pieces, off, HINT_LEN);
	} while (off < HINT_LEN);
	cr_assert_gt(pieces, 2);
}

/* ...but not from a peer we have packets in flight to (a halo, both sides sending at once: a
 * few trains wait at a time, and batch reads from cache beat a peek and a scattered read
 * each). The piece that acknowledges ours brings the hint back. */
Test(credit, an_eager_message_from_a_peer_we_send_to_is_read_in_batches)
{
	static char mine[100];
	size_t off = 0;
	uint32_t ours;

	open_for_hints();
	capwire_send(ep, mine, sizeof(mine), NULL, 0);
	cr_assert_gt(peer->inflight_bytes, 0, "our message is in flight");
	ours = peer->tx_next;
	for (int piece = 0; off < HINT_LEN; piece++) {
		off = hint_piece(off, piece == 2 ? ours : 0);
		cr_assert_eq(ep->pep.wire.rx_direct, piece >= 2, "piece %d: hint %d", piece,
			     ep->pep.wire.rx_direct);
		cr_assert_eq(peer->inflight_bytes == 0, piece >= 2);
	}
}
