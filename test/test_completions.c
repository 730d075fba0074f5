/*
 * Completions and target events by the book, as a table: every data-transfer call of fi_msg,
 * fi_tagged, fi_rma and fi_atomic, each *msg call with every flag a consumer passes, on an
 * initiator whose transmit CQ is bound with and without FI_SELECTIVE_COMPLETION. For each row
 * the test checks, against fi_cq(3), fi_msg(3), fi_tagged(3), fi_rma(3), fi_atomic(3),
 * fi_cntr(3) and fi_mr(3):
 *   - the initiator's transmit CQ: one entry (with exactly the flags of its kind and its
 *     context) or none: only the fi_inject* calls, and under selective completion the
 *     operations without FI_COMPLETION, are silent; the FI_INJECT *flag* is not (GASNet's
 *     small puts wait for that completion);
 *   - the initiator's counters: exactly the one of its kind moves (send, read, write);
 *   - the target's receive CQ: a receive completion, or remote CQ data of a write or atomic,
 *     with exactly the documented flags and data, else nothing;
 *   - the target's counters: recv for messages; FI_REMOTE_WRITE for writes and every atomic
 *     that writes memory (all but FI_ATOMIC_READ, failed compare-swaps included), and
 *     FI_REMOTE_READ for reads and every fetch or compare; the region's counter, bound with
 *     FI_REMOTE_WRITE as OpenSHMEM binds its heap's, with the writes;
 *   - the data: what arrived, what was read, the atomic's old and new values.
 * Two endpoints of one process over the loop wire, manual progress driven by the test.
 */
#include "fi/cour_ep.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#define MSG_LEN   48
#define REGION    65536
#define SLOT      64
#define MR_KEY    7
#define WAIT_US   5000000

enum { C_SEND, C_RECV, C_READ, C_WRITE, C_RREAD, C_RWRITE, NCNTR };
static const uint64_t cntr_flag[NCNTR] = { FI_SEND, FI_RECV, FI_READ, FI_WRITE,
					    FI_REMOTE_READ, FI_REMOTE_WRITE };
static const char *const cntr_name[NCNTR] = { "send", "recv", "read", "write", "remote read",
					       "remote write" };

struct side {
	struct fid_ep *ep;
	struct fid_cq *txcq, *rxcq;
	struct fid_cntr *cntr[NCNTR];
	fi_addr_t fa;
	uint64_t cv[NCNTR];
};

static struct {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct side s[2];             /* 0: initiator, 1: target */
	struct fid_mr *mr;
	struct fid_cntr *mr_cntr;
	char *region;
} t;

static struct cour_params saved_params;

/* ---- the two endpoints ---- */

static void side_open(int i, bool selective)
{
	struct side *s = &t.s[i];
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE };
	struct fi_cntr_attr cntr_attr = { .events = FI_CNTR_EVENTS_COMP,
					  .wait_obj = FI_WAIT_NONE };
	char name[64];
	size_t namelen = sizeof(name);

	cr_assert_eq(fi_endpoint(t.domain, t.info, &s->ep, NULL), 0);
	cr_assert_eq(fi_cq_open(t.domain, &cq_attr, &s->txcq, NULL), 0);
	cr_assert_eq(fi_cq_open(t.domain, &cq_attr, &s->rxcq, NULL), 0);
	cr_assert_eq(fi_ep_bind(s->ep, &s->txcq->fid,
				FI_TRANSMIT | (selective ? FI_SELECTIVE_COMPLETION : 0)), 0);
	cr_assert_eq(fi_ep_bind(s->ep, &s->rxcq->fid, FI_RECV), 0);
	for (int k = 0; k < NCNTR; k++) {
		cr_assert_eq(fi_cntr_open(t.domain, &cntr_attr, &s->cntr[k], NULL), 0);
		cr_assert_eq(fi_ep_bind(s->ep, &s->cntr[k]->fid, cntr_flag[k]), 0);
	}
	cr_assert_eq(fi_ep_bind(s->ep, &t.av->fid, 0), 0);
	cr_assert_eq(fi_enable(s->ep), 0);
	cr_assert_eq(fi_getname(&s->ep->fid, name, &namelen), 0);
	cr_assert_eq(fi_av_insert(t.av, name, 1, &s->fa, 0, NULL), 1);
}

static void open_all(bool selective, bool shm)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	struct fi_cntr_attr cntr_attr = { .events = FI_CNTR_EVENTS_COMP,
					  .wait_obj = FI_WAIT_NONE };

	saved_params = cour_params;
	/* shm: the real UDP wire, and the two endpoints find each other on this host after
	 * their first packets, so that small sends take the short path (mailbox or ring) */
	cour_params.wire = (char *)(shm ? "udp" : "loop");
	cour_params.shm = shm;
	cour_params.manual_thread = 0;      /* the test alone drives progress */
	cr_assert_not_null(hints);
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_RMA_EVENT | FI_READ |
		      FI_WRITE | FI_SEND | FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE;
	hints->domain_attr->mr_mode = 0;
	hints->addr_format = FI_SOCKADDR_IN;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	hints->domain_attr->control_progress = FI_PROGRESS_MANUAL;
	cr_assert_eq(cour_prov.getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &t.info), 0);
	fi_freeinfo(hints);
	cr_assert_geq(t.info->domain_attr->cq_data_size, 8);
	cr_assert_eq(cour_prov.fabric(t.info->fabric_attr, &t.fabric, NULL), 0);
	cr_assert_eq(fi_domain(t.fabric, t.info, &t.domain, NULL), 0);
	cr_assert_eq(fi_av_open(t.domain, &av_attr, &t.av, NULL), 0);
	side_open(0, selective);
	side_open(1, false);
	t.region = calloc(1, REGION);
	cr_assert_not_null(t.region);
	cr_assert_eq(fi_mr_reg(t.domain, t.region, REGION, FI_REMOTE_READ | FI_REMOTE_WRITE, 0,
			       MR_KEY, 0, &t.mr, NULL), 0);
	cr_assert_eq(fi_cntr_open(t.domain, &cntr_attr, &t.mr_cntr, NULL), 0);
	cr_assert_eq(fi_mr_bind(t.mr, &t.mr_cntr->fid, FI_REMOTE_WRITE), 0);
}

static void close_all(void)
{
	cr_assert_eq(fi_close(&t.mr->fid), 0);
	cr_assert_eq(fi_close(&t.mr_cntr->fid), 0);
	for (int i = 0; i < 2; i++) {
		struct side *s = &t.s[i];

		if (s->ep)      /* (a test may close it first) */
			cr_assert_eq(fi_close(&s->ep->fid), 0);
		for (int k = 0; k < NCNTR; k++)
			cr_assert_eq(fi_close(&s->cntr[k]->fid), 0);
		cr_assert_eq(fi_close(&s->txcq->fid), 0);
		cr_assert_eq(fi_close(&s->rxcq->fid), 0);
	}
	cr_assert_eq(fi_close(&t.av->fid), 0);
	cr_assert_eq(fi_close(&t.domain->fid), 0);
	cr_assert_eq(fi_close(&t.fabric->fid), 0);
	fi_freeinfo(t.info);
	free(t.region);
	cour_params = saved_params;
}

/* ---- the table ---- */

enum kind { K_MSG, K_TAGGED, K_READ, K_WRITE, K_ATOMIC, K_FETCH, K_COMPARE };
enum form { F_PLAIN, F_V, F_MSG, F_DATA, F_INJECT, F_INJECTDATA };

struct call {
	const char *name;
	enum kind kind;
	enum form form;
	enum fi_op op;          /* atomics */
	bool cas_fails;         /* compare: the compare value differs from memory */
};

static const struct call calls[] = {
	{ "fi_send", K_MSG, F_PLAIN }, { "fi_sendv", K_MSG, F_V }, { "fi_sendmsg", K_MSG, F_MSG },
	{ "fi_senddata", K_MSG, F_DATA }, { "fi_inject", K_MSG, F_INJECT },
	{ "fi_injectdata", K_MSG, F_INJECTDATA },
	{ "fi_tsend", K_TAGGED, F_PLAIN }, { "fi_tsendv", K_TAGGED, F_V },
	{ "fi_tsendmsg", K_TAGGED, F_MSG }, { "fi_tsenddata", K_TAGGED, F_DATA },
	{ "fi_tinject", K_TAGGED, F_INJECT }, { "fi_tinjectdata", K_TAGGED, F_INJECTDATA },
	{ "fi_read", K_READ, F_PLAIN }, { "fi_readv", K_READ, F_V },
	{ "fi_readmsg", K_READ, F_MSG },
	{ "fi_write", K_WRITE, F_PLAIN }, { "fi_writev", K_WRITE, F_V },
	{ "fi_writemsg", K_WRITE, F_MSG }, { "fi_writedata", K_WRITE, F_DATA },
	{ "fi_inject_write", K_WRITE, F_INJECT },
	{ "fi_inject_writedata", K_WRITE, F_INJECTDATA },
	{ "fi_atomic SUM", K_ATOMIC, F_PLAIN, FI_SUM },
	{ "fi_atomicv ATOMIC_WRITE", K_ATOMIC, F_V, FI_ATOMIC_WRITE },
	{ "fi_atomicmsg SUM", K_ATOMIC, F_MSG, FI_SUM },
	{ "fi_inject_atomic SUM", K_ATOMIC, F_INJECT, FI_SUM },
	{ "fi_fetch_atomic SUM", K_FETCH, F_PLAIN, FI_SUM },
	{ "fi_fetch_atomic ATOMIC_READ", K_FETCH, F_PLAIN, FI_ATOMIC_READ },
	{ "fi_fetch_atomicv ATOMIC_WRITE", K_FETCH, F_V, FI_ATOMIC_WRITE },
	{ "fi_fetch_atomicmsg SUM", K_FETCH, F_MSG, FI_SUM },
	{ "fi_fetch_atomicmsg ATOMIC_READ", K_FETCH, F_MSG, FI_ATOMIC_READ },
	{ "fi_compare_atomic CSWAP", K_COMPARE, F_PLAIN, FI_CSWAP },
	{ "fi_compare_atomic CSWAP (fails)", K_COMPARE, F_PLAIN, FI_CSWAP, true },
	{ "fi_compare_atomicv CSWAP", K_COMPARE, F_V, FI_CSWAP },
	{ "fi_compare_atomicmsg CSWAP", K_COMPARE, F_MSG, FI_CSWAP },
	{ "fi_compare_atomicmsg CSWAP (fails)", K_COMPARE, F_MSG, FI_CSWAP, true },
};

/* what *msg calls are given: every flag GASNet, MPICH, Open MPI and OpenSHMEM pass */
static const uint64_t msg_flags[] = {
	0, FI_COMPLETION, FI_INJECT, FI_INJECT | FI_COMPLETION,
	FI_INJECT | FI_DELIVERY_COMPLETE, FI_INJECT | FI_DELIVERY_COMPLETE | FI_COMPLETION,
	FI_INJECT_COMPLETE | FI_COMPLETION, FI_TRANSMIT_COMPLETE | FI_COMPLETION,
	FI_DELIVERY_COMPLETE | FI_COMPLETION, FI_REMOTE_CQ_DATA | FI_COMPLETION,
	FI_REMOTE_CQ_DATA, FI_FENCE | FI_COMPLETION,
};

#define CQ_KIND (FI_SEND | FI_RECV | FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_READ | \
		 FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA | FI_MULTI_RECV)

static bool is_msg(enum kind k) { return k == K_MSG || k == K_TAGGED; }
static bool is_atomic(enum kind k) { return k >= K_ATOMIC; }
static bool writes_target(const struct call *c)
{
	return c->kind == K_WRITE || (is_atomic(c->kind) && c->op != FI_ATOMIC_READ);
}
static bool reads_target(const struct call *c)
{
	return c->kind == K_READ || c->kind == K_FETCH || c->kind == K_COMPARE;
}

static uint64_t tx_flags(const struct call *c)
{
	switch (c->kind) {
	case K_MSG:     return FI_SEND | FI_MSG;
	case K_TAGGED:  return FI_SEND | FI_TAGGED;
	case K_READ:    return FI_RMA | FI_READ;
	case K_WRITE:   return FI_RMA | FI_WRITE;
	case K_ATOMIC:  return FI_ATOMIC | FI_WRITE;
	default:        return FI_ATOMIC | FI_READ;
	}
}

/* One completion read from a CQ, or none. */
struct seen {
	int n, nerr;
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
};

static void drain(struct fid_cq *cq, struct seen *sn)
{
	struct fi_cq_tagged_entry e;
	ssize_t r;

	while ((r = fi_cq_read(cq, &e, 1)) != -FI_EAGAIN) {
		if (r == -FI_EAVAIL) {
			memset(&sn->err, 0, sizeof(sn->err));
			cr_assert_eq(fi_cq_readerr(cq, &sn->err, 0), 1);
			sn->nerr++;
			continue;
		}
		cr_assert_eq(r, 1, "fi_cq_read: %zd", r);
		sn->e = e;
		sn->n++;
	}
}

static uint64_t cval(int side, int k)
{
	return fi_cntr_read(t.s[side].cntr[k]) - t.s[side].cv[k];
}

static void fill(char *p, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (char)(seed * 31 + i * 7 + 1);
}

/* Post row (c, flags); returns what the initiator's buffers must hold for the data checks. */
struct row_bufs {
	char src[MSG_LEN], dst[MSG_LEN];
	uint64_t operand, compare, result, old;
	struct fi_context2 ctx;
};

static ssize_t post(const struct call *c, uint64_t flags, uint64_t off, uint64_t data,
		    struct row_bufs *b)
{
	struct fid_ep *ep = t.s[0].ep;
	fi_addr_t dst = t.s[1].fa;
	struct iovec iov[2] = { { b->src, MSG_LEN / 2 }, { b->src + MSG_LEN / 2, MSG_LEN / 2 } };
	struct iovec riov[2] = { { b->dst, MSG_LEN / 3 }, { b->dst + MSG_LEN / 3,
							     MSG_LEN - MSG_LEN / 3 } };
	void *desc[2] = { NULL, NULL };
	struct fi_rma_iov rma = { .addr = off, .len = MSG_LEN, .key = MR_KEY };
	struct fi_ioc ioc = { .addr = &b->operand, .count = 1 };
	struct fi_ioc cmp = { .addr = &b->compare, .count = 1 };
	struct fi_ioc res = { .addr = &b->result, .count = 1 };
	struct fi_rma_ioc rioc = { .addr = off, .count = 1, .key = MR_KEY };
	struct fi_msg m = { .msg_iov = iov, .desc = desc, .iov_count = 2, .addr = dst,
			    .context = &b->ctx, .data = data };
	struct fi_msg_tagged tm = { .msg_iov = iov, .desc = desc, .iov_count = 2, .addr = dst,
				    .tag = 0x77, .context = &b->ctx, .data = data };
	struct fi_msg_rma rm = { .msg_iov = c->kind == K_READ ? riov : iov, .desc = desc,
				 .iov_count = 2, .addr = dst, .rma_iov = &rma, .rma_iov_count = 1,
				 .context = &b->ctx, .data = data };
	struct fi_msg_atomic am = { .msg_iov = &ioc, .desc = desc, .iov_count = 1, .addr = dst,
				    .rma_iov = &rioc, .rma_iov_count = 1, .datatype = FI_UINT64,
				    .op = c->op, .context = &b->ctx, .data = data };
	void *ctx = &b->ctx;

	switch (c->kind) {
	case K_MSG:
		switch (c->form) {
		case F_PLAIN: return fi_send(ep, b->src, MSG_LEN, NULL, dst, ctx);
		case F_V: return fi_sendv(ep, iov, desc, 2, dst, ctx);
		case F_MSG: return fi_sendmsg(ep, &m, flags);
		case F_DATA: return fi_senddata(ep, b->src, MSG_LEN, NULL, data, dst, ctx);
		case F_INJECT: return fi_inject(ep, b->src, MSG_LEN, dst);
		default: return fi_injectdata(ep, b->src, MSG_LEN, data, dst);
		}
	case K_TAGGED:
		switch (c->form) {
		case F_PLAIN: return fi_tsend(ep, b->src, MSG_LEN, NULL, dst, 0x77, ctx);
		case F_V: return fi_tsendv(ep, iov, desc, 2, dst, 0x77, ctx);
		case F_MSG: return fi_tsendmsg(ep, &tm, flags);
		case F_DATA: return fi_tsenddata(ep, b->src, MSG_LEN, NULL, data, dst, 0x77, ctx);
		case F_INJECT: return fi_tinject(ep, b->src, MSG_LEN, dst, 0x77);
		default: return fi_tinjectdata(ep, b->src, MSG_LEN, data, dst, 0x77);
		}
	case K_READ:
		switch (c->form) {
		case F_PLAIN: return fi_read(ep, b->dst, MSG_LEN, NULL, dst, off, MR_KEY, ctx);
		case F_V: return fi_readv(ep, riov, desc, 2, dst, off, MR_KEY, ctx);
		default: return fi_readmsg(ep, &rm, flags);
		}
	case K_WRITE:
		switch (c->form) {
		case F_PLAIN: return fi_write(ep, b->src, MSG_LEN, NULL, dst, off, MR_KEY, ctx);
		case F_V: return fi_writev(ep, iov, desc, 2, dst, off, MR_KEY, ctx);
		case F_MSG: return fi_writemsg(ep, &rm, flags);
		case F_DATA: return fi_writedata(ep, b->src, MSG_LEN, NULL, data, dst, off, MR_KEY,
						 ctx);
		case F_INJECT: return fi_inject_write(ep, b->src, MSG_LEN, dst, off, MR_KEY);
		default: return fi_inject_writedata(ep, b->src, MSG_LEN, data, dst, off, MR_KEY);
		}
	case K_ATOMIC:
		switch (c->form) {
		case F_PLAIN: return fi_atomic(ep, &b->operand, 1, NULL, dst, off, MR_KEY,
					       FI_UINT64, c->op, ctx);
		case F_V: return fi_atomicv(ep, &ioc, desc, 1, dst, off, MR_KEY, FI_UINT64, c->op,
					    ctx);
		case F_MSG: return fi_atomicmsg(ep, &am, flags);
		default: return fi_inject_atomic(ep, &b->operand, 1, dst, off, MR_KEY, FI_UINT64,
						 c->op);
		}
	case K_FETCH:
		switch (c->form) {
		case F_PLAIN: return fi_fetch_atomic(ep, &b->operand, 1, NULL, &b->result, NULL,
						     dst, off, MR_KEY, FI_UINT64, c->op, ctx);
		case F_V: return fi_fetch_atomicv(ep, &ioc, desc, 1, &res, desc, 1, dst, off,
						  MR_KEY, FI_UINT64, c->op, ctx);
		default: return fi_fetch_atomicmsg(ep, &am, &res, desc, 1, flags);
		}
	default:
		switch (c->form) {
		case F_PLAIN: return fi_compare_atomic(ep, &b->operand, 1, NULL, &b->compare, NULL,
						       &b->result, NULL, dst, off, MR_KEY,
						       FI_UINT64, c->op, ctx);
		case F_V: return fi_compare_atomicv(ep, &ioc, desc, 1, &cmp, desc, 1, &res, desc,
						    1, dst, off, MR_KEY, FI_UINT64, c->op, ctx);
		default: return fi_compare_atomicmsg(ep, &am, &cmp, desc, 1, &res, desc, 1,
						     flags);
		}
	}
}

static void run_row(const struct call *c, uint64_t flags, bool selective, int rowno)
{
	struct row_bufs b;
	struct seen tx = { 0 }, rx = { 0 }, txt = { 0 }, rxi = { 0 };
	uint64_t off = (uint64_t)(rowno % (REGION / SLOT)) * SLOT, data = 0xda7a0000u + rowno;
	uint64_t *word = (uint64_t *)(t.region + off), mr0 = fi_cntr_read(t.mr_cntr);
	bool msgform = c->form == F_MSG, inject = c->form == F_INJECT ||
		       c->form == F_INJECTDATA;
	bool with_data = c->form == F_DATA || c->form == F_INJECTDATA ||
			 (msgform && (flags & FI_REMOTE_CQ_DATA) && c->kind != K_READ);
	bool want_tx, want_rx;
	char rbuf[MSG_LEN + 8], what[160];
	struct fi_context2 rctx;
	int ic = is_msg(c->kind) ? C_SEND : (c->kind == K_READ || c->kind == K_FETCH ||
					       c->kind == K_COMPARE) ? C_READ : C_WRITE;
	uint64_t start;
	ssize_t ret;

	snprintf(what, sizeof(what), "%s flags %#" PRIx64 " (%s completion)", c->name,
		 flags, selective ? "selective" : "every");
	memset(&b, 0, sizeof(b));
	fill(b.src, MSG_LEN, (unsigned)rowno);
	fill(t.region + off, SLOT, (unsigned)rowno + 1000);
	*word = 40 + (uint64_t)rowno;
	b.old = *word;
	b.operand = 5;
	b.compare = c->cas_fails ? b.old + 1 : b.old;
	b.result = ~0ULL;
	for (int i = 0; i < 2; i++)
		for (int k = 0; k < NCNTR; k++)
			t.s[i].cv[k] = fi_cntr_read(t.s[i].cntr[k]);
	memset(rbuf, 0xee, sizeof(rbuf));
	if (c->kind == K_MSG)
		cr_assert_eq(fi_recv(t.s[1].ep, rbuf, MSG_LEN, NULL, FI_ADDR_UNSPEC, &rctx), 0);
	else if (c->kind == K_TAGGED)
		cr_assert_eq(fi_trecv(t.s[1].ep, rbuf, MSG_LEN, NULL, FI_ADDR_UNSPEC, 0x77, 0,
				      &rctx), 0);

	ret = post(c, flags, off, data, &b);
	cr_assert_eq(ret, 0, "%s: %zd (%s)", what, ret, fi_strerror((int)-ret));
	/* done when the initiator's counter moved (it moves for silent operations too) */
	start = cour_now_us();
	while (cval(0, ic) + fi_cntr_readerr(t.s[0].cntr[ic]) < 1 ||
	       (is_msg(c->kind) && cval(1, C_RECV) < 1)) {
		drain(t.s[0].txcq, &tx);
		drain(t.s[1].rxcq, &rx);
		cr_assert_lt(cour_now_us() - start, WAIT_US, "%s: never completed", what);
	}
	for (int i = 0; i < 200; i++) {         /* anything late or extra shows up here */
		drain(t.s[0].txcq, &tx);
		drain(t.s[1].rxcq, &rx);
		drain(t.s[1].txcq, &txt);
		drain(t.s[0].rxcq, &rxi);
	}

	/* the initiator */
	want_tx = !inject && (!selective || (msgform ? (flags & FI_COMPLETION) :
			      (t.info->tx_attr->op_flags & FI_COMPLETION)));
	cr_assert_eq(tx.nerr, 0, "%s: error completion %d (%s)", what, tx.err.err,
		     fi_strerror(tx.err.err));
	cr_assert_eq(tx.n, want_tx ? 1 : 0, "%s: %d transmit completions, want %d", what, tx.n,
		     want_tx ? 1 : 0);
	if (want_tx) {
		cr_assert_eq(tx.e.op_context, &b.ctx, "%s: op_context", what);
		cr_assert_eq(tx.e.flags & CQ_KIND, tx_flags(c), "%s: flags %#" PRIx64 ", want %#"
			     PRIx64, what, tx.e.flags & CQ_KIND, tx_flags(c));
	}
	for (int k = 0; k < NCNTR; k++)
		cr_assert_eq(cval(0, k), k == ic ? 1u : 0u, "%s: initiator %s counter moved by %"
			     PRIu64, what, cntr_name[k], cval(0, k));
	cr_assert_eq(txt.n + txt.nerr + rxi.n + rxi.nerr, 0, "%s: stray completions", what);

	/* the target */
	want_rx = is_msg(c->kind) || (with_data && (c->kind == K_WRITE || is_atomic(c->kind)));
	cr_assert_eq(rx.nerr, 0, "%s: target error completion %d", what, rx.err.err);
	cr_assert_eq(rx.n, want_rx ? 1 : 0, "%s: %d target completions, want %d", what, rx.n,
		     want_rx ? 1 : 0);
	if (want_rx) {
		uint64_t want = is_msg(c->kind) ? FI_RECV | (c->kind == K_MSG ? FI_MSG : FI_TAGGED) :
				c->kind == K_WRITE ? FI_RMA | FI_REMOTE_WRITE :
				FI_ATOMIC | (writes_target(c) ? FI_REMOTE_WRITE : 0) |
				(reads_target(c) ? FI_REMOTE_READ : 0);

		if (with_data)
			want |= FI_REMOTE_CQ_DATA;
		cr_assert_eq(rx.e.flags & CQ_KIND, want, "%s: target flags %#" PRIx64 ", want %#"
			     PRIx64, what, rx.e.flags & CQ_KIND, want);
		if (with_data)
			cr_assert_eq(rx.e.data, data, "%s: remote CQ data", what);
		if (is_msg(c->kind))
			cr_assert(rx.e.op_context == &rctx && rx.e.len == MSG_LEN,
				  "%s: receive context or length %zu", what, rx.e.len);
	}
	cr_assert_eq(cval(1, C_RECV), is_msg(c->kind) ? 1u : 0u, "%s: target recv counter", what);
	cr_assert_eq(cval(1, C_RWRITE), writes_target(c) ? 1u : 0u,
		     "%s: target FI_REMOTE_WRITE counter moved by %" PRIu64, what,
		     cval(1, C_RWRITE));
	cr_assert_eq(cval(1, C_RREAD), reads_target(c) ? 1u : 0u,
		     "%s: target FI_REMOTE_READ counter moved by %" PRIu64, what,
		     cval(1, C_RREAD));
	cr_assert_eq(fi_cntr_read(t.mr_cntr) - mr0, writes_target(c) ? 1u : 0u,
		     "%s: the region's FI_REMOTE_WRITE counter", what);
	for (int k = C_SEND; k <= C_WRITE; k++)
		if (k != C_RECV)
			cr_assert_eq(cval(1, k), 0, "%s: target %s counter", what, cntr_name[k]);

	/* the data */
	switch (c->kind) {
	case K_MSG:
	case K_TAGGED:
		cr_assert_arr_eq(rbuf, b.src, MSG_LEN, "%s: message bytes", what);
		break;
	case K_READ:
		cr_assert_arr_eq(b.dst, t.region + off, MSG_LEN, "%s: bytes read", what);
		break;
	case K_WRITE:
		cr_assert_arr_eq(t.region + off, b.src, MSG_LEN, "%s: bytes written", what);
		break;
	default: {
		uint64_t now = c->op == FI_SUM ? b.old + 5 : c->op == FI_ATOMIC_WRITE ? 5 :
			       c->op == FI_CSWAP ? (c->cas_fails ? b.old : 5) : b.old;

		cr_assert_eq(*word, now, "%s: target holds %" PRIu64 ", want %" PRIu64, what,
			     *word, now);
		if (c->kind != K_ATOMIC)
			cr_assert_eq(b.result, b.old, "%s: fetched %" PRIu64 ", want %" PRIu64, what,
				     b.result, b.old);
	}
	}
}

static int run_table(bool selective, bool shm)
{
	int rows = 0;

	open_all(selective, shm);
	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
		const struct call *c = &calls[i];

		if (c->form != F_MSG) {
			run_row(c, 0, selective, rows++);
			continue;
		}
		for (size_t j = 0; j < sizeof(msg_flags) / sizeof(msg_flags[0]); j++)
			run_row(c, msg_flags[j], selective, rows++);
	}
	if (shm) {
		struct cour_pep *a = &cour_ep_of(t.s[0].ep)->pep;

		cr_assert_not_null(a->shm_ring);
		cr_assert_gt(a->stats.shm_short, 0, "no send took the short path");
		cr_assert_gt(a->stats.shm_box, 0, "no send went through a mailbox");
		cr_log_info("%" PRIu64 " short sends, %" PRIu64 " through the mailbox\n",
			    a->stats.shm_short, a->stats.shm_box);

		/* what the mailbox does not take is refused as the generic send refuses it */
		static char big[8192];
		uint64_t sent = a->stats.tx_msgs;

		cr_assert_eq(fi_send(t.s[0].ep, big, 8, NULL, t.s[1].fa + 99, NULL), -FI_EINVAL,
			     "a send to an address not in the AV");
		cr_assert_eq(fi_tinject(t.s[0].ep, big, t.info->tx_attr->inject_size + 1,
					t.s[1].fa, 1), -FI_EINVAL, "an inject past inject_size");
		cr_assert_eq(a->stats.tx_msgs, sent, "a refused send was counted as sent");
	}
	close_all();
	return rows;
}

Test(completions, every_call_and_flag_completes_as_documented, .timeout = 60)
{
	int rows = run_table(false, false);

	cr_log_info("%d rows\n", rows);
}

/* The same table between two endpoints of one host: small messages complete at once through
 * the short path (cour_short_send, cour_msg_short_posted), which must report and count them
 * as the engine does, an inject with a counter bound too. */
Test(completions, every_call_completes_as_documented_over_shared_memory, .timeout = 60)
{
	int rows = run_table(false, true);

	cr_log_info("%d rows\n", rows);
}

Test(completions, selective_completion_reports_only_what_asks, .timeout = 60)
{
	int rows = run_table(true, false);

	cr_log_info("%d rows\n", rows);
}

/* Counters and a shared transmit context may be bound after fi_enable (Sandia OpenSHMEM binds
 * its default context's to its enabled target endpoint); a late counter counts what completes
 * from then on. A CQ, an AV or an EQ may not. */
Test(completions, counters_and_stx_bind_after_enable, .timeout = 60)
{
	struct fi_cntr_attr cntr_attr = { .events = FI_CNTR_EVENTS_COMP,
					  .wait_obj = FI_WAIT_NONE };
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE };
	struct fi_tx_attr stx_attr = { 0 };
	struct fid_cntr *late;
	struct fid_stx *stx;
	struct fid_cq *cq;
	struct fi_cq_tagged_entry e;
	char src[MSG_LEN];
	uint64_t start;

	open_all(false, false);
	cr_assert_eq(fi_cntr_open(t.domain, &cntr_attr, &late, NULL), 0);
	cr_assert_eq(fi_ep_bind(t.s[0].ep, &late->fid, FI_WRITE), 0, "a counter after enable");
	cr_assert_eq(fi_stx_context(t.domain, &stx_attr, &stx, NULL), 0);
	cr_assert_eq(fi_ep_bind(t.s[0].ep, &stx->fid, 0), 0, "an STX after enable");
	cr_assert_eq(fi_cq_open(t.domain, &cq_attr, &cq, NULL), 0);
	cr_assert_eq(fi_ep_bind(t.s[0].ep, &cq->fid, FI_TRANSMIT), -FI_EOPBADSTATE,
		     "a CQ after enable");
	cr_assert_eq(fi_ep_bind(t.s[0].ep, &t.av->fid, 0), -FI_EOPBADSTATE, "an AV after enable");

	memset(src, 0x5a, sizeof(src));
	cr_assert_eq(fi_write(t.s[0].ep, src, sizeof(src), NULL, t.s[1].fa, 0, MR_KEY, NULL), 0);
	start = cour_now_us();
	while (fi_cntr_read(late) < 1) {
		(void)fi_cq_read(t.s[0].txcq, &e, 1);
		(void)fi_cq_read(t.s[1].rxcq, &e, 1);
		cr_assert_lt(cour_now_us() - start, WAIT_US, "the write never counted");
	}
	cr_assert_eq(fi_cntr_read(late), 1);
	cr_assert_arr_eq(t.region, src, sizeof(src));
	cr_assert_eq(fi_close(&t.s[0].ep->fid), 0);   /* (before the objects it holds) */
	t.s[0].ep = NULL;
	cr_assert_eq(fi_close(&late->fid), 0);
	cr_assert_eq(fi_close(&stx->fid), 0);
	cr_assert_eq(fi_close(&cq->fid), 0);
	close_all();
}
