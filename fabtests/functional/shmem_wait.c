/*
 * shmem_wait: what an OpenSHMEM library asks of target events, between one target ("PE 0",
 * `shmem_wait [-p prov] [-k basic|scalable] -N n`) and n initiators (`shmem_wait ... 127.0.0.1`),
 * started by test_shmem_wait.sh with 1 to 7 initiators.
 *
 * The target registers its "symmetric heap" and binds a counter to the region with
 * FI_REMOTE_WRITE (fi_mr_bind), as OpenSHMEM does, and never looks at its memory without
 * first sleeping in fi_cntr_wait on that counter (shmem_wait_until): a write to its memory
 * that does not move the counter leaves it asleep, and the test fails when a bounded wait
 * runs out instead of hanging.
 *
 * 1. wait-until: each initiator, after a short pause (so the target is asleep), moves its own
 *    word with a fetch-add, a swap, a compare-swap, a fetching FI_ATOMIC_WRITE, a plain FI_SUM
 *    and a FI_CSWAP that fails (it compares, so it may write: an event all the same); the
 *    target waits for each value in turn. A fetching FI_ATOMIC_READ must not move the counter.
 * 2. lock: every initiator takes a lock word by compare-swap (0 -> its id), reads a shared
 *    total with FI_ATOMIC_READ, writes total + 1 with a fetching FI_ATOMIC_WRITE, and frees
 *    the lock by compare-swap (its id -> 0), -n times. Mutual exclusion makes the total exact;
 *    the target waits on the counter until it is. Then the counter must equal exactly the
 *    write events the initiators report: every compare-swap attempt (failed ones too), every
 *    fetch-add, swap and write, and no read.
 */
#define _GNU_SOURCE

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ft_rma.h"

#define SW_DEFAULT_N   200
#define SW_WAIT_MS     5000		/* one fi_cntr_wait: an event lost fails the test */
#define SW_LOCK_OFF    0		/* heap words: the lock, the total, one per initiator */
#define SW_TOTAL_OFF   8
#define SW_WORD_OFF(i) (64 + 8 * (uint64_t)(i))
#define SW_HEAP        4096

struct sw {
	struct rma r;
	uint64_t *heap;			/* target: the symmetric heap */
	struct fid_mr *mr;
	struct fid_cntr *heap_cntr;	/* target: bound to mr with FI_REMOTE_WRITE */
	struct rma_region reg;
	uint64_t n;
	int id;				/* initiator: 1.. (from the target) */
};

struct sw_report {
	uint64_t writes;		/* operations that change (or may change) target memory */
	uint64_t reads;			/* fetching FI_ATOMIC_READs */
	uint64_t cas_attempts;
};

static int sw_opt(int opt, const char *arg, void *ctx)
{
	struct sw *s = ctx;
	char *end;

	if (opt != 'N')
		return -1;
	s->r.npeers = (int)strtol(arg, &end, 0);
	return *end || s->r.npeers < 1 || s->r.npeers > RMA_MAX_PEERS;
}

/* ---- initiator ---- */

/* One fetching atomic (fetch or compare form) on word off, waited for; *old gets the value. */
static int sw_fetch(struct sw *s, enum fi_op op, uint64_t off, uint64_t operand,
		    const uint64_t *compare, uint64_t *old)
{
	struct func *f = &s->r.f;
	struct fi_context2 ctx;
	uint64_t res = ~0ULL;

	if (compare)
		FUNC_POST(f, fi_compare_atomic(f->ft.ep, &operand, 1, NULL, compare, NULL, &res,
					       NULL, f->ft.peer, rma_raddr(&s->reg, off),
					       s->reg.key, FI_UINT64, op, &ctx));
	else
		FUNC_POST(f, fi_fetch_atomic(f->ft.ep, &operand, 1, NULL, &res, NULL, f->ft.peer,
					     rma_raddr(&s->reg, off), s->reg.key, FI_UINT64, op,
					     &ctx));
	FUNC_CALL(f, rma_expect_ok(&s->r, true, &ctx, FI_ATOMIC | FI_READ, "fetching atomic"));
	*old = res;
	return 0;
}

static int sw_initiator(struct sw *s)
{
	struct func *f = &s->r.f;
	struct sw_report rep = { 0 };
	uint64_t word, old, cmp, i;
	struct fi_context2 ctx;
	uint64_t one = 1, seen;

	FUNC_CALL(f, rma_recv_region(&s->r, &s->reg));
	FUNC_CALL(f, cour_ft_oob_recv(&f->ft, &s->id, sizeof(s->id)));
	word = SW_WORD_OFF(s->id);

	/* 1. wait-until: the target sleeps on its counter before each step, and says when it
	 * saw it (so a later step cannot wake it for an earlier one) */
	usleep(20000);
	FUNC_CALL(f, sw_fetch(s, FI_SUM, word, 1, NULL, &old));		/* 0 -> 1 */
	FUNC_ASSERT(f, old == 0, "fetch-add saw %llu, want 0", (unsigned long long)old);
	FUNC_CALL(f, cour_ft_oob_recv(&f->ft, &seen, sizeof(seen)));
	usleep(20000);
	FUNC_CALL(f, sw_fetch(s, FI_ATOMIC_WRITE, word, 2, NULL, &old));	/* swap -> 2 */
	FUNC_ASSERT(f, old == 1, "swap saw %llu, want 1", (unsigned long long)old);
	FUNC_CALL(f, cour_ft_oob_recv(&f->ft, &seen, sizeof(seen)));
	usleep(20000);
	cmp = 2;
	FUNC_CALL(f, sw_fetch(s, FI_CSWAP, word, 3, &cmp, &old));		/* 2 -> 3 */
	FUNC_ASSERT(f, old == 2, "compare-swap saw %llu, want 2", (unsigned long long)old);
	FUNC_CALL(f, cour_ft_oob_recv(&f->ft, &seen, sizeof(seen)));
	FUNC_CALL(f, sw_fetch(s, FI_ATOMIC_READ, word, 0, NULL, &old));	/* no event */
	FUNC_ASSERT(f, old == 3, "atomic read saw %llu, want 3", (unsigned long long)old);
	cmp = 99;
	FUNC_CALL(f, sw_fetch(s, FI_CSWAP, word, 7, &cmp, &old));		/* fails: 3 */
	FUNC_ASSERT(f, old == 3, "failed compare-swap saw %llu, want 3", (unsigned long long)old);
	usleep(20000);
	FUNC_POST(f, fi_atomic(f->ft.ep, &one, 1, NULL, f->ft.peer, rma_raddr(&s->reg, word),
			       s->reg.key, FI_UINT64, FI_SUM, &ctx));			/* 3 -> 4 */
	FUNC_CALL(f, rma_expect_ok(&s->r, true, &ctx, FI_ATOMIC | FI_WRITE, "atomic"));
	FUNC_CALL(f, cour_ft_oob_recv(&f->ft, &seen, sizeof(seen)));
	rep.writes += 5;
	rep.reads += 1;
	FUNC_CALL(f, cour_ft_barrier(&f->ft));

	/* 2. a lock built from compare-swap around a read-modify-write of a shared total */
	for (i = 0; i < s->n; i++) {
		uint64_t me = (uint64_t)s->id, zero = 0, total;
		int spins = 0;

		for (;;) {
			FUNC_CALL(f, sw_fetch(s, FI_CSWAP, SW_LOCK_OFF, me, &zero, &old));
			rep.cas_attempts++;
			if (old == 0)
				break;
			FUNC_ASSERT(f, old <= (uint64_t)s->r.npeers + 8 && old != me,
				    "lock word holds %llu", (unsigned long long)old);
			FUNC_ASSERT(f, ++spins < 2000000, "lock never free");
			if ((spins & 15) == 0)
				usleep(50);
		}
		FUNC_CALL(f, sw_fetch(s, FI_ATOMIC_READ, SW_TOTAL_OFF, 0, NULL, &total));
		rep.reads++;
		FUNC_CALL(f, sw_fetch(s, FI_ATOMIC_WRITE, SW_TOTAL_OFF, total + 1, NULL, &old));
		FUNC_ASSERT(f, old == total, "inside the lock the total moved: %llu then %llu",
			    (unsigned long long)total, (unsigned long long)old);
		FUNC_CALL(f, sw_fetch(s, FI_CSWAP, SW_LOCK_OFF, 0, &me, &old));
		FUNC_ASSERT(f, old == me, "unlock: the lock word held %llu, want our %llu",
			    (unsigned long long)old, (unsigned long long)me);
		rep.writes += 2;
	}
	rep.writes += rep.cas_attempts;
	printf("shmem_wait: initiator %d: %llu lock rounds, %llu compare-swap attempts\n", s->id,
	       (unsigned long long)s->n, (unsigned long long)rep.cas_attempts);
	FUNC_CALL(f, cour_ft_oob_send(&f->ft, &rep, sizeof(rep)));
	return cour_ft_barrier(&f->ft);
}

/* ---- target ---- */

/* shmem_wait_until(word >= want): look only after the counter moved. */
static int sw_wait_until(struct sw *s, uint64_t off, uint64_t want, const char *what)
{
	struct func *f = &s->r.f;
	volatile uint64_t *w = (volatile uint64_t *)((char *)s->heap + off);
	int ret;

	while (__atomic_load_n(w, __ATOMIC_ACQUIRE) < want) {
		uint64_t c = fi_cntr_read(s->heap_cntr);

		if (__atomic_load_n(w, __ATOMIC_ACQUIRE) >= want)
			break;
		ret = fi_cntr_wait(s->heap_cntr, c + 1, SW_WAIT_MS);
		FUNC_ASSERT(f, ret == 0, "%s: word at +%llu holds %llu, want %llu or more; fi_cntr_wait "
			    "for event %llu: %d (%s): the change raised no FI_REMOTE_WRITE event",
			    what, (unsigned long long)off, (unsigned long long)*w,
			    (unsigned long long)want, (unsigned long long)(c + 1), ret,
			    fi_strerror(-ret));
	}
	return 0;
}

static int sw_target(struct sw *s)
{
	struct func *f = &s->r.f;
	struct sw_report rep;
	uint64_t writes = 0, reads = 0, v, e;
	int i;

	for (i = 0; i < s->r.npeers; i++) {
		int id = i + 1;

		rma_peer(&s->r, i);
		FUNC_CALL(f, rma_send_region(&s->r, &s->reg));
		FUNC_CALL(f, cour_ft_oob_send(&f->ft, &id, sizeof(id)));
	}
	for (i = 0; i < s->r.npeers; i++) {
		uint64_t w = SW_WORD_OFF(i + 1);

		static const char *const step[] = { "fetch-add", "swap", "compare-swap",
						    "atomic sum" };

		rma_peer(&s->r, i);
		for (uint64_t k = 1; k <= 4; k++) {
			FUNC_CALL(f, sw_wait_until(s, w, k, step[k - 1]));
			FUNC_CALL(f, cour_ft_oob_send(&f->ft, &k, sizeof(k)));
		}
	}
	printf("shmem_wait: target: woken for every fetch-add, swap, compare-swap and sum\n");
	for (i = 0; i < s->r.npeers; i++) {
		rma_peer(&s->r, i);
		FUNC_CALL(f, cour_ft_barrier(&f->ft));
	}
	FUNC_CALL(f, sw_wait_until(s, SW_TOTAL_OFF, s->n * (uint64_t)s->r.npeers, "lock total"));
	for (i = 0; i < s->r.npeers; i++) {
		rma_peer(&s->r, i);
		FUNC_CALL(f, cour_ft_oob_recv(&f->ft, &rep, sizeof(rep)));
		writes += rep.writes;
		reads += rep.reads;
	}
	FUNC_ASSERT(f, s->heap[SW_LOCK_OFF / 8] == 0, "the lock word ends at %llu",
		    (unsigned long long)s->heap[SW_LOCK_OFF / 8]);
	/* every answer was delivered before its initiator reported: the counts are final */
	v = fi_cntr_read(s->heap_cntr);
	e = fi_cntr_readerr(s->heap_cntr);
	FUNC_ASSERT(f, v == writes && e == 0, "region counter (FI_REMOTE_WRITE): %llu events, "
		    "%llu errors; the initiators made %llu writes (and %llu reads, which must not "
		    "count)", (unsigned long long)v, (unsigned long long)e,
		    (unsigned long long)writes, (unsigned long long)reads);
	rma_cntr_get(&s->r, RMA_CNTR_RMT_WRITE, &v, &e);
	if (s->r.cntr[RMA_CNTR_RMT_WRITE])
		FUNC_ASSERT(f, v == writes, "endpoint FI_REMOTE_WRITE counter %llu, want %llu",
			    (unsigned long long)v, (unsigned long long)writes);
	rma_cntr_get(&s->r, RMA_CNTR_RMT_READ, &v, &e);
	if (s->r.cntr[RMA_CNTR_RMT_READ])
		FUNC_ASSERT(f, v == writes - (uint64_t)s->r.npeers + reads,
			    "endpoint FI_REMOTE_READ counter %llu, want %llu (every fetching "
			    "atomic)", (unsigned long long)v,
			    (unsigned long long)(writes - (uint64_t)s->r.npeers + reads));
	printf("shmem_wait: target: total %llu exact under the lock, %llu write events counted "
	       "by the region's counter, %llu reads not\n",
	       (unsigned long long)s->heap[SW_TOTAL_OFF / 8], (unsigned long long)writes,
	       (unsigned long long)reads);
	for (i = 0; i < s->r.npeers; i++) {
		rma_peer(&s->r, i);
		FUNC_CALL(f, cour_ft_barrier(&f->ft));
	}
	rma_peer(&s->r, 0);
	return 0;
}

/* The heap, with a waitable counter bound to it for remote writes (before enabling it). */
static int sw_heap_reg(struct sw *s)
{
	struct func *f = &s->r.f;
	struct fi_cntr_attr attr = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC };

	FUNC_CALL(f, fi_cntr_open(f->ft.domain, &attr, &s->heap_cntr, NULL));
	return rma_mr_reg_cntr(&s->r, s->heap, SW_HEAP, FI_REMOTE_READ | FI_REMOTE_WRITE,
			       s->heap_cntr, FI_REMOTE_WRITE, &s->mr, &s->reg);
}

int main(int argc, char **argv)
{
	static struct sw s;
	struct func *f = &s.r.f;
	size_t count;
	int ret;

	ret = rma_init(&s.r, argc, argv, "shmem_wait", FI_ATOMIC | FI_READ | FI_WRITE |
		       FI_REMOTE_READ | FI_REMOTE_WRITE | FI_RMA_EVENT, NULL, "N:", sw_opt, &s,
		       "  -N <count>  target: initiators to wait for (default 1)\n");
	if (ret)
		goto out;
	printf("shmem_wait (%s): provider %s, key mode %s\n",
	       f->ft.is_server ? "target" : "initiator", f->ft.info->fabric_attr->prov_name,
	       s.r.keymode == RMA_KEYS_BASIC ? "basic" : "scalable");
	fflush(stdout);
	if (fi_fetch_atomicvalid(f->ft.ep, FI_UINT64, FI_SUM, &count) ||
	    fi_compare_atomicvalid(f->ft.ep, FI_UINT64, FI_CSWAP, &count) ||
	    !(f->ft.info->caps & FI_RMA_EVENT)) {
		fprintf(stderr, "shmem_wait: the provider lacks uint64_t atomics or FI_RMA_EVENT\n");
		ret = -FI_EOPNOTSUPP;
		goto out;
	}
	s.n = f->ft.opts.iterations ? (uint64_t)f->ft.opts.iterations : SW_DEFAULT_N;
	ret = posix_memalign((void **)&s.heap, 4096, SW_HEAP) ? -FI_ENOMEM : 0;
	if (ret)
		goto out;
	memset(s.heap, 0, SW_HEAP);
	if (f->ft.is_server) {
		ret = sw_heap_reg(&s);
		if (!ret)
			ret = sw_target(&s);
	} else {
		ret = sw_initiator(&s);
	}
	if (!ret)
		ret = rma_finish(&s.r);
out:
	rma_mr_close(&s.r, &s.mr);
	if (s.heap_cntr)
		fi_close(&s.heap_cntr->fid);
	rma_close(&s.r);
	free(s.heap);
	if (ret || f->failures) {
		fprintf(stderr, "shmem_wait: FAIL (%d)\n", ret);
		return 1;
	}
	printf("shmem_wait: PASS (%s)\n", f->ft.is_server ? "target" : "initiator");
	return 0;
}
