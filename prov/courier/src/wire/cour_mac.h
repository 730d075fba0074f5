/*
 * Authenticated datagrams: with a key (fi_domain's or fi_endpoint's auth_key, or the file
 * FI_COURIER_AUTH_KEY_FILE names), every datagram a wire sends ends with a trailer whose tag
 * is UMAC-128 (RFC 4418, AES-128 based) over the whole datagram, and a wire hands up only
 * datagrams whose tag is right and that it has not accepted before. Without a key no trailer
 * exists and no code of this file runs. docs/protocol.md says why this primitive and this
 * replay rule.
 *
 * The trailer (32 bytes, little-endian, after the packet; header flag COUR_F_MAC):
 *
 *   stream  u64  the sender's random stream; a new one when ctr would wrap
 *   ctr     u32  datagrams the sender sent on the stream before this one
 *   time    u32  the sender's CLOCK_REALTIME in seconds, low 32 bits
 *   tag     16   UMAC-128(key, nonce = stream || ctr, ends || everything before the tag)
 *
 * ends (struct cour_mac_ends) is who sends to whom: the source's and the destination's IP and
 * port, which the datagram does not carry but both sides know (the sender its own bound name
 * and where it sends, the receiver where it came from and its own bound name). A datagram is
 * thus valid only on its way from its sender to its receiver: reflected back to its sender,
 * or replayed toward another endpoint or from another address, it fails as a forgery.
 *
 * The nonce never repeats under one key (UMAC, as GMAC, is only as good as that): a stream is
 * 64 random bits (two senders of one job share one with odds of n^2 / 2^65), and its counter
 * never wraps. Replays: a receiver keeps,
 * per stream it heard within the last 2 * skew seconds, a window of the last
 * COUR_MAC_WINDOW counters it accepted, and refuses a datagram whose time is more than skew
 * (FI_COURIER_AUTH_SKEW) from its own clock: a copy is either stale or in a window.
 *
 * Not thread-safe: one per wire, used under the wire's owner's lock.
 */
#ifndef COUR_MAC_H
#define COUR_MAC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define COUR_MAC_LEN      32      /* trailer bytes */
#define COUR_MAC_TAG_LEN  16
#define COUR_MAC_KEY_MIN  16      /* a shared secret of 128 bits at least */
#define COUR_MAC_KEY_MAX  4096
#define COUR_MAC_WINDOW   1024    /* counters of one stream remembered behind the newest */

struct cour_mac_trailer {
	uint64_t stream;
	uint32_t ctr;
	uint32_t time;
	uint8_t  tag[COUR_MAC_TAG_LEN];
};
_Static_assert(sizeof(struct cour_mac_trailer) == COUR_MAC_LEN, "trailer is 32 bytes");

enum cour_mac_verdict {
	COUR_MAC_OK = 0,
	COUR_MAC_FORGED,      /* no trailer, or a tag the key does not give */
	COUR_MAC_STALE,       /* authentic, but stamped more than skew from our clock */
	COUR_MAC_REPLAYED,    /* authentic, and accepted once already */
};

struct cour_mac_counts {
	uint64_t forged;      /* failed authentication */
	uint64_t replayed;    /* authentic copies refused: stale or seen */
};

struct cour_mac;

/* IP (16 bytes, IPv4 as ::ffff:a.b.c.d) then port (network order) of each end */
struct cour_mac_ends {
	uint8_t src[18];
	uint8_t dst[18];
};

/* A MAC context for key (len bytes, COUR_MAC_KEY_MIN..MAX), or NULL (logged). skew_s: the
 * clock difference tolerated between sender and receiver. */
struct cour_mac *cour_mac_new(const void *key, size_t len, uint32_t skew_s);
void cour_mac_free(struct cour_mac *m);

/* The trailer for the datagram made of iov[0..n) from e->src to e->dst (the wire appends
 * it). */
void cour_mac_sign(struct cour_mac *m, const struct cour_mac_ends *e, const struct iovec *iov,
		   size_t n, struct cour_mac_trailer *t);
/* cour_mac_sign as if our clock read time (seconds): for tests of the freshness rule. */
void cour_mac_sign_at(struct cour_mac *m, const struct cour_mac_ends *e,
		      const struct iovec *iov, size_t n, uint32_t time,
		      struct cour_mac_trailer *t);
/* Sign a datagram of len bytes in buf that has COUR_MAC_LEN bytes of room after it: the
 * trailer goes there. */
void cour_mac_sign_buf(struct cour_mac *m, const struct cour_mac_ends *e, void *buf,
		       size_t len);

/* Check the datagram iov[0..n) that came from e->src to e->dst, whose trailer is t (a copy:
 * it may sit anywhere): the tag, then freshness and replay. Only an OK datagram updates the
 * replay window. */
enum cour_mac_verdict cour_mac_check(struct cour_mac *m, const struct cour_mac_ends *e,
				     const struct iovec *iov, size_t n,
				     const struct cour_mac_trailer *t);
/* The same for a datagram of len bytes (trailer included) in buf. */
enum cour_mac_verdict cour_mac_check_buf(struct cour_mac *m, const struct cour_mac_ends *e,
					 const void *buf, size_t len);

void cour_mac_counts(const struct cour_mac *m, struct cour_mac_counts *c);
/* Whether a refusal just counted is worth a log line: the first, then every 1024th. */
bool cour_mac_log_due(const struct cour_mac *m);

#endif
