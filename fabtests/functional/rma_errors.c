/*
 * rma_errors: remote access errors of fi_rma and fi_atomic between two processes; the server
 * is the target, the client the initiator (`rma_errors [-p prov] [-k basic|scalable]`, and the
 * same with 127.0.0.1).
 *
 * The target registers five regions: ok (read-write, for the operations that must work), rw
 * (read-write, the one accessed out of bounds), ro (FI_REMOTE_READ only), wo (FI_REMOTE_WRITE
 * only) and cl, which it closes right after sending its key. The initiator then tries each
 * case below; each must end in an error completion with the exact err, for courier also the
 * exact prov_errno and its fi_cq_strerror text, and no other completion; fetching atomics
 * must leave the result buffer alone. Right after each case a write and a read of the ok
 * region must succeed and carry the right bytes: the link survives. At the end the target
 * checks that no refused access changed its memory, that its FI_REMOTE_WRITE/READ counters
 * counted only the successful operations, that no remote CQ data came from a refused
 * writedata, and over courier that it counted every refusal (rma_refused); the initiator
 * checks its counters' success and error counts.
 */
#define _GNU_SOURCE

#include <stdlib.h>
#include <string.h>

#include "ft_rma.h"

enum { R_OK, R_RW, R_RO, R_WO, R_CL, R_COUNT };
static const size_t reg_off[R_COUNT] = { 0, 65536, 327680, 331776, 335872 };
static const size_t reg_len[R_COUNT] = { 65536, 262144, 4096, 4096, 4096 };
static const uint64_t reg_access[R_COUNT] = {
	FI_REMOTE_READ | FI_REMOTE_WRITE, FI_REMOTE_READ | FI_REMOTE_WRITE, FI_REMOTE_READ,
	FI_REMOTE_WRITE, FI_REMOTE_READ | FI_REMOTE_WRITE,
};
#define BUF_LEN  (335872 + 4096)
#define REG_SEQ(i) (900 + (uint64_t)(i))
#define GOOD_LEN 512
#define GOOD_SEQ(i) (1000 + (uint64_t)(i))

/* courier's prov_errno values and texts (fi_courier(7), ERRORS) */
#define COUR_BAD_KEY 9
#define COUR_BOUNDS  10
#define COUR_ACCESS  11
static const char *const cour_text[] = {
	[COUR_BAD_KEY] = "remote key not registered at the target",
	[COUR_BOUNDS] = "remote access outside the registered region",
	[COUR_ACCESS] = "region not registered for this kind of remote access",
};

enum { OP_WRITE, OP_READ, OP_WDATA, OP_INJECT, OP_ATOMIC, OP_FETCH, OP_CSWAP };

struct ecase {
	const char *name;
	int op;
	int reg;
	long off;		/* from the region's start; may be negative */
	size_t len;		/* bytes (atomics: a multiple of 8, uint64 elements) */
	bool bad_key;
	int err;
	int prov_errno;
};

#define BIG 200000
static const struct ecase cases[] = {
	{ "write, bad key", OP_WRITE, R_OK, 0, 64, true, FI_EACCES, COUR_BAD_KEY },
	{ "read, bad key", OP_READ, R_OK, 0, 64, true, FI_EACCES, COUR_BAD_KEY },
	{ "writedata, bad key", OP_WDATA, R_OK, 0, 64, true, FI_EACCES, COUR_BAD_KEY },
	{ "inject write, bad key", OP_INJECT, R_OK, 0, 16, true, FI_EACCES, COUR_BAD_KEY },
	{ "write, end out of bounds", OP_WRITE, R_RW, 262144 - 100, 200, false, FI_EINVAL,
	  COUR_BOUNDS },
	{ "write of 200000 bytes, end out of bounds", OP_WRITE, R_RW, 262144 - 150000, BIG,
	  false, FI_EINVAL, COUR_BOUNDS },
	{ "write, one byte before the start", OP_WRITE, R_RW, -1, 16, false, FI_EINVAL,
	  COUR_BOUNDS },
	{ "read, end out of bounds", OP_READ, R_RW, 262144 - 10, 20, false, FI_EINVAL,
	  COUR_BOUNDS },
	{ "read of 200000 bytes, end out of bounds", OP_READ, R_RW, 262144 - 150000, BIG,
	  false, FI_EINVAL, COUR_BOUNDS },
	{ "write to a read-only region", OP_WRITE, R_RO, 0, 64, false, FI_EACCES, COUR_ACCESS },
	{ "read from a write-only region", OP_READ, R_WO, 0, 64, false, FI_EACCES, COUR_ACCESS },
	{ "write to a closed region", OP_WRITE, R_CL, 0, 64, false, FI_EACCES, COUR_BAD_KEY },
	{ "read from a closed region", OP_READ, R_CL, 0, 64, false, FI_EACCES, COUR_BAD_KEY },
	{ "atomic, bad key", OP_ATOMIC, R_OK, 0, 8, true, FI_EACCES, COUR_BAD_KEY },
	{ "atomic to a read-only region", OP_ATOMIC, R_RO, 0, 8, false, FI_EACCES, COUR_ACCESS },
	{ "fetch atomic on a write-only region", OP_FETCH, R_WO, 0, 8, false, FI_EACCES,
	  COUR_ACCESS },
	{ "compare atomic, end out of bounds", OP_CSWAP, R_RW, 262144 - 4, 8, false, FI_EINVAL,
	  COUR_BOUNDS },
	{ "fetch atomic on a closed region", OP_FETCH, R_CL, 0, 16, false, FI_EACCES,
	  COUR_BAD_KEY },
};
#define NCASES ((int)COUR_FT_ARRAY_SIZE(cases))

struct errs {
	struct rma r;
	char *buf;			/* target: the regions; initiator: local memory */
	struct fid_mr *mr[R_COUNT];	/* target's regions; initiator: [0] for FI_MR_LOCAL */
	void *desc;
	struct rma_region reg[R_COUNT];
	struct fi_context2 ctx[2];
	uint64_t data_mask;
	bool atomics;
	uint64_t ran;			/* cases run, bit per case */
	uint64_t good_w, good_r, err_w, err_r;
};

static bool is_read_op(int op)
{
	return op == OP_READ || op == OP_FETCH || op == OP_CSWAP;
}

static bool case_runs(const struct errs *e, const struct ecase *c, size_t inject_size)
{
	if (c->op == OP_WDATA && !e->data_mask)
		return false;
	if (c->op == OP_INJECT && c->len > inject_size)
		return false;
	if (c->op >= OP_ATOMIC && !e->atomics)
		return false;
	return true;
}

static int errs_post(struct errs *e, const struct ecase *c, uint64_t raddr, uint64_t key)
{
	struct func *f = &e->r.f;
	struct fid_ep *ep = f->ft.ep;
	fi_addr_t dst = f->ft.peer;
	char *p = e->buf, *res = e->buf + BIG, *cmp = e->buf + BIG + 4096;
	void *ctx = &e->ctx[0], *d = e->desc;
	size_t n = c->len / 8;

	switch (c->op) {
	case OP_WRITE:
		return FUNC_POST(f, fi_write(ep, p, c->len, d, dst, raddr, key, ctx));
	case OP_READ:
		return FUNC_POST(f, fi_read(ep, p, c->len, d, dst, raddr, key, ctx));
	case OP_WDATA:
		return FUNC_POST(f, fi_writedata(ep, p, c->len, d, 0x5eed & e->data_mask, dst,
						 raddr, key, ctx));
	case OP_INJECT:
		return FUNC_POST(f, fi_inject_write(ep, p, c->len, dst, raddr, key));
	case OP_ATOMIC:
		return FUNC_POST(f, fi_atomic(ep, p, n, d, dst, raddr, key, FI_UINT64, FI_SUM,
					      ctx));
	case OP_FETCH:
		return FUNC_POST(f, fi_fetch_atomic(ep, p, n, d, res, d, dst, raddr, key,
						    FI_UINT64, FI_SUM, ctx));
	default:
		return FUNC_POST(f, fi_compare_atomic(ep, p, n, d, cmp, d, res, d, dst, raddr, key,
						      FI_UINT64, FI_CSWAP, ctx));
	}
}

/* A write and a read of the ok region right after case i: both work, the bytes are right. */
static int errs_good(struct errs *e, int i)
{
	struct func *f = &e->r.f;
	struct rma_region *g = &e->reg[R_OK];
	uint64_t raddr = rma_raddr(g, (uint64_t)i * GOOD_LEN);
	char *p = e->buf;

	cour_ft_fill(p, GOOD_LEN, GOOD_SEQ(i));
	FUNC_CALL(f, FUNC_POST(f, fi_write(f->ft.ep, p, GOOD_LEN, e->desc, f->ft.peer, raddr,
					   g->key, &e->ctx[1])));
	FUNC_CALL(f, rma_expect_ok(&e->r, true, &e->ctx[1], FI_RMA | FI_WRITE,
				   "the write after an error"));
	memset(p, 0, GOOD_LEN);
	FUNC_CALL(f, FUNC_POST(f, fi_read(f->ft.ep, p, GOOD_LEN, e->desc, f->ft.peer, raddr,
					  g->key, &e->ctx[1])));
	FUNC_CALL(f, rma_expect_ok(&e->r, true, &e->ctx[1], FI_RMA | FI_READ,
				   "the read after an error"));
	FUNC_CALL(f, func_check_data(f, p, GOOD_LEN, GOOD_SEQ(i), "read after an error"));
	e->good_w++;
	e->good_r++;
	return 0;
}

static int errs_case(struct errs *e, int i)
{
	struct func *f = &e->r.f;
	const struct ecase *c = &cases[i];
	struct rma_region *g = &e->reg[c->reg];
	uint64_t key = g->key, raddr = g->addr + (uint64_t)c->off;
	unsigned char *res = (unsigned char *)e->buf + BIG;
	char text[256];
	const char *s;
	struct func_comp comp;
	uint64_t want_flags;
	int k;

	if (c->bad_key) {
		key ^= 0x5a5a5a5a5a5a5a5aULL;
		for (k = 0; k < R_COUNT; k++)
			FUNC_ASSERT(f, key != e->reg[k].key, "the bad key is region %d's", k);
	}
	cour_ft_fill(e->buf, c->len, 77);
	memset(res, 0xab, 4096);
	memset(res + 4096, 0, 4096);
	FUNC_CALL(f, errs_post(e, c, raddr, key));
	FUNC_CALL(f, func_next(f, true, &comp, 10000));
	FUNC_ASSERT(f, comp.is_err, "%s: succeeded, want err %d (%s)", c->name, c->err,
		    fi_strerror(c->err));
	FUNC_ASSERT(f, comp.err.err == c->err, "%s: err %d (%s), want %d (%s)", c->name,
		    comp.err.err, fi_strerror(comp.err.err), c->err, fi_strerror(c->err));
	if (c->op != OP_INJECT)
		FUNC_ASSERT(f, comp.e.op_context == &e->ctx[0], "%s: op_context %p, want %p",
			    c->name, comp.e.op_context, (void *)&e->ctx[0]);
	if (func_is_courier(f)) {
		FUNC_ASSERT(f, comp.err.prov_errno == c->prov_errno, "%s: prov_errno %d, want %d",
			    c->name, comp.err.prov_errno, c->prov_errno);
		s = fi_cq_strerror(f->ft.txcq, comp.err.prov_errno, NULL, text, sizeof(text));
		FUNC_ASSERT(f, s && !strcmp(s, cour_text[c->prov_errno]),
			    "%s: fi_cq_strerror says \"%s\", want \"%s\"", c->name, s ? s : "(null)",
			    cour_text[c->prov_errno]);
		want_flags = (c->op >= OP_ATOMIC ? FI_ATOMIC : FI_RMA) |
			     (is_read_op(c->op) ? FI_READ : FI_WRITE);
		FUNC_ASSERT(f, (comp.e.flags & RMA_CQ_KIND) == want_flags,
			    "%s: error entry flags 0x%llx, want 0x%llx", c->name,
			    (unsigned long long)comp.e.flags, (unsigned long long)want_flags);
	}
	for (k = 0; (c->op == OP_FETCH || c->op == OP_CSWAP) && k < 4096; k++)
		FUNC_ASSERT(f, res[k] == 0xab, "%s: result buffer byte %d changed to 0x%02x",
			    c->name, k, res[k]);
	FUNC_CALL(f, func_expect_quiet(f, true, 20));
	if (is_read_op(c->op))
		e->err_r++;
	else
		e->err_w++;
	FUNC_CALL(f, rma_cntr_wait(&e->r, RMA_CNTR_WRITE, e->good_w, e->err_w, 2000));
	FUNC_CALL(f, rma_cntr_wait(&e->r, RMA_CNTR_READ, e->good_r, e->err_r, 2000));
	FUNC_CALL(f, errs_good(e, i));
	FUNC_CALL(f, rma_cntr_wait(&e->r, RMA_CNTR_WRITE, e->good_w, e->err_w, 2000));
	FUNC_CALL(f, rma_cntr_wait(&e->r, RMA_CNTR_READ, e->good_r, e->err_r, 2000));
	e->ran |= 1ULL << i;
	printf("  %-45s err %d (%s), prov_errno %d: ok, and the link works\n", c->name,
	       comp.err.err, fi_strerror(comp.err.err), comp.err.prov_errno);
	return 0;
}

static int errs_initiator(struct errs *e)
{
	struct func *f = &e->r.f;
	size_t inject_size = f->ft.info->tx_attr->inject_size;
	int i, k;

	for (k = 0; k < R_COUNT; k++)
		FUNC_CALL(f, rma_recv_region(&e->r, &e->reg[k]));
	FUNC_CALL(f, cour_ft_barrier(&f->ft));	/* the target closed cl */
	for (i = 0; i < NCASES; i++)
		if (case_runs(e, &cases[i], inject_size))
			FUNC_CALL(f, errs_case(e, i));
	FUNC_CALL(f, cour_ft_oob_send(&f->ft, &e->ran, sizeof(e->ran)));
	return cour_ft_barrier(&f->ft);
}

/* Region k still holds what the target put there; else say which bytes changed. */
static int errs_untouched(struct errs *e, int k)
{
	struct func *f = &e->r.f;
	const unsigned char *p = (const unsigned char *)e->buf + reg_off[k];
	size_t i, first = reg_len[k], last = 0, n = 0;

	for (i = 0; i < reg_len[k]; i++) {
		if (p[i] == cour_ft_pattern_byte(REG_SEQ(k), i))
			continue;
		first = i < first ? i : first;
		last = i;
		n++;
	}
	FUNC_ASSERT(f, n == 0, "region %d (%zu bytes) changed by refused accesses: %zu bytes "
		    "differ, from offset %zu to %zu", k, reg_len[k], n, first, last);
	return 0;
}

static int errs_target(struct errs *e)
{
	struct func *f = &e->r.f;
	struct fi_courier_stats st;
	uint64_t v, err, nerr = 0, ngood = 0;
	int i, k;
	char what[64];

	for (k = 0; k < R_COUNT; k++) {
		cour_ft_fill(e->buf + reg_off[k], reg_len[k], REG_SEQ(k));
		FUNC_CALL(f, rma_mr_reg(&e->r, e->buf + reg_off[k], reg_len[k], reg_access[k],
					&e->mr[k], &e->reg[k]));
		FUNC_CALL(f, rma_send_region(&e->r, &e->reg[k]));
	}
	rma_mr_close(&e->r, &e->mr[R_CL]);
	if (!e->r.prov_key) {
		/* fi_mr(3): a requested key already in use is -FI_ENOKEY */
		struct fid_mr *dup = NULL;

		k = fi_mr_reg(f->ft.domain, e->buf + reg_off[R_CL], reg_len[R_CL], FI_REMOTE_READ,
			      0, e->reg[R_OK].key, 0, &dup, NULL);
		if (!k)
			fi_close(&dup->fid);
		FUNC_ASSERT(f, k == -FI_ENOKEY, "registering key 0x%llx twice: %d, want %d "
			    "(-FI_ENOKEY)", (unsigned long long)e->reg[R_OK].key, k, -FI_ENOKEY);
	}
	FUNC_CALL(f, cour_ft_barrier(&f->ft));
	FUNC_CALL(f, cour_ft_oob_recv(&f->ft, &e->ran, sizeof(e->ran)));
	FUNC_CALL(f, cour_ft_barrier(&f->ft));	/* every case finished */

	for (i = 0; i < NCASES; i++) {
		if (!(e->ran & (1ULL << i)))
			continue;
		nerr++;
		ngood++;
		snprintf(what, sizeof(what), "ok region after case %d", i);
		FUNC_CALL(f, func_check_data(f, e->buf + reg_off[R_OK] + (size_t)i * GOOD_LEN,
					     GOOD_LEN, GOOD_SEQ(i), what));
	}
	for (k = R_RW; k < R_COUNT; k++)
		FUNC_CALL(f, errs_untouched(e, k));
	rma_cntr_get(&e->r, RMA_CNTR_RMT_WRITE, &v, &err);
	FUNC_ASSERT(f, !e->r.cntr[RMA_CNTR_RMT_WRITE] || (v == ngood && err == 0),
		    "FI_REMOTE_WRITE counter %llu (errors %llu), want %llu: refused writes counted?",
		    (unsigned long long)v, (unsigned long long)err, (unsigned long long)ngood);
	rma_cntr_get(&e->r, RMA_CNTR_RMT_READ, &v, &err);
	FUNC_ASSERT(f, !e->r.cntr[RMA_CNTR_RMT_READ] || (v == ngood && err == 0),
		    "FI_REMOTE_READ counter %llu (errors %llu), want %llu: refused reads counted?",
		    (unsigned long long)v, (unsigned long long)err, (unsigned long long)ngood);
	FUNC_CALL(f, func_expect_quiet(f, false, 20));
	if (func_is_courier(f)) {
		FUNC_CALL(f, func_get_stats(f->ft.ep, &st));
		FUNC_ASSERT(f, st.rma_refused == nerr, "courier counted %llu refusals, want %llu",
			    (unsigned long long)st.rma_refused, (unsigned long long)nerr);
	}
	printf("rma_errors: %llu cases; target memory, counters and CQ untouched by them\n",
	       (unsigned long long)nerr);
	return 0;
}

int main(int argc, char **argv)
{
	static struct errs e;
	struct func *f = &e.r.f;
	size_t cq_data;
	int ret, k;

	ret = rma_init(&e.r, argc, argv, "rma_errors", FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE |
		       FI_REMOTE_READ | FI_REMOTE_WRITE | FI_RMA_EVENT, NULL, NULL, NULL, NULL,
		       NULL);
	if (ret)
		goto out;
	cq_data = f->ft.info->domain_attr->cq_data_size;
	e.data_mask = cq_data >= 8 ? ~0ULL : cq_data ? (1ULL << (8 * cq_data)) - 1 : 0;
	e.atomics = (f->ft.info->caps & FI_ATOMIC) != 0;
	printf("rma_errors (%s): provider %s, key mode %s, mr_mode 0x%x\n",
	       f->ft.is_server ? "target" : "initiator", f->ft.info->fabric_attr->prov_name,
	       e.r.keymode == RMA_KEYS_BASIC ? "basic" : "scalable",
	       f->ft.info->domain_attr->mr_mode);
	ret = posix_memalign((void **)&e.buf, 4096, BUF_LEN) ? -FI_ENOMEM : 0;
	if (ret)
		goto out;
	memset(e.buf, 0, BUF_LEN);
	if (f->ft.is_server) {
		ret = errs_target(&e);
	} else {
		ret = rma_local_reg(&e.r, e.buf, BUF_LEN, &e.mr[0], &e.desc);
		if (!ret)
			ret = errs_initiator(&e);
	}
	if (!ret)
		ret = rma_finish(&e.r);
out:
	for (k = 0; k < R_COUNT; k++)
		rma_mr_close(&e.r, &e.mr[k]);
	rma_close(&e.r);
	free(e.buf);
	if (ret || f->failures) {
		fprintf(stderr, "rma_errors: FAIL (%d)\n", ret);
		return 1;
	}
	printf("rma_errors: PASS (%s)\n", f->ft.is_server ? "target" : "initiator");
	return 0;
}
