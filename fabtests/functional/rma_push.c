/*
 * rma_push: same-host RMA writes that the initiator copies itself into the target's region
 * (FI_COURIER_SHM_PUSH, proto/cour_rma_push.c), and what must still hold around them. The
 * server is the target, the client the initiator (`rma_push`, the same with 127.0.0.1).
 *
 *   stream  WRITES writes of 64 KiB posted back to back: every one completes successfully,
 *           the target's FI_REMOTE_WRITE counter counts each (the events of a write the
 *           target never copied), and the last bytes at each offset are the last write's.
 *   errors  a write that crosses the region's end, and one with a key the target never gave:
 *           each completes with its error (FI_EINVAL, FI_EACCES) and the guard pages around
 *           the region are untouched.
 *   close   the initiator writes 64 KiB at a time while the target closes the region: writes
 *           succeed until the close and fail (FI_EACCES) after it, and once fi_close returned
 *           nothing lands in the memory (the target refills it and checks at the end).
 * Over courier with shared memory the statistics must show the writes pushed (every one of
 * the stream: after a push nothing of the initiator's is in flight, so the next one may push
 * too), and none with FI_COURIER_SHM_PUSH=0 (test_rma_push.sh runs both). With -x quiet the
 * endpoints have no FI_RMA_EVENT and the target counts nothing: the pushes then send it no
 * notices at all, and the target learns of the writes from the initiator (a barrier after
 * its completions), which is all an application could rely on too.
 */
#define _GNU_SOURCE

#include <stdlib.h>
#include <string.h>

#include "ft_rma.h"

#define PAGE      4096UL
#define SZ        (64UL << 10)
#define SLOTS     16
#define REGION    (SLOTS * SZ)
#define WRITES    64
#define WARMUP    8
#define CLOSE_MAX 100000                /* writes the close phase may take at most */
#define REFILL    0xee
#define GUARD     0x5c
#define SEQ(i)    (500 + (uint64_t)(i))

struct push {
	struct rma r;
	char *mem;                      /* target: guard page, region, guard page */
	char *buf;                      /* initiator: WRITES * SZ of source */
	struct fid_mr *mr;
	void *desc;
	struct rma_region reg;
	struct fi_context2 ctx[WRITES];
	bool push_on;                   /* courier, shared memory and push all on */
	bool quiet;                     /* -x quiet: no FI_RMA_EVENT, no target counters */
	bool counted;                   /* the target counts remote writes */
};
static struct push push;

static void push_finalize(struct cour_ft_opts *opts)
{
	opts->caps |= FI_MSG | FI_SEND | FI_RECV;
	if (push.quiet)
		opts->caps &= ~FI_RMA_EVENT;
}

static int push_opt(int opt, const char *arg, void *ctx)
{
	struct push *p = ctx;

	if (opt != 'x' || strcmp(arg, "quiet"))
		return -1;
	p->quiet = true;
	return 0;
}

static bool env_off(const char *name)
{
	const char *v = getenv(name);

	return v && !strcmp(v, "0");
}

static int stats(struct push *p, struct fi_courier_stats *st)
{
	memset(st, 0, sizeof(*st));
	return func_is_courier(&p->r.f) ? func_get_stats(p->r.f.ft.ep, st) : 0;
}

static int guards_intact(struct func *f, const char *mem)
{
	for (size_t i = 0; i < PAGE; i++) {
		FUNC_ASSERT(f, (uint8_t)mem[i] == GUARD, "guard byte %zu before the region is "
			    "0x%02x", i, (uint8_t)mem[i]);
		FUNC_ASSERT(f, (uint8_t)mem[PAGE + REGION + i] == GUARD, "guard byte %zu after "
			    "the region is 0x%02x", i, (uint8_t)mem[PAGE + REGION + i]);
	}
	return 0;
}

static int next_tx(struct func *f, struct func_comp *c)
{
	return func_next(f, true, c, 10000);
}

static int write_at(struct push *p, const char *src, uint64_t off, uint64_t key, void *ctx)
{
	struct func *f = &p->r.f;

	return FUNC_POST(f, fi_write(f->ft.ep, src, SZ, p->desc, f->ft.peer,
				     rma_raddr(&p->reg, off), key, ctx));
}

/* ---- target ---- */

static int target(struct push *p)
{
	struct func *f = &p->r.f;
	struct fi_courier_stats st0, st;
	uint64_t done, err, t0, dt;
	char flag;

	FUNC_CALL(f, cour_ft_barrier(&f->ft));                  /* warm-up done */
	FUNC_CALL(f, stats(p, &st0));

	/* stream */
	FUNC_CALL(f, cour_ft_barrier(&f->ft));
	if (p->counted)
		FUNC_CALL(f, rma_cntr_wait(&p->r, RMA_CNTR_RMT_WRITE, WARMUP + WRITES, 0, 10000));
	FUNC_CALL(f, cour_ft_barrier(&f->ft));                  /* the initiator saw all complete */
	for (int s = 0; s < SLOTS; s++) {
		int last = WRITES - SLOTS + s;
		const char *q = p->mem + PAGE + (size_t)s * SZ;

		for (size_t i = 0; i < SZ; i++)
			FUNC_ASSERT(f, (uint8_t)q[i] == cour_ft_pattern_byte(SEQ(last), i),
				    "slot %d byte %zu: 0x%02x, want write %d's 0x%02x", s, i,
				    (uint8_t)q[i], last, cour_ft_pattern_byte(SEQ(last), i));
	}
	FUNC_CALL(f, guards_intact(f, p->mem));
	FUNC_CALL(f, stats(p, &st));
	printf("stream: %d writes landed%s; %llu write events came from pushes\n", WRITES,
	       p->counted ? " and counted" : "",
	       (unsigned long long)(st.shm_push_notices - st0.shm_push_notices));
	if (p->push_on && p->counted)
		FUNC_ASSERT(f, st.shm_push_notices - st0.shm_push_notices == WRITES,
			    "%llu push notices, want %d",
			    (unsigned long long)(st.shm_push_notices - st0.shm_push_notices), WRITES);
	else
		FUNC_ASSERT(f, st.shm_push_notices == 0, "push notices with %s",
			    p->push_on ? "nothing counting writes" : "FI_COURIER_SHM_PUSH=0");

	/* errors: the initiator checks its completions; the guards must hold */
	FUNC_CALL(f, cour_ft_barrier(&f->ft));
	FUNC_CALL(f, guards_intact(f, p->mem));
	done = WARMUP + WRITES;
	if (p->counted) {
		rma_cntr_get(&p->r, RMA_CNTR_RMT_WRITE, &done, &err);
		FUNC_ASSERT(f, done == WARMUP + WRITES, "a failed write counted as a remote "
			    "write (%llu)", (unsigned long long)done);
	}

	/* close, while the initiator writes (counted: once 8 arrived; else after 20 ms) */
	FUNC_CALL(f, cour_ft_barrier(&f->ft));
	t0 = cour_ft_now_ns();
	while (p->counted ? done < WARMUP + WRITES + 8 : cour_ft_now_ns() - t0 < 20000000ULL) {
		FUNC_CALL(f, cour_ft_progress(&f->ft));
		if (p->counted)
			rma_cntr_get(&p->r, RMA_CNTR_RMT_WRITE, &done, &err);
		FUNC_ASSERT(f, cour_ft_now_ns() - t0 < 10000000000ULL, "the initiator's writes "
			    "stopped arriving (%llu)", (unsigned long long)done);
	}
	t0 = cour_ft_now_ns();
	rma_mr_close(&p->r, &p->mr);
	dt = cour_ft_now_ns() - t0;
	FUNC_ASSERT(f, dt < 1000000000ULL, "fi_close of the region took %llu ms",
		    (unsigned long long)(dt / 1000000));
	memset(p->mem + PAGE, REFILL, REGION);
	flag = 'C';
	FUNC_CALL(f, cour_ft_oob_send(&f->ft, &flag, 1));
	FUNC_CALL(f, cour_ft_oob_recv(&f->ft, &flag, 1));
	FUNC_ASSERT(f, flag == 'D', "got 0x%02x, want 'D'", flag);
	for (size_t i = 0; i < REGION; i++)
		FUNC_ASSERT(f, (uint8_t)p->mem[PAGE + i] == REFILL, "byte %zu of the closed region "
			    "was written after fi_close returned: 0x%02x", i,
			    (uint8_t)p->mem[PAGE + i]);
	FUNC_CALL(f, guards_intact(f, p->mem));
	printf("close: fi_close of the region under a stream of writes took %.2f ms, nothing "
	       "landed after it\n", (double)dt / 1e6);
	return 0;
}

/* ---- initiator ---- */

static int initiator(struct push *p)
{
	struct func *f = &p->r.f;
	struct fi_courier_stats st0, st;
	struct func_comp c;
	int ok = 0, failed = 0;
	char flag;

	FUNC_CALL(f, cour_ft_barrier(&f->ft));
	FUNC_CALL(f, stats(p, &st0));

	/* stream: all posted, then all completions */
	for (int i = 0; i < WRITES; i++)
		cour_ft_fill(p->buf + (size_t)i * SZ, SZ, SEQ(i));
	FUNC_CALL(f, cour_ft_barrier(&f->ft));
	for (int i = 0; i < WRITES; i++)
		FUNC_CALL(f, write_at(p, p->buf + (size_t)i * SZ, (uint64_t)(i % SLOTS) * SZ,
				      p->reg.key, &p->ctx[i]));
	for (int i = 0; i < WRITES; i++) {
		FUNC_CALL(f, next_tx(f, &c));
		FUNC_ASSERT(f, !c.is_err, "stream write %d failed: %d (%s)", i, c.err.err,
			    fi_strerror(c.err.err));
		FUNC_ASSERT(f, c.e.op_context == &p->ctx[i], "completion %d out of order", i);
		FUNC_ASSERT(f, (c.e.flags & RMA_CQ_KIND) == (FI_RMA | FI_WRITE),
			    "flags 0x%llx", (unsigned long long)c.e.flags);
	}
	FUNC_CALL(f, stats(p, &st));
	printf("stream: %d writes of %lu bytes complete, %llu pushed\n", WRITES, SZ,
	       (unsigned long long)(st.shm_rma_pushed - st0.shm_rma_pushed));
	if (p->push_on)
		FUNC_ASSERT(f, st.shm_rma_pushed - st0.shm_rma_pushed == WRITES,
			    "%llu pushed, want %d",
			    (unsigned long long)(st.shm_rma_pushed - st0.shm_rma_pushed), WRITES);
	else
		FUNC_ASSERT(f, st.shm_rma_pushed == 0, "pushes with FI_COURIER_SHM_PUSH=0");
	FUNC_CALL(f, cour_ft_barrier(&f->ft));

	/* errors */
	FUNC_CALL(f, write_at(p, p->buf, REGION - SZ / 2, p->reg.key, &p->ctx[0]));
	FUNC_CALL(f, next_tx(f, &c));
	FUNC_ASSERT(f, c.is_err && c.err.err == FI_EINVAL && c.err.op_context == &p->ctx[0],
		    "a write across the region's end: is_err %d err %d, want FI_EINVAL", c.is_err,
		    c.is_err ? c.err.err : 0);
	FUNC_CALL(f, write_at(p, p->buf, 0, p->reg.key ^ 0x5a5a0000ULL, &p->ctx[1]));
	FUNC_CALL(f, next_tx(f, &c));
	FUNC_ASSERT(f, c.is_err && c.err.err == FI_EACCES && c.err.op_context == &p->ctx[1],
		    "a write with a key never given: is_err %d err %d, want FI_EACCES",
		    c.is_err, c.is_err ? c.err.err : 0);
	printf("errors: out of bounds and unknown key refused\n");
	FUNC_CALL(f, cour_ft_barrier(&f->ft));

	/* close: write until the region is gone */
	FUNC_CALL(f, cour_ft_barrier(&f->ft));
	for (int i = 0; i < CLOSE_MAX && !failed; i++) {
		FUNC_CALL(f, write_at(p, p->buf + (size_t)(i % WRITES) * SZ,
				      (uint64_t)(i % SLOTS) * SZ, p->reg.key, &p->ctx[0]));
		FUNC_CALL(f, next_tx(f, &c));
		if (!c.is_err) {
			FUNC_ASSERT(f, !failed, "a write succeeded after one failed");
			ok++;
			continue;
		}
		FUNC_ASSERT(f, c.err.err == FI_EACCES, "write %d: err %d (%s), want FI_EACCES", i,
			    c.err.err, fi_strerror(c.err.err));
		failed++;
	}
	FUNC_ASSERT(f, failed, "%d writes and the region never closed", CLOSE_MAX);
	FUNC_CALL(f, cour_ft_oob_recv(&f->ft, &flag, 1));
	FUNC_ASSERT(f, flag == 'C', "got 0x%02x, want 'C'", flag);
	flag = 'D';
	FUNC_CALL(f, cour_ft_oob_send(&f->ft, &flag, 1));
	printf("close: %d writes before the region closed, then FI_EACCES\n", ok);
	return 0;
}

int main(int argc, char **argv)
{
	struct push *p = &push;
	struct func *f = &p->r.f;
	size_t len;
	int ret;

	ret = rma_init(&p->r, argc, argv, "rma_push", FI_RMA | FI_READ | FI_WRITE |
		       FI_REMOTE_READ | FI_REMOTE_WRITE | FI_RMA_EVENT, push_finalize, "x:",
		       push_opt, p, "  -x quiet   no FI_RMA_EVENT: nothing counts remote writes\n");
	if (ret)
		goto out;
	p->push_on = func_is_courier(f) && !env_off("FI_COURIER_SHM") &&
		     !env_off("FI_COURIER_SHM_PUSH");
	p->counted = p->r.cntr[RMA_CNTR_RMT_WRITE] != NULL;
	printf("rma_push (%s): provider %s, push %s, remote writes %scounted\n",
	       f->ft.is_server ? "target" : "initiator", f->ft.info->fabric_attr->prov_name,
	       p->push_on ? "expected" : "not expected", p->counted ? "" : "not ");
	if (!p->quiet && !p->counted && func_is_courier(f)) {
		fprintf(stderr, "rma_push: courier without FI_RMA_EVENT counters\n");
		ret = -FI_EIO;
		goto out;
	}
	len = f->ft.is_server ? REGION + 2 * PAGE : (size_t)WRITES * SZ;
	ret = posix_memalign(f->ft.is_server ? (void **)&p->mem : (void **)&p->buf, PAGE, len) ?
	      -FI_ENOMEM : 0;
	if (ret)
		goto out;
	if (f->ft.is_server) {
		memset(p->mem, GUARD, len);
		memset(p->mem + PAGE, 0, REGION);
		ret = rma_mr_reg(&p->r, p->mem + PAGE, REGION, FI_REMOTE_READ | FI_REMOTE_WRITE,
				 &p->mr, &p->reg);
		if (!ret)
			ret = rma_send_region(&p->r, &p->reg);
	} else {
		ret = rma_local_reg(&p->r, p->buf, len, &p->mr, &p->desc);
		if (!ret)
			ret = rma_recv_region(&p->r, &p->reg);
	}
	/* warm-up: small writes, so that a same-host pair has mapped its rings */
	for (int i = 0; !ret && !f->ft.is_server && i < WARMUP; i++) {
		struct func_comp c;

		ret = FUNC_POST(f, fi_write(f->ft.ep, p->buf, 64, p->desc, f->ft.peer,
					    rma_raddr(&p->reg, 0), p->reg.key, &p->ctx[0]));
		if (!ret)
			ret = next_tx(f, &c);
		if (!ret && c.is_err)
			ret = -FI_EIO;
	}
	if (!ret && f->ft.is_server && p->counted)
		ret = rma_cntr_wait(&p->r, RMA_CNTR_RMT_WRITE, WARMUP, 0, 10000);
	if (!ret)
		ret = f->ft.is_server ? target(p) : initiator(p);
	if (!ret)
		ret = rma_finish(&p->r);
out:
	rma_mr_close(&p->r, &p->mr);
	rma_close(&p->r);
	free(p->mem);
	free(p->buf);
	if (ret || f->failures) {
		fprintf(stderr, "rma_push: FAIL (%d)\n", ret);
		return 1;
	}
	printf("rma_push: PASS (%s)\n", f->ft.is_server ? "target" : "initiator");
	return 0;
}
