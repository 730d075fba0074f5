/*
 * dgram: FI_EP_DGRAM datagrams of several sizes, by fi_send, fi_inject and fi_senddata,
 * against receives posted first. Datagrams may be lost or reordered in principle; on one host
 * with the receives in place they are not, so all must arrive, each once, intact. Each one
 * names itself in its first 8 bytes, so order does not matter.
 */
#define _GNU_SOURCE

#include <stdlib.h>
#include <string.h>

#include "ft_func.h"

#define DG_COUNT 24
#define DG_SLOT  (64 * 1024)

struct dg {
	struct func f;
	struct cour_ft_buf buf;
	struct fi_context2 ctx[DG_COUNT];
	size_t max;
	size_t inject;
	bool have_data;
};

static size_t dg_size(const struct dg *d, int i)
{
	static const size_t sz[] = { 8, 9, 100, 1000, 1472, 4096, 8000, 30000 };
	size_t s = sz[i % 8];

	return s > d->max ? d->max : s;
}

/* 0..7 fi_send, 8..15 fi_inject (when small enough), 16..23 fi_senddata */
static int dg_send(struct dg *d, int i)
{
	struct func *f = &d->f;
	char *p = (char *)d->buf.base + (size_t)i * DG_SLOT;
	size_t len = dg_size(d, i);
	uint64_t seq = (uint64_t)i;

	memcpy(p, &seq, 8);
	cour_ft_fill(p + 8, len - 8, seq);
	if (i >= 16 && d->have_data)
		return FUNC_POST(f, fi_senddata(f->ft.ep, p, len, d->buf.desc, 0xd0 + seq,
						f->ft.peer, &d->ctx[i]));
	if (i >= 8 && i < 16 && len <= d->inject)
		return FUNC_POST(f, fi_inject(f->ft.ep, p, len, f->ft.peer));
	return FUNC_POST(f, fi_send(f->ft.ep, p, len, d->buf.desc, f->ft.peer, &d->ctx[i]));
}

static bool dg_completes(const struct dg *d, int i)
{
	return !(i >= 8 && i < 16 && dg_size(d, i) <= d->inject) || (i >= 16 && d->have_data);
}

static int dg_client(struct dg *d)
{
	struct func *f = &d->f;
	struct func_comp c;
	int i, n = 0;

	FUNC_CALL(f, cour_ft_barrier(&f->ft));
	for (i = 0; i < DG_COUNT; i++) {
		FUNC_CALL(f, dg_send(d, i));
		n += dg_completes(d, i);
	}
	while (n--) {
		FUNC_CALL(f, func_next(f, true, &c, 5000));
		FUNC_ASSERT(f, !c.is_err, "send error %d (%s)", c.err.err, fi_strerror(c.err.err));
		FUNC_ASSERT(f, (c.e.flags & (FI_SEND | FI_MSG)) == (FI_SEND | FI_MSG),
			    "send flags 0x%llx", (unsigned long long)c.e.flags);
	}
	FUNC_CALL(f, func_expect_quiet(f, true, 0));
	return 0;
}

static int dg_server(struct dg *d)
{
	struct func *f = &d->f;
	struct func_comp c;
	bool seen[DG_COUNT] = { 0 };
	uint64_t seq, want;
	size_t bad;
	int i, slot;
	char *p;

	for (i = 0; i < DG_COUNT; i++)
		FUNC_CALL(f, FUNC_POST(f, fi_recv(f->ft.ep, (char *)d->buf.base + (size_t)i * DG_SLOT,
						  DG_SLOT, d->buf.desc, FI_ADDR_UNSPEC,
						  &d->ctx[i])));
	FUNC_CALL(f, cour_ft_barrier(&f->ft));
	for (i = 0; i < DG_COUNT; i++) {
		FUNC_CALL(f, func_next(f, false, &c, 5000));
		FUNC_ASSERT(f, !c.is_err, "receive error %d (%s)", c.err.err,
			    fi_strerror(c.err.err));
		slot = (int)((struct fi_context2 *)c.e.op_context - d->ctx);
		FUNC_ASSERT(f, slot >= 0 && slot < DG_COUNT, "op_context %p", c.e.op_context);
		p = (char *)d->buf.base + (size_t)slot * DG_SLOT;
		FUNC_ASSERT(f, c.e.len >= 8, "datagram of %zu bytes", c.e.len);
		memcpy(&seq, p, 8);
		FUNC_ASSERT(f, seq < DG_COUNT && !seen[seq], "datagram %llu %s",
			    (unsigned long long)seq, seq < DG_COUNT ? "twice" : "unknown");
		seen[seq] = true;
		FUNC_ASSERT(f, c.e.len == dg_size(d, (int)seq), "datagram %llu: %zu bytes, want %zu",
			    (unsigned long long)seq, c.e.len, dg_size(d, (int)seq));
		want = FI_RECV | FI_MSG | (seq >= 16 && d->have_data ? FI_REMOTE_CQ_DATA : 0);
		FUNC_ASSERT(f, (c.e.flags & (FI_RECV | FI_MSG | FI_REMOTE_CQ_DATA)) == want,
			    "datagram %llu: flags 0x%llx, want 0x%llx", (unsigned long long)seq,
			    (unsigned long long)c.e.flags, (unsigned long long)want);
		if (want & FI_REMOTE_CQ_DATA)
			FUNC_ASSERT(f, c.e.data == 0xd0 + seq, "datagram %llu: data 0x%llx",
				    (unsigned long long)seq, (unsigned long long)c.e.data);
		if (cour_ft_check(p + 8, c.e.len - 8, seq, &bad))
			FUNC_ASSERT(f, false, "datagram %llu corrupt at offset %zu",
				    (unsigned long long)seq, bad + 8);
	}
	return 0;
}

static int dg_opt(int opt, const char *arg, void *ctx)
{
	return 1;
}

int main(int argc, char **argv)
{
	static struct dg d;
	struct func *f = &d.f;
	struct cour_ft_opts opts;
	int ret;

	f->prog = "dgram";
	cour_ft_opts_init(&opts);
	opts.test_name = "dgram";
	opts.timeout_s = 30;
	opts.caps = FI_MSG;
	opts.tagged = false;
	ret = cour_ft_parse_opts(&opts, argc, argv, "", dg_opt, NULL, "");
	if (ret)
		return 2;
	opts.ep_type = FI_EP_DGRAM;
	opts.tagged = false;
	ret = func_start(f, &opts);
	if (!ret) {
		d.max = f->ft.info->ep_attr->max_msg_size;
		if (d.max > DG_SLOT)
			d.max = DG_SLOT;
		d.inject = f->ft.info->tx_attr->inject_size;
		d.have_data = f->ft.info->domain_attr->cq_data_size >= 8;
		ret = cour_ft_buf_alloc(&f->ft, (size_t)DG_COUNT * DG_SLOT, &d.buf);
	}
	if (!ret)
		ret = f->ft.is_server ? dg_server(&d) : dg_client(&d);
	if (!ret)
		ret = func_finish(f);
	cour_ft_close_ep(&f->ft);
	cour_ft_buf_free(&d.buf);
	cour_ft_close(&f->ft);
	if (ret || f->failures) {
		fprintf(stderr, "dgram: FAIL (%d)\n", ret);
		return 1;
	}
	printf("dgram: PASS (%s, %d datagrams, largest %zu)\n",
	       f->ft.is_server ? "server" : "client", DG_COUNT, dg_size(&d, 7));
	return 0;
}
