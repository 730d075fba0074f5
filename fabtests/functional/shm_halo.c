/*
 * shm_halo: big messages between two processes of one host, one way and both ways at once.
 *
 * Phase 1, one way: the client sends -n messages (default 20) of -S bytes (default 256 KiB)
 * to the server, one at a time, each into a receive posted before it. Phase 2, a halo
 * exchange, -n times: each side posts its send, then its receive, and waits for both. Every
 * message carries its own pattern (side, phase, index) and is checked whole at its receive.
 *
 * Over courier with shared memory and single copy, from 256 KiB a message alone on its way is
 * copied by both processes, a part each (split copy, counted at the receiver in shm_split_rx);
 * in a halo each side is busy with the other's message already, so each receiver pulls its
 * whole message instead (proto/cour_msg_proto.c). With -x the server asserts that: every
 * message of phase 1 split, none of phase 2. Before phase 1, one-way messages go until one
 * splits (at most 100): the pair may take a while to learn it can single-copy, and what it
 * sends before that goes the plain way. Phase 2's count is exact only without a progress
 * thread (-M manual and FI_COURIER_MANUAL_THREAD=0, test_shm_halo.sh): a thread may take the
 * peer's answer to our send before our receive is posted, and ours then goes alone again.
 * `shm_halo [-p prov]` is the server, `shm_halo [-p prov] 127.0.0.1` the client.
 */
#define _GNU_SOURCE

#include <stdlib.h>
#include <string.h>

#include "ft_func.h"

#define SH_TAG   0x4a10
#define SH_COUNT 20
#define SH_SIZE  (256u << 10)
#define SH_SEQ(side, phase, i) (((uint64_t)(side) << 40) | ((uint64_t)(phase) << 32) | (i))

struct sh {
	struct func f;
	struct cour_ft_buf buf;     /* send half, then receive half */
	size_t size;
	long n;
	bool expect;                /* -x: assert the split counts */
	struct fi_context2 ctx[2];
};

static uint64_t sh_splits(struct sh *s)
{
	struct fi_courier_stats st;

	memset(&st, 0, sizeof(st));
	if (func_get_stats(s->f.ft.ep, &st))
		return 0;
	return st.shm_split_rx;
}

static int sh_post_recv(struct sh *s)
{
	char *in = (char *)s->buf.base + s->size;

	memset(in, 0xee, s->size);
	return cour_ft_post_recv(&s->f.ft, in, s->size, s->buf.desc, SH_TAG, &s->ctx[1]);
}

static int sh_post_send(struct sh *s, int phase, long i)
{
	struct cour_ft *ft = &s->f.ft;

	cour_ft_fill(s->buf.base, s->size, SH_SEQ(ft->is_server, phase, i));
	return cour_ft_post_send(ft, s->buf.base, s->size, s->buf.desc, SH_TAG, &s->ctx[0]);
}

/* One step of phase 0 or 1 (one way: the receive posted before the message comes) or 2 (both
 * ways: each side's send, then its receive), then its completions, checked */
static int sh_step(struct sh *s, int phase, long i)
{
	struct func *f = &s->f;
	struct cour_ft *ft = &f->ft;
	char *in = (char *)s->buf.base + s->size;
	bool sends = phase == 2 || !ft->is_server, recvs = phase == 2 || ft->is_server;
	struct func_comp c;

	if (phase != 2) {
		if (recvs)
			FUNC_CALL(f, sh_post_recv(s));
		FUNC_CALL(f, cour_ft_barrier(ft));
		if (sends)
			FUNC_CALL(f, sh_post_send(s, phase, i));
	} else {
		FUNC_CALL(f, sh_post_send(s, phase, i));
		FUNC_CALL(f, sh_post_recv(s));
	}
	if (sends) {
		FUNC_CALL(f, func_next(f, true, &c, 30000));
		FUNC_ASSERT(f, !c.is_err, "phase %d send %ld: error %d (%s)", phase, i, c.err.err,
			    fi_strerror(c.err.err));
	}
	if (recvs) {
		FUNC_CALL(f, func_next(f, false, &c, 30000));
		FUNC_ASSERT(f, !c.is_err, "phase %d receive %ld: error %d (%s)", phase, i,
			    c.err.err, fi_strerror(c.err.err));
		FUNC_ASSERT(f, c.e.len == s->size, "phase %d receive %ld: %zu bytes", phase, i,
			    c.e.len);
		FUNC_CALL(f, func_check_data(f, in, s->size, SH_SEQ(!ft->is_server, phase, i),
					     phase != 2 ? "one-way message" : "halo message"));
	}
	return 0;
}

/* One-way messages (phase 0, uncounted) until the server's first split copy, or none of the
 * kind here (no single copy, another provider): the server tells the client to go on or not */
static int sh_warm(struct sh *s)
{
	struct func *f = &s->f;
	uint64_t before = sh_splits(s);
	char more = 1;

	for (long i = 0; more && i < 100; i++) {
		FUNC_CALL(f, sh_step(s, 0, i));
		if (f->ft.is_server) {
			more = sh_splits(s) == before && i + 1 < 100;
			FUNC_CALL(f, cour_ft_oob_send(&f->ft, &more, 1));
		} else {
			FUNC_CALL(f, cour_ft_oob_recv(&f->ft, &more, 1));
		}
	}
	return 0;
}

static int sh_run(struct sh *s)
{
	struct func *f = &s->f;
	uint64_t split0, split1, split2, warm;

	warm = sh_splits(s);
	FUNC_CALL(f, sh_warm(s));
	FUNC_CALL(f, cour_ft_barrier(&f->ft));
	split0 = sh_splits(s);
	for (long i = 0; i < s->n; i++)
		FUNC_CALL(f, sh_step(s, 1, i));
	FUNC_CALL(f, cour_ft_barrier(&f->ft));
	split1 = sh_splits(s);
	for (long i = 0; i < s->n; i++)
		FUNC_CALL(f, sh_step(s, 2, i));
	FUNC_CALL(f, cour_ft_barrier(&f->ft));
	split2 = sh_splits(s);
	printf("shm_halo: %s: %ld one-way and %ld halo messages of %zu B checked; split copies "
	       "received: %llu one way, %llu in the halo%s\n", f->ft.is_server ? "server" : "client",
	       s->n, s->n, s->size, (unsigned long long)(split1 - split0),
	       (unsigned long long)(split2 - split1),
	       split0 > warm ? "" : " (none while warming up: no single copy here)");
	if (!s->expect || !f->ft.is_server || split0 == warm)
		return 0;
	FUNC_ASSERT(f, split1 - split0 == (uint64_t)s->n, "one way: %llu of %ld messages split",
		    (unsigned long long)(split1 - split0), s->n);
	FUNC_ASSERT(f, split2 == split1, "halo: %llu of %ld messages split, where each side "
		    "pulls its own", (unsigned long long)(split2 - split1), s->n);
	return 0;
}

static int sh_opt(int opt, const char *arg, void *ctx)
{
	(void)arg;
	if (opt != 'x')
		return 1;
	((struct sh *)ctx)->expect = true;
	return 0;
}

int main(int argc, char **argv)
{
	static struct sh s;
	struct func *f = &s.f;
	int ret;

	ret = func_init(f, argc, argv, "shm_halo", FI_MSG | FI_TAGGED, FI_ORDER_SAS, "x", sh_opt,
			&s, "  -x  assert the split copies (courier, shared memory)\n");
	if (ret)
		goto out;
	s.size = f->ft.opts.nsizes ? f->ft.opts.sizes[0] : SH_SIZE;
	s.n = f->ft.opts.iterations ? f->ft.opts.iterations : SH_COUNT;
	ret = cour_ft_buf_alloc(&f->ft, 2 * s.size, &s.buf);
	if (!ret)
		ret = sh_run(&s);
	if (!ret)
		ret = func_finish(f);
out:
	return func_exit(f, &s.buf, ret);
}
