/*
 * Sequence arithmetic (proto/cour_wire_fmt.h): the wrap-safe comparisons every window, ACK and
 * credit decision is built on, and which packet types are sequenced.
 */
#include "proto/cour_wire_fmt.h"

#include <criterion/criterion.h>
#include <string.h>

TestSuite(seq, .timeout = 10);

/* The four comparisons of a and b as bits lt le gt ge, for one-line asserts. */
static unsigned rel(uint32_t a, uint32_t b)
{
	return (unsigned)cour_seq_lt(a, b) << 3 | (unsigned)cour_seq_le(a, b) << 2 |
	       (unsigned)cour_seq_gt(a, b) << 1 | (unsigned)cour_seq_ge(a, b);
}

#define LESS    0xc   /* lt le */
#define EQUAL   0x5   /* le ge */
#define GREATER 0x3   /* gt ge */

Test(seq, small_values_compare_as_integers)
{
	cr_assert_eq(rel(1, 2), LESS);
	cr_assert_eq(rel(2, 1), GREATER);
	cr_assert_eq(rel(7, 7), EQUAL);
	cr_assert_eq(rel(0, 0), EQUAL);
	cr_assert_eq(rel(0, 1000), LESS);
	cr_assert_eq(rel(4096, 4095), GREATER);
}

Test(seq, the_2_32_wrap_is_invisible)
{
	cr_assert_eq(rel(0xffffffffu, 0), LESS);
	cr_assert_eq(rel(0, 0xffffffffu), GREATER);
	cr_assert_eq(rel(0xfffffff0u, 0x10), LESS);
	cr_assert_eq(rel(0x10, 0xfffffff0u), GREATER);
	cr_assert_eq(rel(0xffffffffu, 0xffffffffu), EQUAL);
	/* a window of 4096 straddling the wrap: every packet in it is after its start */
	for (uint32_t i = 1; i <= 4096; i++) {
		uint32_t start = 0xffffffffu - 2047;
		cr_assert_eq(rel(start + i, start), GREATER, "offset %u", i);
		cr_assert_eq(rel(start, start + i), LESS, "offset %u", i);
	}
}

Test(seq, half_the_space_is_the_horizon)
{
	const uint32_t bases[] = { 0, 1, 0x7fffffffu, 0x80000000u, 0xfffffffeu, 0xffffffffu,
				   0x12345678u };

	for (size_t k = 0; k < sizeof(bases) / sizeof(bases[0]); k++) {
		uint32_t b = bases[k];

		/* 2^31 - 1 ahead is still ahead; one more and it is behind */
		cr_assert_eq(rel(b + 0x7fffffffu, b), GREATER, "base %#x", b);
		cr_assert_eq(rel(b, b + 0x7fffffffu), LESS, "base %#x", b);
		cr_assert_eq(rel(b + 0x80000001u, b), LESS, "base %#x", b);
		/* exactly 2^31 apart each is "less" than the other: no window may come near it */
		cr_assert_eq(rel(b + 0x80000000u, b), LESS, "base %#x", b);
		cr_assert_eq(rel(b, b + 0x80000000u), LESS, "base %#x", b);
	}
}

Test(seq, comparisons_agree_with_each_other)
{
	const uint32_t bases[] = { 0, 5, 0x7fffff00u, 0x80000000u, 0xffffff00u, 0xffffffffu };
	const uint32_t deltas[] = { 0, 1, 2, 31, 32, 33, 255, 4096, 65535, 0x7ffffffeu,
				    0x7fffffffu, 0x80000001u, 0xfffffffeu, 0xffffffffu };

	for (size_t i = 0; i < sizeof(bases) / sizeof(bases[0]); i++) {
		for (size_t j = 0; j < sizeof(deltas) / sizeof(deltas[0]); j++) {
			uint32_t a = bases[i], b = bases[i] + deltas[j];

			cr_assert_eq(cour_seq_lt(a, b), !cour_seq_ge(a, b), "%#x %#x", a, b);
			cr_assert_eq(cour_seq_gt(a, b), !cour_seq_le(a, b), "%#x %#x", a, b);
			cr_assert_eq(cour_seq_lt(a, b), cour_seq_gt(b, a), "%#x %#x", a, b);
			cr_assert_eq(cour_seq_le(a, b), cour_seq_ge(b, a), "%#x %#x", a, b);
			/* below 2^31 ahead, b is after a; beyond, before it */
			cr_assert_eq(cour_seq_lt(a, b), deltas[j] && deltas[j] < 0x80000000u,
				     "%#x %#x", a, b);
		}
	}
}

Test(seq, credit_counters_wrap_like_seqs)
{
	/* the credit check of cour_peer_push: used < limit, with both counters wrapping */
	uint32_t used = 0xfffffffdu, limit = 0x00000002u, sent = 0;

	while (cour_seq_lt(used, limit) && sent < 100) {
		used++;
		sent++;
	}
	cr_assert_eq(sent, 5, "credits across the wrap: %u", sent);
	cr_assert_eq(used, limit);
}

Test(seq, only_message_packets_are_sequenced)
{
	cr_assert_not(cour_pkt_sequenced(0));
	cr_assert_not(cour_pkt_sequenced(COUR_PKT_ACK));
	cr_assert_not(cour_pkt_sequenced(COUR_PKT_RESET));
	cr_assert(cour_pkt_sequenced(COUR_PKT_EAGER));
	cr_assert(cour_pkt_sequenced(COUR_PKT_RTS));
	cr_assert(cour_pkt_sequenced(COUR_PKT_CTS));
	cr_assert(cour_pkt_sequenced(COUR_PKT_RDATA));
	cr_assert(cour_pkt_sequenced(COUR_PKT_DONE));
	cr_assert_not(cour_pkt_sequenced(COUR_PKT_DGRAM));
	cr_assert_not(cour_pkt_sequenced(COUR_PKT_TYPE_MAX));
	cr_assert_not(cour_pkt_sequenced(255));
}

Test(seq, header_layout_is_the_documented_one)
{
	struct cour_pkt_hdr h;

	cr_assert_eq(offsetof(struct cour_base_hdr, crc), 4);
	cr_assert_eq(offsetof(struct cour_base_hdr, src_session), 8);
	cr_assert_eq(offsetof(struct cour_base_hdr, seq), 16);
	cr_assert_eq(offsetof(struct cour_base_hdr, ack), 20);
	cr_assert_eq(offsetof(struct cour_base_hdr, sack), 24);
	cr_assert_eq(offsetof(struct cour_base_hdr, credits), 28);
	cr_assert_eq(offsetof(struct cour_pkt_hdr, msg.msg_id), 32);
	cr_assert_eq(offsetof(struct cour_pkt_hdr, msg.tag), 40);
	cr_assert_eq(offsetof(struct cour_pkt_hdr, msg.total_len), 56);
	cr_assert_eq(sizeof(h.base.sack) * 8, COUR_SACK_BITS);
	/* little-endian on the wire: seq 0x01020304 is stored low byte first */
	memset(&h, 0, sizeof(h));
	h.base.seq = 0x01020304u;
	cr_assert_eq(((unsigned char *)&h)[16], 0x04);
	cr_assert_eq(((unsigned char *)&h)[19], 0x01);
}
