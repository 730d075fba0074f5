/*
 * mr_endpoint: FI_MR_ENDPOINT between two processes; the server is the target, the client the
 * initiator (`mr_endpoint [-p prov]`, and the same with 127.0.0.1).
 *
 * The harness asks mr_mode LOCAL|VIRT_ADDR|ALLOCATED|PROV_KEY|ENDPOINT with RMA and atomic
 * caps, so courier must keep FI_MR_ENDPOINT (a provider that clears it has nothing to test
 * here: both sides say so and pass). The target opens a second endpoint B in its domain (A is
 * the harness's), a second domain with an endpoint C, and four regions:
 *   ra  bound to A and enabled            rb  bound to B and enabled
 *   rn  bound to A and never enabled      ru  never bound nor enabled
 * It first checks the calls fi_mr(3) forbids, each -FI_EINVAL with the region unchanged:
 * fi_mr_enable of ru (no endpoint), fi_mr_bind of ru to C (another domain), rn bound again
 * to A or to B, ra bound to B after fi_mr_enable.
 * The initiator, which knows A and B, then runs the cases below: ra through A and rb through B
 * work and carry the right bytes; ra through B, rb through A, rn and ru end in FI_EACCES, over
 * courier with prov_errno COUR_E_BAD_KEY and its text: to any endpoint but its own a region
 * does not exist. After each refusal a write and a read of ra through A still work.
 * At the end the target checks that its memory holds exactly the successful writes, that
 * courier counted each refusal on the endpoint it arrived at, that B refuses to close
 * (-FI_EBUSY) while rb is bound to it and closes once rb is closed, that C and the second
 * domain close (the failed binding held nothing), and that A still serves the initiator.
 */
#define _GNU_SOURCE

#include <stdlib.h>
#include <string.h>

#include "ft_rma.h"

enum { R_A, R_B, R_N, R_U, R_COUNT };
static const char *const reg_name[R_COUNT] = { "ra", "rb", "rn", "ru" };
#define REG_LEN   65536
#define REG_SEQ(k) (700 + (uint64_t)(k))
#define IO_LEN    1024
#define CASE_OFF(i) ((uint64_t)((i) + 1) * IO_LEN)		/* where case i accesses */
#define CASE_SEQ(i) (1000 + (uint64_t)(i))
#define GOOD_OFF(i) (32768 + (uint64_t)(i) * IO_LEN)		/* ra: the check after case i */
#define GOOD_SEQ(i) (2000 + (uint64_t)(i))
#define LAST_OFF  (63 * IO_LEN)				/* ra: A after B closed */
#define LAST_SEQ  3000

/* courier's prov_errno for an unknown key, and its text (fi_courier(7), ERRORS) */
#define COUR_BAD_KEY 9
#define COUR_BAD_KEY_TEXT "remote key not registered at the target"

enum { OP_WRITE, OP_READ, OP_ATOMIC, OP_FETCH };

struct mcase {
	const char *name;
	int reg;
	bool via_b;		/* addressed to endpoint B, else A */
	int op;
	bool ok;
};

static const struct mcase cases[] = {
	{ "write ra through A", R_A, false, OP_WRITE, true },
	{ "read ra through A", R_A, false, OP_READ, true },
	{ "write rb through B", R_B, true, OP_WRITE, true },
	{ "read rb through B", R_B, true, OP_READ, true },
	{ "write ra through B", R_A, true, OP_WRITE, false },
	{ "read ra through B", R_A, true, OP_READ, false },
	{ "atomic on ra through B", R_A, true, OP_ATOMIC, false },
	{ "write rb through A", R_B, false, OP_WRITE, false },
	{ "read rb through A", R_B, false, OP_READ, false },
	{ "fetch atomic on rb through A", R_B, false, OP_FETCH, false },
	{ "write rn (bound to A, not enabled)", R_N, false, OP_WRITE, false },
	{ "read rn (bound to A, not enabled)", R_N, false, OP_READ, false },
	{ "write ru (never bound)", R_U, false, OP_WRITE, false },
	{ "atomic on ru (never bound)", R_U, false, OP_ATOMIC, false },
};
#define NCASES ((int)COUR_FT_ARRAY_SIZE(cases))

struct mre {
	struct rma r;			/* r.f is the harness; the rma helpers use the rest */
	char *mem;			/* target: R_COUNT regions of REG_LEN; initiator: local */
	struct fid_mr *mr[R_COUNT];	/* initiator: [0] for FI_MR_LOCAL */
	void *desc;
	struct rma_region reg[R_COUNT];
	struct fid_ep *ep_b;		/* target: B, with its own CQ */
	struct fid_cq *cq_b;
	struct fid_domain *dom2;	/* target: another domain and its endpoint C */
	struct fid_ep *ep_c;
	fi_addr_t addr_b;		/* initiator: B */
	struct fi_context2 ctx[2];
	bool atomics;
	uint64_t ran;			/* cases run, bit per case */
};

static bool case_runs(const struct mre *e, int i)
{
	return cases[i].op < OP_ATOMIC || e->atomics;
}

/* ---- target ---- */

/* Region k, filled with its pattern; bound to ep when ep is not NULL, enabled if asked. */
static int mre_reg(struct mre *e, int k, struct fid_ep *ep, bool enable)
{
	struct func *f = &e->r.f;
	char *buf = e->mem + (size_t)k * REG_LEN;
	uint64_t key = e->r.prov_key ? 0 : e->r.next_key++;

	cour_ft_fill(buf, REG_LEN, REG_SEQ(k));
	if (ep == f->ft.ep && enable)
		return rma_mr_reg(&e->r, buf, REG_LEN, FI_REMOTE_READ | FI_REMOTE_WRITE,
				  &e->mr[k], &e->reg[k]);
	FUNC_CALL(f, fi_mr_reg(f->ft.domain, buf, REG_LEN, FI_REMOTE_READ | FI_REMOTE_WRITE, 0,
			       key, 0, &e->mr[k], NULL));
	if (ep)
		FUNC_CALL(f, fi_mr_bind(e->mr[k], &ep->fid, 0));
	if (enable)
		FUNC_CALL(f, fi_mr_enable(e->mr[k]));
	e->reg[k].addr = e->r.virt_addr ? (uint64_t)(uintptr_t)buf : 0;
	e->reg[k].key = fi_mr_key(e->mr[k]);
	e->reg[k].len = REG_LEN;
	FUNC_ASSERT(f, e->reg[k].key != FI_KEY_NOTAVAIL, "region %s: no key", reg_name[k]);
	return 0;
}

/* B in the target's domain, like A; C in a domain of its own, never enabled. */
static int mre_open_eps(struct mre *e)
{
	struct func *f = &e->r.f;
	struct cour_ft *ft = &f->ft;
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE };

	FUNC_CALL(f, fi_endpoint(ft->domain, ft->info, &e->ep_b, NULL));
	FUNC_CALL(f, fi_cq_open(ft->domain, &cq_attr, &e->cq_b, NULL));
	FUNC_CALL(f, fi_ep_bind(e->ep_b, &ft->av->fid, 0));
	FUNC_CALL(f, fi_ep_bind(e->ep_b, &e->cq_b->fid, FI_TRANSMIT | FI_RECV));
	FUNC_CALL(f, fi_enable(e->ep_b));
	FUNC_CALL(f, fi_domain(ft->fabric, ft->info, &e->dom2, NULL));
	FUNC_CALL(f, fi_endpoint(e->dom2, ft->info, &e->ep_c, NULL));
	return 0;
}

#define MRE_EXPECT_EINVAL(f, call, what) do { \
	int r_ = (call); \
	FUNC_ASSERT(f, r_ == -FI_EINVAL, "%s: %d (%s), want -FI_EINVAL", what, r_, \
		    fi_strerror(-r_)); \
} while (0)

/* The calls fi_mr(3) does not allow under FI_MR_ENDPOINT; none may change a region. */
static int mre_api_errors(struct mre *e)
{
	struct func *f = &e->r.f;
	struct fid *a = &f->ft.ep->fid, *b = &e->ep_b->fid;

	MRE_EXPECT_EINVAL(f, fi_mr_enable(e->mr[R_U]), "fi_mr_enable of a region bound to no "
			  "endpoint");
	MRE_EXPECT_EINVAL(f, fi_mr_bind(e->mr[R_U], &e->ep_c->fid, 0), "fi_mr_bind to an "
			  "endpoint of another domain");
	MRE_EXPECT_EINVAL(f, fi_mr_enable(e->mr[R_U]), "fi_mr_enable after a refused binding");
	MRE_EXPECT_EINVAL(f, fi_mr_bind(e->mr[R_N], a, 0), "fi_mr_bind to the same endpoint "
			  "twice");
	MRE_EXPECT_EINVAL(f, fi_mr_bind(e->mr[R_N], b, 0), "fi_mr_bind to a second endpoint");
	MRE_EXPECT_EINVAL(f, fi_mr_bind(e->mr[R_A], b, 0), "fi_mr_bind after fi_mr_enable");
	return 0;
}

/* The image the target's memory must show: the patterns, then every successful write. */
static void mre_expected(const struct mre *e, char *img)
{
	int i, k;

	for (k = 0; k < R_COUNT; k++)
		cour_ft_fill(img + (size_t)k * REG_LEN, REG_LEN, REG_SEQ(k));
	for (i = 0; i < NCASES; i++) {
		if (!(e->ran & (1ULL << i)))
			continue;
		if (cases[i].ok && cases[i].op == OP_WRITE)
			cour_ft_fill(img + (size_t)cases[i].reg * REG_LEN + CASE_OFF(i), IO_LEN,
				     CASE_SEQ(i));
		if (!cases[i].ok)
			cour_ft_fill(img + GOOD_OFF(i), IO_LEN, GOOD_SEQ(i));
	}
}

static int mre_check_memory(struct mre *e, const char *when)
{
	struct func *f = &e->r.f;
	const size_t total = (size_t)R_COUNT * REG_LEN;
	char *img = malloc(total);
	unsigned char want = 0;
	size_t off;

	FUNC_ASSERT(f, img, "out of memory");
	mre_expected(e, img);
	for (off = 0; off < total && e->mem[off] == img[off]; off++)
		;
	if (off < total)
		want = (unsigned char)img[off];
	free(img);
	FUNC_ASSERT(f, off == total, "%s: region %s byte %zu is 0x%02x, want 0x%02x: a refused "
		    "access changed memory, or a write was lost", when, reg_name[off / REG_LEN],
		    off % REG_LEN, (unsigned char)e->mem[off], want);
	return 0;
}

static int mre_target(struct mre *e)
{
	struct func *f = &e->r.f;
	struct cour_ft *ft = &f->ft;
	struct fi_courier_stats st;
	uint64_t want_a = 0, want_b = 0, v;
	char name[COUR_FT_MAX_NAME];
	size_t name_len = sizeof(name);
	int i, k, ret;

	FUNC_CALL(f, mre_open_eps(e));
	FUNC_CALL(f, mre_reg(e, R_A, ft->ep, true));
	FUNC_CALL(f, mre_reg(e, R_B, e->ep_b, true));
	FUNC_CALL(f, mre_reg(e, R_N, ft->ep, false));
	FUNC_CALL(f, mre_reg(e, R_U, NULL, false));
	FUNC_CALL(f, mre_api_errors(e));

	FUNC_CALL(f, fi_getname(&e->ep_b->fid, name, &name_len));
	v = name_len;
	FUNC_CALL(f, cour_ft_oob_send(ft, &v, sizeof(v)));
	FUNC_CALL(f, cour_ft_oob_send(ft, name, name_len));
	for (k = 0; k < R_COUNT; k++)
		FUNC_CALL(f, rma_send_region(&e->r, &e->reg[k]));
	FUNC_CALL(f, cour_ft_oob_recv(ft, &e->ran, sizeof(e->ran)));
	FUNC_CALL(f, cour_ft_barrier(ft));		/* every case finished */

	FUNC_CALL(f, mre_check_memory(e, "after the cases"));
	for (i = 0; i < NCASES; i++)
		if ((e->ran & (1ULL << i)) && !cases[i].ok)
			*(cases[i].via_b ? &want_b : &want_a) += 1;
	if (func_is_courier(f)) {
		FUNC_CALL(f, func_get_stats(ft->ep, &st));
		FUNC_ASSERT(f, st.rma_refused == want_a, "A counted %llu refusals, want %llu",
			    (unsigned long long)st.rma_refused, (unsigned long long)want_a);
		FUNC_CALL(f, func_get_stats(e->ep_b, &st));
		FUNC_ASSERT(f, st.rma_refused == want_b, "B counted %llu refusals, want %llu",
			    (unsigned long long)st.rma_refused, (unsigned long long)want_b);
	}

	/* rb is bound to B: B cannot go first, and goes once rb has */
	ret = fi_close(&e->ep_b->fid);
	if (!ret)
		e->ep_b = NULL;
	FUNC_ASSERT(f, ret == -FI_EBUSY, "fi_close(B) with rb bound to it: %d (%s), want "
		    "-FI_EBUSY", ret, fi_strerror(-ret));
	rma_mr_close(&e->r, &e->mr[R_B]);
	FUNC_CALL(f, fi_close(&e->ep_b->fid));
	e->ep_b = NULL;
	FUNC_CALL(f, fi_close(&e->cq_b->fid));
	e->cq_b = NULL;
	FUNC_CALL(f, fi_close(&e->ep_c->fid));
	e->ep_c = NULL;
	FUNC_CALL(f, fi_close(&e->dom2->fid));
	e->dom2 = NULL;
	FUNC_CALL(f, cour_ft_barrier(ft));		/* B is gone */
	FUNC_CALL(f, cour_ft_barrier(ft));		/* the initiator wrote through A */
	FUNC_CALL(f, func_check_data(f, e->mem + R_A * REG_LEN + LAST_OFF, IO_LEN, LAST_SEQ,
				     "ra, written through A after B closed"));
	printf("mr_endpoint: %d refusals (%llu through A, %llu through B) left memory alone; "
	       "B closed only after its region\n", (int)(want_a + want_b),
	       (unsigned long long)want_a, (unsigned long long)want_b);
	return 0;
}

/* ---- initiator ---- */

static int mre_post(struct mre *e, int op, fi_addr_t dst, uint64_t raddr, uint64_t key,
		    char *p, void *ctx)
{
	struct func *f = &e->r.f;
	struct fid_ep *ep = f->ft.ep;
	char *res = e->mem + 2 * IO_LEN;
	void *d = e->desc;

	switch (op) {
	case OP_WRITE:
		return FUNC_POST(f, fi_write(ep, p, IO_LEN, d, dst, raddr, key, ctx));
	case OP_READ:
		return FUNC_POST(f, fi_read(ep, p, IO_LEN, d, dst, raddr, key, ctx));
	case OP_ATOMIC:
		return FUNC_POST(f, fi_atomic(ep, p, 1, d, dst, raddr, key, FI_UINT64, FI_SUM,
					      ctx));
	default:
		return FUNC_POST(f, fi_fetch_atomic(ep, p, 1, d, res, d, dst, raddr, key,
						    FI_UINT64, FI_SUM, ctx));
	}
}

/* A write then a read of ra through A at off: both work and the bytes come back. */
static int mre_good(struct mre *e, uint64_t off, uint64_t seq, const char *what)
{
	struct func *f = &e->r.f;
	const struct rma_region *g = &e->reg[R_A];
	char *p = e->mem;

	cour_ft_fill(p, IO_LEN, seq);
	FUNC_CALL(f, mre_post(e, OP_WRITE, f->ft.peer, rma_raddr(g, off), g->key, p, &e->ctx[1]));
	FUNC_CALL(f, rma_expect_ok(&e->r, true, &e->ctx[1], FI_RMA | FI_WRITE, what));
	memset(p, 0, IO_LEN);
	FUNC_CALL(f, mre_post(e, OP_READ, f->ft.peer, rma_raddr(g, off), g->key, p, &e->ctx[1]));
	FUNC_CALL(f, rma_expect_ok(&e->r, true, &e->ctx[1], FI_RMA | FI_READ, what));
	return func_check_data(f, p, IO_LEN, seq, what);
}

static int mre_case(struct mre *e, int i)
{
	struct func *f = &e->r.f;
	const struct mcase *c = &cases[i];
	const struct rma_region *g = &e->reg[c->reg];
	fi_addr_t dst = c->via_b ? e->addr_b : f->ft.peer;
	bool rd = c->op == OP_READ || c->op == OP_FETCH;
	unsigned char *res = (unsigned char *)e->mem + 2 * IO_LEN;
	char *p = e->mem, text[256];
	struct func_comp comp;
	const char *s;
	int k;

	if (c->ok && c->op == OP_READ)
		memset(p, 0, IO_LEN);
	else
		cour_ft_fill(p, IO_LEN, CASE_SEQ(i));
	memset(res, 0xab, IO_LEN);
	FUNC_CALL(f, mre_post(e, c->op, dst, rma_raddr(g, CASE_OFF(i)), g->key, p, &e->ctx[0]));
	if (c->ok) {
		FUNC_CALL(f, rma_expect_ok(&e->r, true, &e->ctx[0],
					   FI_RMA | (rd ? FI_READ : FI_WRITE), c->name));
		/* a read sees the target's pattern: no case writes where another reads */
		for (k = 0; rd && k < IO_LEN; k++)
			FUNC_ASSERT(f, (uint8_t)p[k] == cour_ft_pattern_byte(REG_SEQ(c->reg),
									     CASE_OFF(i) + k),
				    "%s: byte %d is 0x%02x, want 0x%02x", c->name, k,
				    (uint8_t)p[k], cour_ft_pattern_byte(REG_SEQ(c->reg),
									CASE_OFF(i) + k));
		printf("  %-40s ok\n", c->name);
		e->ran |= 1ULL << i;
		return 0;
	}
	FUNC_CALL(f, func_next(f, true, &comp, 10000));
	FUNC_ASSERT(f, comp.is_err, "%s: succeeded, want FI_EACCES", c->name);
	FUNC_ASSERT(f, comp.err.err == FI_EACCES, "%s: err %d (%s), want FI_EACCES", c->name,
		    comp.err.err, fi_strerror(comp.err.err));
	FUNC_ASSERT(f, comp.e.op_context == &e->ctx[0], "%s: op_context %p, want %p", c->name,
		    comp.e.op_context, (void *)&e->ctx[0]);
	if (func_is_courier(f)) {
		FUNC_ASSERT(f, comp.err.prov_errno == COUR_BAD_KEY, "%s: prov_errno %d, want %d "
			    "(the bad-key refusal)", c->name, comp.err.prov_errno, COUR_BAD_KEY);
		s = fi_cq_strerror(f->ft.txcq, comp.err.prov_errno, NULL, text, sizeof(text));
		FUNC_ASSERT(f, s && !strcmp(s, COUR_BAD_KEY_TEXT), "%s: fi_cq_strerror says "
			    "\"%s\"", c->name, s ? s : "(null)");
	}
	for (k = 0; c->op == OP_FETCH && k < IO_LEN; k++)
		FUNC_ASSERT(f, res[k] == 0xab, "%s: result byte %d changed to 0x%02x", c->name, k,
			    res[k]);
	FUNC_CALL(f, func_expect_quiet(f, true, 20));
	FUNC_CALL(f, mre_good(e, GOOD_OFF(i), GOOD_SEQ(i), "ra through A after a refusal"));
	printf("  %-40s err %d (%s), prov_errno %d; A still works\n", c->name, comp.err.err,
	       fi_strerror(comp.err.err), comp.err.prov_errno);
	e->ran |= 1ULL << i;
	return 0;
}

static int mre_initiator(struct mre *e)
{
	struct func *f = &e->r.f;
	struct cour_ft *ft = &f->ft;
	char name[COUR_FT_MAX_NAME];
	uint64_t len;
	int i, k, ret;

	FUNC_CALL(f, cour_ft_oob_recv(ft, &len, sizeof(len)));
	FUNC_ASSERT(f, len > 0 && len <= sizeof(name), "B's name is %llu bytes",
		    (unsigned long long)len);
	FUNC_CALL(f, cour_ft_oob_recv(ft, name, len));
	ret = fi_av_insert(ft->av, name, 1, &e->addr_b, 0, NULL);
	FUNC_ASSERT(f, ret == 1, "fi_av_insert(B): %d", ret);
	for (k = 0; k < R_COUNT; k++)
		FUNC_CALL(f, rma_recv_region(&e->r, &e->reg[k]));
	for (i = 0; i < NCASES; i++)
		if (case_runs(e, i))
			FUNC_CALL(f, mre_case(e, i));
	FUNC_CALL(f, cour_ft_oob_send(ft, &e->ran, sizeof(e->ran)));
	FUNC_CALL(f, cour_ft_barrier(ft));
	FUNC_CALL(f, cour_ft_barrier(ft));		/* B is gone */
	FUNC_CALL(f, mre_good(e, LAST_OFF, LAST_SEQ, "ra through A after B closed"));
	return cour_ft_barrier(ft);
}

int main(int argc, char **argv)
{
	static struct mre e;
	struct func *f = &e.r.f;
	uint64_t mode;
	int ret, k;

	ret = func_init(f, argc, argv, "mr_endpoint", FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE |
			FI_REMOTE_READ | FI_REMOTE_WRITE, 0, NULL, NULL, NULL, "");
	if (ret)
		goto out;
	mode = (uint64_t)f->ft.info->domain_attr->mr_mode;
	e.r.virt_addr = mode & FI_MR_VIRT_ADDR;
	e.r.prov_key = mode & FI_MR_PROV_KEY;
	e.r.local_mr = mode & FI_MR_LOCAL;
	e.r.endpoint_mr = mode & FI_MR_ENDPOINT;
	e.r.next_key = 0x3e9d0000;
	e.atomics = (f->ft.info->caps & FI_ATOMIC) != 0;
	printf("mr_endpoint (%s): provider %s, mr_mode 0x%llx\n",
	       f->ft.is_server ? "target" : "initiator", f->ft.info->fabric_attr->prov_name,
	       (unsigned long long)mode);
	if (!e.r.endpoint_mr) {
		ret = func_is_courier(f) ? -FI_EINVAL : 0;
		printf("mr_endpoint: FI_MR_ENDPOINT asked with remote access but not returned%s\n",
		       ret ? "" : ": nothing to test over this provider");
		goto out;
	}
	ret = posix_memalign((void **)&e.mem, 4096, (size_t)R_COUNT * REG_LEN) ? -FI_ENOMEM : 0;
	if (ret)
		goto out;
	memset(e.mem, 0, (size_t)R_COUNT * REG_LEN);
	if (f->ft.is_server) {
		ret = mre_target(&e);
	} else {
		ret = rma_local_reg(&e.r, e.mem, (size_t)R_COUNT * REG_LEN, &e.mr[0], &e.desc);
		if (!ret)
			ret = mre_initiator(&e);
	}
	if (!ret)
		ret = func_finish(f);
out:
	/* regions before the endpoints they are bound to */
	for (k = 0; k < R_COUNT; k++)
		rma_mr_close(&e.r, &e.mr[k]);
	if (e.ep_b)
		fi_close(&e.ep_b->fid);
	if (e.cq_b)
		fi_close(&e.cq_b->fid);
	if (e.ep_c)
		fi_close(&e.ep_c->fid);
	if (e.dom2)
		fi_close(&e.dom2->fid);
	cour_ft_close(&f->ft);
	free(e.mem);
	if (ret || f->failures) {
		fprintf(stderr, "mr_endpoint: FAIL (%d)\n", ret);
		return 1;
	}
	printf("mr_endpoint: PASS (%s)\n", f->ft.is_server ? "target" : "initiator");
	return 0;
}
