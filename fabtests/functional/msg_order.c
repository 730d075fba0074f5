/*
 * msg_order: messages of one size from one sender complete at the receiver in the order they
 * were sent (man/fi_courier.7.md, "Credits"), whichever way each one travels: eager, through
 * the ring, as a request for lack of credit (RTS|WANT, possibly adopted into a buffer of the
 * receiver's), by single copy (RTS|CMA, completed when matched), or split between both
 * processes.
 *
 * The client keeps a window (-W, default 16) of sends of each size (-S, default 64 KiB) in
 * flight, -n of them (default 600), every message filled with its sequence number's pattern.
 * The server posts its receives in bursts of 1 to 8 with pauses of up to 3 ms between them
 * (seeded, so a failure repeats), without reading its CQ during a pause, so that messages
 * find a posted receive, arrive unexpected, or arrive while a receive is being posted. The
 * k-th receive completion of a size must hold message k, whole: a message that overtook an
 * earlier one fails the test with both numbers. Untagged receives (-m) match by order,
 * tagged ones (-t, the default) by one tag; either way the completions must follow the sends.
 * `msg_order [-p prov]` is the server, `msg_order [-p prov] 127.0.0.1` the client.
 *
 * -F (both sides) runs one choreography instead, where a size changes its way between two
 * messages (mo_flip).
 */
#define _GNU_SOURCE

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ft_func.h"

#define MO_TAG      0x0de7
#define MO_RECVS    8
#define MO_WINDOW   16
#define MO_COUNT    600
#define MO_PAUSE_US 3000
#define MO_SEQ(sz, i) ((uint64_t)(sz) * 1000003u + (uint64_t)(i))

struct mo {
	struct func f;
	struct cour_ft_buf buf;
	size_t slot;                        /* bytes per message slot */
	struct fi_context2 ctx[64];             /* sends: one per window slot; receives: the first MO_RECVS */
};

static int mo_window(const struct mo *m)
{
	int w = m->f.ft.opts.window ? m->f.ft.opts.window : MO_WINDOW;

	return w > 64 ? 64 : w;
}

static long mo_count(const struct mo *m)
{
	return m->f.ft.opts.iterations ? m->f.ft.opts.iterations : MO_COUNT;
}

/* Which slot a completion's context names */
static int mo_idx(struct mo *m, void *ctx)
{
	return (int)((struct fi_context2 *)ctx - m->ctx);
}

static int mo_client(struct mo *m, size_t size)
{
	struct func *f = &m->f;
	long n = mo_count(m), posted = 0, done = 0;
	int w = mo_window(m), free_slots[64], nfree = 0;
	struct func_comp c;

	for (int i = w - 1; i >= 0; i--)
		free_slots[nfree++] = i;
	while (done < n) {
		while (posted < n && nfree) {
			int s = free_slots[--nfree];
			char *p = (char *)m->buf.base + (size_t)s * m->slot;

			cour_ft_fill(p, size, MO_SEQ(size, posted));
			FUNC_CALL(f, cour_ft_post_send(&f->ft, p, size, m->buf.desc, MO_TAG,
						       &m->ctx[s]));
			posted++;
		}
		FUNC_CALL(f, func_next(f, true, &c, 30000));
		FUNC_ASSERT(f, !c.is_err, "send of %zu B: error %d (%s)", size, c.err.err,
			    fi_strerror(c.err.err));
		int s = mo_idx(m, c.e.op_context);
		FUNC_ASSERT(f, s >= 0 && s < w, "send completion with a foreign context");
		free_slots[nfree++] = s;
		done++;
	}
	return cour_ft_barrier(&f->ft);
}

/* Which message a receive holds: the expected one, else the nearest that fits, so the
 * failure can name the message that overtook. -1: none of them (corrupt). */
static long mo_which(const char *p, size_t size, long expect, long n)
{
	size_t bad;

	for (long d = 0; d < n; d++) {
		for (int sgn = 0; sgn < 2; sgn++) {
			long k = sgn ? expect - d : expect + d;

			if (k < 0 || k >= n || (sgn && !d))
				continue;
			if (!cour_ft_check(p, size, MO_SEQ(size, k), &bad))
				return k;
		}
	}
	return -1;
}

/* After a message out of order: what the receives still outstanding get (the one that was
 * overtaken, later, or a receive that got another's bytes?), for the failure's report. */
static void mo_after(struct mo *m, size_t size, long n, int left)
{
	struct func_comp c;

	while (left-- > 0 && func_next(&m->f, false, &c, 2000) == 0) {
		int s = mo_idx(m, c.e.op_context);

		if (c.is_err || s < 0 || s >= MO_RECVS) {
			fprintf(stderr, "msg_order: then: an error or foreign completion\n");
			continue;
		}
		fprintf(stderr, "msg_order: then: receive slot %d holds message %ld\n", s,
			mo_which((char *)m->buf.base + (size_t)s * m->slot, size, 0, n));
	}
}

static int mo_server(struct mo *m, size_t size, unsigned int *seed)
{
	struct func *f = &m->f;
	long n = mo_count(m), posted = 0, next = 0;
	int free_slots[MO_RECVS], nfree = 0, outstanding = 0;
	struct func_comp c;
	size_t bad;

	for (int i = MO_RECVS - 1; i >= 0; i--)
		free_slots[nfree++] = i;
	while (next < n) {
		/* a burst of receives, then a pause in which nothing reads the CQ */
		int burst = 1 + (int)(rand_r(seed) % MO_RECVS);

		while (burst-- && nfree && posted < n) {
			int s = free_slots[--nfree];
			char *p = (char *)m->buf.base + (size_t)s * m->slot;

			memset(p, 0xee, size);
			FUNC_CALL(f, cour_ft_post_recv(&f->ft, p, size, m->buf.desc, MO_TAG,
						       &m->ctx[s]));
			posted++;
			outstanding++;
		}
		unsigned int pause = rand_r(seed) % (MO_PAUSE_US + 1);
		if (rand_r(seed) % 2) {
			struct timespec ts = { 0, (long)pause * 1000 };
			nanosleep(&ts, NULL);
		}
		/* take what completed, at least one */
		int want = 1;
		while (outstanding && want) {
			FUNC_CALL(f, func_next(f, false, &c, 30000));
			FUNC_ASSERT(f, !c.is_err, "receive of %zu B: error %d (%s)", size,
				    c.err.err, fi_strerror(c.err.err));
			int s = mo_idx(m, c.e.op_context);
			FUNC_ASSERT(f, s >= 0 && s < MO_RECVS, "receive completion with a "
				    "foreign context");
			char *p = (char *)m->buf.base + (size_t)s * m->slot;
			FUNC_ASSERT(f, c.e.len == size, "receive %ld: %zu bytes, want %zu", next,
				    c.e.len, size);
			if (cour_ft_check(p, size, MO_SEQ(size, next), &bad)) {
				long k = mo_which(p, size, next, n);

				FUNC_ASSERT(f, k >= 0, "receive %ld of %zu B: corrupt at offset "
					    "%zu", next, size, bad);
				mo_after(m, size, n, outstanding - 1);
				FUNC_ASSERT(f, 0, "%zu B messages: message %ld completed before "
					    "message %ld, sent earlier", size, k, next);
			}
			free_slots[nfree++] = s;
			outstanding--;
			next++;
			want = rand_r(seed) % 3 == 0;   /* now and then take a second at once */
		}
	}
	return cour_ft_barrier(&f->ft);
}

/*
 * -F: to a same-host peer, a message of 16-32 KiB alone on its way goes as a request (RTS) by
 * single copy when it answers one of the peer's messages, else through the ring as eager
 * packets (proto/cour_cma.c; FI_COURIER_SHM_LONE=1 makes the ring count as slow). Behind a
 * plain request (X: 600 KiB, above the default eager limit of 512 KiB, in two pieces, which
 * single copy does not take) such a request
 * goes plain too, its data to follow its CTS. So M1, sent just after the server's message Y
 * arrived, is a plain RTS, and M2, of the same size right behind it, would be eager: whole when
 * its receive is posted, it must still complete after M1. The server posts its receives only
 * once all three are on their way. Needs more credit than the 64 units the eager M2 costs
 * (FI_COURIER_CREDITS), or M2 goes as a request for lack of it whatever the order. Run at
 * 16 KiB, where M2 fits one ring cell and would go outside the sequence (SHORT), and at
 * 20 KiB, where it would go as EAGER packets.
 */
#define MO_FLIP_X (600u << 10)
#define MO_FLIP_M (20u << 10)   /* the longest of the sizes mo_flip is run with */

static int mo_flip(struct mo *m, size_t msz)
{
	struct func *f = &m->f;
	struct cour_ft *ft = &f->ft;
	char *x = m->buf.base, *m1 = x + MO_FLIP_X, *m2 = m1 + msz, *y = m2 + msz;
	void *desc[2] = { m->buf.desc, m->buf.desc };
	struct func_comp c;
	int order[3], n = 0;

	if (!ft->is_server) {
		struct iovec iov[2] = {
			{ x, MO_FLIP_X / 2 }, { x + MO_FLIP_X / 2, MO_FLIP_X / 2 },
		};

		cour_ft_fill(x, MO_FLIP_X, MO_SEQ(MO_FLIP_X, 0));
		cour_ft_fill(m1, msz, MO_SEQ(msz, 0));
		cour_ft_fill(m2, msz, MO_SEQ(msz, 1));
		FUNC_CALL(f, cour_ft_post_recv(ft, y, 8, m->buf.desc, MO_TAG + 1, &m->ctx[3]));
		FUNC_CALL(f, FUNC_POST(f, ft->opts.tagged ?
				       fi_tsendv(ft->ep, iov, desc, 2, ft->peer, MO_TAG, &m->ctx[0]) :
				       fi_sendv(ft->ep, iov, desc, 2, ft->peer, &m->ctx[0])));
		FUNC_CALL(f, cour_ft_barrier(ft));              /* X is on its way */
		FUNC_CALL(f, func_next(f, false, &c, 30000));   /* Y: M1 answers it */
		FUNC_ASSERT(f, !c.is_err && c.e.op_context == &m->ctx[3], "the server's message: "
			    "error %d", c.is_err ? c.err.err : 0);
		FUNC_CALL(f, cour_ft_post_send(ft, m1, msz, m->buf.desc, MO_TAG, &m->ctx[1]));
		FUNC_CALL(f, cour_ft_post_send(ft, m2, msz, m->buf.desc, MO_TAG, &m->ctx[2]));
		FUNC_CALL(f, cour_ft_barrier(ft));              /* all three on their way */
		for (int i = 0; i < 3; i++) {
			FUNC_CALL(f, func_next(f, true, &c, 30000));
			FUNC_ASSERT(f, !c.is_err, "send: error %d (%s)", c.err.err,
				    fi_strerror(c.err.err));
		}
		return cour_ft_barrier(ft);
	}
	memset(y, 0x5a, 8);
	FUNC_CALL(f, cour_ft_barrier(ft));
	FUNC_CALL(f, cour_ft_post_send(ft, y, 8, m->buf.desc, MO_TAG + 1, &m->ctx[3]));
	FUNC_CALL(f, func_next(f, true, &c, 30000));
	FUNC_ASSERT(f, !c.is_err, "send of Y: error %d", c.err.err);
	FUNC_CALL(f, cour_ft_barrier(ft));
	memset(x, 0xee, MO_FLIP_X + 2 * msz);
	FUNC_CALL(f, cour_ft_post_recv(ft, x, MO_FLIP_X, m->buf.desc, MO_TAG, &m->ctx[0]));
	FUNC_CALL(f, cour_ft_post_recv(ft, m1, msz, m->buf.desc, MO_TAG, &m->ctx[1]));
	FUNC_CALL(f, cour_ft_post_recv(ft, m2, msz, m->buf.desc, MO_TAG, &m->ctx[2]));
	for (int i = 0; i < 3; i++) {
		FUNC_CALL(f, func_next(f, false, &c, 30000));
		FUNC_ASSERT(f, !c.is_err, "receive: error %d (%s)", c.err.err,
			    fi_strerror(c.err.err));
		order[n] = mo_idx(m, c.e.op_context);
		FUNC_ASSERT(f, order[n] >= 0 && order[n] < 3, "a foreign completion");
		FUNC_ASSERT(f, c.e.len == (order[n] ? msz : MO_FLIP_X), "receive %d: %zu "
			    "bytes", order[n], c.e.len);
		n++;
	}
	FUNC_CALL(f, func_check_data(f, x, MO_FLIP_X, MO_SEQ(MO_FLIP_X, 0), "X"));
	FUNC_CALL(f, func_check_data(f, m1, msz, MO_SEQ(msz, 0), "M1"));
	FUNC_CALL(f, func_check_data(f, m2, msz, MO_SEQ(msz, 1), "M2"));
	int at[3];

	for (int i = 0; i < 3; i++)
		at[order[i]] = i;
	FUNC_ASSERT(f, at[1] < at[2], "%zu B messages: M2 completed before M1, sent earlier "
		    "(completions: %d %d %d)", msz, order[0], order[1], order[2]);
	printf("msg_order: server: %zu B: completions X/M1/M2 in order %d %d %d\n", msz,
	       order[0], order[1], order[2]);
	return cour_ft_barrier(ft);
}

static int mo_opt(int opt, const char *arg, void *ctx)
{
	(void)arg;
	if (opt != 'F')
		return 1;
	*(bool *)ctx = true;
	return 0;
}

int main(int argc, char **argv)
{
	static struct mo m;
	struct func *f = &m.f;
	unsigned int seed;
	size_t max = 0;
	int ret;

	bool flip = false;

	ret = func_init(f, argc, argv, "msg_order", FI_MSG | FI_TAGGED, FI_ORDER_SAS, "F", mo_opt,
			&flip, "  -F  one size changing its way between two messages (mo_flip)\n");
	if (ret)
		goto out;
	if (flip) {
		ret = cour_ft_buf_alloc(&f->ft, MO_FLIP_X + 2 * MO_FLIP_M + 64, &m.buf);
		if (!ret)
			ret = mo_flip(&m, 16u << 10);
		if (!ret)
			ret = mo_flip(&m, MO_FLIP_M);
		if (!ret)
			ret = func_finish(f);
		goto out;
	}
	if (!f->ft.opts.nsizes) {
		f->ft.opts.nsizes = 1;
		f->ft.opts.sizes[0] = 64 * 1024;
	}
	for (int i = 0; i < f->ft.opts.nsizes; i++)
		max = f->ft.opts.sizes[i] > max ? f->ft.opts.sizes[i] : max;
	m.slot = (max + 4095) & ~(size_t)4095;
	ret = cour_ft_buf_alloc(&f->ft, m.slot * (size_t)(mo_window(&m) > MO_RECVS ?
						  mo_window(&m) : MO_RECVS), &m.buf);
	if (ret)
		goto out;
	for (int i = 0; !ret && i < f->ft.opts.nsizes; i++) {
		size_t size = f->ft.opts.sizes[i];

		seed = (unsigned int)(size * 7919u + 17u);
		ret = f->ft.is_server ? mo_server(&m, size, &seed) : mo_client(&m, size);
		if (!ret)
			printf("msg_order: %s: %ld messages of %zu B in order\n",
			       f->ft.is_server ? "server" : "client", mo_count(&m), size);
	}
	if (!ret)
		ret = func_finish(f);
out:
	return func_exit(f, &m.buf, ret);
}
