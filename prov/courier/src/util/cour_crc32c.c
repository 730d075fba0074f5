/*
 * crc32c (Castagnoli polynomial, reflected 0x82F63B78). Headers are always checksummed, so this
 * runs on every packet: the SSE4.2 instruction when the CPU has it, a table otherwise.
 */
#include "util/cour_crc32c.h"

#include <stdbool.h>
#include <string.h>

static uint32_t cour_crc_table[256];
static int cour_crc_hw = -1;

static void cour_crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
		cour_crc_table[i] = c;
	}
#if defined(__x86_64__)
	__builtin_cpu_init();
	cour_crc_hw = __builtin_cpu_supports("sse4.2");
#else
	cour_crc_hw = 0;
#endif
}

static uint32_t cour_crc_sw(uint32_t crc, const unsigned char *p, size_t len)
{
	while (len--)
		crc = cour_crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2")))
static uint32_t cour_crc_hw8(uint32_t crc, const unsigned char *p, size_t len)
{
	uint64_t c = crc;

	for (; len >= 8; len -= 8, p += 8) {
		uint64_t v;
		memcpy(&v, p, 8);
		c = __builtin_ia32_crc32di(c, v);
	}
	crc = (uint32_t)c;
	while (len--)
		crc = __builtin_ia32_crc32qi(crc, *p++);
	return crc;
}
#endif

#if defined(__x86_64__)
/* 80 bytes (a packet header), the loop unrolled: the general loop's counting and tail cost
 * about as many instructions as its 10 crc32 instructions, on every header sent and received */
__attribute__((target("sse4.2")))
static uint32_t cour_crc_hw80(uint32_t crc, const unsigned char *p)
{
	uint64_t c = crc, v[10];

	memcpy(v, p, sizeof(v));
	c = __builtin_ia32_crc32di(c, v[0]);
	c = __builtin_ia32_crc32di(c, v[1]);
	c = __builtin_ia32_crc32di(c, v[2]);
	c = __builtin_ia32_crc32di(c, v[3]);
	c = __builtin_ia32_crc32di(c, v[4]);
	c = __builtin_ia32_crc32di(c, v[5]);
	c = __builtin_ia32_crc32di(c, v[6]);
	c = __builtin_ia32_crc32di(c, v[7]);
	c = __builtin_ia32_crc32di(c, v[8]);
	c = __builtin_ia32_crc32di(c, v[9]);
	return (uint32_t)c;
}
#endif

uint32_t cour_crc32c(uint32_t crc, const void *buf, size_t len)
{
	if (__builtin_expect(cour_crc_hw < 0, 0))
		cour_crc_init();
	crc = ~crc;
#if defined(__x86_64__)
	if (cour_crc_hw)
		return ~(len == 80 ? cour_crc_hw80(crc, buf) : cour_crc_hw8(crc, buf, len));
#endif
	return ~cour_crc_sw(crc, buf, len);
}
