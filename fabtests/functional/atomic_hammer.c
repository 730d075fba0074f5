/*
 * atomic_hammer: one target and -N initiator processes (default 4, started by
 * test_atomic_hammer.sh) on one uint64_t counter in the target's memory.
 * `atomic_hammer [-p prov] [-k basic|scalable] -N 4` is the target, `atomic_hammer [-p prov]
 * [-n count] 127.0.0.1` an initiator.
 *
 * Every initiator does -n (default 1000) FI_SUM of 1, alternately fi_atomic and
 * fi_fetch_atomic, up to 16 outstanding, interleaved with as many FI_CSWAP increments
 * (compare-and-swap from the last value seen until one succeeds, bounded). The target checks
 * that the counter ends at exactly initiators x 2n, that the old values fetched by all
 * initiators (fetching sums and successful swaps) are distinct and below that, and its
 * FI_REMOTE_WRITE/READ counters; each initiator checks that its successful swaps saw
 * increasing values, its own counters, and reads the final value back with FI_ATOMIC_READ.
 */
#define _GNU_SOURCE

#include <stdlib.h>
#include <string.h>

#include "ft_rma.h"

#define HAMMER_WINDOW 16
#define HAMMER_DEFAULT_N 1000

struct ham {
	struct rma r;
	uint64_t *mem;			/* target: the counter; initiator: unused */
	struct fid_mr *mr;
	void *desc;
	struct rma_region reg;
	uint64_t n;
};

static int ham_opt(int opt, const char *arg, void *ctx)
{
	struct ham *a = ctx;
	char *end;

	if (opt != 'N')
		return -1;
	a->r.npeers = (int)strtol(arg, &end, 0);
	return *end || a->r.npeers < 1 || a->r.npeers > RMA_MAX_PEERS;
}

struct hammer_report {
	uint64_t n;			/* FI_SUM and FI_CSWAP increments each */
	uint64_t nfetch;		/* of the sums, fetching ones */
	uint64_t attempts;		/* compare-and-swaps posted */
};

struct hammer {
	struct ham *a;
	struct fi_context2 *ctx;	/* [n] sums, [n] the swap in flight */
	uint64_t *olds;			/* fetched by sums [0, nfetch), swaps after */
	uint64_t n, out;
	bool swap_done;
};

static int hammer_reap(struct hammer *h)
{
	struct func *f = &h->a->r.f;
	struct func_comp c;
	long idx;
	uint64_t want;

	FUNC_CALL(f, func_next(f, true, &c, 20000));
	idx = (struct fi_context2 *)c.e.op_context - h->ctx;
	FUNC_ASSERT(f, !c.is_err, "hammer: error completion %d (%s)", c.err.err,
		    fi_strerror(c.err.err));
	FUNC_ASSERT(f, idx >= 0 && (uint64_t)idx <= h->n, "hammer: op_context %p",
		    c.e.op_context);
	want = FI_ATOMIC | ((uint64_t)idx < h->n && idx % 2 == 0 ? FI_WRITE : FI_READ);
	FUNC_ASSERT(f, (c.e.flags & RMA_CQ_KIND) == want, "hammer: flags 0x%llx, want 0x%llx",
		    (unsigned long long)c.e.flags, (unsigned long long)want);
	if ((uint64_t)idx == h->n)
		h->swap_done = true;
	else
		h->out--;
	return 0;
}

static int hammer_initiator(struct ham *a)
{
	struct func *f = &a->r.f;
	struct fid_ep *ep = f->ft.ep;
	struct hammer h = { .a = a, .n = a->n };
	struct hammer_report rep = { .n = h.n, .nfetch = h.n / 2 };
	uint64_t one = 1, guess = 0, swap[3], last = 0, final, j, nswap = 0;
	uint64_t t0 = cour_ft_now_ns();
	uint64_t limit = 1000 * h.n + 1000;
	struct rma_region *g = &a->reg;

	h.ctx = calloc(h.n + 1, sizeof(*h.ctx));
	h.olds = calloc(rep.nfetch + h.n, sizeof(uint64_t));
	FUNC_ASSERT(f, h.ctx && h.olds, "out of memory");
	FUNC_CALL(f, rma_recv_region(&a->r, g));
	for (j = 0; j < h.n; j++) {
		while (h.out >= HAMMER_WINDOW)
			FUNC_CALL(f, hammer_reap(&h));
		if (j % 2 == 0)
			FUNC_CALL(f, FUNC_POST(f, fi_atomic(ep, &one, 1, a->desc, f->ft.peer, g->addr,
							    g->key, FI_UINT64, FI_SUM,
							    &h.ctx[j])));
		else
			FUNC_CALL(f, FUNC_POST(f, fi_fetch_atomic(ep, &one, 1, a->desc,
								  &h.olds[j / 2], a->desc,
								  f->ft.peer, g->addr, g->key,
								  FI_UINT64, FI_SUM, &h.ctx[j])));
		h.out++;
		/* one increment by compare-and-swap, retried from the value it saw */
		for (;;) {
			FUNC_ASSERT(f, rep.attempts < limit, "hammer: %llu swaps failed",
				    (unsigned long long)rep.attempts);
			swap[0] = guess + 1;
			swap[1] = guess;
			swap[2] = ~0ULL;
			h.swap_done = false;
			FUNC_CALL(f, FUNC_POST(f, fi_compare_atomic(ep, &swap[0], 1, a->desc,
								    &swap[1], a->desc, &swap[2],
								    a->desc, f->ft.peer, g->addr,
								    g->key, FI_UINT64, FI_CSWAP,
								    &h.ctx[h.n])));
			rep.attempts++;
			while (!h.swap_done)
				FUNC_CALL(f, hammer_reap(&h));
			if (swap[2] == guess)
				break;
			guess = swap[2];
		}
		FUNC_ASSERT(f, nswap == 0 || guess > last, "hammer: swap %llu saw %llu after %llu",
			    (unsigned long long)nswap, (unsigned long long)guess,
			    (unsigned long long)last);
		last = guess;
		h.olds[rep.nfetch + nswap++] = guess;
		guess++;
	}
	while (h.out)
		FUNC_CALL(f, hammer_reap(&h));
	FUNC_CALL(f, rma_cntr_wait(&a->r, RMA_CNTR_WRITE, h.n - rep.nfetch, 0, 5000));
	FUNC_CALL(f, rma_cntr_wait(&a->r, RMA_CNTR_READ, rep.nfetch + rep.attempts, 0, 5000));
	printf("hammer: %llu sums and %llu swaps (%llu attempts) in %.2f s\n",
	       (unsigned long long)h.n, (unsigned long long)h.n,
	       (unsigned long long)rep.attempts, (double)(cour_ft_now_ns() - t0) / 1e9);
	FUNC_CALL(f, cour_ft_oob_send(&f->ft, &rep, sizeof(rep)));
	FUNC_CALL(f, cour_ft_oob_send(&f->ft, h.olds, (rep.nfetch + h.n) * sizeof(uint64_t)));
	FUNC_CALL(f, cour_ft_oob_recv(&f->ft, &final, sizeof(final)));
	swap[2] = ~0ULL;
	h.swap_done = false;
	FUNC_CALL(f, FUNC_POST(f, fi_fetch_atomic(ep, &one, 1, a->desc, &swap[2], a->desc,
						  f->ft.peer, g->addr, g->key, FI_UINT64,
						  FI_ATOMIC_READ, &h.ctx[h.n])));
	while (!h.swap_done)
		FUNC_CALL(f, hammer_reap(&h));
	FUNC_ASSERT(f, swap[2] == final, "hammer: FI_ATOMIC_READ gives %llu, the target holds "
		    "%llu", (unsigned long long)swap[2], (unsigned long long)final);
	free(h.ctx);
	free(h.olds);
	return cour_ft_barrier(&f->ft);
}

static int hammer_target(struct ham *a)
{
	struct func *f = &a->r.f;
	struct hammer_report rep[RMA_MAX_PEERS];
	uint64_t *counter = a->mem, total = 0, base = 0, fetching = 0, *olds;
	uint64_t v, e, v2, e2, j, nolds, nall = 0;
	unsigned char *seen;
	int i;

	for (i = 0; i < a->r.npeers; i++) {
		rma_peer(&a->r, i);
		FUNC_CALL(f, rma_send_region(&a->r, &a->reg));
	}
	for (i = 0; i < a->r.npeers; i++) {
		rma_peer(&a->r, i);
		FUNC_CALL(f, cour_ft_oob_recv(&f->ft, &rep[i], sizeof(rep[i])));
		FUNC_ASSERT(f, rep[i].n <= (1ULL << 24) && rep[i].nfetch <= rep[i].n,
			    "initiator %d reports n %llu", i, (unsigned long long)rep[i].n);
		total += 2 * rep[i].n;
	}
	seen = calloc(total ? total : 1, 1);
	FUNC_ASSERT(f, seen, "out of memory");
	/* every fetching sum and successful swap saw a value of its own */
	for (i = 0; i < a->r.npeers; i++) {
		rma_peer(&a->r, i);
		nolds = rep[i].nfetch + rep[i].n;
		olds = malloc(nolds * sizeof(uint64_t));
		FUNC_ASSERT(f, olds, "out of memory");
		FUNC_CALL(f, cour_ft_oob_recv(&f->ft, olds, nolds * sizeof(uint64_t)));
		for (j = 0; j < nolds; j++) {
			FUNC_ASSERT(f, olds[j] < total && !seen[olds[j]], "initiator %d: old value "
				    "%llu fetched twice or beyond %llu", i,
				    (unsigned long long)olds[j], (unsigned long long)total);
			seen[olds[j]] = 1;
		}
		free(olds);
		nall += nolds;
		base += rep[i].n - rep[i].nfetch;
		fetching += rep[i].nfetch + rep[i].attempts;
	}
	free(seen);
	FUNC_ASSERT(f, *counter == total, "hammer: the counter holds %llu, want %llu",
		    (unsigned long long)*counter, (unsigned long long)total);
	rma_cntr_get(&a->r, RMA_CNTR_RMT_WRITE, &v, &e);
	rma_cntr_get(&a->r, RMA_CNTR_RMT_READ, &v2, &e2);
	if (a->r.cntr[RMA_CNTR_RMT_WRITE]) {
		/* every sum and swap writes the counter, the fetching ones also read it */
		FUNC_ASSERT(f, v == base + fetching && v2 == fetching && !e && !e2, "remote "
			    "counters: write %llu read %llu (errors %llu %llu), want %llu %llu",
			    (unsigned long long)v, (unsigned long long)v2, (unsigned long long)e,
			    (unsigned long long)e2, (unsigned long long)(base + fetching),
			    (unsigned long long)fetching);
	}
	printf("hammer: %d initiators, the counter holds exactly %llu; %llu fetched old values "
	       "all distinct\n", a->r.npeers, (unsigned long long)*counter,
	       (unsigned long long)nall);
	for (i = 0; i < a->r.npeers; i++) {
		rma_peer(&a->r, i);
		FUNC_CALL(f, cour_ft_oob_send(&f->ft, counter, sizeof(*counter)));
	}
	for (i = 0; i < a->r.npeers; i++) {
		rma_peer(&a->r, i);
		FUNC_CALL(f, cour_ft_barrier(&f->ft));
	}
	rma_peer(&a->r, 0);
	return 0;
}

int main(int argc, char **argv)
{
	static struct ham a;
	struct func *f = &a.r.f;
	struct fid_mr *lmr = NULL;
	size_t count;
	int ret;

	ret = rma_init(&a.r, argc, argv, "atomic_hammer", FI_ATOMIC | FI_READ | FI_WRITE |
		       FI_REMOTE_READ | FI_REMOTE_WRITE | FI_RMA_EVENT, NULL, "N:", ham_opt, &a,
		       "  -N <count>  target: initiators to wait for (default 1)\n");
	if (ret)
		goto out;
	printf("atomic_hammer (%s): provider %s, key mode %s, mr_mode 0x%x\n",
	       f->ft.is_server ? "target" : "initiator", f->ft.info->fabric_attr->prov_name,
	       a.r.keymode == RMA_KEYS_BASIC ? "basic" : "scalable",
	       f->ft.info->domain_attr->mr_mode);
	fflush(stdout);
	if (fi_atomicvalid(f->ft.ep, FI_UINT64, FI_SUM, &count) ||
	    fi_fetch_atomicvalid(f->ft.ep, FI_UINT64, FI_SUM, &count) ||
	    fi_compare_atomicvalid(f->ft.ep, FI_UINT64, FI_CSWAP, &count)) {
		fprintf(stderr, "atomic_hammer: the provider lacks uint64_t FI_SUM or FI_CSWAP\n");
		ret = -FI_EOPNOTSUPP;
		goto out;
	}
	a.n = f->ft.opts.iterations ? (uint64_t)f->ft.opts.iterations : HAMMER_DEFAULT_N;
	ret = posix_memalign((void **)&a.mem, 4096, 4096) ? -FI_ENOMEM : 0;
	if (ret)
		goto out;
	memset(a.mem, 0, 4096);
	if (f->ft.is_server) {
		ret = rma_mr_reg(&a.r, a.mem, 4096, FI_REMOTE_READ | FI_REMOTE_WRITE, &a.mr,
				 &a.reg);
		if (!ret)
			ret = hammer_target(&a);
	} else {
		/* operands and results live on the stack: no FI_MR_LOCAL (never asked for) */
		ret = rma_local_reg(&a.r, a.mem, 4096, &lmr, &a.desc);
		if (!ret)
			ret = hammer_initiator(&a);
	}
	if (!ret)
		ret = rma_finish(&a.r);
out:
	rma_mr_close(&a.r, &a.mr);
	rma_mr_close(&a.r, &lmr);
	rma_close(&a.r);
	free(a.mem);
	if (ret || f->failures) {
		fprintf(stderr, "atomic_hammer: FAIL (%d)\n", ret);
		return 1;
	}
	printf("atomic_hammer: PASS (%s)\n", f->ft.is_server ? "target" : "initiator");
	return 0;
}
