/*
 * RMA and atomics with several remote iovecs, in one process: endpoint A (domain 1) writes,
 * reads and adds to memory of endpoint B (domain 2) through fi_writemsg / fi_readmsg /
 * fi_atomicmsg / fi_fetch_atomicmsg with 3 remote iovecs (two regions, local iovecs split
 * elsewhere). Checks: the bytes land where each remote iovec says (and nowhere else); the
 * initiator gets exactly one completion per operation; the target raises its events once per
 * operation (one remote CQ data entry with the whole length, its remote write/read counter
 * up by one); fetched values arrive; a part with a bad key fails the whole operation with one
 * error completion (FI_EACCES); and what must be refused: more than rma_iov_limit remote
 * iovecs, remote and local lengths that differ (-FI_EINVAL). Every wait is bounded.
 * Exit 0 when every check held.
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
#include <time.h>

#define FT_CHECK_NAME "rma_iov"
#include "ft_check.h"

#define WAIT_MS 5000
#define MEM     (1 << 20)




static struct fi_info *info;
static struct fid_fabric *fabric;
static struct fid_domain *dom_a, *dom_b;
static struct fid_av *av_a, *av_b;
static struct fid_ep *ep_a, *ep_b;
static struct fid_cq *cq_a, *cq_b;
static struct fid_cntr *rw_cntr, *rr_cntr;
static struct fid_mr *mr1, *mr2;
static fi_addr_t to_b;
static char *t1, *t2, *src, *dst;


/* one entry (or error entry: *err set) on cq, progressing the other; -1 on timeout */
static int wait_cq(struct fid_cq *cq, struct fid_cq *other, struct fi_cq_data_entry *e,
		   int *err)
{
	uint64_t end = now_ms() + WAIT_MS;

	*err = 0;
	while (now_ms() < end) {
		ssize_t n = fi_cq_read(cq, e, 1);

		if (n == 1)
			return 0;
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry ee = { 0 };

			fi_cq_readerr(cq, &ee, 0);
			e->op_context = ee.op_context;
			*err = ee.err;
			return 0;
		}
		fi_cq_read(other, NULL, 0);
	}
	CHECK(0, "no completion in %d ms", WAIT_MS);
}

/* nothing more on either CQ after a short while */
static int quiet(void)
{
	uint64_t end = now_ms() + 100;
	struct fi_cq_data_entry e;

	while (now_ms() < end) {
		fi_cq_read(cq_a, NULL, 0);
		fi_cq_read(cq_b, NULL, 0);
	}
	CHECK(fi_cq_read(cq_a, &e, 1) == -FI_EAGAIN, "an extra completion at A (%p)",
	      e.op_context);
	CHECK(fi_cq_read(cq_b, &e, 1) == -FI_EAGAIN, "an extra completion at B (%p)",
	      e.op_context);
	return 0;
}

static uint64_t raddr(char *base, size_t off)
{
	return (info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)(base + off)
								: off;
}

static int open_all(void)
{
	struct fi_av_attr aa = { .type = FI_AV_TABLE };
	struct fi_cq_attr ca = { .format = FI_CQ_FORMAT_DATA };
	struct fi_cntr_attr ta = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC };
	char name[64];
	size_t len = sizeof(name);

	CALL(fi_fabric(info->fabric_attr, &fabric, NULL));
	CALL(fi_domain(fabric, info, &dom_a, NULL));
	CALL(fi_domain(fabric, info, &dom_b, NULL));
	CALL(fi_av_open(dom_a, &aa, &av_a, NULL));
	CALL(fi_av_open(dom_b, &aa, &av_b, NULL));
	CALL(fi_cq_open(dom_a, &ca, &cq_a, NULL));
	CALL(fi_cq_open(dom_b, &ca, &cq_b, NULL));
	CALL(fi_cntr_open(dom_b, &ta, &rw_cntr, NULL));
	CALL(fi_cntr_open(dom_b, &ta, &rr_cntr, NULL));
	CALL(fi_endpoint(dom_a, info, &ep_a, NULL));
	CALL(fi_endpoint(dom_b, info, &ep_b, NULL));
	CALL(fi_ep_bind(ep_a, &av_a->fid, 0));
	CALL(fi_ep_bind(ep_b, &av_b->fid, 0));
	CALL(fi_ep_bind(ep_a, &cq_a->fid, FI_TRANSMIT | FI_RECV));
	CALL(fi_ep_bind(ep_b, &cq_b->fid, FI_TRANSMIT | FI_RECV));
	CALL(fi_ep_bind(ep_b, &rw_cntr->fid, FI_REMOTE_WRITE));
	CALL(fi_ep_bind(ep_b, &rr_cntr->fid, FI_REMOTE_READ));
	CALL(fi_enable(ep_a));
	CALL(fi_enable(ep_b));
	CALL(fi_mr_reg(dom_b, t1, MEM, FI_REMOTE_WRITE | FI_REMOTE_READ, 0, 11, 0, &mr1, NULL));
	CALL(fi_mr_reg(dom_b, t2, MEM, FI_REMOTE_WRITE | FI_REMOTE_READ, 0, 12, 0, &mr2, NULL));
	CALL(fi_getname(&ep_b->fid, name, &len));
	CHECK(fi_av_insert(av_a, name, 1, &to_b, 0, NULL) == 1, "av insert");
	return 0;
}

/* remote: t1[100, 100+a), t2[5000, 5000+b), t1[300000, 300000+c); local src split at k */
static int test_write_read(size_t a, size_t b, size_t c, size_t k)
{
	size_t total = a + b + c;
	struct iovec liov[2] = { { src, k }, { src + k, total - k } };
	struct fi_rma_iov riov[3] = {
		{ raddr(t1, 100), a, fi_mr_key(mr1) },
		{ raddr(t2, 5000), b, fi_mr_key(mr2) },
		{ raddr(t1, 300000), c, fi_mr_key(mr1) },
	};
	struct fi_msg_rma m = {
		.msg_iov = liov, .iov_count = 2, .addr = to_b, .rma_iov = riov, .rma_iov_count = 3,
		.context = (void *)0xa1, .data = 0x1234,
	};
	struct fi_cq_data_entry e;
	uint64_t w0 = fi_cntr_read(rw_cntr), r0 = fi_cntr_read(rr_cntr);
	int err;

	memset(t1, 0, MEM);
	memset(t2, 0, MEM);
	for (size_t i = 0; i < total; i++)
		src[i] = (char)(i * 13 + 7);
	CALL(fi_writemsg(ep_a, &m, FI_REMOTE_CQ_DATA | FI_COMPLETION));
	CALL(wait_cq(cq_a, cq_b, &e, &err));
	CHECK(!err && e.op_context == (void *)0xa1 && (e.flags & FI_WRITE), "write: err %d "
	      "context %p", err, e.op_context);
	CALL(wait_cq(cq_b, cq_a, &e, &err));
	CHECK(!err && (e.flags & FI_REMOTE_CQ_DATA) && e.data == 0x1234 && e.len == total,
	      "remote CQ data: flags %#" PRIx64 " data %#" PRIx64 " len %zu (want %zu)",
	      (uint64_t)e.flags, (uint64_t)e.data, e.len, total);
	if (quiet())
		return -1;
	CHECK(!memcmp(t1 + 100, src, a) && !memcmp(t2 + 5000, src + a, b) &&
	      !memcmp(t1 + 300000, src + a + b, c), "written bytes differ");
	CHECK(t1[99] == 0 && t1[100 + a] == 0 && t2[4999] == 0 && t2[5000 + b] == 0 &&
	      t1[300000 + c] == 0, "bytes written outside the iovecs");
	CHECK(fi_cntr_read(rw_cntr) == w0 + 1, "remote write counter moved by %" PRIu64,
	      fi_cntr_read(rw_cntr) - w0);

	/* read it all back, local iovecs split elsewhere */
	struct iovec diov[2] = { { dst, total / 3 }, { dst + total / 3, total - total / 3 } };
	m.msg_iov = diov;
	m.context = (void *)0xa2;
	memset(dst, 0, total);
	CALL(fi_readmsg(ep_a, &m, FI_COMPLETION));
	CALL(wait_cq(cq_a, cq_b, &e, &err));
	CHECK(!err && e.op_context == (void *)0xa2 && (e.flags & FI_READ), "read: err %d", err);
	if (quiet())
		return -1;
	CHECK(!memcmp(dst, src, total), "read bytes differ");
	CHECK(fi_cntr_read(rr_cntr) == r0 + 1, "remote read counter moved by %" PRIu64,
	      fi_cntr_read(rr_cntr) - r0);
	return 0;
}

static int test_atomics(void)
{
	uint64_t add[3] = { 5, 6, 7 }, old[3] = { 0 };
	uint64_t *v1 = (uint64_t *)(t1 + 4096), *v2 = (uint64_t *)(t2 + 8192);
	struct fi_ioc ioc[2] = { { add, 1 }, { add + 1, 2 } };
	struct fi_ioc res[1] = { { old, 3 } };
	struct fi_rma_ioc rioc[2] = {
		{ raddr(t1, 4096), 2, fi_mr_key(mr1) },
		{ raddr(t2, 8192), 1, fi_mr_key(mr2) },
	};
	struct fi_msg_atomic m = {
		.msg_iov = ioc, .iov_count = 2, .addr = to_b, .rma_iov = rioc, .rma_iov_count = 2,
		.datatype = FI_UINT64, .op = FI_SUM, .context = (void *)0xb1,
	};
	struct fi_cq_data_entry e;
	uint64_t w0 = fi_cntr_read(rw_cntr);
	int err;

	v1[0] = 100;
	v1[1] = 200;
	v2[0] = 300;
	CALL(fi_atomicmsg(ep_a, &m, FI_COMPLETION));
	CALL(wait_cq(cq_a, cq_b, &e, &err));
	CHECK(!err && e.op_context == (void *)0xb1, "atomic: err %d", err);
	if (quiet())
		return -1;
	CHECK(v1[0] == 105 && v1[1] == 206 && v2[0] == 307, "sums %" PRIu64 " %" PRIu64 " %"
	      PRIu64, v1[0], v1[1], v2[0]);
	CHECK(fi_cntr_read(rw_cntr) == w0 + 1, "remote write counter moved by %" PRIu64,
	      fi_cntr_read(rw_cntr) - w0);

	m.context = (void *)0xb2;
	CALL(fi_fetch_atomicmsg(ep_a, &m, res, NULL, 1, FI_COMPLETION));
	CALL(wait_cq(cq_a, cq_b, &e, &err));
	CHECK(!err && e.op_context == (void *)0xb2, "fetch atomic: err %d", err);
	CHECK(old[0] == 105 && old[1] == 206 && old[2] == 307, "fetched %" PRIu64 " %" PRIu64
	      " %" PRIu64, old[0], old[1], old[2]);
	CHECK(v1[0] == 110 && v1[1] == 212 && v2[0] == 314, "after the fetch-add");
	if (quiet())
		return -1;

	/* What a part would be refused for is refused before any part goes: room for 2
	 * results of 3, 2 compare values for 3, an empty part; nothing lands, nothing completes */
	{
		uint64_t cmpv[3] = { 110, 212, 314 };
		struct fi_ioc res2[1] = { { old, 2 } }, cmp2[1] = { { cmpv, 2 } };
		struct fi_ioc res3[1] = { { old, 3 } };

		m.context = (void *)0xb3;
		CHECK(fi_fetch_atomicmsg(ep_a, &m, res2, NULL, 1, FI_COMPLETION) == -FI_EINVAL,
		      "fetch atomic with room for 2 results of 3");
		m.op = FI_CSWAP;
		CHECK(fi_compare_atomicmsg(ep_a, &m, cmp2, NULL, 1, res3, NULL, 1,
					   FI_COMPLETION) == -FI_EINVAL,
		      "compare atomic with 2 compare values for 3");
		m.op = FI_SUM;
		rioc[1].count = 0;
		ioc[1].count = 1;
		CHECK(fi_atomicmsg(ep_a, &m, FI_COMPLETION) == -FI_EINVAL, "an empty part");
		rioc[1].count = 1;
		ioc[1].count = 2;
		m.op = FI_ATOMIC_READ;          /* a fetching op only */
		CHECK(fi_atomicmsg(ep_a, &m, FI_COMPLETION) == -FI_EOPNOTSUPP,
		      "FI_ATOMIC_READ as a plain atomic in two parts");
		m.op = FI_SUM;
	}
	{
		/* a second part past 512 bytes (65 x 8): refused before the first goes */
		static uint64_t many[66];
		struct fi_ioc lio[1] = { { many, 66 } };
		struct fi_rma_ioc rio[2] = {
			{ raddr(t1, 4096), 1, fi_mr_key(mr1) },
			{ raddr(t1, 16384), 65, fi_mr_key(mr1) },
		};
		struct fi_msg_atomic lm = {
			.msg_iov = lio, .iov_count = 1, .addr = to_b, .rma_iov = rio,
			.rma_iov_count = 2, .datatype = FI_UINT64, .op = FI_SUM,
			.context = (void *)0xb4,
		};

		for (int i = 0; i < 66; i++)
			many[i] = 1;
		CHECK(fi_atomicmsg(ep_a, &lm, FI_COMPLETION) == -FI_EINVAL,
		      "a part of 520 bytes after a good one");
		if (quiet())
			return -1;
		CHECK(v1[0] == 110 && v1[1] == 212 && v2[0] == 314 &&
		      fi_cntr_read(rw_cntr) == w0 + 2, "a refused atomic changed the target");
	}
	return quiet();
}

static int test_errors(void)
{
	struct iovec liov = { src, 300 };
	struct fi_rma_iov riov[5] = {
		{ raddr(t1, 0), 100, fi_mr_key(mr1) },
		{ raddr(t2, 0), 100, fi_mr_key(mr2) ^ 0x5a5a },      /* a key B does not have */
		{ raddr(t1, 1000), 100, fi_mr_key(mr1) },
		{ raddr(t1, 2000), 0, fi_mr_key(mr1) },
		{ raddr(t1, 3000), 0, fi_mr_key(mr1) },
	};
	struct fi_msg_rma m = {
		.msg_iov = &liov, .iov_count = 1, .addr = to_b, .rma_iov = riov, .rma_iov_count = 3,
		.context = (void *)0xc1,
	};
	struct fi_cq_data_entry e;
	int err;

	CALL(fi_writemsg(ep_a, &m, FI_COMPLETION));
	CALL(wait_cq(cq_a, cq_b, &e, &err));
	CHECK(err == FI_EACCES && e.op_context == (void *)0xc1, "bad key in part 2: err %d (%s)",
	      err, fi_strerror(err));
	if (quiet())
		return -1;
	m.rma_iov_count = 5;
	CHECK(fi_writemsg(ep_a, &m, 0) == -FI_EINVAL, "5 remote iovecs (limit %zu)",
	      info->tx_attr->rma_iov_limit);
	m.rma_iov_count = 2;                    /* 200 remote bytes for 300 local */
	CHECK(fi_writemsg(ep_a, &m, 0) == -FI_EINVAL, "lengths that differ");
	{
		/* more than max_msg_size in all (refused before any byte is touched) */
		size_t big = (size_t)1 << 31;
		struct iovec hv[3] = { { src, big }, { src, big }, { src, big } };
		struct fi_rma_iov hr[3] = {
			{ raddr(t1, 0), big, fi_mr_key(mr1) },
			{ raddr(t1, 0), big, fi_mr_key(mr1) },
			{ raddr(t1, 0), big, fi_mr_key(mr1) },
		};
		struct fi_msg_rma hm = {
			.msg_iov = hv, .iov_count = 3, .addr = to_b, .rma_iov = hr,
			.rma_iov_count = 3, .context = (void *)0xc2,
		};

		CHECK(fi_writemsg(ep_a, &hm, 0) == -FI_EMSGSIZE, "6 GiB past max_msg_size %zu",
		      info->ep_attr->max_msg_size);
	}
	if (quiet())
		return -1;
	{
		/* FI_INJECT bounds the whole operation: two parts, each within inject_size but
		 * not together, are refused with nothing written; within it, they land */
		size_t inj = info->tx_attr->inject_size, part = inj / 2 + 1;
		struct iovec iv = { src, 2 * part };
		struct fi_rma_iov ir[2] = {
			{ raddr(t1, 400000), part, fi_mr_key(mr1) },
			{ raddr(t2, 400000), part, fi_mr_key(mr2) },
		};
		struct fi_msg_rma im = {
			.msg_iov = &iv, .iov_count = 1, .addr = to_b, .rma_iov = ir,
			.rma_iov_count = 2, .context = (void *)0xc3,
		};
		uint64_t w0 = fi_cntr_read(rw_cntr);

		CHECK(inj + 2 <= MEM - 400000, "inject_size %zu too big for the test", inj);
		memset(t1 + 400000, 0, 2 * part);
		memset(t2 + 400000, 0, 2 * part);
		CHECK(fi_writemsg(ep_a, &im, FI_INJECT) == -FI_EINVAL,
		      "inject write of %zu bytes in two parts past inject_size %zu", 2 * part, inj);
		if (quiet())
			return -1;
		CHECK(t1[400000] == 0 && t2[400000] == 0 && t1[400000 + part - 1] == 0 &&
		      fi_cntr_read(rw_cntr) == w0, "a refused inject write wrote");
		part = inj / 2;
		iv.iov_len = 2 * part;
		ir[0].len = ir[1].len = part;
		CALL(fi_writemsg(ep_a, &im, FI_INJECT | FI_COMPLETION));
		{
			struct fi_cq_data_entry e;
			int err;

			CALL(wait_cq(cq_a, cq_b, &e, &err));
			CHECK(!err && e.op_context == (void *)0xc3, "inject write: err %d", err);
		}
		CHECK(!memcmp(t1 + 400000, src, part) && !memcmp(t2 + 400000, src + part, part),
		      "inject write in two parts: bytes differ");
	}
	return quiet();
}

int main(int argc, char **argv)
{
	struct fi_info *hints = fi_allocinfo();
	int ret;

	if (!hints)
		return 2;
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_RMA | FI_ATOMIC | FI_RMA_EVENT;
	hints->addr_format = FI_SOCKADDR_IN;
	hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
	hints->fabric_attr->prov_name = strdup(argc > 1 ? argv[1] : "courier");
	ret = fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", "0", FI_SOURCE, hints, &info);
	fi_freeinfo(hints);
	if (ret) {
		fprintf(stderr, "rma_iov: fi_getinfo: %s\n", fi_strerror(-ret));
		return 2;
	}
	if (info->tx_attr->rma_iov_limit < 3) {
		fprintf(stderr, "rma_iov: rma_iov_limit %zu\n", info->tx_attr->rma_iov_limit);
		return 1;
	}
	t1 = calloc(1, MEM);
	t2 = calloc(1, MEM);
	src = calloc(1, MEM);
	dst = calloc(1, MEM);
	if (!t1 || !t2 || !src || !dst || open_all())
		return 1;
	printf("small parts: %s\n", test_write_read(10, 20, 30, 15) ? "FAILED" : "ok");
	printf("multi-packet parts: %s\n",
	       test_write_read(5000, 70000, 100000, 60000) ? "FAILED" : "ok");
	printf("atomics: %s\n", test_atomics() ? "FAILED" : "ok");
	printf("errors: %s\n", test_errors() ? "FAILED" : "ok");
	fi_close(&ep_a->fid);
	fi_close(&ep_b->fid);
	fi_close(&mr1->fid);
	fi_close(&mr2->fid);
	fi_close(&rw_cntr->fid);
	fi_close(&rr_cntr->fid);
	fi_close(&cq_a->fid);
	fi_close(&cq_b->fid);
	fi_close(&av_a->fid);
	fi_close(&av_b->fid);
	fi_close(&dom_a->fid);
	fi_close(&dom_b->fid);
	fi_close(&fabric->fid);
	fi_freeinfo(info);
	printf("rma_iov: %s\n", failures ? "FAILED" : "all checks held");
	return failures ? 1 : 0;
}
