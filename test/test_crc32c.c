/*
 * crc32c (util/cour_crc32c.c): the published check values, chaining (the engine checksums
 * header and payload iovecs in turn and the receiver in one pass), and agreement with a
 * bit-at-a-time reference for every length and alignment the 8-byte loop and its tail meet.
 * Which implementation runs (SSE4.2 or table) is the CPU's choice; both must give these values.
 */
#include "proto/cour_wire_fmt.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

TestSuite(crc32c, .timeout = 30);

/* The definition, one bit at a time: reflected polynomial 0x82F63B78, inverted in and out. */
static uint32_t ref_crc32c(uint32_t crc, const unsigned char *p, size_t len)
{
	crc = ~crc;
	while (len--) {
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (crc & 1 ? 0x82F63B78u : 0);
	}
	return ~crc;
}

/* Deterministic bytes (xorshift) so a failure replays. */
static void fill(unsigned char *p, size_t len, uint32_t seed)
{
	uint32_t x = seed ? seed : 1;

	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		p[i] = (unsigned char)x;
	}
}

Test(crc32c, check_value)
{
	cr_assert_eq(cour_crc32c(0, "123456789", 9), 0xE3069283u);
}

Test(crc32c, empty_input_leaves_the_crc_alone)
{
	cr_assert_eq(cour_crc32c(0, "", 0), 0);
	cr_assert_eq(cour_crc32c(0xE3069283u, "x", 0), 0xE3069283u);
}

Test(crc32c, short_strings)
{
	static const char fox[] = "The quick brown fox jumps over the lazy dog";

	cr_assert_eq(cour_crc32c(0, "a", 1), 0xC1D04330u);
	cr_assert_eq(cour_crc32c(0, fox, sizeof(fox) - 1), 0x22620404u);
}

/* RFC 3720 (iSCSI) appendix B.4 */
Test(crc32c, rfc3720_vectors)
{
	static const unsigned char read_pdu[48] = {
		0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
		0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18, 0x28, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	};
	unsigned char b[32];

	memset(b, 0, sizeof(b));
	cr_assert_eq(cour_crc32c(0, b, 32), 0x8A9136AAu);
	memset(b, 0xff, sizeof(b));
	cr_assert_eq(cour_crc32c(0, b, 32), 0x62A8AB43u);
	for (int i = 0; i < 32; i++)
		b[i] = (unsigned char)i;
	cr_assert_eq(cour_crc32c(0, b, 32), 0x46DD794Eu);
	for (int i = 0; i < 32; i++)
		b[i] = (unsigned char)(31 - i);
	cr_assert_eq(cour_crc32c(0, b, 32), 0x113FDB5Cu);
	cr_assert_eq(cour_crc32c(0, read_pdu, sizeof(read_pdu)), 0xD9963A56u);
}

Test(crc32c, chaining_equals_one_pass_at_every_split)
{
	unsigned char b[100];
	uint32_t whole;

	fill(b, sizeof(b), 7);
	whole = cour_crc32c(0, b, sizeof(b));
	cr_assert_eq(whole, ref_crc32c(0, b, sizeof(b)));
	for (size_t cut = 0; cut <= sizeof(b); cut++) {
		uint32_t c = cour_crc32c(cour_crc32c(0, b, cut), b + cut, sizeof(b) - cut);
		cr_assert_eq(c, whole, "split at %zu: %#x, one pass %#x", cut, c, whole);
	}
}

Test(crc32c, chaining_over_three_pieces_like_an_iovec)
{
	unsigned char b[72 + 13 + 1000];
	uint32_t c;

	fill(b, sizeof(b), 99);
	c = cour_crc32c(0, b, 72);               /* header */
	c = cour_crc32c(c, b + 72, 13);          /* payload iov 0 */
	c = cour_crc32c(c, b + 85, 1000);        /* payload iov 1 */
	cr_assert_eq(c, cour_crc32c(0, b, sizeof(b)));
	cr_assert_eq(c, ref_crc32c(0, b, sizeof(b)));
}

Test(crc32c, every_length_and_alignment_matches_the_reference)
{
	unsigned char b[8 + 80];

	fill(b, sizeof(b), 12345);
	for (size_t off = 0; off < 8; off++)
		for (size_t len = 0; len <= 80; len++)
			cr_assert_eq(cour_crc32c(0, b + off, len), ref_crc32c(0, b + off, len),
				     "offset %zu length %zu", off, len);
}

/* 80 bytes, a packet header's size, take an unrolled path: the same value as the definition
 * at every alignment, over many contents, from a fresh start and chained after other bytes
 * (every byte position must count). */
Test(crc32c, a_header_of_80_bytes_unrolled_matches_the_reference)
{
	unsigned char b[8 + 80];

	for (uint32_t seed = 1; seed <= 64; seed++) {
		fill(b, sizeof(b), seed);
		for (size_t off = 0; off < 8; off++) {
			cr_assert_eq(cour_crc32c(0, b + off, 80), ref_crc32c(0, b + off, 80),
				     "seed %u offset %zu", seed, off);
			cr_assert_eq(cour_crc32c(seed, b + off, 80), ref_crc32c(seed, b + off, 80),
				     "seed %u offset %zu, chained", seed, off);
		}
	}
	for (size_t i = 0; i < 80; i++) {
		uint32_t before = cour_crc32c(0, b, 80);

		b[i] ^= 0x10;
		cr_assert_neq(cour_crc32c(0, b, 80), before, "byte %zu not covered", i);
		b[i] ^= 0x10;
	}
}

Test(crc32c, one_megabyte)
{
	size_t len = 1 << 20;
	unsigned char *b = malloc(len + 3);

	cr_assert_not_null(b);
	fill(b, len + 3, 2024);
	cr_assert_eq(cour_crc32c(0, b + 3, len), ref_crc32c(0, b + 3, len));
	free(b);
}

Test(crc32c, one_flipped_bit_changes_the_crc)
{
	unsigned char b[72];
	uint32_t good;

	fill(b, sizeof(b), 5);
	good = cour_crc32c(0, b, sizeof(b));
	for (size_t bit = 0; bit < sizeof(b) * 8; bit++) {
		b[bit / 8] ^= (unsigned char)(1u << (bit % 8));
		cr_assert_neq(cour_crc32c(0, b, sizeof(b)), good, "bit %zu undetected", bit);
		b[bit / 8] ^= (unsigned char)(1u << (bit % 8));
	}
	cr_assert_eq(cour_crc32c(0, b, sizeof(b)), good);
}
