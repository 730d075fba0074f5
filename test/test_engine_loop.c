/*
 * Component tests of the whole protocol engine over the loop wire: the provider's real fabric,
 * domain, AV, CQ and endpoint objects, endpoints of this one process exchanging packets through
 * memory (FI_COURIER_WIRE=loop), the fault injector seeded so that its choices replay.
 * Progress is manual: the test thread drives it by reading the CQs, and every wait is bounded in
 * iterations and time. Each test runs in its own process (Criterion's default), so cour_params,
 * which is process-global, is set in the test and restored by the fixture.
 */
#include "fi/cour_ep.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_EPS   8
#define GUARD     64          /* bytes past every receive buffer that must stay untouched */
#define WAIT_MS   10000

/* One posted operation; op_context points here, and the CQ pump fills it in. */
struct op {
	int       done;           /* 0: pending; else its place in its CQ's completion order */
	int       err;            /* fi_cq_err_entry.err, 0 on success */
	int       prov_errno;
	size_t    olen;
	fi_addr_t src;            /* from fi_cq_readfrom */
	struct fi_cq_tagged_entry e;
};

struct tep {
	struct fid_ep *ep;        /* NULL once closed */
	struct fid_cq *cq;        /* transmit and receive completions; outlives a closed ep */
	fi_addr_t      fa;        /* its entry in the shared AV */
	char           name[64];
	size_t         namelen;
	int            ncomp;
};

static struct {
	struct fi_info    *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av     *av;
	struct tep         t[MAX_EPS];
	int                n;
	const char        *key;     /* set before net_open: the domain's auth_key */
} net;

static struct cour_params saved_params;
/* every buffer a test allocates, freed by the fixture even when an assertion ends the test */
static void **allocs;
static size_t nallocs, cap_allocs;

/* ---- data ---- */

static void *talloc(size_t len)
{
	void *p = malloc(len + 1);

	cr_assert_not_null(p);
	if (nallocs == cap_allocs) {
		cap_allocs = cap_allocs ? 2 * cap_allocs : 256;
		allocs = realloc(allocs, cap_allocs * sizeof(*allocs));
		cr_assert_not_null(allocs);
	}
	allocs[nallocs++] = p;
	return p;
}

static uint8_t pattern_byte(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return (uint8_t)(*x >> 24);
}

static uint64_t pattern_seed(uint64_t key)
{
	return key * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL;
}

/* len bytes of the pattern that key names */
static char *tx_buf(size_t len, uint64_t key)
{
	uint8_t *p = talloc(len);
	uint64_t x = pattern_seed(key);

	for (size_t i = 0; i < len; i++)
		p[i] = pattern_byte(&x);
	return (char *)p;
}

/* a receive buffer of len bytes followed by GUARD bytes of 0xee */
static char *rx_buf(size_t len)
{
	char *p = talloc(len + GUARD);

	memset(p, 0xee, len + GUARD);
	return p;
}

static void check_data(const void *buf, size_t len, size_t cap, uint64_t key, const char *what)
{
	uint64_t x = pattern_seed(key);
	const uint8_t *p = buf;

	for (size_t i = 0; i < len; i++) {
		uint8_t want = pattern_byte(&x);
		cr_assert_eq(p[i], want, "%s: byte %zu of %zu is %#x, want %#x", what, i, len,
			     p[i], want);
	}
	for (size_t i = len; i < cap + GUARD; i++)
		cr_assert_eq(p[i], 0xee, "%s: byte %zu, past the %zu received, was written", what,
			     i, len);
}

/* ---- objects ---- */

static void ep_open(int i, const void *name, size_t namelen)
{
	struct tep *t = &net.t[i];
	struct fi_info *info = fi_dupinfo(net.info);
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE };
	int ret;

	cr_assert_not_null(info);
	if (name) {
		free(info->src_addr);
		info->src_addr = malloc(namelen);
		cr_assert_not_null(info->src_addr);
		memcpy(info->src_addr, name, namelen);
		info->src_addrlen = namelen;
	}
	ret = fi_endpoint(net.domain, info, &t->ep, NULL);
	fi_freeinfo(info);
	cr_assert_eq(ret, 0, "fi_endpoint %d: %d", i, ret);
	if (!t->cq)
		cr_assert_eq(fi_cq_open(net.domain, &cq_attr, &t->cq, NULL), 0);
	cr_assert_eq(fi_ep_bind(t->ep, &t->cq->fid, FI_TRANSMIT | FI_RECV), 0);
	cr_assert_eq(fi_ep_bind(t->ep, &net.av->fid, 0), 0);
	cr_assert_eq(fi_enable(t->ep), 0);
	t->namelen = sizeof(t->name);
	cr_assert_eq(fi_getname(&t->ep->fid, t->name, &t->namelen), 0);
	if (name)
		cr_assert(t->namelen == namelen && !memcmp(t->name, name, namelen),
			  "reopened endpoint %d has another name", i);
}

static void ep_close(int i)
{
	cr_assert_eq(fi_close(&net.t[i].ep->fid), 0);
	net.t[i].ep = NULL;
}

static fi_addr_t av_add(const void *name)
{
	fi_addr_t fa = FI_ADDR_NOTAVAIL;

	cr_assert_eq(fi_av_insert(net.av, name, 1, &fa, 0, NULL), 1);
	return fa;
}

/* n endpoints in one manually progressed domain, endpoint i at fi_addr i of a shared AV.
 * fault: an injector spec without seed; endpoint i gets seed * 16 + i. */
static void net_open(int n, const char *fault, unsigned seed)
{
	static char specs[MAX_EPS][128];
	struct fi_info *hints = fi_allocinfo();
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	int ret;

	cr_assert_not_null(hints);
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_TAGGED | FI_DIRECTED_RECV | FI_SOURCE | FI_RMA;
	hints->domain_attr->mr_mode = 0;     /* application keys, offsets */
	hints->addr_format = FI_SOCKADDR_IN;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	hints->domain_attr->control_progress = FI_PROGRESS_MANUAL;
	if (net.key) {
		hints->domain_attr->auth_key = (uint8_t *)strdup(net.key);
		hints->domain_attr->auth_key_size = strlen(net.key);
	}
	ret = cour_prov.getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &net.info);
	fi_freeinfo(hints);
	cr_assert_eq(ret, 0, "getinfo: %d", ret);
	cr_assert_eq(cour_prov.fabric(net.info->fabric_attr, &net.fabric, NULL), 0);
	cr_assert_eq(fi_domain(net.fabric, net.info, &net.domain, NULL), 0);
	cr_assert_eq(fi_av_open(net.domain, &av_attr, &net.av, NULL), 0);
	net.n = n;
	for (int i = 0; i < n; i++) {
		if (fault) {
			snprintf(specs[i], sizeof(specs[i]), "%s,seed=%u", fault, seed * 16 + i);
			cour_params.fault = specs[i];
		}
		ep_open(i, NULL, 0);
	}
	cour_params.fault = NULL;
	for (int i = 0; i < n; i++) {
		net.t[i].fa = av_add(net.t[i].name);
		cr_assert_eq(net.t[i].fa, (fi_addr_t)i);
	}
}

static void net_close(void)
{
	for (int i = 0; i < net.n; i++)
		if (net.t[i].ep)
			ep_close(i);
	for (int i = 0; i < net.n; i++)
		cr_assert_eq(fi_close(&net.t[i].cq->fid), 0);
	cr_assert_eq(fi_close(&net.av->fid), 0);
	cr_assert_eq(fi_close(&net.domain->fid), 0);
	cr_assert_eq(fi_close(&net.fabric->fid), 0);
	fi_freeinfo(net.info);
	memset(&net, 0, sizeof(net));
}

static void setup(void)
{
	saved_params = cour_params;
	cour_params.wire = (char *)"loop";
	cour_params.unexp_max = 0;      /* credits held until received, as these tests count */
	cour_params.manual_thread = 0;  /* manual progress is the test's alone: passes it steps */
	memset(&net, 0, sizeof(net));
}

static void teardown(void)
{
	if (net.domain)
		net_close();
	cour_params = saved_params;
	for (size_t i = 0; i < nallocs; i++)
		free(allocs[i]);
	free(allocs);
	allocs = NULL;
	nallocs = cap_allocs = 0;
}

TestSuite(engine_loop, .init = setup, .fini = teardown, .timeout = 60);

/* FI_PROGRESS_CONTROL_UNIFIED, in control_progress (1.21) or in progress/data_progress (2.x;
 * Open MPI's btl/ofi after 5.0, under FI_THREAD_DOMAIN) is manual progress: no progress
 * thread */
Test(engine_loop, control_unified_progress_is_manual)
{
	for (int field = 0; field < 2; field++) {
		struct fi_info *hints = fi_allocinfo(), *info = NULL;
		struct fid_fabric *fabric;
		struct fid_domain *domain;
		struct cour_domain *dom;

		cr_assert_not_null(hints);
		hints->ep_attr->type = FI_EP_RDM;
		hints->caps = FI_RMA | FI_ATOMIC;
		hints->domain_attr->threading = FI_THREAD_DOMAIN;
		if (field)
			hints->domain_attr->control_progress =
				(enum fi_progress)COUR_PROGRESS_CONTROL_UNIFIED;
		else
			hints->domain_attr->data_progress =
				(enum fi_progress)COUR_PROGRESS_CONTROL_UNIFIED;
		cr_assert_eq(cour_prov.getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info), 0);
		fi_freeinfo(hints);
		cr_assert_eq(cour_prov.fabric(info->fabric_attr, &fabric, NULL), 0);
		cr_assert_eq(fi_domain(fabric, info, &domain, NULL), 0);
		dom = COUR_CONTAINER_OF(domain, struct cour_domain, domain_fid);
		cr_assert_eq(dom->data_progress, FI_PROGRESS_MANUAL, "field %d", field);
		cr_assert(!dom->progress_thread_on, "field %d: a progress thread", field);
		cr_assert_eq(fi_close(&domain->fid), 0);
		cr_assert_eq(fi_close(&fabric->fid), 0);
		fi_freeinfo(info);
	}
}

static struct fi_courier_stats stats_of(int i)
{
	struct fi_courier_ops_ep *ops = NULL;
	struct fi_courier_stats s;

	cr_assert_eq(fi_open_ops(&net.t[i].ep->fid, FI_COURIER_EP_OPS, 0, (void **)&ops, NULL), 0);
	cr_assert_eq(ops->get_stats(net.t[i].ep, &s, sizeof(s)), 0);
	return s;
}

static void print_stats(const char *what, int i)
{
	struct fi_courier_stats s = stats_of(i);

	cr_log_info("%s ep%d: tx_pkts %" PRIu64 " rx_pkts %" PRIu64 " retrans_timeout %" PRIu64
		    " retrans_fast %" PRIu64 " dup %" PRIu64 " ooo %" PRIu64 " bad_hdr %" PRIu64
		    " credit_stalls %" PRIu64 " window_stalls %" PRIu64 " srtt_us %" PRIu64
		    " faults drop/dup/reorder/corrupt %" PRIu64 "/%" PRIu64 "/%" PRIu64 "/%"
		    PRIu64 "\n", what, i, s.tx_pkts, s.rx_pkts, s.retrans_timeout,
		    s.retrans_fast, s.dup_rcvd, s.ooo_rcvd, s.drop_bad_hdr, s.credit_stalls,
		    s.window_stalls, s.rtt_srtt_us, s.fault_drops, s.fault_dups,
		    s.fault_reorders, s.fault_corrupts);
}

/* What every endpoint's engine waits on, for the log of a test that timed out. */
static void dump_engine(void)
{
	for (int i = 0; i < MAX_EPS; i++) {
		struct cour_ep *ep = net.t[i].ep ? cour_ep_of(net.t[i].ep) : NULL;
		struct cour_peer *p, *tmp;

		if (!ep)
			continue;
		print_stats("timed out", i);
		HASH_ITER(hh, ep->pep.peers, p, tmp) {
			struct cour_txpkt *h = p->txwin && p->tx_una != p->tx_next ?
					       &p->txwin[p->tx_una % cour_params.window] : NULL;
			cr_log_warn("ep%d peer :%u tx_una %u tx_next %u rx_next %u held %u credit "
				    "%u/%u lists %c%c%c%c rdv %u srtt %" PRIu64 " rto %" PRIu64
				    " us; head tries %u, sent %" PRIu64 " us ago\n", i,
				    ntohs(p->addr.port), p->tx_una, p->tx_next, p->rx_next,
				    p->rx_held, p->tx_credit_used, p->tx_credit_limit,
				    p->ctrlq ? 'c' : '-', p->txq ? 'q' : '-',
				    p->tx_inflight ? 'i' : '-', p->tx_wait ? 'w' : '-',
				    p->rx_rdv_pending, p->srtt_us, p->rto_us, h ? h->tries : 0,
				    h ? cour_now_us() - h->sent_us : 0);
		}
	}
}

/* ---- progress and completions ---- */

static void record(int i, struct op *op, const struct fi_cq_tagged_entry *e, fi_addr_t src)
{
	cr_assert_not_null(op, "completion without a context on endpoint %d", i);
	cr_assert_eq(op->done, 0, "operation %p completed twice", (void *)op);
	op->done = ++net.t[i].ncomp;
	op->e = *e;
	op->src = src;
}

/* Read every CQ dry; each read progresses the whole domain. */
static void pump(void)
{
	struct fi_cq_tagged_entry e[16];
	fi_addr_t src[16];

	for (int i = 0; i < MAX_EPS; i++) {
		struct fid_cq *cq = net.t[i].cq;
		ssize_t n;

		while (cq && (n = fi_cq_readfrom(cq, e, 16, src)) != -FI_EAGAIN) {
			if (n == -FI_EAVAIL) {
				struct fi_cq_err_entry ee = { 0 };
				struct op *op;
				cr_assert_eq(fi_cq_readerr(cq, &ee, 0), 1);
				op = ee.op_context;
				record(i, op, &(struct fi_cq_tagged_entry){ ee.op_context, ee.flags,
					ee.len, ee.buf, ee.data, ee.tag }, FI_ADDR_NOTAVAIL);
				op->err = ee.err;
				op->prov_errno = ee.prov_errno;
				op->olen = ee.olen;
				continue;
			}
			cr_assert_gt(n, 0, "fi_cq_readfrom on endpoint %d: %zd", i, n);
			for (ssize_t k = 0; k < n; k++)
				record(i, e[k].op_context, &e[k], src[k]);
		}
	}
}

#define WAIT_UNTIL(cond, ms) do {						\
	uint64_t end_ = cour_now_us() + (uint64_t)(ms) * 1000;			\
	long it_ = 0;								\
	while (!(cond)) {							\
		if (++it_ >= 200000000L || cour_now_us() >= end_) {		\
			dump_engine();						\
			cr_assert_fail("timed out after %d ms waiting for %s",	\
				       (int)(ms), #cond);			\
		}								\
		pump();								\
	}									\
} while (0)

/* Post, retrying while the provider says -FI_EAGAIN (bounded like every wait). */
#define POST(call) do {								\
	uint64_t end_ = cour_now_us() + (uint64_t)WAIT_MS * 1000;		\
	ssize_t r_;								\
	while ((r_ = (call)) == -FI_EAGAIN) {					\
		cr_assert(cour_now_us() < end_, "%s: -FI_EAGAIN for 10 s", #call); \
		pump();								\
	}									\
	cr_assert_eq(r_, 0, "%s: %zd (%s)", #call, r_, fi_strerror((int)-r_));	\
} while (0)

#define ELAPSED_MS(t0) ((long)((cour_now_us() - (t0)) / 1000))

static bool all_done(const struct op *ops, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!ops[i].done)
			return false;
	return true;
}

static void pump_for(int ms)
{
	uint64_t end = cour_now_us() + (uint64_t)ms * 1000;

	while (cour_now_us() < end)
		pump();
}

static void expect_ok(const struct op *op, uint64_t flags, const char *what)
{
	cr_assert(op->done, "%s: not completed", what);
	cr_assert_eq(op->err, 0, "%s: error %d (%s), prov_errno %d", what, op->err,
		     fi_strerror(op->err), op->prov_errno);
	cr_assert_eq(op->e.flags, flags, "%s: flags %#" PRIx64 ", want %#" PRIx64, what,
		     op->e.flags, flags);
}

static void expect_err(const struct op *op, int err, int prov_errno, uint64_t flags,
		       const char *what)
{
	cr_assert(op->done, "%s: not completed", what);
	cr_assert_eq(op->err, err, "%s: error %d (%s), want %d (%s)", what, op->err,
		     fi_strerror(op->err), err, fi_strerror(err));
	cr_assert_eq(op->prov_errno, prov_errno, "%s: prov_errno %d, want %d", what,
		     op->prov_errno, prov_errno);
	cr_assert_eq(op->e.flags, flags, "%s: flags %#" PRIx64 ", want %#" PRIx64, what,
		     op->e.flags, flags);
}

/* A received message: length, tag, source and every byte. */
static void expect_msg(const struct op *op, uint64_t flags, size_t len, uint64_t tag, int src,
		       const char *buf, size_t cap, uint64_t key, const char *what)
{
	expect_ok(op, flags, what);
	cr_assert_eq(op->e.len, len, "%s: len %zu, want %zu", what, op->e.len, len);
	if (flags & FI_TAGGED)
		cr_assert_eq(op->e.tag, tag, "%s: tag %#" PRIx64 ", want %#" PRIx64, what,
			     op->e.tag, tag);
	cr_assert_eq(op->src, net.t[src].fa, "%s: source %" PRIu64 ", want %d", what, op->src,
		     src);
	check_data(buf, len, cap, key, what);
}

/* Nothing of endpoint i's is unacknowledged or unsent: it has reached the peers. */
static bool tx_idle(int i)
{
	struct cour_ep *ep = cour_ep_of(net.t[i].ep);
	struct cour_peer *p, *tmp;

	HASH_ITER(hh, ep->pep.peers, p, tmp)
		if (p->tx_una != p->tx_next || p->txq || p->ctrlq)
			return false;
	return true;
}

static void tsendmsg(int i, const void *buf, size_t len, fi_addr_t dest, uint64_t tag,
		     uint64_t flags, struct op *op)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct fi_msg_tagged m = {
		.msg_iov = buf ? &iov : NULL, .iov_count = buf ? 1 : 0, .addr = dest, .tag = tag,
		.context = op,
	};

	POST(fi_tsendmsg(net.t[i].ep, &m, flags));
}

/* fi_trecvmsg from any source, as FI_PEEK, FI_CLAIM and FI_DISCARD need; buf may be NULL */
static ssize_t trecvmsg(int i, void *buf, size_t len, uint64_t tag, uint64_t flags,
			struct op *op)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct fi_msg_tagged m = {
		.msg_iov = buf ? &iov : NULL, .iov_count = buf ? 1 : 0, .addr = FI_ADDR_UNSPEC,
		.tag = tag, .context = op,
	};

	return fi_trecvmsg(net.t[i].ep, &m, flags);
}

/* ---- 1..3: every size, fi_msg and fi_tagged, endpoint 0 to 1, clean or faulty ---- */

static size_t suite_sizes(size_t *sizes, bool big)
{
	const size_t fixed[] = { 0, 1, 7, 1471, 1472, 1473, 4096 };
	size_t em = cour_params.eager_max, n = 0;

	for (size_t i = 0; i < COUR_ARRAY_SIZE(fixed); i++)
		sizes[n++] = fixed[i];
	sizes[n++] = em - 1;
	sizes[n++] = em;
	sizes[n++] = em + 1;
	sizes[n++] = 1 << 20;
	if (big)
		sizes[n++] = 4 << 20;
	return n;
}

#define SUITE_TAG 0x5a5a000000000000ULL

/*
 * Receives first, in order, each sized for its own message; the tagged ones match any tag of
 * the suite through the ignore bits. Receive k gets message k only if messages arrive and match
 * in send order (FI_ORDER_SAS); otherwise a buffer would be too small or hold the wrong bytes.
 */
static void run_suite(const size_t *sizes, size_t nsizes, int ms)
{
	size_t n = 2 * nsizes;
	struct op *tx = talloc(n * sizeof(*tx)), *rx = talloc(n * sizeof(*rx));
	char **sbuf = talloc(n * sizeof(char *)), **rbuf = talloc(n * sizeof(char *));
	struct fid_ep *a = net.t[0].ep, *b = net.t[1].ep;

	memset(tx, 0, n * sizeof(*tx));
	memset(rx, 0, n * sizeof(*rx));
	for (size_t k = 0; k < n; k++) {
		size_t len = sizes[k % nsizes];
		sbuf[k] = tx_buf(len, k);
		rbuf[k] = rx_buf(len);
		if (k < nsizes)
			POST(fi_recv(b, rbuf[k], len, NULL, FI_ADDR_UNSPEC, &rx[k]));
		else
			POST(fi_trecv(b, rbuf[k], len, NULL, net.t[0].fa, SUITE_TAG, 0xffff,
				      &rx[k]));
	}
	for (size_t k = 0; k < n; k++) {
		size_t len = sizes[k % nsizes];
		if (k < nsizes)
			POST(fi_senddata(a, sbuf[k], len, NULL, 0xd0000000u + k, net.t[1].fa,
					 &tx[k]));
		else
			POST(fi_tsenddata(a, sbuf[k], len, NULL, 0xd0000000u + k, net.t[1].fa,
					  SUITE_TAG | k, &tx[k]));
	}
	WAIT_UNTIL(all_done(tx, n) && all_done(rx, n), ms);
	for (size_t k = 0; k < n; k++) {
		bool tagged = k >= nsizes;
		size_t len = sizes[k % nsizes];
		char what[64];

		snprintf(what, sizeof(what), "%s message %zu (%zu bytes)",
			 tagged ? "tagged" : "untagged", k % nsizes, len);
		expect_ok(&tx[k], FI_SEND | (tagged ? FI_TAGGED : FI_MSG), what);
		expect_msg(&rx[k], FI_RECV | (tagged ? FI_TAGGED : FI_MSG) | FI_REMOTE_CQ_DATA,
			   len, SUITE_TAG | k, 0, rbuf[k], len, k, what);
		cr_assert_eq(rx[k].e.data, 0xd0000000u + k, "%s: data %#" PRIx64, what,
			     rx[k].e.data);
	}
}

Test(engine_loop, clean_transfer_all_sizes_in_order)
{
	size_t sizes[16], n = suite_sizes(sizes, true);
	struct fi_courier_stats s0, s1;

	net_open(2, NULL, 0);
	run_suite(sizes, n, WAIT_MS);
	s0 = stats_of(0);
	s1 = stats_of(1);
	cr_assert_eq(s0.tx_msgs, 2 * n);
	cr_assert_eq(s1.rx_msgs, 2 * n);
	/* a perfect wire: nothing reordered, corrupt or unexpected, no repair after a loss, and
	 * a duplicate only where the 1 ms RTO floor (or a tail probe, never sooner) fired on a
	 * busy machine */
	cr_assert_eq(s0.ooo_rcvd + s1.ooo_rcvd + s0.drop_bad_hdr + s1.drop_bad_hdr +
		     s1.unexpected_msgs + s0.retrans_fast + s1.retrans_fast, 0);
	cr_assert_leq(s0.dup_rcvd + s1.dup_rcvd, s0.retrans_timeout + s1.retrans_timeout +
		      s0.retrans_probe + s1.retrans_probe);
}

/* A message of many packets from iovecs scattered in memory, with boundaries inside packets
 * and an iovec shorter than a packet's header: each packet takes its slice from the right
 * iovecs (a run of them is built in one loop, cour_peer_build_run), eager and by rendezvous,
 * between two hosts (as far as the engine knows: no shared memory, no single copy). */
Test(engine_loop, a_message_of_many_packets_from_scattered_iovecs_arrives_whole)
{
	const size_t cut[] = { 3001, 5, 9000, 1 };      /* the rest is the last iovec */
	size_t lens[2] = { 41 * 1000 + 7, cour_params.eager_max + 3333 };
	struct op tx[2] = { 0 }, rx[2] = { 0 };

	cour_params.shm = 0;        /* no single copy: the endpoints share a process */
	cour_params.credits = 4096; /* credit for the first message to go eagerly */
	net_open(2, NULL, 0);
	for (int k = 0; k < 2; k++) {
		size_t len = lens[k], off = 0;
		char *whole = tx_buf(len, 40 + (uint64_t)k), *r = rx_buf(len);
		struct iovec iov[5];

		for (int i = 0; i < 5; i++) {
			size_t l = i < 4 ? cut[i] : len - off;

			iov[i].iov_base = talloc(l + 64);  /* (apart from each other) */
			memcpy(iov[i].iov_base, whole + off, l);
			iov[i].iov_len = l;
			off += l;
		}
		memset(whole, 0, len);                  /* only the iovecs hold the data */
		POST(fi_trecv(net.t[1].ep, r, len, NULL, FI_ADDR_UNSPEC, 50 + k, 0, &rx[k]));
		POST(fi_tsendv(net.t[0].ep, iov, NULL, 5, net.t[1].fa, 50 + k, &tx[k]));
		WAIT_UNTIL(tx[k].done && rx[k].done, WAIT_MS);
		expect_ok(&tx[k], FI_SEND | FI_TAGGED, "a scattered send");
		expect_msg(&rx[k], FI_RECV | FI_TAGGED, len, 50 + k, 0, r, len, 40 + (uint64_t)k,
			   "a scattered message");
	}
}

/* get_stats fills the caller's struct as the caller knows it: an older program's smaller one
 * up to its end and not a byte beyond, a newer one's counters courier lacks with zeros. */
Test(engine_loop, stats_sized_to_the_callers_struct)
{
	struct fi_courier_ops_ep *ops = NULL;
	struct fi_courier_stats full;
	uint64_t buf[sizeof(full) / 8 + 4];
	size_t head = offsetof(struct fi_courier_stats, tx_msgs);

	net_open(2, NULL, 0);
	size_t sizes[2] = { 8, 64 * 1024 };
	run_suite(sizes, 2, WAIT_MS);
	cr_assert_eq(fi_open_ops(&net.t[0].ep->fid, "courier_ep_ops_v1", 0, (void **)&ops, NULL),
		     -FI_ENOSYS, "the unsized v1 must not be handed out");
	cr_assert_eq(fi_open_ops(&net.t[0].ep->fid, FI_COURIER_EP_OPS, 0, (void **)&ops, NULL), 0);
	cr_assert_eq(ops->size, sizeof(*ops));
	full = stats_of(0);
	cr_assert_gt(full.tx_pkts, 0);
	/* older: only the counters before tx_msgs */
	memset(buf, 0xa5, sizeof(buf));
	cr_assert_eq(ops->get_stats(net.t[0].ep, (struct fi_courier_stats *)buf, head), 0);
	cr_assert_eq(((struct fi_courier_stats *)buf)->tx_pkts, full.tx_pkts);
	for (size_t i = head / 8; i < sizeof(buf) / 8; i++)
		cr_assert_eq(buf[i], 0xa5a5a5a5a5a5a5a5ULL, "word %zu written past the caller's size", i);
	/* newer: four counters more, zero */
	memset(buf, 0xa5, sizeof(buf));
	cr_assert_eq(ops->get_stats(net.t[0].ep, (struct fi_courier_stats *)buf, sizeof(buf)), 0);
	cr_assert_eq(((struct fi_courier_stats *)buf)->tx_pkts, full.tx_pkts);
	for (size_t i = sizeof(full) / 8; i < sizeof(buf) / 8; i++)
		cr_assert_eq(buf[i], 0, "counter %zu unknown to courier not zeroed", i);
	/* nothing to fill */
	cr_assert_eq(ops->get_stats(net.t[0].ep, NULL, sizeof(full)), -FI_EINVAL);
	cr_assert_eq(ops->get_stats(net.t[0].ep, &full, 0), -FI_EINVAL);
	cr_assert_eq(ops->get_stats(net.t[0].ep, &full, 12), -FI_EINVAL);
}

/* Payload checksums on, so that every corrupted byte is caught, header or payload. */
Test(engine_loop, faults_five_seeds)
{
	size_t sizes[16], n = suite_sizes(sizes, false);

	cour_params.checksum = 1;
	for (unsigned seed = 1; seed <= 5; seed++) {
		struct fi_courier_stats s0, s1;
		uint64_t t0 = cour_now_us();
		char what[64];

		net_open(2, "drop=5,dup=2,reorder=5,corrupt=2", seed);
		run_suite(sizes, n, WAIT_MS);
		s0 = stats_of(0);
		s1 = stats_of(1);
		snprintf(what, sizeof(what), "seed %u, %ld ms", seed, ELAPSED_MS(t0));
		print_stats(what, 0);
		print_stats(what, 1);
		cr_assert_gt(s0.fault_drops + s1.fault_drops, 0);
		cr_assert_gt(s0.fault_corrupts + s1.fault_corrupts, 0);
		cr_assert_gt(s0.retrans_timeout + s0.retrans_fast, 0, "seed %u: no resend", seed);
		cr_assert_gt(s0.dup_rcvd + s1.dup_rcvd, 0, "seed %u: no duplicate seen", seed);
		cr_assert_gt(s0.ooo_rcvd + s1.ooo_rcvd, 0, "seed %u: nothing reordered", seed);
		cr_assert_gt(s0.drop_bad_hdr + s1.drop_bad_hdr, 0, "seed %u: no corrupt packet "
			     "dropped", seed);
		cr_assert_eq(s1.rx_msgs, 2 * n, "seed %u: %" PRIu64 " messages", seed, s1.rx_msgs);
		net_close();
	}
}

/* With a key, the network's harm is caught by the trailer, and its copies are refused as
 * replays before the protocol sees them: no payload checksum needed, the same deliveries. */
Test(engine_loop, faults_with_key)
{
	size_t sizes[16], n = suite_sizes(sizes, false);

	for (unsigned seed = 1; seed <= 3; seed++) {
		struct fi_courier_stats s0, s1;
		uint64_t t0 = cour_now_us();
		char what[64];

		net.key = "engine_loop's shared secret";
		net_open(2, "drop=5,dup=3,reorder=5,corrupt=3", seed);
		run_suite(sizes, n, WAIT_MS);
		s0 = stats_of(0);
		s1 = stats_of(1);
		snprintf(what, sizeof(what), "keyed, seed %u, %ld ms", seed, ELAPSED_MS(t0));
		print_stats(what, 0);
		print_stats(what, 1);
		cr_assert_gt(s0.fault_corrupts + s1.fault_corrupts, 0);
		cr_assert_geq(s0.drop_bad_mac + s1.drop_bad_mac, s0.fault_corrupts +
			      s1.fault_corrupts, "seed %u: a corrupt datagram passed", seed);
		cr_assert_gt(s0.fault_dups + s1.fault_dups, 0);
		/* every copy is refused: as a replay, or as forged when the original was
		 * corrupted before it was copied */
		uint64_t dups = s0.fault_dups + s1.fault_dups, reps = s0.drop_replay + s1.drop_replay;
		cr_assert(reps <= dups && reps + s0.fault_corrupts + s1.fault_corrupts >= dups,
			  "seed %u: copies refused as replays %" PRIu64 ", made %" PRIu64, seed,
			  reps, dups);
		cr_assert_gt(reps, 0);
		cr_assert_eq(s0.drop_bad_hdr + s1.drop_bad_hdr, 0, "the key's check comes first");
		cr_assert_eq(s1.rx_msgs, 2 * n, "seed %u: %" PRIu64 " messages", seed, s1.rx_msgs);
		net_close();
	}
}

/*
 * With a key, a packet that claims a new session of the peer is taken only when it names a
 * session we offered (docs/protocol.md, Sessions). Here a key holder's packet from A's address
 * with a session A never had (a replay of an earlier incarnation's opening packet, as far as B
 * can tell): once naming no session of B's, once naming B's current one. B must answer with a
 * challenge and drop it; A must drop that challenge, which names a session not its own, and
 * not answer it (an answer would prove B's offer); no session is reset and the traffic after
 * it is delivered.
 */
static void inject_signed(int from, int to, uint32_t src_session, uint32_t dst_session)
{
	struct cour_ep *a = COUR_CONTAINER_OF(net.t[from].ep, struct cour_ep, ep_fid);
	struct cour_ep *b = COUR_CONTAINER_OF(net.t[to].ep, struct cour_ep, ep_fid);
	_Alignas(8) char buf[COUR_PKT_HDR_LEN + 8 + COUR_MAC_LEN];
	struct cour_pkt_hdr *h = (struct cour_pkt_hdr *)buf;

	memset(buf, 0, sizeof(buf));
	h->base.version = COUR_WIRE_VERSION;
	h->base.type = COUR_PKT_EAGER;
	h->base.flags = COUR_F_MAC | COUR_F_TAGGED;
	h->base.src_session = src_session;
	h->base.dst_session = dst_session;
	h->base.credits = 64;
	h->msg.tag = SUITE_TAG;
	h->msg.total_len = 8;
	memcpy(buf + COUR_PKT_HDR_LEN, "INJECTED", 8);
	cour_lock_acquire(&a->domain->lock);
	cour_wire_sign_buf(&a->pep.wire, &b->pep.wire.bound_sa, b->pep.wire.bound_len, buf,
			   COUR_PKT_HDR_LEN + 8);
	a->pep.wire.ops->send_raw(&a->pep.wire, &b->pep.wire.bound_sa, b->pep.wire.bound_len,
				  buf, sizeof(buf));
	cour_lock_release(&a->domain->lock);
}

static uint32_t local_session_for(int i, int peer_i)
{
	struct cour_ep *e = COUR_CONTAINER_OF(net.t[i].ep, struct cour_ep, ep_fid);
	struct cour_ep *p = COUR_CONTAINER_OF(net.t[peer_i].ep, struct cour_ep, ep_fid);
	struct cour_peer *peer;
	uint32_t s;

	cour_lock_acquire(&e->domain->lock);
	peer = cour_peer_by_addr_locked(&e->pep, &p->pep.wire.addr, false);
	cr_assert_not_null(peer);
	s = peer->local_session;
	cour_lock_release(&e->domain->lock);
	return s;
}

Test(engine_loop, keyed_unproven_session_resets_nothing)
{
	size_t sizes[] = { 1, 4096, cour_params.eager_max + 1 };
	struct fi_courier_stats s0, s1;

	net.key = "engine_loop's shared secret";
	net_open(2, NULL, 0);
	run_suite(sizes, COUR_ARRAY_SIZE(sizes), WAIT_MS);
	inject_signed(0, 1, 0x5eed0001u, 0);
	run_suite(sizes, COUR_ARRAY_SIZE(sizes), WAIT_MS);
	inject_signed(0, 1, 0x5eed0002u, local_session_for(1, 0));
	run_suite(sizes, COUR_ARRAY_SIZE(sizes), WAIT_MS);
	s0 = stats_of(0);
	s1 = stats_of(1);
	print_stats("keyed, unproven sessions", 0);
	print_stats("keyed, unproven sessions", 1);
	cr_assert_eq(s0.peers_reset + s1.peers_reset, 0, "a session was reset");
	cr_assert_geq(s1.drop_unproven, 2);
	cr_assert_geq(s1.session_challenges, 2);
	cr_assert_eq(s0.session_challenges, 0, "A answered a challenge for a session not its");
	cr_assert_geq(s0.drop_stale_session, 2, "A took B's challenges");
	cr_assert_eq(s1.rx_msgs, 3 * 2 * COUR_ARRAY_SIZE(sizes), "the injected message was "
		     "delivered, or a genuine one lost");
}

Test(engine_loop, heavy_loss_small_window)
{
	size_t sizes[] = { 0, 1, 1473, 4096, 20000, cour_params.eager_max + 1 };
	struct fi_courier_stats s0;
	uint64_t t0 = cour_now_us();

	cour_params.window = 8;
	cour_params.credits = 4;
	net_open(2, "drop=30", 7);
	run_suite(sizes, COUR_ARRAY_SIZE(sizes), 30000);
	cr_log_info("heavy loss: %ld ms\n", ELAPSED_MS(t0));
	print_stats("heavy loss", 0);
	print_stats("heavy loss", 1);
	s0 = stats_of(0);
	cr_assert_gt(s0.retrans_timeout + s0.retrans_fast, 0);
	cr_assert_gt(s0.credit_stalls, 0, "4 credits for 6 messages at once must stall");
	cr_assert_gt(s0.window_stalls, 0);
}

/* ---- 4. eight endpoints, all to all ---- */

#define A2A_MSGS 50
#define A2A_PER  ((MAX_EPS - 1) * A2A_MSGS)
#define A2A_ANY  4000         /* wildcard receives take the odd, eager-sized messages */

static struct op a2a_tx[MAX_EPS][MAX_EPS][A2A_MSGS], a2a_dir[MAX_EPS][MAX_EPS][A2A_MSGS];
static struct op a2a_any[MAX_EPS][A2A_PER / 2];
static char *a2a_rdir[MAX_EPS][MAX_EPS][A2A_MSGS], *a2a_rany[MAX_EPS][A2A_PER / 2];

/* every tenth message is a rendezvous one, always with an even sequence number */
static size_t a2a_len(int s, int d, int q)
{
	if (q % 10 == 8)
		return cour_params.eager_max + 1 + (size_t)s;
	return (size_t)(s * 131 + d * 7 + q * 97) % A2A_ANY;
}

static uint64_t a2a_key(int s, int d, int q)
{
	return (uint64_t)(s * 100 + d) * 1000 + (uint64_t)q;
}

static uint64_t a2a_tag(int s, int q)
{
	return (uint64_t)s << 32 | (uint64_t)q;
}

static bool a2a_complete(void)
{
	for (int s = 0; s < MAX_EPS; s++)
		for (int d = 0; d < MAX_EPS; d++)
			for (int q = 0; s != d && q < A2A_MSGS; q++)
				if (!a2a_tx[s][d][q].done || (q % 2 == 0 && !a2a_dir[d][s][q].done))
					return false;
	return all_done(&a2a_any[0][0], MAX_EPS * A2A_PER / 2);
}

/* Even sequence numbers go to receives directed at their source with their exact tag; odd ones
 * to wildcard receives for any source that look at tag bit 0 only. */
static void a2a_post_recvs(int d)
{
	int k = 0;

	for (int s = 0; s < MAX_EPS; s++)
		for (int q = 0; s != d && q < A2A_MSGS; q++) {
			if (q % 2) {
				a2a_rany[d][k] = rx_buf(A2A_ANY);
				POST(fi_trecv(net.t[d].ep, a2a_rany[d][k], A2A_ANY, NULL,
					      FI_ADDR_UNSPEC, 1, ~1ULL, &a2a_any[d][k]));
				k++;
				continue;
			}
			a2a_rdir[d][s][q] = rx_buf(a2a_len(s, d, q));
			POST(fi_trecv(net.t[d].ep, a2a_rdir[d][s][q], a2a_len(s, d, q), NULL,
				      net.t[s].fa, a2a_tag(s, q), 0, &a2a_dir[d][s][q]));
		}
}

static void a2a_check(int d)
{
	int last[MAX_EPS];
	char what[64];

	for (int s = 0; s < MAX_EPS; s++)
		for (int q = 0; s != d && q < A2A_MSGS; q++) {
			snprintf(what, sizeof(what), "%d->%d #%d", s, d, q);
			expect_ok(&a2a_tx[s][d][q], FI_SEND | FI_TAGGED, what);
			if (q % 2 == 0)
				expect_msg(&a2a_dir[d][s][q], FI_RECV | FI_TAGGED, a2a_len(s, d, q),
					   a2a_tag(s, q), s, a2a_rdir[d][s][q], a2a_len(s, d, q),
					   a2a_key(s, d, q), what);
		}
	/* wildcard receives were posted in order, so per source the sequence numbers rise */
	for (int s = 0; s < MAX_EPS; s++)
		last[s] = -1;
	for (int k = 0; k < A2A_PER / 2; k++) {
		struct op *o = &a2a_any[d][k];
		int s = (int)(o->e.tag >> 32), q = (int)(uint32_t)o->e.tag;

		snprintf(what, sizeof(what), "wildcard receive %d of endpoint %d", k, d);
		expect_ok(o, FI_RECV | FI_TAGGED, what);
		cr_assert(s >= 0 && s < MAX_EPS && s != d && q % 2 && q < A2A_MSGS,
			  "%s: tag %#" PRIx64, what, o->e.tag);
		cr_assert_gt(q, last[s], "%s: %d->%d #%d after #%d", what, s, d, q, last[s]);
		last[s] = q;
		expect_msg(o, FI_RECV | FI_TAGGED, a2a_len(s, d, q), a2a_tag(s, q), s,
			   a2a_rany[d][k], A2A_ANY, a2a_key(s, d, q), what);
	}
	for (int s = 0; s < MAX_EPS; s++)
		cr_assert(s == d || last[s] == A2A_MSGS - 1, "%d->%d: last odd message %d", s, d,
			  last[s]);
}

Test(engine_loop, all_to_all_eight_endpoints)
{
	net_open(MAX_EPS, NULL, 0);
	for (int d = 0; d < MAX_EPS; d++)
		a2a_post_recvs(d);
	for (int q = 0; q < A2A_MSGS; q++)
		for (int s = 0; s < MAX_EPS; s++)
			for (int d = 0; d < MAX_EPS; d++)
				if (s != d)
					POST(fi_tsend(net.t[s].ep,
						      tx_buf(a2a_len(s, d, q), a2a_key(s, d, q)),
						      a2a_len(s, d, q), NULL, net.t[d].fa,
						      a2a_tag(s, q), &a2a_tx[s][d][q]));
	WAIT_UNTIL(a2a_complete(), 20000);
	for (int d = 0; d < MAX_EPS; d++)
		a2a_check(d);
}

/* ---- 5. matching ---- */

Test(engine_loop, matching_tags_ignore_bits_and_sources)
{
	char *r[5] = { rx_buf(300), rx_buf(300), rx_buf(300), rx_buf(300), rx_buf(300) };
	struct op tx[5] = { 0 }, rx[5] = { 0 };
	struct fid_ep *b;

	net_open(3, NULL, 0);
	b = net.t[1].ep;
	POST(fi_trecv(b, r[0], 300, NULL, FI_ADDR_UNSPEC, 0xab00, 0xff, &rx[0]));
	POST(fi_recv(b, r[2], 300, NULL, FI_ADDR_UNSPEC, &rx[2]));
	POST(fi_trecv(b, r[3], 300, NULL, net.t[2].fa, 0x77, 0, &rx[3]));
	/* 0xac00 differs from 0xab00 outside the ignored bits; neither the untagged receive nor
	 * the one directed at endpoint 2 may take tagged messages from endpoint 0 */
	POST(fi_tsend(net.t[0].ep, tx_buf(200, 2), 200, NULL, net.t[1].fa, 0xac00, &tx[1]));
	POST(fi_tsend(net.t[0].ep, tx_buf(60, 4), 60, NULL, net.t[1].fa, 0x77, &tx[3]));
	POST(fi_tsend(net.t[0].ep, tx_buf(100, 1), 100, NULL, net.t[1].fa, 0xab37, &tx[0]));
	WAIT_UNTIL(tx[0].done && tx[1].done && tx[3].done && rx[0].done, WAIT_MS);
	pump_for(20);
	cr_assert(!rx[2].done && !rx[3].done, "a receive took a message it does not match");
	cr_assert_eq(stats_of(1).unexpected_msgs, 2);
	expect_msg(&rx[0], FI_RECV | FI_TAGGED, 100, 0xab37, 0, r[0], 300, 1, "ignore bits");

	POST(fi_send(net.t[0].ep, tx_buf(50, 3), 50, NULL, net.t[1].fa, &tx[2]));
	POST(fi_tsend(net.t[2].ep, tx_buf(70, 5), 70, NULL, net.t[1].fa, 0x77, &tx[4]));
	POST(fi_trecv(b, r[1], 300, NULL, net.t[0].fa, 0xac00, 0, &rx[1]));
	POST(fi_trecv(b, r[4], 300, NULL, net.t[0].fa, 0x77, 0, &rx[4]));
	WAIT_UNTIL(all_done(tx, 5) && all_done(rx, 5), WAIT_MS);
	expect_msg(&rx[1], FI_RECV | FI_TAGGED, 200, 0xac00, 0, r[1], 300, 2, "unexpected");
	expect_msg(&rx[2], FI_RECV | FI_MSG, 50, 0, 0, r[2], 300, 3, "untagged");
	expect_msg(&rx[3], FI_RECV | FI_TAGGED, 70, 0x77, 2, r[3], 300, 5, "directed at 2");
	expect_msg(&rx[4], FI_RECV | FI_TAGGED, 60, 0x77, 0, r[4], 300, 4, "directed at 0");
	for (int k = 0; k < 5; k++)
		expect_ok(&tx[k], FI_SEND | (k == 2 ? FI_MSG : FI_TAGGED), "send");
}

Test(engine_loop, unexpected_eager_and_rendezvous)
{
	size_t em = cour_params.eager_max, sizes[] = { 0, 100, 3000, em, em + 1, 1 << 20 };
	enum { N = COUR_ARRAY_SIZE(sizes) };
	struct op tx[N] = { 0 }, rx[N] = { 0 };
	char *rbuf[N];

	/* room to buffer them: the eager_max message, more than a fresh peer's credit units,
	 * goes as an RTS that the receiver clears into a buffer of its own (lending twice its
	 * units first); its send completes before its receive as an eager one would */
	cour_params.unexp_max = 4 * em;
	net_open(2, NULL, 0);
	for (int k = 0; k < N; k++)
		POST(fi_tsenddata(net.t[0].ep, tx_buf(sizes[k], 40 + k), sizes[k], NULL,
				  0xda7a + k, net.t[1].fa, 0x100 + k, &tx[k]));
	WAIT_UNTIL(stats_of(1).unexpected_msgs == N && tx_idle(0), WAIT_MS);
	pump_for(50);
	for (int k = 0; k < N; k++)
		cr_assert_eq(tx[k].done != 0, sizes[k] <= em, "send of %zu bytes %s before its "
			     "receive", sizes[k], tx[k].done ? "completed" : "did not complete");
	cr_assert_eq(stats_of(0).credit_rts, 1, "the eager_max message costs more units than a fresh peer has");
	cr_assert_eq(stats_of(1).rts_adopted, 1);
	/* receives in reverse order: matching picks out of the middle of the queue */
	for (int k = N - 1; k >= 0; k--) {
		rbuf[k] = rx_buf(sizes[k]);
		POST(fi_trecv(net.t[1].ep, rbuf[k], sizes[k], NULL, FI_ADDR_UNSPEC, 0x100 + k, 0,
			      &rx[k]));
	}
	WAIT_UNTIL(all_done(tx, N) && all_done(rx, N), WAIT_MS);
	for (int k = 0; k < N; k++) {
		expect_ok(&tx[k], FI_SEND | FI_TAGGED, "unexpected send");
		expect_msg(&rx[k], FI_RECV | FI_TAGGED | FI_REMOTE_CQ_DATA, sizes[k], 0x100 + k, 0,
			   rbuf[k], sizes[k], 40 + k, "unexpected");
		cr_assert_eq(rx[k].e.data, 0xda7au + k);
	}
}

/*
 * Fan-in (issue 19): seven senders each burst 16 messages of 16 KiB at a receiver that has
 * posted nothing. What it buffers is bounded by its own budget, FI_COURIER_UNEXP_MAX, plus
 * FI_COURIER_CREDITS units of 1 KiB per peer, not by what the senders send (1.75 MiB here,
 * all of which 64 message credits a peer let in before); the rest waits as rendezvous
 * requests. Then every message is received, in an order of the receiver's choosing, whole.
 */
Test(engine_loop, fan_in_is_bounded_by_the_receivers_budget)
{
	enum { S = MAX_EPS - 1, M = 16, LEN = 16 << 10 };
	struct op tx[S][M], rx[S][M];
	char *rbuf[S][M];
	size_t bound;
	uint64_t rts = 0;

	memset(tx, 0, sizeof(tx));
	memset(rx, 0, sizeof(rx));
	cour_params.unexp_max = 256 << 10;
	bound = cour_params.unexp_max + S * cour_params.credits * COUR_CREDIT_UNIT;
	net_open(MAX_EPS, NULL, 0);
	for (int k = 0; k < M; k++)
		for (int s = 0; s < S; s++)
			POST(fi_tsend(net.t[s + 1].ep, tx_buf(LEN, 100 * s + k), LEN, NULL,
				      net.t[0].fa, (uint64_t)s << 8 | k, &tx[s][k]));
	pump_for(300);
	cr_assert_leq(stats_of(0).unexp_peak, bound, "the receiver held %" PRIu64 " bytes of "
		      "unexpected messages; its budget and the peers' first grants are %zu",
		      stats_of(0).unexp_peak, bound);
	cr_assert_gt(stats_of(0).unexp_peak, cour_params.unexp_max / 2, "the budget was used");
	for (int s = 0; s < S; s++)
		rts += stats_of(s + 1).credit_rts;
	cr_assert_gt(rts, 0, "senders short of units sent requests");
	cr_assert_gt(stats_of(0).rts_adopted, 0, "requests were cleared into the budget");
	/* the last sender's messages first, each sender's in order */
	for (int s = S - 1; s >= 0; s--)
		for (int k = 0; k < M; k++) {
			rbuf[s][k] = rx_buf(LEN);
			POST(fi_trecv(net.t[0].ep, rbuf[s][k], LEN, NULL, net.t[s + 1].fa,
				      (uint64_t)s << 8 | k, 0, &rx[s][k]));
		}
	WAIT_UNTIL(all_done(&tx[0][0], S * M) && all_done(&rx[0][0], S * M), WAIT_MS);
	for (int s = 0; s < S; s++)
		for (int k = 0; k < M; k++) {
			expect_ok(&tx[s][k], FI_SEND | FI_TAGGED, "fan-in send");
			expect_msg(&rx[s][k], FI_RECV | FI_TAGGED, LEN, (uint64_t)s << 8 | k, s + 1,
				   rbuf[s][k], LEN, 100 * s + k, "fan-in");
		}
	cr_assert_eq(stats_of(0).unexp_bytes, 0);
}

Test(engine_loop, peek_claim_discard)
{
	size_t em = cour_params.eager_max, len[] = { 500, 700, em + 1000, 300, 900 };
	enum { N = COUR_ARRAY_SIZE(len) };
	struct op tx[N] = { 0 }, pk[8] = { 0 }, rx[3] = { 0 };
	char *r1 = rx_buf(700), *r4 = rx_buf(900);

	net_open(2, NULL, 0);
	for (int k = 0; k < N - 1; k++)
		POST(fi_tsend(net.t[0].ep, tx_buf(len[k], 60 + k), len[k], NULL, net.t[1].fa,
			      0x500 + k, &tx[k]));
	WAIT_UNTIL(stats_of(1).unexpected_msgs == N - 1 && tx_idle(0), WAIT_MS);

	cr_assert_eq(trecvmsg(1, NULL, 0, 0x999, FI_PEEK, &pk[0]), 0);
	cr_assert_eq(trecvmsg(1, NULL, 0, 0x500, FI_PEEK, &pk[1]), 0);
	cr_assert_eq(trecvmsg(1, NULL, 0, 0x500, FI_PEEK, &pk[2]), 0);     /* still there */
	cr_assert_eq(trecvmsg(1, NULL, 0, 0x501, FI_PEEK | FI_CLAIM, &rx[0]), 0);
	cr_assert_eq(trecvmsg(1, NULL, 0, 0x501, FI_PEEK, &pk[3]), 0);     /* claimed: hidden */
	cr_assert_eq(trecvmsg(1, NULL, 0, 0x502, FI_PEEK | FI_DISCARD, &pk[4]), 0);
	cr_assert_eq(trecvmsg(1, NULL, 0, 0x502, FI_PEEK, &pk[5]), 0);
	WAIT_UNTIL(all_done(pk, 6) && rx[0].done, WAIT_MS);
	expect_err(&pk[0], FI_ENOMSG, COUR_E_NOMSG, FI_RECV | FI_TAGGED, "peek at nothing");
	for (int k = 1; k <= 2; k++) {
		expect_ok(&pk[k], FI_RECV | FI_TAGGED, "peek");
		cr_assert(pk[k].e.len == 500 && pk[k].e.tag == 0x500 && pk[k].src == net.t[0].fa);
	}
	expect_ok(&rx[0], FI_RECV | FI_TAGGED, "peek and claim");
	cr_assert(rx[0].e.len == 700 && rx[0].e.tag == 0x501);
	expect_err(&pk[3], FI_ENOMSG, COUR_E_NOMSG, FI_RECV | FI_TAGGED, "peek at a claimed one");
	expect_ok(&pk[4], FI_RECV | FI_TAGGED, "peek and discard a rendezvous message");
	cr_assert(pk[4].e.len == em + 1000 && pk[4].e.tag == 0x502);
	expect_err(&pk[5], FI_ENOMSG, COUR_E_NOMSG, FI_RECV | FI_TAGGED, "peek after discard");

	/* the claimed message goes to the receive that names the claiming context */
	rx[0].done = 0;
	cr_assert_eq(trecvmsg(1, r1, 700, 0, FI_CLAIM, &rx[0]), 0);
	cr_assert_eq(trecvmsg(1, NULL, 0, 0x503, FI_PEEK | FI_CLAIM, &rx[1]), 0);
	WAIT_UNTIL(rx[0].done && rx[1].done, WAIT_MS);
	expect_msg(&rx[0], FI_RECV | FI_TAGGED, 700, 0x501, 0, r1, 700, 61, "claimed receive");
	rx[1].done = 0;
	cr_assert_eq(trecvmsg(1, NULL, 0, 0, FI_CLAIM | FI_DISCARD, &rx[1]), 0);
	cr_assert_eq(trecvmsg(1, NULL, 0, 0x503, FI_PEEK, &pk[6]), 0);
	cr_assert_eq(trecvmsg(1, NULL, 0, 0x500, FI_CLAIM, &pk[7]), -FI_EINVAL,
		     "FI_CLAIM without a claiming peek");
	/* the discarded rendezvous send completes; a new message still gets through */
	POST(fi_tsend(net.t[0].ep, tx_buf(len[N - 1], 64), len[N - 1], NULL, net.t[1].fa, 0x504,
		      &tx[N - 1]));
	POST(fi_trecv(net.t[1].ep, r4, 900, NULL, FI_ADDR_UNSPEC, 0x504, 0, &rx[2]));
	WAIT_UNTIL(all_done(tx, N) && rx[1].done && rx[2].done && pk[6].done, WAIT_MS);
	expect_ok(&rx[1], FI_RECV | FI_TAGGED, "claim and discard");
	expect_err(&pk[6], FI_ENOMSG, COUR_E_NOMSG, FI_RECV | FI_TAGGED, "peek after discard");
	for (int k = 0; k < N; k++)
		expect_ok(&tx[k], FI_SEND | FI_TAGGED, "send");
	expect_msg(&rx[2], FI_RECV | FI_TAGGED, 900, 0x504, 0, r4, 900, 64, "after discards");
}

/* Posted before or after the message arrives, eager and rendezvous; then a message that fits. */
Test(engine_loop, truncation_then_next_message)
{
	size_t em = cour_params.eager_max;
	struct { size_t len, cap; bool posted_first; } c[] = {
		{ 300, 100, true }, { em + 1, 1000, true }, { 5000, 2000, false },
		{ 2 * em, em, false }, { 300, 300, true },
	};
	enum { N = COUR_ARRAY_SIZE(c) };
	struct op tx[N] = { 0 }, rx[N] = { 0 };

	net_open(2, NULL, 0);
	for (int k = 0; k < N; k++) {
		char *rbuf = rx_buf(c[k].cap);

		if (c[k].posted_first)
			POST(fi_recv(net.t[1].ep, rbuf, c[k].cap, NULL, FI_ADDR_UNSPEC, &rx[k]));
		POST(fi_send(net.t[0].ep, tx_buf(c[k].len, 80 + k), c[k].len, NULL, net.t[1].fa,
			     &tx[k]));
		if (!c[k].posted_first) {
			WAIT_UNTIL(stats_of(1).unexpected_msgs == 1 + (k == 3), WAIT_MS);
			POST(fi_recv(net.t[1].ep, rbuf, c[k].cap, NULL, FI_ADDR_UNSPEC, &rx[k]));
		}
		WAIT_UNTIL(tx[k].done && rx[k].done, WAIT_MS);
		expect_ok(&tx[k], FI_SEND | FI_MSG, "truncated send");
		if (c[k].len == c[k].cap) {
			expect_msg(&rx[k], FI_RECV | FI_MSG, c[k].len, 0, 0, rbuf, c[k].cap,
				   80 + k, "after truncations");
			continue;
		}
		expect_err(&rx[k], FI_ETRUNC, COUR_E_TRUNC, FI_RECV | FI_MSG, "truncated");
		cr_assert_eq(rx[k].e.len, c[k].cap, "case %d: len %zu", k, rx[k].e.len);
		cr_assert_eq(rx[k].olen, c[k].len - c[k].cap, "case %d: olen %zu", k, rx[k].olen);
		check_data(rbuf, c[k].cap, c[k].cap, 80 + k, "truncated receive");
	}
}

Test(engine_loop, cancel_posted_receive)
{
	struct op rx[4] = { 0 }, tx = { 0 };
	char *r0 = rx_buf(100), *r1 = rx_buf(100), *r3 = rx_buf(100);

	net_open(2, NULL, 0);
	POST(fi_trecv(net.t[1].ep, r0, 100, NULL, FI_ADDR_UNSPEC, 5, 0, &rx[0]));
	POST(fi_recv(net.t[1].ep, r1, 100, NULL, FI_ADDR_UNSPEC, &rx[1]));
	cr_assert_eq(fi_cancel(&net.t[1].ep->fid, &rx[0]), 0);
	cr_assert_eq(fi_cancel(&net.t[1].ep->fid, &rx[1]), 0);
	cr_assert_eq(fi_cancel(&net.t[1].ep->fid, &rx[0]), -FI_ENOENT);
	cr_assert_eq(fi_cancel(&net.t[1].ep->fid, &rx[2]), -FI_ENOENT);
	WAIT_UNTIL(rx[0].done && rx[1].done, WAIT_MS);
	expect_err(&rx[0], FI_ECANCELED, COUR_E_CANCELED, FI_RECV | FI_TAGGED, "canceled");
	expect_err(&rx[1], FI_ECANCELED, COUR_E_CANCELED, FI_RECV | FI_MSG, "canceled");
	/* the message meant for the canceled receive waits for another one */
	POST(fi_tsend(net.t[0].ep, tx_buf(100, 9), 100, NULL, net.t[1].fa, 5, &tx));
	WAIT_UNTIL(tx.done && stats_of(1).unexpected_msgs == 1, WAIT_MS);
	check_data(r0, 0, 100, 0, "canceled buffer");
	POST(fi_trecv(net.t[1].ep, r3, 100, NULL, FI_ADDR_UNSPEC, 5, 0, &rx[3]));
	WAIT_UNTIL(rx[3].done, WAIT_MS);
	expect_msg(&rx[3], FI_RECV | FI_TAGGED, 100, 5, 0, r3, 100, 9, "after cancel");
}

/* Two endpoints for the ACK tests: messages of 8 loop-wire packets (the count that sends an
 * ACK at once) from a to r, 8-byte answers from small to back; their sessions opened by an
 * inject each way first, whose opening packets are acknowledged at once, so that a test's ACK
 * counts start after them. Returns the message length. */
static size_t ack_pair_open(char **a, char **r, char **small, char **back)
{
	struct op rx[2] = { 0 };
	size_t len = 8 * (1472 - COUR_PKT_HDR_LEN);  /* the loop wire's packets (COUR_LOOP_MTU) */

	net_open(2, NULL, 0);
	*a = tx_buf(len, 1);
	*r = rx_buf(len);
	*small = tx_buf(8, 2);
	*back = rx_buf(8);
	POST(fi_trecv(net.t[1].ep, *back, 8, NULL, net.t[0].fa, 6, 0, &rx[0]));
	POST(fi_tinject(net.t[0].ep, *small, 8, net.t[1].fa, 6));
	POST(fi_trecv(net.t[0].ep, *back, 8, NULL, net.t[1].fa, 6, 0, &rx[1]));
	POST(fi_tinject(net.t[1].ep, *small, 8, net.t[0].fa, 6));
	WAIT_UNTIL(rx[0].done && rx[1].done && tx_idle(0) && tx_idle(1), WAIT_MS);
	return len;
}

/* A message whose sender waits for nothing (fi_tinject: no completion, no counter; the MPI_Send
 * of a message up to inject_size) is acknowledged by the receiver's answer, or after the ACK
 * delay, not when its last piece arrives; one whose sender reports a completion (the FI_INJECT
 * flag with FI_COMPLETION, or fi_tsend) is acknowledged at once. Eight packets: the eighth is
 * where the count sends an ACK. */
Test(engine_loop, an_inject_is_acknowledged_by_the_answer_a_send_at_once)
{
	struct op rx[4] = { 0 }, tx[2] = { 0 };
	size_t len;
	char *a, *r, *small, *back;
	uint64_t t0, acks, rto;

	cour_params.window = 256;           /* a quarter window (64) above the eight */
	cour_params.ack_delay_us = 300000;  /* no ACK by the delay unless the test waits for it */
	len = ack_pair_open(&a, &r, &small, &back);
	cr_assert_leq(len, cour_params.inject_size);
	acks = stats_of(1).acks_sent;

	POST(fi_trecv(net.t[1].ep, r, len, NULL, net.t[0].fa, 7, 0, &rx[0]));
	POST(fi_tinject(net.t[0].ep, a, len, net.t[1].fa, 7));
	WAIT_UNTIL(rx[0].done, WAIT_MS);
	expect_msg(&rx[0], FI_RECV | FI_TAGGED, len, 7, 0, r, len, 1, "the inject");
	cr_assert_eq(stats_of(1).acks_sent, acks, "the inject was acknowledged before the answer");
	cr_assert_not(tx_idle(0), "its packets wait for an ACK");

	/* the answer carries it */
	POST(fi_trecv(net.t[0].ep, back, 8, NULL, net.t[1].fa, 8, 0, &rx[1]));
	POST(fi_tsend(net.t[1].ep, small, 8, NULL, net.t[0].fa, 8, &tx[0]));
	WAIT_UNTIL(rx[1].done && tx_idle(0), WAIT_MS);
	expect_msg(&rx[1], FI_RECV | FI_TAGGED, 8, 8, 1, back, 8, 2, "the answer");
	cr_assert_eq(stats_of(1).acks_sent, acks, "the answer did not carry the ACK");

	/* the FI_INJECT flag with a completion: the sender waits for it, the ACK goes at once */
	POST(fi_trecv(net.t[1].ep, r, len, NULL, net.t[0].fa, 9, 0, &rx[2]));
	tsendmsg(0, a, len, net.t[1].fa, 9, FI_INJECT | FI_COMPLETION, &tx[1]);
	t0 = cour_now_us();
	WAIT_UNTIL(rx[2].done && tx[1].done, WAIT_MS);
	cr_assert_lt(ELAPSED_MS(t0), 300, "the sender waited for the ACK delay");
	expect_ok(&tx[1], FI_SEND | FI_TAGGED, "the send with a completion");
	expect_msg(&rx[2], FI_RECV | FI_TAGGED, len, 9, 0, r, len, 1, "the send");
	cr_assert_eq(stats_of(1).acks_sent, acks + 1);

	/* an inject nobody answers: the ACK delay bounds the wait (the default's, 20 us: one of
	 * 300 ms would outlast the sender's retransmit timer) */
	cour_params.ack_delay_us = 20;
	rto = stats_of(0).retrans_timeout;
	POST(fi_trecv(net.t[1].ep, r, len, NULL, net.t[0].fa, 10, 0, &rx[3]));
	POST(fi_tinject(net.t[0].ep, a, len, net.t[1].fa, 10));
	WAIT_UNTIL(rx[3].done, WAIT_MS);
	expect_msg(&rx[3], FI_RECV | FI_TAGGED, len, 10, 0, r, len, 1, "the second inject");
	WAIT_UNTIL(tx_idle(0), WAIT_MS);
	cr_assert_eq(stats_of(1).acks_sent, acks + 2, "one ACK after the delay");
	cr_assert_eq(stats_of(0).retrans_timeout, rto, "the ACK came after the timer");
}

/* One big message from endpoint 0 to 1 (tag), its answer posted first at 0 (want_answer), and
 * the time it took until both ends completed, in ms. */
static long big_send(char *a, char *r, size_t len, uint64_t tag, bool want_answer,
		     char *back, struct op *rx, struct op *tx, struct op *back_rx)
{
	uint64_t t0;

	if (want_answer)
		POST(fi_trecv(net.t[0].ep, back, 8, NULL, net.t[1].fa, tag + 1, 0, back_rx));
	POST(fi_trecv(net.t[1].ep, r, len, NULL, net.t[0].fa, tag, 0, rx));
	POST(fi_tsend(net.t[0].ep, a, len, NULL, net.t[1].fa, tag, tx));
	t0 = cour_now_us();
	WAIT_UNTIL(rx->done, WAIT_MS);
	expect_msg(rx, FI_RECV | FI_TAGGED, len, tag, 0, r, len, 1, "a big message");
	WAIT_UNTIL(tx->done, WAIT_MS);
	expect_ok(tx, FI_SEND | FI_TAGGED, "a big message's send");
	return ELAPSED_MS(t0);
}

/* Endpoint 1's answer to big_send(tag): 8 bytes, tag + 1. */
static void answer(char *small, char *back, uint64_t tag, struct op *back_tx, struct op *back_rx)
{
	POST(fi_tsend(net.t[1].ep, small, 8, NULL, net.t[0].fa, tag + 1, back_tx));
	WAIT_UNTIL(back_rx->done, WAIT_MS);
	expect_msg(back_rx, FI_RECV | FI_TAGGED, 8, tag + 1, 1, back, 8, 2, "the answer");
}

/* A waited message (fi_tsend) of eight packets, the count that sends an ACK at once, whose
 * sender has a receive posted for the answer (READY), from a peer whose messages the receiver
 * answered within the ACK delay: the answer carries the ACK, and the sender's completion
 * waits for it. Without the posted receive it is acknowledged at once: the answer would
 * arrive unexpected. An answer that does not come within the delay makes the ACK go by the
 * timer, and the next message is acknowledged at once again. */
Test(engine_loop, a_waited_message_answered_at_once_has_its_ack_carried_by_the_answer)
{
	struct op rx[6] = { 0 }, tx[6] = { 0 }, brx[6] = { 0 }, btx[6] = { 0 };
	size_t len;
	char *a, *r, *small, *back;
	uint64_t acks;

	cour_params.window = 256;           /* a quarter window (64) above the eight */
	/* no ACK by the delay unless the test waits for it, and no liveness probe (0.1 s) while
	 * it does, whose answer would be an ACK */
	cour_params.ack_delay_us = 60000;
	cour_params.rto_min_us = 5000000;   /* ...nor a resend's */
	cour_params.rto_max_us = 5000000;
	/* ...nor a credit grant's, nor congestion control's: each message's eight packets leave
	 * at once */
	cour_params.credits = 4096;
	cour_params.cc = 0;
	len = ack_pair_open(&a, &r, &small, &back);

	/* nothing answered yet: acknowledged at once; then answered at once */
	acks = stats_of(1).acks_sent;
	cr_assert_lt(big_send(a, r, len, 10, true, back, &rx[0], &tx[0], &brx[0]), 50,
		     "the first message's sender waited for the ACK delay");
	cr_assert_eq(stats_of(1).acks_sent, acks + 1);
	answer(small, back, 10, &btx[0], &brx[0]);

	/* the next one's ACK waits for the answer, which carries it */
	acks = stats_of(1).acks_sent;
	POST(fi_trecv(net.t[0].ep, back, 8, NULL, net.t[1].fa, 21, 0, &brx[1]));
	POST(fi_trecv(net.t[1].ep, r, len, NULL, net.t[0].fa, 20, 0, &rx[1]));
	POST(fi_tsend(net.t[0].ep, a, len, NULL, net.t[1].fa, 20, &tx[1]));
	WAIT_UNTIL(rx[1].done, WAIT_MS);
	expect_msg(&rx[1], FI_RECV | FI_TAGGED, len, 20, 0, r, len, 1, "the second message");
	pump_for(20);
	cr_assert_not(tx[1].done, "the second message was acknowledged before the answer");
	cr_assert_eq(stats_of(1).acks_sent, acks, "an ACK of its own went before the answer");
	answer(small, back, 20, &btx[1], &brx[1]);
	WAIT_UNTIL(tx[1].done, WAIT_MS);
	expect_ok(&tx[1], FI_SEND | FI_TAGGED, "the second message's send");
	cr_assert_eq(stats_of(1).acks_sent, acks, "the answer did not carry the ACK");

	/* no receive posted for the answer: acknowledged at once, the peer answers or not */
	cr_assert_lt(big_send(a, r, len, 30, false, back, &rx[2], &tx[2], &brx[2]), 50,
		     "a message whose answer would be unexpected waited for the delay");
	cr_assert_eq(stats_of(1).acks_sent, acks + 1);
	POST(fi_trecv(net.t[0].ep, back, 8, NULL, net.t[1].fa, 31, 0, &brx[2]));
	answer(small, back, 30, &btx[2], &brx[2]);

	/* no answer: the delay bounds the wait ... */
	cr_assert_geq(big_send(a, r, len, 40, true, back, &rx[3], &tx[3], &brx[3]), 50,
		      "the unanswered message's ACK did not wait");

	/* ...and the next message, the last still unanswered, is acknowledged at once */
	cr_assert_lt(big_send(a, r, len, 50, true, back, &rx[4], &tx[4], &brx[4]), 50,
		     "a message after an unanswered one waited for the delay");
	answer(small, back, 40, &btx[3], &brx[3]);
	answer(small, back, 50, &btx[4], &brx[4]);
}

/* fi_tsendmsg/fi_trecvmsg of nothing, with no iov at all: legal, and a complete message. */
Test(engine_loop, zero_length_without_iov)
{
	struct op tx = { 0 }, rx = { 0 };

	net_open(2, NULL, 0);
	cr_assert_eq(trecvmsg(1, NULL, 0, 0x20, 0, &rx), 0);
	tsendmsg(0, NULL, 0, net.t[1].fa, 0x20, 0, &tx);
	WAIT_UNTIL(tx.done && rx.done, WAIT_MS);
	expect_ok(&tx, FI_SEND | FI_TAGGED, "empty send");
	expect_ok(&rx, FI_RECV | FI_TAGGED, "empty receive");
	cr_assert(rx.e.len == 0 && rx.e.tag == 0x20 && rx.src == net.t[0].fa);
}

/* ---- 6. unreachable peers ---- */

Test(engine_loop, unreachable_address_nobody_holds)
{
	struct sockaddr_in nobody = { .sin_family = AF_INET, .sin_port = htons(9) };
	size_t big = cour_params.eager_max + 1;
	char *s = tx_buf(big, 1), *r = rx_buf(100);
	struct op tx[3] = { 0 }, rx = { 0 };
	fi_addr_t fa;
	uint64_t t0;
	long ms;

	cour_params.peer_timeout_ms = 300;
	net_open(2, NULL, 0);
	inet_pton(AF_INET, "127.0.0.1", &nobody.sin_addr);
	fa = av_add(&nobody);
	t0 = cour_now_us();
	POST(fi_send(net.t[0].ep, s, 100, NULL, fa, &tx[0]));
	POST(fi_tsend(net.t[0].ep, s, big, NULL, fa, 3, &tx[1]));
	WAIT_UNTIL(tx[0].done && tx[1].done, 3000);
	ms = ELAPSED_MS(t0);
	cr_log_info("unreachable after %ld ms (peer_timeout 300)\n", ms);
	expect_err(&tx[0], FI_EHOSTUNREACH, COUR_E_UNREACHABLE, FI_SEND | FI_MSG, "eager");
	expect_err(&tx[1], FI_EHOSTUNREACH, COUR_E_UNREACHABLE, FI_SEND | FI_TAGGED, "rendezvous");
	cr_assert_geq(ms, 300, "failed after %ld ms, before the peer timeout", ms);
	cr_assert_eq(stats_of(0).peers_unreachable, 1);
	/* the other peer is unaffected */
	POST(fi_recv(net.t[1].ep, r, 100, NULL, FI_ADDR_UNSPEC, &rx));
	POST(fi_send(net.t[0].ep, s, 100, NULL, net.t[1].fa, &tx[2]));
	WAIT_UNTIL(tx[2].done && rx.done, WAIT_MS);
	expect_msg(&rx, FI_RECV | FI_MSG, 100, 0, 0, r, 100, 1, "to the live peer");
}

/* Sends waiting for a CTS, for a DONE, and unacknowledged, when the receiver goes away. */
Test(engine_loop, unreachable_receiver_closed)
{
	char *s = tx_buf(200000, 2);
	struct op tx[3] = { 0 };
	uint64_t t0;

	cour_params.peer_timeout_ms = 300;
	net_open(2, NULL, 0);
	POST(fi_tsend(net.t[0].ep, s, 200000, NULL, net.t[1].fa, 1, &tx[0]));
	tsendmsg(0, s, 1000, net.t[1].fa, 2, FI_DELIVERY_COMPLETE, &tx[1]);
	WAIT_UNTIL(stats_of(1).unexpected_msgs == 2 && tx_idle(0), WAIT_MS);
	pump_for(20);
	cr_assert(!tx[0].done && !tx[1].done, "completed before the receive was posted");
	ep_close(1);
	t0 = cour_now_us();
	POST(fi_tsend(net.t[0].ep, s, 10, NULL, net.t[1].fa, 3, &tx[2]));
	WAIT_UNTIL(all_done(tx, 3), 3000);
	cr_log_info("closed receiver unreachable after %ld ms\n", ELAPSED_MS(t0));
	expect_err(&tx[0], FI_EHOSTUNREACH, COUR_E_UNREACHABLE, FI_SEND | FI_TAGGED, "wait CTS");
	expect_err(&tx[1], FI_EHOSTUNREACH, COUR_E_UNREACHABLE, FI_SEND | FI_TAGGED, "wait DONE");
	expect_err(&tx[2], FI_EHOSTUNREACH, COUR_E_UNREACHABLE, FI_SEND | FI_TAGGED, "unacked");
}

Test(engine_loop, rendezvous_sender_dies_mid_transfer)
{
	size_t len = 4 << 20;
	char *r = rx_buf(len);
	struct op tx = { 0 }, rx = { 0 };
	uint64_t t0;

	cour_params.peer_timeout_ms = 300;
	cour_params.linger_ms = 0;   /* a sender that dies: its close delivers nothing more */
	net_open(2, NULL, 0);
	POST(fi_trecv(net.t[1].ep, r, len, NULL, FI_ADDR_UNSPEC, 9, 0, &rx));
	POST(fi_tsend(net.t[0].ep, tx_buf(len, 3), len, NULL, net.t[1].fa, 9, &tx));
	WAIT_UNTIL(stats_of(1).rx_bytes > (256u << 10), WAIT_MS);
	cr_assert(!rx.done && !tx.done, "4 MiB went through before the sender could be closed");
	ep_close(0);
	t0 = cour_now_us();
	WAIT_UNTIL(rx.done, 3000);
	cr_log_info("receiver gave up after %ld ms\n", ELAPSED_MS(t0));
	expect_err(&rx, FI_EHOSTUNREACH, COUR_E_UNREACHABLE, FI_RECV | FI_TAGGED, "receive");
	expect_err(&tx, FI_ECANCELED, COUR_E_EP_CLOSED, FI_SEND | FI_TAGGED, "closed sender");
	cr_assert_eq(stats_of(1).peers_unreachable, 1);
}

/* ---- 7. restart: a new endpoint under the old name ---- */

Test(engine_loop, restarted_peer_resets_then_works)
{
	size_t em = cour_params.eager_max;
	char *s = tx_buf(em + 5000, 4), *r10 = rx_buf(3000), *r11 = rx_buf(em + 5000), name[64];
	struct op tx[5] = { 0 }, rx[2] = { 0 };
	struct fi_courier_stats st;
	size_t namelen;
	uint64_t t0;

	/* long enough that only the restart, never silence, can fail the sends */
	cour_params.peer_timeout_ms = 5000;
	net_open(2, NULL, 0);
	namelen = net.t[1].namelen;
	memcpy(name, net.t[1].name, namelen);
	POST(fi_tsend(net.t[0].ep, s, em + 1000, NULL, net.t[1].fa, 1, &tx[0]));   /* rendezvous */
	tsendmsg(0, s, 1000, net.t[1].fa, 2, FI_DELIVERY_COMPLETE, &tx[1]);
	WAIT_UNTIL(stats_of(1).unexpected_msgs == 2 && tx_idle(0), WAIT_MS);
	ep_close(1);
	POST(fi_tsend(net.t[0].ep, s, 2000, NULL, net.t[1].fa, 3, &tx[2]));
	pump_for(15);
	ep_open(1, name, namelen);
	t0 = cour_now_us();
	WAIT_UNTIL(all_done(tx, 3), 3000);
	cr_log_info("restart noticed after %ld ms\n", ELAPSED_MS(t0));
	expect_err(&tx[0], FI_ECONNRESET, COUR_E_PEER_RESET, FI_SEND | FI_TAGGED, "wait CTS");
	expect_err(&tx[1], FI_ECONNRESET, COUR_E_PEER_RESET, FI_SEND | FI_TAGGED, "wait DONE");
	expect_err(&tx[2], FI_ECONNRESET, COUR_E_PEER_RESET, FI_SEND | FI_TAGGED, "unacked");
	st = stats_of(0);
	cr_assert_eq(st.peers_reset, 1);
	cr_assert_eq(st.peers_unreachable, 0);

	/* a fresh session with the new incarnation, eager and rendezvous */
	POST(fi_trecv(net.t[1].ep, r10, 3000, NULL, net.t[0].fa, 10, 0, &rx[0]));
	POST(fi_trecv(net.t[1].ep, r11, em + 5000, NULL, net.t[0].fa, 11, 0, &rx[1]));
	POST(fi_tsend(net.t[0].ep, s, 3000, NULL, net.t[1].fa, 10, &tx[3]));
	POST(fi_tsend(net.t[0].ep, s, em + 5000, NULL, net.t[1].fa, 11, &tx[4]));
	WAIT_UNTIL(all_done(tx, 5) && all_done(rx, 2), WAIT_MS);
	expect_ok(&tx[3], FI_SEND | FI_TAGGED, "fresh eager");
	expect_ok(&tx[4], FI_SEND | FI_TAGGED, "fresh rendezvous");
	expect_msg(&rx[0], FI_RECV | FI_TAGGED, 3000, 10, 0, r10, 3000, 4, "fresh eager");
	expect_msg(&rx[1], FI_RECV | FI_TAGGED, em + 5000, 11, 0, r11, em + 5000, 4,
		   "fresh rendezvous");
}

/*
 * WAR: a read and then a write of the same memory, from one initiator. The target sends the
 * read's data lazily, 1472-byte packets at a time, so the write arrives while most of it is
 * unsent; the read must still see the memory as it was (it is copied aside first).
 */
Test(engine_loop, a_read_sees_memory_as_before_a_later_write)
{
	size_t len = 2u << 20, tail = 64u << 10;
	char *region, *newer, *got, *want;
	struct fid_mr *mr;
	struct op rd = { 0 }, wr = { 0 };

	net_open(2, NULL, 0);
	region = tx_buf(len, 21);
	want = tx_buf(len, 21);
	newer = tx_buf(tail, 22);
	got = rx_buf(len);
	cr_assert_eq(fi_mr_reg(net.domain, region, len, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 7, 0,
			       &mr, NULL), 0);
	/* the write hits the end of what the read covers: the part it sends last */
	cr_assert_eq(fi_read(net.t[0].ep, got, len, NULL, net.t[1].fa, 0, 7, &rd), 0);
	cr_assert_eq(fi_write(net.t[0].ep, newer, tail, NULL, net.t[1].fa, len - tail, 7, &wr),
		     0);
	WAIT_UNTIL(rd.done && wr.done, WAIT_MS);
	cr_assert_eq(rd.err, 0, "read: %d", rd.err);
	cr_assert_eq(wr.err, 0, "write: %d", wr.err);
	check_data(got, len, len, 21, "the read");
	cr_assert_eq(memcmp(region + len - tail, newer, tail), 0, "the write did not land");
	cr_assert_eq(memcmp(region, want, len - tail), 0, "the write went elsewhere");
	cr_assert_gt(stats_of(1).rma_snapshots, 0, "the read was never overtaken: no test");
	cr_assert_eq(fi_close(&mr->fid), 0);
}

/*
 * A region closed while a read from it is being answered: later accesses are refused at once,
 * but the read already accepted finishes with the memory as it was when the region closed,
 * even if the application reuses that memory right away.
 */
Test(engine_loop, a_read_being_answered_survives_its_region_closing)
{
	size_t len = 2u << 20;
	char *region, *got, small[8];
	struct fid_mr *mr;
	struct op rd = { 0 }, late = { 0 };

	net_open(2, NULL, 0);
	region = tx_buf(len, 23);
	got = rx_buf(len);
	cr_assert_eq(fi_mr_reg(net.domain, region, len, FI_REMOTE_READ, 0, 9, 0, &mr, NULL), 0);
	cr_assert_eq(fi_read(net.t[0].ep, got, len, NULL, net.t[1].fa, 0, 9, &rd), 0);
	/* the target accepted the read; 2 MiB in 1472-byte packets are far from sent */
	WAIT_UNTIL(stats_of(1).rma_served == 1, WAIT_MS);
	cr_assert(!rd.done, "the read finished before the region could close: no test");
	cr_assert_eq(fi_close(&mr->fid), 0);
	memset(region, 0xee, len);             /* the application reuses the memory */
	cr_assert_eq(fi_read(net.t[0].ep, small, 8, NULL, net.t[1].fa, 0, 9, &late), 0);
	WAIT_UNTIL(rd.done && late.done, WAIT_MS);
	cr_assert_eq(rd.err, 0, "read: %d", rd.err);
	check_data(got, len, len, 23, "the read");
	cr_assert_gt(stats_of(1).rma_snapshots, 0, "no private copy was taken");
	cr_assert_eq(late.err, FI_EACCES, "a read after the close: %d", late.err);
}

/*
 * FI_FENCE: a fenced write waits behind messages still queued to that peer (here held back by
 * the receiver's credits); an unfenced one goes ahead of them. Only once the receiver takes
 * the messages does the fenced write land and complete.
 */
Test(engine_loop, a_fenced_write_waits_for_the_messages_queued_before_it)
{
	enum { N = 6 };
	char *msg = tx_buf(100, 24), *r[N], *region, *w1 = tx_buf(64, 25), *w2 = tx_buf(64, 26);
	struct op tx[N] = { 0 }, rx[N] = { 0 }, free_wr = { 0 }, fenced = { 0 };
	struct fid_mr *mr;
	struct iovec iov = { .iov_base = w2, .iov_len = 64 };
	struct fi_rma_iov riov = { .addr = 64, .len = 64, .key = 11 };
	struct fi_msg_rma m = {
		.msg_iov = &iov, .iov_count = 1, .addr = 0, .rma_iov = &riov, .rma_iov_count = 1,
		.context = &fenced,
	};

	cour_params.credits = 2;     /* four of the six messages wait for credits */
	net_open(2, NULL, 0);
	m.addr = net.t[1].fa;
	region = rx_buf(128);
	memset(region, 0, 128);
	cr_assert_eq(fi_mr_reg(net.domain, region, 128, FI_REMOTE_WRITE, 0, 11, 0, &mr, NULL), 0);
	for (int k = 0; k < N; k++)
		POST(fi_tsend(net.t[0].ep, msg, 100, NULL, net.t[1].fa, 40 + k, &tx[k]));
	WAIT_UNTIL(stats_of(1).unexpected_msgs == 2, WAIT_MS);
	cr_assert_eq(fi_writemsg(net.t[0].ep, &m, FI_FENCE | FI_COMPLETION), 0);
	cr_assert_eq(fi_write(net.t[0].ep, w1, 64, NULL, net.t[1].fa, 0, 11, &free_wr), 0);
	WAIT_UNTIL(free_wr.done, WAIT_MS);
	cr_assert_eq(free_wr.err, 0);
	cr_assert_eq(memcmp(region, w1, 64), 0, "the unfenced write did not land");
	pump_for(20);
	cr_assert(!fenced.done, "the fenced write completed before the messages ahead of it");
	for (int k = 0; k < 64; k++)
		cr_assert_eq(region[64 + k], 0, "the fenced write landed before the messages");
	for (int k = 0; k < N; k++) {
		r[k] = rx_buf(100);
		POST(fi_trecv(net.t[1].ep, r[k], 100, NULL, net.t[0].fa, 40 + k, 0, &rx[k]));
	}
	WAIT_UNTIL(fenced.done && all_done(tx, N) && all_done(rx, N), WAIT_MS);
	cr_assert_eq(fenced.err, 0, "fenced write: %d", fenced.err);
	cr_assert_eq(memcmp(region + 64, w2, 64), 0, "the fenced write did not land");
	for (int k = 0; k < N; k++)
		expect_msg(&rx[k], FI_RECV | FI_TAGGED, 100, 40 + k, 0, r[k], 100, 24, "message");
	cr_assert_eq(fi_close(&mr->fid), 0);
}

/*
 * FI_OPT_SHARED_MEMORY_PERMITTED: a bool, set before fi_enable; never readable. False closes the
 * endpoint's ring (no peer can be offered one), true makes it anew. UDP wire: rings exist only
 * there.
 */
static int set_shm_permitted(struct fid_ep *ep, const void *val, size_t len)
{
	return fi_setopt(&ep->fid, FI_OPT_ENDPOINT, FI_COURIER_OPT_SHARED_MEMORY_PERMITTED, val,
			 len);
}

Test(engine_loop, shm_permitted_option_contract)
{
	bool permitted = false;
	int as_int = 1;
	size_t len = sizeof(permitted);
	struct fid_ep *ep;

	cour_params.wire = (char *)"udp";
	cour_params.shm = 1;
	net_open(1, NULL, 0);
	ep = net.t[0].ep;
	cr_assert_eq(set_shm_permitted(ep, &permitted, sizeof(permitted)), -FI_EOPBADSTATE,
		     "set after fi_enable");
	cr_assert_not_null(cour_ep_of(ep)->pep.shm_ring, "refused, yet the ring went");
	cr_assert_eq(fi_getopt(&ep->fid, FI_OPT_ENDPOINT, FI_COURIER_OPT_SHARED_MEMORY_PERMITTED,
			       &permitted, &len), -FI_ENOPROTOOPT);
	ep_close(0);

	cr_assert_eq(fi_endpoint(net.domain, net.info, &net.t[0].ep, NULL), 0);
	ep = net.t[0].ep;
	cr_assert_not_null(cour_ep_of(ep)->pep.shm_ring);
	cr_assert_eq(set_shm_permitted(ep, &as_int, sizeof(as_int)), -FI_EINVAL,
		     "an int is not a bool");
	cr_assert_not_null(cour_ep_of(ep)->pep.shm_ring);
	cr_assert_eq(set_shm_permitted(ep, &permitted, sizeof(permitted)), 0);
	cr_assert_null(cour_ep_of(ep)->pep.shm_ring, "not permitted, yet a ring to offer");
	permitted = true;
	cr_assert_eq(set_shm_permitted(ep, &permitted, sizeof(permitted)), 0);
	cr_assert_not_null(cour_ep_of(ep)->pep.shm_ring, "permitted again, but no ring");
}

/*
 * An endpoint bound to loopback cannot send off its host: a peer elsewhere fails its operations
 * at once with FI_EHOSTUNREACH (COUR_E_NO_ROUTE), instead of after FI_COURIER_PEER_TIMEOUT of
 * sends the kernel refuses. Real UDP wire; the routing table is asked with connect(), so not
 * one packet leaves (tx_pkts stays 0).
 */
Test(engine_loop, unroutable_peer_fails_at_once)
{
	struct sockaddr_in far = { .sin_family = AF_INET, .sin_port = htons(9) };
	struct op tx[2] = { 0 };
	uint64_t t0;
	fi_addr_t fa;

	cour_params.wire = (char *)"udp";
	cour_params.shm = 0;
	cour_params.peer_timeout_ms = 60000;
	net_open(1, NULL, 0);
	inet_pton(AF_INET, "198.18.0.99", &far.sin_addr);
	fa = av_add(&far);
	t0 = cour_now_us();
	for (int k = 0; k < 2; k++) {
		POST(fi_tsend(net.t[0].ep, tx_buf(100, k), 100, NULL, fa, 0x5e0 + k, &tx[k]));
		WAIT_UNTIL(tx[k].done, 5000);
		cr_assert_eq(tx[k].err, FI_EHOSTUNREACH, "send %d: err %d", k, tx[k].err);
		cr_assert_eq(tx[k].prov_errno, COUR_E_NO_ROUTE, "send %d: prov_errno %d", k,
			     tx[k].prov_errno);
	}
	cr_assert_lt(cour_now_us() - t0, 5000000, "failing took as long as a peer timeout");
	cr_assert_eq(stats_of(0).tx_pkts, 0, "a packet was sent towards an unroutable peer");
	cr_assert_geq(stats_of(0).peers_unreachable, 2);
}
