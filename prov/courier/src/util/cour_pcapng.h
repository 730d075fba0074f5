/*
 * A pcapng file writer: the capture format Wireshark and tcpdump read (the IETF draft "PCAP Next
 * Generation (pcapng) Capture File Format"). It knows blocks, not courier: one section header,
 * interface descriptions, and enhanced packet blocks, all little-endian (this host's order; the
 * section header's byte-order magic tells readers so).
 *
 * Blocks go into a private buffer and reach the file in big writes: when the buffer is full,
 * when what it holds is older than COUR_PCAPNG_AGE_NS (a process that hangs or is killed loses
 * at most that much of its capture; the clock is read for the timestamp anyway) and at close.
 * The file is bounded: a packet that would take it past `max` bytes is not written, nor is any
 * after it (said once at warn level). A failed write is said once and ends the capture too.
 * Neither is the caller's concern: the packets are counted as lost and nothing else changes.
 *
 * Not thread-safe: one writer per endpoint, used under the endpoint's progress lock.
 */
#ifndef COUR_PCAPNG_H
#define COUR_PCAPNG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define COUR_PCAPNG_LINKTYPE_RAW  101         /* raw IPv4 or IPv6: no link-layer header */
/* One IP version per interface: libpcap (tcpdump) refuses a second interface of type RAW,
 * whose number it translates for the first one only; these two it does not translate. */
#define COUR_PCAPNG_LINKTYPE_IPV4 228
#define COUR_PCAPNG_LINKTYPE_IPV6 229
#define COUR_PCAPNG_BUF          (256u << 10) /* bytes buffered before a write */
#define COUR_PCAPNG_AGE_NS       1000000000ull

/* epb_flags: the direction of a packet */
#define COUR_PCAPNG_IN  1u
#define COUR_PCAPNG_OUT 2u

struct cour_pcapng {
	int       fd;
	uint8_t  *buf;
	size_t    len;           /* bytes in buf */
	uint64_t  oldest_ns;     /* timestamp of the first packet in buf (0: none) */
	uint64_t  size;          /* bytes of the file, buf included */
	uint64_t  max;           /* the file's bound, bytes */
	uint64_t  packets, lost; /* written, and refused (bound reached, or a write failed) */
	uint32_t  nifaces;
	bool      stopped;       /* the bound was reached or a write failed: nothing more */
	char     *path;          /* for the messages */
};

/* Create path (truncated, mode 0600: packets carry application data) and write the section
 * header naming app. 0, or a negative FI error (logged at warn level). */
int  cour_pcapng_open(struct cour_pcapng *p, const char *path, uint64_t max, const char *app);
/* Describe the next interface (its id is the number of interfaces described before it);
 * timestamps are in nanoseconds. 0, or a negative FI error (nothing written). */
int  cour_pcapng_iface(struct cour_pcapng *p, uint16_t linktype, uint32_t snaplen,
		       const char *name, const char *desc);
/* One packet of orig_len bytes on interface iface, of which the first cap_len are in the
 * iovecs (which may hold more). flags: COUR_PCAPNG_IN or _OUT; comment may be NULL. */
void cour_pcapng_packet(struct cour_pcapng *p, uint32_t iface, uint64_t ts_ns, uint32_t flags,
			const char *comment, const struct iovec *iov, size_t iovcnt,
			uint32_t cap_len, uint32_t orig_len);
/* Write what is buffered. */
void cour_pcapng_flush(struct cour_pcapng *p);
/* Flush and close; the struct may be reused with open. */
void cour_pcapng_close(struct cour_pcapng *p);

#endif /* COUR_PCAPNG_H */
