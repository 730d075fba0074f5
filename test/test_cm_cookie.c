/*
 * A keyed passive endpoint reports a connection request only when it proves freshness: the
 * CONNREQ repeats the cookie this passive endpoint gave its sender (COUR_CM_RETRY,
 * proto/cour_wire_fmt.h). The test plays a connecting endpoint that holds the key, from a UDP
 * socket of its own: a CONNREQ without a cookie or with a wrong one draws a RETRY and no
 * FI_CONNREQ; one with the cookie is reported once; the same datagram replayed to a new
 * passive endpoint on the same address (a job that ran before) is not.
 */
#include "fi/cour_fi.h"
#include "proto/cour_engine.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <poll.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_eq.h>
#include <unistd.h>

static const char key[] = "test_cm_cookie's shared secret!";

static struct {
	struct fi_info    *info;
	struct fid_fabric *fabric;
	struct fid_eq     *eq;
	struct fid_pep    *pep;
	struct cour_addr   pep_addr;
	struct sockaddr_in pep_sa;
	int                fd;         /* the connecting side's socket */
	struct cour_addr   me;
	struct cour_mac   *mac;
} t = { .fd = -1 };

static void pep_open(void)
{
	struct fi_eq_attr eq_attr = { .wait_obj = FI_WAIT_UNSPEC };
	size_t len = sizeof(t.pep_sa);

	cr_assert_eq(fi_eq_open(t.fabric, &eq_attr, &t.eq, NULL), 0);
	cr_assert_eq(fi_passive_ep(t.fabric, t.info, &t.pep, NULL), 0);
	cr_assert_eq(fi_pep_bind(t.pep, &t.eq->fid, 0), 0);
	cr_assert_eq(fi_listen(t.pep), 0);
	cr_assert_eq(fi_getname(&t.pep->fid, &t.pep_sa, &len), 0);
	cr_assert_eq(cour_addr_from_sockaddr(&t.pep_addr, &t.pep_sa, len), 0);
}

static void pep_close(void)
{
	cr_assert_eq(fi_close(&t.pep->fid), 0);
	cr_assert_eq(fi_close(&t.eq->fid), 0);
	t.pep = NULL;
	t.eq = NULL;
}

static void setup(void)
{
	struct fi_info *hints = fi_allocinfo();
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);

	cr_assert_not_null(hints);
	hints->ep_attr->type = FI_EP_MSG;
	hints->caps = FI_MSG;
	hints->addr_format = FI_SOCKADDR_IN;
	hints->domain_attr->auth_key = (uint8_t *)strdup(key);
	hints->domain_attr->auth_key_size = strlen(key);
	cr_assert_eq(cour_prov.getinfo(FI_VERSION(1, 17), "127.0.0.1", "0", FI_SOURCE, hints,
				       &t.info), 0);
	fi_freeinfo(hints);
	cr_assert_eq(cour_prov.fabric(t.info->fabric_attr, &t.fabric, NULL), 0);
	pep_open();
	t.fd = socket(AF_INET, SOCK_DGRAM, 0);
	cr_assert_geq(t.fd, 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(bind(t.fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(getsockname(t.fd, (struct sockaddr *)&sa, &sl), 0);
	cr_assert_eq(cour_addr_from_sockaddr(&t.me, &sa, sl), 0);
	t.mac = cour_mac_new(key, strlen(key), 60);
	cr_assert_not_null(t.mac);
}

static void teardown(void)
{
	if (t.pep)
		pep_close();
	if (t.fabric)
		fi_close(&t.fabric->fid);
	fi_freeinfo(t.info);
	cour_mac_free(t.mac);
	if (t.fd >= 0)
		close(t.fd);
	memset(&t, 0, sizeof(t));
	t.fd = -1;
}

TestSuite(cm_cookie, .init = setup, .fini = teardown, .timeout = 30);

/* A signed CONNREQ with that cookie into buf; its length. */
static size_t connreq(char *buf, uint64_t conn_id, uint64_t cookie)
{
	return cour_cm_pack(buf, t.mac, &t.me, &t.pep_addr, COUR_CM_CONNREQ, conn_id, cookie,
			    "hello", 5);
}

static void send_dgram(const char *buf, size_t len)
{
	cr_assert_eq(sendto(t.fd, buf, len, 0, (struct sockaddr *)&t.pep_sa, sizeof(t.pep_sa)),
		     (ssize_t)len);
}

/* The passive endpoint's answer within 1 s: a RETRY's cookie, or 0 when none came. */
static uint64_t retry_cookie(uint64_t conn_id)
{
	_Alignas(8) char buf[COUR_CM_DGRAM_MAX];
	struct pollfd p = { .fd = t.fd, .events = POLLIN };
	struct cour_mac_ends e;
	struct cour_cm_hdr cm;
	const uint8_t *data;
	uint64_t cookie;
	ssize_t n;

	if (poll(&p, 1, 1000) != 1)
		return 0;
	n = recv(t.fd, buf, sizeof(buf), 0);
	cr_assert_gt(n, COUR_MAC_LEN);
	cour_mac_ends_of(&e, &t.pep_addr, &t.me);
	cr_assert_eq(cour_mac_check_buf(t.mac, &e, buf, (size_t)n), COUR_MAC_OK,
		     "the RETRY is authenticated, from the passive endpoint to us");
	cr_assert(cour_cm_unpack(buf, (size_t)n - COUR_MAC_LEN, true, &cm, &cookie, &data));
	cr_assert_eq(cm.op, COUR_CM_RETRY);
	cr_assert_eq(cm.conn_id, conn_id);
	cr_assert_neq(cookie, 0);
	return cookie;
}

/* Forget what the passive endpoint sent so far (a REJECT after fi_reject). */
static void drain(void)
{
	char buf[COUR_CM_DGRAM_MAX];
	struct pollfd p = { .fd = t.fd, .events = POLLIN };

	while (poll(&p, 1, 100) == 1)
		(void)recv(t.fd, buf, sizeof(buf), 0);
}

/* Whether an FI_CONNREQ is reported within ms. */
static bool reported(int ms)
{
	struct fi_eq_cm_entry entry[2];
	uint32_t event;
	ssize_t n = fi_eq_sread(t.eq, &event, entry, sizeof(entry), ms, 0);

	if (n == -FI_EAGAIN)
		return false;
	cr_assert_gt(n, 0, "fi_eq_sread: %zd", n);
	cr_assert_eq(event, FI_CONNREQ);
	fi_reject(t.pep, entry[0].info->handle, NULL, 0);
	fi_freeinfo(entry[0].info);
	return true;
}

Test(cm_cookie, only_a_fresh_connreq_is_reported)
{
	_Alignas(8) char buf[COUR_CM_DGRAM_MAX];
	uint64_t id = 0x1d0000000000c0deULL, cookie;
	size_t len;

	/* no cookie: RETRY with one, nothing reported */
	send_dgram(buf, connreq(buf, id, 0));
	cookie = retry_cookie(id);
	cr_assert_neq(cookie, 0, "no RETRY for a CONNREQ without a cookie");
	cr_assert_not(reported(200), "reported without proof");
	/* a cookie it never gave: RETRY again, with the same cookie unless the half minute
	 * the cookie names has just turned (then the new one; both are accepted) */
	send_dgram(buf, connreq(buf, id, cookie ^ 1));
	uint64_t again = retry_cookie(id);
	cr_assert_neq(again, 0, "no RETRY for a CONNREQ with a wrong cookie");
	cr_assert_neq(again, cookie ^ 1);
	cr_assert_not(reported(200), "reported with a wrong cookie");
	cookie = again;
	/* the cookie: reported, once */
	len = connreq(buf, id, cookie);
	send_dgram(buf, len);
	cr_assert(reported(2000), "the fresh CONNREQ was not reported");
	/* a new passive endpoint on the same address: the recorded datagram, seconds old and
	 * new to its replay memory, must not be reported */
	struct sockaddr_in old = t.pep_sa;
	pep_close();
	t.info->src_addr = realloc(t.info->src_addr, sizeof(old));
	memcpy(t.info->src_addr, &old, sizeof(old));
	t.info->src_addrlen = sizeof(old);
	pep_open();
	cr_assert_eq(t.pep_sa.sin_port, old.sin_port);
	drain();
	send_dgram(buf, len);
	cr_assert_neq(retry_cookie(id), 0, "no RETRY for the recorded CONNREQ");
	cr_assert_not(reported(500), "a recorded CONNREQ was reported to a new passive endpoint");
}

/* A key's tag covers the sender's address, which a socket bound to every address has not:
 * a keyed passive endpoint refuses the wildcard address. */
Test(cm_cookie, keyed_passive_endpoint_refuses_the_wildcard_address)
{
	struct fi_info *hints = fi_allocinfo(), *info = NULL;
	struct fid_pep *pep = NULL;

	cr_assert_not_null(hints);
	hints->ep_attr->type = FI_EP_MSG;
	hints->caps = FI_MSG;
	hints->addr_format = FI_SOCKADDR_IN;
	hints->domain_attr->auth_key = (uint8_t *)strdup(key);
	hints->domain_attr->auth_key_size = strlen(key);
	cr_assert_eq(cour_prov.getinfo(FI_VERSION(1, 17), "0.0.0.0", "0", FI_SOURCE, hints,
				       &info), 0);
	cr_assert_eq(fi_passive_ep(t.fabric, info, &pep, NULL), -FI_EINVAL);
	fi_freeinfo(info);
	fi_freeinfo(hints);
}
