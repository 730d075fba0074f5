/*
 * inject_reuse: an inject's buffer is the caller's again the moment the call returns. The
 * client overwrites it right after each fi_tinject returns; the server must receive what the
 * buffer held at the call. Sizes from one byte to inject_size, across a ring cell (16 KiB),
 * which is where a same-host inject leaves the short path: straight into the peer's ring
 * when the ring takes it whole in the call, else copied first (docs/protocol.md, Same-host
 * peers).
 *
 *  0. a warm-up of WARM_N round trips of inject_size (fi_tsend), after which same-host peers
 *     write each other's rings and the receiver has lent the sender credit for such sizes.
 *  1. posted: for each size, the server posts a receive, the client injects and scribbles;
 *     every byte is checked.
 *  2. flood: the client injects FLOOD_N messages of inject_size back to back while the
 *     server computes (no libfabric call for PAUSE_MS), scribbling each buffer after its
 *     call: credits run out or the ring fills, and messages queue in the engine. Then the
 *     server takes them all in order, every byte checked.
 *  3. the client's CQ stays empty: an inject reports nothing. With shared memory, manual
 *     progress and no progress thread (nobody drains the server's ring while it computes:
 *     test_inject_reuse.sh runs that too, with credit for the whole flood), the ring must
 *     have filled (shm_ring_full): injects it did not take whole were copied after all.
 * `inject_reuse [-p prov]` is the server, `inject_reuse [-p prov] 127.0.0.1` the client.
 */
#define _GNU_SOURCE

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ft_func.h"

#define TAG      0x1213
#define FLOOD_N  48
#define WARM_N   20
#define PAUSE_MS 300
static const size_t sizes[] = { 1, 4096, 16384, 16385, 20000, 32768, 49152, 65536 };
#define NSIZES   (sizeof(sizes) / sizeof(sizes[0]))

/* Whatever the call returned with, the caller writes over it at once. */
static void scribble(char *p, size_t len)
{
	memset(p, 0xa5, len);
}

static int warmup(struct func *f, struct cour_ft_buf *b, size_t len)
{
	char *buf = b->base;
	struct func_comp c;

	for (int i = 0; i < WARM_N; i++) {
		bool first = !f->ft.is_server;    /* the client sends first */

		for (int k = 0; k < 2; k++, first = !first) {
			if (first) {
				cour_ft_fill(buf, len, 1000 + i);
				FUNC_CALL(f, FUNC_POST(f, fi_tsend(f->ft.ep, buf, len, b->desc,
								   f->ft.peer, TAG + 1, NULL)));
				FUNC_CALL(f, func_next(f, true, &c, 10000));
				FUNC_ASSERT(f, !c.is_err, "warm-up send %d: error %d", i, c.err.err);
			} else {
				FUNC_CALL(f, FUNC_POST(f, fi_trecv(f->ft.ep, buf, len, b->desc,
								   f->ft.peer, TAG + 1, 0, NULL)));
				FUNC_CALL(f, func_next(f, false, &c, 10000));
				FUNC_ASSERT(f, !c.is_err && c.e.len == len, "warm-up receive %d", i);
				FUNC_CALL(f, func_check_data(f, buf, len, 1000 + i, "warm-up"));
			}
		}
	}
	return 0;
}

static int posted(struct func *f, struct cour_ft_buf *b, size_t max)
{
	char *buf = b->base;
	struct func_comp c;

	for (size_t i = 0; i < NSIZES && sizes[i] <= max; i++) {
		size_t len = sizes[i];

		if (f->ft.is_server) {
			memset(buf, 0, len);
			FUNC_CALL(f, FUNC_POST(f, fi_trecv(f->ft.ep, buf, len, b->desc,
							   f->ft.peer, TAG, 0, NULL)));
			FUNC_CALL(f, cour_ft_barrier(&f->ft));
			FUNC_CALL(f, func_next(f, false, &c, 10000));
			FUNC_ASSERT(f, !c.is_err && c.e.len == len, "%zu bytes: error %d, len %zu",
				    len, c.is_err ? c.err.err : 0, c.e.len);
			FUNC_CALL(f, func_check_data(f, buf, len, 10 + i, "posted inject"));
		} else {
			cour_ft_fill(buf, len, 10 + i);
			FUNC_CALL(f, cour_ft_barrier(&f->ft));
			FUNC_CALL(f, FUNC_POST(f, fi_tinject(f->ft.ep, buf, len, f->ft.peer, TAG)));
			scribble(buf, len);
		}
		FUNC_CALL(f, cour_ft_barrier(&f->ft));
	}
	return 0;
}

static int flood(struct func *f, struct cour_ft_buf *b, size_t len)
{
	char *buf = b->base;
	struct func_comp c;

	FUNC_CALL(f, cour_ft_barrier(&f->ft));
	if (!f->ft.is_server) {
		for (int i = 0; i < FLOOD_N; i++) {
			cour_ft_fill(buf, len, 100 + i);
			FUNC_CALL(f, FUNC_POST(f, fi_tinject(f->ft.ep, buf, len, f->ft.peer, TAG)));
			scribble(buf, len);
		}
		FUNC_CALL(f, cour_ft_barrier(&f->ft));
		return cour_ft_barrier(&f->ft);
	}
	/* computing: no call that could take what comes */
	struct timespec ts = { .tv_sec = PAUSE_MS / 1000, .tv_nsec = (PAUSE_MS % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0)
		;
	FUNC_CALL(f, cour_ft_barrier(&f->ft));        /* all sent before any receive */
	for (int i = 0; i < FLOOD_N; i++) {
		memset(buf, 0, len);
		FUNC_CALL(f, FUNC_POST(f, fi_trecv(f->ft.ep, buf, len, b->desc, f->ft.peer, TAG,
						   0, NULL)));
		FUNC_CALL(f, func_next(f, false, &c, 10000));
		FUNC_ASSERT(f, !c.is_err && c.e.len == len, "flood %d: error %d, len %zu", i,
			    c.is_err ? c.err.err : 0, c.e.len);
		FUNC_CALL(f, func_check_data(f, buf, len, 100 + i, "flooded inject"));
	}
	return cour_ft_barrier(&f->ft);
}

/* With shared memory, manual progress and no progress thread, nobody took what came while the
 * server computed: the flood must have found its ring full. */
static int ring_filled(struct func *f)
{
	const char *shm = getenv("FI_COURIER_SHM"), *thr = getenv("FI_COURIER_MANUAL_THREAD");
	struct fi_courier_stats st;

	if (!func_is_courier(f) || (shm && !atoi(shm)) || !thr || atoi(thr) ||
	    f->ft.info->domain_attr->data_progress != FI_PROGRESS_MANUAL)
		return 0;
	FUNC_CALL(f, func_get_stats(f->ft.ep, &st));
	printf("inject_reuse: shm_ring_full %llu\n", (unsigned long long)st.shm_ring_full);
	FUNC_ASSERT(f, st.shm_ring_full > 0, "the flood never found the peer's ring full");
	return 0;
}

int main(int argc, char **argv)
{
	static struct func fs;
	struct func *f = &fs;
	struct cour_ft_buf buf = { 0 };
	size_t max;
	int ret;

	ret = func_init(f, argc, argv, "inject_reuse", FI_MSG | FI_TAGGED, FI_ORDER_SAS, NULL,
			NULL, NULL, "");
	max = ret ? 0 : f->ft.info->tx_attr->inject_size;
	if (!ret)
		ret = cour_ft_buf_alloc(&f->ft, max, &buf);
	if (!ret)
		printf("inject_reuse: inject_size %zu\n", max);
	if (!ret)
		ret = warmup(f, &buf, max);
	if (!ret)
		ret = posted(f, &buf, max);
	if (!ret)
		ret = flood(f, &buf, max);
	if (!ret && !f->ft.is_server)
		ret = func_expect_quiet(f, true, 100);
	if (!ret && !f->ft.is_server)
		ret = ring_filled(f);
	if (!ret)
		ret = func_finish(f);
	return func_exit(f, &buf, ret);
}
