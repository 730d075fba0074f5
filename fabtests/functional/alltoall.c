/*
 * alltoall: 32 endpoints, 16 in each of the two processes, all in one AV; every endpoint
 * sends one message to each of the 31 others (in its own process and in the other), with a
 * size, tag and content that name the pair, and every message must arrive exactly once, at
 * the right endpoint, intact. Endpoints' names travel over the oob channel.
 */
#define _GNU_SOURCE

#include <stdlib.h>
#include <string.h>

#include "ft_func.h"

#define A2A_LOCAL  16
#define A2A_TOTAL  (2 * A2A_LOCAL)
#define A2A_SLOT   4096
#define A2A_SEQ(i, j) ((uint64_t)(i) * 64 + (j))
#define A2A_SIZE(i, j) ((size_t)(1000 + 37 * (i) + (j)))

struct a2a {
	struct func f;
	struct cour_ft_buf buf;		/* [local][peer] receive slots, then send slots */
	struct fid_av *av;
	struct fid_cq *txcq, *rxcq;
	struct fid_ep *ep[A2A_LOCAL];
	fi_addr_t addr[A2A_TOTAL];
	int first;			/* global index of our endpoint 0 */
	struct fi_context2 rctx[A2A_LOCAL][A2A_TOTAL];
	struct fi_context2 sctx[A2A_LOCAL][A2A_TOTAL];
};

static char *a2a_slot(struct a2a *a, bool send, int l, int g)
{
	return (char *)a->buf.base + (((size_t)send * A2A_LOCAL + l) * A2A_TOTAL + g) * A2A_SLOT;
}

static int a2a_open(struct a2a *a)
{
	struct func *f = &a->f;
	struct cour_ft *ft = &f->ft;
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE, .count = A2A_TOTAL };
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED, .size = 2048 };
	char names[A2A_TOTAL][COUR_FT_MAX_NAME];
	size_t len[A2A_TOTAL];
	uint32_t l32;
	int l, g, ret;

	a->first = ft->is_server ? 0 : A2A_LOCAL;
	FUNC_CALL(f, fi_av_open(ft->domain, &av_attr, &a->av, NULL));
	FUNC_CALL(f, fi_cq_open(ft->domain, &cq_attr, &a->txcq, NULL));
	FUNC_CALL(f, fi_cq_open(ft->domain, &cq_attr, &a->rxcq, NULL));
	for (l = 0; l < A2A_LOCAL; l++) {
		FUNC_CALL(f, fi_endpoint(ft->domain, ft->info, &a->ep[l], NULL));
		FUNC_CALL(f, fi_ep_bind(a->ep[l], &a->av->fid, 0));
		FUNC_CALL(f, fi_ep_bind(a->ep[l], &a->txcq->fid, FI_TRANSMIT));
		FUNC_CALL(f, fi_ep_bind(a->ep[l], &a->rxcq->fid, FI_RECV));
		FUNC_CALL(f, fi_enable(a->ep[l]));
		g = a->first + l;
		len[g] = COUR_FT_MAX_NAME;
		FUNC_CALL(f, fi_getname(&a->ep[l]->fid, names[g], &len[g]));
		l32 = (uint32_t)len[g];
		FUNC_CALL(f, cour_ft_oob_send(ft, &l32, sizeof(l32)));
		FUNC_CALL(f, cour_ft_oob_send(ft, names[g], len[g]));
	}
	for (l = 0; l < A2A_LOCAL; l++) {
		g = (A2A_LOCAL - a->first) + l;
		FUNC_CALL(f, cour_ft_oob_recv(ft, &l32, sizeof(l32)));
		FUNC_ASSERT(f, l32 <= COUR_FT_MAX_NAME, "name of %u bytes", l32);
		len[g] = l32;
		FUNC_CALL(f, cour_ft_oob_recv(ft, names[g], len[g]));
	}
	for (g = 0; g < A2A_TOTAL; g++) {
		ret = fi_av_insert(a->av, names[g], 1, &a->addr[g], 0, NULL);
		FUNC_ASSERT(f, ret == 1, "fi_av_insert(endpoint %d): %d", g, ret);
	}
	return 0;
}

/*
 * Post, retrying -FI_EAGAIN: our endpoints' CQs are not the harness's, so drive them here
 * (reading no entry) for providers with manual progress.
 */
#define A2A_POST(a, expr) func_post_ret(&(a)->f, #expr, ({ \
	struct fi_cq_tagged_entry e_; ssize_t r_; unsigned int n_ = 0; \
	while ((r_ = (expr)) == -FI_EAGAIN) { \
		(void)fi_cq_read((a)->txcq, &e_, 0); \
		(void)fi_cq_read((a)->rxcq, &e_, 0); \
		if ((++n_ & 1023) == 0 && cour_ft_check_deadline(&(a)->f.ft, #expr)) break; \
	} r_; }))

static int a2a_run(struct a2a *a)
{
	struct func *f = &a->f;
	struct fi_cq_tagged_entry e;
	static bool seen[A2A_LOCAL][A2A_TOTAL];
	int l, g, i, j, n = 0;
	size_t off;

	for (l = 0; l < A2A_LOCAL; l++)
		for (g = 0; g < A2A_TOTAL; g++) {
			if (g == a->first + l)
				continue;
			memset(a2a_slot(a, false, l, g), 0xee, A2A_SLOT);
			FUNC_CALL(f, A2A_POST(a, fi_trecv(a->ep[l], a2a_slot(a, false, l, g),
							   A2A_SLOT, a->buf.desc, FI_ADDR_UNSPEC,
							   (uint64_t)g, 0, &a->rctx[l][g])));
		}
	FUNC_CALL(f, cour_ft_barrier(&f->ft));
	for (l = 0; l < A2A_LOCAL; l++)
		for (g = 0; g < A2A_TOTAL; g++) {
			i = a->first + l;
			if (g == i)
				continue;
			cour_ft_fill(a2a_slot(a, true, l, g), A2A_SIZE(i, g), A2A_SEQ(i, g));
			FUNC_CALL(f, A2A_POST(a, fi_tsend(a->ep[l], a2a_slot(a, true, l, g),
							   A2A_SIZE(i, g), a->buf.desc,
							   a->addr[g], (uint64_t)i,
							   &a->sctx[l][g])));
			n++;
		}
	for (i = 0; i < n; i++) {
		FUNC_CALL(f, func_read_one(f, a->txcq, &e, "alltoall completions"));
		off = (size_t)((struct fi_context2 *)e.op_context - &a->sctx[0][0]);
		FUNC_ASSERT(f, off < A2A_LOCAL * A2A_TOTAL, "send ctx %p", e.op_context);
	}
	for (i = 0; i < n; i++) {
		FUNC_CALL(f, func_read_one(f, a->rxcq, &e, "alltoall completions"));
		off = (size_t)((struct fi_context2 *)e.op_context - &a->rctx[0][0]);
		FUNC_ASSERT(f, off < A2A_LOCAL * A2A_TOTAL, "receive ctx %p", e.op_context);
		l = (int)(off / A2A_TOTAL);
		g = (int)(off % A2A_TOTAL);	/* the sender this receive was for */
		j = a->first + l;
		FUNC_ASSERT(f, !seen[l][g], "endpoint %d: second message from %d", j, g);
		seen[l][g] = true;
		FUNC_ASSERT(f, e.tag == (uint64_t)g, "endpoint %d: tag %llu in the receive for %d",
			    j, (unsigned long long)e.tag, g);
		FUNC_ASSERT(f, e.len == A2A_SIZE(g, j), "endpoint %d from %d: %zu bytes, want %zu",
			    j, g, e.len, A2A_SIZE(g, j));
		FUNC_CALL(f, func_check_data(f, a2a_slot(a, false, l, g), e.len, A2A_SEQ(g, j),
					     "alltoall"));
	}
	printf("alltoall: %d messages sent and %d received by %d local endpoints\n", n, n,
	       A2A_LOCAL);
	return 0;
}

int main(int argc, char **argv)
{
	static struct a2a a;
	struct func *f = &a.f;
	int ret, l;

	ret = func_init(f, argc, argv, "alltoall", FI_MSG | FI_TAGGED, 0, NULL, NULL, NULL, "");
	if (!ret)
		ret = cour_ft_buf_alloc(&f->ft, (size_t)2 * A2A_LOCAL * A2A_TOTAL * A2A_SLOT,
					&a.buf);
	if (!ret)
		ret = a2a_open(&a);
	if (!ret)
		ret = a2a_run(&a);
	if (!ret)
		ret = func_finish(f);
	for (l = 0; l < A2A_LOCAL; l++)
		if (a.ep[l])
			fi_close(&a.ep[l]->fid);
	if (a.av)
		fi_close(&a.av->fid);
	if (a.txcq)
		fi_close(&a.txcq->fid);
	if (a.rxcq)
		fi_close(&a.rxcq->fid);
	cour_ft_close_ep(&f->ft);
	cour_ft_buf_free(&a.buf);
	cour_ft_close(&f->ft);
	if (ret || f->failures) {
		fprintf(stderr, "alltoall: FAIL (%d)\n", ret);
		return 1;
	}
	printf("alltoall: PASS (%s)\n", f->ft.is_server ? "server" : "client");
	return 0;
}
