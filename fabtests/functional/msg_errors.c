/*
 * msg_errors: receive-side semantics and errors. Truncation (FI_ETRUNC, olen, the bytes that
 * fit, and the link still works), fi_cancel (FI_ECANCELED), FI_PEEK (FI_ENOMSG, then
 * PEEK|CLAIM and PEEK|DISCARD), directed receive (a receive for peer A ignores peer B: the
 * client opens a second endpoint), FI_MULTI_RECV (packed slices, FI_MULTI_RECV on the last)
 * and fi_cq_readfrom (the sender's fi_addr_t). The server receives, the client sends.
 */
#define _GNU_SOURCE

#include <stdlib.h>
#include <string.h>

#include "ft_func.h"

#define BIG   (1 << 20)
#define TAG_A 0xa1
#define TAG_B 0xb2
#define TAG_NONE 0xdead
#define MR_COUNT 20
#define MR_MSG 1000
#define MR_BUF (64 * 1024)
#define MR_MIN 46000	/* 19 messages leave 46536 >= MR_MIN, 20 leave 45536 < MR_MIN */

struct errs {
	struct func f;
	struct cour_ft_buf buf;		/* BIG + room */
	struct fi_context2 ctx[MR_COUNT + 8];
	/* client: the second endpoint; server: its address */
	struct fid_ep *ep2;
	fi_addr_t peer2;
};

#define CTX(e, i) ((void *)&(e)->ctx[i])

static int errs_expect(struct errs *e, bool tx, void *ctx, int err, struct func_comp *c)
{
	struct func *f = &e->f;

	FUNC_CALL(f, func_next(f, tx, c, 10000));
	FUNC_ASSERT(f, c->e.op_context == ctx, "op_context %p, want %p", c->e.op_context, ctx);
	if (!err)
		FUNC_ASSERT(f, !c->is_err, "error completion %d (%s), want success", c->err.err,
			    fi_strerror(c->err.err));
	else
		FUNC_ASSERT(f, c->is_err && c->err.err == err, "%s err %d (%s), want %d (%s)",
			    c->is_err ? "error completion" : "success", c->err.err,
			    fi_strerror(c->err.err), err, fi_strerror(err));
	return 0;
}

/* ---- client ---- */

static int errs_send(struct errs *e, struct fid_ep *ep, size_t len, uint64_t seq, uint64_t tag,
		     bool tagged)
{
	struct func *f = &e->f;
	struct func_comp c;
	char *p = e->buf.base;

	cour_ft_fill(p, len, seq);
	if (tagged)
		FUNC_CALL(f, FUNC_POST(f, fi_tsend(ep, p, len, e->buf.desc, f->ft.peer, tag,
						   CTX(e, 0))));
	else
		FUNC_CALL(f, FUNC_POST(f, fi_send(ep, p, len, e->buf.desc, f->ft.peer,
						  CTX(e, 0))));
	FUNC_CALL(f, errs_expect(e, true, CTX(e, 0), 0, &c));
	return 0;
}

static int errs_open_ep2(struct errs *e)
{
	struct func *f = &e->f;
	char name[COUR_FT_MAX_NAME];
	size_t len = sizeof(name);
	uint32_t l32;

	FUNC_CALL(f, fi_endpoint(f->ft.domain, f->ft.info, &e->ep2, NULL));
	FUNC_CALL(f, fi_ep_bind(e->ep2, &f->ft.av->fid, 0));
	FUNC_CALL(f, fi_ep_bind(e->ep2, &f->ft.txcq->fid, FI_TRANSMIT));
	FUNC_CALL(f, fi_ep_bind(e->ep2, &f->ft.rxcq->fid, FI_RECV));
	FUNC_CALL(f, fi_enable(e->ep2));
	FUNC_CALL(f, fi_getname(&e->ep2->fid, name, &len));
	l32 = (uint32_t)len;
	FUNC_CALL(f, cour_ft_oob_send(&f->ft, &l32, sizeof(l32)));
	FUNC_CALL(f, cour_ft_oob_send(&f->ft, name, len));
	return 0;
}

static int errs_client(struct errs *e)
{
	struct func *f = &e->f;
	struct fid_ep *ep = f->ft.ep;
	int i;

	/* truncation */
	FUNC_CALL(f, cour_ft_barrier(&f->ft));
	FUNC_CALL(f, errs_send(e, ep, 1000, 1, 0, false));
	FUNC_CALL(f, errs_send(e, ep, BIG, 2, 0, false));
	FUNC_CALL(f, errs_send(e, ep, 5000, 3, 0, false));
	/* peek: sent before the server looks */
	FUNC_CALL(f, cour_ft_barrier(&f->ft));
	FUNC_CALL(f, errs_send(e, ep, 1000, 10, TAG_A, true));
	FUNC_CALL(f, errs_send(e, ep, 2000, 11, TAG_B, true));
	FUNC_CALL(f, errs_send(e, ep, 3000, 12, TAG_B, true));
	FUNC_CALL(f, cour_ft_barrier(&f->ft));
	FUNC_CALL(f, cour_ft_barrier(&f->ft));
	/* directed receive */
	FUNC_CALL(f, errs_open_ep2(e));
	FUNC_CALL(f, cour_ft_barrier(&f->ft));
	FUNC_CALL(f, errs_send(e, e->ep2, 700, 20, 0, false));
	FUNC_CALL(f, cour_ft_barrier(&f->ft));
	FUNC_CALL(f, cour_ft_barrier(&f->ft));
	FUNC_CALL(f, errs_send(e, ep, 800, 21, 0, false));
	FUNC_CALL(f, cour_ft_barrier(&f->ft));
	/* multi-recv */
	FUNC_CALL(f, cour_ft_barrier(&f->ft));
	for (i = 0; i < MR_COUNT; i++)
		FUNC_CALL(f, errs_send(e, ep, MR_MSG, 100 + i, 0, false));
	FUNC_CALL(f, cour_ft_barrier(&f->ft));
	return 0;
}

/* ---- server ---- */

static int errs_trunc(struct errs *e, size_t msg_len, uint64_t seq)
{
	struct func *f = &e->f;
	struct func_comp c;
	char *p = e->buf.base;

	memset(p, 0xee, 200);
	FUNC_CALL(f, FUNC_POST(f, fi_recv(f->ft.ep, p, 100, e->buf.desc, f->ft.peer,
					  CTX(e, 1))));
	FUNC_CALL(f, errs_expect(e, false, CTX(e, 1), FI_ETRUNC, &c));
	FUNC_ASSERT(f, c.err.olen == msg_len - 100, "message %zu into 100: olen %zu, want %zu",
		    msg_len, c.err.olen, msg_len - 100);
	FUNC_ASSERT(f, c.err.len == 100, "message %zu into 100: len %zu, want 100", msg_len,
		    c.err.len);
	FUNC_ASSERT(f, (c.err.flags & (FI_RECV | FI_MSG)) == (FI_RECV | FI_MSG),
		    "flags 0x%llx", (unsigned long long)c.err.flags);
	FUNC_CALL(f, func_check_data(f, p, 100, seq, "truncated message"));
	FUNC_ASSERT(f, (uint8_t)p[100] == 0xee, "byte 100 written past the receive buffer");
	return 0;
}

static int errs_server_trunc(struct errs *e)
{
	struct func *f = &e->f;
	struct func_comp c;
	char *p = e->buf.base;

	FUNC_CALL(f, cour_ft_barrier(&f->ft));
	FUNC_CALL(f, errs_trunc(e, 1000, 1));
	FUNC_CALL(f, errs_trunc(e, BIG, 2));
	/* the link survives */
	FUNC_CALL(f, FUNC_POST(f, fi_recv(f->ft.ep, p, 8192, e->buf.desc, f->ft.peer,
					  CTX(e, 2))));
	FUNC_CALL(f, errs_expect(e, false, CTX(e, 2), 0, &c));
	FUNC_ASSERT(f, c.e.len == 5000, "len %zu after truncations, want 5000", c.e.len);
	FUNC_CALL(f, func_check_data(f, p, 5000, 3, "message after truncations"));
	return 0;
}

static int errs_server_cancel(struct errs *e)
{
	struct func *f = &e->f;
	struct func_comp c;

	FUNC_CALL(f, FUNC_POST(f, fi_trecv(f->ft.ep, e->buf.base, 100, e->buf.desc,
					   FI_ADDR_UNSPEC, TAG_NONE, 0, CTX(e, 3))));
	FUNC_CALL(f, fi_cancel(&f->ft.ep->fid, CTX(e, 3)));
	FUNC_CALL(f, errs_expect(e, false, CTX(e, 3), FI_ECANCELED, &c));
	/* cancelling what is no longer posted finds nothing, completes nothing */
	(void)fi_cancel(&f->ft.ep->fid, CTX(e, 3));
	FUNC_CALL(f, func_expect_quiet(f, false, 50));
	return 0;
}

static int errs_trecvmsg(struct errs *e, void *p, size_t len, uint64_t tag, void *ctx,
			 uint64_t flags)
{
	struct iovec iov = { p, len };
	struct fi_msg_tagged m = {
		.msg_iov = &iov, .desc = &e->buf.desc, .iov_count = 1,
		.addr = FI_ADDR_UNSPEC, .tag = tag, .ignore = 0, .context = ctx,
	};

	return FUNC_POST(&e->f, fi_trecvmsg(e->f.ft.ep, &m, flags | FI_COMPLETION));
}

static int errs_server_peek(struct errs *e)
{
	struct func *f = &e->f;
	struct func_comp c;
	char *p = e->buf.base;

	/* nothing there yet */
	FUNC_CALL(f, errs_trecvmsg(e, NULL, 0, TAG_A, CTX(e, 4), FI_PEEK));
	FUNC_CALL(f, errs_expect(e, false, CTX(e, 4), FI_ENOMSG, &c));
	FUNC_CALL(f, cour_ft_barrier(&f->ft));
	FUNC_CALL(f, cour_ft_barrier(&f->ft));	/* the client's messages were acknowledged */

	FUNC_CALL(f, errs_trecvmsg(e, NULL, 0, TAG_A, CTX(e, 5), FI_PEEK));
	FUNC_CALL(f, errs_expect(e, false, CTX(e, 5), 0, &c));
	FUNC_ASSERT(f, c.e.len == 1000 && c.e.tag == TAG_A, "peek: len %zu tag 0x%llx",
		    c.e.len, (unsigned long long)c.e.tag);
	FUNC_ASSERT(f, (c.e.flags & (FI_RECV | FI_TAGGED)) == (FI_RECV | FI_TAGGED),
		    "peek flags 0x%llx", (unsigned long long)c.e.flags);
	/* PEEK|CLAIM, then the claiming receive with the same context */
	FUNC_CALL(f, errs_trecvmsg(e, NULL, 0, TAG_A, CTX(e, 6), FI_PEEK | FI_CLAIM));
	FUNC_CALL(f, errs_expect(e, false, CTX(e, 6), 0, &c));
	FUNC_ASSERT(f, c.e.len == 1000, "peek|claim: len %zu", c.e.len);
	/* a claimed message is not there for others */
	FUNC_CALL(f, errs_trecvmsg(e, NULL, 0, TAG_A, CTX(e, 7), FI_PEEK));
	FUNC_CALL(f, errs_expect(e, false, CTX(e, 7), FI_ENOMSG, &c));
	memset(p, 0xee, 4096);
	FUNC_CALL(f, errs_trecvmsg(e, p, 4096, TAG_A, CTX(e, 6), FI_CLAIM));
	FUNC_CALL(f, errs_expect(e, false, CTX(e, 6), 0, &c));
	FUNC_ASSERT(f, c.e.len == 1000 && c.e.tag == TAG_A, "claim: len %zu tag 0x%llx",
		    c.e.len, (unsigned long long)c.e.tag);
	FUNC_CALL(f, func_check_data(f, p, 1000, 10, "claimed message"));
	/* PEEK|DISCARD drops the first TAG_B message; a receive gets the second */
	FUNC_CALL(f, errs_trecvmsg(e, NULL, 0, TAG_B, CTX(e, 4), FI_PEEK | FI_DISCARD));
	FUNC_CALL(f, errs_expect(e, false, CTX(e, 4), 0, &c));
	FUNC_ASSERT(f, c.e.len == 2000, "peek|discard: len %zu, want 2000", c.e.len);
	memset(p, 0xee, 4096);
	FUNC_CALL(f, errs_trecvmsg(e, p, 4096, TAG_B, CTX(e, 5), 0));
	FUNC_CALL(f, errs_expect(e, false, CTX(e, 5), 0, &c));
	FUNC_ASSERT(f, c.e.len == 3000, "after discard: len %zu, want 3000 (the second)",
		    c.e.len);
	FUNC_CALL(f, func_check_data(f, p, 3000, 12, "message after the discarded one"));
	FUNC_CALL(f, cour_ft_barrier(&f->ft));
	return 0;
}

/* fi_cq_readfrom straight from the CQ: no barrier runs meanwhile, so nothing else reads it */
static int errs_readfrom(struct errs *e, void *ctx, struct fi_cq_tagged_entry *ent,
			 fi_addr_t *src)
{
	struct func *f = &e->f;
	uint64_t end = cour_ft_now_ns() + 10000000000ULL;
	ssize_t ret;

	do {
		ret = fi_cq_readfrom(f->ft.rxcq, ent, 1, src);
		if (ret == 1)
			break;
		FUNC_ASSERT(f, ret == -FI_EAGAIN, "fi_cq_readfrom: %zd (%s)", ret,
			    fi_strerror((int)-ret));
		FUNC_ASSERT(f, cour_ft_now_ns() < end, "no completion for fi_cq_readfrom");
	} while (1);
	FUNC_ASSERT(f, ent->op_context == ctx, "readfrom op_context %p, want %p",
		    ent->op_context, ctx);
	return 0;
}

static int errs_server_directed(struct errs *e)
{
	struct func *f = &e->f;
	char name[COUR_FT_MAX_NAME];
	struct fi_cq_tagged_entry ent;
	fi_addr_t src;
	char *p = e->buf.base;
	uint32_t len;
	int ret;

	FUNC_CALL(f, cour_ft_oob_recv(&f->ft, &len, sizeof(len)));
	FUNC_ASSERT(f, len <= sizeof(name), "name of %u bytes", len);
	FUNC_CALL(f, cour_ft_oob_recv(&f->ft, name, len));
	ret = fi_av_insert(f->ft.av, name, 1, &e->peer2, 0, NULL);
	FUNC_ASSERT(f, ret == 1, "fi_av_insert(second endpoint): %d", ret);
	/* a receive for peer A only */
	FUNC_CALL(f, FUNC_POST(f, fi_recv(f->ft.ep, p, 4096, e->buf.desc, f->ft.peer,
					  CTX(e, 1))));
	FUNC_CALL(f, cour_ft_barrier(&f->ft));
	FUNC_CALL(f, cour_ft_barrier(&f->ft));	/* B's message has been acknowledged */
	FUNC_CALL(f, func_expect_quiet(f, false, 100));
	FUNC_CALL(f, cour_ft_barrier(&f->ft));
	FUNC_CALL(f, errs_readfrom(e, CTX(e, 1), &ent, &src));
	FUNC_ASSERT(f, ent.len == 800, "directed receive got %zu bytes, want A's 800", ent.len);
	FUNC_ASSERT(f, src == f->ft.peer, "readfrom src %llu, want A %llu",
		    (unsigned long long)src, (unsigned long long)f->ft.peer);
	FUNC_CALL(f, func_check_data(f, p, 800, 21, "directed receive"));
	/* now any source: B's message, and readfrom names B */
	FUNC_CALL(f, FUNC_POST(f, fi_recv(f->ft.ep, p + 4096, 4096, e->buf.desc, FI_ADDR_UNSPEC,
					  CTX(e, 2))));
	FUNC_CALL(f, errs_readfrom(e, CTX(e, 2), &ent, &src));
	FUNC_ASSERT(f, ent.len == 700, "any-source receive got %zu bytes, want B's 700",
		    ent.len);
	FUNC_ASSERT(f, src == e->peer2, "readfrom src %llu, want B %llu",
		    (unsigned long long)src, (unsigned long long)e->peer2);
	FUNC_CALL(f, func_check_data(f, p + 4096, 700, 20, "second endpoint's message"));
	FUNC_CALL(f, cour_ft_barrier(&f->ft));
	return 0;
}

static int errs_server_multi(struct errs *e)
{
	struct func *f = &e->f;
	struct func_comp c;
	char *p = e->buf.base;
	size_t min = MR_MIN, buf_len = MR_BUF, optlen = sizeof(min);
	struct iovec iov;
	struct fi_msg m;
	int i;

	if (fi_setopt(&f->ft.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min,
		      sizeof(min))) {
		/* some providers fix it at enable: size the buffer around theirs */
		FUNC_CALL(f, fi_getopt(&f->ft.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV,
				       &min, &optlen));
		FUNC_ASSERT(f, min >= 1 && min < BIG, "min_multi_recv %zu", min);
		buf_len = MR_COUNT * MR_MSG + min - 1;
	}
	memset(p, 0xee, buf_len);
	iov = (struct iovec){ p, buf_len };
	m = (struct fi_msg){ .msg_iov = &iov, .desc = &e->buf.desc, .iov_count = 1,
			     .addr = f->ft.peer, .context = CTX(e, 8) };
	FUNC_CALL(f, FUNC_POST(f, fi_recvmsg(f->ft.ep, &m, FI_MULTI_RECV | FI_COMPLETION)));
	FUNC_CALL(f, cour_ft_barrier(&f->ft));
	for (i = 0; i < MR_COUNT; i++) {
		FUNC_CALL(f, errs_expect(e, false, CTX(e, 8), 0, &c));
		FUNC_ASSERT(f, c.e.len == MR_MSG, "slice %d: len %zu", i, c.e.len);
		FUNC_ASSERT(f, c.e.buf == p + i * MR_MSG, "slice %d: buf %p, want %p (offset %d)",
			    i, c.e.buf, p + i * MR_MSG, i * MR_MSG);
		FUNC_CALL(f, func_check_data(f, p + i * MR_MSG, MR_MSG, 100 + i, "slice"));
		if (i < MR_COUNT - 1)
			FUNC_ASSERT(f, !(c.e.flags & FI_MULTI_RECV), "slice %d of %d carries "
				    "FI_MULTI_RECV with %zu bytes left", i, MR_COUNT,
				    buf_len - (i + 1) * MR_MSG);
		else if (!(c.e.flags & FI_MULTI_RECV)) {
			/* the release may come as a completion of its own */
			FUNC_CALL(f, errs_expect(e, false, CTX(e, 8), 0, &c));
			FUNC_ASSERT(f, (c.e.flags & FI_MULTI_RECV) && c.e.len == 0,
				    "no FI_MULTI_RECV after the last slice: flags 0x%llx "
				    "len %zu", (unsigned long long)c.e.flags, c.e.len);
		}
	}
	FUNC_ASSERT(f, (uint8_t)p[MR_COUNT * MR_MSG] == 0xee, "written past the last slice");
	FUNC_CALL(f, cour_ft_barrier(&f->ft));
	FUNC_CALL(f, func_expect_quiet(f, false, 20));
	return 0;
}

int main(int argc, char **argv)
{
	static struct errs e;
	struct func *f = &e.f;
	int ret;

	ret = func_init(f, argc, argv, "msg_errors", FI_MSG | FI_TAGGED | FI_DIRECTED_RECV |
			FI_MULTI_RECV | FI_SOURCE, FI_ORDER_SAS, NULL, NULL, NULL, "");
	if (!ret)
		ret = cour_ft_buf_alloc(&f->ft, 2 * BIG, &e.buf);
	if (!ret && f->ft.is_server) {
		ret = errs_server_trunc(&e);
		if (!ret)
			ret = errs_server_cancel(&e);
		if (!ret)
			ret = errs_server_peek(&e);
		if (!ret)
			ret = errs_server_directed(&e);
		if (!ret)
			ret = errs_server_multi(&e);
	} else if (!ret) {
		ret = errs_client(&e);
	}
	if (!ret)
		ret = func_finish(f);
	if (e.ep2)
		fi_close(&e.ep2->fid);
	cour_ft_close_ep(&f->ft);
	cour_ft_buf_free(&e.buf);
	cour_ft_close(&f->ft);
	if (ret || f->failures) {
		fprintf(stderr, "msg_errors: FAIL (%d)\n", ret);
		return 1;
	}
	printf("msg_errors: PASS (%s)\n", f->ft.is_server ? "server" : "client");
	return 0;
}
