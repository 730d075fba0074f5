/*
 * Congestion control (proto/cour_cc.h): the window's every step, pinned with made-up RTT
 * samples, ACKs and losses. Rounds are driven by sequence numbers as the engine drives them:
 * a round ends when everything sent before it began is acknowledged.
 */
#include "proto/cour_cc.h"

#include <criterion/criterion.h>

TestSuite(cc, .timeout = 10);

#define SEG    1500u
#define TARGET 100u

/* The wall clock the controller reads at a round's end: set by each call below. */
static uint64_t wall_now;
static uint64_t fake_wall(void)
{
	return wall_now;
}
#define ACKED(cc, acked, una, next, now, wall) \
	(wall_now = (wall), cour_cc_acked(cc, acked, una, next, now, fake_wall))

/* A controller past slow start at window w, base RTT 20 us, send window of 256 packets. */
static void steady(struct cour_cc *cc, uint32_t w)
{
	cour_cc_init(cc, SEG, 256 * SEG, TARGET, 0, 1000);
	cour_cc_sample(cc, 20, 1000);
	cc->round_min_us = UINT32_MAX;
	cc->round_samples = 0;
	cc->cwnd = w;
	cc->ssthresh = w;
}

/* One round: every packet of it acknowledged with an RTT sample of rtt us, the window
 * full (limited) throughout. *seq moves by the round's packets. Returns the last event. */
static enum cour_cc_event round_of(struct cour_cc *cc, uint32_t *seq, uint64_t *now,
				   uint32_t rtt)
{
	uint32_t pkts = cc->cwnd / SEG ? cc->cwnd / SEG : 1, start = *seq;
	enum cour_cc_event ev = COUR_CC_EV_NONE, e;

	cc->round_end = start + pkts;
	for (uint32_t i = 1; i <= pkts; i++) {
		*now += rtt / pkts + 1;
		cour_cc_blocked(cc);
		cour_cc_sample(cc, rtt, *now);
		e = ACKED(cc, SEG, start + i, start + pkts + 1, *now, *now);
		if (e != COUR_CC_EV_NONE)
			ev = e;
	}
	*seq = start + pkts;
	return ev;
}

Test(cc, starts_at_the_initial_window)
{
	struct cour_cc cc;

	cour_cc_init(&cc, SEG, 256 * SEG, TARGET, 0, 0);
	cr_assert_eq(cc.cwnd, 16384u, "16 KiB beats 4 x 1500");
	cour_cc_init(&cc, 9000, 256 * 9000, TARGET, 0, 0);
	cr_assert_eq(cc.cwnd, 36000u, "4 packets beat 16 KiB");
	cour_cc_init(&cc, 9000, 20000, TARGET, 0, 0);
	cr_assert_eq(cc.cwnd, 20000u, "never above what the send window holds");
	cr_assert_eq(cc.ssthresh, UINT32_MAX);
	cr_assert_eq(cc.mode, COUR_CC_DELAY);
}

Test(cc, open_lets_one_packet_go_when_nothing_is_out)
{
	struct cour_cc cc;

	cour_cc_init(&cc, SEG, 256 * SEG, TARGET, 0, 0);
	cr_assert(cour_cc_open(&cc, 0));
	cr_assert(cour_cc_open(&cc, cc.cwnd - 1));
	cr_assert_not(cour_cc_open(&cc, cc.cwnd));
	cc.cwnd = 1;
	cr_assert(cour_cc_open(&cc, 0), "a window below a packet never stops a peer dead");
}

Test(cc, slow_start_doubles_per_round_only_when_limited)
{
	struct cour_cc cc;

	cour_cc_init(&cc, SEG, 256 * SEG, TARGET, 0, 0);
	ACKED(&cc, 8000, 1, 10, 10, 0);
	cr_assert_eq(cc.cwnd, 16384u, "an application that sends little proves nothing");
	cour_cc_blocked(&cc);
	ACKED(&cc, 8000, 2, 10, 20, 0);
	cr_assert_eq(cc.cwnd, 16384u + 8000);
	ACKED(&cc, 100000, 3, 10, 30, 0);
	cr_assert_eq(cc.cwnd, 2 * (16384u + 8000), "at most doubling per ACK's worth");
}

Test(cc, slow_start_ends_where_the_queue_begins)
{
	struct cour_cc cc;

	cour_cc_init(&cc, SEG, 256 * SEG, TARGET, 0, 0);
	cour_cc_sample(&cc, 20, 1);
	for (int i = 0; i < 3; i++)
		cour_cc_sample(&cc, 20 + TARGET + 50, 2);
	cr_assert_eq(cc.ssthresh, UINT32_MAX, "the base sample counts: its round's min is low");
	cc.round_min_us = UINT32_MAX;
	cc.round_samples = 0;
	for (int i = 0; i < 3; i++)
		cour_cc_sample(&cc, 20 + TARGET + 50, 3);
	cr_assert_eq(cc.ssthresh, UINT32_MAX, "three samples are not enough");
	cour_cc_sample(&cc, 20 + TARGET + 50, 4);
	cr_assert_eq(cc.ssthresh, cc.cwnd);
}

Test(cc, grows_one_packet_per_round_within_target)
{
	struct cour_cc cc;
	uint32_t seq = 0;
	uint64_t now = 1000;

	steady(&cc, 20 * SEG);
	cr_assert_eq(round_of(&cc, &seq, &now, 20 + TARGET), COUR_CC_EV_NONE);
	cr_assert_eq(cc.qdelay_us, TARGET);
	cr_assert_eq(cc.cwnd, 21 * SEG, "a queue at the target is no excess");
	round_of(&cc, &seq, &now, 30);
	cr_assert_eq(cc.cwnd, 22 * SEG);
}

Test(cc, a_round_above_target_cuts_in_proportion_once)
{
	struct cour_cc cc;
	uint32_t seq = 0;
	uint64_t now = 1000;

	steady(&cc, 20 * SEG);
	cc.qdelay_us = TARGET + 1;      /* the round before was above target too: no growth */
	/* queue 200 us: excess 100 of 200, cut 0.8 x 0.5 = 40% */
	cr_assert_eq(round_of(&cc, &seq, &now, 220), COUR_CC_EV_CUT_DELAY);
	cr_assert_eq(cc.cwnd, 20 * SEG * 60 / 100);
	cr_assert_eq(cc.ssthresh, cc.cwnd);
	/* a huge queue: at most half */
	steady(&cc, 20 * SEG);
	cc.qdelay_us = TARGET + 1;
	seq = 0;
	cr_assert_eq(round_of(&cc, &seq, &now, 5000), COUR_CC_EV_CUT_DELAY);
	cr_assert_eq(cc.cwnd, 10 * SEG);
}

Test(cc, small_windows_aim_at_a_longer_queue)
{
	struct cour_cc cc;

	steady(&cc, 16 * SEG);
	cr_assert_eq(cour_cc_target(&cc), TARGET);
	cc.cwnd = 4 * SEG;
	cr_assert_eq(cour_cc_target(&cc), 2 * TARGET);
	cc.cwnd = SEG;
	cr_assert_eq(cour_cc_target(&cc), 4 * TARGET);
	/* a round at 3x the target: a cut for 16 packets, none for one */
	cc.cwnd = SEG;
	cc.round_end = 1;
	cour_cc_sample(&cc, 20 + 3 * TARGET, 1001);
	cr_assert_eq(ACKED(&cc, SEG, 1, 2, 1002, 0), COUR_CC_EV_NONE);
	steady(&cc, 16 * SEG);
	cc.round_end = 1;
	cour_cc_sample(&cc, 20 + 3 * TARGET, 1001);
	cr_assert_eq(ACKED(&cc, SEG, 1, 2, 1002, 0), COUR_CC_EV_CUT_DELAY);
}

Test(cc, one_late_sample_is_no_queue)
{
	struct cour_cc cc;

	steady(&cc, 20 * SEG);
	cc.round_end = 4;
	cour_cc_blocked(&cc);
	cour_cc_sample(&cc, 3000, 1001);        /* a descheduled moment */
	cour_cc_sample(&cc, 30, 1002);
	cr_assert_eq(ACKED(&cc, SEG, 4, 8, 1003, 0), COUR_CC_EV_NONE);
	cr_assert_eq(cc.qdelay_us, 10, "the round's lowest sample speaks for it");
	cr_assert_eq(cc.cwnd, 20 * SEG);
}

Test(cc, never_below_one_packet)
{
	struct cour_cc cc;
	uint32_t seq = 0;
	uint64_t now = 1000;

	steady(&cc, 2 * SEG);
	for (int i = 0; i < 5; i++)             /* (15 ms: not yet long enough to compete) */
		round_of(&cc, &seq, &now, 3000);
	cr_assert_eq(cc.mode, COUR_CC_DELAY);
	cr_assert_eq(cc.cwnd, SEG);
}

Test(cc, loss_without_a_queue_is_random)
{
	struct cour_cc cc;

	steady(&cc, 20 * SEG);
	cc.qdelay_us = 10;
	cr_assert_eq(cour_cc_loss(&cc, 5, 30), COUR_CC_EV_LOSS_RANDOM);
	cr_assert_eq(cc.cwnd, 20 * SEG);
	cc.qdelay_us = TARGET + 1;
	cr_assert_eq(cour_cc_loss(&cc, 5, 30), COUR_CC_EV_CUT_LOSS);
	cr_assert_eq(cc.cwnd, 20 * SEG * 70 / 100);
	cr_assert_eq(cour_cc_loss(&cc, 6, 31), COUR_CC_EV_NONE,
		     "the losses of one flight are one event");
	cr_assert_eq(cour_cc_loss(&cc, 30, 40), COUR_CC_EV_CUT_LOSS, "the next round may cut");
}

Test(cc, a_queue_in_this_round_makes_a_loss_congestion)
{
	struct cour_cc cc;

	steady(&cc, 20 * SEG);
	cc.qdelay_us = 0;
	cour_cc_sample(&cc, 20 + TARGET + 1, 1100);
	cr_assert_eq(cour_cc_loss(&cc, 0, 30), COUR_CC_EV_CUT_LOSS);
}

Test(cc, a_queue_that_never_drains_turns_it_loss_based)
{
	struct cour_cc cc;
	uint32_t seq = 0;
	uint64_t now = 1000;
	enum cour_cc_event ev = COUR_CC_EV_NONE;
	int rounds = 0;

	steady(&cc, 20 * SEG);
	cc.drained_us = now;
	while (ev != COUR_CC_EV_COMPETE && rounds++ < 100)
		ev = round_of(&cc, &seq, &now, 2000);      /* a TCP flow fills the buffer */
	cr_assert_eq(ev, COUR_CC_EV_COMPETE);
	cr_assert_eq(cc.mode, COUR_CC_COMPETE);
	cr_assert_geq(now - 1000, COUR_CC_COMPETE_US);
	cr_assert_leq(now - 1000, COUR_CC_COMPETE_US + 2 * 2100);
	cr_assert_eq(cc.cwnd, SEG, "it cut to the bottom on the way");
	cr_assert_eq(cc.ssthresh, UINT32_MAX, "then slow start finds its share");

	/* in COMPETE the queue does not stop growth: loss does */
	uint32_t w = cc.cwnd;
	cc.probe_epoch = now / COUR_CC_PROBE_PERIOD_US;
	round_of(&cc, &seq, &now, 2000);
	cr_assert_gt(cc.cwnd, w);
	cc.qdelay_us = 2000;
	w = cc.cwnd;
	cr_assert_eq(cour_cc_loss(&cc, seq, seq + 10), COUR_CC_EV_CUT_LOSS);
	cr_assert_eq(cc.cwnd, w * 70 / 100);
	/* two packets a round */
	w = cc.cwnd = 20 * SEG;
	cc.ssthresh = w;
	cc.probe_epoch = now / COUR_CC_PROBE_PERIOD_US;
	round_of(&cc, &seq, &now, 2000);
	cc.probe_epoch = now / COUR_CC_PROBE_PERIOD_US;
	round_of(&cc, &seq, &now, 2000);
	/* (each step is half the window acknowledged, and the window grows within a round) */
	cr_assert_geq(cc.cwnd, w + 3 * SEG);
	cr_assert_leq(cc.cwnd, w + 4 * SEG);

	/* a round within target is a TCP flow in recovery; three are a filler that left */
	round_of(&cc, &seq, &now, 30);
	round_of(&cc, &seq, &now, 30);
	cr_assert_eq(cc.mode, COUR_CC_COMPETE);
	cc.probe_epoch = now / COUR_CC_PROBE_PERIOD_US;
	round_of(&cc, &seq, &now, 2000);
	round_of(&cc, &seq, &now, 30);
	round_of(&cc, &seq, &now, 30);
	cr_assert_eq(cc.mode, COUR_CC_COMPETE, "the count starts over");
	round_of(&cc, &seq, &now, 30);
	cr_assert_eq(cc.mode, COUR_CC_DELAY);
}

Test(cc, probe_returns_to_delay_when_the_queue_drains)
{
	struct cour_cc cc;
	uint32_t seq = 0;
	uint64_t now = 1000;

	steady(&cc, 40 * SEG);
	cc.mode = COUR_CC_COMPETE;
	cc.probe_epoch = 0;
	/* the wall clock crosses a period at a round's end: every COMPETE flow holds back */
	cc.round_end = 1;
	cour_cc_sample(&cc, 2000, now);
	ACKED(&cc, SEG, 1, 41, now, COUR_CC_PROBE_PERIOD_US + 5);
	cr_assert_eq(cc.mode, COUR_CC_PROBE);
	cr_assert_eq(cc.cwnd, SEG);
	cr_assert_eq(cc.saved_cwnd, 40 * SEG);
	cr_assert_eq(cc.probe_until_us, now + 4000, "two of the round's RTT");
	/* the queue was ours: a sample near the base ends it */
	cour_cc_sample(&cc, 20 + TARGET, now + 1500);
	cr_assert_eq(cc.mode, COUR_CC_DELAY);
	cr_assert_eq(cc.ssthresh, 20 * SEG);
	cr_assert_eq(cc.cwnd, 16384u);
	(void)seq;
}

Test(cc, probe_gives_the_window_back_when_the_queue_stays)
{
	struct cour_cc cc;

	steady(&cc, 40 * SEG);
	cc.mode = COUR_CC_COMPETE;
	cc.round_end = 1;
	cour_cc_sample(&cc, 2000, 1000);
	ACKED(&cc, SEG, 1, 41, 1000, COUR_CC_PROBE_PERIOD_US);
	cr_assert_eq(cc.mode, COUR_CC_PROBE);
	cour_cc_sample(&cc, 1900, 2000);
	ACKED(&cc, SEG, 2, 41, 2000, 0);
	cr_assert_eq(cc.mode, COUR_CC_PROBE, "still within the probe's time");
	ACKED(&cc, SEG, 3, 41, 1000 + 4000, 0);
	cr_assert_eq(cc.mode, COUR_CC_COMPETE);
	cr_assert_eq(cc.cwnd, 40 * SEG);
}

Test(cc, timeout_leaves_one_packet_and_a_spurious_one_is_undone)
{
	struct cour_cc cc;

	steady(&cc, 40 * SEG);
	cr_assert_not(cour_cc_timeout(&cc, 100, 4000), "no queue last round: random loss");
	cr_assert_eq(cc.cwnd, 40 * SEG);
	cc.qdelay_us = TARGET + 1;
	cr_assert(cour_cc_timeout(&cc, 100, 5000));
	cr_assert_eq(cc.cwnd, SEG);
	cr_assert_eq(cc.ssthresh, 20 * SEG);
	cour_cc_timeout(&cc, 100, 9000);         /* backoff: the first one is remembered */
	cr_assert_eq(cc.rto_at_us, 5000);
	/* the ACK reaches us at 12000; the peer held the packet 7000 us: it had it at 5000 */
	cr_assert(cour_cc_rto_spurious(&cc, false, 7000, 12000, 100000));
	cr_assert_eq(cc.cwnd, 40 * SEG);
	cr_assert_eq(cc.ssthresh, 40 * SEG);
	cr_assert_eq(cc.rto_at_us, 0);

	/* a genuine loss: the resend's own ACK, held briefly; no verdict until stale */
	steady(&cc, 40 * SEG);
	cc.qdelay_us = TARGET + 1;
	cour_cc_timeout(&cc, 100, 5000);
	cr_assert_not(cour_cc_rto_spurious(&cc, false, 10, 5100, 1000));
	cr_assert_eq(cc.cwnd, SEG);
	cr_assert_eq(cc.rto_at_us, 5000);
	cr_assert_not(cour_cc_rto_spurious(&cc, false, 0, 5100, 1000), "no hold: no undo");
	cr_assert_not(cour_cc_rto_spurious(&cc, false, 0, 6001, 1000));
	cr_assert_eq(cc.rto_at_us, 0, "the episode ended");
	cr_assert_not(cour_cc_rto_spurious(&cc, true, 0, 6002, 1000), "a DUP after it: nothing");

	/* the peer says it got the resend twice (DUP ACK): the original had arrived */
	steady(&cc, 40 * SEG);
	cc.qdelay_us = TARGET + 1;
	cour_cc_timeout(&cc, 100, 5000);
	cr_assert(cour_cc_rto_spurious(&cc, true, 0, 5300, 100000));
	cr_assert_eq(cc.cwnd, 40 * SEG);
}

Test(cc, idle_halves_per_period_down_to_the_initial_window)
{
	struct cour_cc cc;

	steady(&cc, 100 * SEG);
	cour_cc_sending(&cc, 0, 10000);
	cr_assert_eq(cc.cwnd, 100 * SEG);
	cour_cc_sending(&cc, 0, 10000 + COUR_CC_IDLE_US - 1);
	cr_assert_eq(cc.cwnd, 100 * SEG, "not idle long enough");
	cour_cc_sending(&cc, 0, 10000 + 3 * COUR_CC_IDLE_US);
	cr_assert_eq(cc.cwnd, 100 * SEG / 4, "measured from the last send");
	cr_assert_eq(cc.ssthresh, 100 * SEG, "slow start brings it back");
	cour_cc_sending(&cc, 5 * SEG, 10000 + 30 * COUR_CC_IDLE_US);
	cr_assert_eq(cc.cwnd, 100 * SEG / 4, "with packets out it is not idle");
	cour_cc_sending(&cc, 0, 10000 + 90 * COUR_CC_IDLE_US);
	cr_assert_eq(cc.cwnd, 16384u);
}
