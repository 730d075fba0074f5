/*
 * cour_pingpong: one-way latency (half the round trip, mean) between two processes, for any
 * provider. `cour_pingpong [opts]` is the server, `cour_pingpong [opts] <host>` the client;
 * the client prints one line per size and, for scripts, `RESULT pingpong <size> <usec>`.
 *
 * Each side has one send and one receive buffer. A receive is always posted before the message
 * it is for can arrive (the server re-posts before it answers), so no provider measures its
 * unexpected-message path here. A send buffer is reused only after its completion, which we
 * wait for lazily, just before the next send, not on the critical path.
 */
#define _GNU_SOURCE

#include <stdio.h>
#include <stdlib.h>

#include "ft_common.h"

#define PP_TAG_PING 0x1
#define PP_TAG_PONG 0x2
#define PP_BYTE_BUDGET (64L << 20)	/* per size, both directions: scales iterations */
#define PP_MIN_ITERS 100
#define PP_MAX_ITERS 10000
#define PP_MAX_WARMUP 100

static const size_t pp_default_sizes[] = {
	1, 8, 64, 512, 4096, 65536, 1 << 20,
};

struct pp {
	struct cour_ft ft;
	struct cour_ft_buf tx;
	struct cour_ft_buf rx;
	struct fi_context2 tx_ctx;
	struct fi_context2 rx_ctx;
};

static long pp_iters(const struct cour_ft_opts *o, size_t size)
{
	long n;

	if (o->iterations)
		return o->iterations;
	n = PP_BYTE_BUDGET / (long)(size ? size : 1);
	return n < PP_MIN_ITERS ? PP_MIN_ITERS : n > PP_MAX_ITERS ? PP_MAX_ITERS : n;
}

static long pp_warmup(const struct cour_ft_opts *o, long iters)
{
	long w;

	if (o->warmup >= 0)
		return o->warmup;
	w = iters / 10;
	return w < 1 ? 1 : w > PP_MAX_WARMUP ? PP_MAX_WARMUP : w;
}

static int pp_check(struct pp *pp, size_t size, uint64_t seq)
{
	size_t bad;

	if (!pp->ft.opts.verify || !cour_ft_check(pp->rx.base, size, seq, &bad))
		return 0;
	fprintf(stderr, "cour_pingpong: data mismatch: size %zu, message %llu, offset %zu: "
		"got 0x%02x, expected 0x%02x\n", size, (unsigned long long)seq, bad,
		((uint8_t *)pp->rx.base)[bad], cour_ft_pattern_byte(seq, bad));
	return -FI_EIO;
}

/* Waits for the previous send to release the buffer, then sends message seq. */
static int pp_send(struct pp *pp, size_t size, uint64_t tag, uint64_t seq)
{
	int ret;

	ret = cour_ft_wait_tx(&pp->ft, pp->ft.tx_posted);
	if (ret)
		return ret;
	if (pp->ft.opts.verify)
		cour_ft_fill(pp->tx.base, size, seq);
	return cour_ft_post_send(&pp->ft, pp->tx.base, size, pp->tx.desc, tag, &pp->tx_ctx);
}

static int pp_server(struct pp *pp, size_t size, long total)
{
	struct cour_ft *ft = &pp->ft;
	long i;
	int ret;

	ret = cour_ft_post_recv(ft, pp->rx.base, size, pp->rx.desc, PP_TAG_PING, &pp->rx_ctx);
	if (!ret)
		ret = cour_ft_barrier(ft);
	for (i = 0; !ret && i < total; i++) {
		ret = cour_ft_wait_rx(ft, ft->rx_posted);
		if (!ret)
			ret = pp_check(pp, size, 2 * (uint64_t)i);
		if (!ret && i + 1 < total)
			ret = cour_ft_post_recv(ft, pp->rx.base, size, pp->rx.desc, PP_TAG_PING,
						&pp->rx_ctx);
		if (!ret)
			ret = pp_send(pp, size, PP_TAG_PONG, 2 * (uint64_t)i + 1);
	}
	return ret ? ret : cour_ft_wait_tx(ft, ft->tx_posted);
}

static int pp_client(struct pp *pp, size_t size, long warmup, long total, uint64_t *ns)
{
	struct cour_ft *ft = &pp->ft;
	uint64_t start = 0;
	long i;
	int ret;

	ret = cour_ft_barrier(ft);
	for (i = 0; !ret && i < total; i++) {
		if (i == warmup)
			start = cour_ft_now_ns();
		ret = cour_ft_post_recv(ft, pp->rx.base, size, pp->rx.desc, PP_TAG_PONG,
					&pp->rx_ctx);
		if (!ret)
			ret = pp_send(pp, size, PP_TAG_PING, 2 * (uint64_t)i);
		if (!ret)
			ret = cour_ft_wait_rx(ft, ft->rx_posted);
		if (!ret)
			ret = pp_check(pp, size, 2 * (uint64_t)i + 1);
	}
	*ns = cour_ft_now_ns() - start;
	return ret ? ret : cour_ft_wait_tx(ft, ft->tx_posted);
}

static int pp_run(struct pp *pp)
{
	struct cour_ft *ft = &pp->ft;
	const struct cour_ft_opts *o = &ft->opts;
	size_t max_size = 0;
	char sz[16];
	int i, ret;

	for (i = 0; i < o->nsizes; i++)
		if (o->sizes[i] > max_size && o->sizes[i] <= ft->info->ep_attr->max_msg_size)
			max_size = o->sizes[i];
	ret = cour_ft_buf_alloc(ft, max_size, &pp->tx);
	if (!ret)
		ret = cour_ft_buf_alloc(ft, max_size, &pp->rx);
	if (ret)
		return ret;

	if (!ft->is_server)
		printf("# %10s %10s %12s%s\n", "size", "iters", "lat_usec",
		       o->verify ? "  (verified)" : "");
	for (i = 0; !ret && i < o->nsizes; i++) {
		size_t size = o->sizes[i];
		long iters = pp_iters(o, size);
		long warmup = pp_warmup(o, iters);
		uint64_t ns;
		double usec;

		if (size > ft->info->ep_attr->max_msg_size) {
			if (!ft->is_server)
				printf("# size %zu skipped: above max_msg_size %zu\n", size,
				       ft->info->ep_attr->max_msg_size);
			continue;
		}
		if (ft->is_server) {
			ret = pp_server(pp, size, warmup + iters);
			continue;
		}
		ret = pp_client(pp, size, warmup, warmup + iters, &ns);
		if (ret)
			break;
		usec = (double)ns / 1e3 / (double)iters / 2.0;
		printf("  %10s %10ld %12.2f\n", cour_ft_size_str(size, sz, sizeof(sz)), iters, usec);
		printf("RESULT pingpong %zu %.3f\n", size, usec);
		fflush(stdout);
	}
	return ret ? ret : cour_ft_finish(ft);
}

int main(int argc, char **argv)
{
	struct cour_ft_opts opts;
	struct pp pp = { 0 };
	size_t i;
	int ret;

	cour_ft_opts_init(&opts);
	opts.test_name = "pingpong";
	ret = cour_ft_parse_opts(&opts, argc, argv, NULL, NULL, NULL,
				 "pingpong: prints one-way latency (half the mean round trip);\n"
				 "  default sizes 1,8,64,512,4k,64k,1m; -n counts round trips.\n");
	if (ret)
		return ret > 0 ? EXIT_SUCCESS : EXIT_FAILURE;
	if (!opts.nsizes) {
		for (i = 0; i < COUR_FT_ARRAY_SIZE(pp_default_sizes); i++)
			opts.sizes[i] = pp_default_sizes[i];
		opts.nsizes = (int)i;
	}

	ret = cour_ft_start(&pp.ft, &opts);
	if (!ret) {
		cour_ft_print_header(&pp.ft, "pingpong");
		ret = pp_run(&pp);
	}
	cour_ft_close_ep(&pp.ft);
	cour_ft_buf_free(&pp.tx);
	cour_ft_buf_free(&pp.rx);
	cour_ft_close(&pp.ft);
	if (ret) {
		fprintf(stderr, "cour_pingpong: failed: %d (%s)\n", ret, fi_strerror(-ret));
		return EXIT_FAILURE;
	}
	return EXIT_SUCCESS;
}
