/*
 * rma_order: ordering and region lifetime around big RMA (courier copies those with a
 * same-host peer from both processes at once; proto/cour_rma_split.c). The server is the
 * target, the client the initiator (`rma_order [-x order|lease|death]`, the same with
 * 127.0.0.1).
 *
 *   order  (default) REPS rounds of four pairs posted back to back, never waiting in between
 *          (in every other round the initiator then naps, so the target runs ahead of it):
 *          WAW  a 1 MiB write, then a small write inside its second half: the small one wins;
 *          RAW  a 1 MiB write, then a small read inside its second half: the read sees it;
 *          WAR  a 1 MiB read, then a small write inside its second half: the read does not
 *               see the write;
 *          SAW  a 1 MiB write, then a message: when the message's receive completes the
 *               target checks all 1 MiB at once, before anything else progresses.
 *          The endpoint's msg_order must hold RAW, WAR, WAW and SAW for the test to run.
 *   lease  The initiator posts a 1 MiB write and then makes no
 *          libfabric call for LEASE_SLEEP_MS: the target alone must complete it (it may not
 *          wait for the initiator's half forever). Then again, and this time the target closes
 *          the region as soon as the write arrived: fi_close returns at once, the region holds
 *          the whole write, and the target refills the memory; once the initiator woke and saw
 *          its write complete successfully, the memory must still hold the refill: nobody
 *          wrote into a closed region.
 *   death  The initiator keeps 1 MiB writes and reads in flight until a timer kills it with
 *          SIGKILL, 30 to 70 ms in (test_rma_order.sh expects exit 137). The target must
 *          see it die without hanging: no progress call may take DEATH_CALL_MS, and after
 *          the death the region's fi_close must return at once, whatever state the
 *          initiator left its leases in (one it held while copying must be recovered when
 *          its process is gone, not after the 10 s a live but stopped holder gets).
 * All tests ask for manual progress (unless -M says otherwise).
 * Over courier with shared memory the target's stats must show the shared copies
 * (shm_rma_split) and, in lease, the ones it took back (shm_grants_revoked).
 */
#define _GNU_SOURCE

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "ft_rma.h"

enum { T_ORDER, T_LEASE, T_DEATH };

#define BIG       (1UL << 20)
#define SMALL     256
#define IN_HALF2  (768UL << 10)             /* inside the second half of a big operation */
#define AREA(i)   ((size_t)(i) * (BIG + 4096))
#define REGION    AREA(4)
#define REPS      16
#define SEQ(rep, k) (1000 + (uint64_t)(rep) * 16 + (k))
#define LEASE_SLEEP_MS 300
#define REFILL    0xee
#define DEATH_CALL_MS 2000               /* a lease's holder that died is seen in ~1 ms */

struct ord {
	struct rma r;
	int test;
	char *buf;                      /* target: the region; initiator: local memory */
	struct fid_mr *mr;
	void *desc;
	struct rma_region reg;
	struct fi_context2 ctx[8];
	char msg[64];
};
static struct ord ord;

static int ord_opt(int opt, const char *arg, void *ctx)
{
	struct ord *o = ctx;

	if (opt != 'x')
		return -1;
	if (!strcmp(arg, "order"))
		o->test = T_ORDER;
	else if (!strcmp(arg, "lease"))
		o->test = T_LEASE;
	else if (!strcmp(arg, "death"))
		o->test = T_DEATH;
	else
		return -1;
	return 0;
}

static void ord_finalize(struct cour_ft_opts *opts)
{
	opts->caps |= FI_MSG | FI_SEND | FI_RECV;
	if (!opts->progress)
		opts->progress = FI_PROGRESS_MANUAL;
}

static void nap_ms(int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts))
		;
}

/* p[0..len) holds pattern seq from pattern offset base */
static int check_range(struct func *f, const char *p, size_t len, uint64_t seq, size_t base,
		       const char *what)
{
	for (size_t i = 0; i < len; i++)
		FUNC_ASSERT(f, (uint8_t)p[i] == cour_ft_pattern_byte(seq, base + i),
			    "%s: byte %zu is 0x%02x, want 0x%02x", what, base + i, (uint8_t)p[i],
			    cour_ft_pattern_byte(seq, base + i));
	return 0;
}

/* A big area after a big write of seq and a small one of seq2 at IN_HALF2 */
static int check_big_small(struct func *f, const char *p, uint64_t seq, uint64_t seq2,
			   const char *what)
{
	FUNC_CALL(f, check_range(f, p, IN_HALF2, seq, 0, what));
	FUNC_CALL(f, check_range(f, p + IN_HALF2, SMALL, seq2, 0, what));
	return check_range(f, p + IN_HALF2 + SMALL, BIG - IN_HALF2 - SMALL, seq,
			   IN_HALF2 + SMALL, what);
}

static int wait_ok(struct ord *o, int n, const char *what)
{
	struct func *f = &o->r.f;
	struct func_comp c;

	for (int i = 0; i < n; i++) {
		FUNC_CALL(f, func_next(f, true, &c, 10000));
		FUNC_ASSERT(f, !c.is_err, "%s: completion %d failed: %d (%s)", what, i, c.err.err,
			    fi_strerror(c.err.err));
	}
	return 0;
}

static int target_stats(struct ord *o, struct fi_courier_stats *st)
{
	memset(st, 0, sizeof(*st));
	return func_is_courier(&o->r.f) ? func_get_stats(o->r.f.ft.ep, st) : 0;
}

/* A few small writes first: a same-host peer's shared memory is set up by the first packets
 * (over UDP), and the tests are about what follows. */
#define WARMUP 8
static int warmup(struct ord *o)
{
	struct func *f = &o->r.f;

	if (f->ft.is_server)
		return cour_ft_barrier(&f->ft);
	for (int i = 0; i < WARMUP; i++) {
		FUNC_CALL(f, FUNC_POST(f, fi_write(f->ft.ep, o->buf, SMALL, o->desc, f->ft.peer,
						   rma_raddr(&o->reg, AREA(3)), o->reg.key,
						   &o->ctx[0])));
		FUNC_CALL(f, wait_ok(o, 1, "warm-up write"));
	}
	return cour_ft_barrier(&f->ft);
}

/* ---- order ---- */

static int order_target(struct ord *o)
{
	struct func *f = &o->r.f;
	struct fi_courier_stats st;
	struct func_comp c;

	for (int rep = 0; rep < REPS; rep++) {
		cour_ft_fill(o->buf + AREA(2), BIG, SEQ(rep, 4));        /* what WAR reads */
		FUNC_CALL(f, FUNC_POST(f, fi_recv(f->ft.ep, o->msg, sizeof(o->msg), NULL,
						  FI_ADDR_UNSPEC, &o->ctx[0])));
		FUNC_CALL(f, cour_ft_barrier(&f->ft));
		/* SAW: the message is the initiator's last operation of the round */
		FUNC_CALL(f, func_next(f, false, &c, 10000));
		FUNC_ASSERT(f, !c.is_err && c.e.op_context == &o->ctx[0], "the message");
		FUNC_CALL(f, check_range(f, o->buf + AREA(3), BIG, SEQ(rep, 6), 0,
					 "SAW: the write before the message"));
		FUNC_CALL(f, cour_ft_barrier(&f->ft));                   /* all complete */
		FUNC_CALL(f, check_big_small(f, o->buf + AREA(0), SEQ(rep, 0), SEQ(rep, 1),
					     "WAW: the small write after the big one"));
		FUNC_CALL(f, check_big_small(f, o->buf + AREA(2), SEQ(rep, 4), SEQ(rep, 5),
					     "WAR: the small write after the read"));
	}
	FUNC_CALL(f, target_stats(o, &st));
	printf("order: %d rounds of WAW, RAW, WAR, SAW held; %llu operations copied by both "
	       "sides, %llu taken back\n", REPS, (unsigned long long)st.shm_rma_split,
	       (unsigned long long)st.shm_grants_revoked);
	/* in the rounds where the initiator naps, the small operations overtake its halves */
	if (st.shm_peers)
		FUNC_ASSERT(f, st.shm_rma_split >= 3 * REPS && st.shm_grants_revoked >= REPS / 2,
			    "only %llu shared copies, %llu taken back",
			    (unsigned long long)st.shm_rma_split,
			    (unsigned long long)st.shm_grants_revoked);
	return 0;
}

static int order_initiator(struct ord *o)
{
	struct func *f = &o->r.f;
	struct fid_ep *ep = f->ft.ep;
	fi_addr_t dst = f->ft.peer;
	const struct rma_region *g = &o->reg;
	char *big = o->buf, *small = o->buf + BIG, *rd = o->buf + 2 * BIG;
	char *rd_small = o->buf + 3 * BIG, *big2 = o->buf + 4 * BIG, *small2 = big2 + BIG;
	char *big3 = small2 + SMALL;
	void *d = o->desc;

	for (int rep = 0; rep < REPS; rep++) {
		cour_ft_fill(big, BIG, SEQ(rep, 0));
		cour_ft_fill(small, SMALL, SEQ(rep, 1));
		cour_ft_fill(big2, BIG, SEQ(rep, 2));
		cour_ft_fill(small2, SMALL, SEQ(rep, 5));
		cour_ft_fill(big3, BIG, SEQ(rep, 6));
		memset(rd, 0, BIG);
		memset(rd_small, 0, SMALL);
		FUNC_CALL(f, cour_ft_barrier(&f->ft));
		/* WAW, RAW, WAR, SAW: each pair back to back */
		FUNC_CALL(f, FUNC_POST(f, fi_write(ep, big, BIG, d, dst, rma_raddr(g, AREA(0)),
						   g->key, &o->ctx[0])));
		FUNC_CALL(f, FUNC_POST(f, fi_write(ep, small, SMALL, d, dst,
						   rma_raddr(g, AREA(0) + IN_HALF2), g->key,
						   &o->ctx[1])));
		FUNC_CALL(f, FUNC_POST(f, fi_write(ep, big2, BIG, d, dst, rma_raddr(g, AREA(1)),
						   g->key, &o->ctx[2])));
		FUNC_CALL(f, FUNC_POST(f, fi_read(ep, rd_small, SMALL, d, dst,
						  rma_raddr(g, AREA(1) + IN_HALF2), g->key,
						  &o->ctx[3])));
		FUNC_CALL(f, FUNC_POST(f, fi_read(ep, rd, BIG, d, dst, rma_raddr(g, AREA(2)),
						  g->key, &o->ctx[4])));
		FUNC_CALL(f, FUNC_POST(f, fi_write(ep, small2, SMALL, d, dst,
						   rma_raddr(g, AREA(2) + IN_HALF2), g->key,
						   &o->ctx[5])));
		FUNC_CALL(f, FUNC_POST(f, fi_write(ep, big3, BIG, d, dst, rma_raddr(g, AREA(3)),
						   g->key, &o->ctx[6])));
		FUNC_CALL(f, FUNC_POST(f, fi_send(ep, "saw", 4, NULL, dst, &o->ctx[7])));
		/* the target runs ahead of our halves (manual progress); 20 ms, as one round in 16
		 * under ThreadSanitizer did not get ahead in 2 */
		if (rep % 2)
			nap_ms(20);
		FUNC_CALL(f, wait_ok(o, 8, "order round"));
		FUNC_CALL(f, check_range(f, rd_small, SMALL, SEQ(rep, 2), IN_HALF2,
					 "RAW: the small read after the big write"));
		FUNC_CALL(f, check_range(f, rd, BIG, SEQ(rep, 4), 0,
					 "WAR: the big read before the small write"));
		FUNC_CALL(f, cour_ft_barrier(&f->ft));
	}
	printf("order: %d rounds posted back to back, every byte as ordered\n", REPS);
	return 0;
}

/* ---- lease ---- */

static int lease_target(struct ord *o)
{
	struct func *f = &o->r.f;
	struct fi_courier_stats st0, st;
	uint64_t t0, dt;
	char flag;

	/* 1: the initiator sleeps; its write completes here anyway */
	FUNC_CALL(f, target_stats(o, &st0));
	if (func_is_courier(f) && getenv("FI_COURIER_SHM") && !strcmp(getenv("FI_COURIER_SHM"), "0"))
		FUNC_ASSERT(f, !st0.shm_peers, "shared memory with FI_COURIER_SHM=0");
	else if (func_is_courier(f))
		FUNC_ASSERT(f, st0.shm_peers, "no shared memory with the initiator after warm-up");
	FUNC_CALL(f, cour_ft_barrier(&f->ft));
	FUNC_CALL(f, rma_cntr_wait(&o->r, RMA_CNTR_RMT_WRITE, WARMUP + 1, 0,
				   st0.shm_peers ? LEASE_SLEEP_MS / 2 : LEASE_SLEEP_MS + 5000));
	FUNC_CALL(f, check_range(f, o->buf, BIG, SEQ(0, 0), 0,
				 "a write whose initiator sleeps"));
	FUNC_CALL(f, target_stats(o, &st));
	if (st.shm_peers)
		FUNC_ASSERT(f, st.shm_grants_revoked > st0.shm_grants_revoked,
			    "the write completed without the target taking its lease back");
	FUNC_CALL(f, cour_ft_barrier(&f->ft));

	/* 2: the region closes while the sleeping initiator's write is half done */
	st0 = st;
	FUNC_CALL(f, cour_ft_barrier(&f->ft));
	t0 = cour_ft_now_ns();
	for (;;) {
		FUNC_CALL(f, cour_ft_progress(&f->ft));
		FUNC_CALL(f, target_stats(o, &st));
		if (!st.shm_peers || st.shm_rma_split > st0.shm_rma_split)
			break;
		FUNC_ASSERT(f, cour_ft_now_ns() - t0 < 2000000000ULL,
			    "the write never arrived as a shared copy");
	}
	if (!st.shm_peers)  /* no shared memory: nothing to race; let the write land first */
		FUNC_CALL(f, rma_cntr_wait(&o->r, RMA_CNTR_RMT_WRITE, WARMUP + 2, 0,
					   LEASE_SLEEP_MS + 5000));
	t0 = cour_ft_now_ns();
	rma_mr_close(&o->r, &o->mr);
	dt = cour_ft_now_ns() - t0;
	FUNC_ASSERT(f, dt < 100000000ULL, "fi_close of the region took %llu ms",
		    (unsigned long long)(dt / 1000000));
	FUNC_CALL(f, check_range(f, o->buf, BIG, SEQ(0, 1), 0,
				 "a write into a region closed under it"));
	memset(o->buf, REFILL, BIG);
	flag = 'C';
	FUNC_CALL(f, cour_ft_oob_send(&f->ft, &flag, 1));
	FUNC_CALL(f, cour_ft_oob_recv(&f->ft, &flag, 1));
	FUNC_ASSERT(f, flag == 'D', "got 0x%02x, want 'D'", flag);
	for (size_t i = 0; i < BIG; i++)
		FUNC_ASSERT(f, (uint8_t)o->buf[i] == REFILL, "byte %zu of the closed region was "
			    "written after the close: 0x%02x", i, (uint8_t)o->buf[i]);
	FUNC_CALL(f, target_stats(o, &st));
	printf("lease: a sleeping initiator's write completed; fi_close of its region took "
	       "%.2f ms and nothing was written after it; %llu leases taken back\n",
	       (double)dt / 1e6, (unsigned long long)st.shm_grants_revoked);
	if (st.shm_peers)
		FUNC_ASSERT(f, st.shm_grants_revoked >= st0.shm_grants_revoked + 1,
			    "the close did not take the lease back");
	return 0;
}

static int lease_initiator(struct ord *o)
{
	struct func *f = &o->r.f;
	const struct rma_region *g = &o->reg;
	char flag;

	cour_ft_fill(o->buf, BIG, SEQ(0, 0));
	FUNC_CALL(f, cour_ft_barrier(&f->ft));
	FUNC_CALL(f, FUNC_POST(f, fi_write(f->ft.ep, o->buf, BIG, o->desc, f->ft.peer,
					   rma_raddr(g, 0), g->key, &o->ctx[0])));
	nap_ms(LEASE_SLEEP_MS);                 /* no libfabric call: no progress here */
	FUNC_CALL(f, wait_ok(o, 1, "the write posted before sleeping"));
	FUNC_CALL(f, cour_ft_barrier(&f->ft));

	cour_ft_fill(o->buf, BIG, SEQ(0, 1));
	FUNC_CALL(f, cour_ft_barrier(&f->ft));
	FUNC_CALL(f, FUNC_POST(f, fi_write(f->ft.ep, o->buf, BIG, o->desc, f->ft.peer,
					   rma_raddr(g, 0), g->key, &o->ctx[0])));
	nap_ms(LEASE_SLEEP_MS);                 /* the target closes the region meanwhile */
	FUNC_CALL(f, cour_ft_oob_recv(&f->ft, &flag, 1));
	FUNC_ASSERT(f, flag == 'C', "got 0x%02x, want 'C'", flag);
	FUNC_CALL(f, wait_ok(o, 1, "the write whose region closed after it arrived"));
	flag = 'D';
	return cour_ft_oob_send(&f->ft, &flag, 1);
}

/* ---- death ---- */

static void death_now(int sig)
{
	(void)sig;
	kill(getpid(), SIGKILL);
}

static int death_target(struct ord *o)
{
	struct func *f = &o->r.f;
	struct fi_courier_stats st;
	uint64_t t0, dead = 0, worst = 0, t, dt;

	FUNC_CALL(f, cour_ft_barrier(&f->ft));
	t0 = cour_ft_now_ns();
	for (;;) {
		t = cour_ft_now_ns();
		FUNC_CALL(f, cour_ft_progress(&f->ft));
		dt = cour_ft_now_ns() - t;
		worst = dt > worst ? dt : worst;
		FUNC_ASSERT(f, dt < DEATH_CALL_MS * 1000000ULL, "a progress call took %llu ms",
			    (unsigned long long)(dt / 1000000));
		if (!dead && cour_ft_oob_check_peer(&f->ft) == -FI_ECONNRESET)
			dead = cour_ft_now_ns();
		/* after the death: long enough for grant expiry and the peer's pidfd */
		if (dead && cour_ft_now_ns() - dead > 200000000ULL)
			break;
		FUNC_ASSERT(f, cour_ft_now_ns() - t0 < 20000000000ULL,
			    "the initiator was not killed within 20 s");
	}
	t = cour_ft_now_ns();
	rma_mr_close(&o->r, &o->mr);
	dt = cour_ft_now_ns() - t;
	FUNC_ASSERT(f, dt < 100000000ULL, "fi_close of the region took %llu ms after the "
		    "initiator died", (unsigned long long)(dt / 1000000));
	FUNC_CALL(f, target_stats(o, &st));
	printf("death: the initiator died after %.0f ms; the longest progress call took %.2f ms, "
	       "fi_close of the region %.2f ms; %llu shared RMA, %llu leases taken back\n",
	       (double)(dead - t0) / 1e6, (double)worst / 1e6, (double)dt / 1e6,
	       (unsigned long long)st.shm_rma_split, (unsigned long long)st.shm_grants_revoked);
	if (st.shm_peers)
		FUNC_ASSERT(f, st.shm_rma_split, "no shared RMA before the initiator died");
	return 0;
}

static int death_initiator(struct ord *o)
{
	struct func *f = &o->r.f;
	struct itimerval it = { .it_value = { 0, (30 + getpid() % 5 * 10) * 1000 } };
	const char *hold = getenv("FI_COURIER_LEASE_HOLD");
	uint64_t t0;
	int out = 0;

	/* holding each lease for a while (courier, for tests): die in the middle of the first
	 * hold, whenever it began (under ASan on a loaded machine, later than 70 ms in) */
	if (hold && atoi(hold) >= 200)
		it.it_value.tv_usec = (atoi(hold) < 2000 ? atoi(hold) / 2 : 999) * 1000;

	cour_ft_fill(o->buf, 4 * BIG, SEQ(0, 2));
	FUNC_CALL(f, cour_ft_barrier(&f->ft));
	signal(SIGALRM, death_now);
	FUNC_ASSERT(f, setitimer(ITIMER_REAL, &it, NULL) == 0, "setitimer failed");
	t0 = cour_ft_now_ns();
	for (uint64_t n = 0;; n++) {
		size_t a = AREA(n % 2);
		void *ctx = &o->ctx[n % 4];
		if (out == 4) {
			FUNC_CALL(f, wait_ok(o, 1, "an RMA before the death"));
			out--;
		}
		if (n % 2)
			FUNC_CALL(f, FUNC_POST(f, fi_read(f->ft.ep, o->buf + BIG * 2 + a, BIG,
							  o->desc, f->ft.peer,
							  rma_raddr(&o->reg, a), o->reg.key, ctx)));
		else
			FUNC_CALL(f, FUNC_POST(f, fi_write(f->ft.ep, o->buf + a, BIG, o->desc,
							   f->ft.peer, rma_raddr(&o->reg, a),
							   o->reg.key, ctx)));
		out++;
		FUNC_ASSERT(f, cour_ft_now_ns() - t0 < 10000000000ULL, "still alive after 10 s");
	}
}

int main(int argc, char **argv)
{
	struct ord *o = &ord;
	struct func *f = &o->r.f;
	const char *tname[] = { "rma_order order", "rma_order lease", "rma_order death" };
	const uint64_t need = FI_ORDER_RAW | FI_ORDER_WAR | FI_ORDER_WAW | FI_ORDER_SAW;
	int ret;

	ret = rma_init(&o->r, argc, argv, "rma_order", FI_RMA | FI_READ | FI_WRITE |
		       FI_REMOTE_READ | FI_REMOTE_WRITE | FI_RMA_EVENT, ord_finalize, "x:",
		       ord_opt, o, "  -x order|lease|death  which test (default order)\n");
	if (ret)
		goto out;
	printf("%s (%s): provider %s, progress %s\n", tname[o->test],
	       f->ft.is_server ? "target" : "initiator", f->ft.info->fabric_attr->prov_name,
	       f->ft.info->domain_attr->data_progress == FI_PROGRESS_AUTO ? "auto" : "manual");
	if (o->test == T_ORDER && (f->ft.info->tx_attr->msg_order & need) != need) {
		printf("%s: msg_order lacks RAW|WAR|WAW|SAW: nothing to test\n", tname[o->test]);
		goto finish;
	}
	ret = posix_memalign((void **)&o->buf, 4096, REGION + 6 * BIG) ? -FI_ENOMEM : 0;
	if (ret)
		goto out;
	memset(o->buf, 0, REGION + 6 * BIG);
	if (f->ft.is_server) {
		ret = rma_mr_reg(&o->r, o->buf, REGION, FI_REMOTE_READ | FI_REMOTE_WRITE, &o->mr,
				 &o->reg);
		if (!ret)
			ret = rma_send_region(&o->r, &o->reg);
		if (!ret)
			ret = warmup(o);
		if (!ret)
			ret = o->test == T_ORDER ? order_target(o) :
			      o->test == T_LEASE ? lease_target(o) : death_target(o);
		if (o->test == T_DEATH)
			goto out;       /* no last barrier: the initiator is gone */
	} else {
		ret = rma_local_reg(&o->r, o->buf, REGION + 6 * BIG, &o->mr, &o->desc);
		if (!ret)
			ret = rma_recv_region(&o->r, &o->reg);
		if (!ret)
			ret = warmup(o);
		if (!ret)
			ret = o->test == T_ORDER ? order_initiator(o) :
			      o->test == T_LEASE ? lease_initiator(o) : death_initiator(o);
	}
finish:
	if (!ret)
		ret = rma_finish(&o->r);
out:
	rma_mr_close(&o->r, &o->mr);
	rma_close(&o->r);
	free(o->buf);
	if (ret || f->failures) {
		fprintf(stderr, "%s: FAIL (%d)\n", tname[o->test], ret);
		return 1;
	}
	printf("%s: PASS (%s)\n", tname[o->test], f->ft.is_server ? "target" : "initiator");
	return 0;
}
