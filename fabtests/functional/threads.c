/*
 * threads: one FI_THREAD_SAFE endpoint per process, driven by -j threads at once (default 4),
 * as an MPI_THREAD_MULTIPLE job would drive it. Every thread posts, polls both shared CQs and
 * retires whatever completion it reads, its own or another thread's.
 *
 * Client thread t, iteration i (-n, default 200), message size cycling over 0 B .. 1 MiB:
 *   - a tagged receive for the server's answer (tag t<<32|i with REPLY set), a tagged send of
 *     the pattern of (t, i), and a fetching FI_SUM of 1 on the server's counter, all in flight
 *     together; the answer must hold the pattern of (t, i) ^ REPLY, and the old value must be
 *     below threads x n;
 *   - every 4th iteration, fi_write of a slice of the server's region that only this thread
 *     touches (up to 512 KiB), then fi_read of it back, byte for byte.
 * Server thread t receives thread t's messages in order (by tag), checks length and pattern,
 * and answers each. At the end the server checks that the counter is exactly threads x n.
 * -M manual makes the threads drive progress through their CQ reads.
 */
#define _GNU_SOURCE

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ft_rma.h"

#define THR_MAX        16
#define THR_DEFAULT    4
#define THR_DEFAULT_N  200
#define THR_MSG_MAX    (1u << 20)
#define THR_SLICE      (512u << 10)
#define THR_REPLY      (1ULL << 63)
#define THR_WAIT_S     60

static const size_t thr_sizes[] = { 0, 1, 100, 4096, 9000, 40000, 300000, THR_MSG_MAX };
#define THR_NSIZES (sizeof(thr_sizes) / sizeof(thr_sizes[0]))
static const size_t thr_rma_sizes[] = { 8, 4096, 70000, THR_SLICE };
#define THR_NRMA (sizeof(thr_rma_sizes) / sizeof(thr_rma_sizes[0]))

/* One operation in flight; op_context points at ctx. */
struct thr_op {
	struct fi_context2 ctx;
	atomic_int state;		/* 0 posted, 1 done, 2 failed */
	int err;
	struct fi_cq_tagged_entry e;
};

struct thr_test {
	struct rma r;
	int nthreads;
	long n;
	uint8_t *mem;			/* per thread: send, receive, RMA out, RMA back */
	struct fid_mr *lmr;
	void *desc;
	uint64_t *counter;		/* server: the fetch-add target, after the slices */
	uint8_t *slices;		/* server: one THR_SLICE per thread */
	struct fid_mr *mr;
	struct rma_region reg;
	atomic_int failed;
	atomic_long stray;		/* completions without a context */
};

struct thr {
	struct thr_test *x;
	int id;
	uint8_t *sbuf, *rbuf, *wbuf, *bbuf;
	/* here, not on the thread's stack: a failed thread may leave them posted, and another
	 * thread may still retire them until the process exits */
	struct thr_op sop, rop, aop, mop;
	uint64_t one, old;
	int ret;
};

static int thr_opt(int opt, const char *arg, void *ctx)
{
	struct thr_test *x = ctx;
	char *end;

	if (opt != 'j')
		return -1;
	x->nthreads = (int)strtol(arg, &end, 0);
	return *end || x->nthreads < 1 || x->nthreads > THR_MAX;
}

static void thr_finalize(struct cour_ft_opts *o)
{
	o->threading = FI_THREAD_SAFE;
	o->msg_order = FI_ORDER_RAW;	/* a read after our own write sees it */
}

static double thr_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

#define THR_FAIL(t, fmt, ...) do { \
	fprintf(stderr, "threads: thread %d: " fmt "\n", (t)->id, ##__VA_ARGS__); \
	atomic_store(&(t)->x->failed, 1); \
	return -FI_EIO; \
} while (0)

/* Read what one CQ holds and retire it, whoever posted it. */
static void thr_drain(struct thr_test *x, struct fid_cq *cq)
{
	struct fi_cq_tagged_entry e[8];
	struct fi_cq_err_entry err;
	struct thr_op *op;
	ssize_t n;

	n = fi_cq_read(cq, e, 8);
	for (ssize_t k = 0; k < n; k++) {
		op = e[k].op_context;
		if (!op) {
			atomic_fetch_add(&x->stray, 1);
			continue;
		}
		op->e = e[k];
		atomic_store(&op->state, 1);
	}
	if (n != -FI_EAVAIL)
		return;
	memset(&err, 0, sizeof(err));
	if (fi_cq_readerr(cq, &err, 0) != 1)
		return;		/* another thread took it */
	op = err.op_context;
	fprintf(stderr, "threads: error completion: %d (%s), prov_errno %d\n", err.err,
		fi_strerror(err.err), err.prov_errno);
	if (!op) {
		atomic_store(&x->failed, 1);
		return;
	}
	op->err = err.err;
	atomic_store(&op->state, 2);
}

static int thr_wait(struct thr *t, struct thr_op *op, const char *what)
{
	struct cour_ft *ft = &t->x->r.f.ft;
	double end = thr_now() + THR_WAIT_S;
	unsigned spins = 0;

	while (atomic_load(&op->state) == 0) {
		thr_drain(t->x, ft->txcq);
		thr_drain(t->x, ft->rxcq);
		if ((++spins & 1023) == 0 && thr_now() > end)
			THR_FAIL(t, "%s: no completion in %d s", what, THR_WAIT_S);
		if ((spins & 1023) == 0 && atomic_load(&t->x->failed))
			return -FI_ECANCELED;	/* another thread failed: stop */
	}
	if (atomic_load(&op->state) == 2)
		THR_FAIL(t, "%s: completed with error %d (%s)", what, op->err,
			 fi_strerror(op->err));
	return 0;
}

/* Post with expr, retrying -FI_EAGAIN while retiring completions. */
#define THR_POST(t, op, expr) ({ \
	ssize_t r_; double end_ = thr_now() + THR_WAIT_S; \
	atomic_store(&(op)->state, 0); \
	while ((r_ = (expr)) == -FI_EAGAIN && thr_now() < end_) { \
		thr_drain((t)->x, (t)->x->r.f.ft.txcq); \
		thr_drain((t)->x, (t)->x->r.f.ft.rxcq); \
	} \
	if (r_) { \
		fprintf(stderr, "threads: thread %d: %s: %zd (%s)\n", (t)->id, #expr, r_, \
			fi_strerror((int)-r_)); \
		atomic_store(&(t)->x->failed, 1); \
	} \
	(int)r_; })

static uint64_t thr_seq(int id, long i)
{
	return ((uint64_t)id << 32) | (uint64_t)i;
}

static int thr_check(struct thr *t, const void *buf, size_t len, uint64_t seq, const char *what)
{
	size_t bad;

	if (!cour_ft_check(buf, len, seq, &bad))
		return 0;
	THR_FAIL(t, "%s: seq %#llx, %zu bytes: byte %zu is 0x%02x, want 0x%02x", what,
		 (unsigned long long)seq, len, bad, ((const uint8_t *)buf)[bad],
		 cour_ft_pattern_byte(seq, bad));
}

static int thr_rma_round(struct thr *t, long i, struct thr_op *op)
{
	struct thr_test *x = t->x;
	struct cour_ft *ft = &x->r.f.ft;
	size_t len = thr_rma_sizes[(i / 4 + t->id) % THR_NRMA];
	uint64_t seq = thr_seq(t->id, i) ^ 0x5a5a5a5a00000000ULL;
	uint64_t raddr = rma_raddr(&x->reg, (uint64_t)t->id * THR_SLICE);
	int ret;

	cour_ft_fill(t->wbuf, len, seq);
	ret = THR_POST(t, op, fi_write(ft->ep, t->wbuf, len, x->desc, x->r.peer[0], raddr,
				       x->reg.key, op));
	if (!ret)
		ret = thr_wait(t, op, "fi_write");
	if (ret)
		return ret;
	memset(t->bbuf, 0xee, len);
	ret = THR_POST(t, op, fi_read(ft->ep, t->bbuf, len, x->desc, x->r.peer[0], raddr,
				      x->reg.key, op));
	if (!ret)
		ret = thr_wait(t, op, "fi_read");
	return ret ? ret : thr_check(t, t->bbuf, len, seq, "read back");
}

static int thr_client(struct thr *t)
{
	struct thr_test *x = t->x;
	struct cour_ft *ft = &x->r.f.ft;
	struct thr_op *sop = &t->sop, *rop = &t->rop, *aop = &t->aop;
	uint64_t total = (uint64_t)x->nthreads * (uint64_t)x->n;
	uint64_t caddr = rma_raddr(&x->reg, (uint64_t)x->nthreads * THR_SLICE);
	int ret;

	for (long i = 0; i < x->n && !atomic_load(&x->failed); i++) {
		size_t len = thr_sizes[(i + t->id) % THR_NSIZES];
		uint64_t seq = thr_seq(t->id, i);

		ret = THR_POST(t, rop, fi_trecv(ft->ep, t->rbuf, THR_MSG_MAX, x->desc,
						 FI_ADDR_UNSPEC, seq | THR_REPLY, 0, rop));
		if (ret)
			return ret;
		cour_ft_fill(t->sbuf, len, seq);
		ret = THR_POST(t, sop, fi_tsend(ft->ep, t->sbuf, len, x->desc, x->r.peer[0], seq,
						 sop));
		if (ret)
			return ret;
		t->one = 1;
		t->old = ~0ULL;
		ret = THR_POST(t, aop, fi_fetch_atomic(ft->ep, &t->one, 1, NULL, &t->old, NULL,
							x->r.peer[0], caddr, x->reg.key,
							FI_UINT64, FI_SUM, aop));
		if (ret)
			return ret;
		if ((ret = thr_wait(t, sop, "tsend")) || (ret = thr_wait(t, aop, "fetch-add")) ||
		    (ret = thr_wait(t, rop, "trecv of the answer")))
			return ret;
		if (t->old >= total)
			THR_FAIL(t, "fetch-add %ld returned %llu, the counter ends at %llu", i,
				 (unsigned long long)t->old, (unsigned long long)total);
		if (rop->e.len != len || rop->e.tag != (seq | THR_REPLY))
			THR_FAIL(t, "answer %ld: len %zu tag %#llx, want %zu and %#llx", i,
				 rop->e.len, (unsigned long long)rop->e.tag, len,
				 (unsigned long long)(seq | THR_REPLY));
		ret = thr_check(t, t->rbuf, len, seq ^ THR_REPLY, "answer");
		if (!ret && i % 4 == 0)
			ret = thr_rma_round(t, i, &t->mop);
		if (ret)
			return ret;
	}
	return atomic_load(&x->failed) ? -FI_ECANCELED : 0;
}

static int thr_server(struct thr *t)
{
	struct thr_test *x = t->x;
	struct cour_ft *ft = &x->r.f.ft;
	struct thr_op *sop = &t->sop, *rop = &t->rop;
	int ret;

	for (long i = 0; i < x->n && !atomic_load(&x->failed); i++) {
		size_t len = thr_sizes[(i + t->id) % THR_NSIZES];
		uint64_t seq = thr_seq(t->id, i);

		ret = THR_POST(t, rop, fi_trecv(ft->ep, t->rbuf, THR_MSG_MAX, x->desc,
						 FI_ADDR_UNSPEC, seq, 0, rop));
		if (!ret)
			ret = thr_wait(t, rop, "trecv");
		if (ret)
			return ret;
		if (rop->e.len != len || rop->e.tag != seq || !(rop->e.flags & FI_TAGGED))
			THR_FAIL(t, "message %ld: len %zu tag %#llx flags %#llx, want %zu and %#llx",
				 i, rop->e.len, (unsigned long long)rop->e.tag,
				 (unsigned long long)rop->e.flags, len, (unsigned long long)seq);
		ret = thr_check(t, t->rbuf, len, seq, "message");
		if (ret)
			return ret;
		cour_ft_fill(t->sbuf, len, seq ^ THR_REPLY);
		ret = THR_POST(t, sop, fi_tsend(ft->ep, t->sbuf, len, x->desc, x->r.peer[0],
						 seq | THR_REPLY, sop));
		if (!ret)
			ret = thr_wait(t, sop, "tsend of the answer");
		if (ret)
			return ret;
	}
	return atomic_load(&x->failed) ? -FI_ECANCELED : 0;
}

static void *thr_main(void *arg)
{
	struct thr *t = arg;

	t->ret = t->x->r.f.ft.is_server ? thr_server(t) : thr_client(t);
	return NULL;
}

static int thr_run(struct thr_test *x)
{
	struct cour_ft *ft = &x->r.f.ft;
	static struct thr th[THR_MAX];	/* outlives the threads: see struct thr */
	pthread_t tid[THR_MAX];
	size_t per = 2 * THR_MSG_MAX + 2 * THR_SLICE;
	int ret = 0, started = 0;

	for (int k = 0; k < x->nthreads; k++) {
		uint8_t *base = x->mem + (size_t)k * per;

		th[k] = (struct thr){ .x = x, .id = k, .sbuf = base, .rbuf = base + THR_MSG_MAX,
				      .wbuf = base + 2 * THR_MSG_MAX,
				      .bbuf = base + 2 * THR_MSG_MAX + THR_SLICE };
	}
	ret = cour_ft_barrier(ft);
	for (int k = 0; !ret && k < x->nthreads; k++) {
		if (pthread_create(&tid[k], NULL, thr_main, &th[k])) {
			fprintf(stderr, "threads: pthread_create failed\n");
			atomic_store(&x->failed, 1);
			break;
		}
		started++;
	}
	for (int k = 0; k < started; k++) {
		pthread_join(tid[k], NULL);
		if (th[k].ret && th[k].ret != -FI_ECANCELED)
			ret = ret ? ret : th[k].ret;
	}
	if (!ret && atomic_load(&x->failed))
		ret = -FI_EIO;
	if (!ret && atomic_load(&x->stray)) {
		fprintf(stderr, "threads: %ld completions without a context\n",
			atomic_load(&x->stray));
		ret = -FI_EIO;
	}
	return ret;
}

int main(int argc, char **argv)
{
	static struct thr_test x;
	struct func *f = &x.r.f;
	struct cour_ft *ft = &f->ft;
	size_t memlen, count;
	int ret;

	x.nthreads = THR_DEFAULT;
	ret = rma_init(&x.r, argc, argv, "threads", FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC |
		       FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE, thr_finalize, "j:",
		       thr_opt, &x,
		       "  -j <count>  threads per process (default 4, at most 16); the same on "
		       "both sides\n");
	if (ret)
		goto out;
	printf("threads (%s): provider %s, %d threads, threading %d, progress %d\n",
	       ft->is_server ? "server" : "client", ft->info->fabric_attr->prov_name, x.nthreads,
	       ft->info->domain_attr->threading, ft->info->domain_attr->data_progress);
	fflush(stdout);
	if (ft->info->domain_attr->threading != FI_THREAD_SAFE) {
		fprintf(stderr, "threads: asked FI_THREAD_SAFE, got %d\n",
			ft->info->domain_attr->threading);
		ret = -FI_EINVAL;
		goto out;
	}
	if (fi_fetch_atomicvalid(ft->ep, FI_UINT64, FI_SUM, &count)) {
		fprintf(stderr, "threads: the provider lacks a fetching uint64_t FI_SUM\n");
		ret = -FI_EOPNOTSUPP;
		goto out;
	}
	x.n = ft->opts.iterations ? ft->opts.iterations : THR_DEFAULT_N;
	memlen = (size_t)x.nthreads * (2 * THR_MSG_MAX + 2 * THR_SLICE);
	if (posix_memalign((void **)&x.mem, 4096, memlen)) {
		ret = -FI_ENOMEM;
		goto out;
	}
	memset(x.mem, 0, memlen);
	ret = rma_local_reg(&x.r, x.mem, memlen, &x.lmr, &x.desc);
	if (ret)
		goto out;
	if (ft->is_server) {
		size_t rlen = (size_t)x.nthreads * THR_SLICE + 4096;

		if (posix_memalign((void **)&x.slices, 4096, rlen)) {
			ret = -FI_ENOMEM;
			goto out;
		}
		memset(x.slices, 0, rlen);
		x.counter = (uint64_t *)(x.slices + (size_t)x.nthreads * THR_SLICE);
		ret = rma_mr_reg(&x.r, x.slices, rlen, FI_REMOTE_READ | FI_REMOTE_WRITE, &x.mr,
				 &x.reg);
		if (!ret)
			ret = rma_send_region(&x.r, &x.reg);
	} else {
		ret = rma_recv_region(&x.r, &x.reg);
	}
	if (!ret)
		ret = thr_run(&x);
	if (!ret)
		ret = rma_finish(&x.r);
	if (!ret && ft->is_server &&
	    *x.counter != (uint64_t)x.nthreads * (uint64_t)x.n) {
		fprintf(stderr, "threads: counter %llu after %d x %ld fetch-adds of 1\n",
			(unsigned long long)*x.counter, x.nthreads, x.n);
		ret = -FI_EIO;
	}
out:
	rma_mr_close(&x.r, &x.mr);
	rma_mr_close(&x.r, &x.lmr);
	rma_close(&x.r);
	free(x.mem);
	free(x.slices);
	if (ret || f->failures) {
		fprintf(stderr, "threads: FAIL (%d)\n", ret);
		return 1;
	}
	printf("threads: PASS (%s, %d threads x %ld)\n", ft->is_server ? "server" : "client",
	       x.nthreads, x.n);
	return 0;
}
