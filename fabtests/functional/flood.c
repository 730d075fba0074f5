/*
 * flood: receive limits and close, as MPI uses them. `flood [-p prov] -o ORDER` is the
 * receiver (server), the same with 127.0.0.1 the sender. STREAMS tag streams (one per MPI
 * thread) of PER_STREAM small tagged messages each, far more than any receiver credits:
 *
 *   -o recv-first  the receiver posts every receive first (STREAMS x PER_STREAM, more than
 *                  rx_attr->size: it is a floor, not a wall), then the sender sends.
 *   -o send-first  the sender injects everything (fi_tinjectdata: complete at once, as MPI's
 *                  small sends are), closes its endpoint at once and says so out of band; only
 *                  then does the receiver post its receives, the last stream first. Every
 *                  message must arrive: unexpected messages give their credits back when
 *                  buffered, and a close delivers what was accepted (the linger).
 *
 * Each message carries (stream, index) in its tag, its CQ data and its bytes; the receiver
 * checks every one, and that each stream arrived in order.
 */
#define _GNU_SOURCE

#include <stdlib.h>
#include <string.h>

#include "ft_func.h"

#define STREAMS    4
#define PER_STREAM 1024
#define TOTAL      (STREAMS * PER_STREAM)
#define MSG_LEN    64
#define TAG(s, i)  (0x5eed000000000000ULL | (uint64_t)(s) << 32 | (uint64_t)(i))
#define SEQ(s, i)  ((uint64_t)(s) * PER_STREAM + (i))

struct flood {
	struct func f;
	bool send_first;
	char *bufs;				/* receiver: TOTAL x MSG_LEN */
	struct fi_context2 *ctx;		/* receiver: one per receive */
};

static int flood_opt(int opt, const char *arg, void *ctx)
{
	struct flood *fl = ctx;

	if (opt != 'o')
		return -1;
	if (!strcmp(arg, "send-first"))
		fl->send_first = true;
	else if (strcmp(arg, "recv-first"))
		return 1;
	return 0;
}

static int flood_post_stream(struct flood *fl, int s)
{
	struct func *f = &fl->f;

	for (int i = 0; i < PER_STREAM; i++) {
		uint64_t seq = SEQ(s, i);

		FUNC_CALL(f, FUNC_POST(f, fi_trecv(f->ft.ep, fl->bufs + seq * MSG_LEN, MSG_LEN,
						   NULL, f->ft.peer, TAG(s, i), 0,
						   &fl->ctx[seq])));
	}
	return 0;
}

/* Every receive completes once, with its own message; streams in order. */
static int flood_reap(struct flood *fl)
{
	struct func *f = &fl->f;
	int next[STREAMS] = { 0 };
	struct func_comp c;

	for (int n = 0; n < TOTAL; n++) {
		uint64_t seq;
		int s, i;

		FUNC_CALL(f, func_next(f, false, &c, 20000));
		FUNC_ASSERT(f, !c.is_err, "receive %d: error %d (%s)", n, c.err.err,
			    fi_strerror(c.err.err));
		seq = (uint64_t)((struct fi_context2 *)c.e.op_context - fl->ctx);
		FUNC_ASSERT(f, seq < TOTAL, "completion for an unknown context %p", c.e.op_context);
		s = (int)(seq / PER_STREAM);
		i = (int)(seq % PER_STREAM);
		FUNC_ASSERT(f, c.e.tag == TAG(s, i) && c.e.len == MSG_LEN &&
			    c.e.data == seq && (c.e.flags & FI_REMOTE_CQ_DATA),
			    "stream %d message %d: tag 0x%llx len %zu data %llu flags 0x%llx", s, i,
			    (unsigned long long)c.e.tag, c.e.len, (unsigned long long)c.e.data,
			    (unsigned long long)c.e.flags);
		FUNC_ASSERT(f, i == next[s], "stream %d: message %d completed before %d", s, i,
			    next[s]);
		next[s]++;
		FUNC_CALL(f, func_check_data(f, fl->bufs + seq * MSG_LEN, MSG_LEN, seq, "message"));
	}
	return 0;
}

static int flood_receiver(struct flood *fl)
{
	struct func *f = &fl->f;
	uint64_t closed;

	if (!fl->send_first) {
		for (int s = 0; s < STREAMS; s++)
			FUNC_CALL(f, flood_post_stream(fl, s));
		printf("flood: %d receives posted (rx_attr->size %zu)\n", TOTAL,
		       f->ft.info->rx_attr->size);
		FUNC_CALL(f, cour_ft_barrier(&f->ft));
		FUNC_CALL(f, flood_reap(fl));
		return cour_ft_barrier(&f->ft);
	}
	/* nothing posted until the sender has closed its endpoint */
	FUNC_CALL(f, cour_ft_oob_recv(&f->ft, &closed, sizeof(closed)));
	FUNC_ASSERT(f, closed == TOTAL, "the sender says it injected %llu",
		    (unsigned long long)closed);
	for (int s = STREAMS - 1; s >= 0; s--)
		FUNC_CALL(f, flood_post_stream(fl, s));
	FUNC_CALL(f, flood_reap(fl));
	printf("flood: %d messages injected before any receive was posted, the sender closed "
	       "at once: all arrived\n", TOTAL);
	return 0;
}

static int flood_sender(struct flood *fl)
{
	struct func *f = &fl->f;
	char msg[MSG_LEN];
	uint64_t n = TOTAL;
	int ret;

	if (!fl->send_first)
		FUNC_CALL(f, cour_ft_barrier(&f->ft));
	for (int i = 0; i < PER_STREAM; i++) {
		for (int s = 0; s < STREAMS; s++) {
			uint64_t seq = SEQ(s, i);

			cour_ft_fill(msg, MSG_LEN, seq);
			FUNC_CALL(f, FUNC_POST(f, fi_tinjectdata(f->ft.ep, msg, MSG_LEN, seq,
								 f->ft.peer, TAG(s, i))));
		}
	}
	if (!fl->send_first)
		return cour_ft_barrier(&f->ft);
	/* close now, with most messages still queued behind the receiver's credits */
	ret = fi_close(&f->ft.ep->fid);
	f->ft.ep = NULL;
	FUNC_ASSERT(f, ret == 0, "fi_close(ep): %d (%s)", ret, fi_strerror(-ret));
	FUNC_CALL(f, cour_ft_oob_send(&f->ft, &n, sizeof(n)));
	printf("flood: %d messages injected, endpoint closed\n", TOTAL);
	return 0;
}

int main(int argc, char **argv)
{
	static struct flood fl;
	struct func *f = &fl.f;
	int ret;

	fl.bufs = calloc(TOTAL, MSG_LEN);
	fl.ctx = calloc(TOTAL, sizeof(*fl.ctx));
	if (!fl.bufs || !fl.ctx)
		return 1;
	ret = func_init(f, argc, argv, "flood", FI_TAGGED, FI_ORDER_SAS, "o:", flood_opt, &fl,
			"  -o recv-first|send-first  which side goes first (default recv-first)\n");
	if (ret)
		goto out;
	if (f->ft.info->domain_attr->cq_data_size < 4) {
		fprintf(stderr, "flood: the provider has no remote CQ data\n");
		ret = -FI_ENOSYS;
		goto out;
	}
	ret = f->ft.is_server ? flood_receiver(&fl) : flood_sender(&fl);
out:
	cour_ft_close(&f->ft);
	free(fl.bufs);
	free(fl.ctx);
	if (ret || f->failures) {
		fprintf(stderr, "flood: FAIL (%d)\n", ret);
		return 1;
	}
	printf("flood: PASS (%s, %s)\n", f->ft.is_server ? "receiver" : "sender",
	       fl.send_first ? "send-first" : "recv-first");
	return 0;
}
