/*
 * shm_short: what courier's short path (SHORT: a one-packet message put into a same-host
 * peer's ring outside the sequence, completed as put) must keep of the engine's semantics.
 *
 *  0. a warm-up of 20 round trips, after which the peers write each other's rings; then,
 *     with shared memory, round trips until each side has used its mailbox to the other.
 *  1. order: 600 messages on one tag, sizes cycling from 0 B through eager sizes to
 *     rendezvous ones, the first sent before any receive is posted (so the receiver's
 *     credits run out and the sender falls back to the engine's queue), the rest while the
 *     receiver takes them (so the queue drains and the short path resumes, again and
 *     again). Receives posted one at a time must take them in the order sent: each one's
 *     length and bytes are its own.
 *  2. posted receives, each form once: a plain tagged send; one into a 16-byte buffer
 *     (FI_ETRUNC with the right olen, the first 16 bytes placed); remote CQ data by tsenddata
 *     and tinjectdata; a delivery-complete tsendmsg; a tag matched through ignore bits; 8
 *     untagged messages into one FI_MULTI_RECV buffer, each at its offset in order. Every
 *     receive completion's flags, length, tag and data are checked, and the sender's
 *     completions: one per send that asked, none for injects.
 *  3. quiet: both sides only progress for 1 s, five times FI_COURIER_WIN_IDLE (200 ms):
 *     each side's mailbox to the other must go back (shm_box_freed). Then 20 more round
 *     trips, every byte checked, and the pair gets a mailbox again and uses it (shm_box).
 *  4. cell injects: 24 round trips of 16 KiB, the server's fi_tsend answered by the client's
 *     fi_tinject (where inject_size allows), every byte checked. With shared memory on, each
 *     answer after the first four went as SHORT: an inject is copied before the call returns
 *     anyway, and the ring's cell is that copy, even where a lone 16 KiB answer would go by
 *     single copy. With COUR_SHM_SHORT_CELLS=1 the pair runs only the warm-up and this phase,
 *     while the grant is still the default, one unit short of a 16 KiB message: the first
 *     inject must ask for more, not take single copy (which needs none) for good.
 *     test_shm_short.sh runs that with FI_COURIER_SHM_LONE=1, which chooses single copy for a
 *     lone 16 KiB answer.
 *  5. the statistics: with shared memory on, the client sent messages as SHORT (shm_short)
 *     in every phase; with FI_COURIER_SHM=0, none. No side dropped a bad packet.
 * `shm_short [-p prov]` is the server, `shm_short [-p prov] 127.0.0.1` the client.
 */
#define _GNU_SOURCE

#include <stdlib.h>
#include <string.h>

#include "ft_func.h"

#define ORDER_N    600
#define ORDER_TAG  0x5150
#define ORDER_MAX  (200 * 1024)
static const size_t order_sizes[] = { 8, 100, 3000, 70000, 0, 16000, 200000, 1, 64, 4096 };

#define MULTI_N    8
#define MULTI_LEN  100
#define MULTI_BUF  1024
#define CQ_KIND (FI_SEND | FI_RECV | FI_MSG | FI_TAGGED | FI_REMOTE_CQ_DATA)

struct st {
	struct func f;
	struct cour_ft_buf buf;
	struct fi_context2 ctx[ORDER_N + 32];
	uint64_t short_before;
	uint64_t box_before;        /* of them, through the mailbox */
};

static size_t order_size(int i)
{
	return order_sizes[i % COUR_FT_ARRAY_SIZE(order_sizes)];
}

static uint64_t shm_short_count(struct st *s, uint64_t *box)
{
	struct fi_courier_stats st;

	if (func_get_stats(s->f.ft.ep, &st))
		return *box = 0;
	*box = st.shm_box;
	return st.shm_short;
}

/* ---- 0. warm-up: round trips until the peers' rings are in use (the first messages go
 * over UDP while the HELLOs cross, and stay in sequence until all of them are acknowledged) */

#define WARM_TAG 0x7777
#define WARM_N   20
#define BOX_AFTER 16    /* small messages through the ring before a pair's mailbox (man page) */

static int warmup(struct st *s)
{
	struct func *f = &s->f;
	char *base = s->buf.base;
	struct func_comp c;

	for (int i = 0; i < WARM_N; i++) {
		bool first = !f->ft.is_server;

		for (int step = 0; step < 2; step++, first = !first) {
			if (first) {
				cour_ft_fill(base, 8, 100 + i);
				FUNC_CALL(f, FUNC_POST(f, fi_tsend(f->ft.ep, base, 8, s->buf.desc,
								   f->ft.peer, WARM_TAG, &s->ctx[0])));
				FUNC_CALL(f, func_next(f, true, &c, 10000));
				FUNC_ASSERT(f, !c.is_err, "warm-up send: error %d", c.err.err);
			} else {
				FUNC_CALL(f, FUNC_POST(f, fi_trecv(f->ft.ep, base + 64, 8, s->buf.desc,
								   f->ft.peer, WARM_TAG, 0,
								   &s->ctx[1])));
				FUNC_CALL(f, func_next(f, false, &c, 10000));
				FUNC_ASSERT(f, !c.is_err && c.e.len == 8, "warm-up receive");
				FUNC_CALL(f, func_check_data(f, base + 64, 8, 100 + i, "warm-up"));
			}
		}
	}
	return 0;
}

/* Round trips, after a warm-up, until each side has sent through its mailbox: a box takes
 * messages only once the peer has read the HELLO that names it, a datagram, and while rings
 * carry a process's traffic it reads its socket only every 4-64 us (fi/cour_progress.c),
 * which under load can be more than the round trips a warm-up has left (CI, twice). Each
 * message says whether its sender still waits, so both sides run the same count. */
#define BOX_WAIT_MAX 400

static int warm_send(struct st *s, uint64_t *msg, uint64_t val)
{
	struct func *f = &s->f;
	struct func_comp c;

	*msg = val;
	FUNC_CALL(f, FUNC_POST(f, fi_tsend(f->ft.ep, msg, 8, s->buf.desc, f->ft.peer, WARM_TAG,
					   &s->ctx[0])));
	FUNC_CALL(f, func_next(f, true, &c, 10000));
	FUNC_ASSERT(f, !c.is_err, "mailbox wait: send error %d", c.err.err);
	return 0;
}

static int warm_recv(struct st *s, uint64_t *echo, int i)
{
	struct func *f = &s->f;
	struct func_comp c;

	*echo = UINT64_MAX;
	FUNC_CALL(f, FUNC_POST(f, fi_trecv(f->ft.ep, echo, 8, s->buf.desc, f->ft.peer, WARM_TAG,
					   0, &s->ctx[1])));
	FUNC_CALL(f, func_next(f, false, &c, 10000));
	FUNC_ASSERT(f, !c.is_err && c.e.len == 8 && *echo <= 1,
		    "mailbox wait: receive %d: len %zu, value %llu", i, c.e.len,
		    (unsigned long long)*echo);
	return 0;
}

static int warm_until_box(struct st *s)
{
	struct func *f = &s->f;
	uint64_t *msg = (uint64_t *)s->buf.base, *peer_wait = msg + 8;
	uint64_t box0, box, wait = 1;
	int i;

	shm_short_count(s, &box0);
	for (i = 0; i < BOX_WAIT_MAX; i++) {
		shm_short_count(s, &box);
		wait = box == box0;
		if (!f->ft.is_server) {
			FUNC_CALL(f, warm_send(s, msg, wait));
			FUNC_CALL(f, warm_recv(s, peer_wait, i));
		} else {
			FUNC_CALL(f, warm_recv(s, peer_wait, i));
			FUNC_CALL(f, warm_send(s, msg, wait));
		}
		if (!wait && !*peer_wait)
			break;
	}
	shm_short_count(s, &box);
	FUNC_ASSERT(f, box > box0, "%s: no mailbox in use after %d round trips past a warm-up",
		    f->ft.is_server ? "server" : "client", i);
	return 0;
}

/* ---- 1. order ---- */

static int order_client(struct st *s)
{
	struct func *f = &s->f;
	char *base = s->buf.base;
	struct func_comp c;
	size_t off = 0;

	int done = 0;

	for (int i = 0; i < ORDER_N; i++) {
		cour_ft_fill(base + off, order_size(i), 5000 + i);
		FUNC_CALL(f, FUNC_POST(f, fi_tsend(f->ft.ep, base + off, order_size(i), s->buf.desc,
						   f->ft.peer, ORDER_TAG, &s->ctx[i])));
		off += order_size(i);
		/* past the first 100, at most 16 in flight: the queue drains between sends */
		while ((i >= 100 && i + 1 - done > 16) || (i == ORDER_N - 1 && done < ORDER_N)) {
			FUNC_CALL(f, func_next(f, true, &c, 20000));
			FUNC_ASSERT(f, !c.is_err, "order send: error %d (%s)", c.err.err,
				    fi_strerror(c.err.err));
			done++;
		}
	}
	return cour_ft_barrier(&f->ft);
}

static int order_server(struct st *s)
{
	struct func *f = &s->f;
	char *base = s->buf.base;
	struct func_comp c;

	/* the first messages arrive before their receives, and take the credits; the rest are
	 * sent while the receives below take them, so the sender keeps moving between the
	 * short path and the engine's queue */
	func_sleep_ms(f, 100);
	for (int i = 0; i < ORDER_N; i++) {
		memset(base, 0xee, order_size(i) + 16);
		FUNC_CALL(f, FUNC_POST(f, fi_trecv(f->ft.ep, base, ORDER_MAX, s->buf.desc,
						   f->ft.peer, ORDER_TAG, 0, &s->ctx[0])));
		FUNC_CALL(f, func_next(f, false, &c, 20000));
		FUNC_ASSERT(f, !c.is_err, "order recv %d: error %d (%s)", i, c.err.err,
			    fi_strerror(c.err.err));
		FUNC_ASSERT(f, c.e.len == order_size(i), "receive %d: len %zu, want %zu (out of "
			    "order?)", i, c.e.len, order_size(i));
		FUNC_CALL(f, func_check_data(f, base, c.e.len, 5000 + i, "ordered message"));
		FUNC_ASSERT(f, (unsigned char)base[c.e.len] == 0xee, "receive %d: bytes past "
			    "its length written", i);
	}
	return cour_ft_barrier(&f->ft);
}

/* ---- 2. posted receives ---- */

enum { P_PLAIN, P_TRUNC, P_DATA, P_IDATA, P_DC, P_IGNORE, P_N };
static const size_t p_len[P_N] = { 64, 64, 40, 8, 32, 24 };
static const uint64_t p_tag[P_N] = { 11, 12, 13, 14, 15, 0x17 };
#define P_RBUF 64
#define P_DATA_VAL  0xfeed0001ull
#define P_IDATA_VAL 0xbeef0002ull

static int posted_server(struct st *s)
{
	struct func *f = &s->f;
	char *base = s->buf.base, *multi = base + P_N * P_RBUF;
	struct fid_ep *ep = f->ft.ep;
	struct func_comp c;
	int got[P_N] = { 0 }, multi_got = 0;

	memset(base, 0xee, P_N * P_RBUF + MULTI_BUF);
	for (int k = 0; k < P_N; k++) {
		size_t len = k == P_TRUNC ? 16 : P_RBUF;
		uint64_t tag = k == P_IGNORE ? 0x10 : p_tag[k], ignore = k == P_IGNORE ? 0xf : 0;

		FUNC_CALL(f, FUNC_POST(f, fi_trecv(ep, base + k * P_RBUF, len, s->buf.desc,
						   f->ft.peer, tag, ignore, &s->ctx[k])));
	}
	struct iovec iov = { .iov_base = multi, .iov_len = MULTI_BUF };
	struct fi_msg msg = { .msg_iov = &iov, .desc = &s->buf.desc, .iov_count = 1,
			      .addr = f->ft.peer, .context = &s->ctx[P_N] };
	FUNC_CALL(f, FUNC_POST(f, fi_recvmsg(ep, &msg, FI_MULTI_RECV | FI_COMPLETION)));
	FUNC_CALL(f, cour_ft_barrier(&f->ft));

	for (int n = 0; n < P_N + MULTI_N; n++) {
		FUNC_CALL(f, func_next(f, false, &c, 10000));
		void *ctx = c.is_err ? c.err.op_context : c.e.op_context;
		int k = (int)((struct fi_context2 *)ctx - s->ctx);

		FUNC_ASSERT(f, k >= 0 && k <= P_N, "unknown op_context %p", ctx);
		if (k == P_N) {
			FUNC_ASSERT(f, !c.is_err, "multi-receive: error %d", c.err.err);
			FUNC_ASSERT(f, c.e.len == MULTI_LEN && c.e.buf ==
				    multi + (size_t)multi_got * MULTI_LEN,
				    "multi-receive %d: len %zu at %p, want %d at %p", multi_got,
				    c.e.len, c.e.buf, MULTI_LEN,
				    (void *)(multi + (size_t)multi_got * MULTI_LEN));
			FUNC_ASSERT(f, (c.e.flags & CQ_KIND) == (FI_RECV | FI_MSG), "flags 0x%llx",
				    (unsigned long long)c.e.flags);
			FUNC_CALL(f, func_check_data(f, c.e.buf, MULTI_LEN, 7000 + multi_got,
						     "multi-receive slice"));
			multi_got++;
			continue;
		}
		FUNC_ASSERT(f, !got[k]++, "receive %d completed twice", k);
		if (k == P_TRUNC) {
			FUNC_ASSERT(f, c.is_err && c.err.err == FI_ETRUNC && c.err.olen == 48 &&
				    c.err.len == 16, "truncated receive: is_err %d err %d olen %zu "
				    "len %zu", c.is_err, c.err.err, c.err.olen, c.err.len);
			FUNC_CALL(f, func_check_data(f, base + k * P_RBUF, 16, 6000 + k,
						     "truncated message's first bytes"));
			FUNC_ASSERT(f, (unsigned char)base[k * P_RBUF + 16] == 0xee,
				    "truncated receive wrote past its buffer");
			continue;
		}
		FUNC_ASSERT(f, !c.is_err, "receive %d: error %d (%s)", k, c.err.err,
			    fi_strerror(c.err.err));
		uint64_t want = FI_RECV | FI_TAGGED |
				(k == P_DATA || k == P_IDATA ? FI_REMOTE_CQ_DATA : 0);
		FUNC_ASSERT(f, (c.e.flags & CQ_KIND) == want, "receive %d: flags 0x%llx, want "
			    "0x%llx", k, (unsigned long long)c.e.flags, (unsigned long long)want);
		FUNC_ASSERT(f, c.e.len == p_len[k] && c.e.tag == p_tag[k], "receive %d: len %zu "
			    "tag 0x%llx", k, c.e.len, (unsigned long long)c.e.tag);
		if (k == P_DATA || k == P_IDATA)
			FUNC_ASSERT(f, c.e.data == (k == P_DATA ? P_DATA_VAL : P_IDATA_VAL),
				    "receive %d: data 0x%llx", k, (unsigned long long)c.e.data);
		FUNC_CALL(f, func_check_data(f, base + k * P_RBUF, p_len[k], 6000 + k,
					     "posted message"));
	}
	FUNC_ASSERT(f, multi_got == MULTI_N, "%d multi-receive slices", multi_got);
	return 0;
}

static int posted_client(struct st *s)
{
	struct func *f = &s->f;
	char *base = s->buf.base;
	struct fid_ep *ep = f->ft.ep;
	fi_addr_t dst = f->ft.peer;
	void *d = s->buf.desc;
	struct func_comp c;
	int sends = 0;

	for (int k = 0; k < P_N; k++)
		cour_ft_fill(base + k * P_RBUF, p_len[k], 6000 + k);
	for (int i = 0; i < MULTI_N; i++)
		cour_ft_fill(base + P_N * P_RBUF + i * MULTI_LEN, MULTI_LEN, 7000 + i);
	FUNC_CALL(f, cour_ft_barrier(&f->ft));

	for (int k = 0; k < P_N; k++) {
		char *p = base + k * P_RBUF;
		struct iovec iov = { .iov_base = p, .iov_len = p_len[k] };
		struct fi_msg_tagged tm = { .msg_iov = &iov, .desc = &d, .iov_count = 1,
					    .addr = dst, .tag = p_tag[k], .context = &s->ctx[k] };

		switch (k) {
		case P_DATA:
			FUNC_CALL(f, FUNC_POST(f, fi_tsenddata(ep, p, p_len[k], d, P_DATA_VAL, dst,
							       p_tag[k], &s->ctx[k])));
			break;
		case P_IDATA:
			FUNC_CALL(f, FUNC_POST(f, fi_tinjectdata(ep, p, p_len[k], P_IDATA_VAL, dst,
								 p_tag[k])));
			sends--;
			break;
		case P_DC:
			FUNC_CALL(f, FUNC_POST(f, fi_tsendmsg(ep, &tm, FI_COMPLETION |
							      FI_DELIVERY_COMPLETE)));
			break;
		default:
			FUNC_CALL(f, FUNC_POST(f, fi_tsend(ep, p, p_len[k], d, dst, p_tag[k],
							   &s->ctx[k])));
			break;
		}
		sends++;
	}
	for (int i = 0; i < MULTI_N; i++, sends++)
		FUNC_CALL(f, FUNC_POST(f, fi_send(ep, base + P_N * P_RBUF + i * MULTI_LEN,
						  MULTI_LEN, d, dst, &s->ctx[P_N + 1 + i])));
	for (int n = 0; n < sends; n++) {
		FUNC_CALL(f, func_next(f, true, &c, 10000));
		FUNC_ASSERT(f, !c.is_err, "send: error %d (%s)", c.err.err, fi_strerror(c.err.err));
		int k = (int)((struct fi_context2 *)c.e.op_context - s->ctx);
		FUNC_ASSERT(f, k >= 0 && k <= P_N + MULTI_N && k != P_IDATA && k != P_N,
			    "send completion with op_context %p", c.e.op_context);
		uint64_t want = FI_SEND | (k < P_N ? FI_TAGGED : FI_MSG);
		FUNC_ASSERT(f, (c.e.flags & CQ_KIND) == want, "send %d: flags 0x%llx", k,
			    (unsigned long long)c.e.flags);
	}
	FUNC_CALL(f, func_expect_quiet(f, true, 50));   /* the inject reports nothing */
	return 0;
}

/* ---- 3. quiet, then talking again ---- */

static int quiet_then_again(struct st *s, bool shm_on)
{
	struct func *f = &s->f;
	struct fi_courier_stats st;

	FUNC_CALL(f, func_expect_quiet(f, false, 1000));
	if (!func_is_courier(f) || func_get_stats(f->ft.ep, &st))
		return warmup(s);
	if (shm_on)
		FUNC_ASSERT(f, st.shm_box_freed >= 1, "%s: a mailbox unused for 1 s was not given back",
			    f->ft.is_server ? "server" : "client");
	else
		FUNC_ASSERT(f, st.shm_box_freed == 0, "a mailbox given back without shared memory");
	/* the box is claimed again after BOX_AFTER messages through the ring */
	FUNC_CALL(f, warmup(s));
	if (shm_on)
		FUNC_CALL(f, warm_until_box(s));
	return 0;
}

/* ---- 4. cell injects ---- */

#define CELL_N    24
#define CELL_WARM 4
#define CELL_LEN  16384
#define CELL_TAG  0x4343

static int cell_injects(struct st *s, bool shm_on)
{
	struct func *f = &s->f;
	char *out = s->buf.base, *in = s->buf.base + CELL_LEN;
	uint64_t before = 0, box;
	struct func_comp c;

	if (f->ft.info->tx_attr->inject_size < CELL_LEN)
		return 0;
	for (int i = 0; i < CELL_N; i++) {
		if (i == CELL_WARM && !f->ft.is_server && func_is_courier(f))
			before = shm_short_count(s, &box);
		if (f->ft.is_server) {
			FUNC_CALL(f, FUNC_POST(f, fi_trecv(f->ft.ep, in, CELL_LEN, s->buf.desc,
							   f->ft.peer, CELL_TAG + 1, 0, &s->ctx[1])));
			cour_ft_fill(out, CELL_LEN, 500 + i);
			FUNC_CALL(f, FUNC_POST(f, fi_tsend(f->ft.ep, out, CELL_LEN, s->buf.desc,
							   f->ft.peer, CELL_TAG, &s->ctx[0])));
			FUNC_CALL(f, func_next(f, true, &c, 10000));
			FUNC_ASSERT(f, !c.is_err, "cell send %d: error %d", i, c.err.err);
		} else {
			FUNC_CALL(f, FUNC_POST(f, fi_trecv(f->ft.ep, in, CELL_LEN, s->buf.desc,
							   f->ft.peer, CELL_TAG, 0, &s->ctx[1])));
		}
		FUNC_CALL(f, func_next(f, false, &c, 10000));
		FUNC_ASSERT(f, !c.is_err && c.e.len == CELL_LEN, "cell receive %d: len %zu", i,
			    c.e.len);
		FUNC_CALL(f, func_check_data(f, in, CELL_LEN, (f->ft.is_server ? 600 : 500) + i,
					     "cell message"));
		if (!f->ft.is_server) {
			cour_ft_fill(out, CELL_LEN, 600 + i);
			FUNC_CALL(f, FUNC_POST(f, fi_tinject(f->ft.ep, out, CELL_LEN, f->ft.peer,
							     CELL_TAG + 1)));
		}
	}
	if (shm_on && !f->ft.is_server && func_is_courier(f)) {
		uint64_t n = shm_short_count(s, &box) - before;

		FUNC_ASSERT(f, n == CELL_N - CELL_WARM, "cell injects: %llu of %d went as SHORT",
			    (unsigned long long)n, CELL_N - CELL_WARM);
	}
	return 0;
}

int main(int argc, char **argv)
{
	static struct st s;
	struct func *f = &s.f;
	const char *shm = getenv("FI_COURIER_SHM");
	bool shm_on = !shm || strcmp(shm, "0") != 0;
	struct fi_courier_stats st;
	int ret;

	ret = func_init(f, argc, argv, "shm_short", FI_MSG | FI_TAGGED | FI_MULTI_RECV,
			FI_ORDER_SAS, NULL, NULL, NULL, "");
	if (ret)
		goto out;
	size_t need = 0;
	for (int i = 0; i < ORDER_N; i++)
		need += order_size(i);
	ret = cour_ft_buf_alloc(&f->ft, need + ORDER_MAX, &s.buf);
	if (ret)
		goto out;
	size_t min_multi = MULTI_LEN;
	if (f->ft.is_server)
		FUNC_CALL(f, fi_setopt(&f->ft.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV,
				       &min_multi, sizeof(min_multi)));

	ret = warmup(&s);
	if (!ret && getenv("COUR_SHM_SHORT_CELLS")) {
		ret = cell_injects(&s, shm_on);
		goto done;
	}
	if (!ret && !f->ft.is_server && func_is_courier(f)) {
		s.short_before = shm_short_count(&s, &s.box_before);
		/* a pair gets its mailbox only once it has shown it talks */
		FUNC_ASSERT(f, s.box_before <= WARM_N - BOX_AFTER,
			    "warm-up: %llu of %d messages through the mailbox, before %d through the ring",
			    (unsigned long long)s.box_before, WARM_N, BOX_AFTER);
	}
	/* the order phase below must find the mailbox in use, to leave it and come back */
	if (!ret && shm_on && func_is_courier(f))
		ret = warm_until_box(&s);
	if (!ret && !f->ft.is_server && func_is_courier(f))
		s.short_before = shm_short_count(&s, &s.box_before);
	if (!ret)
		ret = f->ft.is_server ? order_server(&s) : order_client(&s);
	if (!ret && !f->ft.is_server && func_is_courier(f)) {
		uint64_t warm = s.short_before, warm_box = s.box_before;

		s.short_before = shm_short_count(&s, &s.box_before);
		/* the order phase must have switched between the three paths: the mailbox (up
		 * to 984 bytes), the ring (SHORT up to a packet, sequenced beyond) */
		if (shm_on)
			FUNC_ASSERT(f, s.box_before > warm_box && s.short_before - s.box_before >
				    warm - warm_box, "order phase: %llu messages through the mailbox, "
				    "%llu as SHORT through the ring (want both)",
				    (unsigned long long)(s.box_before - warm_box),
				    (unsigned long long)(s.short_before - s.box_before - warm + warm_box));
	}
	if (!ret)
		ret = f->ft.is_server ? posted_server(&s) : posted_client(&s);
	if (!ret)
		ret = quiet_then_again(&s, shm_on);
	if (!ret)
		ret = cell_injects(&s, shm_on);
	if (!ret && func_is_courier(f) && func_get_stats(f->ft.ep, &st) == 0) {
		printf("shm_short: %s: shm_short %llu (order phase %llu), shm_box %llu "
		       "(order phase %llu), shm_box_rx %llu, shm_box_freed %llu, credit_rts %llu, "
		       "unexpected %llu\n",
		       f->ft.is_server ? "server" : "client",
		       (unsigned long long)st.shm_short, (unsigned long long)s.short_before,
		       (unsigned long long)st.shm_box, (unsigned long long)s.box_before,
		       (unsigned long long)st.shm_box_rx, (unsigned long long)st.shm_box_freed,
		       (unsigned long long)st.credit_rts, (unsigned long long)st.unexpected_msgs);
		FUNC_ASSERT(f, st.drop_bad_hdr == 0, "%llu bad packets dropped",
			    (unsigned long long)st.drop_bad_hdr);
		FUNC_ASSERT(f, st.shm_box_broken == 0, "a mailbox broken");
		if (!shm_on)
			FUNC_ASSERT(f, st.shm_short == 0 && st.shm_box_rx == 0,
				    "SHORT messages without shared memory");
		else if (!f->ft.is_server)
			FUNC_ASSERT(f, st.shm_short > s.short_before,
				    "posted phase: no message went as SHORT");
	}
done:
	if (!ret)
		ret = func_finish(f);
out:
	return func_exit(f, &s.buf, ret);
}
