/* crc32c (Castagnoli); hardware-accelerated where the CPU has SSE4.2. Every packet header is
 * checked with it (proto/cour_wire_fmt.h says which bytes). */
#ifndef COUR_CRC32C_H
#define COUR_CRC32C_H

#include <stddef.h>
#include <stdint.h>

uint32_t cour_crc32c(uint32_t crc, const void *buf, size_t len);

#endif
