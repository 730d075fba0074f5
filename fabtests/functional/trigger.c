/*
 * Triggered operations and endpoint aliases, in one process: endpoint A (domain 1) writes, sends
 * and adds to the memory and receives of endpoint B (domain 2). Checks: operations posted with
 * FI_TRIGGER (through an alias made with FI_TRANSMIT | FI_TRIGGER, and through *msg calls with
 * the flag) do nothing until their counter reaches the threshold, then run in full and complete
 * with their triggered context; a chain (a write that fires when the previous write completed,
 * a send when that one did); a counter the application moves (fi_cntr_add) fires an atomic; a
 * threshold already reached posts at once. And what must fail: FI_TRIGGER with a context that
 * is not a threshold trigger (-FI_EINVAL), closing a counter a trigger waits on (-FI_EBUSY),
 * closing an endpoint an alias still uses (-FI_EBUSY), an alias for both directions
 * (-FI_EINVAL); an endpoint that closes drops what never fired (its counter closes after);
 * more triggered writes than the transmit queue holds, fired at once, all run (those refused
 * for room retried on later passes).
 * Every wait is bounded. Exit 0 when every check held.
 */
#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_trigger.h>

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FT_CHECK_NAME "trigger"
#include "ft_check.h"

#define WAIT_MS 5000
#define KEY     0x4242




static struct fi_info *info;
static struct fid_fabric *fabric;
static struct fid_domain *dom_a, *dom_b;
static struct fid_av *av_a, *av_b;
static struct fid_ep *ep_a, *ep_b, *alias;
static struct fid_cq *cq_a, *cq_b;
static struct fid_cntr *wcntr, *appcntr;
static struct fid_mr *mr;
static fi_addr_t to_b;
static char target[4096], src[4096], rbuf[256];
static uint64_t addend = 5;


/* progress both sides for ms */
static void progress_both(void)
{
	fi_cq_read(cq_a, NULL, 0);
	fi_cq_read(cq_b, NULL, 0);
}

static void spin(unsigned ms)
{
	uint64_t end = now_ms() + ms;

	while (now_ms() < end)
		progress_both();
}

static int cq_wait(struct fid_cq *cq, struct fi_cq_data_entry *e)
{
	return ft_cq_wait_one(cq, e, WAIT_MS, progress_both);
}

static int open_all(void)
{
	struct fi_av_attr aa = { .type = FI_AV_TABLE };
	struct fi_cq_attr ca = { .format = FI_CQ_FORMAT_DATA };
	struct fi_cntr_attr ta = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC };
	char name[64];
	size_t len = sizeof(name);

	CALL(fi_fabric(info->fabric_attr, &fabric, NULL));
	CALL(fi_domain(fabric, info, &dom_a, NULL));
	CALL(fi_domain(fabric, info, &dom_b, NULL));
	CALL(fi_av_open(dom_a, &aa, &av_a, NULL));
	CALL(fi_av_open(dom_b, &aa, &av_b, NULL));
	CALL(fi_cq_open(dom_a, &ca, &cq_a, NULL));
	CALL(fi_cq_open(dom_b, &ca, &cq_b, NULL));
	CALL(fi_cntr_open(dom_a, &ta, &wcntr, NULL));
	CALL(fi_cntr_open(dom_a, &ta, &appcntr, NULL));
	CALL(fi_endpoint(dom_a, info, &ep_a, NULL));
	CALL(fi_endpoint(dom_b, info, &ep_b, NULL));
	CALL(fi_ep_bind(ep_a, &av_a->fid, 0));
	CALL(fi_ep_bind(ep_b, &av_b->fid, 0));
	CALL(fi_ep_bind(ep_a, &cq_a->fid, FI_TRANSMIT | FI_RECV));
	CALL(fi_ep_bind(ep_b, &cq_b->fid, FI_TRANSMIT | FI_RECV));
	/* every completed send, write and atomic of A */
	CALL(fi_ep_bind(ep_a, &wcntr->fid, FI_SEND | FI_WRITE));
	CALL(fi_enable(ep_a));
	CALL(fi_enable(ep_b));
	CALL(fi_mr_reg(dom_b, target, sizeof(target), FI_REMOTE_WRITE | FI_REMOTE_READ, 0, KEY, 0,
		       &mr, NULL));
	if (info->domain_attr->mr_mode & FI_MR_ENDPOINT) {
		CALL(fi_mr_bind(mr, &ep_b->fid, 0));
		CALL(fi_mr_enable(mr));
	}
	CALL(fi_getname(&ep_b->fid, name, &len));
	CHECK(fi_av_insert(av_a, name, 1, &to_b, 0, NULL) == 1, "av insert");
	return 0;
}

static uint64_t raddr(size_t off)
{
	return (info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)target + off
								: off;
}

static uint64_t rkey(void)
{
	return fi_mr_key(mr);
}

static int test_alias_flags(void)
{
	struct fid_ep *bad;
	uint64_t f = FI_TRANSMIT;

	CHECK(fi_ep_alias(ep_a, &bad, FI_TRANSMIT | FI_RECV) == -FI_EINVAL, "alias both ways");
	CALL(fi_ep_alias(ep_a, &alias, FI_TRANSMIT | FI_TRIGGER));
	CALL(fi_control(&alias->fid, FI_GETOPSFLAG, &f));
	CHECK(f == FI_TRIGGER, "alias transmit flags %#" PRIx64 ", want FI_TRIGGER", f);
	CHECK(fi_close(&ep_a->fid) == -FI_EBUSY, "endpoint closed under its alias");
	return 0;
}

/* write 1 (plain) completes -> wcntr 1 fires write 2 -> wcntr 2 fires the send */
static int test_chain(void)
{
	struct fi_triggered_context t_w2 = { .event_type = FI_TRIGGER_THRESHOLD },
				    t_send = { .event_type = FI_TRIGGER_THRESHOLD };
	struct iovec siov = { .iov_base = src + 200, .iov_len = 32 };
	struct fi_msg msg = { .msg_iov = &siov, .iov_count = 1, .addr = to_b, .context = &t_send };
	struct fi_cq_data_entry e;
	bool seen_w2 = false, seen_send = false, seen_w1 = false;

	memset(target, 0, sizeof(target));
	for (size_t i = 0; i < sizeof(src); i++)
		src[i] = (char)(i * 7 + 1);
	t_w2.trigger.threshold.cntr = wcntr;
	t_w2.trigger.threshold.threshold = 1;
	t_send.trigger.threshold.cntr = wcntr;
	t_send.trigger.threshold.threshold = 2;
	CALL(fi_recv(ep_b, rbuf, sizeof(rbuf), NULL, FI_ADDR_UNSPEC, (void *)0xb0));
	/* posted first, fire later: the alias's default flags carry FI_TRIGGER */
	CALL(fi_write(alias, src + 100, 100, NULL, to_b, raddr(100), rkey(), &t_w2));
	CALL(fi_sendmsg(ep_a, &msg, FI_TRIGGER | FI_COMPLETION));
	spin(100);
	CHECK(fi_cntr_read(wcntr) == 0, "counter %" PRIu64 " before anything ran",
	      fi_cntr_read(wcntr));
	CHECK(target[100] == 0 && target[199] == 0, "write 2 ran before its trigger");
	CHECK(fi_cq_read(cq_b, &e, 1) == -FI_EAGAIN, "the send ran before its trigger");
	CHECK(fi_close(&wcntr->fid) == -FI_EBUSY, "counter closed under waiting triggers");

	CALL(fi_write(ep_a, src, 100, NULL, to_b, raddr(0), rkey(), (void *)0xa1));
	for (int n = 0; n < 3; n++) {
		CALL(cq_wait(cq_a, &e));
		if (e.op_context == (void *)0xa1)
			seen_w1 = true;
		else if (e.op_context == &t_w2)
			seen_w2 = seen_w1;      /* after write 1, never before */
		else if (e.op_context == &t_send)
			seen_send = seen_w2;
		else
			CHECK(0, "completion with context %p", e.op_context);
	}
	CHECK(seen_w1 && seen_w2 && seen_send, "completions out of trigger order: w1 %d w2 %d "
	      "send %d", seen_w1, seen_w2, seen_send);
	CHECK(!memcmp(target, src, 200), "the two writes did not both land");
	CALL(cq_wait(cq_b, &e));
	CHECK(e.op_context == (void *)0xb0 && e.len == 32 && !memcmp(rbuf, src + 200, 32),
	      "the triggered send: context %p, %zu bytes", e.op_context, e.len);
	CHECK(fi_cntr_read(wcntr) == 3, "counter %" PRIu64 ", want 3", fi_cntr_read(wcntr));
	return 0;
}

/* an atomic waits for the application's own counter; a reached threshold posts at once */
static int test_app_counter(void)
{
	struct fi_triggered_context t_at = { .event_type = FI_TRIGGER_THRESHOLD },
				    t_now = { .event_type = FI_TRIGGER_THRESHOLD };
	struct fi_ioc ioc = { .addr = &addend, .count = 1 };
	struct fi_rma_ioc rioc = { .addr = raddr(512), .count = 1, .key = rkey() };
	struct fi_msg_atomic am = {
		.msg_iov = &ioc, .iov_count = 1, .addr = to_b, .rma_iov = &rioc,
		.rma_iov_count = 1, .datatype = FI_UINT64, .op = FI_SUM, .context = &t_at,
	};
	struct fi_cq_data_entry e;
	uint64_t *v = (uint64_t *)(target + 512);

	*v = 10;
	t_at.trigger.threshold.cntr = appcntr;
	t_at.trigger.threshold.threshold = 2;
	CALL(fi_atomicmsg(ep_a, &am, FI_TRIGGER | FI_COMPLETION));
	CALL(fi_cntr_add(appcntr, 1));
	spin(100);
	CHECK(*v == 10, "the atomic ran at counter 1 of 2 (value %" PRIu64 ")", *v);
	CALL(fi_cntr_add(appcntr, 1));
	CALL(cq_wait(cq_a, &e));
	CHECK(e.op_context == &t_at && (e.flags & FI_ATOMIC), "context %p flags %#" PRIx64,
	      e.op_context, (uint64_t)e.flags);
	CHECK(*v == 15, "target value %" PRIu64 ", want 15", *v);

	t_now.trigger.threshold.cntr = appcntr;
	t_now.trigger.threshold.threshold = 2;
	CALL(fi_write(alias, src, 8, NULL, to_b, raddr(1024), rkey(), &t_now));
	CALL(cq_wait(cq_a, &e));
	CHECK(e.op_context == &t_now && !memcmp(target + 1024, src, 8),
	      "a reached threshold did not post at once");
	return 0;
}

/* More triggered writes fire at once than the endpoint has room for (tx_size, 32 here): those
 * the engine refuses for room stay ready and go on later passes; every one runs and completes,
 * none in error */
static int test_fire_beyond_room(void)
{
	enum { OFF = 3000 };
	size_t n = info->tx_attr->size + 40, done = 0;
	struct fi_triggered_context *tc = calloc(n, sizeof(*tc));
	uint64_t at = fi_cntr_read(appcntr);
	struct fi_cq_data_entry e;

	CHECK(tc && OFF + n <= sizeof(target), "tx_size %zu too big for the test",
	      info->tx_attr->size);
	memset(target + OFF, 0, n);
	for (size_t i = 0; i < n; i++) {
		tc[i].event_type = FI_TRIGGER_THRESHOLD;
		tc[i].trigger.threshold.cntr = appcntr;
		tc[i].trigger.threshold.threshold = at + 1;
		src[OFF + i] = (char)(i % 250 + 1);
		CALL(fi_write(alias, src + OFF + i, 1, NULL, to_b, raddr(OFF + i), rkey(), &tc[i]));
	}
	spin(50);
	CHECK(target[OFF] == 0 && target[OFF + n - 1] == 0, "a write ran before its trigger");
	CALL(fi_cntr_add(appcntr, 1));
	while (done < n) {
		CALL(cq_wait(cq_a, &e));
		CHECK((struct fi_triggered_context *)e.op_context >= tc &&
		      (struct fi_triggered_context *)e.op_context < tc + n,
		      "completion with context %p", e.op_context);
		done++;
	}
	CHECK(!memcmp(target + OFF, src + OFF, n), "not every triggered write landed");
	CHECK(fi_cq_read(cq_a, &e, 1) == -FI_EAGAIN, "more completions than writes");
	free(tc);
	return 0;
}

static int test_misuse(void)
{
	struct fi_triggered_context t = { .event_type = FI_TRIGGER_THRESHOLD };
	struct fi_triggered_context bad = { .event_type = (enum fi_trigger_event)77 };

	CHECK(fi_write(alias, src, 8, NULL, to_b, raddr(0), rkey(), &bad) == -FI_EINVAL,
	      "a context of an unknown trigger event");
	CHECK(fi_write(alias, src, 8, NULL, to_b, raddr(0), rkey(), NULL) == -FI_EINVAL,
	      "FI_TRIGGER without a context");
	/* one that never fires: the endpoint's close drops it and frees its counter */
	t.trigger.threshold.cntr = appcntr;
	t.trigger.threshold.threshold = 1000;
	CALL(fi_write(alias, src, 8, NULL, to_b, raddr(0), rkey(), &t));
	CALL(fi_close(&alias->fid));
	alias = NULL;
	CALL(fi_close(&ep_a->fid));
	ep_a = NULL;
	CALL(fi_close(&appcntr->fid));
	appcntr = NULL;
	return 0;
}

static int close_ok(struct fid *fid, const char *what)
{
	int ret = fi_close(fid);

	CHECK(ret == 0, "closing %s: %d (%s)", what, ret, fi_strerror(-ret));
	return 0;
}

int main(int argc, char **argv)
{
	struct fi_info *hints = fi_allocinfo();
	int ret;

	if (!hints)
		return 2;
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_RMA | FI_ATOMIC | FI_TRIGGER;
	hints->addr_format = FI_SOCKADDR_IN;
	hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED |
				      FI_MR_ENDPOINT;
	hints->fabric_attr->prov_name = strdup(argc > 1 ? argv[1] : "courier");
	/* a small transmit queue, so that fire_beyond_room fires more than it holds */
	setenv("FI_COURIER_TX_SIZE", "32", 0);
	ret = fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", "0", FI_SOURCE, hints, &info);
	fi_freeinfo(hints);
	if (ret) {
		fprintf(stderr, "trigger: fi_getinfo: %s\n", fi_strerror(-ret));
		return 2;
	}
	CHECK(info->caps & FI_TRIGGER, "FI_TRIGGER not granted");
	if (open_all())
		return 1;
	printf("alias: %s\n", test_alias_flags() ? "FAILED" : "ok");
	printf("chain: %s\n", alias && !test_chain() ? "ok" : "FAILED");
	printf("application counter: %s\n", alias && !test_app_counter() ? "ok" : "FAILED");
	printf("fire beyond room: %s\n", alias && !test_fire_beyond_room() ? "ok" : "FAILED");
	printf("misuse: %s\n", alias && !test_misuse() ? "ok" : "FAILED");
	/* every close must succeed: a refused domain close would leave its progress thread */
	if (alias)
		close_ok(&alias->fid, "alias");
	if (ep_a)
		close_ok(&ep_a->fid, "endpoint a");
	close_ok(&mr->fid, "region");        /* bound to endpoint b: it goes first */
	close_ok(&ep_b->fid, "endpoint b");
	if (appcntr)
		close_ok(&appcntr->fid, "application counter");
	close_ok(&wcntr->fid, "write counter");
	close_ok(&cq_a->fid, "CQ a");
	close_ok(&cq_b->fid, "CQ b");
	close_ok(&av_a->fid, "AV a");
	close_ok(&av_b->fid, "AV b");
	close_ok(&dom_a->fid, "domain a");
	close_ok(&dom_b->fid, "domain b");
	close_ok(&fabric->fid, "fabric");
	fi_freeinfo(info);
	printf("trigger: %s\n", failures ? "FAILED" : "all checks held");
	return failures ? 1 : 0;
}
