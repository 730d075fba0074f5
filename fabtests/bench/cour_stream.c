/*
 * Streaming engine for cour_bw and cour_msgrate, any provider.
 *
 * Per size, for every window w (warmup windows first, untimed):
 *   client: sends messages w*W .. w*W+W-1 from W buffer slots, waits for their send
 *           completions, then for the server's acknowledgement of window w;
 *   server: has the W receives of window w posted before the client can send them (the first
 *           window before a barrier, the next ones before it acknowledges the current one),
 *           waits for all W, checks them, posts window w+1, acknowledges w.
 * So no provider is measured on its unexpected-message path, and the client's time runs from
 * the first timed send to the last acknowledgement: what the receiver actually got.
 *
 * Matching: tagged messages carry their sequence number as tag, untagged ones rely on
 * FI_ORDER_SAS (asked for in the hints for untagged RDM runs), so with -v each slot has one
 * known sender message and every byte of it is checked. Over DGRAM nothing is guaranteed: a
 * lost datagram ends the run at the deadline, a reordered one fails -v.
 */
#define _GNU_SOURCE

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft_common.h"
#include "cour_stream.h"

#define ST_TAG_MASK	0xffffffULL		/* windows are far smaller than this */
#define ST_TAG_ACK	(1ULL << 30)
#define ST_ACK_LEN	8
#define ST_SLOT_ALIGN	64
#define ST_MAX_WARMUP_WINDOWS 10

struct st_params {
	const char *name;
	size_t byte_budget;	/* default message count: budget / size, clamped below */
	long min_msgs;
	long max_msgs;
	int window;
	const size_t *sizes;
	int nsizes;
};

static const size_t st_bw_sizes[] = { 1, 8, 64, 512, 4096, 65536, 1 << 20 };
static const size_t st_rate_sizes[] = { 64 };

static const struct st_params st_params[] = {
	[COUR_STREAM_BW] = {
		.name = "bw", .byte_budget = 256UL << 20, .min_msgs = 256, .max_msgs = 100000,
		.window = 64, .sizes = st_bw_sizes, .nsizes = COUR_FT_ARRAY_SIZE(st_bw_sizes),
	},
	[COUR_STREAM_RATE] = {
		.name = "rate", .byte_budget = 0, .min_msgs = 100000, .max_msgs = 100000,
		.window = 256, .sizes = st_rate_sizes, .nsizes = COUR_FT_ARRAY_SIZE(st_rate_sizes),
	},
};

static const char *const st_usage[] = {
	[COUR_STREAM_BW] =
		"bw: client-to-server MB/s (10^6 bytes/s); default sizes 1,8,64,512,4k,64k,1m,\n"
		"  window 64; -n counts messages, rounded up to whole windows.\n",
	[COUR_STREAM_RATE] =
		"msgrate: client-to-server messages/s; default size 64, window 256;\n"
		"  -n counts messages, rounded up to whole windows.\n",
};

struct st {
	struct cour_ft ft;
	const struct st_params *par;
	int window;
	size_t stride;			/* bytes between slots */
	struct cour_ft_buf data;	/* window slots */
	struct cour_ft_buf ack;
	struct fi_context2 *ctx;	/* one per slot */
	struct fi_context2 ack_ctx;
	uint64_t *slot_seq;		/* message expected in each receive slot */
	size_t cur_size;
	int bad;			/* a completion did not match what was posted */
};

static inline uint64_t st_tag(uint64_t seq)
{
	return seq & ST_TAG_MASK;
}

static inline void *st_slot(struct st *st, int i)
{
	return (char *)st->data.base + (size_t)i * st->stride;
}

/* Every receive completion must be the message its slot was posted for. */
static void st_rx_comp(struct cour_ft *ft, const struct fi_cq_tagged_entry *comp)
{
	struct st *st = ft->app;
	struct fi_context2 *ctx = comp->op_context;
	size_t expect_len;
	uint64_t expect_tag;

	if (ctx == &st->ack_ctx) {
		expect_len = ST_ACK_LEN;
		expect_tag = ST_TAG_ACK;
	} else if (ctx >= st->ctx && ctx < st->ctx + st->window) {
		expect_len = st->cur_size;
		expect_tag = st_tag(st->slot_seq[ctx - st->ctx]);
	} else {
		fprintf(stderr, "cour_%s: receive completion with unknown context %p\n",
			st->par->name, (void *)ctx);
		st->bad = 1;
		return;
	}
	if (comp->len != expect_len || (ft->opts.tagged && comp->tag != expect_tag)) {
		fprintf(stderr, "cour_%s: receive completion: len %zu tag 0x%llx, expected "
			"len %zu tag 0x%llx\n", st->par->name, comp->len,
			(unsigned long long)comp->tag, expect_len, (unsigned long long)expect_tag);
		st->bad = 1;
	}
}

static long st_msgs(const struct st *st, size_t size)
{
	const struct st_params *par = st->par;
	long n = st->ft.opts.iterations;

	if (!n) {
		n = par->byte_budget ? (long)(par->byte_budget / (size ? size : 1)) : par->min_msgs;
		n = n < par->min_msgs ? par->min_msgs : n > par->max_msgs ? par->max_msgs : n;
	}
	return n;
}

static int st_check_window(struct st *st, uint64_t first_seq)
{
	size_t bad;
	int i;

	if (st->bad)
		return -FI_EIO;
	if (!st->ft.opts.verify)
		return 0;
	for (i = 0; i < st->window; i++) {
		if (!cour_ft_check(st_slot(st, i), st->cur_size, first_seq + (uint64_t)i, &bad))
			continue;
		fprintf(stderr, "cour_%s: data mismatch: size %zu, message %llu, offset %zu: "
			"got 0x%02x, expected 0x%02x\n", st->par->name, st->cur_size,
			(unsigned long long)(first_seq + (uint64_t)i), bad,
			((uint8_t *)st_slot(st, i))[bad],
			cour_ft_pattern_byte(first_seq + (uint64_t)i, bad));
		return -FI_EIO;
	}
	return 0;
}

static int st_post_window(struct st *st, uint64_t first_seq)
{
	int i, ret;

	for (i = 0; i < st->window; i++) {
		st->slot_seq[i] = first_seq + (uint64_t)i;
		ret = cour_ft_post_recv(&st->ft, st_slot(st, i), st->cur_size, st->data.desc,
					st_tag(first_seq + (uint64_t)i), &st->ctx[i]);
		if (ret)
			return ret;
	}
	return 0;
}

static int st_server(struct st *st, long nwin)
{
	struct cour_ft *ft = &st->ft;
	uint64_t w;
	int ret;

	ret = st_post_window(st, 0);
	if (!ret)
		ret = cour_ft_barrier(ft);
	for (w = 0; !ret && w < (uint64_t)nwin; w++) {
		uint64_t first = w * (uint64_t)st->window;

		ret = cour_ft_wait_rx(ft, ft->rx_posted);
		if (!ret)
			ret = st_check_window(st, first);
		if (!ret && w + 1 < (uint64_t)nwin)
			ret = st_post_window(st, first + (uint64_t)st->window);
		/* the previous acknowledgement must have left its buffer */
		if (!ret)
			ret = cour_ft_wait_tx(ft, ft->tx_posted);
		if (!ret) {
			memcpy(st->ack.base, &w, sizeof(w));
			ret = cour_ft_post_send(ft, st->ack.base, ST_ACK_LEN, st->ack.desc,
						ST_TAG_ACK, &st->ack_ctx);
		}
	}
	return ret ? ret : cour_ft_wait_tx(ft, ft->tx_posted);
}

static int st_client(struct st *st, long warm_win, long nwin, uint64_t *ns)
{
	struct cour_ft *ft = &st->ft;
	uint64_t start = 0, w, acked;
	int i, ret;

	ret = cour_ft_post_recv(ft, st->ack.base, ST_ACK_LEN, st->ack.desc, ST_TAG_ACK,
				&st->ack_ctx);
	if (!ret)
		ret = cour_ft_barrier(ft);
	for (w = 0; !ret && w < (uint64_t)nwin; w++) {
		uint64_t first = w * (uint64_t)st->window;

		if (w == (uint64_t)warm_win)
			start = cour_ft_now_ns();
		for (i = 0; !ret && i < st->window; i++) {
			if (ft->opts.verify)
				cour_ft_fill(st_slot(st, i), st->cur_size, first + (uint64_t)i);
			ret = cour_ft_post_send(ft, st_slot(st, i), st->cur_size, st->data.desc,
						st_tag(first + (uint64_t)i), &st->ctx[i]);
		}
		if (!ret)
			ret = cour_ft_wait_tx(ft, ft->tx_posted);
		if (!ret)
			ret = cour_ft_wait_rx(ft, ft->rx_posted);
		if (ret)
			break;
		memcpy(&acked, st->ack.base, sizeof(acked));
		if (st->bad || acked != w) {
			fprintf(stderr, "cour_%s: acknowledgement for window %llu, expected %llu\n",
				st->par->name, (unsigned long long)acked, (unsigned long long)w);
			return -FI_EIO;
		}
		if (w + 1 < (uint64_t)nwin)
			ret = cour_ft_post_recv(ft, st->ack.base, ST_ACK_LEN, st->ack.desc,
						ST_TAG_ACK, &st->ack_ctx);
	}
	*ns = cour_ft_now_ns() - start;
	return ret;
}

static void st_print(const struct st *st, size_t size, long msgs, uint64_t ns)
{
	double sec = (double)ns / 1e9;
	double mbps = (double)size * (double)msgs / sec / 1e6;
	double rate = (double)msgs / sec;
	char sz[16];

	cour_ft_size_str(size, sz, sizeof(sz));
	if (st->par == &st_params[COUR_STREAM_BW]) {
		printf("  %10s %10ld %8d %12.2f\n", sz, msgs, st->window, mbps);
		printf("RESULT bw %zu %.2f\n", size, mbps);
	} else {
		printf("  %10s %10ld %8d %14.0f %12.2f\n", sz, msgs, st->window, rate, mbps);
		printf("RESULT rate %zu %.0f\n", size, rate);
	}
	fflush(stdout);
}

static int st_alloc(struct st *st)
{
	const struct cour_ft_opts *o = &st->ft.opts;
	size_t max_size = 0;
	int i, ret;

	for (i = 0; i < o->nsizes; i++)
		if (o->sizes[i] > max_size && o->sizes[i] <= st->ft.info->ep_attr->max_msg_size)
			max_size = o->sizes[i];
	st->stride = (max_size + ST_SLOT_ALIGN - 1) & ~(size_t)(ST_SLOT_ALIGN - 1);
	if (!st->stride)
		st->stride = ST_SLOT_ALIGN;
	st->ctx = calloc((size_t)st->window, sizeof(*st->ctx));
	st->slot_seq = calloc((size_t)st->window, sizeof(*st->slot_seq));
	if (!st->ctx || !st->slot_seq) {
		fprintf(stderr, "cour_%s: out of memory\n", st->par->name);
		return -FI_ENOMEM;
	}
	ret = cour_ft_buf_alloc(&st->ft, st->stride * (size_t)st->window, &st->data);
	return ret ? ret : cour_ft_buf_alloc(&st->ft, ST_ACK_LEN, &st->ack);
}

static int st_run(struct st *st)
{
	struct cour_ft *ft = &st->ft;
	const struct cour_ft_opts *o = &ft->opts;
	int i, ret;

	st->window = o->window ? o->window : st->par->window;
	/*
	 * The server posts a whole window before the barrier that lets the client send: more
	 * receives than the queue holds would wait there for room forever.
	 */
	if (ft->info->rx_attr->size && (size_t)st->window > ft->info->rx_attr->size) {
		st->window = (int)ft->info->rx_attr->size;
		if (!ft->is_server)
			printf("# window capped to %d, the provider's receive queue size\n",
			       st->window);
	}
	ret = st_alloc(st);
	if (ret)
		return ret;
	if (!ft->is_server) {
		if (st->par == &st_params[COUR_STREAM_BW])
			printf("# %10s %10s %8s %12s%s\n", "size", "msgs", "window", "MB/s",
			       o->verify ? "  (verified; fill time included)" : "");
		else
			printf("# %10s %10s %8s %14s %12s%s\n", "size", "msgs", "window",
			       "msgs/s", "MB/s", o->verify ? "  (verified)" : "");
	}
	for (i = 0; !ret && i < o->nsizes; i++) {
		size_t size = o->sizes[i];
		long msgs = st_msgs(st, size);
		long nwin = (msgs + st->window - 1) / st->window;
		long warm = o->warmup >= 0 ? (o->warmup + st->window - 1) / st->window :
			    nwin / 10 < 1 ? 1 : nwin / 10 > ST_MAX_WARMUP_WINDOWS ?
			    ST_MAX_WARMUP_WINDOWS : nwin / 10;
		uint64_t ns;

		if (size > ft->info->ep_attr->max_msg_size) {
			if (!ft->is_server)
				printf("# size %zu skipped: above max_msg_size %zu\n", size,
				       ft->info->ep_attr->max_msg_size);
			continue;
		}
		st->cur_size = size;
		if (ft->is_server) {
			ret = st_server(st, warm + nwin);
			continue;
		}
		ret = st_client(st, warm, warm + nwin, &ns);
		if (!ret)
			st_print(st, size, nwin * st->window, ns);
	}
	return ret ? ret : cour_ft_finish(ft);
}

/* Untagged messages are told apart only by their order (see the top of this file). */
static void st_finalize(struct cour_ft_opts *opts)
{
	if (!opts->tagged && opts->ep_type == FI_EP_RDM)
		opts->msg_order |= FI_ORDER_SAS;
}

int cour_stream_main(int argc, char **argv, enum cour_stream_kind kind)
{
	struct cour_ft_opts opts;
	struct st st = { .par = &st_params[kind] };
	char test_name[32];
	int i, ret;

	cour_ft_opts_init(&opts);
	snprintf(test_name, sizeof(test_name), "stream-%s", st.par->name);
	opts.test_name = test_name;
	ret = cour_ft_parse_opts(&opts, argc, argv, NULL, NULL, NULL, st_usage[kind]);
	if (ret)
		return ret > 0 ? EXIT_SUCCESS : EXIT_FAILURE;
	if (!opts.nsizes) {
		for (i = 0; i < st.par->nsizes; i++)
			opts.sizes[i] = st.par->sizes[i];
		opts.nsizes = st.par->nsizes;
	}
	opts.finalize = st_finalize;

	ret = cour_ft_start(&st.ft, &opts);
	st.ft.app = &st;
	st.ft.rx_cb = st_rx_comp;
	if (!ret) {
		cour_ft_print_header(&st.ft, st.par->name);
		ret = st_run(&st);
	}
	cour_ft_close_ep(&st.ft);
	cour_ft_buf_free(&st.data);
	cour_ft_buf_free(&st.ack);
	cour_ft_close(&st.ft);
	free(st.ctx);
	free(st.slot_seq);
	if (ret) {
		fprintf(stderr, "cour_%s: failed: %d (%s)\n", st.par->name, ret, fi_strerror(-ret));
		return EXIT_FAILURE;
	}
	return EXIT_SUCCESS;
}
