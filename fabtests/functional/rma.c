/*
 * rma: fi_rma between two processes; the server is the target, the client the initiator.
 * `rma [-p prov] [-k basic|scalable] [-x test]` is the target, the same with 127.0.0.1 the
 * initiator (rma_errors.c has the error cases). Tests (-x):
 *   sizes   (default) fi_write, fi_read and fi_writedata of every size from 1 B to 64 MiB
 *           (powers of two and odd sizes; -S overrides), each form in turn (plain, v with up
 *           to 3 iovs, msg, inject when it fits), at unaligned remote addresses. The target
 *           checks every byte written and the guard bytes around it after its FI_REMOTE_WRITE
 *           counter says the writes landed; the initiator checks every byte read and its
 *           guards. Remote CQ data arrives once per writedata with FI_RMA|FI_REMOTE_WRITE|
 *           FI_REMOTE_CQ_DATA and the exact data. FI_WRITE and FI_READ counters at the
 *           initiator, FI_REMOTE_WRITE and FI_REMOTE_READ at the target count exactly.
 *   sleep   the target opens with FI_PROGRESS_AUTO, posts nothing and sleeps 5 s without a
 *           libfabric call while the initiator writes, reads, writes with data and runs
 *           atomics on its memory: all of it must complete before the target wakes; then the
 *           target checks memory, counters and the queued remote CQ data.
 */
#define _GNU_SOURCE

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>

#include "ft_rma.h"

enum { T_SIZES, T_SLEEP };

#define GUARD      64
#define GUARD_BYTE 0xee
#define MAX_SIZE   (64UL << 20)
#define MAX_ITERS  8
#define AREA       (MAX_SIZE + 4096)

enum { PH_WRITE, PH_DATA, PH_READ, PH_COUNT };
static const char *const ph_name[PH_COUNT] = { "write", "writedata", "read" };

#define SEQ(si, ph, k)  ((uint64_t)(si) * 64 + (ph) * 16 + (k))
#define DATA(si, k)     (0xda7a000000000000ULL + (uint64_t)(si) * 16 + (k))

static const size_t default_sizes[] = {
	1, 2, 3, 4, 7, 8, 13, 16, 32, 64, 128, 255, 256, 512, 1021, 1024, 2048, 4096, 4097,
	8192, 16384, 32768, 64999, 65536, 65537, 131072, 262144, 524288, 1000003, 1 << 20,
	2 << 20, 4 << 20, 4194305, 8 << 20, 9999991, 16 << 20, 32 << 20, 33554431, 64 << 20,
	67108863,
};

struct rmat {
	struct rma r;
	int test;
	char *buf;			/* target: the region; initiator: local memory */
	size_t buf_len;
	struct fid_mr *mr;		/* target: the region; initiator: FI_MR_LOCAL's */
	void *desc;
	struct rma_region reg;		/* initiator: the target's region */
	struct fi_context2 ctx[64];
	size_t inject_size;
	size_t iov_limit;
	uint64_t data_mask;
	uint64_t cnt[RMA_CNTR_COUNT];	/* what each counter must read now */
	size_t sizes[64];
	int nsizes;
};

static int rmat_opt(int opt, const char *arg, void *ctx)
{
	struct rmat *t = ctx;

	if (opt != 'x')
		return -1;
	if (!strcmp(arg, "sizes"))
		t->test = T_SIZES;
	else if (!strcmp(arg, "sleep"))
		t->test = T_SLEEP;
	else
		return -1;
	return 0;
}

static int iters_of(size_t s)
{
	return s <= 65536 ? 8 : s <= (1 << 20) ? 4 : s <= (8 << 20) ? 2 : 1;
}

/* Slot k of size s: unaligned by a few bytes, GUARD bytes apart. */
static size_t slot_off(int si, int k, size_t s)
{
	return GUARD + (size_t)k * (s + GUARD) + (size_t)((si * 3 + k) % 8);
}

static size_t extent_of(int n, size_t s)
{
	return GUARD + (size_t)n * (s + GUARD) + 8 + GUARD;
}

/* The extent holds n slots of pattern seq(k) and GUARD_BYTE everywhere else. */
static int check_extent(struct rmat *t, int si, int ph, size_t s, int n, const char *who)
{
	struct func *f = &t->r.f;
	const unsigned char *p = (const unsigned char *)t->buf;
	size_t pos = 0, end = extent_of(n, s), off;
	int k;
	char what[96];

	for (k = 0; k <= n; k++) {
		off = k < n ? slot_off(si, k, s) : end;
		for (; pos < off; pos++)
			FUNC_ASSERT(f, p[pos] == GUARD_BYTE, "%s %s size %zu: guard byte at %zu "
				    "is 0x%02x (slot %d starts at %zu)", who, ph_name[ph], s, pos,
				    p[pos], k, off);
		if (k == n)
			break;
		snprintf(what, sizeof(what), "%s %s slot %d", who, ph_name[ph], k);
		FUNC_CALL(f, func_check_data(f, p + off, s, SEQ(si, ph, k), what));
		pos = off + s;
	}
	return 0;
}

static void fill_extent(struct rmat *t, int si, int ph, size_t s, int n, bool pattern)
{
	int k;

	memset(t->buf, GUARD_BYTE, extent_of(n, s));
	for (k = 0; pattern && k < n; k++)
		cour_ft_fill(t->buf + slot_off(si, k, s), s, SEQ(si, ph, k));
}

/* up to 3 iovecs over [p, p + s) */
static size_t split_iov(struct rmat *t, struct iovec *iov, char *p, size_t s)
{
	size_t n = t->iov_limit < 3 ? t->iov_limit : 3, i, a;

	if (s < n)
		n = 1;
	for (i = 0, a = 0; i < n; i++) {
		size_t l = i + 1 < n ? s / n - i : s - a;

		iov[i] = (struct iovec){ p + a, l };
		a += l;
	}
	return n;
}

/* Post phase ph's operation k; *signalled tells whether it makes a completion. */
static int post_op(struct rmat *t, int ph, int k, char *p, size_t s, uint64_t raddr,
		   uint64_t data, bool *signalled)
{
	struct func *f = &t->r.f;
	struct fid_ep *ep = f->ft.ep;
	fi_addr_t dst = f->ft.peer;
	uint64_t key = t->reg.key;
	void *d = t->desc, *desc[3] = { d, d, d };
	struct iovec iov[3];
	struct fi_rma_iov riov = { .addr = raddr, .len = s, .key = key };
	struct fi_msg_rma msg = { .msg_iov = iov, .desc = desc, .addr = dst, .rma_iov = &riov,
				  .rma_iov_count = 1, .context = &t->ctx[k], .data = data };
	bool inject_ok = s <= t->inject_size;
	int form = ph == PH_READ ? k % 3 : k % (inject_ok ? 4 : 3);
	void *ctx = &t->ctx[k];

	*signalled = form != 3;
	msg.iov_count = split_iov(t, iov, p, s);
	switch (ph * 4 + form) {
	case PH_WRITE * 4 + 0:
		return FUNC_POST(f, fi_write(ep, p, s, d, dst, raddr, key, ctx));
	case PH_WRITE * 4 + 1:
		return FUNC_POST(f, fi_writev(ep, iov, desc, msg.iov_count, dst, raddr, key, ctx));
	case PH_WRITE * 4 + 2:
		return FUNC_POST(f, fi_writemsg(ep, &msg, FI_COMPLETION));
	case PH_WRITE * 4 + 3:
		return FUNC_POST(f, fi_inject_write(ep, p, s, dst, raddr, key));
	case PH_DATA * 4 + 0:
		return FUNC_POST(f, fi_writedata(ep, p, s, d, data, dst, raddr, key, ctx));
	case PH_DATA * 4 + 1:
	case PH_DATA * 4 + 2:
		/* msg with one iovec, then with several */
		if (form == 1)
			msg.iov_count = 1, iov[0] = (struct iovec){ p, s };
		return FUNC_POST(f, fi_writemsg(ep, &msg, FI_COMPLETION | FI_REMOTE_CQ_DATA));
	case PH_DATA * 4 + 3:
		return FUNC_POST(f, fi_inject_writedata(ep, p, s, data, dst, raddr, key));
	case PH_READ * 4 + 0:
		return FUNC_POST(f, fi_read(ep, p, s, d, dst, raddr, key, ctx));
	case PH_READ * 4 + 1:
		return FUNC_POST(f, fi_readv(ep, iov, desc, msg.iov_count, dst, raddr, key, ctx));
	default:
		return FUNC_POST(f, fi_readmsg(ep, &msg, FI_COMPLETION));
	}
}

/* n completions for ctx[0..n) in any order, each once, with these flags. */
static int collect(struct rmat *t, int n, const bool *signalled, uint64_t flags, const char *what)
{
	struct func *f = &t->r.f;
	bool seen[MAX_ITERS * 2] = { false };
	struct func_comp c;
	int i, k, want = 0;

	for (i = 0; i < n; i++)
		want += signalled[i];
	for (i = 0; i < want; i++) {
		FUNC_CALL(f, func_next(f, true, &c, 20000));
		k = (int)((struct fi_context2 *)c.e.op_context - t->ctx);
		FUNC_ASSERT(f, !c.is_err, "%s: error completion %d (%s), prov_errno %d", what,
			    c.err.err, fi_strerror(c.err.err), c.err.prov_errno);
		FUNC_ASSERT(f, k >= 0 && k < n && signalled[k] && !seen[k],
			    "%s: unexpected completion, op_context %p", what, c.e.op_context);
		seen[k] = true;
		FUNC_ASSERT(f, (c.e.flags & RMA_CQ_KIND) == flags, "%s op %d: flags 0x%llx, "
			    "want 0x%llx", what, k, (unsigned long long)(c.e.flags & RMA_CQ_KIND),
			    (unsigned long long)flags);
	}
	return func_expect_quiet(f, true, 0);
}

/* ---- sizes ---- */

static int sizes_initiator(struct rmat *t, int si, size_t s)
{
	struct func *f = &t->r.f;
	int n = iters_of(s), ph, k;
	bool sig[MAX_ITERS];
	char what[64];
	enum rma_cntr_kind ck;

	for (ph = 0; ph < PH_COUNT; ph++) {
		if (ph == PH_DATA && !t->data_mask)
			continue;
		FUNC_CALL(f, cour_ft_barrier(&f->ft));	/* the target has prepared */
		fill_extent(t, si, ph, s, n, ph != PH_READ);
		for (k = 0; k < n; k++)
			FUNC_CALL(f, post_op(t, ph, k, t->buf + slot_off(si, k, s), s,
					     rma_raddr(&t->reg, slot_off(si, k, s)),
					     DATA(si, k) & t->data_mask, &sig[k]));
		snprintf(what, sizeof(what), "%s of %zu bytes", ph_name[ph], s);
		FUNC_CALL(f, collect(t, n, sig, FI_RMA | (ph == PH_READ ? FI_READ : FI_WRITE),
				     what));
		ck = ph == PH_READ ? RMA_CNTR_READ : RMA_CNTR_WRITE;
		t->cnt[ck] += (uint64_t)n;
		FUNC_CALL(f, rma_cntr_wait(&t->r, ck, t->cnt[ck], 0, 5000));
		if (ph == PH_READ)
			FUNC_CALL(f, check_extent(t, si, ph, s, n, "initiator"));
		FUNC_CALL(f, cour_ft_barrier(&f->ft));	/* the target checks */
	}
	return 0;
}

static int sizes_target(struct rmat *t, int si, size_t s)
{
	struct func *f = &t->r.f;
	struct func_comp c;
	bool seen[MAX_ITERS];
	int n = iters_of(s), ph, k, i;
	enum rma_cntr_kind ck;

	for (ph = 0; ph < PH_COUNT; ph++) {
		if (ph == PH_DATA && !t->data_mask)
			continue;
		fill_extent(t, si, ph, s, n, ph == PH_READ);
		FUNC_CALL(f, cour_ft_barrier(&f->ft));
		FUNC_CALL(f, cour_ft_barrier(&f->ft));	/* the initiator's ops completed */
		ck = ph == PH_READ ? RMA_CNTR_RMT_READ : RMA_CNTR_RMT_WRITE;
		t->cnt[ck] += (uint64_t)n;
		FUNC_CALL(f, rma_cntr_wait(&t->r, ck, t->cnt[ck], 0, 5000));
		FUNC_CALL(f, check_extent(t, si, ph, s, n, "target"));
		if (ph != PH_DATA) {
			FUNC_CALL(f, func_expect_quiet(f, false, 0));
			continue;
		}
		memset(seen, 0, sizeof(seen));
		for (i = 0; i < n; i++) {
			FUNC_CALL(f, func_next(f, false, &c, 5000));
			FUNC_ASSERT(f, !c.is_err, "writedata size %zu: error completion %d at the "
				    "target", s, c.err.err);
			FUNC_ASSERT(f, (c.e.flags & RMA_CQ_KIND) ==
				    (FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA),
				    "writedata size %zu: target flags 0x%llx", s,
				    (unsigned long long)c.e.flags);
			for (k = 0; k < n; k++)
				if (!seen[k] && c.e.data == (DATA(si, k) & t->data_mask))
					break;
			FUNC_ASSERT(f, k < n, "writedata size %zu: data 0x%llx unknown or twice",
				    s, (unsigned long long)c.e.data);
			seen[k] = true;
			if (func_is_courier(f))
				FUNC_ASSERT(f, c.e.len == s, "writedata: len %zu, want %zu",
					    c.e.len, s);
		}
		FUNC_CALL(f, func_expect_quiet(f, false, 0));
	}
	return 0;
}

static int run_sizes(struct rmat *t)
{
	struct func *f = &t->r.f;
	uint64_t t0 = cour_ft_now_ns(), t1;
	int si;

	for (si = 0; si < t->nsizes; si++) {
		size_t s = t->sizes[si];

		FUNC_ASSERT(f, s >= 1 && extent_of(iters_of(s), s) <= t->buf_len,
			    "size %zu does not fit", s);
		if (s > f->ft.info->ep_attr->max_msg_size)
			continue;
		t1 = cour_ft_now_ns();
		FUNC_CALL(f, f->ft.is_server ? sizes_target(t, si, s) :
			     sizes_initiator(t, si, s));
		if (s >= (1 << 20) && !f->ft.is_server)
			printf("  %9zu bytes x %d: %.0f ms\n", s, iters_of(s),
			       (double)(cour_ft_now_ns() - t1) / 1e6);
	}
	printf("rma sizes: %d sizes, %.2f s\n", t->nsizes, (double)(cour_ft_now_ns() - t0) / 1e9);
	return 0;
}

/* ---- sleeping target ---- */

#define SLEEP_S     5
#define SL_CHUNK    (128 * 1024)
#define SL_W        0			/* 8 writes of SL_CHUNK */
#define SL_R        (1 << 20)		/* 8 reads of SL_CHUNK */
#define SL_D        (2 << 20)		/* 4 writedata of SL_DLEN */
#define SL_DLEN     (16 * 1024)
#define SL_A        (SL_D + 4 * SL_DLEN)	/* uint64_t counters */
#define SL_LEN      (SL_A + 4096)
#define SL_NW       8
#define SL_NR       8
#define SL_ND       4
#define SL_NSUM     20			/* fi_atomic FI_SUM 3 on A[0] */
#define SL_NFETCH   20			/* fi_fetch_atomic FI_SUM 1 on A[1], one at a time */
#define SL_NCSWAP   10			/* fi_compare_atomic FI_CSWAP j -> j + 1 on A[2] */
#define SL_DATA(k)  (0xd0d0ULL + (k))

struct sleep_report {
	uint64_t elapsed_ns;		/* from 'S' received to the last completion */
	uint64_t woke_early;		/* the target's 'W' was there before we finished */
};

/* One operation and its completion; for the atomics done one at a time. */
static int sleep_wait_one(struct rmat *t, void *ctx, uint64_t flags, const char *what)
{
	return rma_expect_ok(&t->r, true, ctx, flags, what);
}

static int sleep_initiator(struct rmat *t)
{
	struct func *f = &t->r.f;
	struct fid_ep *ep = f->ft.ep;
	fi_addr_t dst = f->ft.peer;
	struct rma_region *g = &t->reg;
	struct sleep_report rep = { 0 };
	uint64_t *ops = (uint64_t *)(t->buf + SL_A), *res = ops + 8, t0;
	struct func_comp c;
	char flag;
	ssize_t n;
	int k, j;

	FUNC_CALL(f, rma_recv_region(&t->r, g));
	FUNC_CALL(f, cour_ft_oob_recv(&f->ft, &flag, 1));
	FUNC_ASSERT(f, flag == 'S', "got 0x%02x, want 'S'", flag);
	t0 = cour_ft_now_ns();
	for (k = 0; k < SL_NW; k++) {
		cour_ft_fill(t->buf + SL_W + k * SL_CHUNK, SL_CHUNK, 700 + k);
		FUNC_CALL(f, FUNC_POST(f, fi_write(ep, t->buf + SL_W + k * SL_CHUNK, SL_CHUNK,
						   t->desc, dst, rma_raddr(g, SL_W + k * SL_CHUNK),
						   g->key, &t->ctx[k])));
	}
	memset(t->buf + SL_R, GUARD_BYTE, SL_NR * SL_CHUNK);
	for (k = 0; k < SL_NR; k++)
		FUNC_CALL(f, FUNC_POST(f, fi_read(ep, t->buf + SL_R + k * SL_CHUNK, SL_CHUNK,
						  t->desc, dst, rma_raddr(g, SL_R + k * SL_CHUNK),
						  g->key, &t->ctx[SL_NW + k])));
	for (k = 0; k < SL_ND; k++) {
		cour_ft_fill(t->buf + SL_D + k * SL_DLEN, SL_DLEN, 800 + k);
		FUNC_CALL(f, FUNC_POST(f, fi_writedata(ep, t->buf + SL_D + k * SL_DLEN, SL_DLEN,
						       t->desc, SL_DATA(k) & t->data_mask, dst,
						       rma_raddr(g, SL_D + k * SL_DLEN), g->key,
						       &t->ctx[SL_NW + SL_NR + k])));
	}
	for (j = 0; j < SL_NW + SL_NR + SL_ND; j++) {
		FUNC_CALL(f, func_next(f, true, &c, 4000));
		k = (int)((struct fi_context2 *)c.e.op_context - t->ctx);
		FUNC_ASSERT(f, !c.is_err && k >= 0 && k < SL_NW + SL_NR + SL_ND,
			    "completion %d: %s %d, op_context %p", j, c.is_err ? "error" : "ok",
			    c.err.err, c.e.op_context);
		FUNC_ASSERT(f, (c.e.flags & RMA_CQ_KIND) ==
			    (FI_RMA | (k >= SL_NW && k < SL_NW + SL_NR ? FI_READ : FI_WRITE)),
			    "op %d: flags 0x%llx", k, (unsigned long long)c.e.flags);
	}
	ops[0] = 3;
	for (k = 0; k < SL_NSUM; k++)
		FUNC_CALL(f, FUNC_POST(f, fi_atomic(ep, &ops[0], 1, t->desc, dst,
						    rma_raddr(g, SL_A), g->key, FI_UINT64, FI_SUM,
						    &t->ctx[k])));
	for (k = 0; k < SL_NSUM; k++) {
		FUNC_CALL(f, func_next(f, true, &c, 4000));
		FUNC_ASSERT(f, !c.is_err && (c.e.flags & RMA_CQ_KIND) == (FI_ATOMIC | FI_WRITE),
			    "atomic %d: err %d flags 0x%llx", k, c.err.err,
			    (unsigned long long)c.e.flags);
	}
	ops[1] = 1;
	for (j = 0; j < SL_NFETCH; j++) {
		res[0] = ~0ULL;
		FUNC_CALL(f, FUNC_POST(f, fi_fetch_atomic(ep, &ops[1], 1, t->desc, &res[0],
							  t->desc, dst, rma_raddr(g, SL_A + 8),
							  g->key, FI_UINT64, FI_SUM, &t->ctx[0])));
		FUNC_CALL(f, sleep_wait_one(t, &t->ctx[0], FI_ATOMIC | FI_READ, "fetch_atomic"));
		FUNC_ASSERT(f, res[0] == (uint64_t)j, "fetch_atomic %d fetched %llu", j,
			    (unsigned long long)res[0]);
	}
	for (j = 0; j < SL_NCSWAP; j++) {
		ops[2] = (uint64_t)j + 1;
		ops[3] = (uint64_t)j;
		res[0] = ~0ULL;
		FUNC_CALL(f, FUNC_POST(f, fi_compare_atomic(ep, &ops[2], 1, t->desc, &ops[3],
							    t->desc, &res[0], t->desc, dst,
							    rma_raddr(g, SL_A + 16), g->key,
							    FI_UINT64, FI_CSWAP, &t->ctx[0])));
		FUNC_CALL(f, sleep_wait_one(t, &t->ctx[0], FI_ATOMIC | FI_READ, "compare_atomic"));
		FUNC_ASSERT(f, res[0] == (uint64_t)j, "compare_atomic %d fetched %llu", j,
			    (unsigned long long)res[0]);
	}
	rep.elapsed_ns = cour_ft_now_ns() - t0;
	/* the target sends 'W' the moment it wakes: it must not be there yet */
	n = recv(f->ft.oob_fd, &flag, 1, MSG_PEEK | MSG_DONTWAIT);
	rep.woke_early = !(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
	printf("sleep: every operation completed %.1f ms after the target fell asleep%s\n",
	       (double)rep.elapsed_ns / 1e6, rep.woke_early ? ", but AFTER it woke" : "");
	FUNC_ASSERT(f, !rep.woke_early, "the operations needed the target awake (%.1f ms)",
		    (double)rep.elapsed_ns / 1e6);
	for (k = 0; k < SL_NR; k++)
		FUNC_CALL(f, func_check_data(f, t->buf + SL_R + k * SL_CHUNK, SL_CHUNK, 750 + k,
					     "read from the sleeping target"));
	FUNC_CALL(f, rma_cntr_wait(&t->r, RMA_CNTR_WRITE, SL_NW + SL_ND + SL_NSUM, 0, 1000));
	FUNC_CALL(f, rma_cntr_wait(&t->r, RMA_CNTR_READ, SL_NR + SL_NFETCH + SL_NCSWAP, 0, 1000));
	FUNC_CALL(f, cour_ft_oob_send(&f->ft, &rep, sizeof(rep)));
	FUNC_CALL(f, cour_ft_oob_recv(&f->ft, &flag, 1));
	FUNC_ASSERT(f, flag == 'W', "got 0x%02x, want 'W'", flag);
	return 0;
}

static int sleep_target(struct rmat *t)
{
	struct func *f = &t->r.f;
	struct sleep_report rep;
	uint64_t *a = (uint64_t *)(t->buf + SL_A), wr, rd, e, t0;
	struct timespec ts;
	struct func_comp c;
	bool seen[SL_ND] = { false };
	char flag = 'S';
	int k, i;

	if (f->ft.info->domain_attr->data_progress != FI_PROGRESS_AUTO)
		printf("sleep: the target runs in manual progress (-M manual): only a provider that "
		       "progresses more than asked passes (courier: FI_COURIER_MANUAL_THREAD)\n");
	for (k = 0; k < SL_NR; k++)
		cour_ft_fill(t->buf + SL_R + k * SL_CHUNK, SL_CHUNK, 750 + k);
	FUNC_CALL(f, rma_send_region(&t->r, &t->reg));
	FUNC_CALL(f, cour_ft_oob_send(&f->ft, &flag, 1));
	/* no libfabric call from here until we wake */
	t0 = cour_ft_now_ns();
	while (cour_ft_now_ns() - t0 < SLEEP_S * 1000000000ULL) {
		ts.tv_sec = 0;
		ts.tv_nsec = 100000000;
		nanosleep(&ts, NULL);
	}
	flag = 'W';
	FUNC_CALL(f, cour_ft_oob_send(&f->ft, &flag, 1));
	printf("sleep: the target slept %d s without a libfabric call\n", SLEEP_S);
	rma_cntr_get(&t->r, RMA_CNTR_RMT_WRITE, &wr, &e);
	FUNC_ASSERT(f, e == 0, "FI_REMOTE_WRITE counter: %llu errors", (unsigned long long)e);
	rma_cntr_get(&t->r, RMA_CNTR_RMT_READ, &rd, &e);
	FUNC_ASSERT(f, e == 0, "FI_REMOTE_READ counter: %llu errors", (unsigned long long)e);
	FUNC_CALL(f, cour_ft_oob_recv(&f->ft, &rep, sizeof(rep)));
	FUNC_ASSERT(f, !rep.woke_early, "the initiator finished only after we woke");

	for (k = 0; k < SL_NW; k++)
		FUNC_CALL(f, func_check_data(f, t->buf + SL_W + k * SL_CHUNK, SL_CHUNK, 700 + k,
					     "written to the sleeping target"));
	for (k = 0; k < SL_NR; k++)
		FUNC_CALL(f, func_check_data(f, t->buf + SL_R + k * SL_CHUNK, SL_CHUNK, 750 + k,
					     "read from the sleeping target"));
	for (k = 0; k < SL_ND; k++)
		FUNC_CALL(f, func_check_data(f, t->buf + SL_D + k * SL_DLEN, SL_DLEN, 800 + k,
					     "writedata to the sleeping target"));
	FUNC_ASSERT(f, a[0] == 3 * SL_NSUM && a[1] == SL_NFETCH && a[2] == SL_NCSWAP && !a[3],
		    "atomics: %llu %llu %llu %llu, want %d %d %d 0", (unsigned long long)a[0],
		    (unsigned long long)a[1], (unsigned long long)a[2], (unsigned long long)a[3],
		    3 * SL_NSUM, SL_NFETCH, SL_NCSWAP);
	if (t->r.cntr[RMA_CNTR_RMT_WRITE]) {
		/* a fetch-add or compare-swap both writes target memory and returns it: a remote
		 * write and a remote read (fi_atomic(3), fi_cntr(3)) */
		FUNC_ASSERT(f, wr == SL_NW + SL_ND + SL_NSUM + SL_NFETCH + SL_NCSWAP &&
			    rd == SL_NR + SL_NFETCH + SL_NCSWAP,
			    "remote counters: write %llu read %llu, want %d %d",
			    (unsigned long long)wr, (unsigned long long)rd,
			    SL_NW + SL_ND + SL_NSUM + SL_NFETCH + SL_NCSWAP,
			    SL_NR + SL_NFETCH + SL_NCSWAP);
	}
	for (i = 0; t->data_mask && i < SL_ND; i++) {
		FUNC_CALL(f, func_next(f, false, &c, 1000));
		FUNC_ASSERT(f, !c.is_err && (c.e.flags & RMA_CQ_KIND) ==
			    (FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA),
			    "remote CQ data %d: err %d flags 0x%llx", i, c.err.err,
			    (unsigned long long)c.e.flags);
		for (k = 0; k < SL_ND; k++)
			if (!seen[k] && c.e.data == (SL_DATA(k) & t->data_mask))
				break;
		FUNC_ASSERT(f, k < SL_ND, "remote CQ data 0x%llx", (unsigned long long)c.e.data);
		seen[k] = true;
	}
	FUNC_CALL(f, func_expect_quiet(f, false, 0));
	printf("sleep: the initiator's %d operations took %.1f ms; memory, counters (write %llu, "
	       "read %llu) and %d CQ data entries check\n", SL_NW + SL_NR + SL_ND + SL_NSUM +
	       SL_NFETCH + SL_NCSWAP, (double)rep.elapsed_ns / 1e6, (unsigned long long)wr,
	       (unsigned long long)rd, t->data_mask ? SL_ND : 0);
	return 0;
}

static int run_sleep(struct rmat *t)
{
	struct func *f = &t->r.f;

	t->buf_len = SL_LEN;
	FUNC_ASSERT(f, !posix_memalign((void **)&t->buf, 4096, t->buf_len), "out of memory");
	memset(t->buf, 0, t->buf_len);
	if (f->ft.is_server) {
		FUNC_CALL(f, rma_mr_reg(&t->r, t->buf, t->buf_len,
					FI_REMOTE_READ | FI_REMOTE_WRITE, &t->mr, &t->reg));
		return sleep_target(t);
	}
	FUNC_CALL(f, rma_local_reg(&t->r, t->buf, t->buf_len, &t->mr, &t->desc));
	return sleep_initiator(t);
}

/* ---- main ---- */

static struct rmat rmat;

/* The test is known once the options are parsed: atomics for the sleep test, auto progress */
static void rmat_finalize(struct cour_ft_opts *opts)
{
	if (rmat.test == T_SLEEP) {
		opts->caps |= FI_ATOMIC;
		if (!opts->progress)
			opts->progress = FI_PROGRESS_AUTO;
	}
}

int main(int argc, char **argv)
{
	struct rmat *t = &rmat;
	struct func *f = &t->r.f;
	const char *tname[] = { "rma sizes", "rma sleep" };
	size_t i;
	int ret;

	ret = rma_init(&t->r, argc, argv, "rma", FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ |
		       FI_REMOTE_WRITE | FI_RMA_EVENT, rmat_finalize, "x:", rmat_opt, t,
		       "  -x sizes|sleep  which test (default sizes)\n");
	if (ret)
		goto out;
	t->inject_size = f->ft.info->tx_attr->inject_size;
	t->iov_limit = f->ft.info->tx_attr->iov_limit ? f->ft.info->tx_attr->iov_limit : 1;
	i = f->ft.info->domain_attr->cq_data_size;
	t->data_mask = i >= 8 ? ~0ULL : i ? (1ULL << (8 * i)) - 1 : 0;
	printf("%s (%s): provider %s, key mode %s, mr_mode 0x%x, progress %s\n", tname[t->test],
	       f->ft.is_server ? "target" : "initiator", f->ft.info->fabric_attr->prov_name,
	       t->r.keymode == RMA_KEYS_BASIC ? "basic" : "scalable",
	       f->ft.info->domain_attr->mr_mode,
	       f->ft.info->domain_attr->data_progress == FI_PROGRESS_AUTO ? "auto" : "manual");
	fflush(stdout);
	if (t->test == T_SLEEP) {
		ret = run_sleep(t);
		goto finish;
	}
	if (f->ft.opts.nsizes) {
		t->nsizes = f->ft.opts.nsizes;
		memcpy(t->sizes, f->ft.opts.sizes, sizeof(size_t) * (size_t)t->nsizes);
	} else {
		t->nsizes = (int)COUR_FT_ARRAY_SIZE(default_sizes);
		memcpy(t->sizes, default_sizes, sizeof(default_sizes));
	}
	t->buf_len = AREA;
	ret = posix_memalign((void **)&t->buf, 4096, t->buf_len) ? -FI_ENOMEM : 0;
	if (ret)
		goto out;
	memset(t->buf, 0, t->buf_len);
	if (f->ft.is_server) {
		ret = rma_mr_reg(&t->r, t->buf, t->buf_len, FI_REMOTE_READ | FI_REMOTE_WRITE,
				 &t->mr, &t->reg);
		if (!ret)
			ret = rma_send_region(&t->r, &t->reg);
	} else {
		ret = rma_local_reg(&t->r, t->buf, t->buf_len, &t->mr, &t->desc);
		if (!ret)
			ret = rma_recv_region(&t->r, &t->reg);
	}
	if (!ret)
		ret = run_sizes(t);
finish:
	if (!ret)
		ret = rma_finish(&t->r);
out:
	rma_mr_close(&t->r, &t->mr);
	rma_close(&t->r);
	free(t->buf);
	if (ret || f->failures) {
		fprintf(stderr, "%s: FAIL (%d)\n", tname[t->test], ret);
		return 1;
	}
	printf("%s: PASS (%s)\n", tname[t->test], f->ft.is_server ? "target" : "initiator");
	return 0;
}
