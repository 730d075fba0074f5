/*
 * cour_rma: one-sided benchmarks, any provider. `cour_rma -o <op> [opts]` is the server,
 * `cour_rma -o <op> [opts] <host>` the client; both sides name the same -o:
 *   write  RMA write bandwidth, client -> server region: RESULT rma_write <size> <MBps>
 *   read   RMA read bandwidth, server region -> client:  RESULT rma_read <size> <MBps>
 *   fadd   8-byte fetch-add latency (one fi_fetch_atomic FI_SUM FI_UINT64 round trip, mean):
 *          RESULT fadd 8 <usec>
 * MB/s are 10^6 bytes/s. Bandwidth keeps a sliding window (-W, default 64) of operations in
 * flight; time runs from the first timed post to the last local completion (the provider's
 * default completion semantics: tcp;ofi_rxm completes a write once its socket took it, courier
 * once the target placed it, so a short run flatters the former by up to a socket buffer).
 * Without -n a size moves 256 MiB or runs 3 s, whichever ends first, so slow providers finish
 * in time; -n is exact.
 *
 * The server registers its region (or counter) for remote access, tells the client address and
 * key over the oob channel, and then only drives progress until the client says done (so
 * providers with manual progress answer the one-sided traffic). It then checks: with -v, the
 * written pattern (write); always, the counter equals warmup + iterations (fadd). The client
 * checks read data with -v and every fetched value always, and prints a RESULT only after the
 * server has reported its check.
 *
 * Operation k of a size works on slot k % nslots at both ends (nslots: the window, fewer when
 * the region would pass RMA_REGION_MAX); all writes or reads of a slot carry the same data,
 * seeded by size and slot, so concurrent operations on one slot cannot disagree.
 *
 * Registration follows the mr_mode the provider returns: local buffers are registered and their
 * descriptors passed only under FI_MR_LOCAL, every MR is bound and enabled under
 * FI_MR_ENDPOINT, the remote address is virtual under FI_MR_VIRT_ADDR and an offset otherwise,
 * the key is the provider's under FI_MR_PROV_KEY and ours otherwise.
 */
#define _GNU_SOURCE

#include <endian.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>

#include "ft_common.h"

#define RMA_REGION_MAX	(16UL << 20)	/* per side, bandwidth runs */
#define RMA_BYTE_BUDGET	(256UL << 20)	/* per size: scales the default operation count */
#define RMA_MIN_OPS	256
#define RMA_MAX_OPS	100000
#define RMA_WINDOW	64
#define RMA_FADD_ITERS	10000
#define RMA_FADD_WARMUP	100
#define RMA_SLOT_ALIGN	64
#define RMA_CQ_BATCH	16
#define RMA_CHECK_NS	(2000 * 1000 * 1000ULL)	/* how long written data may take to land */
#define RMA_TIME_CAP_NS	(3000 * 1000 * 1000ULL)	/* timed part of one size, default counts */
#define RMA_PEER_CHECK_NS (100 * 1000 * 1000ULL)

enum rma_op { RMA_OP_WRITE, RMA_OP_READ, RMA_OP_FADD };

static const char *const rma_result_name[] = {
	[RMA_OP_WRITE] = "rma_write", [RMA_OP_READ] = "rma_read", [RMA_OP_FADD] = "fadd",
};
static const char *const rma_test_name[] = {
	[RMA_OP_WRITE] = "rma-write", [RMA_OP_READ] = "rma-read", [RMA_OP_FADD] = "rma-fadd",
};
static const size_t rma_bw_sizes[] = { 65536, 1 << 20 };

struct rma {
	struct cour_ft ft;
	enum rma_op op;
	bool op_set;
	int window;
	size_t region_len;
	struct cour_ft_buf local;	/* client: sources, destinations, operand and result */
	struct cour_ft_buf region;	/* server: the remotely accessed region or counter */
	uint64_t raddr;			/* client: the server's region as the provider wants it */
	uint64_t rkey;
	struct fi_context2 *ctx;	/* one per operation in flight */
	int *free_ctx;
	int nfree;
	bool bad;			/* a completion we did not post */
	uint64_t next_check_ns;
	unsigned int spins;
};

static int rma_opt(int opt, const char *arg, void *vr)
{
	struct rma *r = vr;

	if (opt != 'o')
		return -1;
	if (!strcmp(arg, "write"))
		r->op = RMA_OP_WRITE;
	else if (!strcmp(arg, "read"))
		r->op = RMA_OP_READ;
	else if (!strcmp(arg, "fadd"))
		r->op = RMA_OP_FADD;
	else
		return -1;
	r->op_set = true;
	return 0;
}

/* ---- registration ---- */

static int rma_mr_reg(struct rma *r, struct cour_ft_buf *buf, uint64_t access)
{
	struct cour_ft *ft = &r->ft;
	uint64_t mr_mode = ft->info->domain_attr->mr_mode;
	uint64_t key = (mr_mode & FI_MR_PROV_KEY) ? 0 : ft->next_mr_key++;
	int ret;

	ret = fi_mr_reg(ft->domain, buf->base, buf->len, access, 0, key, 0, &buf->mr, NULL);
	if (ret) {
		COUR_FT_FIERR("fi_mr_reg", ret);
		buf->mr = NULL;
		return ret;
	}
	if (mr_mode & FI_MR_ENDPOINT) {
		ret = fi_mr_bind(buf->mr, &ft->ep->fid, 0);
		if (ret) {
			COUR_FT_FIERR("fi_mr_bind", ret);
			return ret;
		}
		ret = fi_mr_enable(buf->mr);
		if (ret) {
			COUR_FT_FIERR("fi_mr_enable", ret);
			return ret;
		}
	}
	buf->desc = fi_mr_desc(buf->mr);
	return 0;
}

/* Page-aligned, zeroed; remote: registered for remote access, else only under FI_MR_LOCAL. */
static int rma_buf_alloc(struct rma *r, size_t len, bool remote, struct cour_ft_buf *buf)
{
	uint64_t mr_mode = r->ft.info->domain_attr->mr_mode;
	void *base;

	if (posix_memalign(&base, COUR_FT_ALIGN, len)) {
		COUR_FT_ERR("posix_memalign(%zu): out of memory", len);
		return -FI_ENOMEM;
	}
	memset(base, 0, len);
	buf->base = base;
	buf->len = len;
	if (remote)
		return rma_mr_reg(r, buf, FI_REMOTE_READ | FI_REMOTE_WRITE);
	if (mr_mode & FI_MR_LOCAL)
		return rma_mr_reg(r, buf, FI_READ | FI_WRITE);
	return 0;
}

/* Server -> client: where the region is, as the provider addresses it, and its key. */
static int rma_exchange_region(struct rma *r)
{
	struct cour_ft *ft = &r->ft;
	uint64_t msg[3];
	uint64_t key;
	int ret;

	if (!ft->is_server) {
		ret = cour_ft_oob_recv(ft, msg, sizeof(msg));
		if (ret)
			return ret;
		r->raddr = be64toh(msg[0]);
		r->rkey = be64toh(msg[1]);
		if (be64toh(msg[2]) != r->region_len) {
			COUR_FT_ERR("the server's region has %llu bytes, we need %zu",
				    (unsigned long long)be64toh(msg[2]), r->region_len);
			return -FI_EINVAL;
		}
		return 0;
	}
	key = fi_mr_key(r->region.mr);
	if (key == FI_KEY_NOTAVAIL) {
		COUR_FT_ERR("fi_mr_key: the key does not fit 64 bits (raw keys unsupported)");
		return -FI_EINVAL;
	}
	msg[0] = htobe64((ft->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ?
			 (uint64_t)(uintptr_t)r->region.base : 0);
	msg[1] = htobe64(key);
	msg[2] = htobe64((uint64_t)r->region_len);
	return cour_ft_oob_send(ft, msg, sizeof(msg));
}

/* ---- completions (client) ---- */

static void rma_tx_comp(struct cour_ft *ft, const struct fi_cq_tagged_entry *comp)
{
	struct rma *r = ft->app;
	struct fi_context2 *ctx = comp->op_context;

	if (ctx < r->ctx || ctx >= r->ctx + r->window || r->nfree >= r->window) {
		fprintf(stderr, "cour_rma: completion with unknown context %p\n", (void *)ctx);
		r->bad = true;
		return;
	}
	r->free_ctx[r->nfree++] = (int)(ctx - r->ctx);
}

/*
 * One read of the transmit CQ: the only one that gets completions on the client, and reading
 * it drives manual progress; the rx CQ is left alone to keep the latency loop short.
 */
static int rma_reap(struct rma *r, const char *what)
{
	struct cour_ft *ft = &r->ft;
	struct fi_cq_tagged_entry comp[RMA_CQ_BATCH];
	struct fi_cq_err_entry err = { 0 };
	char pbuf[256];
	const char *pstr;
	uint64_t now;
	ssize_t n, i;
	int ret;

	n = fi_cq_read(ft->txcq, comp, RMA_CQ_BATCH);
	if (n > 0) {
		ft->tx_done += (uint64_t)n;
		for (i = 0; i < n; i++)
			rma_tx_comp(ft, &comp[i]);
		return r->bad ? -FI_EIO : 0;
	}
	if (n == -FI_EAVAIL) {
		n = fi_cq_readerr(ft->txcq, &err, 0);
		if (n < 0) {
			COUR_FT_FIERR("fi_cq_readerr", n);
			return (int)n;
		}
		pstr = fi_cq_strerror(ft->txcq, err.prov_errno, err.err_data, pbuf, sizeof(pbuf));
		fprintf(stderr, "cour_rma: %s completion error: %d (%s), provider: %d (%s)\n",
			rma_result_name[r->op], err.err, fi_strerror(err.err), err.prov_errno,
			pstr ? pstr : "?");
		return err.err ? -err.err : -FI_EOTHER;
	}
	if (n != -FI_EAGAIN && n != 0) {
		COUR_FT_FIERR("fi_cq_read", n);
		return (int)n;
	}
	/* the clock costs more than an empty CQ read: look at it every 64 idle spins */
	if ((++r->spins & 63) != 0)
		return 0;
	ret = cour_ft_check_deadline(ft, what);
	now = cour_ft_now_ns();
	if (!ret && now >= r->next_check_ns) {
		r->next_check_ns = now + RMA_PEER_CHECK_NS;
		ret = cour_ft_oob_check_peer(ft);
	}
	return ret;
}

static int rma_wait_tx(struct rma *r, uint64_t target)
{
	int ret = 0;

	while (!ret && r->ft.tx_done < target)
		ret = rma_reap(r, "RMA completions");
	/* the harness's own CQ reads (in oob waits) may have found a stray completion too */
	return ret ? ret : r->bad ? -FI_EIO : 0;
}

/* ---- bandwidth ---- */

static size_t rma_stride(size_t size)
{
	size_t s = (size + RMA_SLOT_ALIGN - 1) & ~(size_t)(RMA_SLOT_ALIGN - 1);

	return s ? s : RMA_SLOT_ALIGN;
}

static int rma_nslots(const struct rma *r, size_t size)
{
	size_t n = r->region_len / rma_stride(size);

	return n < (size_t)r->window ? (int)(n ? n : 1) : r->window;
}

static uint64_t rma_seed(int size_idx, int slot)
{
	return ((uint64_t)(size_idx + 1) << 32) | (uint64_t)slot;
}

static long rma_bw_ops(const struct cour_ft_opts *o, size_t size)
{
	long n;

	if (o->iterations)
		return o->iterations;
	n = (long)(RMA_BYTE_BUDGET / (size ? size : 1));
	return n < RMA_MIN_OPS ? RMA_MIN_OPS : n > RMA_MAX_OPS ? RMA_MAX_OPS : n;
}

static long rma_bw_warmup(const struct rma *r, long ops)
{
	long w = ops / 10;

	if (r->ft.opts.warmup >= 0)
		return r->ft.opts.warmup;
	return w < r->window ? r->window : w;
}

static ssize_t rma_post_one(struct rma *r, size_t size, int slot, struct fi_context2 *ctx)
{
	struct cour_ft *ft = &r->ft;
	size_t off = (size_t)slot * rma_stride(size);
	char *buf = (char *)r->local.base + off;

	if (r->op == RMA_OP_WRITE)
		return fi_write(ft->ep, buf, size, r->local.desc, ft->peer, r->raddr + off,
				r->rkey, ctx);
	return fi_read(ft->ep, buf, size, r->local.desc, ft->peer, r->raddr + off, r->rkey,
		       ctx);
}

/*
 * nops operations with at most a window in flight, fewer if stop_ns (when nonzero) passes
 * first; *done counts them. All have completed on return.
 */
static int rma_stream(struct rma *r, size_t size, int nslots, long nops, uint64_t stop_ns,
		      long *done)
{
	struct cour_ft *ft = &r->ft;
	const char *call = r->op == RMA_OP_WRITE ? "fi_write" : "fi_read";
	long k = 0;
	ssize_t ret;
	int c;

	while (k < nops) {
		if (stop_ns && (k & 63) == 63 && cour_ft_now_ns() >= stop_ns)
			break;
		if (!r->nfree) {
			ret = rma_reap(r, "a free slot in the window");
			if (ret)
				return (int)ret;
			continue;
		}
		c = r->free_ctx[--r->nfree];
		ret = rma_post_one(r, size, (int)(k % nslots), &r->ctx[c]);
		if (ret == 0) {
			ft->tx_posted++;
			*done = ++k;
			continue;
		}
		r->free_ctx[r->nfree++] = c;
		if (ret != -FI_EAGAIN) {
			COUR_FT_FIERR(call, ret);
			return (int)ret;
		}
		ret = rma_reap(r, "room to post");
		if (ret)
			return (int)ret;
	}
	return rma_wait_tx(r, ft->tx_posted);
}

/*
 * 0 if the used slots hold their pattern and every other byte of the region is still zero;
 * who names the side in the message about a mismatch, NULL for none.
 */
static int rma_check_slots(const struct cour_ft_buf *buf, int size_idx,
			   size_t size, int used, bool zero_rest, const char *who)
{
	const uint8_t *p = buf->base;
	size_t stride = rma_stride(size), bad, off;
	int s;

	for (s = 0; s < used; s++)
		if (cour_ft_check(p + (size_t)s * stride, size, rma_seed(size_idx, s), &bad)) {
			if (!who)
				return -FI_EIO;
			fprintf(stderr, "cour_rma: %s data mismatch: size %zu, slot %d, offset %zu: "
				"got 0x%02x, expected 0x%02x\n", who, size, s, bad,
				p[(size_t)s * stride + bad],
				cour_ft_pattern_byte(rma_seed(size_idx, s), bad));
			return -FI_EIO;
		}
	if (!zero_rest)
		return 0;
	for (off = 0; off < buf->len; off++) {
		/* skip the part of a used slot that operations cover */
		while (size && off % stride == 0 && off / stride < (size_t)used)
			off += size;
		if (off < buf->len && p[off]) {
			if (!who)
				return -FI_EIO;
			fprintf(stderr, "cour_rma: %s: byte %zu of the region was written (0x%02x) "
				"but no operation covers it\n", who, off, p[off]);
			return -FI_EIO;
		}
	}
	return 0;
}

static void rma_fill_slots(struct cour_ft_buf *buf, int size_idx, size_t size, int nslots)
{
	int s;

	memset(buf->base, 0, buf->len);
	for (s = 0; s < nslots; s++)
		cour_ft_fill((char *)buf->base + (size_t)s * rma_stride(size), size,
			     rma_seed(size_idx, s));
}

/*
 * Writes complete at the client once the server's provider has them, which may be before they
 * are in memory: keep the fabric going while the data is late, for a bounded time.
 */
static int rma_server_check_writes(struct rma *r, int size_idx, size_t size, int used)
{
	uint64_t until = cour_ft_now_ns() + RMA_CHECK_NS;
	bool last;
	int ret, i;

	for (;;) {
		last = cour_ft_now_ns() >= until;
		ret = rma_check_slots(&r->region, size_idx, size, used, true,
				      last ? "server" : NULL);
		if (!ret || last)
			return ret;
		for (i = 0; i < 1000; i++) {
			ret = cour_ft_progress(&r->ft);
			if (ret)
				return ret;
		}
	}
}

static int rma_bw_size(struct rma *r, int size_idx, size_t size)
{
	struct cour_ft *ft = &r->ft;
	const struct cour_ft_opts *o = &ft->opts;
	int nslots = rma_nslots(r, size);
	long ops = rma_bw_ops(o, size), warm = rma_bw_warmup(r, ops);
	long warm_done = 0, done = 0, reach;
	uint64_t start, ns, stop_ns, total;
	int32_t status = 0;
	double mbps;
	char sz[16];
	int ret;

	if (ft->is_server) {
		/* the region is all zero before writes and holds the pattern before reads */
		if (o->verify && r->op == RMA_OP_WRITE)
			memset(r->region.base, 0, r->region.len);
		else if (o->verify)
			rma_fill_slots(&r->region, size_idx, size, nslots);
		ret = cour_ft_barrier(ft);
		/* the client's "done" with the longest run of slots: until then we only progress */
		if (!ret)
			ret = cour_ft_oob_recv(ft, &total, sizeof(total));
		total = be64toh(total);
		if (!ret && o->verify && r->op == RMA_OP_WRITE)
			status = rma_server_check_writes(r, size_idx, size,
							 total < (uint64_t)nslots ? (int)total : nslots);
		if (!ret)
			ret = cour_ft_oob_send(ft, &status, sizeof(status));
		return ret ? ret : status;
	}

	if (o->verify && r->op == RMA_OP_WRITE)
		rma_fill_slots(&r->local, size_idx, size, nslots);
	else if (o->verify)
		memset(r->local.base, 0, r->local.len);
	ret = cour_ft_barrier(ft);
	/* a slow provider must not run into the deadline with the default counts */
	stop_ns = o->iterations || o->warmup >= 0 ? 0 : cour_ft_now_ns() + RMA_TIME_CAP_NS / 4;
	if (!ret)
		ret = rma_stream(r, size, nslots, warm, stop_ns, &warm_done);
	start = cour_ft_now_ns();
	stop_ns = o->iterations ? 0 : start + RMA_TIME_CAP_NS;
	if (!ret)
		ret = rma_stream(r, size, nslots, ops, stop_ns, &done);
	ns = cour_ft_now_ns() - start;
	/* both phases start at slot 0: the longer one says which slots were used */
	reach = warm_done > done ? warm_done : done;
	total = htobe64((uint64_t)reach);
	if (!ret)
		ret = cour_ft_oob_send(ft, &total, sizeof(total));
	if (!ret && o->verify && r->op == RMA_OP_READ)
		ret = rma_check_slots(&r->local, size_idx, size, reach < nslots ? (int)reach : nslots,
				      false, "client");
	if (!ret)
		ret = cour_ft_oob_recv(ft, &status, sizeof(status));
	if (ret)
		return ret;
	if (status) {
		fprintf(stderr, "cour_rma: the server's check failed: %d (%s)\n", status,
			fi_strerror(-status));
		return status;
	}
	mbps = (double)size * (double)done / ((double)ns / 1e9) / 1e6;
	printf("  %10s %10ld %8d %8d %12.2f\n", cour_ft_size_str(size, sz, sizeof(sz)), done,
	       r->window, nslots, mbps);
	printf("RESULT %s %zu %.2f\n", rma_result_name[r->op], size, mbps);
	fflush(stdout);
	return 0;
}

static int rma_bw_run(struct rma *r)
{
	struct cour_ft *ft = &r->ft;
	const struct cour_ft_opts *o = &ft->opts;
	size_t max_stride = 0, max_msg = ft->info->ep_attr->max_msg_size;
	size_t cq_room = ft->info->tx_attr->size > 256 ? ft->info->tx_attr->size : 256;
	int i, ret;

	r->window = o->window ? o->window : RMA_WINDOW;
	/* the harness sizes the CQ so: more in flight could overrun it */
	if ((size_t)r->window > cq_room)
		r->window = (int)cq_room;
	for (i = 0; i < o->nsizes; i++)
		if (o->sizes[i] <= max_msg && rma_stride(o->sizes[i]) > max_stride)
			max_stride = rma_stride(o->sizes[i]);
	if (!max_stride)
		max_stride = RMA_SLOT_ALIGN;
	r->region_len = max_stride * (size_t)r->window;
	if (r->region_len > RMA_REGION_MAX)
		r->region_len = max_stride > RMA_REGION_MAX ? max_stride : RMA_REGION_MAX;

	r->ctx = calloc((size_t)r->window, sizeof(*r->ctx));
	r->free_ctx = calloc((size_t)r->window, sizeof(*r->free_ctx));
	if (!r->ctx || !r->free_ctx) {
		COUR_FT_ERR("out of memory");
		return -FI_ENOMEM;
	}
	for (i = 0; i < r->window; i++)
		r->free_ctx[i] = i;
	r->nfree = r->window;
	ret = rma_buf_alloc(r, r->region_len, ft->is_server,
			    ft->is_server ? &r->region : &r->local);
	if (!ret)
		ret = rma_exchange_region(r);
	if (ret)
		return ret;

	if (!ft->is_server)
		printf("# %10s %10s %8s %8s %12s%s\n", "size", "ops", "window", "slots", "MB/s",
		       o->verify ? "  (verified)" : "");
	for (i = 0; !ret && i < o->nsizes; i++) {
		if (o->sizes[i] > max_msg) {
			if (!ft->is_server)
				printf("# size %zu skipped: above max_msg_size %zu\n", o->sizes[i],
				       max_msg);
			continue;
		}
		ret = rma_bw_size(r, i, o->sizes[i]);
	}
	return ret;
}

/* ---- fetch-add latency ---- */

static int rma_fadd_client(struct rma *r, long warmup, long total)
{
	struct cour_ft *ft = &r->ft;
	uint64_t *operand = r->local.base, *result = operand + 1;
	uint64_t start = 0, ns;
	double usec;
	int32_t status;
	size_t count = 0;
	ssize_t ret;
	long i;

	ret = fi_fetch_atomicvalid(ft->ep, FI_UINT64, FI_SUM, &count);
	if (ret || count < 1) {
		fprintf(stderr, "cour_rma: the provider has no fetching FI_SUM on FI_UINT64 "
			"(fi_fetch_atomicvalid: %zd, count %zu)\n", ret, count);
		return ret ? (int)ret : -FI_EOPNOTSUPP;
	}
	*operand = 1;
	ret = cour_ft_barrier(ft);
	for (i = 0; !ret && i < total; i++) {
		if (i == warmup)
			start = cour_ft_now_ns();
		*result = ~0ULL;
		for (;;) {
			ret = fi_fetch_atomic(ft->ep, operand, 1, r->local.desc, result,
					      r->local.desc, ft->peer, r->raddr, r->rkey,
					      FI_UINT64, FI_SUM, &r->ctx[r->free_ctx[0]]);
			if (ret != -FI_EAGAIN)
				break;
			ret = rma_reap(r, "room to post");
			if (ret)
				return (int)ret;
		}
		if (ret) {
			COUR_FT_FIERR("fi_fetch_atomic", ret);
			return (int)ret;
		}
		r->nfree--;
		ft->tx_posted++;
		ret = rma_wait_tx(r, ft->tx_posted);
		if (!ret && *result != (uint64_t)i) {
			fprintf(stderr, "cour_rma: fetch-add %ld returned %llu, expected %ld\n", i,
				(unsigned long long)*result, i);
			ret = -FI_EIO;
		}
	}
	ns = cour_ft_now_ns() - start;
	if (!ret)
		ret = cour_ft_barrier(ft);
	if (!ret)
		ret = cour_ft_oob_recv(ft, &status, sizeof(status));
	if (ret)
		return (int)ret;
	if (status) {
		fprintf(stderr, "cour_rma: the server's check failed: %d (%s)\n", status,
			fi_strerror(-status));
		return status;
	}
	usec = (double)ns / 1e3 / (double)(total - warmup);
	printf("# %10s %10s %12s\n", "size", "iters", "lat_usec");
	printf("  %10d %10ld %12.2f\n", 8, total - warmup, usec);
	printf("RESULT fadd 8 %.3f\n", usec);
	fflush(stdout);
	return 0;
}

static int rma_fadd_run(struct rma *r)
{
	struct cour_ft *ft = &r->ft;
	const struct cour_ft_opts *o = &ft->opts;
	long iters = o->iterations ? o->iterations : RMA_FADD_ITERS;
	long warmup = o->warmup >= 0 ? o->warmup : RMA_FADD_WARMUP;
	uint64_t counter;
	int32_t status = 0;
	int ret;

	r->window = 1;
	r->region_len = sizeof(uint64_t);
	r->ctx = calloc(1, sizeof(*r->ctx));
	r->free_ctx = calloc(1, sizeof(*r->free_ctx));
	if (!r->ctx || !r->free_ctx) {
		COUR_FT_ERR("out of memory");
		return -FI_ENOMEM;
	}
	r->nfree = 1;
	/* the client's buffer holds the operand and the result */
	ret = rma_buf_alloc(r, ft->is_server ? r->region_len : 2 * sizeof(uint64_t),
			    ft->is_server, ft->is_server ? &r->region : &r->local);
	if (!ret)
		ret = rma_exchange_region(r);
	if (ret)
		return ret;
	if (!ft->is_server)
		return rma_fadd_client(r, warmup, warmup + iters);

	ret = cour_ft_barrier(ft);
	if (!ret)	/* the client's "done": until then we only progress */
		ret = cour_ft_barrier(ft);
	if (ret)
		return ret;
	memcpy(&counter, r->region.base, sizeof(counter));
	if (counter != (uint64_t)(warmup + iters)) {
		fprintf(stderr, "cour_rma: counter is %llu after %ld fetch-adds of 1\n",
			(unsigned long long)counter, warmup + iters);
		status = -FI_EIO;
	}
	ret = cour_ft_oob_send(ft, &status, sizeof(status));
	return ret ? ret : status;
}

/* ---- main ---- */

int main(int argc, char **argv)
{
	struct cour_ft_opts opts;
	struct rma r = { 0 };
	size_t i;
	int ret;

	cour_ft_opts_init(&opts);
	ret = cour_ft_parse_opts(&opts, argc, argv, "o:", rma_opt, &r,
				 "rma: -o write|read|fadd (required, the same on both sides)\n"
				 "  write, read: MB/s (10^6 bytes/s); default sizes 64k,1m, window 64;\n"
				 "    -n counts operations (default: 256 MiB or 3 s per size);\n"
				 "    -v checks the data (server after writes, client after reads)\n"
				 "  fadd: mean latency of one 8-byte fetch-add (a round trip);\n"
				 "    -n counts operations (default 10000); every fetched value and the\n"
				 "    final counter are always checked; -S does not apply\n");
	if (ret)
		return ret > 0 ? EXIT_SUCCESS : EXIT_FAILURE;
	if (!r.op_set) {
		fprintf(stderr, "cour_rma: -o write|read|fadd is required\n");
		return EXIT_FAILURE;
	}
	/* a note, not a failure: compare.sh may hand one -S to every benchmark */
	if (r.op == RMA_OP_FADD && opts.nsizes && (opts.nsizes != 1 || opts.sizes[0] != 8))
		fprintf(stderr, "cour_rma: fadd has one size, 8: -S ignored\n");
	if (r.op != RMA_OP_FADD && !opts.nsizes) {
		for (i = 0; i < COUR_FT_ARRAY_SIZE(rma_bw_sizes); i++)
			opts.sizes[i] = rma_bw_sizes[i];
		opts.nsizes = (int)i;
	}
	opts.test_name = rma_test_name[r.op];
	/* only what the operation needs, so a provider is not excluded for the other one */
	opts.caps = r.op == RMA_OP_FADD ? FI_ATOMIC : FI_RMA;
	opts.tagged = false;

	ret = cour_ft_start(&r.ft, &opts);
	r.ft.app = &r;
	r.ft.tx_cb = rma_tx_comp;
	if (!ret) {
		cour_ft_print_header(&r.ft, rma_result_name[r.op]);
		ret = r.op == RMA_OP_FADD ? rma_fadd_run(&r) : rma_bw_run(&r);
	}
	if (!ret)
		ret = cour_ft_finish(&r.ft);
	cour_ft_close_ep(&r.ft);
	cour_ft_buf_free(&r.local);
	cour_ft_buf_free(&r.region);
	cour_ft_close(&r.ft);
	free(r.ctx);
	free(r.free_ctx);
	if (ret) {
		fprintf(stderr, "cour_rma: %s failed: %d (%s)\n", rma_result_name[r.op], ret,
			fi_strerror(-ret));
		return EXIT_FAILURE;
	}
	return EXIT_SUCCESS;
}
