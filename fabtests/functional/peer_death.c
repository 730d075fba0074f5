/*
 * peer_death: a receiver dies in the middle of a stream and comes back on the same address.
 *
 *   peer_death -s -A <port> [-n <count>] [-N]  receiver bound to 127.0.0.1:<port>: receives
 *                                          and verifies until killed, or, with -n, until
 *                                          <count> messages of the second phase have arrived;
 *                                          -N: posts no receive (messages stay unexpected)
 *   peer_death -c -A <port> [-D] [-k <n>]  sender; -D: FI_DELIVERY_COMPLETE sends; -k: sends
 *                                          that must succeed before the failure (default 10)
 *
 * The sender streams 64 KiB messages (8 in flight) until its sends fail; each failure must be
 * FI_EHOSTUNREACH (the peer went silent for FI_COURIER_PEER_TIMEOUT) or FI_ECONNRESET (it was
 * already back with a new session), and all in-flight sends must fail within a bound. Then it
 * sends the second phase from the same endpoint, retrying the first message until a restarted
 * receiver takes it. test_peer_death.sh kills and restarts the receiver. No oob channel: the
 * receiver's address is fixed, the sender resolves it with fi_getinfo(node, service).
 * Every message starts with its 8-byte sequence number; the rest is cour_ft_fill(seq).
 */
#define _GNU_SOURCE

#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fi_ext_courier.h>

#include "ft_common.h"

#define PD_SIZE      (64 * 1024)
#define PD_WINDOW    8
#define PD_PHASE2    1000000ULL
#define PD_PHASE2_N  20
#define PD_FAIL_MS   6000	/* from the last success to every in-flight send failed */
#define PD_RETRY_MS  15000	/* for the restarted receiver to answer */

struct pd {
	const char *prov;
	const char *port;
	bool server;
	bool delivery_complete;
	bool no_recv;
	long min_ok;
	long count;
	int timeout_s;
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_cq *cq;
	struct fid_av *av;
	struct fid_ep *ep;
	fi_addr_t peer;
	char *buf;
	struct fi_context2 ctx[PD_WINDOW];
};

#define PD_FAIL(fmt, ...) do { \
	fprintf(stderr, "peer_death: %s:%d: " fmt "\n", __func__, __LINE__, ##__VA_ARGS__); \
	return -FI_EIO; \
} while (0)
#define PD_CALL(call) do { \
	int r_ = (int)(call); \
	if (r_) \
		PD_FAIL("%s: %d (%s)", #call, r_, fi_strerror(-r_)); \
} while (0)

static uint64_t pd_ms(void)
{
	return cour_ft_now_ns() / 1000000ULL;
}

static int pd_setup(struct pd *pd)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED, .size = 256 };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE, .count = 4 };
	int ret;

	if (!hints)
		return -FI_ENOMEM;
	hints->caps = FI_MSG;
	hints->ep_attr->type = FI_EP_RDM;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	/* no FI_MR_LOCAL: this test passes no descriptors */
	hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->fabric_attr->prov_name = strdup(pd->prov);
	if (pd->delivery_complete)
		hints->tx_attr->op_flags = FI_DELIVERY_COMPLETE;
	ret = fi_getinfo(FI_VERSION(1, 9), "127.0.0.1", pd->port,
			 pd->server ? FI_SOURCE : 0, hints, &pd->info);
	fi_freeinfo(hints);
	PD_CALL(ret);
	/* a layered provider is listed first: take the plain one asked for */
	while (pd->info && strcmp(pd->info->fabric_attr->prov_name, pd->prov)) {
		struct fi_info *next = pd->info->next;

		pd->info->next = NULL;
		fi_freeinfo(pd->info);
		pd->info = next;
	}
	if (!pd->info)
		PD_FAIL("no fi_info from provider %s exactly", pd->prov);
	if (pd->info->domain_attr->mr_mode & FI_MR_LOCAL)
		PD_FAIL("provider needs local MR: not supported by this test");
	PD_CALL(fi_fabric(pd->info->fabric_attr, &pd->fabric, NULL));
	PD_CALL(fi_domain(pd->fabric, pd->info, &pd->domain, NULL));
	PD_CALL(fi_cq_open(pd->domain, &cq_attr, &pd->cq, NULL));
	PD_CALL(fi_av_open(pd->domain, &av_attr, &pd->av, NULL));
	PD_CALL(fi_endpoint(pd->domain, pd->info, &pd->ep, NULL));
	PD_CALL(fi_ep_bind(pd->ep, &pd->av->fid, 0));
	PD_CALL(fi_ep_bind(pd->ep, &pd->cq->fid, FI_TRANSMIT | FI_RECV));
	PD_CALL(fi_enable(pd->ep));
	if (!pd->server) {
		if (!pd->info->dest_addr)
			PD_FAIL("fi_getinfo gave no destination address");
		ret = fi_av_insert(pd->av, pd->info->dest_addr, 1, &pd->peer, 0, NULL);
		if (ret != 1)
			PD_FAIL("fi_av_insert: %d", ret);
	}
	pd->buf = aligned_alloc(4096, PD_WINDOW * PD_SIZE);
	return pd->buf ? 0 : -FI_ENOMEM;
}

/* One completion, success (1) or error (0, *err filled), or -FI_ETIMEDOUT after ms. */
static int pd_read(struct pd *pd, struct fi_cq_tagged_entry *e, struct fi_cq_err_entry *err,
		   uint64_t ms)
{
	uint64_t end = pd_ms() + ms;
	ssize_t ret;

	for (;;) {
		ret = fi_cq_read(pd->cq, e, 1);
		if (ret == 1)
			return 1;
		if (ret == -FI_EAVAIL) {
			memset(err, 0, sizeof(*err));
			ret = fi_cq_readerr(pd->cq, err, 0);
			if (ret == 1)
				return 0;
		}
		if (ret != -FI_EAGAIN && ret != -FI_EAVAIL)
			PD_FAIL("fi_cq_read: %zd (%s)", ret, fi_strerror((int)-ret));
		if (pd_ms() > end)
			return -FI_ETIMEDOUT;
	}
}

static int pd_server(struct pd *pd)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	uint64_t seq, last = 0, got = 0, phase2 = 0;
	size_t bad;
	int i, ret, idx;

	for (i = 0; i < PD_WINDOW && !pd->no_recv; i++)
		PD_CALL(fi_recv(pd->ep, pd->buf + i * PD_SIZE, PD_SIZE, NULL, FI_ADDR_UNSPEC,
				&pd->ctx[i]));
	printf("peer_death: receiver up on port %s\n", pd->port);
	fflush(stdout);
	if (pd->no_recv) {
		/* keep acknowledging (progress) until killed */
		ret = pd_read(pd, &e, &err, (uint64_t)pd->timeout_s * 1000);
		PD_FAIL("-N: a completion without a receive (%d)", ret);
	}
	while (pd->count == 0 || phase2 < (uint64_t)pd->count) {
		ret = pd_read(pd, &e, &err, (uint64_t)pd->timeout_s * 1000);
		if (ret < 0)
			PD_FAIL("no message for %d s (got %llu)", pd->timeout_s,
				(unsigned long long)got);
		if (ret == 0)
			PD_FAIL("receive error %d (%s)", err.err, fi_strerror(err.err));
		idx = (int)((struct fi_context2 *)e.op_context - pd->ctx);
		if (idx < 0 || idx >= PD_WINDOW || e.len < 8)
			PD_FAIL("completion ctx %p len %zu", e.op_context, e.len);
		memcpy(&seq, pd->buf + idx * PD_SIZE, 8);
		if (cour_ft_check(pd->buf + idx * PD_SIZE + 8, e.len - 8, seq, &bad))
			PD_FAIL("message %llu corrupt at offset %zu", (unsigned long long)seq,
				bad + 8);
		/* a sequence only grows; retried sends may leave gaps, never repeats */
		if (got && seq <= last)
			PD_FAIL("message %llu after %llu", (unsigned long long)seq,
				(unsigned long long)last);
		last = seq;
		got++;
		phase2 += seq >= PD_PHASE2;
		if (got % 50 == 0 || seq >= PD_PHASE2) {
			printf("peer_death: received %llu (last seq %llu)\n",
			       (unsigned long long)got, (unsigned long long)seq);
			fflush(stdout);
		}
		PD_CALL(fi_recv(pd->ep, pd->buf + idx * PD_SIZE, PD_SIZE, NULL, FI_ADDR_UNSPEC,
				&pd->ctx[idx]));
	}
	if (pd->count && phase2 != (uint64_t)pd->count)
		PD_FAIL("phase 2: %llu messages", (unsigned long long)phase2);
	printf("peer_death: receiver PASS: %llu second-phase messages verified\n",
	       (unsigned long long)phase2);
	/* let our last acknowledgements reach the sender before the endpoint goes */
	usleep(300000);
	return 0;
}

static int pd_send(struct pd *pd, int slot, uint64_t seq)
{
	char *p = pd->buf + slot * PD_SIZE;
	ssize_t ret;
	uint64_t end = pd_ms() + 5000;

	memcpy(p, &seq, 8);
	cour_ft_fill(p + 8, PD_SIZE - 8, seq);
	while ((ret = fi_send(pd->ep, p, PD_SIZE, NULL, pd->peer, &pd->ctx[slot])) ==
	       -FI_EAGAIN) {
		struct fi_cq_tagged_entry e;

		/* the CQ must not be drained here: only progress */
		(void)fi_cq_read(pd->cq, &e, 0);
		if (pd_ms() > end)
			PD_FAIL("fi_send: no room for 5 s");
	}
	PD_CALL(ret);
	return 0;
}

static void pd_print_stats(struct pd *pd)
{
	struct fi_courier_ops_ep *ops;
	struct fi_courier_stats st;

	if (fi_open_ops(&pd->ep->fid, FI_COURIER_EP_OPS, 0, (void **)&ops, NULL) ||
	    ops->get_stats(pd->ep, &st, sizeof(st)))
		return;
	fprintf(stderr, "peer_death: sender stats: tx_pkts %llu retrans_timeout %llu "
		"credit_stalls %llu window_stalls %llu peers_unreachable %llu peers_reset %llu "
		"drop_stale_session %llu\n", (unsigned long long)st.tx_pkts,
		(unsigned long long)st.retrans_timeout, (unsigned long long)st.credit_stalls,
		(unsigned long long)st.window_stalls, (unsigned long long)st.peers_unreachable,
		(unsigned long long)st.peers_reset, (unsigned long long)st.drop_stale_session);
}

static bool pd_peer_gone(int err)
{
	return err == FI_EHOSTUNREACH || err == FI_ECONNRESET;
}

static int pd_client(struct pd *pd)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	uint64_t seq = 1, ok = 0, last_ok_ms, t_first_err = 0;
	int i, ret, idx, inflight = 0, errors = 0, first_err = 0;

	for (i = 0; i < PD_WINDOW; i++, inflight++)
		PD_CALL(pd_send(pd, i, seq++));
	printf("peer_death: sender: window posted\n");
	fflush(stdout);
	last_ok_ms = pd_ms();
	/* phase 1: stream until the sends fail, then every in-flight one must fail */
	while (inflight) {
		ret = pd_read(pd, &e, &err, PD_FAIL_MS);
		if (ret == -FI_ETIMEDOUT) {
			pd_print_stats(pd);
			PD_FAIL("%d sends neither completed nor failed %d ms after the last "
				"success (%llu ok, %d errors)", inflight, PD_FAIL_MS,
				(unsigned long long)ok, errors);
		}
		if (ret < 0)
			return ret;
		inflight--;
		if (ret == 1) {
			if (errors)
				PD_FAIL("a send succeeded after a failure");
			ok++;
			last_ok_ms = pd_ms();
			idx = (int)((struct fi_context2 *)e.op_context - pd->ctx);
			PD_CALL(pd_send(pd, idx, seq++));
			inflight++;
			continue;
		}
		if (!pd_peer_gone(err.err))
			PD_FAIL("send failed with %d (%s), want FI_EHOSTUNREACH or FI_ECONNRESET",
				err.err, fi_strerror(err.err));
		if (!errors++) {
			first_err = err.err;
			t_first_err = pd_ms();
		}
		if (pd_ms() - last_ok_ms > PD_FAIL_MS)
			PD_FAIL("failures took %llu ms after the last success",
				(unsigned long long)(pd_ms() - last_ok_ms));
	}
	if ((long)ok < pd->min_ok)
		PD_FAIL("only %llu sends succeeded before the receiver died",
			(unsigned long long)ok);
	printf("peer_death: sender: %llu sends ok, then %d failed (first: %s, %llu ms after "
	       "the last success, all within %llu ms)\n", (unsigned long long)ok, errors,
	       fi_strerror(first_err), (unsigned long long)(t_first_err - last_ok_ms),
	       (unsigned long long)(pd_ms() - t_first_err));
	fflush(stdout);
	pd_print_stats(pd);

	/* phase 2: the same endpoint reaches the restarted receiver */
	seq = PD_PHASE2;
	uint64_t end = pd_ms() + PD_RETRY_MS;
	int retries = 0;

	for (;;) {
		PD_CALL(pd_send(pd, 0, seq));
		ret = pd_read(pd, &e, &err, PD_RETRY_MS);
		if (ret < 0)
			PD_FAIL("first second-phase send: no completion (%d)", ret);
		if (ret == 1)
			break;
		if (!pd_peer_gone(err.err))
			PD_FAIL("second phase: send failed with %d (%s)", err.err,
				fi_strerror(err.err));
		if (pd_ms() > end)
			PD_FAIL("the restarted receiver never answered (%d tries)", retries);
		retries++;
		seq++;
		usleep(100000);
	}
	for (i = 1; i < PD_PHASE2_N; i++) {
		PD_CALL(pd_send(pd, 0, ++seq));
		ret = pd_read(pd, &e, &err, 5000);
		if (ret != 1)
			PD_FAIL("second phase message %d: %s %d (%s)", i,
				ret < 0 ? "no completion" : "error", ret < 0 ? ret : err.err,
				fi_strerror(ret < 0 ? -ret : err.err));
	}
	printf("peer_death: sender PASS: %d second-phase messages sent after %d retries\n",
	       PD_PHASE2_N, retries);
	return 0;
}

static void pd_close(struct pd *pd)
{
	if (pd->ep)
		fi_close(&pd->ep->fid);
	if (pd->av)
		fi_close(&pd->av->fid);
	if (pd->cq)
		fi_close(&pd->cq->fid);
	if (pd->domain)
		fi_close(&pd->domain->fid);
	if (pd->fabric)
		fi_close(&pd->fabric->fid);
	fi_freeinfo(pd->info);
	free(pd->buf);
}

int main(int argc, char **argv)
{
	struct pd pd = { .prov = "courier", .timeout_s = 30, .min_ok = 10 };
	int opt, ret;

	while ((opt = getopt(argc, argv, "p:A:n:T:k:scDN")) != -1) {
		switch (opt) {
		case 'p': pd.prov = optarg; break;
		case 'A': pd.port = optarg; break;
		case 'n': pd.count = atol(optarg); break;
		case 'T': pd.timeout_s = atoi(optarg); break;
		case 's': pd.server = true; break;
		case 'c': pd.server = false; break;
		case 'D': pd.delivery_complete = true; break;
		case 'N': pd.no_recv = true; break;
		case 'k': pd.min_ok = atol(optarg); break;
		default:
			fprintf(stderr, "usage: peer_death -s|-c -A port [-p prov] [-n count] "
				"[-T s] [-D] [-N] [-k n]\n");
			return 2;
		}
	}
	if (!pd.port) {
		fprintf(stderr, "peer_death: -A port is required\n");
		return 2;
	}
	alarm((unsigned)pd.timeout_s + 10);
	ret = pd_setup(&pd);
	if (!ret)
		ret = pd.server ? pd_server(&pd) : pd_client(&pd);
	pd_close(&pd);
	if (ret) {
		fprintf(stderr, "peer_death: %s FAIL (%d)\n", pd.server ? "receiver" : "sender",
			ret);
		return 1;
	}
	return 0;
}
