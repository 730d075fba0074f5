/*
 * The arithmetic of reliability, apart from peers and clocks: the retransmit-timeout estimator
 * and the SACK bitmap. cour_peer.c and cour_hdr_finish call these; keeping them pure is what
 * lets the unit tests (test/test_rel.c) pin every value exactly.
 */
#ifndef COUR_REL_H
#define COUR_REL_H

#include "proto/cour_wire_fmt.h"

#include <stdbool.h>
#include <stdint.h>

/*
 * Smoothed RTT, its mean deviation and the resulting RTO, in microseconds (RFC 6298 with
 * alpha 1/8, beta 1/4, K 4, and no clock granularity term). srtt_us 0 means "no sample yet",
 * which is why a measured 0 is kept as 1. Karn's rule is the caller's: never feed a sample
 * taken from a packet that was sent more than once.
 */
struct cour_rtt_est {
	uint64_t srtt_us;
	uint64_t rttvar_us;
	uint64_t rto_us;
};

/* The timeout an estimate gives: SRTT + 4 RTTVAR within [rto_min, rto_max]. */
static inline uint64_t cour_rtt_rto(const struct cour_rtt_est *e, uint64_t rto_min,
				    uint64_t rto_max)
{
	uint64_t rto = e->srtt_us + 4 * e->rttvar_us;

	if (rto < rto_min)
		rto = rto_min;
	return rto > rto_max ? rto_max : rto;
}

static inline void cour_rtt_update(struct cour_rtt_est *e, uint64_t rtt, uint64_t rto_min,
				   uint64_t rto_max)
{

	if (!e->srtt_us) {
		e->srtt_us = rtt ? rtt : 1;
		e->rttvar_us = rtt / 2;
	} else {
		/* RTTVAR first: it measures the deviation from the previous SRTT */
		uint64_t d = rtt > e->srtt_us ? rtt - e->srtt_us : e->srtt_us - rtt;
		e->rttvar_us = (3 * e->rttvar_us + d) / 4;
		e->srtt_us = (7 * e->srtt_us + rtt) / 8;
		if (!e->srtt_us)
			e->srtt_us = 1;
	}
	e->rto_us = cour_rtt_rto(e, rto_min, rto_max);
}

/*
 * SACK: bit i says packet ack + 1 + i arrived too (ack itself is the hole). A receive window of
 * w slots holds at most w - 1 packets beyond the hole, so only that many bits can ever be set.
 */
static inline uint32_t cour_sack_span(uint32_t window)
{
	if (!window)
		return 0;
	return window - 1 < COUR_SACK_BITS ? window - 1 : COUR_SACK_BITS;
}

/* sack with seq marked received; seq outside (ack, ack + COUR_SACK_BITS] leaves it alone. */
static inline uint32_t cour_sack_mark(uint32_t sack, uint32_t ack, uint32_t seq)
{
	uint32_t i = seq - ack - 1;     /* wraps to a huge value for seq <= ack */

	return i < COUR_SACK_BITS ? sack | 1u << i : sack;
}

/* Does (ack, sack) report seq as received beyond the cumulative ack? */
static inline bool cour_sack_has(uint32_t sack, uint32_t ack, uint32_t seq)
{
	uint32_t i = seq - ack - 1;

	return i < COUR_SACK_BITS && (sack >> i & 1);
}

#endif
