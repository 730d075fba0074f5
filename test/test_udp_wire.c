/*
 * The UDP wire alone, with a recording stand-in for the engine (the wire knows nothing else of
 * it): two or three sockets on 127.0.0.1. What a flush hands the kernel (runs of datagrams to
 * one address as UDP GSO calls, bounded in segments and bytes, split by destination and size),
 * what poll hands up (a GRO train split back into datagrams, lent rather than given), and
 * that every byte and the order arrive as queued with GSO and GRO on, either off, or both.
 * Loopback carries a GSO run as one buffer to a socket with UDP_GRO on, so the train is real.
 */
#include "udp_end.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <errno.h>
#include <unistd.h>
#include <criterion/criterion.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/epoll.h>

TestSuite(udp_wire, .init = udp_end_setup, .fini = udp_end_teardown, .timeout = 30);

static void train_of_eleven(bool gso, bool gro)
{
	size_t lens[11];

	open_end(&ends[0], gso, false);
	open_end(&ends[1], false, gro);
	for (uint32_t i = 0; i < 11; i++) {
		lens[i] = i < 10 ? 1000 : 500;        /* the last of a run may be shorter */
		queue(&ends[0], &ends[1], i, lens[i]);
	}
	cr_assert_eq(ends[0].w.ops->flush(&ends[0].w), 0);
	cr_expect_eq(ends[0].w.stats.gso_sends, gso ? 1 : 0);
	cr_expect_eq(ends[0].w.stats.gso_segs, gso ? 11 : 0);
	cr_expect_eq(ends[0].w.stats.tx_pkts, 11);
	receive(&ends[1], 11);
	check_seen(&ends[1], 0, lens, 11);
	cr_expect_eq(ends[1].w.stats.rx_pkts, 11);
	if (gso && gro) {
		/* one buffer from the kernel, lent datagram by datagram */
		cr_expect_eq(ends[1].w.stats.gro_trains, 1);
		cr_expect_eq(ends[1].w.stats.gro_segs, 11);
		for (int i = 0; i < 11; i++)
			cr_expect(ends[1].seen[i].borrowed, "datagram %d of a train not lent", i);
	} else {
		cr_expect_eq(ends[1].w.stats.gro_trains, 0);
		for (int i = 0; i < 11; i++)
			cr_expect(!ends[1].seen[i].borrowed, "datagram %d lent, not given", i);
	}
}

Test(udp_wire, a_run_leaves_as_one_gso_call_and_arrives_as_one_gro_train)
{
	train_of_eleven(true, true);
}

Test(udp_wire, a_run_reaches_a_receiver_without_gro_as_datagrams)
{
	train_of_eleven(true, false);
}

Test(udp_wire, without_gso_the_same_datagrams_go_one_by_one)
{
	train_of_eleven(false, true);
}

Test(udp_wire, with_neither_the_same_datagrams_arrive)
{
	train_of_eleven(false, false);
}

/* After a read that found the socket empty the next reads one datagram (a request's answer
 * comes alone, and a batch read would look for a second); a read that found data is
 * followed by a batch. Every byte arrives either way. */
Test(udp_wire, after_an_empty_read_one_datagram_then_a_batch)
{
	size_t lens[11];

	open_end(&ends[0], false, false);
	open_end(&ends[1], false, false);
	cr_assert_eq(ends[1].w.ops->poll(&ends[1].w), 0);
	for (uint32_t i = 0; i < 5; i++) {
		lens[i] = 100 + 100 * i;
		queue(&ends[0], &ends[1], i, lens[i]);
	}
	cr_assert_eq(ends[0].w.ops->flush(&ends[0].w), 0);
	wait_readable(&ends[1]);
	usleep(10000);          /* (all five in the socket: loopback delivers at once) */
	cr_assert_eq(ends[1].w.ops->poll(&ends[1].w), 1, "a read after an empty one: one");
	cr_assert_eq(ends[1].nseen, 1);
	cr_assert_eq(ends[1].w.ops->poll(&ends[1].w), 4, "a read after a full one: a batch");
	check_seen(&ends[1], 0, lens, 5);
	cr_expect_eq(ends[1].w.stats.rx_pkts, 5);
}

/* A GSO run arriving as one GRO train after an empty read: the single read takes it whole. */
Test(udp_wire, after_an_empty_read_a_gro_train_comes_whole)
{
	size_t lens[11];

	open_end(&ends[0], true, false);
	open_end(&ends[1], false, true);
	cr_assert_eq(ends[1].w.ops->poll(&ends[1].w), 0);
	for (uint32_t i = 0; i < 11; i++) {
		lens[i] = i < 10 ? 1000 : 500;
		queue(&ends[0], &ends[1], i, lens[i]);
	}
	cr_assert_eq(ends[0].w.ops->flush(&ends[0].w), 0);
	wait_readable(&ends[1]);
	cr_assert_eq(ends[1].w.ops->poll(&ends[1].w), 1);
	cr_assert_eq(ends[1].nseen, 11, "the train's datagrams: %zu of 11", ends[1].nseen);
	check_seen(&ends[1], 0, lens, 11);
	cr_expect_eq(ends[1].w.stats.gro_trains, 1);
}

Test(udp_wire, runs_split_by_destination_and_by_size)
{
	/* B B C C B, then three to B of 800 800 900: a larger one cannot join a run */
	static const size_t lens_b[] = { 700, 700, 700, 800, 800, 900 };
	static const size_t lens_c[] = { 700, 700 };

	open_end(&ends[0], true, false);
	open_end(&ends[1], false, true);
	open_end(&ends[2], false, true);
	queue(&ends[0], &ends[1], 0, 700);
	queue(&ends[0], &ends[1], 1, 700);
	queue(&ends[0], &ends[2], 0, 700);
	queue(&ends[0], &ends[2], 1, 700);
	queue(&ends[0], &ends[1], 2, 700);
	queue(&ends[0], &ends[1], 3, 800);
	queue(&ends[0], &ends[1], 4, 800);
	queue(&ends[0], &ends[1], 5, 900);
	ends[0].w.ops->flush(&ends[0].w);
	/* runs: B(0,1) C(0,1) B(2) B(3,4) B(5): three GSO calls of two */
	cr_expect_eq(ends[0].w.stats.gso_sends, 3);
	cr_expect_eq(ends[0].w.stats.gso_segs, 6);
	receive(&ends[1], 6);
	receive(&ends[2], 2);
	check_seen(&ends[1], 0, lens_b, 6);
	check_seen(&ends[2], 0, lens_c, 2);
}

Test(udp_wire, runs_stop_at_gso_segs_and_at_64_kb)
{
	size_t lens[60];

	cour_params.gso_segs = 4;
	open_end(&ends[0], true, false);
	open_end(&ends[1], false, true);
	for (uint32_t i = 0; i < 10; i++) {
		lens[i] = 600;
		queue(&ends[0], &ends[1], i, lens[i]);
	}
	ends[0].w.ops->flush(&ends[0].w);
	cr_expect_eq(ends[0].w.stats.gso_sends, 3, "4 + 4 + 2");
	cr_expect_eq(ends[0].w.stats.gso_segs, 10);
	receive(&ends[1], 10);
	check_seen(&ends[1], 0, lens, 10);

	/* 60 of 1400 bytes: 46 fit 64 KB (COUR_WIRE_GSO_BYTES), 14 follow */
	cour_params.gso_segs = 64;
	ends[0].w.stats.gso_sends = ends[0].w.stats.gso_segs = 0;
	ends[1].nseen = 0;
	for (uint32_t i = 0; i < 60; i++) {
		lens[i] = 1400;
		queue(&ends[0], &ends[1], 100 + i, lens[i]);
	}
	ends[0].w.ops->flush(&ends[0].w);
	cr_expect_eq(ends[0].w.stats.gso_sends, 2);
	cr_expect_eq(ends[0].w.stats.gso_segs, 60);
	receive(&ends[1], 60);
	check_seen(&ends[1], 100, lens, 60);
}

Test(udp_wire, a_full_batch_is_flushed_before_the_next_datagram)
{
	size_t lens[COUR_WIRE_TX_BATCH + 5];

	open_end(&ends[0], true, false);
	open_end(&ends[1], false, false);
	for (uint32_t i = 0; i < COUR_WIRE_TX_BATCH + 5; i++) {
		lens[i] = 100 + (i % 3);   /* sizes that never make a run past one */
		queue(&ends[0], &ends[1], i, lens[i]);
	}
	cr_expect_eq(ends[0].w.tx_count, 5, "the first %d went when the batch filled",
		     COUR_WIRE_TX_BATCH);
	ends[0].w.ops->flush(&ends[0].w);
	receive(&ends[1], COUR_WIRE_TX_BATCH + 5);
	check_seen(&ends[1], 0, lens, COUR_WIRE_TX_BATCH + 5);
}

/* A stream of full-size datagrams that fills the queue leaves in whole runs: the run cut
 * by the queue's end waits for the datagrams that continue it instead of leaving short. */
Test(udp_wire, a_full_queue_keeps_the_run_that_can_still_grow)
{
	enum { MORE = 28, ALL = COUR_WIRE_TX_BATCH + MORE };
	size_t lens[ALL];
	uint32_t per_run = COUR_WIRE_GSO_BYTES / 1400;      /* 46 */

	open_end(&ends[0], true, false);
	open_end(&ends[1], false, true);
	for (uint32_t i = 0; i < ALL; i++) {
		lens[i] = 1400;
		queue(&ends[0], &ends[1], i, lens[i]);
		if (i == COUR_WIRE_TX_BATCH) {
			cr_expect_eq(ends[0].w.stats.gso_sends, 1, "one whole run left");
			cr_expect_eq(ends[0].w.tx_count, COUR_WIRE_TX_BATCH - per_run + 1,
				     "the cut run stayed queued");
		}
	}
	ends[0].w.ops->flush(&ends[0].w);
	cr_expect_eq(ends[0].w.stats.gso_sends, (ALL + per_run - 1) / per_run);
	cr_expect_eq(ends[0].w.stats.gso_segs, ALL);
	receive(&ends[1], ALL);
	check_seen(&ends[1], 0, lens, ALL);
}

Test(udp_wire, a_train_of_odd_sized_datagrams_reaches_the_engine_aligned)
{
	size_t lens[6] = { 101, 101, 101, 101, 101, 60 };

	open_end(&ends[0], true, false);
	open_end(&ends[1], false, true);
	for (uint32_t i = 0; i < 6; i++)
		queue(&ends[0], &ends[1], i, lens[i]);
	ends[0].w.ops->flush(&ends[0].w);
	cr_expect_eq(ends[0].w.stats.gso_sends, 1);
	receive(&ends[1], 6);
	check_seen(&ends[1], 0, lens, 6);
	cr_expect_eq(ends[1].w.stats.gro_trains, 1);
	cr_expect_eq(ends[1].pool.in_use, COUR_WIRE_RX_BATCH, "the aligning buffer went back");
}

/* ---- reading data into place (rx_direct) ---- */

static uint8_t place_buf[64 * 12288];

/* e waits for the stream of ids base.. (cap of them, plen payload bytes each) */
static void start_placing(struct end *e, uint32_t base, uint32_t cap, size_t plen)
{
	cr_assert_leq(cap * plen, sizeof(place_buf));
	memset(place_buf, 0, sizeof(place_buf));
	e->placing = true;
	e->place = place_buf;
	e->base = e->next = base;
	e->cap = cap;
	e->plen = plen;
	e->clobber = UINT32_MAX;
	e->alone = false;
	e->w.rx_direct = e->w.rx_direct_more = true;  /* as the engine says when big data comes */
}

/* the place holds the payloads of ids base..base + n - 1, end to end */
static void check_place(const struct end *e, uint32_t n)
{
	for (uint32_t k = 0; k < n; k++)
		for (size_t i = 0; i < e->plen; i++)
			cr_assert_eq(e->place[k * e->plen + i], pattern(e->base + k, i + HDR_LEN),
				     "piece %u byte %zu", e->base + k, i);
}

static void gro_train_into_place(void)
{
	size_t lens[40];

	open_end(&ends[0], true, false);
	open_end(&ends[1], false, true);
	start_placing(&ends[1], 0, 40, 1400 - HDR_LEN);
	for (uint32_t i = 0; i < 40; i++) {
		lens[i] = 1400;
		queue(&ends[0], &ends[1], i, lens[i]);
	}
	ends[0].w.ops->flush(&ends[0].w);
	cr_expect_eq(ends[0].w.stats.gso_sends, 1);
	receive(&ends[1], 40);
	check_seen(&ends[1], 0, lens, 40);
	cr_expect_eq(ends[1].w.stats.gro_trains, 1);
	cr_expect_eq(ends[1].w.stats.rx_pkts, 40);
	for (int i = 0; i < 40; i++) {
		cr_expect(ends[1].seen[i].placed, "datagram %d copied, not placed", i);
		cr_expect(ends[1].seen[i].checked, "piece %d of a train: header not vouched for", i);
		cr_expect(ends[1].seen[i].borrowed, "datagram %d of a train not lent", i);
	}
	check_place(&ends[1], 40);
	cr_expect_eq(ends[1].pool.in_use, COUR_WIRE_RX_BATCH);
}

Test(udp_wire, a_gro_train_of_data_is_read_into_place)
{
	gro_train_into_place();
}

/* A GSO run may end with a shorter datagram, and that may be a pack (wire/cour_wire.h): read
 * into place with the data before it, it is no piece of that data, so it is copied out and
 * unpacked, its packets handed up intact, and the pieces stay placed. */
/* A train that comes after an empty read, as a ping-pong's message does, is read whole in one
 * batch call (a peek and a read into place cost more than copying it on from cache), unless
 * the engine says its message goes on past it: then the next trains will queue up behind. */
static void lone_train(bool more)
{
	size_t lens[40];
	struct end *rx = &ends[1];

	open_end(&ends[0], true, false);
	open_end(rx, false, true);
	start_placing(rx, 0, 40, 1400 - HDR_LEN);
	cr_assert_eq(rx->w.ops->poll(&rx->w), 0, "the socket is empty");
	for (uint32_t t = 0; t < 2; t++) {
		rx->alone = !more;
		rx->w.rx_direct_more = more;
		for (uint32_t i = t * 20; i < (t + 1) * 20; i++) {
			lens[i] = 1400;
			queue(&ends[0], rx, i, lens[i]);
		}
		ends[0].w.ops->flush(&ends[0].w);
		receive(rx, (t + 1) * 20);
		for (uint32_t i = t * 20; i < (t + 1) * 20; i++)
			cr_expect_eq(rx->seen[i].placed, more, "datagram %u placed: %d", i,
				     rx->seen[i].placed);
		cr_assert_eq(rx->w.ops->poll(&rx->w), 0, "the socket is empty again");
		cr_expect(rx->w.rx_direct, "the engine's hint stays");
	}
	check_seen(rx, 0, lens, 40);
	cr_expect_eq(rx->w.stats.gro_trains, 2);
	check_place(rx, 40);
}

Test(udp_wire, a_lone_train_after_an_empty_read_is_read_whole)
{
	lone_train(false);
}

Test(udp_wire, a_lone_train_whose_message_goes_on_is_read_into_place)
{
	lone_train(true);
}

Test(udp_wire, a_pack_ending_a_train_read_into_place_is_unpacked)
{
	size_t lens[13];

	open_end(&ends[0], true, false);
	open_end(&ends[1], false, true);
	start_placing(&ends[1], 0, 20, 1400 - HDR_LEN);
	for (uint32_t i = 0; i < 10; i++) {
		lens[i] = 1400;
		queue(&ends[0], &ends[1], i, 1400);
	}
	for (uint32_t i = 0; i < 3; i++) {
		lens[10 + i] = 100;
		queue_pack(&ends[0], &ends[1], 100 + i, 100, 1472);
	}
	ends[0].w.ops->flush(&ends[0].w);
	cr_expect_eq(ends[0].w.stats.gso_sends, 1, "ten pieces and the pack in one run");
	cr_expect_eq(ends[0].w.stats.gso_segs, 11);
	cr_expect_eq(ends[0].w.stats.packs, 1);
	receive(&ends[1], 13);
	for (int i = 0; i < 13; i++) {
		const struct seen *x = &ends[1].seen[i];

		cr_expect_eq(x->id, i < 10 ? (uint32_t)i : 90u + (uint32_t)i, "packet %d", i);
		cr_expect_eq(x->len, lens[i]);
		cr_expect(x->intact, "packet %u corrupted", x->id);
		cr_expect_eq(x->placed, i < 10, "packet %u placed %d", x->id, x->placed);
	}
	check_place(&ends[1], 10);
	cr_expect_eq(ends[1].w.stats.gro_trains, 1);
	cr_expect_eq(ends[1].w.stats.packs_rcvd, 1);
	cr_expect_eq(ends[1].w.stats.rx_bad, 0);
}

/* Pieces 0-4, a stranger (200) where 5 belongs, then 6-9. With held, the engine, once 4 is
 * in, fills 5's place from a packet it held, over the stranger's bytes: the stranger comes up
 * intact all the same (copied out before anything was handled), and 6-9 stay placed. Without,
 * 6-9 were read into their places but are no longer the next pieces (5 is): they come up as
 * copies, intact. */
static void stranger_in_a_train(bool held)
{
	static const uint32_t ids[10] = { 0, 1, 2, 3, 4, 200, 6, 7, 8, 9 };

	open_end(&ends[0], true, false);
	open_end(&ends[1], false, true);
	start_placing(&ends[1], 0, 40, 1400 - HDR_LEN);
	if (held)
		ends[1].clobber = 4;
	for (uint32_t i = 0; i < 10; i++)
		queue(&ends[0], &ends[1], ids[i], 1400);
	ends[0].w.ops->flush(&ends[0].w);
	receive(&ends[1], 10);
	cr_expect_eq(ends[1].w.stats.gro_trains, 1);
	for (int i = 0; i < 10; i++) {
		const struct seen *x = &ends[1].seen[i];

		cr_expect_eq(x->id, ids[i], "datagram %d: id %u", i, x->id);
		cr_expect_eq(x->len, 1400);
		cr_expect(x->intact, "datagram %u corrupted", x->id);
		cr_expect_eq(x->placed, i < 5 || (held && i > 5), "datagram %u: placed %d", x->id,
			     x->placed);
		cr_expect(x->borrowed);
	}
	cr_expect_eq(ends[1].next, held ? 10 : 5);
	check_place(&ends[1], held ? 10 : 5);
}

Test(udp_wire, a_stranger_in_a_train_is_copied_out_before_its_place_is_filled)
{
	stranger_in_a_train(true);
}

Test(udp_wire, pieces_after_a_stranger_in_a_train_come_up_as_copies)
{
	stranger_in_a_train(false);
}

static void train_longer_than_the_room(void)
{
	size_t lens[40];

	open_end(&ends[0], true, false);
	open_end(&ends[1], false, true);
	start_placing(&ends[1], 0, 25, 1400 - HDR_LEN);
	for (uint32_t i = 0; i < 40; i++) {
		lens[i] = i < 39 ? 1400 : 700;
		queue(&ends[0], &ends[1], i, lens[i]);
	}
	ends[0].w.ops->flush(&ends[0].w);
	receive(&ends[1], 40);
	check_seen(&ends[1], 0, lens, 40);
	for (int i = 0; i < 40; i++)
		cr_expect_eq(ends[1].seen[i].placed, i < 25, "datagram %d", i);
	check_place(&ends[1], 25);
	cr_expect_eq(ends[1].pool.in_use, COUR_WIRE_RX_BATCH);
}

Test(udp_wire, a_train_longer_than_the_room_hands_the_rest_up_as_usual)
{
	train_longer_than_the_room();
}

Test(udp_wire, big_datagrams_are_read_into_place_and_small_ones_end_it)
{
	size_t lens[5] = { 10016, 10016, 10016, 600, 600 };

	open_end(&ends[0], false, false);
	open_end(&ends[1], false, false);
	start_placing(&ends[1], 0, 3, 10000);
	for (uint32_t i = 0; i < 5; i++)
		queue(&ends[0], &ends[1], i, lens[i]);
	ends[0].w.ops->flush(&ends[0].w);
	receive(&ends[1], 5);
	check_seen(&ends[1], 0, lens, 5);
	for (int i = 0; i < 5; i++) {
		cr_expect_eq(ends[1].seen[i].placed, i < 3, "datagram %d", i);
		/* a lone datagram's read may bring other bytes than its peek: the engine must
		 * check its header again */
		cr_expect(!ends[1].seen[i].checked, "datagram %d: header vouched for", i);
		cr_expect(!ends[1].seen[i].borrowed, "datagram %d lent", i);
	}
	check_place(&ends[1], 3);
}

/* This test's own network namespace, its loopback up with the given MTU; false (and the test
 * skips) where namespaces cannot be made (not root). Criterion runs each test in a process of
 * its own, so the namespace ends with the test. */
static bool private_lo(int mtu)
{
	struct ifreq ifr = { .ifr_name = "lo" };
	int fd;
	bool ok;

	if (unshare(CLONE_NEWNET) != 0)
		return false;
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0)
		return false;
	ifr.ifr_mtu = mtu;
	ok = ioctl(fd, SIOCSIFMTU, &ifr) == 0 && ioctl(fd, SIOCGIFFLAGS, &ifr) == 0;
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	ok = ok && ioctl(fd, SIOCSIFFLAGS, &ifr) == 0;
	close(fd);
	return ok;
}

Test(udp_wire, a_refused_gso_call_turns_gso_off_and_the_run_still_arrives)
{
	size_t lens[3] = { 2000, 2000, 2000 };

	/* a segment larger than the device's MTU: the kernel refuses the GSO call (EINVAL) */
	if (!private_lo(1500))
		cr_skip_test("no network namespace of our own (not root?)");
	open_end(&ends[0], true, false);
	open_end(&ends[1], false, true);
	for (uint32_t i = 0; i < 3; i++)
		queue(&ends[0], &ends[1], i, lens[i]);
	cr_assert_eq(ends[0].w.ops->flush(&ends[0].w), 0);
	cr_expect(!ends[0].w.gso_on, "GSO still on after the kernel refused it");
	receive(&ends[1], 3);            /* sent again one by one (IP fragments them) */
	check_seen(&ends[1], 0, lens, 3);
	cr_expect(!ends[0].w.tx_blocked, "the run was resent, not left to the timer");
}

/* Out of file descriptors is said as such (FI_EMFILE: the application can raise its limit),
 * not as out of memory, and nothing is left open. */
Test(udp_wire, no_descriptor_left_is_emfile_not_enomem)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct cour_addr want;
	struct rlimit rl;
	struct end *e = &ends[0];
	int fd, last = -1;

	inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
	cr_assert_eq(cour_addr_from_sockaddr(&want, &sin, sizeof(sin)), 0);
	memset(e, 0, sizeof(*e));
	cour_pool_init(&e->pool, COUR_WIRE_RXBUF_MIN + 64, COUR_WIRE_RX_BATCH, 64);
	cour_wire_init(&e->w, &cour_udp_wire, &rec_ops, e, &e->pool, COUR_WIRE_RXBUF_MIN + 64);
	/* the limit just above the descriptors in use, then use up the rest */
	fd = dup(0);
	cr_assert_geq(fd, 0);
	close(fd);
	rl.rlim_cur = rl.rlim_max = (rlim_t)fd + 4;
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
	while ((fd = dup(0)) >= 0)
		last = fd;
	cr_assert_eq(errno, EMFILE);
	cr_assert_eq(e->w.ops->open(&e->w, &want), -FI_EMFILE);
	cr_assert_eq(e->w.fd, -1, "no descriptor is kept on failure");
	cr_assert_gt(last, 0);
	e->w.ops = NULL;           /* nothing to close */
	cour_pool_fini(&e->pool);
}

/* ---- with a key: the same trains and places, trailers checked and taken off ---- */

static const char key_a[] = "test_udp_wire's key of job a", key_b[] = "another job's key b";

Test(udp_wire, keyed_a_run_arrives_as_a_train_without_its_trailers)
{
	wire_key = key_a;
	train_of_eleven(true, true);
}

Test(udp_wire, keyed_a_gro_train_of_data_is_read_into_place)
{
	struct cour_mac_counts c;

	wire_key = key_a;
	gro_train_into_place();
	cour_mac_counts(ends[1].w.mac, &c);
	cr_expect_eq(c.forged + c.replayed, 0);
}

Test(udp_wire, keyed_a_stranger_in_a_train_is_copied_out_before_its_place_is_filled)
{
	wire_key = key_a;
	stranger_in_a_train(true);
}

Test(udp_wire, keyed_a_train_longer_than_the_room_hands_the_rest_up_as_usual)
{
	wire_key = key_a;
	train_longer_than_the_room();
}

/* Poll e until its key refused at least forged and replayed datagrams (2 s at most). */
static struct cour_mac_counts refusals(struct end *e, uint64_t forged, uint64_t replayed)
{
	uint64_t end = cour_now_us() + 2000000;
	struct cour_mac_counts c;

	do {
		struct pollfd p = { .fd = e->w.fd, .events = POLLIN };

		poll(&p, 1, 50);
		e->w.ops->poll(&e->w);
		cour_mac_counts(e->w.mac, &c);
	} while ((c.forged < forged || c.replayed < replayed) && cour_now_us() < end);
	return c;
}

/* Another key's stream, in trains, big datagrams, or small: nothing reaches the engine, and
 * every datagram is counted, whether it was read in place or not. */
static void other_key(bool train)
{
	struct cour_mac_counts c;

	wire_key = key_b;
	open_end(&ends[0], train, false);
	wire_key = key_a;
	open_end(&ends[1], false, train);
	start_placing(&ends[1], 0, 20, (train ? 1400 : 10016) - HDR_LEN);
	for (uint32_t i = 0; i < 20; i++)
		queue(&ends[0], &ends[1], i, train ? 1400 : 10016);
	ends[0].w.ops->flush(&ends[0].w);
	c = refusals(&ends[1], 20, 0);
	cr_expect_eq(c.forged, 20, "%" PRIu64 " of 20 refused", c.forged);
	cr_expect_eq(ends[1].nseen, 0, "%zu forged datagrams reached the engine", ends[1].nseen);
	cr_expect_eq(ends[1].next, 0);
}

Test(udp_wire, keyed_another_keys_train_reaches_nothing)
{
	other_key(true);
}

Test(udp_wire, keyed_another_keys_big_datagrams_reach_nothing)
{
	other_key(false);
}

/* A datagram captured (by an end without the key, which sees it whole) and sent again as is:
 * accepted once by the keyed end it was not meant for, refused the second time. */
/* A keyed datagram is taken once, and only on its way from its sender to its receiver: a
 * copy that a third socket captured and sends on from its own address is a forgery (the tag
 * covers both ends, cour_mac.h), and a copy of one sent from the right address a replay. */
Test(udp_wire, keyed_a_captured_datagram_is_accepted_once)
{
	static uint8_t cap[2048], dgram[600 + COUR_MAC_LEN];
	struct cour_mac_counts c;

	wire_key = key_a;
	open_end(&ends[0], false, false);
	open_end(&ends[1], false, false);
	wire_key = NULL;
	open_end(&ends[2], false, false);
	queue(&ends[0], &ends[2], 7, 600);
	ends[0].w.ops->flush(&ends[0].w);
	receive(&ends[2], 1);
	cr_assert_eq(ends[2].seen[0].len, 600 + COUR_MAC_LEN, "the trailer travels");
	/* the sniffer's copy: header, payload, trailer as sent, sent on to another endpoint */
	cr_assert_leq(ends[2].seen[0].len, sizeof(cap));
	memcpy(cap, ends[2].last, ends[2].seen[0].len);
	ends[2].w.ops->send_raw(&ends[2].w, &ends[1].w.bound_sa, ends[1].w.bound_len,
				(const char *)cap, ends[2].seen[0].len);
	c = refusals(&ends[1], 1, 0);
	cr_expect_eq(ends[1].nseen, 0, "a datagram for another endpoint passed");
	cr_expect_eq(c.forged, 1);
	/* a datagram signed from 0 to 1, and its exact copy, both from 0 */
	memcpy(dgram, cap, 600);
	cour_wire_sign_buf(&ends[0].w, &ends[1].w.bound_sa, ends[1].w.bound_len, dgram, 600);
	for (int k = 0; k < 2; k++)
		ends[0].w.ops->send_raw(&ends[0].w, &ends[1].w.bound_sa, ends[1].w.bound_len,
					(const char *)dgram, sizeof(dgram));
	c = refusals(&ends[1], 1, 1);
	cr_expect_eq(ends[1].nseen, 1, "the first copy reaches the engine");
	cr_expect_eq(ends[1].seen[0].len, 600);
	cr_expect(ends[1].seen[0].intact);
	cr_expect_eq(c.replayed, 1);
	cr_expect_eq(c.forged, 1);
}

/*
 * The doorbell (cour_udp.c): with an epoll set given before open, the wire opens a second
 * socket on its port (in the set once armed), and the kernel hands it the datagrams the
 * engine names (rx->bell_at and bell_is: here byte 12 equal to 0x42 and byte 13 with bit
 * 0x10), and nothing else: the socket the application polls never sees them, the set wakes
 * once the doorbell is armed, bell hands them up whole.
 * Datagrams that match half the rule stay on the data socket.
 */
static struct cour_wire_rx_ops bell_ops;

/* ends[0] plain, ends[1] with the rule above and the epoll set epfd (-1: none); fds_left > 0:
 * ends[1] opens with only that many descriptors left to take */
static void open_bell_ends_with(int epfd, int fds_left)
{
	struct rlimit rl, was;
	int fd;

	bell_ops = rec_ops;
	bell_ops.bell_at[0] = 12;
	bell_ops.bell_at[1] = 13;
	bell_ops.bell_is[0] = 0x42;
	bell_ops.bell_is[1] = 0x10;
	open_end(&ends[0], false, false);
	if (fds_left > 0) {
		/* (the lowest free descriptor is the next one taken) */
		fd = dup(0);
		cr_assert_geq(fd, 0);
		close(fd);
		cr_assert_eq(getrlimit(RLIMIT_NOFILE, &was), 0);
		rl = was;
		rl.rlim_cur = (rlim_t)fd + (rlim_t)fds_left;
		cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
	}
	open_end_with(&ends[1], false, false, &bell_ops, epfd);
	if (fds_left > 0)
		cr_assert_eq(setrlimit(RLIMIT_NOFILE, &was), 0);
}

static void open_bell_ends(int epfd)
{
	open_bell_ends_with(epfd, 0);
}

/* Nobody else takes the port: not even a socket of our own with SO_REUSEPORT. */
static void expect_port_exclusive(const struct end *e)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), one = 1;

	cr_assert_geq(s, 0);
	cr_assert_eq(setsockopt(s, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)), 0);
	cr_expect_neq(bind(s, (const struct sockaddr *)&e->w.bound_sa, e->w.bound_len), 0,
		      "another socket joined the wire's port");
	cr_expect_eq(errno, EADDRINUSE);
	close(s);
}

static void queue_marked(struct end *from, struct end *to, uint32_t id, size_t len,
			 uint8_t b12, uint8_t b13)
{
	struct iovec v = { .iov_base = payload[id], .iov_len = len - HDR_LEN };
	uint8_t fill = pattern(id, 0);

	memset(hdrs[id], 0, HDR_LEN);
	hdrs[id][0] = HDR_MARK;
	memcpy(hdrs[id] + ID_OFF, &id, sizeof(id));
	hdrs[id][FILL_OFF] = fill;
	hdrs[id][12] = b12;
	hdrs[id][13] = b13;
	for (size_t i = HDR_LEN; i < len; i++)
		payload[id][i - HDR_LEN] = (uint8_t)(fill + i);
	from->w.ops->queue(&from->w, &to->w.bound_sa, to->w.bound_len, hdrs[id], HDR_LEN, &v, 1,
			   0);
}

Test(udp_wire, the_doorbell_takes_only_the_datagrams_its_rule_names)
{
	struct epoll_event ev;
	struct end *e = &ends[1];
	int epfd = epoll_create1(EPOLL_CLOEXEC);
	size_t lens[3] = { 300, 300, 300 };

	cr_assert_geq(epfd, 0);
	open_bell_ends(epfd);
	cr_assert_geq(e->w.bell_fd, 0, "no doorbell socket (SO_REUSEPORT with a BPF program)");

	queue_marked(&ends[0], e, 0, 300, 0, 0);
	queue_marked(&ends[0], e, 1, 300, 0x42, 0x00);  /* half the rule */
	queue_marked(&ends[0], e, 10, 64, 0x42, 0x30);  /* the rule (more bits set too) */
	queue_marked(&ends[0], e, 2, 300, 0x41, 0x10);  /* the other half */
	cr_assert_eq(ends[0].w.ops->flush(&ends[0].w), 0);
	receive(e, 3);
	check_seen(e, 0, lens, 3);
	cr_expect_eq(e->w.stats.bell_rcvd, 0);

	cr_assert_eq(epoll_wait(epfd, &ev, 1, 0), 0, "a doorbell not armed rang");
	cr_assert_eq(cour_wire_bell_arm(&e->w), 0);
	cr_assert_eq(epoll_wait(epfd, &ev, 1, 1000), 1, "the doorbell did not ring");
	cr_assert_eq(e->w.base->bell(&e->w), 1);
	cr_assert_eq(e->nseen, 4);
	cr_expect_eq(e->seen[3].id, 10);
	cr_expect_eq(e->seen[3].len, 64);
	cr_expect(e->seen[3].intact);
	cr_expect_eq(e->w.stats.bell_rcvd, 1);
	cr_expect_eq(epoll_wait(epfd, &ev, 1, 0), 0, "read, the doorbell is quiet again");
	cr_expect_eq(e->w.ops->poll(&e->w), 0, "the data socket holds nothing more");

	/* the port stays the wire's: a socket without SO_REUSEPORT cannot take it */
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	cr_expect_neq(bind(s, (struct sockaddr *)&e->w.bound_sa, e->w.bound_len), 0);
	cr_expect_eq(errno, EADDRINUSE);
	close(s);
	close(epfd);
}

/* A doorbell that cannot be opened (no descriptor left for it): no doorbell, the port the data
 * socket's alone, and the datagrams the rule names reach the data socket. */
Test(udp_wire, a_doorbell_that_cannot_open_leaves_the_port_as_without_one)
{
	struct end *e = &ends[1];
	size_t lens[1] = { 64 };
	int epfd = epoll_create1(EPOLL_CLOEXEC);

	cr_assert_geq(epfd, 0);
	open_bell_ends_with(epfd, 1);              /* the data socket's descriptor only */
	cr_assert_eq(e->w.bell_fd, -1);
	cr_assert_eq(cour_wire_bell_arm(&e->w), 0, "nothing to arm");
	queue_marked(&ends[0], e, 0, 64, 0x42, 0x10);
	cr_assert_eq(ends[0].w.ops->flush(&ends[0].w), 0);
	receive(e, 1);
	check_seen(e, 0, lens, 1);
	expect_port_exclusive(e);
	close(epfd);
}

/* A doorbell the set cannot watch (here the "set" is a pipe) would keep the probes for nobody:
 * arming it fails and closes it, and what it would have taken reaches the data socket. */
Test(udp_wire, a_doorbell_the_set_cannot_watch_is_closed)
{
	struct end *e = &ends[1];
	size_t lens[2] = { 64, 300 };
	int p[2];

	cr_assert_eq(pipe(p), 0);
	open_bell_ends(p[0]);
	cr_assert_geq(e->w.bell_fd, 0);
	cr_assert_eq(cour_wire_bell_arm(&e->w), -FI_EOTHER);
	cr_assert_eq(e->w.bell_fd, -1, "the doorbell is still open");
	queue_marked(&ends[0], e, 0, 64, 0x42, 0x10);
	queue_marked(&ends[0], e, 1, 300, 0, 0);
	cr_assert_eq(ends[0].w.ops->flush(&ends[0].w), 0);
	receive(e, 2);
	check_seen(e, 0, lens, 2);
	cr_expect_eq(e->w.stats.bell_rcvd, 0);
	expect_port_exclusive(e);
	close(p[0]);
	close(p[1]);
}

/* No epoll set, no doorbell: the same datagram reaches the data socket. */
Test(udp_wire, without_a_set_there_is_no_doorbell)
{
	struct end *e = &ends[1];
	size_t lens[1] = { 64 };

	open_bell_ends(-1);
	cr_assert_eq(e->w.bell_fd, -1);
	queue_marked(&ends[0], e, 0, 64, 0x42, 0x10);
	cr_assert_eq(ends[0].w.ops->flush(&ends[0].w), 0);
	receive(e, 1);
	check_seen(e, 0, lens, 1);
}
