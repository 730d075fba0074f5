/*
 * Packed datagrams of the UDP wire (wire/cour_wire.h): small datagrams queued one after another
 * for one address leave as one, laid out as documented, within the bounds the engine and the
 * wire set; the receiving wire hands each packet up on its own, lent, in order, every byte
 * intact, also in GRO trains, with a key, and across a flush that keeps part of the queue. A
 * packed datagram whose layout is broken, or whose tag fails, reaches nothing.
 */
#include "udp_end.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <poll.h>
#include <unistd.h>

TestSuite(udp_pack, .init = udp_end_setup, .fini = udp_end_teardown, .timeout = 30);

static uint32_t pad8(size_t n)
{
	return (uint32_t)((n + 7) & ~(size_t)7);
}

/* The bytes of a packed datagram of the n packets of lens (no trailer). */
static size_t pack_size(const size_t *lens, size_t n)
{
	size_t size = COUR_WIRE_PACK_HDR + 2 * n;

	for (size_t i = 0; i < n; i++)
		size += pad8(lens[i]);
	return size;
}

/* A plain UDP socket on 127.0.0.1 that sees the wire's datagrams as they are. */
static int sniffer(struct sockaddr_storage *sa, socklen_t *len)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	cr_assert_geq(fd, 0);
	inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	*len = sizeof(*sa);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)sa, len), 0);
	return fd;
}

Test(udp_pack, a_pack_is_laid_out_as_documented)
{
	static const size_t lens[3] = { 100, 37, 64 };   /* 37: padding inside */
	struct sockaddr_storage sa;
	socklen_t sa_len;
	uint8_t buf[2048];
	int fd = sniffer(&sa, &sa_len);
	size_t off = COUR_WIRE_PACK_HDR;
	uint16_t n, l;

	open_end(&ends[0], false, false);
	for (uint32_t i = 0; i < 3; i++) {
		struct iovec v = { .iov_base = payload[i], .iov_len = lens[i] - HDR_LEN };

		memset(hdrs[i], 0, HDR_LEN);
		hdrs[i][0] = HDR_MARK;
		memcpy(hdrs[i] + ID_OFF, &i, sizeof(i));
		memset(payload[i], 0xa0 + (int)i, lens[i] - HDR_LEN);
		ends[0].w.ops->queue(&ends[0].w, &sa, sa_len, hdrs[i], HDR_LEN, &v, 1, 1472);
	}
	cr_assert_eq(ends[0].w.ops->flush(&ends[0].w), 0);
	ssize_t got = recv(fd, buf, sizeof(buf), 0);
	close(fd);
	cr_assert_eq(got, (ssize_t)pack_size(lens, 3), "one datagram of %zu bytes, got %zd",
		     pack_size(lens, 3), got);
	cr_expect_eq(buf[0], COUR_WIRE_PACK_MARK);
	cr_expect_eq(buf[1], 0);
	memcpy(&n, buf + 2, sizeof(n));
	cr_expect_eq(n, 3);
	for (int i = 4; i < 8; i++)
		cr_expect_eq(buf[i], 0, "reserved byte %d", i);
	for (uint32_t i = 0; i < 3; i++) {
		uint32_t id;

		cr_expect_eq(off % 8, 0);
		cr_expect_eq(buf[off], HDR_MARK);
		memcpy(&id, buf + off + ID_OFF, sizeof(id));
		cr_expect_eq(id, i, "packet %u in its place", i);
		for (size_t k = HDR_LEN; k < lens[i]; k++)
			cr_expect_eq(buf[off + k], 0xa0 + i, "packet %u byte %zu", i, k);
		for (size_t k = lens[i]; k < pad8(lens[i]); k++)
			cr_expect_eq(buf[off + k], 0, "packet %u padding", i);
		memcpy(&l, buf + (size_t)got - 6 + 2 * i, sizeof(l));
		cr_expect_eq(l, lens[i], "length %u in the table", i);
		off += pad8(lens[i]);
	}
	cr_expect_eq(off, (size_t)got - 6, "the table ends the datagram");
	cr_expect_eq(ends[0].w.stats.packs, 1);
	cr_expect_eq(ends[0].w.stats.packed, 3);
	cr_expect_eq(ends[0].w.stats.tx_pkts, 3);
}

static void packed_ten(bool gso, bool gro)
{
	size_t lens[10];

	open_end(&ends[0], gso, false);
	open_end(&ends[1], false, gro);
	for (uint32_t i = 0; i < 10; i++) {
		lens[i] = 40 + 11 * i;
		queue_pack(&ends[0], &ends[1], i, lens[i], 1472);
	}
	cr_assert_eq(ends[0].w.ops->flush(&ends[0].w), 0);
	cr_expect_eq(ends[0].w.stats.packs, 1);
	cr_expect_eq(ends[0].w.stats.packed, 10);
	receive(&ends[1], 10);
	check_seen(&ends[1], 0, lens, 10);
	for (int i = 0; i < 10; i++)
		cr_expect(ends[1].seen[i].borrowed, "packet %d of a pack not lent", i);
	cr_expect_eq(ends[1].w.stats.packs_rcvd, 1);
	cr_expect_eq(ends[1].w.stats.rx_pkts, 10);
	cr_expect_eq(ends[1].w.stats.rx_bad, 0);
}

Test(udp_pack, packed_datagrams_arrive_one_by_one_lent_and_in_order)
{
	packed_ten(true, true);
}

Test(udp_pack, packed_datagrams_arrive_without_gso_or_gro)
{
	packed_ten(false, false);
}

/* A pack closes at its byte bound (the engine's, for the peer's MTU), at COUR_WIRE_PACK_CNT
 * packets, and where the next datagram goes elsewhere. */
Test(udp_pack, a_pack_ends_at_its_bound_its_count_and_another_address)
{
	enum { MANY = COUR_WIRE_PACK_CNT + 1 };
	size_t lens[MANY];

	open_end(&ends[0], true, false);
	open_end(&ends[1], false, true);
	open_end(&ends[2], false, true);
	/* 300 bytes (304 padded): three fit 1000 bytes (926), four do not */
	for (uint32_t i = 0; i < 5; i++) {
		lens[i] = 300;
		queue_pack(&ends[0], &ends[1], i, 300, 1000);
	}
	cr_assert_eq(ends[0].w.ops->flush(&ends[0].w), 0);
	cr_expect_eq(ends[0].w.stats.packs, 2, "3 + 2");
	cr_expect_eq(ends[0].w.stats.packed, 5);
	receive(&ends[1], 5);
	check_seen(&ends[1], 0, lens, 5);

	ends[1].nseen = 0;
	ends[0].w.stats.packs = ends[0].w.stats.packed = 0;
	for (uint32_t i = 0; i < MANY; i++) {
		lens[i] = 24;
		queue_pack(&ends[0], &ends[1], i, 24, 16384);
	}
	cr_assert_eq(ends[0].w.ops->flush(&ends[0].w), 0);
	cr_expect_eq(ends[0].w.stats.packs, 1, "%d in one, the last alone", COUR_WIRE_PACK_CNT);
	cr_expect_eq(ends[0].w.stats.packed, COUR_WIRE_PACK_CNT);
	receive(&ends[1], MANY);
	check_seen(&ends[1], 0, lens, MANY);
	cr_expect_eq(ends[1].w.stats.packs_rcvd, 3, "2 before, 1 now");

	/* b b c c b: two packs and one alone, each address its own */
	ends[1].nseen = 0;
	ends[0].w.stats.packs = ends[0].w.stats.packed = 0;
	queue_pack(&ends[0], &ends[1], 0, 100, 1472);
	queue_pack(&ends[0], &ends[1], 1, 100, 1472);
	queue_pack(&ends[0], &ends[2], 0, 100, 1472);
	queue_pack(&ends[0], &ends[2], 1, 100, 1472);
	queue_pack(&ends[0], &ends[1], 2, 100, 1472);
	cr_assert_eq(ends[0].w.ops->flush(&ends[0].w), 0);
	cr_expect_eq(ends[0].w.stats.packs, 2);
	cr_expect_eq(ends[0].w.stats.packed, 4);
	for (int i = 0; i < 3; i++)
		lens[i] = 100;
	receive(&ends[1], 3);
	receive(&ends[2], 2);
	check_seen(&ends[1], 0, lens, 3);
	check_seen(&ends[2], 0, lens, 2);
}

/* What the engine says to send alone (pack 0), and what is bigger than COUR_WIRE_PACK_PKT,
 * goes alone and keeps its place among the rest. */
Test(udp_pack, what_may_not_be_packed_goes_alone_in_its_place)
{
	static const uint32_t packs[6] = { 1472, 0, 1472, 1472, 1472, 1472 };
	size_t lens[6] = { 100, 100, 100, COUR_WIRE_PACK_PKT + 1, 100, 100 };

	open_end(&ends[0], false, false);
	open_end(&ends[1], false, false);
	for (uint32_t i = 0; i < 6; i++)
		queue_pack(&ends[0], &ends[1], i, lens[i], packs[i]);
	cr_assert_eq(ends[0].w.ops->flush(&ends[0].w), 0);
	cr_expect_eq(ends[0].w.stats.packs, 1, "only the last two");
	cr_expect_eq(ends[0].w.stats.packed, 2);
	receive(&ends[1], 6);
	check_seen(&ends[1], 0, lens, 6);
	for (int i = 0; i < 6; i++)
		cr_expect_eq(ends[1].seen[i].borrowed, i >= 4, "packet %d", i);
}

/* Packs of one size to one address form a GSO run, which arrives as one GRO train of packs. */
Test(udp_pack, a_run_of_packs_arrives_as_a_train_of_them)
{
	enum { N = 60 };
	size_t lens[N];
	uint32_t bound;

	for (int i = 0; i < N; i++)
		lens[i] = 136;
	bound = (uint32_t)pack_size(lens, 10);          /* ten to a pack, 1388 bytes */
	open_end(&ends[0], true, false);
	open_end(&ends[1], false, true);
	for (uint32_t i = 0; i < N; i++)
		queue_pack(&ends[0], &ends[1], i, lens[i], bound);
	cr_assert_eq(ends[0].w.ops->flush(&ends[0].w), 0);
	cr_expect_eq(ends[0].w.stats.packs, 6);
	cr_expect_eq(ends[0].w.stats.gso_sends, 1);
	cr_expect_eq(ends[0].w.stats.gso_segs, 6);
	receive(&ends[1], N);
	check_seen(&ends[1], 0, lens, N);
	cr_expect_eq(ends[1].w.stats.gro_trains, 1);
	cr_expect_eq(ends[1].w.stats.gro_segs, 6);
	cr_expect_eq(ends[1].w.stats.packs_rcvd, 6);
	cr_expect_eq(ends[1].w.stats.rx_pkts, N);
}

/*
 * A full queue whose last run can still grow keeps it (a_full_queue_keeps_the_run_that_can_
 * still_grow in test_udp_wire.c): packs in that run stay where they are, closed, and leave
 * whole with the next flush; with a key they are signed only then.
 */
static void kept_packs(void)
{
	enum { PLAIN = COUR_WIRE_TX_BATCH - 2, ALL = PLAIN + 4 + 1 };
	size_t lens[ALL], two[2] = { 136, 136 };
	uint32_t size = (uint32_t)pack_size(two, 2);    /* 284: a pack of two, as the plain */
	uint32_t id = 0;

	cour_params.gso_segs = 48;
	open_end(&ends[0], true, false);
	open_end(&ends[1], false, true);
	for (; id < PLAIN; id++) {
		lens[id] = size;
		queue_pack(&ends[0], &ends[1], id, size, 0);
	}
	for (; id < PLAIN + 4; id++) {                 /* two packs of two */
		lens[id] = 136;
		queue_pack(&ends[0], &ends[1], id, 136, size);
	}
	cr_assert_eq(ends[0].w.tx_count, COUR_WIRE_TX_BATCH);
	lens[id] = size;
	queue_pack(&ends[0], &ends[1], id, size, 0);
	cr_expect_eq(ends[0].w.stats.gso_sends, 1, "a run of 48 left");
	cr_expect_eq(ends[0].w.tx_count, COUR_WIRE_TX_BATCH - 48 + 1,
		     "the run that can grow (packs among it) stayed queued");
	cr_assert_eq(ends[0].w.ops->flush(&ends[0].w), 0);
	cr_expect_eq(ends[0].w.stats.packs, 2);
	cr_expect_eq(ends[0].w.stats.packed, 4);
	receive(&ends[1], ALL);
	check_seen(&ends[1], 0, lens, ALL);
	cr_expect_eq(ends[1].w.stats.packs_rcvd, 2);
	if (ends[1].w.mac) {
		struct cour_mac_counts c;

		cour_mac_counts(ends[1].w.mac, &c);
		cr_expect_eq(c.forged, 0);
		cr_expect_eq(c.replayed, 0);
	}
}

Test(udp_pack, a_full_queue_keeps_packs_it_cannot_send_yet)
{
	kept_packs();
}

Test(udp_pack, keyed_a_full_queue_keeps_packs_and_signs_them_when_they_leave)
{
	wire_key = "test_udp_pack's job key";
	kept_packs();
}

Test(udp_pack, keyed_packs_arrive_and_another_keys_pack_reaches_nothing)
{
	size_t lens[8];
	struct cour_mac_counts c;
	uint64_t end;

	wire_key = "test_udp_pack's job key";
	open_end(&ends[0], true, false);
	open_end(&ends[1], false, true);
	wire_key = "another job's key";
	open_end(&ends[2], true, false);
	for (uint32_t i = 0; i < 8; i++) {
		lens[i] = 200;
		queue_pack(&ends[0], &ends[1], i, 200, 1472);
	}
	cr_assert_eq(ends[0].w.ops->flush(&ends[0].w), 0);
	cr_expect_eq(ends[0].w.stats.packs, 1);
	receive(&ends[1], 8);
	check_seen(&ends[1], 0, lens, 8);
	for (uint32_t i = 0; i < 7; i++)                /* (seven fit one pack) */
		queue_pack(&ends[2], &ends[1], 100 + i, 200, 1472);
	cr_assert_eq(ends[2].w.ops->flush(&ends[2].w), 0);
	cr_expect_eq(ends[2].w.stats.packs, 1);
	end = cour_now_us() + 2000000;
	do {
		cour_mac_counts(ends[1].w.mac, &c);
		if (c.forged)
			break;
		struct pollfd p = { .fd = ends[1].w.fd, .events = POLLIN };

		poll(&p, 1, 50);
		ends[1].w.ops->poll(&ends[1].w);
	} while (cour_now_us() < end);
	cr_expect_eq(c.forged, 1, "the other key's pack refused whole (forged %lu replayed %lu "
		     "rx_pkts %lu)", (unsigned long)c.forged, (unsigned long)c.replayed,
		     (unsigned long)ends[1].w.stats.rx_pkts);
	cr_expect_eq(ends[1].nseen, 8, "none of its packets reached the engine");
	cr_expect_eq(ends[1].w.stats.packs_rcvd, 1);
}

/* ---- packs made by hand: what the receiving wire accepts and what it drops ---- */

static uint8_t raw[4096];

/* Stand-in packet id of len bytes at raw + off. */
static void put_pkt(size_t off, uint32_t id, size_t len)
{
	uint8_t *p = raw + off;

	memset(p, 0, HDR_LEN);
	p[0] = HDR_MARK;
	memcpy(p + ID_OFF, &id, sizeof(id));
	p[FILL_OFF] = pattern(id, 0);
	for (size_t i = HDR_LEN; i < len; i++)
		p[i] = (uint8_t)(p[FILL_OFF] + i);
}

/* A valid pack of n stand-in packets (ids first..) of lens into raw: its length. */
static size_t make_pack(uint32_t first, const size_t *lens, uint16_t n)
{
	size_t off = COUR_WIRE_PACK_HDR;

	memset(raw, 0, sizeof(raw));
	raw[0] = COUR_WIRE_PACK_MARK;
	memcpy(raw + 2, &n, sizeof(n));
	for (uint16_t i = 0; i < n; i++) {
		uint16_t l = (uint16_t)lens[i];

		put_pkt(off, first + i, lens[i]);
		off += pad8(lens[i]);
		memcpy(raw + pack_size(lens, n) - 2 * (size_t)n + 2 * i, &l, sizeof(l));
	}
	return pack_size(lens, n);
}

/* Send len bytes of raw from a to b; poll b until it counted one more bad datagram, or saw
 * want more packets (2 s at most). */
static void deliver_raw(size_t len, size_t want)
{
	uint64_t bad = ends[1].w.stats.rx_bad, end = cour_now_us() + 2000000;
	size_t seen = ends[1].nseen;

	ends[0].w.ops->send_raw(&ends[0].w, &ends[1].w.bound_sa, ends[1].w.bound_len,
				(const char *)raw, len);
	while (ends[1].w.stats.rx_bad == bad && ends[1].nseen < seen + want &&
	       cour_now_us() < end) {
		struct pollfd p = { .fd = ends[1].w.fd, .events = POLLIN };

		poll(&p, 1, 50);
		ends[1].w.ops->poll(&ends[1].w);
	}
}

Test(udp_pack, broken_packs_are_dropped_whole)
{
	static const size_t lens[3] = { 64, 37, 100 };
	size_t len, tbl;
	uint16_t v;
	static const char *const cases[] = {
		"count 0", "count past the datagram", "a length of 0", "a length past the table",
		"a byte left over", "byte 1 neither 0 nor PADDED", "a reserved byte not 0",
		"shorter than its header",
	};

	open_end(&ends[0], false, false);
	open_end(&ends[1], false, false);
	/* the layout as documented, made here by hand, is taken */
	len = make_pack(0, lens, 3);
	deliver_raw(len, 3);
	cr_assert_eq(ends[1].nseen, 3, "a valid hand-made pack: %zu of 3 packets", ends[1].nseen);
	check_seen(&ends[1], 0, lens, 3);
	cr_expect_eq(ends[1].w.stats.packs_rcvd, 1);

	for (size_t k = 0; k < COUR_ARRAY_SIZE(cases); k++) {
		uint64_t bad = ends[1].w.stats.rx_bad;

		len = make_pack(10, lens, 3);
		tbl = len - 6;
		switch (k) {
		case 0: v = 0; memcpy(raw + 2, &v, 2); break;
		case 1: v = 2000; memcpy(raw + 2, &v, 2); break;
		case 2: v = 0; memcpy(raw + tbl + 2, &v, 2); break;
		case 3: v = 1000; memcpy(raw + tbl + 4, &v, 2); break;
		case 4: /* one more byte before the table than the packets take */
			memmove(raw + tbl + 1, raw + tbl, 6);
			raw[tbl] = 0;
			len++;
			break;
		case 5: raw[1] = COUR_WIRE_PACK_PADDED << 1; break;
		case 6: raw[6] = 1; break;
		case 7: len = COUR_WIRE_PACK_HDR + 1; break;
		}
		deliver_raw(len, 1);
		cr_expect_eq(ends[1].w.stats.rx_bad, bad + 1, "%s: not counted", cases[k]);
		cr_expect_eq(ends[1].nseen, 3, "%s: a packet reached the engine", cases[k]);
	}
	cr_expect_eq(ends[1].w.stats.packs_rcvd, 1);

	/* and the wire still takes a good one after them */
	len = make_pack(20, lens, 3);
	deliver_raw(len, 3);
	cr_expect_eq(ends[1].nseen, 6);
	cr_expect_eq(ends[1].seen[3].id, 20);
	cr_expect_eq(ends[1].seen[5].id, 22);
}

/* A padded pack (byte 1 PADDED) may have zeros between its packets and its length table: it
 * is taken, and its packets come up with their own lengths. */
Test(udp_pack, a_padded_pack_is_taken_with_its_packets_own_lengths)
{
	static const size_t lens[2] = { 64, 37 };
	size_t len = make_pack(30, lens, 2), tbl = len - 4, gap = 300;

	open_end(&ends[0], false, false);
	open_end(&ends[1], false, false);
	raw[1] = COUR_WIRE_PACK_PADDED;
	memmove(raw + tbl + gap, raw + tbl, 4);
	memset(raw + tbl, 0, gap);
	deliver_raw(len + gap, 2);
	cr_assert_eq(ends[1].nseen, 2, "%zu of 2 packets", ends[1].nseen);
	check_seen(&ends[1], 30, lens, 2);
	cr_expect_eq(ends[1].w.stats.rx_bad, 0);
	cr_expect_eq(ends[1].w.stats.packs_rcvd, 1);
}

/*
 * A message's last datagram is short, and a GSO run ended there: with a datagram of the run's
 * size for the same address after it that may join (queued with a pack bound), it leaves as
 * a pack padded to that size, and the run goes on. It arrives as the packet it was, its
 * length its own. Not when the zeros would cost more than an eighth of the run, nor before a
 * datagram that may not join (a piece of a message that fills runs of its own, the engine
 * says), nor for datagrams so big that few make a run.
 */
static void padded_run(void)
{
	/* 5 full, a short one (padded), 5 full, a short one (the run's end) */
	static const size_t lens[12] = { 1400, 1400, 1400, 1400, 1400, 900, 1400, 1400, 1400,
					 1400, 1400, 700 };
	/* a short one whose zeros would cost more than an eighth of the run */
	static const size_t costly[3] = { 1400, 200, 1400 };
	/* datagrams of 5000 bytes (13 make a run) */
	static const size_t big[3] = { 5000, 4000, 5000 };

	open_end(&ends[0], true, false);
	open_end(&ends[1], false, true);
	for (uint32_t i = 0; i < 12; i++)
		queue_pack(&ends[0], &ends[1], i, lens[i], 1472);
	cr_assert_eq(ends[0].w.ops->flush(&ends[0].w), 0);
	cr_expect_eq(ends[0].w.stats.pads, 1);
	cr_expect_eq(ends[0].w.stats.gso_sends, 1);
	cr_expect_eq(ends[0].w.stats.gso_segs, 12);
	cr_expect_eq(ends[0].w.stats.tx_pkts, 12);
	receive(&ends[1], 12);
	check_seen(&ends[1], 0, lens, 12);
	cr_expect_eq(ends[1].w.stats.gro_trains, 1);
	cr_expect_eq(ends[1].w.stats.gro_segs, 12);
	cr_expect_eq(ends[1].w.stats.packs_rcvd, 1);
	cr_expect_eq(ends[1].w.stats.rx_pkts, 12);
	cr_expect_eq(ends[1].w.stats.rx_bad, 0);
	if (ends[1].w.mac) {
		struct cour_mac_counts c;

		cour_mac_counts(ends[1].w.mac, &c);
		cr_expect_eq(c.forged, 0);
	}

	/* FI_COURIER_UDP_PACK=0: no packed datagrams, padded ones neither */
	cour_params.udp_pack = 0;
	ends[1].nseen = 0;
	ends[0].w.stats.pads = ends[0].w.stats.gso_sends = 0;
	for (uint32_t i = 0; i < 12; i++)
		queue_pack(&ends[0], &ends[1], 100 + i, lens[i], 1472);
	cr_assert_eq(ends[0].w.ops->flush(&ends[0].w), 0);
	cr_expect_eq(ends[0].w.stats.pads, 0);
	cr_expect_eq(ends[0].w.stats.gso_sends, 2, "6 + 6");
	receive(&ends[1], 12);
	check_seen(&ends[1], 100, lens, 12);
	cour_params.udp_pack = 1;

	/* 3 full, a short one, then full ones the engine does not let join (the pieces of a
	 * message that makes runs of its own): not padded */
	size_t fills[50];

	ends[1].nseen = 0;
	ends[0].w.stats.pads = ends[0].w.stats.gso_sends = 0;
	for (uint32_t i = 0; i < 50; i++) {
		fills[i] = i == 3 ? 900 : 1400;
		queue_pack(&ends[0], &ends[1], 150 + i, fills[i], i < 4 ? 1472 : 0);
	}
	cr_assert_eq(ends[0].w.ops->flush(&ends[0].w), 0);
	cr_expect_eq(ends[0].w.stats.pads, 0);
	cr_expect_eq(ends[0].w.stats.gso_sends, 2, "3 + 900, then 46");
	receive(&ends[1], 50);
	check_seen(&ends[1], 150, fills, 50);

	for (int k = 0; k < 2; k++) {
		const size_t *l = k ? big : costly;

		ends[1].nseen = 0;
		ends[0].w.stats.pads = ends[0].w.stats.gso_sends = 0;
		for (uint32_t i = 0; i < 3; i++)
			queue_pack(&ends[0], &ends[1], 50 + i, l[i], 65000);
		cr_assert_eq(ends[0].w.ops->flush(&ends[0].w), 0);
		cr_expect_eq(ends[0].w.stats.pads, 0, "%zu", l[1]);
		cr_expect_eq(ends[0].w.stats.gso_sends, 1, "%zu + %zu, then %zu alone", l[0],
			     l[1], l[2]);
		receive(&ends[1], 3);
		check_seen(&ends[1], 50, l, 3);
	}
}

Test(udp_pack, a_short_datagram_before_a_full_one_is_padded_into_the_run)
{
	padded_run();
}

Test(udp_pack, keyed_a_padded_datagram_is_signed_as_sent)
{
	wire_key = "test_udp_pack's job key";
	padded_run();
}
