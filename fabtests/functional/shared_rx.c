/*
 * Shared contexts in one process: three RDM endpoints of one domain take their receives from
 * one fi_srx_context and send through one fi_stx_context; a fourth endpoint, in another domain,
 * talks to them. Checks: a message to one endpoint takes the first receive posted to the
 * shared context and completes on that endpoint's CQ only, with its data; a message that
 * arrives before any receive (eager and rendezvous sizes) waits and is taken by the next
 * receive posted, on the right CQ; sends through the shared transmit context arrive; fi_cancel
 * on the shared context; a transmit context closed while endpoints use it (freed with the
 * last of them); and what must fail: closing a receive context endpoints still use
 * (-FI_EBUSY), binding a receive context to an endpoint with receives of its own
 * (-FI_EOPBADSTATE), posting to a context no enabled endpoint uses (-FI_EOPBADSTATE), sending
 * on a receive context (-FI_ENOSYS). Every wait is bounded. Exit 0 when every check held.
 */
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FT_CHECK_NAME "shared_rx"
#include "ft_check.h"

#define NEP    3
#define WAIT_MS 5000
#define BIG    (256 * 1024)




static struct fi_info *info;
static struct fid_fabric *fabric;
static struct fid_domain *dom_r, *dom_s;
static struct fid_av *av_r, *av_s;
static struct fid_ep *ep[NEP], *sender, *srx;
static struct fid_stx *stx;
static struct fid_cq *cq[NEP], *scq;
static fi_addr_t to[NEP];
static char *rbuf, *sbuf;


/* Progress every CQ until `want` has one entry (or an error): 1, 0 on timeout, -err */
static int poll_for(struct fid_cq *want, struct fi_cq_tagged_entry *e, bool *err)
{
	uint64_t end = now_ms() + WAIT_MS;
	struct fi_cq_err_entry ee;

	*err = false;
	while (now_ms() < end) {
		for (int i = 0; i < NEP; i++)
			if (cq[i] != want)
				fi_cq_read(cq[i], NULL, 0);   /* progress only */
		fi_cq_read(scq, NULL, 0);
		ssize_t n = fi_cq_read(want, e, 1);
		if (n == 1)
			return 1;
		if (n == -FI_EAVAIL) {
			memset(&ee, 0, sizeof(ee));
			fi_cq_readerr(want, &ee, 0);
			e->op_context = ee.op_context;
			e->flags = ee.flags;
			e->len = (size_t)ee.err;
			*err = true;
			return 1;
		}
	}
	return 0;
}

/* nothing waits on any receive CQ but `except` */
static int others_empty(int except)
{
	struct fi_cq_tagged_entry e;

	for (int i = 0; i < NEP; i++) {
		ssize_t n;

		if (i == except)
			continue;
		n = fi_cq_read(cq[i], &e, 1);
		CHECK(n == -FI_EAGAIN, "endpoint %d's CQ has %zd entries (context %p)", i, n,
		      n == 1 ? e.op_context : NULL);
	}
	return 0;
}

static int send_wait(int k, size_t len, char c)
{
	struct fi_cq_tagged_entry e;
	bool err;

	memset(sbuf, c, len);
	CALL(fi_send(sender, sbuf, len, NULL, to[k], (void *)0x5e));
	CHECK(poll_for(scq, &e, &err) == 1 && !err, "send to %d did not complete", k);
	return 0;
}

static int recv_check(int k, void *ctx, size_t len, char c)
{
	struct fi_cq_tagged_entry e;
	bool err;

	CHECK(poll_for(cq[k], &e, &err) == 1, "no receive completion on endpoint %d", k);
	CHECK(!err, "error completion %zu on endpoint %d", e.len, k);
	CHECK(e.op_context == ctx, "context %p, want %p", e.op_context, ctx);
	CHECK(e.len == len, "%zu bytes, want %zu", e.len, len);
	for (size_t i = 0; i < len; i++)
		CHECK(rbuf[i] == c, "byte %zu is %d, want %d", i, rbuf[i], c);
	return others_empty(k);
}

static int open_all(void)
{
	struct fi_av_attr aa = { .type = FI_AV_TABLE };
	struct fi_cq_attr ca = { .format = FI_CQ_FORMAT_TAGGED };
	char name[64];
	size_t len;

	CALL(fi_fabric(info->fabric_attr, &fabric, NULL));
	CALL(fi_domain(fabric, info, &dom_r, NULL));
	CALL(fi_domain(fabric, info, &dom_s, NULL));
	CALL(fi_av_open(dom_r, &aa, &av_r, NULL));
	CALL(fi_av_open(dom_s, &aa, &av_s, NULL));
	CALL(fi_srx_context(dom_r, info->rx_attr, &srx, NULL));
	CALL(fi_stx_context(dom_r, info->tx_attr, &stx, NULL));
	for (int i = 0; i < NEP; i++) {
		CALL(fi_cq_open(dom_r, &ca, &cq[i], NULL));
		CALL(fi_endpoint(dom_r, info, &ep[i], NULL));
		CALL(fi_ep_bind(ep[i], &av_r->fid, 0));
		CALL(fi_ep_bind(ep[i], &cq[i]->fid, FI_TRANSMIT | FI_RECV));
		CALL(fi_ep_bind(ep[i], &srx->fid, 0));
		CALL(fi_ep_bind(ep[i], &stx->fid, 0));
		/* one shared receive context per endpoint */
		CHECK(fi_ep_bind(ep[i], &srx->fid, 0) == -FI_EALREADY, "bound twice");
		if (i == 0) {
			/* no endpoint is enabled yet: nothing to post through */
			CHECK(fi_recv(srx, rbuf, 1, NULL, 0, NULL) == -FI_EOPBADSTATE,
			      "post with no enabled endpoint");
		}
		CALL(fi_enable(ep[i]));
		len = sizeof(name);
		CALL(fi_getname(&ep[i]->fid, name, &len));
		CHECK(fi_av_insert(av_s, name, 1, &to[i], 0, NULL) == 1, "av insert");
	}
	CALL(fi_cq_open(dom_s, &ca, &scq, NULL));
	CALL(fi_endpoint(dom_s, info, &sender, NULL));
	CALL(fi_ep_bind(sender, &av_s->fid, 0));
	CALL(fi_ep_bind(sender, &scq->fid, FI_TRANSMIT | FI_RECV));
	CALL(fi_enable(sender));
	len = sizeof(name);
	CALL(fi_getname(&sender->fid, name, &len));
	fi_addr_t back;
	CHECK(fi_av_insert(av_r, name, 1, &back, 0, NULL) == 1, "av insert");
	return 0;
}

/* receives posted first: each message takes the first receive, completes where it arrived */
static int test_posted(void)
{
	for (int k = NEP - 1; k >= 0; k--) {
		void *ctx = (void *)(uintptr_t)(0x100 + k);

		CALL(fi_recv(srx, rbuf, BIG, NULL, FI_ADDR_UNSPEC, ctx));
		if (send_wait(k, 1000 + (size_t)k, (char)('a' + k)) ||
		    recv_check(k, ctx, 1000 + (size_t)k, (char)('a' + k)))
			return -1;
	}
	return 0;
}

/* messages first (eager and rendezvous), receives after */
static int test_unexpected(void)
{
	size_t lens[2] = { 200, BIG };

	for (int j = 0; j < 2; j++) {
		int k = j + 1;
		void *ctx = (void *)(uintptr_t)(0x200 + j);

		memset(sbuf, 'u' + j, lens[j]);
		CALL(fi_send(sender, sbuf, lens[j], NULL, to[k], NULL));
		/* let it arrive and wait unexpected at endpoint k */
		for (uint64_t end = now_ms() + 200; now_ms() < end;) {
			fi_cq_read(cq[k], NULL, 0);
			fi_cq_read(scq, NULL, 0);
		}
		memset(rbuf, 0, BIG);
		CALL(fi_recv(srx, rbuf, BIG, NULL, FI_ADDR_UNSPEC, ctx));
		if (recv_check(k, ctx, lens[j], (char)('u' + j)))
			return -1;
		struct fi_cq_tagged_entry e;
		bool err;
		CHECK(poll_for(scq, &e, &err) == 1 && !err, "send %d did not complete", j);
	}
	return 0;
}

static int test_cancel(void)
{
	struct fi_cq_err_entry ee;
	int seen = 0, where = -1;

	CALL(fi_recv(srx, rbuf, 10, NULL, FI_ADDR_UNSPEC, (void *)0x300));
	CALL((int)fi_cancel(&srx->fid, (void *)0x300));
	CHECK(fi_cancel(&srx->fid, (void *)0x300) == -FI_ENOENT, "canceled twice");
	/* on the CQ of one of the endpoints that share the context */
	for (uint64_t end = now_ms() + WAIT_MS; now_ms() < end && !seen;) {
		for (int i = 0; i < NEP; i++) {
			if (fi_cq_read(cq[i], NULL, 0) != -FI_EAVAIL)
				continue;
			memset(&ee, 0, sizeof(ee));
			CHECK(fi_cq_readerr(cq[i], &ee, 0) == 1, "no error entry");
			CHECK(ee.err == FI_ECANCELED && ee.op_context == (void *)0x300,
			      "endpoint %d: err %d ctx %p", i, ee.err, ee.op_context);
			seen++;
			where = i;
		}
	}
	CHECK(seen == 1, "%d cancel completions", seen);
	return others_empty(where);
}

static int test_misuse(void)
{
	struct fid_ep *own = NULL, *srx2 = NULL;
	struct fi_cq_attr ca = { .format = FI_CQ_FORMAT_TAGGED };
	struct fid_cq *ocq = NULL;

	CHECK(fi_close(&srx->fid) == -FI_EBUSY, "closed a context in use");
	/* a transmit context closed in use goes with its last endpoint (Sandia OpenSHMEM closes
	 * its STXs before the endpoint that shares them) */
	CHECK(fi_close(&stx->fid) == 0, "a transmit context in use did not close");
	stx = NULL;
	CHECK(fi_send(srx, sbuf, 1, NULL, 0, NULL) == -FI_ENOSYS, "sent on a receive context");
	/* an endpoint with a receive of its own posted cannot take a shared context */
	CALL(fi_srx_context(dom_r, info->rx_attr, &srx2, NULL));
	CALL(fi_cq_open(dom_r, &ca, &ocq, NULL));
	CALL(fi_endpoint(dom_r, info, &own, NULL));
	CALL(fi_ep_bind(own, &av_r->fid, 0));
	CALL(fi_ep_bind(own, &ocq->fid, FI_TRANSMIT | FI_RECV));
	CALL(fi_enable(own));
	CALL(fi_recv(own, rbuf, 1, NULL, FI_ADDR_UNSPEC, NULL));
	CHECK(fi_ep_bind(own, &srx2->fid, 0) == -FI_EOPBADSTATE, "bound over posted receives");
	fi_close(&own->fid);
	fi_close(&ocq->fid);
	CHECK(fi_close(&srx2->fid) == 0, "close an unused context");
	return 0;
}

int main(int argc, char **argv)
{
	struct fi_info *hints = fi_allocinfo();
	int ret;

	if (!hints)
		return 2;
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_TAGGED;
	hints->ep_attr->tx_ctx_cnt = FI_SHARED_CONTEXT;
	hints->ep_attr->rx_ctx_cnt = FI_SHARED_CONTEXT;
	hints->addr_format = FI_SOCKADDR_IN;
	hints->fabric_attr->prov_name = strdup(argc > 1 ? argv[1] : "courier");
	ret = fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", "0", FI_SOURCE, hints, &info);
	fi_freeinfo(hints);
	if (ret) {
		fprintf(stderr, "shared_rx: fi_getinfo: %s\n", fi_strerror(-ret));
		return 2;
	}
	rbuf = calloc(1, BIG);
	sbuf = calloc(1, BIG);
	if (!rbuf || !sbuf || open_all())
		return 1;
	printf("posted: %s\n", test_posted() ? "FAILED" : "ok");
	printf("unexpected: %s\n", test_unexpected() ? "FAILED" : "ok");
	printf("cancel: %s\n", test_cancel() ? "FAILED" : "ok");
	printf("misuse: %s\n", test_misuse() ? "FAILED" : "ok");
	fi_close(&sender->fid);
	for (int i = 0; i < NEP; i++)
		fi_close(&ep[i]->fid);
	if (fi_close(&srx->fid) || (stx && fi_close(&stx->fid))) {
		fprintf(stderr, "shared_rx: contexts do not close once their endpoints did\n");
		failures++;
	}
	for (int i = 0; i < NEP; i++)
		fi_close(&cq[i]->fid);
	fi_close(&scq->fid);
	fi_close(&av_r->fid);
	fi_close(&av_s->fid);
	fi_close(&dom_r->fid);
	fi_close(&dom_s->fid);
	fi_close(&fabric->fid);
	fi_freeinfo(info);
	free(rbuf);
	free(sbuf);
	return failures ? 1 : 0;
}
