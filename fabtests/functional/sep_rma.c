/*
 * Scalable endpoints used as Open MPI's btl/ofi uses them for one-sided MPI (its default
 * mode, whenever a provider offers max_ep_tx_ctx > 1): two scalable endpoints A and B (one
 * domain each) asked for FI_RMA | FI_ATOMIC with mr_mode ALLOCATED | PROV_KEY | VIRT_ADDR |
 * ENDPOINT and FI_DELIVERY_COMPLETE, each with C transmit and C receive contexts. Every
 * transmit context has its own CQ; the receive contexts, which only serve as RMA targets,
 * are enabled with nothing bound (Open MPI 4.1 crashed when that fi_enable was refused).
 * Regions bind to the scalable endpoint itself (fi_mr_bind with an FI_CLASS_SEP fid, as Open
 * MPI 5 does) or to one of its contexts.
 *
 * Checks: through every transmit context of A, a write, a read, a fetching add and a
 * compare-swap into B's region, each completing on that context's CQ only, with B's memory
 * and the fetched values exactly as expected; then the same from B into A. What must fail: a
 * region bound to something that is not an endpoint (-FI_EINVAL); a receive posted on a
 * receive context with nothing bound (-FI_ENOCQ). Every wait is bounded. Exit 0 when every
 * check held.
 */
#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
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

#define FT_CHECK_NAME "sep_rma"
#include "ft_check.h"

#define C       2
#define WAIT_MS 5000
#define LEN     8192            /* bytes written and read per context */

struct side {
	struct fid_domain *dom;
	struct fid_av *av;
	struct fid_ep *sep, *tx[C], *rx[C];
	struct fid_cq *cq[C];
	struct fid_mr *mr;
	uint64_t *mem;          /* the region peers target: C slices of LEN, then C words */
	uint64_t *local;        /* write sources, read targets and fetch results */
	fi_addr_t peer;
};

static struct fi_info *info;
static struct fid_fabric *fabric;
static struct side A, B;

#define MEM_WORDS   (C * LEN / 8 + C)
#define WORD(i)     (C * LEN / 8 + (i))

static void progress(void)
{
	for (int i = 0; i < C; i++) {
		fi_cq_read(A.cq[i], NULL, 0);
		fi_cq_read(B.cq[i], NULL, 0);
	}
}

/* one entry on cq (progressing both sides) for the operation want, 0; -1 on an error entry,
 * another operation's completion or a timeout */
static int wait_cq(struct fid_cq *cq, void *want)
{
	struct fi_cq_entry e;

	if (ft_cq_wait_one(cq, &e, WAIT_MS, progress))
		return -1;
	CHECK(e.op_context == want, "completion context %p, want %p", e.op_context, want);
	return 0;
}

static int side_open(struct side *s, int bind_to_ctx)
{
	struct fi_av_attr aa = { .type = FI_AV_TABLE };
	struct fi_cq_attr ca = { .format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_NONE };
	struct fi_tx_attr ta = { .op_flags = FI_DELIVERY_COMPLETE };
	struct fi_rx_attr ra = { 0 };

	s->mem = calloc(1, MEM_WORDS * 8);
	s->local = calloc(1, MEM_WORDS * 8);
	if (!s->mem || !s->local)
		return -1;
	CALL(fi_domain(fabric, info, &s->dom, NULL));
	CALL(fi_av_open(s->dom, &aa, &s->av, NULL));
	CALL(fi_scalable_ep(s->dom, info, &s->sep, NULL));
	CALL(fi_scalable_ep_bind(s->sep, &s->av->fid, 0));
	for (int i = 0; i < C; i++) {
		CALL(fi_tx_context(s->sep, i, &ta, &s->tx[i], NULL));
		CALL(fi_rx_context(s->sep, i, &ra, &s->rx[i], NULL));
		CALL(fi_cq_open(s->dom, &ca, &s->cq[i], NULL));
		CALL(fi_ep_bind(s->tx[i], &s->cq[i]->fid, FI_TRANSMIT));
		CALL(fi_enable(s->tx[i]));
		CALL(fi_enable(s->rx[i]));      /* nothing bound: an RMA target only */
	}
	CALL(fi_enable(s->sep));
	CALL(fi_mr_reg(s->dom, s->mem, MEM_WORDS * 8,
		       FI_REMOTE_READ | FI_REMOTE_WRITE | FI_READ | FI_WRITE, 0, 0, 0, &s->mr, NULL));
	CHECK(fi_mr_bind(s->mr, &s->av->fid, 0) == -FI_EINVAL, "a region bound to an AV");
	if (info->domain_attr->mr_mode & FI_MR_ENDPOINT) {
		CALL(fi_mr_bind(s->mr, bind_to_ctx ? &s->rx[1]->fid : &s->sep->fid, 0));
		CALL(fi_mr_enable(s->mr));
	}
	return 0;
}

static int side_close(struct side *s)
{
	if (s->mr)
		CALL(fi_close(&s->mr->fid));
	for (int i = 0; i < C; i++) {
		CALL(fi_close(&s->tx[i]->fid));
		CALL(fi_close(&s->rx[i]->fid));
		CALL(fi_close(&s->cq[i]->fid));
	}
	CALL(fi_close(&s->sep->fid));
	CALL(fi_close(&s->av->fid));
	CALL(fi_close(&s->dom->fid));
	free(s->mem);
	free(s->local);
	return 0;
}

static int exchange(void)
{
	char name[64];
	size_t len = sizeof(name);

	CALL(fi_getname(&B.sep->fid, name, &len));
	CHECK(fi_av_insert(A.av, name, 1, &A.peer, 0, NULL) == 1, "insert B");
	len = sizeof(name);
	CALL(fi_getname(&A.sep->fid, name, &len));
	CHECK(fi_av_insert(B.av, name, 1, &B.peer, 0, NULL) == 1, "insert A");
	return 0;
}

/* the target address of word w of t's region */
static uint64_t raddr(const struct side *t, size_t w)
{
	return (info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ?
	       (uint64_t)(uintptr_t)&t->mem[w] : w * 8;
}

static uint64_t val(int from, int ctx, size_t k)
{
	return ((uint64_t)from << 56) ^ ((uint64_t)ctx << 48) ^ (k * 0x9e3779b97f4a7c15ull);
}

/* o does everything to t through each of its transmit contexts */
static int one_way(struct side *o, struct side *t, int who)
{
	uint64_t key = fi_mr_key(t->mr);
	void *desc = fi_mr_desc(o->mr);

	for (int i = 0; i < C; i++) {
		size_t base = (size_t)i * LEN / 8, n = LEN / 8;
		uint64_t *src = o->local + base, one = 1, cmp = 0, swap = 7 + (uint64_t)who, old = 99;

		for (size_t k = 0; k < n; k++)
			src[k] = val(who, i, k);
		CALL(fi_write(o->tx[i], src, LEN, desc, o->peer, raddr(t, base), key,
			      (void *)(uintptr_t)(0x100 + i)));
		CALL(wait_cq(o->cq[i], (void *)(uintptr_t)(0x100 + i)));
		for (int j = 0; j < C; j++) {
			struct fi_cq_entry e;

			CHECK(j == i || fi_cq_read(o->cq[j], &e, 1) == -FI_EAGAIN,
			      "context %d's write completed on context %d", i, j);
		}
		for (size_t k = 0; k < n; k++)
			CHECK(t->mem[base + k] == val(who, i, k), "write %d word %zu: %" PRIx64,
			      i, k, t->mem[base + k]);
		memset(src, 0, LEN);
		CALL(fi_read(o->tx[i], src, LEN, desc, o->peer, raddr(t, base), key,
			     (void *)(uintptr_t)(0x200 + i)));
		CALL(wait_cq(o->cq[i], (void *)(uintptr_t)(0x200 + i)));
		for (size_t k = 0; k < n; k++)
			CHECK(src[k] == val(who, i, k), "read %d word %zu: %" PRIx64, i, k, src[k]);

		/* word i of t starts at 0: add 1 (fetching 0), then swap 0 -> 7+who fails */
		CALL(fi_fetch_atomic(o->tx[i], &one, 1, NULL, &old, NULL, o->peer,
				     raddr(t, WORD(i)), key, FI_UINT64, FI_SUM,
				     (void *)(uintptr_t)(0x300 + i)));
		CALL(wait_cq(o->cq[i], (void *)(uintptr_t)(0x300 + i)));
		CHECK(old == 0 && t->mem[WORD(i)] == 1, "fetch-add %d: fetched %" PRIu64
		      ", memory %" PRIu64, i, old, t->mem[WORD(i)]);
		CALL(fi_compare_atomic(o->tx[i], &swap, 1, NULL, &cmp, NULL, &old, NULL, o->peer,
				       raddr(t, WORD(i)), key, FI_UINT64, FI_CSWAP,
				       (void *)(uintptr_t)(0x400 + i)));
		CALL(wait_cq(o->cq[i], (void *)(uintptr_t)(0x400 + i)));
		CHECK(old == 1 && t->mem[WORD(i)] == 1, "failed cswap %d: fetched %" PRIu64
		      ", memory %" PRIu64, i, old, t->mem[WORD(i)]);
		cmp = 1;
		CALL(fi_compare_atomic(o->tx[i], &swap, 1, NULL, &cmp, NULL, &old, NULL, o->peer,
				       raddr(t, WORD(i)), key, FI_UINT64, FI_CSWAP,
				       (void *)(uintptr_t)(0x500 + i)));
		CALL(wait_cq(o->cq[i], (void *)(uintptr_t)(0x500 + i)));
		CHECK(old == 1 && t->mem[WORD(i)] == swap, "cswap %d: fetched %" PRIu64
		      ", memory %" PRIu64, i, old, t->mem[WORD(i)]);
	}
	return 0;
}

static int test_misuse(void)
{
	char buf[8];

	/* only meaningful where a receive can be posted at all */
	if (!(info->caps & FI_MSG))
		return 0;
	CHECK(fi_recv(A.rx[0], buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, NULL) == -FI_ENOCQ,
	      "a receive on a context with nothing bound");
	return 0;
}

static int run(const char *prov, uint64_t caps)
{
	struct fi_info *hints = fi_allocinfo();
	int ret;

	if (!hints)
		return -1;
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = caps;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->addr_format = FI_SOCKADDR_IN;
	hints->ep_attr->tx_ctx_cnt = C;
	hints->ep_attr->rx_ctx_cnt = C;
	hints->tx_attr->op_flags = FI_DELIVERY_COMPLETE | FI_COMPLETION;
	hints->domain_attr->mr_mode = FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR |
				      FI_MR_ENDPOINT;
	hints->fabric_attr->prov_name = strdup(prov);
	ret = fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", "0", FI_SOURCE, hints, &info);
	fi_freeinfo(hints);
	if (ret) {
		fprintf(stderr, "sep_rma: fi_getinfo: %s\n", fi_strerror(-ret));
		failures++;
		return -1;
	}
	CHECK(info->domain_attr->max_ep_tx_ctx >= C && info->ep_attr->tx_ctx_cnt == C,
	      "info gives %zu contexts (max %zu)", info->ep_attr->tx_ctx_cnt,
	      info->domain_attr->max_ep_tx_ctx);
	CALL(fi_fabric(info->fabric_attr, &fabric, NULL));
	if (side_open(&A, 0) || side_open(&B, 1) || exchange())
		return -1;
	printf("caps 0x%" PRIx64 ", mr_mode 0x%x\n", info->caps, info->domain_attr->mr_mode);
	printf("A -> B: %s\n", one_way(&A, &B, 1) ? "FAILED" : "ok");
	printf("B -> A: %s\n", one_way(&B, &A, 2) ? "FAILED" : "ok");
	printf("misuse: %s\n", test_misuse() ? "FAILED" : "ok");
	if (side_close(&A) || side_close(&B))
		return -1;
	memset(&A, 0, sizeof(A));
	memset(&B, 0, sizeof(B));
	CALL(fi_close(&fabric->fid));
	fi_freeinfo(info);
	return 0;
}

int main(int argc, char **argv)
{
	const char *prov = argc > 1 ? argv[1] : "courier";

	/* btl/ofi's one-sided mode, then its full mode (messages too) */
	run(prov, FI_RMA | FI_ATOMIC);
	run(prov, FI_RMA | FI_ATOMIC | FI_MSG);
	printf("sep_rma: %s\n", failures ? "FAILED" : "all checks held");
	return failures ? 1 : 0;
}
