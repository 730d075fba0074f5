/*
 * The authentication trailer (wire/cour_mac.h): what a receiver accepts and what it refuses,
 * one datagram at a time, with two contexts standing for sender and receiver.
 */
#include "util/cour_util.h"
#include "wire/cour_mac.h"

#include <criterion/criterion.h>
#include <string.h>
#include <time.h>

static const char key_a[] = "0123456789abcdef-job-a";
static const char key_b[] = "0123456789abcdef-job-b";

struct dgram {
	uint8_t  hdr[80];
	uint8_t  payload[1400];
	struct cour_mac_trailer t;
};

static void fill(struct dgram *d, uint8_t seed)
{
	for (size_t i = 0; i < sizeof(d->hdr); i++)
		d->hdr[i] = (uint8_t)(seed + i);
	for (size_t i = 0; i < sizeof(d->payload); i++)
		d->payload[i] = (uint8_t)(seed * 7 + i * 13);
}

/* a datagram goes from A (10.0.0.1:5000) to B (10.0.0.2:6000) unless a test says otherwise */
static const struct cour_mac_ends a_to_b = {
	.src = { [10] = 0xff, 0xff, 10, 0, 0, 1, 0x13, 0x88 },
	.dst = { [10] = 0xff, 0xff, 10, 0, 0, 2, 0x17, 0x70 },
};

static void sign_ends(struct cour_mac *m, const struct cour_mac_ends *e, struct dgram *d)
{
	struct iovec v[2] = { { d->hdr, sizeof(d->hdr) }, { d->payload, sizeof(d->payload) } };

	cour_mac_sign(m, e, v, 2, &d->t);
}

static void sign(struct cour_mac *m, struct dgram *d)
{
	sign_ends(m, &a_to_b, d);
}

static enum cour_mac_verdict check_ends(struct cour_mac *m, const struct cour_mac_ends *e,
					const struct dgram *d)
{
	struct iovec v[2] = { { (void *)d->hdr, sizeof(d->hdr) },
			      { (void *)d->payload, sizeof(d->payload) } };

	return cour_mac_check(m, e, v, 2, &d->t);
}

static enum cour_mac_verdict check(struct cour_mac *m, const struct dgram *d)
{
	return check_ends(m, &a_to_b, d);
}

static uint32_t now_s(void)
{
	return (uint32_t)time(NULL);
}

Test(mac, accepts_once_refuses_copies)
{
	struct cour_mac *tx = cour_mac_new(key_a, sizeof(key_a), 60);
	struct cour_mac *rx = cour_mac_new(key_a, sizeof(key_a), 60);
	struct cour_mac_counts c;
	struct dgram d;

	cr_assert(tx && rx);
	fill(&d, 1);
	sign(tx, &d);
	cr_assert_eq(check(rx, &d), COUR_MAC_OK);
	cr_assert_eq(check(rx, &d), COUR_MAC_REPLAYED, "a copy of an accepted datagram passed");
	cour_mac_counts(rx, &c);
	cr_assert_eq(c.forged, 0);
	cr_assert_eq(c.replayed, 1);
	cour_mac_free(tx);
	cour_mac_free(rx);
}

Test(mac, refuses_every_change)
{
	struct cour_mac *tx = cour_mac_new(key_a, sizeof(key_a), 60);
	struct cour_mac *rx = cour_mac_new(key_a, sizeof(key_a), 60);
	struct cour_mac *other = cour_mac_new(key_b, sizeof(key_b), 60);
	struct cour_mac_counts c;
	struct dgram d, e;

	fill(&d, 2);
	sign(tx, &d);
	/* one flipped bit anywhere: header, payload, each trailer field, the tag */
	size_t where[] = { 0, 79, 80 + 700, 80 + 1399 };
	for (size_t i = 0; i < COUR_ARRAY_SIZE(where); i++) {
		e = d;
		((uint8_t *)&e)[where[i]] ^= 0x10;
		cr_assert_eq(check(rx, &e), COUR_MAC_FORGED, "bit at %zu", where[i]);
	}
	e = d; e.t.stream ^= 1;  cr_assert_eq(check(rx, &e), COUR_MAC_FORGED);
	e = d; e.t.ctr ^= 1;     cr_assert_eq(check(rx, &e), COUR_MAC_FORGED);
	e = d; e.t.time ^= 1;    cr_assert_eq(check(rx, &e), COUR_MAC_FORGED);
	e = d; e.t.tag[15] ^= 1; cr_assert_eq(check(rx, &e), COUR_MAC_FORGED);
	/* another key's tag over the same bytes */
	e = d;
	sign(other, &e);
	cr_assert_eq(check(rx, &e), COUR_MAC_FORGED);
	/* none of that used up the genuine one */
	cr_assert_eq(check(rx, &d), COUR_MAC_OK);
	cour_mac_counts(rx, &c);
	cr_assert_eq(c.forged, COUR_ARRAY_SIZE(where) + 5);
	cr_assert_eq(c.replayed, 0);
	cour_mac_free(tx);
	cour_mac_free(rx);
	cour_mac_free(other);
}

Test(mac, pieces_and_buffer_agree)
{
	struct cour_mac *tx = cour_mac_new(key_a, sizeof(key_a), 60);
	struct cour_mac *rx = cour_mac_new(key_a, sizeof(key_a), 60);
	uint8_t buf[80 + 1400 + COUR_MAC_LEN];
	struct dgram d;

	fill(&d, 3);
	sign(tx, &d);
	memcpy(buf, d.hdr, 80);
	memcpy(buf + 80, d.payload, 1400);
	memcpy(buf + 1480, &d.t, COUR_MAC_LEN);
	cr_assert_eq(cour_mac_check_buf(rx, &a_to_b, buf, sizeof(buf)), COUR_MAC_OK);
	/* and the other way round */
	cour_mac_sign_buf(tx, &a_to_b, buf, 1480);
	memcpy(&d.t, buf + 1480, COUR_MAC_LEN);
	cr_assert_eq(check(rx, &d), COUR_MAC_OK);
	cr_assert_eq(cour_mac_check_buf(rx, &a_to_b, buf, COUR_MAC_LEN - 1), COUR_MAC_FORGED);
	cour_mac_free(tx);
	cour_mac_free(rx);
}

/* A datagram is valid only from its sender to its receiver: sent back to its sender (a
 * reflection), or taken as coming from or going to any other address or port, it is a
 * forgery; and the refusals do not use up the genuine one. */
Test(mac, bound_to_its_ends)
{
	struct cour_mac *tx = cour_mac_new(key_a, sizeof(key_a), 60);
	struct cour_mac *rx = cour_mac_new(key_a, sizeof(key_a), 60);
	struct cour_mac_ends back, e;
	struct cour_mac_counts c;
	struct dgram d;
	size_t n = 0;

	fill(&d, 9);
	sign(tx, &d);
	memcpy(back.src, a_to_b.dst, sizeof(back.src));
	memcpy(back.dst, a_to_b.src, sizeof(back.dst));
	cr_assert_eq(check_ends(tx, &back, &d), COUR_MAC_FORGED, "reflected to its sender");
	cr_assert_eq(check_ends(rx, &back, &d), COUR_MAC_FORGED, "the ends swapped");
	n++;
	/* each byte of either end: another host, another port */
	for (size_t i = 0; i < sizeof(e); i++) {
		e = a_to_b;
		((uint8_t *)&e)[i] ^= 0x01;
		cr_assert_eq(check_ends(rx, &e, &d), COUR_MAC_FORGED, "ends byte %zu", i);
		n++;
	}
	cr_assert_eq(check(rx, &d), COUR_MAC_OK);
	cour_mac_counts(rx, &c);
	cr_assert_eq(c.forged, n);
	cr_assert_eq(c.replayed, 0);
	cour_mac_free(tx);
	cour_mac_free(rx);
}

/* Datagrams overtake each other: any order within the window, each once; older ones never. */
Test(mac, window)
{
	struct cour_mac *tx = cour_mac_new(key_a, sizeof(key_a), 60);
	struct cour_mac *rx = cour_mac_new(key_a, sizeof(key_a), 60);
	enum { N = COUR_MAC_WINDOW + 200 };
	static struct dgram d[N];

	for (int i = 0; i < N; i++) {
		fill(&d[i], (uint8_t)i);
		sign(tx, &d[i]);
	}
	/* the newest first, then the rest of the window backwards */
	cr_assert_eq(check(rx, &d[N - 1]), COUR_MAC_OK);
	for (int i = N - 2; i > N - 1 - COUR_MAC_WINDOW; i--)
		cr_assert_eq(check(rx, &d[i]), COUR_MAC_OK, "counter %d in the window", i);
	for (int i = N - 1; i > N - 1 - COUR_MAC_WINDOW; i--)
		cr_assert_eq(check(rx, &d[i]), COUR_MAC_REPLAYED, "counter %d twice", i);
	/* behind the window: refused though never seen (it could be a copy) */
	cr_assert_eq(check(rx, &d[N - 1 - COUR_MAC_WINDOW]), COUR_MAC_REPLAYED);
	cr_assert_eq(check(rx, &d[0]), COUR_MAC_REPLAYED);
	cour_mac_free(tx);
	cour_mac_free(rx);
}

/* A jump forward forgets what it jumped over only once it is out of the window. */
Test(mac, window_slides)
{
	struct cour_mac *tx = cour_mac_new(key_a, sizeof(key_a), 60);
	struct cour_mac *rx = cour_mac_new(key_a, sizeof(key_a), 60);
	static struct dgram d[3 * COUR_MAC_WINDOW];

	for (int i = 0; i < 3 * COUR_MAC_WINDOW; i++) {
		fill(&d[i], (uint8_t)i);
		sign(tx, &d[i]);
	}
	cr_assert_eq(check(rx, &d[10]), COUR_MAC_OK);
	cr_assert_eq(check(rx, &d[12]), COUR_MAC_OK);
	cr_assert_eq(check(rx, &d[11]), COUR_MAC_OK);   /* a hole filled */
	cr_assert_eq(check(rx, &d[10 + COUR_MAC_WINDOW]), COUR_MAC_OK);
	cr_assert_eq(check(rx, &d[12]), COUR_MAC_REPLAYED);
	cr_assert_eq(check(rx, &d[13]), COUR_MAC_OK, "13 was never seen and is in the window");
	cr_assert_eq(check(rx, &d[10]), COUR_MAC_REPLAYED, "10 left the window");
	cr_assert_eq(check(rx, &d[3 * COUR_MAC_WINDOW - 1]), COUR_MAC_OK);   /* a long jump */
	cr_assert_eq(check(rx, &d[2 * COUR_MAC_WINDOW]), COUR_MAC_OK);
	cr_assert_eq(check(rx, &d[2 * COUR_MAC_WINDOW]), COUR_MAC_REPLAYED);
	cour_mac_free(tx);
	cour_mac_free(rx);
}

/* Copies older than the skew are refused by their stamp: the windows need not remember them. */
Test(mac, stale)
{
	struct cour_mac *tx = cour_mac_new(key_a, sizeof(key_a), 60);
	struct cour_mac *rx = cour_mac_new(key_a, sizeof(key_a), 60);
	struct iovec v = { .iov_base = (void *)key_b, .iov_len = sizeof(key_b) };
	struct cour_mac_trailer t;

	cour_mac_sign_at(tx, &a_to_b, &v, 1, now_s() - 61, &t);
	cr_assert_eq(cour_mac_check(rx, &a_to_b, &v, 1, &t), COUR_MAC_STALE);
	cour_mac_sign_at(tx, &a_to_b, &v, 1, now_s() + 61, &t);
	cr_assert_eq(cour_mac_check(rx, &a_to_b, &v, 1, &t), COUR_MAC_STALE);
	cour_mac_sign_at(tx, &a_to_b, &v, 1, now_s() - 50, &t);
	cr_assert_eq(cour_mac_check(rx, &a_to_b, &v, 1, &t), COUR_MAC_OK, "within the skew");
	cour_mac_free(tx);
	cour_mac_free(rx);
}

/* Senders are told apart by their streams: one's counters do not use up another's. */
Test(mac, senders)
{
	struct cour_mac *s1 = cour_mac_new(key_a, sizeof(key_a), 60);
	struct cour_mac *s2 = cour_mac_new(key_a, sizeof(key_a), 60);
	struct cour_mac *rx = cour_mac_new(key_a, sizeof(key_a), 60);
	struct dgram a, b;

	fill(&a, 5);
	fill(&b, 5);
	sign(s1, &a);
	sign(s2, &b);
	cr_assert_eq(a.t.ctr, b.t.ctr);
	cr_assert_neq(a.t.stream, b.t.stream);
	cr_assert_eq(check(rx, &a), COUR_MAC_OK);
	cr_assert_eq(check(rx, &b), COUR_MAC_OK);
	cour_mac_free(s1);
	cour_mac_free(s2);
	cour_mac_free(rx);
}

Test(mac, key_sizes)
{
	char big[COUR_MAC_KEY_MAX + 1] = { 0 };
	struct cour_mac *m;

	cr_assert_null(cour_mac_new(key_a, COUR_MAC_KEY_MIN - 1, 60));
	cr_assert_null(cour_mac_new(big, sizeof(big), 60));
	m = cour_mac_new(big, COUR_MAC_KEY_MAX, 60);
	cr_assert_not_null(m);
	cour_mac_free(m);
	cour_mac_free(NULL);
}
