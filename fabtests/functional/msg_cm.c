/*
 * FI_EP_MSG connection management, both sides in one process (two domains of one fabric):
 * connect and accept with CM data both ways, data in both directions after FI_CONNECTED,
 * fi_getname/fi_getpeer, fi_shutdown reported to the peer (and the peer's own fi_shutdown
 * after it back), a closed peer reported with FI_SHUTDOWN, fi_reject with its data in the
 * FI_ECONNREFUSED error event, a connection to a closed port refused (ICMP) and one to a
 * socket that never answers timing out with FI_ETIMEDOUT (the peer timeout shortened by the
 * wrapper), and the calls that must fail: fi_connect twice, CM data
 * over FI_OPT_CM_DATA_SIZE, fi_accept on an endpoint not opened from a request, fi_enable and
 * fi_listen without an EQ, fi_reject of a request already answered.
 * Every wait is bounded (EQ_MS). Exit 0 when every check held.
 */
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include <arpa/inet.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FT_CHECK_NAME "msg_cm"
#include "ft_check.h"

#define EQ_MS 5000
#define CQ_MS 5000




static struct fi_info *hints, *info;
static struct fid_fabric *fabric;
static struct fid_eq *eq;

struct side {
	struct fid_domain *dom;
	struct fid_ep *ep;
	struct fid_cq *cq;
	char buf[4096];
};

/* The next EQ event, waited for at most EQ_MS: its type (or -FI_EAVAIL / -FI_EAGAIN) */
static ssize_t next_event(uint32_t *event, void *entry, size_t len)
{
	return fi_eq_sread(eq, event, entry, len, EQ_MS, 0);
}

/* The next event is `want`, from fid (NULL: any), with cm data of len bytes; the entry in ev */
static int expect(uint32_t want, struct fid *fid, size_t len, uint8_t *ev, size_t evlen)
{
	struct fi_eq_cm_entry *entry = (void *)ev;
	uint32_t event = 0;
	ssize_t n = next_event(&event, ev, evlen);

	CHECK(n == (ssize_t)(sizeof(*entry) + len) && event == want,
	      "got %zd bytes, event %u; want %zu bytes, event %u", n, event,
	      sizeof(*entry) + len, want);
	CHECK(!fid || entry->fid == fid, "event %u for another object", event);
	return 0;
}

static int open_side(struct side *s, struct fi_info *fi)
{
	struct fi_cq_attr ca = { .format = FI_CQ_FORMAT_MSG, .wait_obj = FI_WAIT_UNSPEC };

	CALL(fi_domain(fabric, fi, &s->dom, NULL));
	CALL(fi_cq_open(s->dom, &ca, &s->cq, NULL));
	CALL(fi_endpoint(s->dom, fi, &s->ep, s));
	CALL(fi_ep_bind(s->ep, &s->cq->fid, FI_TRANSMIT | FI_RECV));
	CALL(fi_ep_bind(s->ep, &eq->fid, 0));
	CALL(fi_enable(s->ep));
	return 0;
}

static void close_side(struct side *s)
{
	if (s->ep)
		fi_close(&s->ep->fid);
	if (s->cq)
		fi_close(&s->cq->fid);
	if (s->dom)
		fi_close(&s->dom->fid);
	memset(s, 0, sizeof(*s));
}

static int wait_cq(struct side *s, uint64_t want)
{
	struct fi_cq_msg_entry e;
	ssize_t n = fi_cq_sread(s->cq, &e, 1, NULL, CQ_MS);

	CHECK(n == 1, "no completion in %d ms: %zd (%s)", CQ_MS, n, fi_strerror((int)-n));
	CHECK((e.flags & want) == want, "completion flags 0x%llx, want 0x%llx",
	      (unsigned long long)e.flags, (unsigned long long)want);
	return 0;
}

/* s sends len bytes of pattern c to its peer, r receives them */
static int exchange(struct side *s, struct side *r, char c, size_t len)
{
	memset(r->buf, 0, sizeof(r->buf));
	CALL(fi_recv(r->ep, r->buf, sizeof(r->buf), NULL, 0, NULL));
	memset(s->buf, c, len);
	CALL(fi_send(s->ep, s->buf, len, NULL, 0, NULL));
	if (wait_cq(s, FI_SEND) || wait_cq(r, FI_RECV))
		return -1;
	for (size_t i = 0; i < len; i++)
		CHECK(r->buf[i] == c, "byte %zu is %d, sent %d", i, r->buf[i], c);
	return 0;
}

static struct fid_pep *listener(void)
{
	struct fid_pep *pep = NULL;

	if (fi_passive_ep(fabric, info, &pep, NULL) || fi_pep_bind(pep, &eq->fid, 0) ||
	    fi_listen(pep))
		return NULL;
	return pep;
}

/* the listener's address, for fi_connect */
static int pep_addr(struct fid_pep *pep, struct sockaddr_in *sin)
{
	size_t len = sizeof(*sin);

	CALL(fi_getname(&pep->fid, sin, &len));
	CHECK(len == sizeof(*sin), "address of %zu bytes", len);
	if (sin->sin_addr.s_addr == htonl(INADDR_ANY))
		sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return 0;
}

/* A full connection: cm data both ways, data both ways, names, shutdown both ways */
static int test_connect_accept(void)
{
	struct side a = { 0 }, p = { 0 };
	struct fid_pep *pep = listener();
	struct sockaddr_in to, peer, name;
	uint8_t ev[sizeof(struct fi_eq_cm_entry) + 256];
	struct fi_eq_cm_entry *entry = (void *)ev;
	char req[] = "connect-data", rep[] = "accept-data!";
	uint32_t event;
	size_t len;
	ssize_t n;
	int ret = -1;

	CHECK(pep, "no listener");
	if (pep_addr(pep, &to) || open_side(&a, info))
		goto out;
	CALL(fi_connect(a.ep, &to, req, sizeof(req)));
	/* fi_connect only once in an endpoint's life */
	CHECK(fi_connect(a.ep, &to, NULL, 0) == -FI_EOPBADSTATE, "second fi_connect accepted");
	n = next_event(&event, ev, sizeof(ev));
	CHECK(n == (ssize_t)(sizeof(*entry) + sizeof(req)) && event == FI_CONNREQ,
	      "got %zd, event %u", n, event);
	CHECK(entry->fid == &pep->fid, "FI_CONNREQ not from the listener");
	CHECK(!memcmp(entry->data, req, sizeof(req)), "connect data changed");
	CHECK(entry->info && entry->info->handle, "FI_CONNREQ without info or handle");
	CHECK(entry->info->ep_attr->type == FI_EP_MSG, "info type %d",
	      entry->info->ep_attr->type);
	if (open_side(&p, entry->info))
		goto out;
	CALL(fi_accept(p.ep, rep, sizeof(rep)));
	/* the request is taken: rejecting it now fails */
	CHECK(fi_reject(pep, entry->info->handle, NULL, 0) == -FI_EINVAL,
	      "reject of an accepted request");
	fi_freeinfo(entry->info);
	for (int seen = 0; seen < 2;) {
		n = next_event(&event, ev, sizeof(ev));
		CHECK(n >= (ssize_t)sizeof(*entry) && event == FI_CONNECTED,
		      "got %zd, event %u", n, event);
		if (entry->fid == &a.ep->fid) {
			CHECK(n == (ssize_t)(sizeof(*entry) + sizeof(rep)) &&
			      !memcmp(entry->data, rep, sizeof(rep)), "accept data: %zd bytes", n);
		} else {
			CHECK(entry->fid == &p.ep->fid, "FI_CONNECTED from elsewhere");
		}
		seen++;
	}
	if (exchange(&a, &p, 'a', 100) || exchange(&p, &a, 'p', 3000))
		goto out;
	/* the peer of each is the other's name; the accepted endpoint shares the listener's */
	len = sizeof(peer);
	CALL(fi_getpeer(a.ep, &peer, &len));
	len = sizeof(name);
	CALL(fi_getname(&p.ep->fid, &name, &len));
	CHECK(peer.sin_port == name.sin_port && peer.sin_port == to.sin_port,
	      "peer port %u, accepted endpoint %u, listener %u", ntohs(peer.sin_port),
	      ntohs(name.sin_port), ntohs(to.sin_port));
	/* fi_shutdown: the peer hears it, then answers with its own */
	CALL(fi_shutdown(a.ep, 0));
	if (expect(FI_SHUTDOWN, &p.ep->fid, 0, ev, sizeof(ev)))
		goto out;
	CALL(fi_shutdown(p.ep, 0));
	if (expect(FI_SHUTDOWN, &a.ep->fid, 0, ev, sizeof(ev)))
		goto out;
	ret = 0;
out:
	close_side(&a);
	close_side(&p);
	if (pep)
		fi_close(&pep->fid);
	return ret;
}

/* Closing a connected endpoint: its peer gets FI_SHUTDOWN */
static int test_peer_close(void)
{
	struct side a = { 0 }, p = { 0 };
	struct fid_pep *pep = listener();
	struct sockaddr_in to;
	uint8_t ev[sizeof(struct fi_eq_cm_entry) + 256];
	struct fi_eq_cm_entry *entry = (void *)ev;
	int ret = -1;

	CHECK(pep, "no listener");
	if (pep_addr(pep, &to) || open_side(&a, info))
		goto out;
	CALL(fi_connect(a.ep, &to, NULL, 0));
	if (expect(FI_CONNREQ, &pep->fid, 0, ev, sizeof(ev)) || open_side(&p, entry->info))
		goto out;
	fi_freeinfo(entry->info);
	CALL(fi_accept(p.ep, NULL, 0));
	/* the accepting side's first: it is connected when it accepts */
	if (expect(FI_CONNECTED, &p.ep->fid, 0, ev, sizeof(ev)) ||
	    expect(FI_CONNECTED, &a.ep->fid, 0, ev, sizeof(ev)) ||
	    exchange(&p, &a, 'x', 10))
		goto out;
	close_side(&p);
	if (expect(FI_SHUTDOWN, &a.ep->fid, 0, ev, sizeof(ev)))
		goto out;
	ret = 0;
out:
	close_side(&a);
	close_side(&p);
	if (pep)
		fi_close(&pep->fid);
	return ret;
}

/* fi_reject: FI_ECONNREFUSED at the connecting side, with the data */
static int test_reject(void)
{
	struct side a = { 0 };
	struct fid_pep *pep = listener();
	struct sockaddr_in to;
	uint8_t ev[sizeof(struct fi_eq_cm_entry) + 256];
	struct fi_eq_cm_entry *entry = (void *)ev;
	struct fi_eq_err_entry err = { 0 };
	char why[] = "go away";
	uint32_t event;
	ssize_t n;
	fid_t handle;
	int ret = -1;

	CHECK(pep, "no listener");
	if (pep_addr(pep, &to) || open_side(&a, info))
		goto out;
	CALL(fi_connect(a.ep, &to, NULL, 0));
	n = next_event(&event, ev, sizeof(ev));
	CHECK(n == sizeof(*entry) && event == FI_CONNREQ, "got %zd, event %u", n, event);
	handle = entry->info->handle;
	CALL(fi_reject(pep, handle, why, sizeof(why)));
	CHECK(fi_reject(pep, handle, NULL, 0) == -FI_EINVAL, "second reject accepted");
	fi_freeinfo(entry->info);
	n = next_event(&event, ev, sizeof(ev));
	CHECK(n == -FI_EAVAIL, "got %zd, event %u, want an error", n, event);
	CHECK(fi_eq_readerr(eq, &err, 0) == sizeof(err), "no error entry");
	CHECK(err.err == FI_ECONNREFUSED && err.fid == &a.ep->fid, "err %d", err.err);
	CHECK(err.err_data_size == sizeof(why) && !memcmp(err.err_data, why, sizeof(why)),
	      "reject data: %zu bytes", err.err_data_size);
	ret = 0;
out:
	close_side(&a);
	if (pep)
		fi_close(&pep->fid);
	return ret;
}

/* fi_connect to where nothing listens (ICMP port unreachable: FI_ECONNREFUSED at once), or
 * to a socket that never answers (FI_ETIMEDOUT once the shortened peer timeout passes) */
static int connect_fails(bool silent, int want)
{
	struct side a = { 0 };
	struct sockaddr_in to = { .sin_family = AF_INET };
	socklen_t tl = sizeof(to);
	struct fi_eq_err_entry err = { 0 };
	struct fi_eq_cm_entry entry;
	uint32_t event;
	ssize_t n;
	int ret = -1, hole;

	/* a bound UDP socket that nobody reads: datagrams vanish without an answer */
	hole = socket(AF_INET, SOCK_DGRAM, 0);
	to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(hole >= 0 && bind(hole, (struct sockaddr *)&to, sizeof(to)) == 0 &&
	      getsockname(hole, (struct sockaddr *)&to, &tl) == 0, "no socket");
	if (!silent)
		close(hole);     /* its port is free again: ICMP port unreachable */
	if (open_side(&a, info))
		goto out;
	CALL(fi_connect(a.ep, &to, NULL, 0));
	n = next_event(&event, &entry, sizeof(entry));
	CHECK(n == -FI_EAVAIL, "got %zd, event %u, want an error", n, event);
	CHECK(fi_eq_readerr(eq, &err, 0) == sizeof(err), "no error entry");
	CHECK(err.err == want && err.fid == &a.ep->fid, "err %d, want %d", err.err, want);
	ret = 0;
out:
	close_side(&a);
	if (silent)
		close(hole);
	return ret;
}

static int test_nobody_listens(void)
{
	return connect_fails(false, FI_ECONNREFUSED);
}

static int test_nobody_answers(void)
{
	return connect_fails(true, FI_ETIMEDOUT);
}

/* The calls that must fail */
static int test_misuse(void)
{
	struct side a = { 0 };
	struct fid_pep *pep = NULL;
	struct fid_eq *other = NULL;
	struct fi_eq_attr attr = { .wait_obj = FI_WAIT_UNSPEC };
	struct fi_cq_attr ca = { .format = FI_CQ_FORMAT_MSG };
	struct sockaddr_in to = { .sin_family = AF_INET };
	char big[257] = { 0 };
	size_t v = 0, len = sizeof(v);
	int ret = -1;

	CALL(fi_passive_ep(fabric, info, &pep, NULL));
	CHECK(fi_listen(pep) == -FI_ENOEQ, "fi_listen without an EQ");
	{
		/* a second listener on the same address is refused, as TCP's bind is */
		struct fid_pep *pep2 = NULL;
		struct sockaddr_in at;
		size_t al = sizeof(at);

		CALL(fi_getname(&pep->fid, &at, &al));
		CALL(fi_passive_ep(fabric, info, &pep2, NULL));
		CHECK(fi_setname(&pep2->fid, &at, al) == -FI_EADDRINUSE,
		      "two listeners on one port");
		fi_close(&pep2->fid);
	}
	CALL(fi_getopt(&pep->fid, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &v, &len));
	CHECK(v == 256, "cm data size %zu", v);
	/* an endpoint without an EQ cannot be enabled */
	CALL(fi_domain(fabric, info, &a.dom, NULL));
	CALL(fi_cq_open(a.dom, &ca, &a.cq, NULL));
	CALL(fi_endpoint(a.dom, info, &a.ep, NULL));
	CALL(fi_ep_bind(a.ep, &a.cq->fid, FI_TRANSMIT | FI_RECV));
	CHECK(fi_enable(a.ep) == -FI_ENOEQ, "fi_enable without an EQ");
	CALL(fi_eq_open(fabric, &attr, &other, NULL));
	CALL(fi_ep_bind(a.ep, &other->fid, 0));
	CALL(fi_enable(a.ep));
	CHECK(fi_accept(a.ep, NULL, 0) == -FI_EOPBADSTATE, "accept without a request");
	to.sin_port = htons(9);
	to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(fi_connect(a.ep, &to, big, sizeof(big)) == -FI_EINVAL, "257 bytes of cm data");
	CHECK(fi_shutdown(a.ep, 0) == -FI_ENOTCONN, "shutdown before a connection");
	len = sizeof(to);
	CHECK(fi_getpeer(a.ep, &to, &len) == -FI_ENOTCONN, "a peer before a connection");
	ret = 0;

	close_side(&a);
	if (other)
		fi_close(&other->fid);
	if (pep)
		fi_close(&pep->fid);
	return ret;
}

int main(int argc, char **argv)
{
	struct fi_eq_attr attr = { .wait_obj = FI_WAIT_UNSPEC };
	const char *prov = argc > 1 ? argv[1] : "courier";
	struct {
		const char *name;
		int (*fn)(void);
	} tests[] = {
		{ "connect_accept", test_connect_accept },
		{ "peer_close", test_peer_close },
		{ "reject", test_reject },
		{ "misuse", test_misuse },
		{ "nobody_listens", test_nobody_listens },
		{ "nobody_answers", test_nobody_answers },
	};
	int ret;

	hints = fi_allocinfo();
	if (!hints)
		return 2;
	hints->ep_attr->type = FI_EP_MSG;
	hints->caps = FI_MSG;
	hints->addr_format = FI_SOCKADDR_IN;
	hints->fabric_attr->prov_name = strdup(prov);
	ret = fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", "0", FI_SOURCE, hints, &info);
	if (ret) {
		fprintf(stderr, "msg_cm: fi_getinfo: %s\n", fi_strerror(-ret));
		return 2;
	}
	if (fi_fabric(info->fabric_attr, &fabric, NULL) || fi_eq_open(fabric, &attr, &eq, NULL)) {
		fprintf(stderr, "msg_cm: no fabric or EQ\n");
		return 2;
	}
	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		int f = failures;

		tests[i].fn();
		printf("%s: %s\n", tests[i].name, failures == f ? "ok" : "FAILED");
		/* nothing of one test may be left for the next */
		uint8_t ev[sizeof(struct fi_eq_cm_entry) + 256];
		uint32_t event;
		while (fi_eq_read(eq, &event, ev, sizeof(ev), 0) > 0 ||
		       fi_eq_readerr(eq, &(struct fi_eq_err_entry){ 0 }, 0) > 0)
			;
	}
	fi_close(&eq->fid);
	fi_close(&fabric->fid);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	return failures ? 1 : 0;
}
