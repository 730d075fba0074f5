/*
 * UMAC-128 (RFC 4418) through nettle, and the replay windows. The contract is in cour_mac.h;
 * docs/protocol.md says why UMAC and why nettle (measured: 52 ns per small datagram and 0.37
 * cycles per byte, against 134 ns and 0.47-0.52 for OpenSSL's AES-GMAC on the same machine).
 */
#include "util/cour_util.h"
#include "wire/cour_mac.h"

#include <nettle/hkdf.h>
#include <nettle/hmac.h>
#include <nettle/umac.h>
#include <sys/random.h>
#include <time.h>
#include <uthash.h>

#define COUR_MAC_STREAMS_MAX 65536   /* senders remembered at once (each 160 bytes) */

struct cour_mac_stream {
	UT_hash_handle hh;
	uint64_t       id;
	uint32_t       top;            /* the highest counter accepted */
	uint32_t       heard_s;        /* our clock when it was last accepted */
	uint64_t       seen[COUR_MAC_WINDOW / 64];   /* bit c % WINDOW: counter c accepted */
};

struct cour_mac {
	struct umac128_ctx umac;       /* key set once; each datagram sets only its nonce */
	uint32_t        skew_s;
	uint64_t        stream;        /* sending */
	uint64_t        ctr;           /* next counter: a new stream at 2^32 */
	struct cour_mac_stream *streams;   /* receiving */
	struct cour_mac_stream *last;      /* the stream heard last: most datagrams' own */
	uint32_t        purged_s;
	struct cour_mac_counts counts;
};

static uint32_t cour_mac_now_s(void)
{
	struct timespec ts;

	/* the coarse clock is a read of the vDSO page, ~5 ns: seconds are all we need */
	clock_gettime(CLOCK_REALTIME_COARSE, &ts);
	return (uint32_t)ts.tv_sec;
}

static uint64_t cour_mac_random64(void)
{
	uint64_t v = 0;

	while (getrandom(&v, sizeof(v), 0) != sizeof(v))
		;
	return v;
}

/* The MAC key: HKDF-SHA256 of the application's secret, so a key of any length and any
 * structure (a passphrase, a launcher's random bytes) gives a uniform AES key, and the same
 * secret used elsewhere gives an unrelated one. */
static void cour_mac_derive(const void *key, size_t len, uint8_t out[UMAC_KEY_SIZE])
{
	static const char info[] = "courier packet MAC v1";
	uint8_t prk[SHA256_DIGEST_SIZE];
	struct hmac_sha256_ctx h;

	hmac_sha256_set_key(&h, 0, (const uint8_t *)"");   /* no salt: RFC 5869's zeros */
	hkdf_extract(&h, (nettle_hash_update_func *)hmac_sha256_update,
		     (nettle_hash_digest_func *)hmac_sha256_digest, SHA256_DIGEST_SIZE, len, key,
		     prk);
	hmac_sha256_set_key(&h, sizeof(prk), prk);
	hkdf_expand(&h, (nettle_hash_update_func *)hmac_sha256_update,
		    (nettle_hash_digest_func *)hmac_sha256_digest, SHA256_DIGEST_SIZE,
		    sizeof(info) - 1, (const uint8_t *)info, UMAC_KEY_SIZE, out);
	explicit_bzero(prk, sizeof(prk));
	explicit_bzero(&h, sizeof(h));
}

struct cour_mac *cour_mac_new(const void *key, size_t len, uint32_t skew_s)
{
	struct cour_mac *m;
	uint8_t k[UMAC_KEY_SIZE];

	if (len < COUR_MAC_KEY_MIN || len > COUR_MAC_KEY_MAX) {
		COUR_WARN(FI_LOG_EP_CTRL, "authentication key of %zu bytes: %d to %d bytes\n", len,
			  COUR_MAC_KEY_MIN, COUR_MAC_KEY_MAX);
		return NULL;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	cour_mac_derive(key, len, k);
	umac128_set_key(&m->umac, k);
	explicit_bzero(k, sizeof(k));
	m->skew_s = skew_s;
	m->stream = cour_mac_random64();
	m->purged_s = cour_mac_now_s();
	return m;
}

void cour_mac_free(struct cour_mac *m)
{
	struct cour_mac_stream *s, *tmp;

	if (!m)
		return;
	HASH_ITER(hh, m->streams, s, tmp) {
		HASH_DEL(m->streams, s);
		free(s);
	}
	explicit_bzero(&m->umac, sizeof(m->umac));
	free(m);
}

/* The tag of a datagram: its ends, its pieces, then the trailer up to the tag, under nonce
 * stream || ctr (unique per key: cour_mac.h). */
static void cour_mac_tag(struct cour_mac *m, const struct cour_mac_ends *e,
			 const struct iovec *iov, size_t n, const struct cour_mac_trailer *t,
			 uint8_t tag[COUR_MAC_TAG_LEN])
{
	uint8_t nonce[12];

	memcpy(nonce, &t->stream, 8);
	memcpy(nonce + 8, &t->ctr, 4);
	umac128_set_nonce(&m->umac, sizeof(nonce), nonce);
	umac128_update(&m->umac, sizeof(*e), (const uint8_t *)e);
	for (size_t i = 0; i < n; i++)
		umac128_update(&m->umac, iov[i].iov_len, iov[i].iov_base);
	umac128_update(&m->umac, offsetof(struct cour_mac_trailer, tag), (const uint8_t *)t);
	umac128_digest(&m->umac, COUR_MAC_TAG_LEN, tag);
}

void cour_mac_sign_at(struct cour_mac *m, const struct cour_mac_ends *e,
		      const struct iovec *iov, size_t n, uint32_t time,
		      struct cour_mac_trailer *t)
{
	if (COUR_UNLIKELY(m->ctr > UINT32_MAX)) {
		m->stream = cour_mac_random64();
		m->ctr = 0;
	}
	t->stream = m->stream;
	t->ctr = (uint32_t)m->ctr++;
	t->time = time;
	cour_mac_tag(m, e, iov, n, t, t->tag);
}

void cour_mac_sign(struct cour_mac *m, const struct cour_mac_ends *e, const struct iovec *iov,
		   size_t n, struct cour_mac_trailer *t)
{
	cour_mac_sign_at(m, e, iov, n, cour_mac_now_s(), t);
}

void cour_mac_sign_buf(struct cour_mac *m, const struct cour_mac_ends *e, void *buf,
		       size_t len)
{
	struct iovec v = { .iov_base = buf, .iov_len = len };
	struct cour_mac_trailer t;

	cour_mac_sign(m, e, &v, 1, &t);
	memcpy((char *)buf + len, &t, sizeof(t));
}

/* Forget streams not heard for 2 * skew: any copy of their datagrams is stale by now. */
static void cour_mac_purge(struct cour_mac *m, uint32_t now)
{
	struct cour_mac_stream *s, *tmp;

	m->purged_s = now;
	HASH_ITER(hh, m->streams, s, tmp) {
		if (now - s->heard_s > 2 * m->skew_s) {
			if (m->last == s)
				m->last = NULL;
			HASH_DEL(m->streams, s);
			free(s);
		}
	}
}

static bool cour_mac_bit(struct cour_mac_stream *s, uint32_t c)
{
	return s->seen[(c % COUR_MAC_WINDOW) / 64] & (1ull << (c % 64));
}

static void cour_mac_set(struct cour_mac_stream *s, uint32_t c)
{
	s->seen[(c % COUR_MAC_WINDOW) / 64] |= 1ull << (c % 64);
}

/* Accept counter c of stream id once (a fresh stream is remembered first). */
static enum cour_mac_verdict cour_mac_once(struct cour_mac *m, uint64_t id, uint32_t c,
					   uint32_t now)
{
	struct cour_mac_stream *s = m->last;

	if (!s || s->id != id)
		HASH_FIND(hh, m->streams, &id, sizeof(id), s);
	if (!s) {
		if (now - m->purged_s >= m->skew_s ||
		    HASH_COUNT(m->streams) >= COUR_MAC_STREAMS_MAX)
			cour_mac_purge(m, now);
		if (HASH_COUNT(m->streams) >= COUR_MAC_STREAMS_MAX) {
			COUR_WARN(FI_LOG_EP_DATA, "%d senders heard within %u s: a new one is "
				  "refused\n", COUR_MAC_STREAMS_MAX, 2 * m->skew_s);
			return COUR_MAC_REPLAYED;
		}
		s = calloc(1, sizeof(*s));
		if (!s)
			return COUR_MAC_REPLAYED;     /* cannot remember it: cannot accept it */
		s->id = id;
		s->top = c;
		HASH_ADD(hh, m->streams, id, sizeof(s->id), s);
	} else if (c > s->top) {
		uint32_t gap = c - s->top;

		if (gap >= COUR_MAC_WINDOW)
			memset(s->seen, 0, sizeof(s->seen));
		else
			for (uint32_t k = s->top + 1; k != c; k++)
				s->seen[(k % COUR_MAC_WINDOW) / 64] &= ~(1ull << (k % 64));
		s->top = c;
	} else if (s->top - c >= COUR_MAC_WINDOW || cour_mac_bit(s, c)) {
		return COUR_MAC_REPLAYED;
	}
	cour_mac_set(s, c);
	s->heard_s = now;
	m->last = s;
	return COUR_MAC_OK;
}

/* Whether two tags are equal, in a time that does not depend on where they differ (nettle's
 * memeql_sec goes byte by byte: 27 ns of a datagram's ~50) */
_Static_assert(COUR_MAC_TAG_LEN == 16, "cour_mac_tag_eq compares two words");
static bool cour_mac_tag_eq(const uint8_t *a, const uint8_t *b)
{
	uint64_t a0, a1, b0, b1;

	memcpy(&a0, a, 8);
	memcpy(&a1, a + 8, 8);
	memcpy(&b0, b, 8);
	memcpy(&b1, b + 8, 8);
	return ((a0 ^ b0) | (a1 ^ b1)) == 0;
}

static enum cour_mac_verdict cour_mac_refuse(struct cour_mac *m, enum cour_mac_verdict v)
{
	if (v == COUR_MAC_FORGED)
		m->counts.forged++;
	else
		m->counts.replayed++;
	return v;
}

enum cour_mac_verdict cour_mac_check(struct cour_mac *m, const struct cour_mac_ends *e,
				     const struct iovec *iov, size_t n,
				     const struct cour_mac_trailer *t)
{
	uint8_t tag[COUR_MAC_TAG_LEN];
	uint32_t now;
	int32_t off;

	cour_mac_tag(m, e, iov, n, t, tag);
	if (!cour_mac_tag_eq(tag, t->tag))
		return cour_mac_refuse(m, COUR_MAC_FORGED);
	now = cour_mac_now_s();
	off = (int32_t)(now - t->time);
	if (off > (int32_t)m->skew_s || off < -(int32_t)m->skew_s)
		return cour_mac_refuse(m, COUR_MAC_STALE);
	if (cour_mac_once(m, t->stream, t->ctr, now) != COUR_MAC_OK)
		return cour_mac_refuse(m, COUR_MAC_REPLAYED);
	return COUR_MAC_OK;
}

enum cour_mac_verdict cour_mac_check_buf(struct cour_mac *m, const struct cour_mac_ends *e,
					 const void *buf, size_t len)
{
	struct cour_mac_trailer t;
	struct iovec v;

	if (len < COUR_MAC_LEN)
		return cour_mac_refuse(m, COUR_MAC_FORGED);
	len -= COUR_MAC_LEN;
	memcpy(&t, (const char *)buf + len, sizeof(t));
	v.iov_base = (void *)buf;
	v.iov_len = len;
	return cour_mac_check(m, e, &v, 1, &t);
}

void cour_mac_counts(const struct cour_mac *m, struct cour_mac_counts *c)
{
	*c = m->counts;
}

bool cour_mac_log_due(const struct cour_mac *m)
{
	return (m->counts.forged + m->counts.replayed) % 1024 == 1;
}
