/*
 * msg_basic: every send form of fi_msg and fi_tagged, at sizes from 0 bytes to 4 MiB, against
 * receives posted first (rotating through recv, recvv with 3 iovs and recvmsg); each message's
 * bytes, length, flags, tag and remote CQ data are checked. Then 100 messages of mixed sizes
 * sent before any receive is posted must all arrive, in order, intact.
 * `msg_basic [-p prov]` is the server, `msg_basic [-p prov] 127.0.0.1` the client.
 */
#define _GNU_SOURCE

#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "ft_func.h"

enum { F_SEND, F_SENDV, F_SENDMSG, F_INJECT, F_SENDDATA, F_INJECTDATA,
       F_TSEND, F_TSENDV, F_TSENDMSG, F_TINJECT, F_TSENDDATA, F_TINJECTDATA, F_NFORMS };

static const char *const form_name[F_NFORMS] = {
	"fi_send", "fi_sendv", "fi_sendmsg", "fi_inject", "fi_senddata", "fi_injectdata",
	"fi_tsend", "fi_tsendv", "fi_tsendmsg", "fi_tinject", "fi_tsenddata", "fi_tinjectdata",
};

static bool form_tagged(int k) { return k >= F_TSEND; }
static bool form_inject(int k)
{
	return k == F_INJECT || k == F_INJECTDATA || k == F_TINJECT || k == F_TINJECTDATA;
}
static bool form_data(int k)
{
	return k == F_SENDDATA || k == F_INJECTDATA || k == F_TSENDDATA || k == F_TINJECTDATA;
}

static const size_t basic_sizes[] = {
	0, 1, 4095, 4096, 65536, 65537, 1 << 20, 4 << 20,
};

#define UNEXP_COUNT 100
static const size_t unexp_sizes[] = { 0, 1, 100, 4096, 65000, 65536, 65537, 200000, 1 << 20 };
#define UNEXP_MAX (1 << 20)

#define SEQ(si, k)   ((uint64_t)(si) * 16 + (k))
#define TAG(seq)     (0x7a00000000ULL + (seq))
#define DATA(seq)    (0xda7a000000000000ULL + (seq))

struct basic {
	struct func f;
	struct cour_ft_buf buf;
	struct fi_context2 ctx[UNEXP_COUNT];
	size_t inject_size;
	bool have_data;
};

static bool form_used(const struct basic *b, int k, size_t size)
{
	if (form_inject(k) && size > b->inject_size)
		return false;
	if (form_data(k) && !b->have_data)
		return false;
	return true;
}

/* three pieces covering [base, base + len) split at the given fractions (in 1/8) */
static void split3(struct iovec *iov, char *base, size_t len, int a8, int b8)
{
	size_t a = len * a8 / 8, b = len * b8 / 8;

	iov[0] = (struct iovec){ base, a };
	iov[1] = (struct iovec){ base + a, b };
	iov[2] = (struct iovec){ base + a + b, len - a - b };
}

static int basic_post_recv(struct basic *b, int k, char *p, size_t size, uint64_t seq)
{
	struct fid_ep *ep = b->f.ft.ep;
	fi_addr_t src = b->f.ft.peer;
	void *desc[3] = { b->buf.desc, b->buf.desc, b->buf.desc };
	struct iovec iov[3];
	struct fi_msg msg;
	struct fi_msg_tagged tmsg;
	void *ctx = &b->ctx[k];

	split3(iov, p, size, 4, 2);
	switch (k % 3) {
	case 0:
		if (form_tagged(k))
			return FUNC_POST(&b->f, fi_trecv(ep, p, size, desc[0], src, TAG(seq), 0,
							 ctx));
		return FUNC_POST(&b->f, fi_recv(ep, p, size, desc[0], src, ctx));
	case 1:
		if (form_tagged(k))
			return FUNC_POST(&b->f, fi_trecvv(ep, iov, desc, 3, src, TAG(seq), 0,
							  ctx));
		return FUNC_POST(&b->f, fi_recvv(ep, iov, desc, 3, src, ctx));
	default:
		if (form_tagged(k)) {
			tmsg = (struct fi_msg_tagged){ .msg_iov = iov, .desc = desc,
				.iov_count = 3, .addr = src, .tag = TAG(seq), .ignore = 0,
				.context = ctx };
			return FUNC_POST(&b->f, fi_trecvmsg(ep, &tmsg, FI_COMPLETION));
		}
		msg = (struct fi_msg){ .msg_iov = iov, .desc = desc, .iov_count = 3,
				       .addr = src, .context = ctx };
		return FUNC_POST(&b->f, fi_recvmsg(ep, &msg, FI_COMPLETION));
	}
}

static int basic_post_send(struct basic *b, int k, char *p, size_t size, uint64_t seq)
{
	struct fid_ep *ep = b->f.ft.ep;
	fi_addr_t dst = b->f.ft.peer;
	void *d = b->buf.desc;
	void *desc[3] = { d, d, d };
	struct iovec iov[3];
	struct fi_msg msg;
	struct fi_msg_tagged tmsg;
	void *ctx = &b->ctx[k];

	split3(iov, p, size, 1, 5);
	switch (k) {
	case F_SEND:
		return FUNC_POST(&b->f, fi_send(ep, p, size, d, dst, ctx));
	case F_SENDV:
		return FUNC_POST(&b->f, fi_sendv(ep, iov, desc, 3, dst, ctx));
	case F_SENDMSG:
		msg = (struct fi_msg){ .msg_iov = iov, .desc = desc, .iov_count = 3,
				       .addr = dst, .context = ctx };
		return FUNC_POST(&b->f, fi_sendmsg(ep, &msg, FI_COMPLETION));
	case F_INJECT:
		return FUNC_POST(&b->f, fi_inject(ep, p, size, dst));
	case F_SENDDATA:
		return FUNC_POST(&b->f, fi_senddata(ep, p, size, d, DATA(seq), dst, ctx));
	case F_INJECTDATA:
		return FUNC_POST(&b->f, fi_injectdata(ep, p, size, DATA(seq), dst));
	case F_TSEND:
		return FUNC_POST(&b->f, fi_tsend(ep, p, size, d, dst, TAG(seq), ctx));
	case F_TSENDV:
		return FUNC_POST(&b->f, fi_tsendv(ep, iov, desc, 3, dst, TAG(seq), ctx));
	case F_TSENDMSG:
		tmsg = (struct fi_msg_tagged){ .msg_iov = iov, .desc = desc, .iov_count = 3,
					       .addr = dst, .tag = TAG(seq), .context = ctx };
		return FUNC_POST(&b->f, fi_tsendmsg(ep, &tmsg, FI_COMPLETION));
	case F_TINJECT:
		return FUNC_POST(&b->f, fi_tinject(ep, p, size, dst, TAG(seq)));
	case F_TSENDDATA:
		return FUNC_POST(&b->f, fi_tsenddata(ep, p, size, d, DATA(seq), dst, TAG(seq),
						     ctx));
	default:
		return FUNC_POST(&b->f, fi_tinjectdata(ep, p, size, DATA(seq), dst, TAG(seq)));
	}
}

#define CQ_KIND (FI_SEND | FI_RECV | FI_MSG | FI_TAGGED | FI_REMOTE_CQ_DATA | FI_MULTI_RECV)

static int basic_server_size(struct basic *b, int si, size_t size)
{
	struct func *f = &b->f;
	char *base = b->buf.base;
	struct func_comp c;
	int k, n = 0, idx;
	uint64_t want;

	memset(base, 0xee, size * F_NFORMS);
	for (k = 0; k < F_NFORMS; k++) {
		if (!form_used(b, k, size))
			continue;
		FUNC_CALL(f, basic_post_recv(b, k, base + k * size, size, SEQ(si, k)));
		n++;
	}
	FUNC_CALL(f, cour_ft_barrier(&f->ft));
	while (n--) {
		FUNC_CALL(f, func_next(f, false, &c, 10000));
		idx = (int)((struct fi_context2 *)c.e.op_context - b->ctx);
		FUNC_ASSERT(f, !c.is_err, "size %zu: error completion %d (%s) olen %zu", size,
			    c.err.err, fi_strerror(c.err.err), c.err.olen);
		FUNC_ASSERT(f, idx >= 0 && idx < F_NFORMS, "size %zu: unknown op_context %p",
			    size, c.e.op_context);
		k = idx;
		want = FI_RECV | (form_tagged(k) ? FI_TAGGED : FI_MSG) |
		       (form_data(k) ? FI_REMOTE_CQ_DATA : 0);
		FUNC_ASSERT(f, (c.e.flags & CQ_KIND) == want,
			    "%s size %zu: flags 0x%llx, want 0x%llx", form_name[k], size,
			    (unsigned long long)c.e.flags, (unsigned long long)want);
		FUNC_ASSERT(f, c.e.len == size, "%s: len %zu, want %zu", form_name[k], c.e.len,
			    size);
		if (form_tagged(k))
			FUNC_ASSERT(f, c.e.tag == TAG(SEQ(si, k)), "%s size %zu: tag 0x%llx",
				    form_name[k], size, (unsigned long long)c.e.tag);
		if (form_data(k))
			FUNC_ASSERT(f, c.e.data == DATA(SEQ(si, k)), "%s size %zu: data 0x%llx",
				    form_name[k], size, (unsigned long long)c.e.data);
		FUNC_CALL(f, func_check_data(f, base + k * size, size, SEQ(si, k),
					     form_name[k]));
	}
	return 0;
}

static int basic_client_size(struct basic *b, int si, size_t size)
{
	struct func *f = &b->f;
	char *base = b->buf.base;
	struct func_comp c;
	int k, n = 0, idx;
	uint64_t want;

	for (k = 0; k < F_NFORMS; k++)
		cour_ft_fill(base + k * size, size, SEQ(si, k));
	FUNC_CALL(f, cour_ft_barrier(&f->ft));
	for (k = 0; k < F_NFORMS; k++) {
		if (!form_used(b, k, size))
			continue;
		FUNC_CALL(f, basic_post_send(b, k, base + k * size, size, SEQ(si, k)));
		if (!form_inject(k))
			n++;
	}
	while (n--) {
		FUNC_CALL(f, func_next(f, true, &c, 10000));
		FUNC_ASSERT(f, !c.is_err, "size %zu: send error %d (%s)", size, c.err.err,
			    fi_strerror(c.err.err));
		idx = (int)((struct fi_context2 *)c.e.op_context - b->ctx);
		FUNC_ASSERT(f, idx >= 0 && idx < F_NFORMS && !form_inject(idx),
			    "size %zu: send completion with op_context %p", size,
			    c.e.op_context);
		want = FI_SEND | (form_tagged(idx) ? FI_TAGGED : FI_MSG);
		FUNC_ASSERT(f, (c.e.flags & CQ_KIND) == want, "%s size %zu: flags 0x%llx, "
			    "want 0x%llx", form_name[idx], size, (unsigned long long)c.e.flags,
			    (unsigned long long)want);
	}
	/* inject forms report nothing */
	FUNC_CALL(f, func_expect_quiet(f, true, 0));
	return 0;
}

static size_t unexp_size(int i)
{
	return unexp_sizes[i % COUR_FT_ARRAY_SIZE(unexp_sizes)];
}

/* The client sends everything, then both meet; only then does the server post receives. */
static int basic_unexpected(struct basic *b)
{
	struct func *f = &b->f;
	char *base = b->buf.base;
	struct func_comp c;
	size_t off[UNEXP_COUNT], total = 0;
	int i, idx;

	for (i = 0; i < UNEXP_COUNT; i++) {
		off[i] = total;
		total += f->ft.is_server ? UNEXP_MAX : unexp_size(i);
	}
	if (!f->ft.is_server) {
		for (i = 0; i < UNEXP_COUNT; i++) {
			cour_ft_fill(base + off[i], unexp_size(i), 1000 + i);
			FUNC_CALL(f, FUNC_POST(f, fi_send(f->ft.ep, base + off[i], unexp_size(i),
							  b->buf.desc, f->ft.peer,
							  &b->ctx[i])));
		}
		FUNC_CALL(f, cour_ft_barrier(&f->ft));
		for (i = 0; i < UNEXP_COUNT; i++) {
			FUNC_CALL(f, func_next(f, true, &c, 10000));
			FUNC_ASSERT(f, !c.is_err, "unexpected send %d: error %d (%s)", i,
				    c.err.err, fi_strerror(c.err.err));
		}
		return 0;
	}
	FUNC_CALL(f, cour_ft_barrier(&f->ft));
	func_sleep_ms(f, 100);	/* let everything that can arrive, arrive */
	FUNC_CALL(f, func_expect_quiet(f, false, 0));
	memset(base, 0xee, total);
	for (i = 0; i < UNEXP_COUNT; i++)
		FUNC_CALL(f, FUNC_POST(f, fi_recv(f->ft.ep, base + off[i], UNEXP_MAX, b->buf.desc,
						  f->ft.peer, &b->ctx[i])));
	for (i = 0; i < UNEXP_COUNT; i++) {
		FUNC_CALL(f, func_next(f, false, &c, 10000));
		FUNC_ASSERT(f, !c.is_err, "unexpected recv: error %d (%s)", c.err.err,
			    fi_strerror(c.err.err));
		idx = (int)((struct fi_context2 *)c.e.op_context - b->ctx);
		FUNC_ASSERT(f, idx >= 0 && idx < UNEXP_COUNT, "op_context %p", c.e.op_context);
		/* completions may come in any order; receive idx must hold message idx */
		FUNC_ASSERT(f, c.e.len == unexp_size(idx), "receive %d: len %zu, want %zu "
			    "(messages out of order?)", idx, c.e.len, unexp_size(idx));
		FUNC_ASSERT(f, (c.e.flags & CQ_KIND) == (FI_RECV | FI_MSG), "flags 0x%llx",
			    (unsigned long long)c.e.flags);
		FUNC_CALL(f, func_check_data(f, base + off[idx], c.e.len, 1000 + idx,
					     "unexpected message"));
	}
	return 0;
}

int main(int argc, char **argv)
{
	static struct basic b;
	struct func *f = &b.f;
	size_t si, max = 0, need;
	int ret;

	ret = func_init(f, argc, argv, "msg_basic", FI_MSG | FI_TAGGED, FI_ORDER_SAS, NULL, NULL,
			NULL, "");
	if (ret)
		goto out;
	b.inject_size = f->ft.info->tx_attr->inject_size;
	b.have_data = f->ft.info->domain_attr->cq_data_size >= 8;
	if (f->ft.info->tx_attr->iov_limit < 3 || f->ft.info->rx_attr->iov_limit < 3) {
		fprintf(stderr, "msg_basic: the provider takes fewer than 3 iovs\n");
		ret = -FI_ENOSYS;
		goto out;
	}
	for (si = 0; si < COUR_FT_ARRAY_SIZE(basic_sizes); si++)
		if (basic_sizes[si] <= f->ft.info->ep_attr->max_msg_size)
			max = basic_sizes[si];
	need = max * F_NFORMS > (size_t)UNEXP_COUNT * UNEXP_MAX ? max * F_NFORMS :
	       (size_t)UNEXP_COUNT * UNEXP_MAX;
	ret = cour_ft_buf_alloc(&f->ft, need, &b.buf);
	if (ret)
		goto out;
	for (si = 0; si < COUR_FT_ARRAY_SIZE(basic_sizes) && basic_sizes[si] <= max; si++) {
		ret = f->ft.is_server ? basic_server_size(&b, (int)si, basic_sizes[si]) :
					basic_client_size(&b, (int)si, basic_sizes[si]);
		if (ret)
			goto out;
	}
	ret = basic_unexpected(&b);
	if (!ret)
		ret = func_finish(f);
out:
	cour_ft_close_ep(&f->ft);
	cour_ft_buf_free(&b.buf);
	cour_ft_close(&f->ft);
	if (ret || f->failures) {
		fprintf(stderr, "msg_basic: FAIL (%d)\n", ret);
		return 1;
	}
	printf("msg_basic: PASS (%s, %zu sizes x %d forms, %d unexpected)\n",
	       f->ft.is_server ? "server" : "client", COUR_FT_ARRAY_SIZE(basic_sizes), F_NFORMS,
	       UNEXP_COUNT);
	return 0;
}
