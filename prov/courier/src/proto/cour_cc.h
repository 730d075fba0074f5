/*
 * Congestion control: how many bytes a peer may have on the network, apart from peers and
 * clocks so that test/test_cc.c can pin every step. cour_peer.c asks it before building a
 * packet, cour_peer_ack.c feeds it RTT samples, acknowledged bytes and losses,
 * cour_peer_live.c its timeouts. Same-host peers (rings) never reach it: a ring is not a
 * network. The choice and the measurements behind it are in docs/protocol.md, "Congestion
 * control".
 *
 * The signal is queueing delay: an RTT sample minus the lowest RTT of the session (the path
 * with empty queues). Loss alone is a poor signal on the links courier runs on: random loss
 * (a flaky cable, a policer elsewhere) comes without a queue, and a shallow switch buffer
 * overflows only after the queue has been long for a while, when the damage is done. So:
 *
 *   DELAY    (start here) Swift-like AIMD on delay: while a round's lowest sample shows at
 *            most FI_COURIER_CC_TARGET of queue the window grows one packet per round; above
 *            it the window shrinks in proportion to the excess (at most by half), once per
 *            round. A round's *lowest* sample is used, not each one: a receiver descheduled
 *            for a moment delays a few ACKs, a queue delays all of them. A loss is a cut
 *            only when the queue was above the target around it; a loss with no queue
 *            behind it is random and costs nothing but its resend.
 *   COMPETE  The queue has not come down to the target for COUR_CC_COMPETE_US although we
 *            cut every round: something that does not back off on delay (TCP's CUBIC or
 *            Reno, which fill a buffer until it drops) shares the bottleneck, and a delay
 *            flow beside it would starve. Then we behave as a loss-based flow: two packets
 *            more per round, 0.7 of the window on a loss round. (CUBIC grows about half a
 *            packet per round at these windows, but its kernel sends while our process
 *            waits for a cpu; two packets gave TCP its share beside one and two courier
 *            streams on a busy 2-cpu host, docs/protocol.md.) Three rounds in a row whose
 *            queue is back within the target (the filler left) return to DELAY.
 *   PROBE    A COMPETE flow cannot see from its own samples whether the others filling the
 *            queue are only courier flows in COMPETE too (then all could go back to DELAY
 *            and empty it). Every COUR_CC_PROBE_PERIOD_US of the wall clock, aligned, so
 *            that every courier flow on the bottleneck probes at the same moment (hosts
 *            keep their clocks in step with NTP; same-host processes share one), a COMPETE
 *            flow holds one packet in flight for a few RTTs: if any sample shows the queue
 *            drained, the flows were all ours and it returns to DELAY, else to COMPETE with
 *            its window back.
 *
 * Slow start (the window doubles per round) from COUR_CC_IW on a new session and after
 * COUR_CC_IDLE_US without sending; it ends on a loss, or in DELAY mode on a round whose
 * lowest sample already shows the target reached. A retransmit timeout (no ACK at all for
 * an RTO) leaves one packet in flight, unless the last round showed no queue. The window grows only in rounds where it held a send
 * back: an application that sends little proves nothing about the path.
 */
#ifndef COUR_CC_H
#define COUR_CC_H

#include "util/cour_util.h"

#include <stdbool.h>
#include <stdint.h>

#define COUR_CC_IW_MIN          (16u << 10)  /* initial window: at least 16 KiB... */
#define COUR_CC_IW_PKTS         4u           /* ...and at least 4 packets */
#define COUR_CC_MAX_MDF_PCT     50u          /* a delay cut keeps at least half */
#define COUR_CC_BETA_PCT        80u          /* ...and takes 0.8 of the excess's share */
#define COUR_CC_LOSS_KEEP_PCT   70u          /* a loss round keeps 0.7 of the window */
#define COUR_CC_COMPETE_AI      2u           /* COMPETE: packets more per round */
#define COUR_CC_SS_SAMPLES      4u           /* slow start's early end needs this many */
#define COUR_CC_COMPETE_US      20000u       /* queue above target this long: COMPETE */
#define COUR_CC_PROBE_PERIOD_US 200000u      /* COMPETE flows probe this often (wall clock) */
#define COUR_CC_PROBE_MIN_US    2000u        /* a probe lasts 2 SRTT, at least this... */
#define COUR_CC_PROBE_MAX_US    20000u       /* ...and at most this */
#define COUR_CC_IDLE_US         100000u      /* no sends this long: the path's state is stale */
#define COUR_CC_DRAINED_ROUNDS  3u           /* COMPETE: rounds within target to leave it */

enum cour_cc_mode {
	COUR_CC_DELAY,
	COUR_CC_COMPETE,
	COUR_CC_PROBE,
};

/* What a peer's controller did, for the endpoint's statistics (fi_courier_stats). */
enum cour_cc_event {
	COUR_CC_EV_NONE,
	COUR_CC_EV_CUT_DELAY,
	COUR_CC_EV_CUT_LOSS,
	COUR_CC_EV_LOSS_RANDOM,
	COUR_CC_EV_COMPETE,
};

struct cour_cc {
	uint32_t cwnd;            /* bytes unacknowledged and not SACKed the peer may have */
	uint32_t ssthresh;        /* slow start below it */
	uint32_t seg;             /* a full packet to this peer: the unit of growth */
	uint32_t cwnd_max;        /* what the send window could hold anyway */
	uint32_t target_us;       /* queueing delay aimed at (FI_COURIER_CC_TARGET) */
	uint32_t base_us;         /* lowest RTT of the session: the path's; 0: none yet */
	uint32_t round_min_us;    /* lowest RTT sample of this round, UINT32_MAX: none */
	uint32_t qdelay_us;       /* queueing delay of the last round that had a sample */
	uint32_t round_end;       /* seq: this round ends when everything below is acked */
	uint32_t cut_end;         /* seq: no other cut until everything below is acked */
	uint32_t ai_acc;          /* bytes acknowledged toward the next additive step */
	uint32_t saved_cwnd;      /* PROBE: the window to return to */
	uint16_t round_samples;
	uint8_t  mode;            /* enum cour_cc_mode */
	uint8_t  limited;         /* bit 0: the window held a send back this round, 1: last */
	uint8_t  drained_rounds;  /* COMPETE: rounds in a row with the queue within target */
	uint64_t last_send_us;    /* last new packet built (idle restart) */
	uint64_t drained_us;      /* DELAY: last round with the queue within target */
	uint64_t probe_until_us;  /* PROBE: give up then */
	uint64_t probe_epoch;     /* wall clock / period of the last probe */
	uint64_t rto_at_us;       /* the first timeout since the last ACK, 0: none... */
	uint32_t undo_cwnd;       /* ...and the window before it, should it prove spurious */
	uint32_t undo_ssthresh;
};

static inline uint32_t cour_cc_iw(const struct cour_cc *cc)
{
	return COUR_MAX(COUR_CC_IW_MIN, COUR_CC_IW_PKTS * cc->seg);
}

static inline uint32_t cour_cc_min(const struct cour_cc *cc)
{
	return cc->seg;
}

/*
 * The queueing delay aimed at, scaled by the window as Swift scales it by flows: many flows
 * with windows of a few packets each add a packet of queue per round however small their
 * windows get, and each of them is away from the cpu for a while on a busy host; a queue
 * kept too short then runs dry. Up to 4x the target at one packet (16 / window in packets,
 * its square root), 1x from 16 packets on.
 */
static inline uint32_t cour_cc_target(const struct cour_cc *cc)
{
	uint32_t r = 16 * cc->seg / (cc->cwnd ? cc->cwnd : 1);

	return cc->target_us * (r >= 16 ? 4 : r >= 9 ? 3 : r >= 4 ? 2 : 1);
}

static inline void cour_cc_init(struct cour_cc *cc, uint32_t seg, uint32_t cwnd_max,
				uint32_t target_us, uint32_t seq, uint64_t now)
{
	memset(cc, 0, sizeof(*cc));
	cc->seg = seg ? seg : 1;
	cc->cwnd_max = COUR_MAX(cwnd_max, cc->seg);
	cc->target_us = target_us;
	cc->cwnd = COUR_MIN(cour_cc_iw(cc), cc->cwnd_max);
	cc->ssthresh = UINT32_MAX;
	cc->round_min_us = UINT32_MAX;
	cc->round_end = cc->cut_end = seq;
	cc->drained_us = now;
}

/* May one more packet go, with pipe bytes unacknowledged and not SACKed? One always may
 * when nothing is out: the window never stops a peer dead. */
static inline bool cour_cc_open(const struct cour_cc *cc, uint64_t pipe)
{
	return pipe < cc->cwnd || !pipe;
}

/* A new packet is about to be built. After a long pause the window the path allowed then
 * says little now: it halves per COUR_CC_IDLE_US of silence, down to the initial window,
 * and slow start brings it back (ssthresh keeps the old size). */
static inline void cour_cc_sending(struct cour_cc *cc, uint64_t pipe, uint64_t now)
{
	if (!pipe && cc->last_send_us && now - cc->last_send_us >= COUR_CC_IDLE_US) {
		uint64_t k = (now - cc->last_send_us) / COUR_CC_IDLE_US;
		uint32_t iw = COUR_MIN(cour_cc_iw(cc), cc->cwnd_max);
		uint32_t w = k >= 32 ? 0 : cc->cwnd >> k;

		if (w < iw)
			w = iw;
		if (w < cc->cwnd) {
			cc->ssthresh = COUR_MAX(cc->ssthresh == UINT32_MAX ? 0 : cc->ssthresh,
						cc->cwnd);
			cc->cwnd = w;
		}
	}
	cc->last_send_us = now;
}

/* The window held a send back; returns true the first time in a round (for a statistic). */
static inline bool cour_cc_blocked(struct cour_cc *cc)
{
	bool first = !(cc->limited & 1);

	cc->limited |= 1;
	return first;
}

static inline void cour_cc_cut_to(struct cour_cc *cc, uint64_t w, uint32_t next)
{
	uint32_t min = cour_cc_min(cc);

	cc->cwnd = w < min ? min : (uint32_t)w;
	cc->ssthresh = cc->cwnd;
	cc->cut_end = next;
	cc->ai_acc = 0;
}

/* An RTT sample (Karn-clean), in us. */
static inline void cour_cc_sample(struct cour_cc *cc, uint64_t rtt_us, uint64_t now)
{
	uint32_t rtt = rtt_us > UINT32_MAX - 1 ? UINT32_MAX - 1 : (uint32_t)rtt_us;

	if (!rtt)
		rtt = 1;
	if (!cc->base_us || rtt < cc->base_us)
		cc->base_us = rtt;
	if (rtt < cc->round_min_us)
		cc->round_min_us = rtt;
	if (cc->round_samples < UINT16_MAX)
		cc->round_samples++;
	if (cc->mode == COUR_CC_PROBE && rtt - cc->base_us <= cc->target_us) {
		/* the queue drained while we held back: nobody else was filling it */
		cc->mode = COUR_CC_DELAY;
		cc->drained_us = now;
		cc->ssthresh = COUR_MAX(cc->saved_cwnd / 2, cour_cc_min(cc));
		cc->cwnd = COUR_MIN(cour_cc_iw(cc), cc->cwnd_max);
		return;
	}
	/* slow start stops where the queue begins, not a round later at twice the window */
	if (cc->mode == COUR_CC_DELAY && cc->cwnd < cc->ssthresh &&
	    cc->round_samples >= COUR_CC_SS_SAMPLES &&
	    cc->round_min_us - cc->base_us > cour_cc_target(cc))
		cc->ssthresh = cc->cwnd;
}

/*
 * Everything below una is acknowledged, next is the next new sequence number, and acked
 * bytes left the pipe with this ACK (released or SACKed). wall() reads the wall clock (it
 * aligns the probes of all flows), only at the end of a round and outside DELAY mode.
 * Returns what happened.
 */
static inline enum cour_cc_event cour_cc_acked(struct cour_cc *cc, uint64_t acked,
					       uint32_t una, uint32_t next, uint64_t now,
					       uint64_t (*wall)(void))
{
	enum cour_cc_event ev = COUR_CC_EV_NONE;
	uint64_t wall_us;

	if (acked && cc->limited && cc->mode != COUR_CC_PROBE) {
		if (cc->cwnd < cc->ssthresh) {
			cc->cwnd += (uint32_t)COUR_MIN(acked, (uint64_t)cc->cwnd);
		} else if (cc->mode == COUR_CC_DELAY ? cc->qdelay_us <= cour_cc_target(cc) : true) {
			/* one packet per round; COUR_CC_COMPETE_AI in COMPETE */
			uint64_t step = cc->mode == COUR_CC_DELAY ? cc->cwnd :
					cc->cwnd / COUR_CC_COMPETE_AI;

			cc->ai_acc += (uint32_t)COUR_MIN(acked, (uint64_t)UINT32_MAX / 2);
			if (cc->ai_acc >= step && step) {
				cc->ai_acc = 0;
				cc->cwnd += cc->seg;
			}
		}
		if (cc->cwnd > cc->cwnd_max)
			cc->cwnd = cc->cwnd_max;
	}
	if (cc->mode == COUR_CC_PROBE && now >= cc->probe_until_us) {
		cc->mode = COUR_CC_COMPETE;             /* still full: not ours alone */
		cc->cwnd = COUR_MAX(cc->saved_cwnd, cour_cc_min(cc));
	}
	if ((int32_t)(una - cc->round_end) < 0)
		return ev;

	/* a round ended: what its lowest sample says */
	wall_us = cc->mode != COUR_CC_DELAY || now - cc->drained_us >= COUR_CC_COMPETE_US ?
		  wall() : 0;
	if (cc->round_samples) {
		uint32_t qd = cc->round_min_us - cc->base_us;

		cc->qdelay_us = qd;
		switch (cc->mode) {
		case COUR_CC_DELAY:
			if (qd <= cour_cc_target(cc)) {
				cc->drained_us = now;
				break;
			}
			if ((int32_t)(una - cc->cut_end) >= 0) {
				uint64_t keep = 100 - (uint64_t)COUR_CC_BETA_PCT * (qd - cour_cc_target(cc)) / qd;

				if (keep < 100 - COUR_CC_MAX_MDF_PCT)
					keep = 100 - COUR_CC_MAX_MDF_PCT;
				cour_cc_cut_to(cc, (uint64_t)cc->cwnd * keep / 100, next);
				ev = COUR_CC_EV_CUT_DELAY;
			}
			if (now - cc->drained_us >= COUR_CC_COMPETE_US) {
				cc->mode = COUR_CC_COMPETE;
				cc->drained_rounds = 0;
				cc->ssthresh = UINT32_MAX;      /* find our share quickly */
				cc->probe_epoch = wall_us / COUR_CC_PROBE_PERIOD_US;
				ev = COUR_CC_EV_COMPETE;
			}
			break;
		case COUR_CC_COMPETE:
			/* (drained: the unscaled target, our window says nothing of theirs).
			 * A TCP flow in recovery lets the queue run low for a round now and
			 * then; one that left keeps it low */
			cc->drained_rounds = qd <= cc->target_us ? cc->drained_rounds + 1 : 0;
			if (cc->drained_rounds >= COUR_CC_DRAINED_ROUNDS) {
				cc->mode = COUR_CC_DELAY;       /* the filler left */
				cc->drained_us = now;
				cc->ssthresh = cc->cwnd;
				cc->drained_rounds = 0;
			} else if (qd > cc->target_us &&
				   wall_us / COUR_CC_PROBE_PERIOD_US != cc->probe_epoch) {
				uint64_t len = 2ull * cc->round_min_us;

				cc->probe_epoch = wall_us / COUR_CC_PROBE_PERIOD_US;
				cc->mode = COUR_CC_PROBE;
				cc->saved_cwnd = cc->cwnd;
				cc->cwnd = cour_cc_min(cc);
				cc->probe_until_us = now + COUR_MIN(COUR_MAX(len,
					(uint64_t)COUR_CC_PROBE_MIN_US), (uint64_t)COUR_CC_PROBE_MAX_US);
			}
			break;
		default:
			break;
		}
	}
	cc->round_end = next;
	cc->round_min_us = UINT32_MAX;
	cc->round_samples = 0;
	cc->limited = (uint8_t)(cc->limited << 1 & 2);
	return ev;
}

/*
 * A packet was found lost (a hole below SACKed ones). One cut per round: the losses of one
 * overflow are one event. In DELAY mode it is congestion only with a queue behind it.
 */
static inline enum cour_cc_event cour_cc_loss(struct cour_cc *cc, uint32_t una, uint32_t next)
{
	bool queue = cc->qdelay_us > cour_cc_target(cc) ||
		     (cc->round_samples && cc->round_min_us - cc->base_us > cour_cc_target(cc));

	if ((int32_t)(una - cc->cut_end) < 0)
		return COUR_CC_EV_NONE;
	if (cc->mode == COUR_CC_DELAY && !queue)
		return COUR_CC_EV_LOSS_RANDOM;
	if (cc->mode == COUR_CC_PROBE)
		return COUR_CC_EV_NONE;
	cour_cc_cut_to(cc, (uint64_t)cc->cwnd * COUR_CC_LOSS_KEEP_PCT / 100, next);
	return COUR_CC_EV_CUT_LOSS;
}

/*
 * The retransmit timer fired with nothing SACKed: one packet in flight, then slow start.
 * Not in DELAY mode with no queue in the last round: the path was not full, the flight was
 * lost at random (a tail and its probe, or their ACKs), and the wait was the cost. Returns
 * whether the window was cut.
 */
static inline bool cour_cc_timeout(struct cour_cc *cc, uint32_t next, uint64_t now)
{
	uint32_t half = cc->cwnd / 2;

	if (cc->mode == COUR_CC_DELAY && cc->qdelay_us <= cour_cc_target(cc))
		return false;

	if (cc->mode == COUR_CC_PROBE) {
		cc->mode = COUR_CC_COMPETE;
		cc->cwnd = cc->saved_cwnd;
		half = cc->saved_cwnd / 2;
	}
	if (!cc->rto_at_us) {
		cc->rto_at_us = now ? now : 1;
		cc->undo_cwnd = cc->cwnd;
		cc->undo_ssthresh = cc->ssthresh;
	}
	cc->cwnd = cour_cc_min(cc);
	cc->ssthresh = COUR_MAX(half, 2 * cour_cc_min(cc));
	cc->cut_end = next;
	cc->ai_acc = 0;
	return true;
}

/*
 * After a timeout: was it spurious? The peer says so with a DUP ACK (the resend reached it
 * after the original, RFC 3708's idea), or with the hold time of the ACK that moves past
 * the resent packet: the peer held it hold_us since its kernel took it, and if that began
 * before our first resend could have arrived (hold + the path's RTT reach back past it), the
 * original got through and only the peer's process was late. Either gives the window back.
 * ack_us: when the ACK reached our host. An episode ends stale_us after the timeout.
 */
static inline bool cour_cc_rto_spurious(struct cour_cc *cc, bool dup, uint64_t hold_us,
					uint64_t ack_us, uint64_t stale_us)
{
	uint64_t since = cour_us_since(ack_us, cc->rto_at_us);

	if (!cc->rto_at_us)
		return false;
	if (dup || (hold_us && hold_us + cc->base_us >= since)) {
		cc->cwnd = COUR_MAX(cc->cwnd, cc->undo_cwnd);
		cc->ssthresh = cc->undo_ssthresh;
		cc->rto_at_us = 0;
		return true;
	}
	if (since > stale_us)
		cc->rto_at_us = 0;
	return false;
}

#endif
