/*
 * Mailboxes (wire/cour_shm_box.[ch]) and their place in the ring file (cour_shm_box_claim,
 * cour_shm_box_open): entries arrive whole and in order across many laps of the box, a full
 * box refuses and has room again once the consumer says so, the producer waits for its
 * consumer to say it polls and stops when it closes, a line of an earlier generation is never
 * read, and what a consumer cannot trust (a length past the box, a pad where none can be, a
 * consumed position nobody wrote) is reported or refused rather than read.
 *
 * The cross-process test forks a producer: it reports through its exit status (never
 * cr_assert), dies with the test (PR_SET_PDEATHSIG) and stops by itself at a deadline.
 */
#include "fi/cour_fi.h"
#include "wire/cour_shm_box.h"
#include "wire/cour_shm_ring.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

TestSuite(shm_box, .timeout = 60);

/* linked without libfabric: cour_prov and a silent fi_log are test_log_silent.c's */

struct mem {
	struct cour_box_ctl ctl;
	uint8_t lines[COUR_BOX_BYTES] __attribute__((aligned(64)));
};

static struct mem *mem_new(void)
{
	struct mem *m = mmap(NULL, sizeof(*m), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
			     -1, 0);

	cr_assert(m != MAP_FAILED);
	return m;
}

/* A producer and a consumer of one box in m, of generation gen. */
static void pair_open(struct mem *m, struct cour_box_tx *tx, struct cour_box_rx *rx, uint16_t idx,
		      uint32_t gen)
{
	cour_box_tx_init(tx, m->lines, &m->ctl, idx, gen);
	cour_box_rx_open(rx, m->lines, &m->ctl, idx, gen);
}

static void fill(uint8_t *p, size_t len, uint32_t seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(seed * 131 + i * 7);
}

static bool same(const uint8_t *p, size_t len, uint32_t seed)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != (uint8_t)(seed * 131 + i * 7))
			return false;
	return true;
}

/* message k: its length, and an entry header that names k everywhere */
static uint32_t len_of(uint32_t k)
{
	static const uint32_t lens[] = { 0, 8, 24, 25, 100, 500, 983, 984, 1, 64 };

	return lens[k % (sizeof(lens) / sizeof(lens[0]))];
}

static int put_k(struct cour_box_tx *tx, uint32_t k)
{
	uint8_t payload[COUR_BOX_PAYLOAD_MAX];
	uint32_t len = len_of(k);
	struct cour_box_ent e = {
		.len = len, .flags = (uint16_t)(k & 0x3fff), .rx_id = (uint16_t)(k * 3),
		.credits = k + 1, .stamp = k * 2, .tag = 0x1000000000ull + k, .data = ~(uint64_t)k,
	};
	/* the payload in two pieces, as a send's iovec may be */
	struct iovec iov[2] = { { payload, len / 2 }, { payload + len / 2, len - len / 2 } };

	fill(payload, len, k);
	return cour_box_put(tx, &e, iov, 2);
}

static bool got_k(const struct cour_box_ent *e, const void *payload, uint32_t k)
{
	return e->len == len_of(k) && e->flags == (k & 0x3fff) && e->rx_id == (uint16_t)(k * 3) &&
	       e->credits == k + 1 && e->stamp == k * 2 && e->tag == 0x1000000000ull + k &&
	       e->data == ~(uint64_t)k && same(payload, e->len, k);
}

Test(shm_box, entries_arrive_whole_and_in_order_across_many_laps)
{
	struct mem *m = mem_new();
	struct cour_box_tx tx;
	struct cour_box_rx rx;
	struct cour_box_ent e;
	uint32_t sent = 0, got = 0;
	bool broken = false;

	cour_box_tx_init(&tx, m->lines, &m->ctl, 3, 7);
	cr_assert(!cour_box_tx_live(&tx), "live before its consumer said it polls");
	cour_box_rx_open(&rx, m->lines, &m->ctl, 3, 7);
	cr_assert(cour_box_tx_live(&tx));
	/* about 40 laps of the box, the consumer a few entries behind */
	while (got < 3000) {
		while (sent < got + 5 && sent < 3000 && put_k(&tx, sent) == 0)
			sent++;
		const void *p = cour_box_peek(&rx, &e, &broken);
		cr_assert(p, "nothing to read at entry %u (sent %u)", got, sent);
		cr_assert(got_k(&e, p, got), "entry %u arrived changed", got);
		cour_box_pop(&rx);
		cour_box_release(&rx);
		got++;
	}
	cr_assert(!broken);
	cr_assert(tx.head > 40 * COUR_BOX_LINES, "only %" PRIu64 " lines written", tx.head);
	cr_assert_null(cour_box_peek(&rx, &e, &broken), "an entry nobody sent");
	cr_assert(!cour_box_pending(&rx));
	munmap(m, sizeof(*m));
}

Test(shm_box, a_full_box_refuses_and_has_room_once_the_consumer_says_so)
{
	struct mem *m = mem_new();
	struct cour_box_tx tx;
	struct cour_box_rx rx;
	struct cour_box_ent e = { .len = 8 };
	uint64_t v = 42;
	struct iovec iov = { &v, 8 };
	bool broken = false;
	uint32_t n = 0;

	pair_open(m, &tx, &rx, 0, 1);
	while (cour_box_put(&tx, &e, &iov, 1) == 0)
		n++;
	cr_assert_eq(n, COUR_BOX_LINES, "%u one-line entries fit a box of %u lines", n,
		     COUR_BOX_LINES);
	cr_assert(cour_box_pending(&rx));
	/* read, but not yet said: still full */
	cr_assert_not_null(cour_box_peek(&rx, &e, &broken));
	cour_box_pop(&rx);
	cr_assert_eq(cour_box_put(&tx, &e, &iov, 1), -FI_EAGAIN);
	cour_box_release(&rx);
	cr_assert_eq(cour_box_put(&tx, &e, &iov, 1), 0);
	cr_assert_eq(cour_box_put(&tx, &e, &iov, 1), -FI_EAGAIN);
	munmap(m, sizeof(*m));
}

Test(shm_box, a_closed_box_stops_its_producer)
{
	struct mem *m = mem_new();
	struct cour_box_tx tx;
	struct cour_box_rx rx;
	struct cour_box_ent e = { .len = 0 };
	uint32_t n = 0;

	pair_open(m, &tx, &rx, 0, 9);
	cr_assert(cour_box_tx_live(&tx));
	cour_box_rx_close(&rx);
	/* the look before each entry (cour_short_send's) */
	cr_assert(!cour_box_tx_live(&tx), "the producer did not see its consumer leave");
	/* and, without it, the look at the consumer when the known room runs out */
	tx.live = true;
	while (cour_box_put(&tx, &e, NULL, 0) == 0 && n < 2 * COUR_BOX_LINES)
		n++;
	cr_assert_eq(n, COUR_BOX_LINES);
	cr_assert(!tx.live, "the producer did not see its consumer leave");
	munmap(m, sizeof(*m));
}

Test(shm_box, a_line_of_an_earlier_generation_is_never_read)
{
	struct mem *m = mem_new();
	struct cour_box_tx tx;
	struct cour_box_rx rx;
	struct cour_box_ent e;
	bool broken = false;

	cour_box_tx_init(&tx, m->lines, &m->ctl, 0, 4);
	for (uint32_t k = 0; k < 20; k++)
		cr_assert_eq(put_k(&tx, k), 0);
	/* claimed again by the producer, for another consumer: the old lines stay */
	pair_open(m, &tx, &rx, 0, 5);
	cr_assert_null(cour_box_peek(&rx, &e, &broken));
	cr_assert(!broken);
	cr_assert(!cour_box_pending(&rx));
	/* and a consumer still polling the old generation sees the new entries as nothing */
	struct cour_box_rx old;

	cour_box_rx_open(&old, m->lines, &m->ctl, 0, 4);
	cour_box_rx_open(&rx, m->lines, &m->ctl, 0, 5);
	cr_assert_eq(put_k(&tx, 100), 0);
	cr_assert_null(cour_box_peek(&old, &e, &broken));
	const void *p = cour_box_peek(&rx, &e, &broken);
	cr_assert(p && got_k(&e, p, 100));
	munmap(m, sizeof(*m));
}

Test(shm_box, an_entry_that_cannot_be_is_reported_and_not_read)
{
	struct mem *m = mem_new();
	struct cour_box_tx tx;
	struct cour_box_rx rx;
	struct cour_box_ent e;
	struct cour_box_ent *first = (struct cour_box_ent *)m->lines;
	bool broken = false;

	pair_open(m, &tx, &rx, 0, 2);
	cr_assert_eq(put_k(&tx, 1), 0);
	first->len = 5000;                            /* longer than an entry may be */
	cr_assert_null(cour_box_peek(&rx, &e, &broken));
	cr_assert(broken);
	broken = false;
	first->len = 8;
	first->flags = COUR_BOX_PAD;                  /* a pad at the first line */
	cr_assert_null(cour_box_peek(&rx, &e, &broken));
	cr_assert(broken);
	/* an entry whose lines would run past the end of the box */
	broken = false;
	struct cour_box_ent *last = (struct cour_box_ent *)
		(m->lines + (COUR_BOX_LINES - 1) * COUR_BOX_LINE);
	rx.pos = COUR_BOX_LINES - 1;
	last->len = 100;
	last->flags = 0;
	__atomic_store_n(&last->word, cour_box_word(2, rx.pos), __ATOMIC_RELEASE);
	cr_assert_null(cour_box_peek(&rx, &e, &broken));
	cr_assert(broken);
	munmap(m, sizeof(*m));
}

Test(shm_box, a_consumed_position_nobody_wrote_leaves_no_room)
{
	struct mem *m = mem_new();
	struct cour_box_tx tx;
	struct cour_box_rx rx;
	struct cour_box_ent e = { .len = 0 };
	uint32_t n = 0;

	pair_open(m, &tx, &rx, 0, 6);
	while (cour_box_put(&tx, &e, NULL, 0) == 0)
		n++;
	cr_assert_eq(n, COUR_BOX_LINES);
	/* ahead of what was written */
	m->ctl.consumed = (uint64_t)6 << COUR_BOX_POS_BITS | (tx.head + 10);
	cr_assert_eq(cour_box_put(&tx, &e, NULL, 0), -FI_EAGAIN);
	/* another generation's */
	m->ctl.consumed = (uint64_t)5 << COUR_BOX_POS_BITS | tx.head;
	cr_assert_eq(cour_box_put(&tx, &e, NULL, 0), -FI_EAGAIN);
	/* the true one */
	m->ctl.consumed = (uint64_t)6 << COUR_BOX_POS_BITS | tx.head;
	cr_assert_eq(cour_box_put(&tx, &e, NULL, 0), 0);
	munmap(m, sizeof(*m));
}

/* The close entry: read after every entry put before it, and nothing goes in after it. The
 * producer learns the consumer stopped reading (so the lines may be claimed again) from the
 * control line alone. */
Test(shm_box, a_close_entry_comes_last_and_the_producer_sees_the_box_unread)
{
	struct mem *m = mem_new();
	struct cour_box_tx tx;
	struct cour_box_rx rx;
	struct cour_box_ent e;
	const void *p;
	bool broken = false;

	pair_open(m, &tx, &rx, 2, 9);
	cr_assert_eq(put_k(&tx, 1), 0);
	cr_assert_eq(put_k(&tx, 2), 0);
	cr_assert_not(cour_box_tx_unread(&tx));
	cr_assert_eq(cour_box_close_put(&tx, 41), 0);
	cr_assert(tx.closing);
	cr_assert_not(cour_box_tx_live(&tx), "a closing box still takes entries");
	cr_assert_eq(cour_box_close_put(&tx, 42), -FI_EAGAIN, "closed twice");
	for (uint32_t k = 1; k <= 2; k++) {
		p = cour_box_peek(&rx, &e, &broken);
		cr_assert(p && got_k(&e, p, k), "entry %u before the close", k);
		cour_box_pop(&rx);
	}
	p = cour_box_peek(&rx, &e, &broken);
	cr_assert_not_null(p);
	cr_assert_eq(e.flags, COUR_BOX_CLOSE);
	cr_assert_eq(e.len, 0);
	cr_assert_eq(e.stamp, 41);
	cour_box_pop(&rx);
	cr_assert_not(cour_box_tx_unread(&tx), "unread while the consumer still polls");
	cour_box_rx_close(&rx);
	cr_assert(cour_box_tx_unread(&tx));
	cr_assert(!broken);
	/* a box its consumer closed first takes no close entry: nobody would read it */
	pair_open(m, &tx, &rx, 2, 10);
	cour_box_rx_close(&rx);
	cr_assert_eq(cour_box_close_put(&tx, 1), -FI_EAGAIN);
	cr_assert_not(tx.closing);
	munmap(m, sizeof(*m));
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

Test(shm_box, another_process_s_entries_arrive_in_order)
{
	struct mem *m = mem_new();
	struct cour_box_tx tx;
	struct cour_box_rx rx;
	struct cour_box_ent e;
	const uint32_t total = 200000;
	uint64_t deadline = now_ms() + 20000;
	bool broken = false;
	uint32_t got = 0;
	int status;
	pid_t pid;

	pair_open(m, &tx, &rx, 1, 11);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		for (uint32_t k = 0; k < total; ) {
			if (now_ms() > deadline)
				_exit(2);
			if (put_k(&tx, k) == 0)
				k++;
		}
		_exit(0);
	}
	while (got < total && now_ms() < deadline) {
		const void *p = cour_box_peek(&rx, &e, &broken);

		if (!p) {
			cr_assert(!broken, "box broken at entry %u", got);
			continue;
		}
		cr_assert(got_k(&e, p, got), "entry %u arrived changed", got);
		cour_box_pop(&rx);
		if (got++ % 8 == 0)
			cour_box_release(&rx);   /* the consumer says where it is now and then */
		else if (got == total)
			cour_box_release(&rx);
	}
	cour_box_release(&rx);
	cr_assert_eq(got, total, "only %u of %u entries in time", got, total);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "producer status %d", status);
	munmap(m, sizeof(*m));
}

/* The boxes of a ring file: claimed with fresh generations, opened from a peer's mapping,
 * refused when they cannot be. */
Test(shm_box, a_ring_file_gives_each_claim_its_box_and_generation)
{
	struct cour_shm_ring *own, *peer;
	struct cour_shm_locator loc;
	struct cour_box_tx tx[COUR_BOX_COUNT + 1];
	struct cour_box_rx rx;
	struct cour_box_ent e;
	bool broken = false;
	uint32_t seen = 0;

	cr_assert_eq(cour_shm_ring_create(16, 1024, &own, &loc), 0);
	cr_assert_eq(cour_shm_ring_attach(&loc, &peer), 0);
	memset(tx, 0, sizeof(tx));
	for (uint32_t i = 0; i < COUR_BOX_COUNT; i++) {
		cr_assert_eq(cour_shm_box_claim(own, &tx[i]), 0);
		cr_assert(tx[i].gen != 0);
		cr_assert(!(seen & 1u << tx[i].idx), "box %u claimed twice", tx[i].idx);
		seen |= 1u << tx[i].idx;
	}
	cr_assert_eq(cour_shm_box_claim(own, &tx[COUR_BOX_COUNT]), -FI_EAGAIN);
	uint32_t idx = tx[5].idx, gen = tx[5].gen;

	cour_shm_box_free(own, &tx[5]);
	cr_assert_eq(tx[5].gen, 0);
	cr_assert_eq(cour_shm_box_claim(own, &tx[5]), 0);
	cr_assert_eq(tx[5].idx, idx);
	cr_assert_neq(tx[5].gen, gen, "a box claimed again kept its generation");
	/* the peer polls it through its own mapping of the file */
	cr_assert_eq(cour_shm_box_open(peer, 32, tx[5].gen, &rx), -FI_EINVAL);
	cr_assert_eq(cour_shm_box_open(peer, idx, 0, &rx), -FI_EINVAL);
	cr_assert_eq(cour_shm_box_open(own, idx, tx[5].gen, &rx), -FI_EINVAL);
	cr_assert_eq(cour_shm_box_open(peer, idx, tx[5].gen, &rx), 0);
	cr_assert(cour_box_tx_live(&tx[5]));
	cr_assert_eq(put_k(&tx[5], 77), 0);
	const void *p = cour_box_peek(&rx, &e, &broken);
	cr_assert(p && got_k(&e, p, 77));
	/* freed while the peer polls: the peer's next look finds nothing of it, and the lines'
	 * pages left the file (they read as zeroes) */
	cour_shm_box_free(own, &tx[5]);
	for (uint32_t i = 0; i < COUR_BOX_BYTES; i++)
		cr_assert_eq(rx.lines[i], 0, "byte %u of a freed box is still in the file", i);
	cr_assert_eq(cour_shm_box_claim(own, &tx[5]), 0);
	cr_assert_eq(put_k(&tx[5], 78), 0);
	cour_box_pop(&rx);
	cr_assert_null(cour_box_peek(&rx, &e, &broken));
	cr_assert(!broken);
	cour_shm_ring_close(peer);
	cour_shm_ring_close(own);
}
