/*
 * Functional-test helpers over the fabtests harness; see ft_func.h.
 */
#define _GNU_SOURCE

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ft_func.h"

static struct func *func_of(struct cour_ft *ft)
{
	return (struct func *)((char *)ft - offsetof(struct func, ft));
}

static struct func_comp *func_q_push(struct func *f, struct func_queue *q)
{
	if (q->tail - q->head >= FUNC_QLEN) {
		/* a test that lets this many pile up is broken: say so, then drop the oldest */
		fprintf(stderr, "%s: completion queue overflow\n", f->prog);
		f->failures++;
		q->head++;
	}
	return &q->ent[q->tail++ % FUNC_QLEN];
}

static void func_tx_cb(struct cour_ft *ft, const struct fi_cq_tagged_entry *comp)
{
	struct func *f = func_of(ft);
	struct func_comp *c = func_q_push(f, &f->txq);

	memset(c, 0, sizeof(*c));
	c->e = *comp;
}

static void func_rx_cb(struct cour_ft *ft, const struct fi_cq_tagged_entry *comp)
{
	struct func *f = func_of(ft);
	struct func_comp *c = func_q_push(f, &f->rxq);

	memset(c, 0, sizeof(*c));
	c->e = *comp;
}

static int func_err_cb(struct cour_ft *ft, struct fid_cq *cq, const struct fi_cq_err_entry *err)
{
	struct func *f = func_of(ft);
	struct func_comp *c = func_q_push(f, cq == ft->txcq ? &f->txq : &f->rxq);

	memset(c, 0, sizeof(*c));
	c->is_err = true;
	c->err = *err;
	/* err_data points into the provider's CQ and is not ours to keep */
	c->err.err_data = NULL;
	c->err.err_data_size = 0;
	c->e.op_context = err->op_context;
	c->e.flags = err->flags;
	c->e.len = err->len;
	c->e.buf = err->buf;
	c->e.data = err->data;
	c->e.tag = err->tag;
	return 0;
}

void func_use_queues(struct func *f)
{
	f->ft.tx_cb = func_tx_cb;
	f->ft.rx_cb = func_rx_cb;
	f->ft.err_cb = func_err_cb;
}

bool func_is_courier(const struct func *f)
{
	return !strcmp(f->ft.info->fabric_attr->prov_name, "courier");
}

int func_start(struct func *f, struct cour_ft_opts *opts)
{
	const char *got;
	int ret;

	ret = cour_ft_start(&f->ft, opts);
	if (ret)
		return ret;
	func_use_queues(f);
	got = f->ft.info->fabric_attr->prov_name;
	if (opts->prov_name && strcmp(got, opts->prov_name)) {
		fprintf(stderr, "%s: asked for provider %s, fi_getinfo picked %s "
			"(set FI_PROVIDER=^ofi_rxd,ofi_rxm to hide layered ones)\n",
			f->prog, opts->prov_name, got);
		return -FI_ENODATA;
	}
	return 0;
}

int func_init(struct func *f, int argc, char **argv, const char *name, uint64_t caps,
	      uint64_t order, const char *prog_optstr, cour_ft_opt_cb prog_opt, void *ctx,
	      const char *prog_usage)
{
	struct cour_ft_opts opts;
	int ret;

	memset(f, 0, sizeof(*f));
	f->prog = name;
	cour_ft_opts_init(&opts);
	opts.test_name = name;
	opts.timeout_s = 30;
	opts.caps = caps;
	opts.msg_order = order;
	ret = cour_ft_parse_opts(&opts, argc, argv, prog_optstr, prog_opt, ctx, prog_usage);
	if (ret)
		return ret > 0 ? -FI_EINVAL : ret;
	opts.tagged = (caps & FI_TAGGED) != 0;
	return func_start(f, &opts);
}

int func_finish(struct func *f)
{
	return cour_ft_finish(&f->ft);
}

int func_exit(struct func *f, struct cour_ft_buf *buf, int ret)
{
	cour_ft_close_ep(&f->ft);
	cour_ft_buf_free(buf);
	cour_ft_close(&f->ft);
	if (ret || f->failures) {
		fprintf(stderr, "%s: FAIL (%d)\n", f->prog, ret);
		return 1;
	}
	printf("%s: %s passed\n", f->prog, f->ft.is_server ? "server" : "client");
	return 0;
}

int func_next(struct func *f, bool tx, struct func_comp *c, int timeout_ms)
{
	struct func_queue *q = tx ? &f->txq : &f->rxq;
	uint64_t end = cour_ft_now_ns() + (uint64_t)timeout_ms * 1000000ULL;
	unsigned int spins = 0;
	int ret;

	for (;;) {
		if (q->tail != q->head) {
			*c = q->ent[q->head++ % FUNC_QLEN];
			return 0;
		}
		ret = cour_ft_progress(&f->ft);
		if (ret)
			return ret;
		if ((++spins & 255) == 0) {
			ret = cour_ft_check_deadline(&f->ft, tx ? "a send completion" :
						     "a receive completion");
			if (ret)
				return ret;
			if (cour_ft_now_ns() > end)
				return -FI_ETIMEDOUT;
		}
	}
}

int func_expect_quiet(struct func *f, bool tx, int ms)
{
	struct func_comp c;
	int ret;

	ret = func_next(f, tx, &c, ms);
	if (ret == -FI_ETIMEDOUT)
		return 0;
	if (ret)
		return ret;
	fprintf(stderr, "%s: unexpected %s completion: %s, err %d, ctx %p, len %zu, "
		"flags 0x%llx, tag 0x%llx\n", f->prog, tx ? "send" : "receive",
		c.is_err ? "error" : "success", c.is_err ? c.err.err : 0, c.e.op_context,
		c.e.len, (unsigned long long)c.e.flags, (unsigned long long)c.e.tag);
	f->failures++;
	return -FI_EIO;
}

int func_post_ret(struct func *f, const char *what, ssize_t ret)
{
	if (ret)
		fprintf(stderr, "%s: %s: %zd (%s)\n", f->prog, what, ret,
			fi_strerror((int)-ret));
	return (int)ret;
}

int func_check_data(struct func *f, const void *buf, size_t len, uint64_t seq, const char *what)
{
	size_t bad;

	if (!cour_ft_check(buf, len, seq, &bad))
		return 0;
	fprintf(stderr, "%s: %s: data mismatch in message %llu of %zu bytes at offset %zu: "
		"got 0x%02x, expected 0x%02x\n", f->prog, what, (unsigned long long)seq, len, bad,
		((const uint8_t *)buf)[bad], cour_ft_pattern_byte(seq, bad));
	f->failures++;
	return -FI_EIO;
}

int func_get_stats(struct fid_ep *ep, struct fi_courier_stats *st)
{
	struct fi_courier_ops_ep *ops;
	int ret;

	ret = fi_open_ops(&ep->fid, FI_COURIER_EP_OPS, 0, (void **)&ops, NULL);
	if (ret)
		return ret;
	if (ops->size < sizeof(*ops) || !ops->get_stats)
		return -FI_ENOSYS;
	return ops->get_stats(ep, st, sizeof(*st));
}

void func_sleep_ms(struct func *f, int ms)
{
	uint64_t end = cour_ft_now_ns() + (uint64_t)ms * 1000000ULL;
	struct timespec ts = { 0, 200000 };

	while (cour_ft_now_ns() < end) {
		(void)cour_ft_progress(&f->ft);
		nanosleep(&ts, NULL);
	}
}

int func_read_one(struct func *f, struct fid_cq *cq, struct fi_cq_tagged_entry *e,
		  const char *what)
{
	struct fi_cq_err_entry err = { 0 };
	unsigned int spins = 0;
	ssize_t ret;

	for (;;) {
		ret = fi_cq_read(cq, e, 1);
		if (ret == 1)
			return 0;
		if (ret == -FI_EAVAIL) {
			ret = fi_cq_readerr(cq, &err, 0);
			FUNC_ASSERT(f, false, "%s: error completion %d (%s), ctx %p, tag 0x%llx",
				    what, err.err, fi_strerror(err.err), err.op_context,
				    (unsigned long long)err.tag);
		}
		FUNC_ASSERT(f, ret == -FI_EAGAIN, "%s: fi_cq_read: %zd", what, ret);
		if ((++spins & 255) == 0)
			FUNC_CALL(f, cour_ft_check_deadline(&f->ft, what));
	}
}
