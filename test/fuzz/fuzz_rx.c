/*
 * libFuzzer target for courier's receive path: every packet an endpoint takes off the wire goes
 * through cour_ep_rx_packet, so that is where garbage must be stopped.
 *
 * The world is built once and kept: endpoints A and B of one domain over the loop wire, manual
 * progress, a live session between them (a few real messages exchanged), a registered region
 * on each, and background operations kept posted (see struct bg) so that forged packets find
 * receives to match and operations to answer. Each input becomes one or more packets handed
 * to B as if A (or one of a few other addresses) had sent them, then both endpoints progress.
 * The first byte picks how the input becomes packets:
 *
 *   mode 0  raw:     the bytes are the packet (from A, or from one of a few other addresses)
 *   mode 1  overlay: 5 control bytes and a body laid over a header that passes every check
 *                    (version, type, A's and B's current sessions, a sequence number near B's
 *                    rx_next, crc recomputed), so the fuzzer's bytes reach the message handlers
 *   mode 2  multi:   up to 32 overlay records [len16][ctl x5][body], progress between them, so
 *                    that sequences (fragments, RTS then RDATA...) are reachable in one input
 *   mode 3  loop:    the raw bytes sent through the loop wire from A's address (B's poll path);
 *                    with bit 3 of the first byte, overlay records as in mode 2 laid out as
 *                    one packed datagram (wire/cour_wire.h) whose first table entry the next
 *                    two bytes may spoil, so the wire's unpacking meets valid and broken packs
 *
 * With FUZZ_KEY=1 both endpoints authenticate (auth_key): modes 1 and 2 then forge packets
 * as a holder of the key would (the MAC flag set, handed to B behind its wire's check, which
 * test_mac covers), and mode 3 signs the raw bytes with A's key (bit 2 of the first byte
 * clear) so they reach the parser through the check, or sends them unsigned to fuzz the
 * check itself.
 *
 * Forged packets that carry the right sessions and sequence number are trusted by design (the
 * crc is not an authenticator): they can reset the session or desynchronise the sequence space.
 * What must never happen is a crash, undefined behaviour, a leak, unbounded memory, or an
 * endpoint that stops making progress. So every FUZZ_LIVE_EVERY inputs, and at exit, a real
 * exchange (eager and rendezvous, both directions) must complete intact. Sends that fail
 * because the session was reset are fine and retried; a send (or the receive of a delivered
 * message) that neither completes nor fails is a stall, and no intact exchange within
 * LIVE_TOTAL_MS is a livelock: both abort(), which libFuzzer reports as a crash.
 *
 * Environment:
 *   FUZZ_WRITE_SEEDS=dir  build the world, write seed inputs made of captured packets, exit
 *   FUZZ_STALL=recover    on a stall, a pair whose exchanges keep failing, or liveness data a
 *                         forged in-session packet replaced, count it, restart A's session
 *                         and go on (default: abort); crashes and sanitizer reports still
 *                         end the run
 *   FUZZ_LIVE_EVERY=n     inputs between liveness checks (default 2000)
 *   FUZZ_STRICT_MEM=1     abort as soon as B holds more unexpected messages from one peer than
 *                         that peer has credits (default: count it, and recycle B when its junk
 *                         passes a fixed bound)
 *   FUZZ_VERBOSE=1        print every liveness check
 *
 * In this build every object pool poisons what is given back (see run-fuzz.sh), so a use after
 * cour_pool_put is caught by ASan like a use after free.
 */
#include "fi/cour_ep.h"

#include <arpa/inet.h>
#include <sanitizer/asan_interface.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#define LIVE_EVERY      2000                    /* default of FUZZ_LIVE_EVERY */
#define LIVE_TAG        0xc0ffee0000000000ULL   /* no fuzz packet may carry this prefix */
#define LIVE_TAG_MASK   0xffffff0000000000ULL
#define LIVE_LEN_EAGER  3000                    /* three loop-wire packets */
#define LIVE_LEN_RDV    20000                   /* above eager_max: rendezvous */
#define LIVE_TOTAL_MS   8000                    /* a whole check, retries included */
#define LIVE_STALL_MS   2000                    /* an operation silent this long is stalled */
#define LIVE_FAILS_MAX  32                      /* failed exchanges in a row: a livelock */
#define JUNK_MSGS_MAX   256                     /* B is recycled when it holds more... */
#define JUNK_BYTES_MAX  (256ull << 20)          /* ...or this much unexpected data */
#define JUNK_RDV_MAX    256
#define CAP_MAX         64                      /* packets captured for seeds */
#define ALT_PORTS       4                       /* other source addresses the fuzzer may use */
#define ALT_PORT_BASE   1000
#define MULTI_MAX       32
#define OP_MAGIC        0x0b5e55edu

/* ---- the pool hooks run-fuzz.sh redirects cour_pool_get/put to ---- */

void *fz_pool_get(struct cour_pool *p);
void fz_pool_put(struct cour_pool *p, void *o);

void *fz_pool_get(struct cour_pool *p)
{
	void *o = (cour_pool_get)(p);

	if (o)
		ASAN_UNPOISON_MEMORY_REGION(o, p->obj_size);
	return o;
}

void fz_pool_put(struct cour_pool *p, void *o)
{
	(cour_pool_put)(p, o);
	/* the first word links the free list; everything after it is dead until the next get */
	ASAN_POISON_MEMORY_REGION((char *)o + sizeof(void *), p->obj_size - sizeof(void *));
}

/* ---- the world ---- */

/* One operation of a liveness exchange; its address is the op_context. */
struct op {
	uint32_t  magic;
	int       done;
	int       err;
	bool      multi;          /* FI_MULTI_RECV: done at the completion that releases it */
	uint64_t  want_tag;       /* set when posted */
	size_t    len;            /* the rest from the completion */
	uint64_t  tag, data, flags;
};

/*
 * Background operations, kept posted while inputs run, so that forged packets find state to
 * act on: receives on B that forged messages can match (tagged, a short one that truncates,
 * untagged, multi-receive), and operations from B to A (a rendezvous waiting for CTS, an eager
 * send waiting for DONE, a read, a write and a fetching atomic waiting for A's answer) that
 * forged CTS, DONE, READ_RESP and RMA_RESP can target. A consumes B's with receives of its
 * own, so credits keep flowing. Each is posted again once it completes.
 */
enum { BG_B_TRECV, BG_B_TRECV_SHORT, BG_B_RECV, BG_B_MULTI, BG_B_RTS, BG_B_DC, BG_B_READ,
       BG_B_WRITE, BG_B_ATOMIC, BG_A_TRECV, BG_A_TRECV2, BG_N };
#define BG_TAG      0x00b6000000000000ULL    /* any low 16 bits */
#define BG_LEN      16384
#define MR_LEN      65536

struct bg {
	struct op  op;
	bool       posted;
	char       buf[BG_LEN];
};

struct live {
	struct op  op[8];         /* rx B x2, rx A x2, tx A x2, tx B x2 */
	char      *buf[8];
	size_t     len[8];
	uint64_t   key;
};

static struct {
	bool               up;
	struct fi_info    *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av     *av;
	struct fid_cq     *cq_a, *cq_b;
	struct fid_ep     *ep_a, *ep_b;
	fi_addr_t          fa_a, fa_b;
	char               name_b[64];
	size_t             namelen_b;
	struct cour_wire_ops cap_wire;    /* A's loop wire, with send_raw recording packets:
					    * the base under A's fault decorator */
	bool               capturing;
	uint8_t           *cap[CAP_MAX];
	size_t             cap_len[CAP_MAX];
	size_t             ncap;
	uint64_t           inputs, live_checks, live_retries, stalls, livelocks, restarts;
	uint64_t           forged;        /* liveness data replaced by a forged in-session packet */
	uint64_t           recycles;
	size_t             max_unexp, max_unexp_peer, max_rdv, max_peers;
	uint64_t           max_unexp_bytes;
	uint64_t           live_key;
	struct live      **abandoned;     /* exchanges whose operations may still complete */
	size_t             nabandoned;
	uint64_t           live_every;
	bool               stall_recover, strict_mem, verbose;
	struct bg          bg[BG_N];
	uint64_t           bg_done, remote_events;
	/* registered regions: B's is what forged RMA packets aim at, A's serves B's own RMA */
	struct fid_mr     *mr_a, *mr_b;
	uint64_t           key_a, key_b, raddr_a, raddr_b;
	char               mem_a[MR_LEN], mem_b[MR_LEN];
} w;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "fuzz_rx: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	abort();
}

#define CHECK(call) do {							\
	int r_ = (int)(call);							\
	if (r_)									\
		die("%s: %d (%s)", #call, r_, fi_strerror(-r_));		\
} while (0)

static struct cour_ep *ep_a(void) { return cour_ep_of(w.ep_a); }
static struct cour_ep *ep_b(void) { return cour_ep_of(w.ep_b); }

static struct cour_peer *peer_of(struct cour_ep *ep, const struct cour_addr *addr)
{
	struct cour_peer *p;

	HASH_FIND(hh, ep->pep.peers, addr, sizeof(*addr), p);
	return p;
}

static void alt_addr(unsigned i, struct sockaddr_storage *ss, socklen_t *len)
{
	struct sockaddr_in *in = (struct sockaddr_in *)ss;

	memset(ss, 0, sizeof(*ss));
	in->sin_family = AF_INET;
	in->sin_port = htons(ALT_PORT_BASE + i % ALT_PORTS);
	in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	*len = sizeof(*in);
}

/* Records A's finished packets (the fault injector, set to change nothing, hands each one to
 * send_raw as a single buffer, signed with a key: the seed is the packet without its
 * trailer), then delivers them as the loop wire would. */
static void cap_send_raw(struct cour_wire *cw, const void *sa, socklen_t sa_len,
			 const char *buf, size_t len)
{
	size_t plen = cw->mac && len >= COUR_MAC_LEN ? len - COUR_MAC_LEN : len;

	if (w.capturing && w.ncap < CAP_MAX) {
		w.cap[w.ncap] = malloc(plen ? plen : 1);
		if (w.cap[w.ncap]) {
			memcpy(w.cap[w.ncap], buf, plen);
			w.cap_len[w.ncap++] = plen;
		}
	}
	cour_loop_wire.send_raw(cw, sa, sa_len, buf, len);
}

static void ep_open(struct fid_ep **ep, struct fid_cq *cq, const void *name, size_t namelen)
{
	struct fi_info *info = fi_dupinfo(w.info);

	if (!info)
		die("fi_dupinfo");
	if (name) {
		free(info->src_addr);
		info->src_addr = malloc(namelen);
		if (!info->src_addr)
			die("malloc");
		memcpy(info->src_addr, name, namelen);
		info->src_addrlen = namelen;
	}
	CHECK(fi_endpoint(w.domain, info, ep, NULL));
	fi_freeinfo(info);
	CHECK(fi_ep_bind(*ep, &cq->fid, FI_TRANSMIT | FI_RECV));
	CHECK(fi_ep_bind(*ep, &w.av->fid, 0));
	CHECK(fi_enable(*ep));
}

static fi_addr_t av_add(struct fid_ep *ep)
{
	char name[64];
	size_t len = sizeof(name);
	fi_addr_t fa = FI_ADDR_NOTAVAIL;

	CHECK(fi_getname(&ep->fid, name, &len));
	if (fi_av_insert(w.av, name, 1, &fa, 0, NULL) != 1)
		die("fi_av_insert");
	return fa;
}

/* ---- progress and completions ---- */

static void record(struct op *op, const struct fi_cq_tagged_entry *e, int err)
{
	if (!op && (e->flags & FI_REMOTE_CQ_DATA) && (e->flags & (FI_RMA | FI_ATOMIC))) {
		w.remote_events++;      /* a forged write or atomic with remote CQ data */
		return;
	}
	if (!op || op->magic != OP_MAGIC) {
		/* nothing but liveness operations is ever posted: anything else is a packet
		 * completing what does not exist */
		die("spurious completion: context %p flags %#" PRIx64 " len %zu err %d",
		    e->op_context, e->flags, e->len, err);
	}
	if (op->done) {
		long bg = (struct bg *)((char *)op - offsetof(struct bg, op)) - w.bg;

		die("operation %p (background #%ld) completed twice: first flags %#" PRIx64
		    " len %zu err %d, now flags %#" PRIx64 " len %zu err %d", (void *)op,
		    bg >= 0 && bg < BG_N ? bg : -1L, op->flags, op->len, op->err, e->flags,
		    e->len, err);
	}
	if (op->multi && !(e->flags & FI_MULTI_RECV))
		return;         /* one message (or its error) of the buffer, which stays posted */
	op->done = 1;
	op->err = err;
	op->len = e->len;
	op->tag = e->tag;
	op->data = e->data;
	op->flags = e->flags;
}

static void drain_cq(struct fid_cq *cq)
{
	struct fi_cq_tagged_entry e[8];
	ssize_t n;

	for (int guard = 0; guard < 1000; guard++) {
		n = fi_cq_read(cq, e, 8);
		if (n == -FI_EAGAIN)
			return;
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry ee = { 0 };
			struct fi_cq_tagged_entry te;

			if (fi_cq_readerr(cq, &ee, 0) != 1)
				die("fi_cq_readerr");
			te = (struct fi_cq_tagged_entry){ ee.op_context, ee.flags, ee.len,
							  ee.buf, ee.data, ee.tag };
			record(ee.op_context, &te, ee.err ? ee.err : -1);
			continue;
		}
		if (n < 0)
			die("fi_cq_read: %zd", n);
		for (ssize_t k = 0; k < n; k++)
			record(e[k].op_context, &e[k], 0);
	}
	die("a CQ that never runs dry");
}

/* Each read progresses the whole domain (both endpoints). */
static void pump(int rounds)
{
	for (int i = 0; i < rounds; i++) {
		drain_cq(w.cq_a);
		drain_cq(w.cq_b);
	}
}

/* ---- background operations ---- */

static void bg_post(int i)
{
	struct bg *g = &w.bg[i];
	struct fid_ep *b = w.ep_b, *a = w.ep_a;
	struct iovec iov = { g->buf, BG_LEN };
	struct fi_msg m = { .msg_iov = &iov, .iov_count = 1, .addr = FI_ADDR_UNSPEC,
			    .context = &g->op };
	ssize_t r;

	memset(&g->op, 0, sizeof(g->op));
	g->op.magic = OP_MAGIC;
	switch (i) {
	case BG_B_TRECV:
		r = fi_trecv(b, g->buf, BG_LEN, NULL, FI_ADDR_UNSPEC, BG_TAG, 0xffff, &g->op);
		break;
	case BG_B_TRECV_SHORT:
		r = fi_trecv(b, g->buf, 64, NULL, FI_ADDR_UNSPEC, BG_TAG, 0xffff, &g->op);
		break;
	case BG_B_RECV:
		r = fi_recv(b, g->buf, BG_LEN, NULL, FI_ADDR_UNSPEC, &g->op);
		break;
	case BG_B_MULTI:
		g->op.multi = true;
		r = fi_recvmsg(b, &m, FI_MULTI_RECV);
		break;
	case BG_B_RTS:
		r = fi_tsend(b, g->buf, 2 * cour_params.eager_max, NULL, w.fa_a, BG_TAG | 1,
			     &g->op);
		break;
	case BG_B_DC: {
		struct iovec v = { g->buf, 1000 };
		struct fi_msg_tagged tm = { .msg_iov = &v, .iov_count = 1, .addr = w.fa_a,
					    .tag = BG_TAG | 2, .context = &g->op };
		r = fi_tsendmsg(b, &tm, FI_COMPLETION | FI_DELIVERY_COMPLETE);
		break;
	}
	case BG_B_READ:
		r = fi_read(b, g->buf, 256, NULL, w.fa_a, w.raddr_a, w.key_a, &g->op);
		break;
	case BG_B_WRITE:
		r = fi_write(b, g->buf, 256, NULL, w.fa_a, w.raddr_a + 512, w.key_a, &g->op);
		break;
	case BG_B_ATOMIC:
		r = fi_fetch_atomic(b, g->buf, 1, NULL, g->buf + 64, NULL, w.fa_a,
				    w.raddr_a + 1024, w.key_a, FI_UINT64, FI_SUM, &g->op);
		break;
	default:
		r = fi_trecv(a, g->buf, BG_LEN, NULL, w.fa_b, BG_TAG, 0xffff, &g->op);
		break;
	}
	if (r && r != -FI_EAGAIN)
		die("posting background operation %d: %zd", i, r);
	g->posted = !r;
}

/* Post again what completed (or could not be posted); each operation only every BG_EVERY
 * inputs, so that the fuzzer's packets, not background traffic, take most of the time. */
#define BG_EVERY 8

static void bg_refresh(void)
{
	for (int i = 0; i < BG_N; i++) {
		if ((w.bg[i].posted && !w.bg[i].op.done) ||
		    (w.up && (w.inputs + (uint64_t)i) % BG_EVERY))
			continue;
		if (w.bg[i].posted)
			w.bg_done++;
		bg_post(i);
	}
}

/* ---- liveness ---- */

static void fill(char *p, size_t len, uint64_t key)
{
	uint64_t x = key * 0x9e3779b97f4a7c15ULL + 1;

	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (char)(x >> 24);
	}
}

static bool intact(const char *p, size_t len, uint64_t key)
{
	char *want = malloc(len);
	bool ok;

	if (!want)
		die("malloc");
	fill(want, len, key);
	ok = !memcmp(p, want, len);
	free(want);
	return ok;
}

static void dump_peer(const char *who, struct cour_peer *p)
{
	if (!p) {
		fprintf(stderr, "  %s: no peer\n", who);
		return;
	}
	fprintf(stderr, "  %s: sess %08x/%08x tx_una %u tx_next %u rx_next %u held %u credit "
		"%u/%u granted %u lists %c%c%c%c rx_cur %p(id %u %" PRIu64 "/%" PRIu64 ") rdv %u "
		"rto %" PRIu64 "\n", who, p->local_session, p->remote_session, p->tx_una,
		p->tx_next, p->rx_next, p->rx_held, p->tx_credit_used, p->tx_credit_limit,
		p->credits_granted, p->ctrlq ? 'c' : '-', p->txq ? 'q' : '-',
		p->tx_inflight ? 'i' : '-', p->tx_wait ? 'w' : '-', (void *)p->rx_cur,
		p->rx_cur ? p->rx_cur->msg_id : 0, p->rx_cur ? p->rx_cur->received : 0,
		p->rx_cur ? p->rx_cur->total_len : 0, p->rx_rdv_pending, p->rto_us);
}

static void dump_state(const char *why, const struct live *l)
{
	static const char *names[8] = { "rx B eager", "rx B rdv", "rx A eager", "rx A rdv",
					"tx A eager", "tx A rdv", "tx B eager", "tx B rdv" };
	struct cour_ep *a = ep_a(), *b = ep_b();

	fprintf(stderr, "fuzz_rx: %s after %" PRIu64 " inputs\n", why, w.inputs);
	for (int i = 0; l && i < 8; i++)
		fprintf(stderr, "  %-10s done %d err %d\n", names[i], l->op[i].done, l->op[i].err);
	dump_peer("B's view of A", peer_of(b, &a->pep.wire.addr));
	dump_peer("A's view of B", peer_of(a, &b->pep.wire.addr));
	fprintf(stderr, "  B: unexpected %s/%s rdv %u peers %u; stats bad_hdr %" PRIu64 " stale %"
		PRIu64 " window %" PRIu64 " dup %" PRIu64 " resets %" PRIu64 " unreachable %" PRIu64
		"\n", b->pep.rxq->umsg ? "msg" : "-", b->pep.rxq->utag ? "tag" : "-",
		HASH_COUNT(b->pep.rdv_by_id), HASH_COUNT(b->pep.peers), b->pep.stats.drop_bad_hdr,
		b->pep.stats.drop_stale_session, b->pep.stats.drop_window, b->pep.stats.dup_rcvd,
		b->pep.stats.peers_reset, b->pep.stats.peers_unreachable);
}

static ssize_t post_retry(struct fid_ep *ep, int kind, struct live *l, int i, fi_addr_t peer,
			  uint64_t deadline)
{
	ssize_t r;

	for (;;) {
		if (kind == 0) {
			r = fi_trecv(ep, l->buf[i], l->len[i], NULL, peer, l->op[i].want_tag, 0,
				     &l->op[i]);
		} else {
			struct iovec iov = { l->buf[i], l->len[i] };
			struct fi_msg_tagged m = {
				.msg_iov = &iov, .iov_count = 1, .addr = peer,
				.tag = l->op[i].want_tag, .context = &l->op[i], .data = l->key,
			};
			/* the eager one asks for delivery completion, so DONE runs too */
			uint64_t flags = FI_COMPLETION | FI_REMOTE_CQ_DATA |
					 (l->len[i] <= cour_params.eager_max ?
					  FI_DELIVERY_COMPLETE : 0);
			r = fi_tsendmsg(ep, &m, flags);
		}
		if (r != -FI_EAGAIN || cour_now_us() >= deadline)
			return r;
		pump(1);
	}
}

static void live_free(struct live *l)
{
	for (int i = 0; i < 8; i++)
		free(l->buf[i]);
	free(l);
}

/*
 * One exchange. Returns 1 when everything arrived intact, 0 when some operation failed (a reset
 * session: acceptable, retry), -1 when a send, or a receive whose send succeeded, stayed silent
 * for LIVE_STALL_MS.
 */
static int live_attempt(void)
{
	struct live *l = calloc(1, sizeof(*l));
	uint64_t end;
	int i, ret;
	bool all;

	if (!l)
		die("calloc");
	l->key = ++w.live_key;
	for (i = 0; i < 8; i++) {
		bool rdv = i & 1;
		l->op[i].magic = OP_MAGIC;
		l->op[i].want_tag = LIVE_TAG | l->key << 2 | (uint64_t)(i >> 1 & 1) << 1 | rdv;
		l->len[i] = rdv ? LIVE_LEN_RDV : LIVE_LEN_EAGER;
		l->buf[i] = malloc(l->len[i]);
		if (!l->buf[i])
			die("malloc");
		if (i >= 4)
			fill(l->buf[i], l->len[i], l->key * 8 + (uint64_t)i - 4);
	}
	/* receive i matches send i + 4: B receives A's (tags ..0x, ..1x are A->B), A receives B's */
	for (i = 0; i < 4; i++)
		l->op[i + 4].want_tag = l->op[i].want_tag;
	end = cour_now_us() + LIVE_STALL_MS * 1000ull;
	for (i = 0; i < 8; i++) {
		struct fid_ep *ep = (i < 2 || i >= 6) ? w.ep_b : w.ep_a;
		fi_addr_t peer = (i < 2 || i >= 6) ? w.fa_a : w.fa_b;
		ssize_t r = post_retry(ep, i >= 4, l, i, peer, end);
		if (r)
			die("posting liveness operation %d: %zd", i, r);
	}
	/* Every send has an outcome, and so has every receive whose send succeeded. A receive
	 * whose send failed (its session was reset) may wait for ever, as posted receives do. */
	do {
		pump(1);
		all = true;
		for (i = 0; i < 4; i++)
			all = all && l->op[i + 4].done &&
			      (l->op[i].done || l->op[i + 4].err);
	} while (!all && cour_now_us() < end);

	ret = all ? 1 : -1;
	for (i = 0; i < 8; i++) {
		if (!l->op[i].done) {
			if (ret > 0)
				ret = 0;
			continue;
		}
		if (l->op[i].err) {
			if (ret > 0)
				ret = 0;
			continue;
		}
		if (i < 4 && (l->op[i].len != l->len[i] || l->op[i].tag != l->op[i].want_tag ||
			      l->op[i].data != l->key ||
			      !intact(l->buf[i], l->len[i], l->key * 8 + (uint64_t)i))) {
			/* the harness forges packets with the live sessions, a valid sequence
			 * number and a correct crc: indistinguishable from the sender's, so they
			 * can replace its data (documented: the crc is no authenticator) */
			w.forged++;
			if (!w.stall_recover || w.forged <= 3)
				dump_state("liveness data corrupt", l);
			if (!w.stall_recover)
				die("liveness message %d arrived corrupt: len %zu data %#" PRIx64, i,
				    l->op[i].len, l->op[i].data);
			if (ret > 0)
				ret = 0;
		}
	}
	if (ret < 0) {
		w.stalls++;
		if (!w.stall_recover || w.stalls <= 3)
			dump_state("STALL", l);
		if (!w.stall_recover)
			die("stall: a send, or the receive of a delivered message, neither completed nor "
			    "failed in %d ms "
			    "(set FUZZ_STALL=recover to continue past it)", LIVE_STALL_MS);
	}
	if (ret <= 0) {
		/* receives still posted go; sends cannot be cancelled: keep everything alive
		 * until the end, when the exchange may still complete */
		for (i = 0; i < 4; i++)
			if (!l->op[i].done)
				fi_cancel(&(i < 2 ? w.ep_b : w.ep_a)->fid, &l->op[i]);
		pump(2);
		w.abandoned = realloc(w.abandoned, (w.nabandoned + 1) * sizeof(*w.abandoned));
		if (!w.abandoned)
			die("realloc");
		w.abandoned[w.nabandoned++] = l;
		return ret;
	}
	live_free(l);
	return 1;
}

/* Abandoned exchanges whose every operation has since finished are freed. */
static void sweep_abandoned(void)
{
	size_t keep = 0;

	for (size_t i = 0; i < w.nabandoned; i++) {
		struct live *l = w.abandoned[i];
		bool all = true;

		for (int k = 0; k < 8; k++)
			all = all && l->op[k].done;
		if (all)
			live_free(l);
		else
			w.abandoned[keep++] = l;
	}
	w.nabandoned = keep;
}

/* The way out the engine offers when a pair is stuck: one side restarts. A's new session, sent
 * with dst_session 0, makes B drop everything it holds from the old one. */
static void restart_a(void)
{
	struct cour_ep *a = ep_a();
	struct cour_peer *p = peer_of(a, &ep_b()->pep.wire.addr);

	w.restarts++;
	cour_lock_acquire(&a->domain->lock);
	if (p)
		cour_peer_reset(p, COUR_E_PEER_RESET);
	cour_lock_release(&a->domain->lock);
	pump(2);
}

/*
 * A real exchange must succeed within LIVE_TOTAL_MS. Failed attempts (sessions reset under
 * them) are retried. With FUZZ_STALL=recover, a stall or LIVE_FAILS_MAX failures in a row
 * (a pair that keeps resetting) are counted and broken by restarting A, so that fuzzing can go
 * on past a known problem; without it they end the run.
 */
static void liveness(const char *why)
{
	uint64_t end = cour_now_us() + LIVE_TOTAL_MS * 1000ull;
	int tries = 0, fails = 0, r;

	w.live_checks++;
	sweep_abandoned();
	do {
		r = live_attempt();
		tries++;
		if (r > 0)
			break;
		w.live_retries++;
		if (w.stall_recover && (r < 0 || ++fails == LIVE_FAILS_MAX)) {
			if (r == 0) {
				w.livelocks++;
				if (w.livelocks <= 3)
					dump_state("LIVELOCK: every exchange fails", NULL);
			}
			fails = 0;
			restart_a();
		}
	} while (cour_now_us() < end);
	if (r <= 0) {
		dump_state("no liveness", NULL);
		die("%s liveness check: no intact exchange in %d ms (%d attempts)", why,
		    LIVE_TOTAL_MS, tries);
	}
	if (w.verbose)
		fprintf(stderr, "fuzz_rx: %s liveness ok after %d attempt(s), %" PRIu64 " inputs\n",
			why, tries, w.inputs);
}

/* ---- building packets ---- */

static void tag_guard(uint8_t *pkt, size_t len)
{
	struct cour_pkt_hdr *h = (struct cour_pkt_hdr *)pkt;

	if (len >= COUR_PKT_HDR_LEN && (h->msg.tag & LIVE_TAG_MASK) == LIVE_TAG)
		h->msg.tag ^= 1ull << 40;
}

/*
 * An overlay packet into out (room for COUR_MAX_PKT bytes); returns its length and the source
 * to claim in *alt (-1: A). NCTL control bytes:
 *   ctl[0]  bits 0-3 the type (any valid one); 4 TAGGED, 5 CQ_DATA, 6 DC, 7 PROBE
 *   ctl[1]  bits 6-7 seq: rx_next / ahead 1..64 / behind 1..64 / past the window; 0-5 amount
 *   ctl[2]  0 dst_session 0, 1 wrong dst_session, 2 new src_session (a restart), 3 src 0,
 *           4 total_len = payload length, 5 keep the body's crc, 6 truncate to the body,
 *           7 from another address (ctl[3] bits 0-1)
 *   ctl[3]  2 continue B's reassembly in progress, 3 target a rendezvous B waits on, 4 answer
 *           one of B's waiting operations (CTS, DONE, READ_RESP, RMA_RESP); bits 5-7 pick which
 *   ctl[4]  0 PCSUM; 1 aim at B's registered region: key, and raddr at 64 * bits 2-7 into it
 * body: bytes 0-31 XOR the base header, the next bytes up to COUR_PKT_HDR_LEN replace the
 * operation header, the rest is payload.
 */
#define NCTL 5

static size_t build_pkt(uint8_t *out, const uint8_t *ctl, const uint8_t *body, size_t blen,
			int *alt)
{
	struct cour_ep *a = ep_a(), *b = ep_b();
	struct cour_pkt_hdr *h = (struct cour_pkt_hdr *)out;
	struct cour_peer *ap = peer_of(a, &b->pep.wire.addr), *bp;
	uint32_t w_ = (uint32_t)cour_params.window, seq, amount = ctl[1] & 63;
	size_t hlen, plen, len;
	struct cour_addr from;

	*alt = -1;
	if (ctl[2] & 0x80) {
		struct sockaddr_storage ss;
		socklen_t sl;
		*alt = ctl[3] & 3;
		alt_addr((unsigned)*alt, &ss, &sl);
		cour_addr_from_sockaddr(&from, &ss, sl);
		from.is_v4 = b->pep.wire.addr.is_v4;
	} else {
		from = a->pep.wire.addr;
	}
	bp = peer_of(b, &from);

	memset(out, 0, COUR_PKT_HDR_LEN);
	h->base.version = COUR_WIRE_VERSION;
	h->base.type = (uint8_t)((ctl[0] & 15) % (COUR_PKT_TYPE_MAX - 1) + 1);
	h->base.flags = (ctl[0] & 0x10 ? COUR_F_TAGGED : 0) | (ctl[0] & 0x20 ? COUR_F_CQ_DATA : 0) |
			(ctl[0] & 0x40 ? COUR_F_DC : 0) | (ctl[0] & 0x80 ? COUR_F_PROBE : 0) |
			(ctl[4] & 0x01 ? COUR_F_PCSUM : 0) |
			(b->pep.wire.mac ? COUR_F_MAC : 0);
	if (*alt < 0 && ap) {
		/* what A itself would put in a header right now */
		h->base.src_session = ap->local_session;
		h->base.dst_session = ap->remote_session;
		h->base.ack = ap->rx_next;
		h->base.credits = ap->credits_granted;
	} else {
		h->base.src_session = bp && bp->remote_session ? bp->remote_session :
				      0x5eed0000u + (uint32_t)(*alt + 1);
		h->base.dst_session = bp ? bp->local_session : 0;
		h->base.credits = (uint32_t)cour_params.credits;
	}
	seq = bp ? bp->rx_next : ap ? ap->tx_next : 0;
	switch (ctl[1] >> 6) {
	case 0: break;
	case 1: seq += 1 + amount; break;
	case 2: seq -= 1 + amount; break;
	default: seq += w_ + amount * 997u; break;
	}
	h->base.seq = seq;
	if (ctl[2] & 0x01)
		h->base.dst_session = 0;
	if (ctl[2] & 0x02)
		h->base.dst_session ^= 1u << (ctl[3] & 31);
	if (ctl[2] & 0x04)
		h->base.src_session ^= 0x80000000u;
	if (ctl[2] & 0x08)
		h->base.src_session = 0;

	for (size_t i = 0; i < COUR_BASE_HDR_LEN && i < blen; i++)
		out[i] ^= body[i];
	if (blen > COUR_BASE_HDR_LEN)
		memcpy(out + COUR_BASE_HDR_LEN, body + COUR_BASE_HDR_LEN,
		       COUR_MIN(blen, COUR_PKT_HDR_LEN) - COUR_BASE_HDR_LEN);
	hlen = (h->base.type == COUR_PKT_ACK || h->base.type == COUR_PKT_RESET) ?
	       COUR_BASE_HDR_LEN : COUR_PKT_HDR_LEN;
	plen = blen > COUR_PKT_HDR_LEN ? blen - COUR_PKT_HDR_LEN : 0;
	if (plen > COUR_MAX_PKT - COUR_PKT_HDR_LEN)
		plen = COUR_MAX_PKT - COUR_PKT_HDR_LEN;
	memcpy(out + COUR_PKT_HDR_LEN, body + COUR_PKT_HDR_LEN, plen);
	len = COUR_PKT_HDR_LEN + plen;
	if (hlen == COUR_BASE_HDR_LEN && !plen)
		len = COUR_BASE_HDR_LEN;

	/* fix-ups from B's live state, so the handlers' lookups can succeed */
	if (ctl[2] & 0x10)
		h->msg.total_len = plen;
	if ((ctl[3] & 0x04) && bp && bp->rx_cur) {
		h->msg.msg_id = bp->rx_cur->msg_id;
		h->msg.offset = bp->rx_cur->received;
		h->msg.total_len = bp->rx_cur->total_len;
	}
	if ((ctl[3] & 0x08) && b->pep.rdv_by_id) {
		struct cour_rxmsg *m = b->pep.rdv_by_id, *tmp;
		unsigned k = ctl[3] >> 5;
		HASH_ITER(hh, b->pep.rdv_by_id, m, tmp)
			if (!k--)
				break;
		if (!m)
			m = b->pep.rdv_by_id;
		h->msg.rx_id = m->rx_id;
		h->msg.offset = m->received;
	}
	if ((ctl[3] & 0x10) && bp) {
		struct cour_txe *t = bp->tx_wait ? bp->tx_wait : bp->tx_inflight, *x;
		unsigned k = ctl[3] >> 5;
		DL_FOREACH(bp->tx_wait, x)
			if (!k--)
				t = x;
		if (t) {
			h->msg.msg_id = t->msg_id;
			h->msg.total_len = COUR_MIN(h->msg.total_len, t->msg_len);
			if (h->base.type == COUR_PKT_READ_RESP) {
				h->msg.total_len = t->msg_len;
				h->msg.offset = t->received;
			}
		}
	}
	if ((ctl[4] & 0x02) && w.mr_b) {
		h->msg.tag = w.key_b;
		h->msg.raddr = w.raddr_b + (uint64_t)(ctl[4] >> 2) * 64;
	}
	if (ctl[2] & 0x40)
		len = COUR_MIN(len, blen);
	tag_guard(out, len);
	if (!(ctl[2] & 0x20) && len >= COUR_BASE_HDR_LEN) {
		bool all = h->base.flags & COUR_F_PCSUM;
		h->base.crc = 0;
		h->base.crc = cour_crc32c(0, out, all ? len : COUR_MIN(len, hlen));
	}
	return len;
}

/* ---- delivering ---- */

/* One packet into B as the UDP and loop wires do it: a buffer of B's receive pool, the domain
 * lock held, and whatever buffer cour_ep_rx_packet returns is the one we own afterwards. */
static void deliver(int alt, const uint8_t *pkt, size_t len)
{
	struct cour_ep *a = ep_a(), *b = ep_b();
	struct sockaddr_storage ss;
	socklen_t sl;
	void *buf, *back;

	if (len > b->pep.rxbuf_size)
		return;
	if (alt < 0) {
		ss = a->pep.wire.bound_sa;
		sl = a->pep.wire.bound_len;
	} else {
		alt_addr((unsigned)alt, &ss, &sl);
	}
	cour_lock_acquire(&b->domain->lock);
	buf = cour_pool_get(&b->pep.rxbuf_pool);
	if (!buf)
		die("B's receive pool is exhausted (%zu in use)", b->pep.rxbuf_pool.in_use);
	memcpy(buf, pkt, len);
	tag_guard(buf, len);
	b->pep.stats.rx_pkts++;
	back = cour_ep_rx_packet(&b->pep, buf, len, &ss, sl);
	if (!back)
		die("cour_ep_rx_packet returned no buffer");
	cour_pool_put(&b->pep.rxbuf_pool, back);
	cour_lock_release(&b->domain->lock);
}

static void loop_raw(const uint8_t *data, size_t len, bool sign)
{
	struct cour_ep *a = ep_a(), *b = ep_b();
	uint8_t *copy = malloc(len + COUR_MAC_LEN);

	if (!copy)
		die("malloc");
	memcpy(copy, data, len);
	tag_guard(copy, len);
	cour_lock_acquire(&a->domain->lock);
	/* (send_raw sends as is: signed here, as a holder of A's key would) */
	if (sign && a->pep.wire.mac) {
		cour_wire_sign_buf(&a->pep.wire, &b->pep.wire.bound_sa, b->pep.wire.bound_len,
				   copy, len);
		len += COUR_MAC_LEN;
	}
	cour_loop_wire.send_raw(&a->pep.wire, &b->pep.wire.bound_sa, b->pep.wire.bound_len,
				(const char *)copy, len);
	cour_lock_release(&a->domain->lock);
	free(copy);
}

/* The next overlay record [len16][ctl x NCTL][body] of *d (*n bytes) built into pkt, its
 * length in *len: false when no record is left; *d and *n move past it. */
static bool next_record(const uint8_t **d, size_t *n, uint8_t *pkt, size_t *len, int *alt)
{
	const uint8_t *p = *d, *ctl = p + 2;
	size_t blen;

	if (*n < 2 + NCTL)
		return false;
	blen = COUR_MIN((size_t)(p[0] | p[1] << 8), *n - 2 - NCTL);
	*len = build_pkt(pkt, ctl, p + 2 + NCTL, blen, alt);
	*d = p + 2 + NCTL + blen;
	*n -= 2 + NCTL + blen;
	return true;
}

static void multi(const uint8_t *d, size_t n)
{
	static uint8_t pkt[COUR_MAX_PKT];
	size_t len;
	int alt;

	for (int r = 0; r < MULTI_MAX && next_record(&d, &n, pkt, &len, &alt); r++) {
		deliver(alt, pkt, len);
		pump(1);
	}
}

/* Overlay records (as multi) packed into one datagram and sent through the loop wire; the
 * spoil word, when not 0, replaces the first packet's length in the table. */
static void packed(const uint8_t *d, size_t n, bool sign)
{
	static uint8_t pack[COUR_WIRE_PACK_BYTES], pkt[COUR_MAX_PKT];
	uint16_t lens[COUR_WIRE_PACK_CNT], count = 0, spoil;
	size_t off = COUR_WIRE_PACK_HDR;
	int alt;

	if (n < 2)
		return;
	spoil = (uint16_t)(d[0] | d[1] << 8);
	d += 2;
	n -= 2;
	memset(pack, 0, COUR_WIRE_PACK_HDR);
	pack[0] = COUR_WIRE_PACK_MARK;
	size_t len;

	while (count < COUR_WIRE_PACK_CNT && next_record(&d, &n, pkt, &len, &alt)) {
		tag_guard(pkt, len);
		if (off + cour_wire_pad8(len) + 2 * (count + 1u) > sizeof(pack))
			break;
		memcpy(pack + off, pkt, len);
		memset(pack + off + len, 0, cour_wire_pad8(len) - len);
		off += cour_wire_pad8(len);
		lens[count++] = (uint16_t)len;
	}
	if (!count)
		return;
	if (spoil)
		lens[0] = spoil;
	memcpy(pack + 2, &count, sizeof(count));
	memcpy(pack + off, lens, 2 * (size_t)count);
	loop_raw(pack, off + 2 * (size_t)count, sign);
}

/* ---- memory ---- */

static void mr_open(struct fid_mr **mr, struct fid_ep *ep, char *mem, uint64_t *key,
		    uint64_t *raddr, uint64_t want_key);

static void recycle_b(const char *why)
{
	w.recycles++;
	if (w.verbose)
		fprintf(stderr, "fuzz_rx: recycling B (%s) after %" PRIu64 " inputs\n", why,
			w.inputs);
	CHECK(fi_close(&w.ep_b->fid));
	/* B's sends complete as cancelled; its receives vanish without a word */
	pump(1);
	for (int i = BG_B_TRECV; i <= BG_B_ATOMIC; i++)
		w.bg[i].posted = false;
	ep_open(&w.ep_b, w.cq_b, w.name_b, w.namelen_b);
	if (w.info->domain_attr->mr_mode & FI_MR_ENDPOINT) {
		CHECK(fi_close(&w.mr_b->fid));
		mr_open(&w.mr_b, w.ep_b, w.mem_b, &w.key_b, &w.raddr_b, 0xb);
	}
	pump(2);
	bg_refresh();
}

/* What B keeps because of packets it received: bounded, or B is recycled (and in strict mode
 * anything beyond the sender's credits aborts: that is what credits are for). */
static void check_memory(void)
{
	struct cour_ep *b = ep_b();
	struct cour_rxmsg *m;
	struct cour_peer *p, *tmp;
	size_t n = 0, worst = 0;
	uint64_t bytes = 0;

	HASH_ITER(hh, b->pep.peers, p, tmp) {
		size_t k = 0;
		for (int t = 0; t < 2; t++)
			DL_FOREACH(t ? b->pep.rxq->utag : b->pep.rxq->umsg, m)
				if (m->peer == p)
					k++;
		worst = COUR_MAX(worst, k);
	}
	for (int t = 0; t < 2; t++) {
		DL_FOREACH(t ? b->pep.rxq->utag : b->pep.rxq->umsg, m) {
			n++;
			if (!m->rts)
				bytes += m->total_len;
		}
	}
	w.max_unexp = COUR_MAX(w.max_unexp, n);
	w.max_unexp_peer = COUR_MAX(w.max_unexp_peer, worst);
	w.max_unexp_bytes = COUR_MAX(w.max_unexp_bytes, bytes);
	w.max_rdv = COUR_MAX(w.max_rdv, (size_t)HASH_COUNT(b->pep.rdv_by_id));
	w.max_peers = COUR_MAX(w.max_peers, (size_t)HASH_COUNT(b->pep.peers));
	if (w.strict_mem && worst > cour_params.credits) {
		dump_state("MEMORY", NULL);
		die("B holds %zu unexpected messages from one peer, which has %zu credits "
		    "(%" PRIu64 " bytes announced)", worst, cour_params.credits, bytes);
	}
	if (HASH_COUNT(b->pep.peers) > ALT_PORTS + 1)
		die("B has %u peers from %d addresses", HASH_COUNT(b->pep.peers), ALT_PORTS + 1);
	if (n > JUNK_MSGS_MAX || bytes > JUNK_BYTES_MAX || HASH_COUNT(b->pep.rdv_by_id) > JUNK_RDV_MAX)
		recycle_b("junk bound");
}

/* ---- setup, seeds, exit ---- */

/* A region open to remote reads and writes; its key and the address that names its byte 0. */
static void mr_open(struct fid_mr **mr, struct fid_ep *ep, char *mem, uint64_t *key,
		    uint64_t *raddr, uint64_t want_key)
{
	int mode = w.info->domain_attr->mr_mode;

	CHECK(fi_mr_reg(w.domain, mem, MR_LEN, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, want_key, 0,
			mr, NULL));
	if (mode & FI_MR_ENDPOINT) {
		CHECK(fi_mr_bind(*mr, &ep->fid, 0));
		CHECK(fi_mr_enable(*mr));
	}
	*key = fi_mr_key(*mr);
	*raddr = (mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)mem : 0;
}

static void world_open(void)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE };
	static char wire[] = "loop", fault[] = "drop=0,seed=1";
	struct cour_ep *a;

	/* small window and credits, so their edges are within the fuzzer's reach; short
	 * timeouts, so a desynchronised session is given up (and recovers) quickly */
	cour_params.wire = wire;
	cour_params.window = 32;
	cour_params.credits = 8;
	cour_params.eager_max = 4096;
	cour_params.peer_timeout_ms = 250;
	cour_params.rto_max_us = 20000;
	/* B recycled is B dead: its close delivers nothing more (no linger), and progress is
	 * this thread's alone, so an input replays the same (no manual-progress thread) */
	cour_params.linger_ms = 0;
	cour_params.manual_thread = 0;

	if (!hints)
		die("fi_allocinfo");
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_TAGGED | FI_DIRECTED_RECV | FI_SOURCE | FI_MULTI_RECV | FI_RMA |
		      FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
	hints->addr_format = FI_SOCKADDR_IN;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	hints->domain_attr->control_progress = FI_PROGRESS_MANUAL;
	if (getenv("FUZZ_KEY") && atoi(getenv("FUZZ_KEY"))) {
		static const char key[] = "fuzz_rx's secret of a job";

		hints->domain_attr->auth_key = malloc(sizeof(key));
		if (!hints->domain_attr->auth_key)
			die("malloc");
		memcpy(hints->domain_attr->auth_key, key, sizeof(key));
		hints->domain_attr->auth_key_size = sizeof(key);
	}
	CHECK(cour_prov.getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &w.info));
	fi_freeinfo(hints);
	CHECK(cour_prov.fabric(w.info->fabric_attr, &w.fabric, NULL));
	CHECK(fi_domain(w.fabric, w.info, &w.domain, NULL));
	CHECK(fi_av_open(w.domain, &av_attr, &w.av, NULL));
	CHECK(fi_cq_open(w.domain, &cq_attr, &w.cq_a, NULL));
	CHECK(fi_cq_open(w.domain, &cq_attr, &w.cq_b, NULL));
	/* A goes through a fault injector that changes nothing: it hands every finished packet
	 * to send_raw, where the seeds are captured */
	cour_params.fault = fault;
	ep_open(&w.ep_a, w.cq_a, NULL, 0);
	cour_params.fault = NULL;
	ep_open(&w.ep_b, w.cq_b, NULL, 0);
	w.fa_a = av_add(w.ep_a);
	w.fa_b = av_add(w.ep_b);
	w.namelen_b = sizeof(w.name_b);
	CHECK(fi_getname(&w.ep_b->fid, w.name_b, &w.namelen_b));
	mr_open(&w.mr_a, w.ep_a, w.mem_a, &w.key_a, &w.raddr_a, 0xa);
	mr_open(&w.mr_b, w.ep_b, w.mem_b, &w.key_b, &w.raddr_b, 0xb);
	a = ep_a();
	w.cap_wire = *a->pep.wire.base;
	w.cap_wire.send_raw = cap_send_raw;
	a->pep.wire.base = &w.cap_wire;

	w.stall_recover = getenv("FUZZ_STALL") && !strcmp(getenv("FUZZ_STALL"), "recover");
	w.strict_mem = getenv("FUZZ_STRICT_MEM") && atoi(getenv("FUZZ_STRICT_MEM"));
	if (w.strict_mem)
		cour_params.unexp_max = 0;  /* credits alone bound unexpected messages */
	w.verbose = getenv("FUZZ_VERBOSE") && atoi(getenv("FUZZ_VERBOSE"));
	w.live_every = getenv("FUZZ_LIVE_EVERY") ? strtoull(getenv("FUZZ_LIVE_EVERY"), NULL, 0) : 0;
	if (!w.live_every)
		w.live_every = LIVE_EVERY;

	/* real traffic both ways: the session is live, and its packets are the seeds */
	w.capturing = true;
	liveness("setup");
	liveness("setup");
	bg_refresh();           /* A's answers to B's RMA are seeds too */
	pump(8);
	w.capturing = false;
	w.up = true;
}

static void write_seed(const char *dir, int k, const uint8_t *d, size_t len)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/seed-%03d", dir, k);
	f = fopen(path, "wb");
	if (!f || fwrite(d, 1, len, f) != len)
		die("writing %s", path);
	fclose(f);
}

/* Each captured packet as a raw input, and as an overlay input (its message header and payload
 * over a fresh template); its eager fragments also as one multi input. */
static void write_seeds(const char *dir)
{
	uint8_t *s = malloc(COUR_MAX_PKT + 16), *mb = malloc(1 << 16);
	size_t mlen = 1;
	int k = 0;

	if (!s || !mb)
		die("malloc");
	mkdir(dir, 0755);
	mb[0] = 2;
	for (size_t i = 0; i < w.ncap; i++) {
		const struct cour_base_hdr *h = (const void *)w.cap[i];
		size_t len = w.cap_len[i];
		uint8_t *ctl = s + 1, *body = s + 1 + NCTL;

		s[0] = 0;
		memcpy(s + 1, w.cap[i], len);
		write_seed(dir, k++, s, len + 1);
		if (h->type < 1 || h->type >= COUR_PKT_TYPE_MAX)
			continue;
		s[0] = 1;
		memset(ctl, 0, NCTL);
		ctl[0] = (uint8_t)((h->type - 1) | (h->flags & COUR_F_TAGGED ? 0x10 : 0) |
				   (h->flags & COUR_F_CQ_DATA ? 0x20 : 0) |
				   (h->flags & COUR_F_DC ? 0x40 : 0));
		/* RMA packets aim at B's region */
		ctl[4] = h->type >= COUR_PKT_WRITE && h->type <= COUR_PKT_ATOMIC ? 0x02 : 0;
		memset(body, 0, COUR_BASE_HDR_LEN);
		memcpy(body + COUR_BASE_HDR_LEN, w.cap[i] + COUR_BASE_HDR_LEN,
		       len - COUR_BASE_HDR_LEN);
		write_seed(dir, k++, s, 1 + NCTL + len);
		if (h->type == COUR_PKT_EAGER && mlen + 2 + NCTL + len <= (1 << 16)) {
			mb[mlen++] = (uint8_t)len;
			mb[mlen++] = (uint8_t)(len >> 8);
			memcpy(mb + mlen, ctl, NCTL);
			mlen += NCTL;
			memcpy(mb + mlen, body, len);
			mlen += len;
		}
	}
	if (mlen > 1)
		write_seed(dir, k++, mb, mlen);
	fprintf(stderr, "fuzz_rx: wrote %d seeds from %zu captured packets to %s\n", k, w.ncap,
		dir);
	free(s);
	free(mb);
}

static void at_exit(void)
{
	struct cour_ep *b;

	if (!w.up)
		return;
	liveness("exit");
	sweep_abandoned();
	b = ep_b();
	fprintf(stderr, "fuzz_rx: %" PRIu64 " inputs, %" PRIu64 " liveness checks (%" PRIu64
		" failed exchanges retried; %" PRIu64 " forged deliveries; %" PRIu64 " stalls and %"
		PRIu64 " livelocks broken by "
		"%" PRIu64 " restarts of A; %zu exchanges still unfinished), %" PRIu64 " recycles "
		"of B, %" PRIu64 " background operations done, %" PRIu64 " remote CQ data events; "
		"B's drops: "
		"bad_hdr %" PRIu64 " stale %" PRIu64 " window %" PRIu64 " dup %" PRIu64
		" no_buf %" PRIu64 ", peer resets %" PRIu64 "; most unexpected %zu (%zu from one "
		"peer, %" PRIu64 " bytes), rdv %zu, peers %zu\n", w.inputs, w.live_checks,
		w.live_retries, w.forged, w.stalls, w.livelocks, w.restarts, w.nabandoned, w.recycles,
		w.bg_done, w.remote_events, b->pep.stats.drop_bad_hdr,
		b->pep.stats.drop_stale_session, b->pep.stats.drop_window, b->pep.stats.dup_rcvd,
		b->pep.stats.drop_no_buf, b->pep.stats.peers_reset, w.max_unexp, w.max_unexp_peer,
		w.max_unexp_bytes, w.max_rdv, w.max_peers);
	if (b->pep.wire.mac) {
		struct cour_mac_counts m;

		cour_mac_counts(b->pep.wire.mac, &m);
		fprintf(stderr, "fuzz_rx: keyed: B's wire refused %" PRIu64 " unauthenticated and %"
			PRIu64 " replayed datagrams; B's engine %" PRIu64 " whose MAC flag was "
			"wrong\n", m.forged, m.replayed, b->pep.stats.drop_bad_mac);
	}
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *seeds = getenv("FUZZ_WRITE_SEEDS");

	world_open();
	if (seeds) {
		write_seeds(seeds);
		exit(0);
	}
	atexit(at_exit);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t pkt[COUR_MAX_PKT];
	int alt;

	if (!size)
		return 0;
	w.inputs++;
	switch (data[0] & 3) {
	case 0:
		alt = ((data[0] >> 2) & 7) < 5 ? -1 : ((data[0] >> 2) & 7) - 5;
		deliver(alt, data + 1, size - 1);
		break;
	case 1:
		if (size >= 1 + NCTL) {
			size_t len = build_pkt(pkt, data + 1, data + 1 + NCTL, size - 1 - NCTL,
					       &alt);
			deliver(alt, pkt, len);
		}
		break;
	case 2:
		multi(data + 1, size - 1);
		break;
	default:
		if (data[0] & 8)
			packed(data + 1, size - 1, !(data[0] & 4));
		else
			loop_raw(data + 1, size - 1, !(data[0] & 4));
		break;
	}
	pump(2);
	bg_refresh();
	check_memory();
	if (w.inputs % w.live_every == 0)
		liveness("periodic");
	return 0;
}
