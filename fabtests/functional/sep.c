/*
 * Scalable endpoints in one process: a scalable endpoint S (domain 1) with 3 transmit and 3
 * receive contexts, each with its own CQ, and a plain endpoint P (domain 2) whose AV has
 * rx_ctx_bits 2. Checks: a message P sends to fi_rx_addr(S, i) completes on receive context
 * i only, with its data, posted first or arriving first (eager and rendezvous sizes), and a
 * receive posted on another context does not take it; an address without context bits
 * reaches context 0; each transmit context's sends and RMA writes complete on its own CQ;
 * RMA from P lands in S's memory whatever context it names. And what must fail: a context
 * index out of range (-FI_EINVAL) or open twice (-FI_EBUSY), a send on a receive context and
 * a receive on a transmit context (-FI_EOPNOTSUPP), a transfer on S itself (-FI_EOPNOTSUPP),
 * a CQ bound to S (-FI_EINVAL), closing S while a context is open (-FI_EBUSY), fi_endpoint
 * with two contexts (-FI_EINVAL); a message for a context S does not have (or closed) is
 * dropped there, reaching no other. Every wait is bounded. Exit 0 when every check held.
 */
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FT_CHECK_NAME "sep"
#include "ft_check.h"

#define N       3
#define BITS    2
#define WAIT_MS 5000
#define BIG     (256 * 1024)




static struct fi_info *info;
static struct fid_fabric *fabric;
static struct fid_domain *dom_s, *dom_p;
static struct fid_av *av_s, *av_p;
static struct fid_ep *sep, *tx[N], *rx[N], *pep_;
static struct fid_cq *txcq[N], *rxcq[N], *pcq;
static struct fid_mr *pmr, *smr;
static fi_addr_t s_at_p, p_at_s;
static char *rbuf[N], *sbuf, *pbuf, *smem;


static void progress(void)
{
	fi_cq_read(pcq, NULL, 0);
	for (int i = 0; i < N; i++) {
		if (txcq[i])
			fi_cq_read(txcq[i], NULL, 0);
		if (rxcq[i])
			fi_cq_read(rxcq[i], NULL, 0);
	}
}

/* one entry on cq (progressing every other), 0; -1 on an error entry or timeout */
static int wait_cq(struct fid_cq *cq, struct fi_cq_data_entry *e)
{
	return ft_cq_wait_one(cq, e, WAIT_MS, progress);
}

/* nothing on any of S's receive CQs but `except` after ms of progress */
static int rx_quiet(int except, unsigned ms)
{
	uint64_t end = now_ms() + ms;
	struct fi_cq_data_entry e;

	while (now_ms() < end)
		progress();
	for (int i = 0; i < N; i++) {
		if (i == except || !rxcq[i])
			continue;
		ssize_t n = fi_cq_read(rxcq[i], &e, 1);
		CHECK(n == -FI_EAGAIN, "receive context %d has an entry (%zd, context %p)", i, n,
		      n == 1 ? e.op_context : NULL);
	}
	return 0;
}

static int open_all(void)
{
	struct fi_av_attr aa = { .type = FI_AV_TABLE };
	struct fi_av_attr pa = { .type = FI_AV_TABLE, .rx_ctx_bits = BITS };
	struct fi_cq_attr ca = { .format = FI_CQ_FORMAT_DATA };
	struct fi_info *one;
	struct fid_ep *bad;
	char name[64];
	size_t len;

	CALL(fi_fabric(info->fabric_attr, &fabric, NULL));
	CALL(fi_domain(fabric, info, &dom_s, NULL));
	CALL(fi_domain(fabric, info, &dom_p, NULL));
	CALL(fi_av_open(dom_s, &aa, &av_s, NULL));
	CALL(fi_av_open(dom_p, &pa, &av_p, NULL));
	CALL(fi_cq_open(dom_p, &ca, &pcq, NULL));
	CHECK(fi_endpoint(dom_s, info, &bad, NULL) == -FI_EINVAL, "fi_endpoint, 3 contexts");
	CALL(fi_scalable_ep(dom_s, info, &sep, NULL));
	CHECK(fi_scalable_ep_bind(sep, &pcq->fid, FI_TRANSMIT) == -FI_EINVAL, "CQ on S");
	CALL(fi_scalable_ep_bind(sep, &av_s->fid, 0));
	CHECK(fi_tx_context(sep, N, NULL, &bad, NULL) == -FI_EINVAL, "tx context %d", N);
	CHECK(fi_rx_context(sep, -1, NULL, &bad, NULL) == -FI_EINVAL, "rx context -1");
	for (int i = 0; i < N; i++) {
		CALL(fi_tx_context(sep, i, NULL, &tx[i], NULL));
		CALL(fi_rx_context(sep, i, NULL, &rx[i], NULL));
		CALL(fi_cq_open(dom_s, &ca, &txcq[i], NULL));
		CALL(fi_cq_open(dom_s, &ca, &rxcq[i], NULL));
		CALL(fi_ep_bind(tx[i], &txcq[i]->fid, FI_TRANSMIT));
		CALL(fi_ep_bind(rx[i], &rxcq[i]->fid, FI_RECV));
		CALL(fi_enable(tx[i]));
		CALL(fi_enable(rx[i]));
	}
	CHECK(fi_rx_context(sep, 1, NULL, &bad, NULL) == -FI_EBUSY, "rx context 1 twice");
	CALL(fi_enable(sep));

	one = fi_dupinfo(info);
	one->ep_attr->tx_ctx_cnt = one->ep_attr->rx_ctx_cnt = 1;
	CALL(fi_endpoint(dom_p, one, &pep_, NULL));
	fi_freeinfo(one);
	CALL(fi_ep_bind(pep_, &av_p->fid, 0));
	CALL(fi_ep_bind(pep_, &pcq->fid, FI_TRANSMIT | FI_RECV));
	CALL(fi_enable(pep_));

	len = sizeof(name);
	CALL(fi_getname(&sep->fid, name, &len));
	CHECK(fi_av_insert(av_p, name, 1, &s_at_p, 0, NULL) == 1, "insert S");
	len = sizeof(name);
	CALL(fi_getname(&pep_->fid, name, &len));
	CHECK(fi_av_insert(av_s, name, 1, &p_at_s, 0, NULL) == 1, "insert P");
	CALL(fi_mr_reg(dom_p, pbuf, BIG, FI_REMOTE_WRITE, 0, 1, 0, &pmr, NULL));
	CALL(fi_mr_reg(dom_s, smem, BIG, FI_REMOTE_WRITE, 0, 2, 0, &smr, NULL));
	return 0;
}

static int p_send(int ctx, size_t len, char c)
{
	struct fi_cq_data_entry e;
	fi_addr_t to = ctx < 0 ? s_at_p : fi_rx_addr(s_at_p, ctx, BITS);

	memset(sbuf, c, len);
	CALL(fi_send(pep_, sbuf, len, NULL, to, (void *)0x5e));
	CALL(wait_cq(pcq, &e));
	CHECK(e.op_context == (void *)0x5e, "P's send: context %p", e.op_context);
	return 0;
}

static int rx_check(int i, size_t len, char c)
{
	struct fi_cq_data_entry e;

	CALL(wait_cq(rxcq[i], &e));
	CHECK(e.op_context == (void *)(uintptr_t)(0x100 + i) && e.len == len,
	      "context %d: context %p, %zu bytes (want %zu)", i, e.op_context, e.len, len);
	for (size_t k = 0; k < len; k++)
		CHECK(rbuf[i][k] == c, "context %d byte %zu: %d, want %d", i, k, rbuf[i][k], c);
	return rx_quiet(i, 0);
}

static int post_rx(int i)
{
	memset(rbuf[i], 0, BIG);
	CALL(fi_recv(rx[i], rbuf[i], BIG, NULL, FI_ADDR_UNSPEC, (void *)(uintptr_t)(0x100 + i)));
	return 0;
}

static int test_posted(void)
{
	int order[N] = { 2, 0, 1 };

	for (int k = 0; k < N; k++) {
		int i = order[k];

		if (post_rx(i) || p_send(i, 100 + (size_t)i, (char)('a' + i)) ||
		    rx_check(i, 100 + (size_t)i, (char)('a' + i)))
			return -1;
	}
	/* no context bits: context 0 */
	if (post_rx(0) || p_send(-1, 10, 'z') || rx_check(0, 10, 'z'))
		return -1;
	return 0;
}

/* a message for context 2 arrives first; the receive waiting on context 0 must not take it */
static int test_unexpected(void)
{
	size_t sizes[2] = { 64, BIG };

	struct fi_cq_data_entry e;

	for (int k = 0; k < 2; k++) {
		/* (a rendezvous send completes only once its receive is posted) */
		memset(sbuf, 'q' + k, sizes[k]);
		if (post_rx(0))
			return -1;
		CALL(fi_send(pep_, sbuf, sizes[k], NULL, fi_rx_addr(s_at_p, 2, BITS),
			     (void *)0x5f));
		if (rx_quiet(-1, 100) || post_rx(2) || rx_check(2, sizes[k], (char)('q' + k)))
			return -1;
		CALL(wait_cq(pcq, &e));
		CHECK(e.op_context == (void *)0x5f, "P's send: context %p", e.op_context);
		/* context 0's receive still waits: feed it */
		if (p_send(0, 5, 'k') || rx_check(0, 5, 'k'))
			return -1;
	}
	return 0;
}

/* each transmit context's sends and writes complete on its own CQ only */
static int test_tx(void)
{
	struct fi_cq_data_entry e;

	for (int i = 0; i < N; i++) {
		memset(pbuf, 0, 64);
		memset(sbuf, 'A' + i, 64);
		CALL(fi_recv(pep_, pbuf, 64, NULL, FI_ADDR_UNSPEC, (void *)0x77));
		CALL(fi_send(tx[i], sbuf, 64, NULL, p_at_s, (void *)(uintptr_t)(0x200 + i)));
		CALL(wait_cq(txcq[i], &e));
		CHECK(e.op_context == (void *)(uintptr_t)(0x200 + i), "tx %d: context %p", i,
		      e.op_context);
		CALL(wait_cq(pcq, &e));
		CHECK(e.op_context == (void *)0x77 && pbuf[63] == 'A' + i, "P got %p '%c'",
		      e.op_context, pbuf[63]);
		for (int j = 0; j < N; j++)
			CHECK(j == i || fi_cq_read(txcq[j], &e, 1) == -FI_EAGAIN,
			      "tx %d's send completed on tx %d", i, j);
	}
	memset(sbuf, 'W', 4096);
	CALL(fi_write(tx[1], sbuf, 4096, NULL, p_at_s,
		      (info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)pbuf
								       : 0,
		      fi_mr_key(pmr), (void *)0x301));
	CALL(wait_cq(txcq[1], &e));
	CHECK(e.op_context == (void *)0x301 && (e.flags & FI_WRITE) && pbuf[4095] == 'W',
	      "write through tx 1: context %p", e.op_context);
	/* P writes into S, naming context 2: the memory is S's whatever the context */
	CALL(fi_write(pep_, sbuf, 4096, NULL, fi_rx_addr(s_at_p, 2, BITS),
		      (info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)smem
								       : 0,
		      fi_mr_key(smr), (void *)0x302));
	CALL(wait_cq(pcq, &e));
	CHECK(e.op_context == (void *)0x302 && smem[4095] == 'W', "write into S");
	return 0;
}

static int test_misuse(void)
{
	struct fi_cq_data_entry e;

	CHECK(fi_send(rx[0], sbuf, 1, NULL, p_at_s, NULL) == -FI_EOPNOTSUPP, "send on rx 0");
	CHECK(fi_recv(tx[0], rbuf[0], 1, NULL, FI_ADDR_UNSPEC, NULL) == -FI_EOPNOTSUPP,
	      "recv on tx 0");
	CHECK(fi_send(sep, sbuf, 1, NULL, p_at_s, NULL) == -FI_EOPNOTSUPP, "send on S");
	CHECK(fi_close(&sep->fid) == -FI_EBUSY, "S closed under its contexts");
	/* a context S does not have (3 of 0..3), and one it closed: dropped there */
	if (post_rx(0) || post_rx(2))
		return -1;
	CALL(fi_send(pep_, sbuf, 8, NULL, fi_rx_addr(s_at_p, 3, BITS), (void *)0x61));
	CALL(wait_cq(pcq, &e));
	CALL(fi_close(&rx[1]->fid));
	rx[1] = NULL;
	CALL(fi_close(&rxcq[1]->fid));
	rxcq[1] = NULL;
	CALL(fi_send(pep_, sbuf, 8, NULL, fi_rx_addr(s_at_p, 1, BITS), (void *)0x62));
	CALL(wait_cq(pcq, &e));
	/* a rendezvous one too: its sender is answered (it completes), the session lives */
	CALL(fi_send(pep_, sbuf, BIG, NULL, fi_rx_addr(s_at_p, 1, BITS), (void *)0x63));
	CALL(wait_cq(pcq, &e));
	CHECK(e.op_context == (void *)0x63, "the discarded rendezvous send: context %p",
	      e.op_context);
	if (rx_quiet(-1, 200))
		return -1;
	/* and the queue still works for the contexts that are open */
	if (p_send(2, 7, 'm') || rx_check(2, 7, 'm') || p_send(0, 3, 'n') || rx_check(0, 3, 'n'))
		return -1;
	return 0;
}

int main(int argc, char **argv)
{
	struct fi_info *hints = fi_allocinfo();
	int ret;

	if (!hints)
		return 2;
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_RMA | FI_NAMED_RX_CTX;
	hints->addr_format = FI_SOCKADDR_IN;
	hints->ep_attr->tx_ctx_cnt = N;
	hints->ep_attr->rx_ctx_cnt = N;
	hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
	hints->fabric_attr->prov_name = strdup(argc > 1 ? argv[1] : "courier");
	ret = fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", "0", FI_SOURCE, hints, &info);
	fi_freeinfo(hints);
	if (ret) {
		fprintf(stderr, "sep: fi_getinfo: %s\n", fi_strerror(-ret));
		return 2;
	}
	if (info->ep_attr->tx_ctx_cnt != N || info->ep_attr->rx_ctx_cnt != N ||
	    info->domain_attr->max_ep_tx_ctx < N) {
		fprintf(stderr, "sep: info gives %zu/%zu contexts (max %zu)\n",
			info->ep_attr->tx_ctx_cnt, info->ep_attr->rx_ctx_cnt,
			info->domain_attr->max_ep_tx_ctx);
		return 1;
	}
	for (int i = 0; i < N; i++)
		rbuf[i] = calloc(1, BIG);
	sbuf = calloc(1, BIG);
	pbuf = calloc(1, BIG);
	smem = calloc(1, BIG);
	if (open_all())
		return 1;
	printf("posted: %s\n", test_posted() ? "FAILED" : "ok");
	printf("unexpected: %s\n", test_unexpected() ? "FAILED" : "ok");
	printf("transmit contexts: %s\n", test_tx() ? "FAILED" : "ok");
	printf("misuse: %s\n", test_misuse() ? "FAILED" : "ok");
	for (int i = 0; i < N; i++) {
		if (tx[i] && fi_close(&tx[i]->fid))
			failures++;
		if (rx[i] && fi_close(&rx[i]->fid))
			failures++;
	}
	if (fi_close(&sep->fid)) {
		fprintf(stderr, "sep: S does not close once its contexts did\n");
		failures++;
	}
	fi_close(&pep_->fid);
	fi_close(&pmr->fid);
	fi_close(&smr->fid);
	for (int i = 0; i < N; i++) {
		fi_close(&txcq[i]->fid);
		if (rxcq[i])
			fi_close(&rxcq[i]->fid);
	}
	fi_close(&pcq->fid);
	fi_close(&av_s->fid);
	fi_close(&av_p->fid);
	fi_close(&dom_s->fid);
	fi_close(&dom_p->fid);
	fi_close(&fabric->fid);
	fi_freeinfo(info);
	printf("sep: %s\n", failures ? "FAILED" : "all checks held");
	return failures ? 1 : 0;
}
