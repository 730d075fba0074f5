/*
 * Address vector unit tests: cour_av.c over a hand-built domain, driven through the public
 * fi_av_* inlines. The EQ is a fake that records what the AV writes (cour_eq_write_err is
 * defined here for the same reason), so these tests pin the AV's side of the contract only.
 */
#include "fi/cour_av.h"
#include "fi/cour_cq.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* asynchronous AVs (FI_EVENT, fi_av_bind) are libfabric 1.x API that 2.x deprecates: courier
 * serves them all the same, and these tests call them */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

static struct cour_domain dom;
static struct fi_ops_domain test_domain_ops = {
	.size = sizeof(struct fi_ops_domain),
	.av_open = cour_av_open,
};

static void domain_setup(int addr_format)
{
	memset(&dom, 0, sizeof(dom));
	dom.info = fi_allocinfo();
	cr_assert_not_null(dom.info);
	dom.info->addr_format = addr_format;
	cour_lock_init(&dom.lock, COUR_LOCK_MUTEX);
	dom.domain_fid.fid.fclass = FI_CLASS_DOMAIN;
	dom.domain_fid.ops = &test_domain_ops;
}

static void setup_in(void) { domain_setup(FI_SOCKADDR_IN); }
static void setup_in6(void) { domain_setup(FI_SOCKADDR_IN6); }

static void teardown(void)
{
	cr_expect_eq(dom.refcnt, 0, "objects left open on the domain: %d", dom.refcnt);
	cr_expect_eq(dom.lock.held, 0, "progress lock left held");
	fi_freeinfo(dom.info);
	cour_lock_destroy(&dom.lock);
}

TestSuite(av, .init = setup_in, .fini = teardown, .timeout = 30);
TestSuite(av6, .init = setup_in6, .fini = teardown, .timeout = 30);

static struct fid_av *open_av(enum fi_av_type type, size_t count, uint64_t flags)
{
	struct fi_av_attr attr = { .type = type, .count = count, .flags = flags };
	struct fid_av *av = NULL;

	cr_assert_eq(fi_av_open(&dom.domain_fid, &attr, &av, NULL), 0);
	cr_assert_not_null(av);
	return av;
}

static struct sockaddr_in sin4(const char *ip, uint16_t port)
{
	struct sockaddr_in s = { .sin_family = AF_INET, .sin_port = htons(port) };

	cr_assert_eq(inet_pton(AF_INET, ip, &s.sin_addr), 1, "bad test address %s", ip);
	return s;
}

/* 10.(i>>16).(i>>8).(i) : 1000 + i % 50000, distinct for every i < 2^24 */
static struct sockaddr_in nth_addr(uint32_t i)
{
	struct sockaddr_in s = { .sin_family = AF_INET, .sin_port = htons(1000 + i % 50000) };

	s.sin_addr.s_addr = htonl((10u << 24) | (i & 0xffffff));
	return s;
}

static void expect_lookup4(struct fid_av *av, fi_addr_t fa, const struct sockaddr_in *want)
{
	struct sockaddr_in got;
	size_t len = sizeof(got);

	memset(&got, 0xa5, sizeof(got));
	cr_assert_eq(fi_av_lookup(av, fa, &got, &len), 0, "lookup of fi_addr %" PRIu64, fa);
	cr_assert_eq(len, sizeof(struct sockaddr_in));
	cr_assert_eq(got.sin_family, AF_INET);
	cr_assert_eq(got.sin_port, want->sin_port, "fi_addr %" PRIu64 ": port %u, want %u", fa,
		     ntohs(got.sin_port), ntohs(want->sin_port));
	cr_assert_eq(got.sin_addr.s_addr, want->sin_addr.s_addr, "fi_addr %" PRIu64, fa);
}

static fi_addr_t reverse4(struct fid_av *av, const struct sockaddr_in *s)
{
	struct cour_av *cav = COUR_CONTAINER_OF(av, struct cour_av, av_fid);
	struct cour_addr a;
	fi_addr_t fa;

	cr_assert_eq(cour_addr_from_sockaddr(&a, s, sizeof(*s)), 0);
	cour_lock_acquire(&dom.lock);
	fa = cour_av_reverse_locked(cav, &a);
	cour_lock_release(&dom.lock);
	return fa;
}

/* ---- open / close ---- */

Test(av, open_checks_attributes_and_counts_domain_refs)
{
	struct fi_av_attr attr = { .type = FI_AV_UNSPEC };
	struct fid_av *av = NULL;

	cr_assert_eq(fi_av_open(&dom.domain_fid, &attr, &av, NULL), 0);
	cr_expect_eq(attr.type, FI_AV_TABLE, "FI_AV_UNSPEC must be resolved in attr->type");
	cr_expect_eq(dom.refcnt, 1);

	struct cour_av *cav = COUR_CONTAINER_OF(av, struct cour_av, av_fid);
	cour_ref_inc(&cav->refcnt);           /* an endpoint bound to it */
	cr_expect_eq(fi_close(&av->fid), -FI_EBUSY);
	cour_ref_dec(&cav->refcnt);
	cr_assert_eq(fi_close(&av->fid), 0);
	cr_expect_eq(dom.refcnt, 0);

	/* fi_rx_addr bits (scalable endpoints): up to 32, above the 32-bit index */
	struct fi_av_attr bad = { .type = FI_AV_MAP, .rx_ctx_bits = 2 };
	cr_assert_eq(fi_av_open(&dom.domain_fid, &bad, &av, NULL), 0);
	cr_assert_eq(fi_close(&av->fid), 0);
	bad = (struct fi_av_attr){ .type = FI_AV_MAP, .rx_ctx_bits = 33 };
	cr_expect_eq(fi_av_open(&dom.domain_fid, &bad, &av, NULL), -FI_EINVAL);
	/* named: shared between processes (fabtests/functional/shared_av.c tests the sharing) */
	char name[64];
	snprintf(name, sizeof(name), "courier-unit-av.%d", (int)getpid());
	bad = (struct fi_av_attr){ .type = FI_AV_MAP, .name = name };
	cr_assert_eq(fi_av_open(&dom.domain_fid, &bad, &av, NULL), 0);
	cr_expect_neq(bad.map_addr, NULL, "a named AV returns its map_addr");
	cr_assert_eq(fi_close(&av->fid), 0);
	bad = (struct fi_av_attr){ .type = FI_AV_MAP, .name = name, .flags = FI_READ };
	cr_expect_eq(fi_av_open(&dom.domain_fid, &bad, &av, NULL), -FI_ENOENT,
		     "the creator's close removes the name");
	bad = (struct fi_av_attr){ .type = FI_AV_MAP, .flags = FI_READ };
	cr_expect_eq(fi_av_open(&dom.domain_fid, &bad, &av, NULL), -FI_EINVAL);
	bad = (struct fi_av_attr){ .type = FI_AV_MAP, .flags = FI_AV_USER_ID };
	cr_expect_eq(fi_av_open(&dom.domain_fid, &bad, &av, NULL), -FI_EBADFLAGS);
	bad = (struct fi_av_attr){ .type = (enum fi_av_type)42 };
	cr_expect_eq(fi_av_open(&dom.domain_fid, &bad, &av, NULL), -FI_EINVAL);
	bad = (struct fi_av_attr){ .type = FI_AV_TABLE, .flags = FI_SYMMETRIC };
	cr_assert_eq(fi_av_open(&dom.domain_fid, &bad, &av, NULL), 0);
	cr_assert_eq(fi_close(&av->fid), 0);
	cr_expect_eq(dom.refcnt, 0);
}

Test(av, open_refuses_a_domain_without_sockaddr_format)
{
	struct fi_av_attr attr = { .type = FI_AV_TABLE };
	struct fid_av *av = NULL;

	dom.info->addr_format = FI_ADDR_STR;
	cr_expect_eq(fi_av_open(&dom.domain_fid, &attr, &av, NULL), -FI_EINVAL);
	cr_expect_null(av);
}

/* ---- insert and lookup ---- */

Test(av, table_indices_follow_insertion_order_across_calls)
{
	struct fid_av *av = open_av(FI_AV_TABLE, 4, 0);
	struct sockaddr_in a[8];
	fi_addr_t fa[8];
	int i;

	for (i = 0; i < 8; i++)
		a[i] = nth_addr((uint32_t)i * 7 + 1);
	cr_assert_eq(fi_av_insert(av, a, 5, fa, 0, NULL), 5);
	cr_assert_eq(fi_av_insert(av, &a[5], 3, &fa[5], 0, NULL), 3);
	for (i = 0; i < 8; i++) {
		cr_expect_eq(fa[i], (fi_addr_t)i);
		expect_lookup4(av, fa[i], &a[i]);
	}
	/* fi_addr may be NULL: the index is still the next one */
	struct sockaddr_in extra = nth_addr(999);
	cr_assert_eq(fi_av_insert(av, &extra, 1, NULL, 0, NULL), 1);
	expect_lookup4(av, 8, &extra);
	cr_assert_eq(fi_close(&av->fid), 0);
}

Test(av, map_also_returns_usable_handles)
{
	struct fid_av *av = open_av(FI_AV_MAP, 0, 0);
	struct sockaddr_in a[3] = { nth_addr(1), nth_addr(2), nth_addr(3) };
	fi_addr_t fa[3] = { 77, 77, 77 };
	int i;

	cr_assert_eq(fi_av_insert(av, a, 3, fa, FI_MORE, NULL), 3);
	for (i = 0; i < 3; i++)
		expect_lookup4(av, fa[i], &a[i]);
	cr_expect_neq(fa[0], fa[1]);
	cr_expect_neq(fa[1], fa[2]);
	cr_assert_eq(fi_close(&av->fid), 0);
}

Test(av, grows_far_past_the_count_hint)
{
	enum { N = 10000 };
	struct fid_av *av = open_av(FI_AV_TABLE, 4, 0);
	uint32_t i;

	for (i = 0; i < N; i++) {
		struct sockaddr_in a = nth_addr(i);
		fi_addr_t fa = FI_ADDR_NOTAVAIL;

		cr_assert_eq(fi_av_insert(av, &a, 1, &fa, 0, NULL), 1);
		cr_assert_eq(fa, (fi_addr_t)i);
	}
	for (i = 0; i < N; i++) {
		struct sockaddr_in a = nth_addr(i);

		expect_lookup4(av, i, &a);
		cr_assert_eq(reverse4(av, &a), (fi_addr_t)i);
	}
	struct sockaddr_in out;
	size_t len = sizeof(out);
	cr_expect_eq(fi_av_lookup(av, N, &out, &len), -FI_EINVAL);
	cr_expect_eq(fi_av_lookup(av, FI_ADDR_NOTAVAIL, &out, &len), -FI_EINVAL);
	cr_expect_eq(len, sizeof(out), "addrlen must not change on failure");
	cr_assert_eq(fi_close(&av->fid), 0);
}

Test(av, lookup_truncates_and_reports_the_full_size)
{
	struct fid_av *av = open_av(FI_AV_TABLE, 0, 0);
	struct sockaddr_in a = sin4("192.168.7.9", 4242), got;
	uint8_t small[4];
	size_t len = sizeof(small);

	cr_assert_eq(fi_av_insert(av, &a, 1, NULL, 0, NULL), 1);
	memset(small, 0, sizeof(small));
	cr_assert_eq(fi_av_lookup(av, 0, small, &len), 0);
	cr_expect_eq(len, sizeof(struct sockaddr_in));
	memcpy(&got, &a, sizeof(got));
	cr_expect_arr_eq(small, &got, sizeof(small), "the first bytes must be the address's");

	len = 0;
	cr_assert_eq(fi_av_lookup(av, 0, NULL, &len), 0);
	cr_expect_eq(len, sizeof(struct sockaddr_in));
	cr_assert_eq(fi_close(&av->fid), 0);
}

Test(av, bad_addresses_fail_alone_with_sync_err)
{
	struct fid_av *av = open_av(FI_AV_TABLE, 0, 0);
	struct sockaddr_in a[3] = { nth_addr(1), nth_addr(2), nth_addr(3) };
	fi_addr_t fa[3];
	int err[3] = { -1, -1, -1 };

	a[1].sin_family = AF_UNIX;
	cr_assert_eq(fi_av_insert(av, a, 3, fa, FI_SYNC_ERR, err), 2);
	cr_expect_eq(err[0], 0);
	cr_expect_eq(err[1], FI_EINVAL);
	cr_expect_eq(err[2], 0);
	cr_expect_eq(fa[0], 0);
	cr_expect_eq(fa[1], FI_ADDR_NOTAVAIL);
	cr_expect_eq(fa[2], 1, "a failed address takes no index");
	expect_lookup4(av, 1, &a[2]);

	/* without FI_SYNC_ERR the count alone tells */
	cr_expect_eq(fi_av_insert(av, a, 3, NULL, 0, NULL), 2);
	cr_expect_eq(fi_av_insert(av, a, 3, fa, FI_AV_USER_ID, NULL), -FI_EBADFLAGS);
	cr_expect_eq(fi_av_insert(av, a, 3, fa, FI_SYNC_ERR, NULL), -FI_EINVAL);
	cr_expect_eq(fi_av_insert(av, NULL, 3, fa, 0, NULL), -FI_EINVAL);
	cr_expect_eq(fi_av_insert(av, NULL, 0, NULL, 0, NULL), 0);
	cr_assert_eq(fi_close(&av->fid), 0);
}

/* ---- remove ---- */

Test(av, remove_then_reinsert_gives_a_new_index)
{
	struct fid_av *av = open_av(FI_AV_TABLE, 0, 0);
	struct cour_av *cav = COUR_CONTAINER_OF(av, struct cour_av, av_fid);
	struct sockaddr_in a[3] = { nth_addr(10), nth_addr(11), nth_addr(12) }, out;
	fi_addr_t fa[3], again, one = 1;
	size_t len = sizeof(out);
	uint64_t gen = cav->generation;

	cr_assert_eq(fi_av_insert(av, a, 3, fa, 0, NULL), 3);
	cr_assert_eq(fi_av_remove(av, &one, 1, 0), 0);
	cr_expect_eq(cav->generation, gen + 1);
	cr_expect_eq(fi_av_lookup(av, 1, &out, &len), -FI_EINVAL);
	cr_expect_eq(reverse4(av, &a[1]), FI_ADDR_NOTAVAIL);
	expect_lookup4(av, 0, &a[0]);
	expect_lookup4(av, 2, &a[2]);

	cr_assert_eq(fi_av_insert(av, &a[1], 1, &again, 0, NULL), 1);
	cr_expect_eq(again, 3, "indices are never reused");
	expect_lookup4(av, 3, &a[1]);
	cr_expect_eq(reverse4(av, &a[1]), 3);
	cr_expect_eq(fi_av_lookup(av, 1, &out, &len), -FI_EINVAL, "the old index stays dead");

	cr_expect_eq(fi_av_remove(av, &one, 1, 0), -FI_EINVAL, "double remove");
	cr_expect_eq(cav->generation, gen + 1);
	cr_expect_eq(fi_av_remove(av, &one, 1, FI_MORE), -FI_EBADFLAGS);
	cr_assert_eq(fi_close(&av->fid), 0);
}

Test(av, remove_skips_invalid_entries_but_reports_them)
{
	struct fid_av *av = open_av(FI_AV_TABLE, 0, 0);
	struct sockaddr_in a[3] = { nth_addr(1), nth_addr(2), nth_addr(3) }, out;
	fi_addr_t rm[3] = { 0, 99, 2 };
	size_t len = sizeof(out);

	cr_assert_eq(fi_av_insert(av, a, 3, NULL, 0, NULL), 3);
	cr_expect_eq(fi_av_remove(av, rm, 3, 0), -FI_EINVAL);
	cr_expect_eq(fi_av_lookup(av, 0, &out, &len), -FI_EINVAL);
	cr_expect_eq(fi_av_lookup(av, 2, &out, &len), -FI_EINVAL);
	expect_lookup4(av, 1, &a[1]);
	cr_assert_eq(fi_close(&av->fid), 0);
}

/* ---- reverse map and duplicates ---- */

Test(av, reverse_lookup_finds_entries_and_ignores_the_v4_flag)
{
	struct fid_av *av = open_av(FI_AV_TABLE, 0, 0);
	struct sockaddr_in a[4] = { nth_addr(5), nth_addr(6), nth_addr(7), nth_addr(8) };
	struct sockaddr_in unknown = nth_addr(9);
	int i;

	cr_assert_eq(fi_av_insert(av, a, 4, NULL, 0, NULL), 4);
	for (i = 0; i < 4; i++)
		cr_expect_eq(reverse4(av, &a[i]), (fi_addr_t)i);
	cr_expect_eq(reverse4(av, &unknown), FI_ADDR_NOTAVAIL);

	/* the same peer as a dual-stack socket reports it: ::ffff:10.0.0.7 */
	struct sockaddr_in6 mapped = { .sin6_family = AF_INET6, .sin6_port = a[2].sin_port };
	struct cour_addr m;
	mapped.sin6_addr.s6_addr[10] = 0xff;
	mapped.sin6_addr.s6_addr[11] = 0xff;
	memcpy(&mapped.sin6_addr.s6_addr[12], &a[2].sin_addr, 4);
	cr_assert_eq(cour_addr_from_sockaddr(&m, &mapped, sizeof(mapped)), 0);
	cr_assert_eq(m.is_v4, 0);
	cour_lock_acquire(&dom.lock);
	cr_expect_eq(cour_av_reverse_locked(COUR_CONTAINER_OF(av, struct cour_av, av_fid), &m), 2);
	cour_lock_release(&dom.lock);
	cr_assert_eq(fi_close(&av->fid), 0);
}

Test(av, duplicates_get_new_indices_and_survive_removal_of_any_copy)
{
	struct fid_av *av = open_av(FI_AV_TABLE, 0, 0);
	struct sockaddr_in d = sin4("10.9.9.9", 7000), other = sin4("10.9.9.8", 7000);
	fi_addr_t fa[4], rm;

	cr_assert_eq(fi_av_insert(av, &d, 1, &fa[0], 0, NULL), 1);
	cr_assert_eq(fi_av_insert(av, &other, 1, &fa[1], 0, NULL), 1);
	cr_assert_eq(fi_av_insert(av, &d, 1, &fa[2], 0, NULL), 1);
	cr_assert_eq(fi_av_insert(av, &d, 1, &fa[3], 0, NULL), 1);
	cr_expect_eq(fa[0], 0);
	cr_expect_eq(fa[2], 2);
	cr_expect_eq(fa[3], 3);
	expect_lookup4(av, 0, &d);
	expect_lookup4(av, 2, &d);
	expect_lookup4(av, 3, &d);
	cr_expect_eq(reverse4(av, &d), 3, "the newest copy answers");

	rm = 2;                                   /* a middle copy */
	cr_assert_eq(fi_av_remove(av, &rm, 1, 0), 0);
	cr_expect_eq(reverse4(av, &d), 3);
	rm = 3;                                   /* the newest */
	cr_assert_eq(fi_av_remove(av, &rm, 1, 0), 0);
	cr_expect_eq(reverse4(av, &d), 0);
	cr_assert_eq(fi_av_insert(av, &d, 1, &fa[2], 0, NULL), 1);
	cr_expect_eq(fa[2], 4);
	cr_expect_eq(reverse4(av, &d), 4);
	rm = 4;
	cr_assert_eq(fi_av_remove(av, &rm, 1, 0), 0);
	cr_expect_eq(reverse4(av, &d), 0);
	rm = 0;
	cr_assert_eq(fi_av_remove(av, &rm, 1, 0), 0);
	cr_expect_eq(reverse4(av, &d), FI_ADDR_NOTAVAIL);
	cr_expect_eq(reverse4(av, &other), 1, "an unrelated entry is untouched");
	cr_assert_eq(fi_close(&av->fid), 0);
}

Test(av, duplicates_name_the_same_address)
{
	struct fid_av *av = open_av(FI_AV_TABLE, 0, 0);
	struct cour_av *cav = COUR_CONTAINER_OF(av, struct cour_av, av_fid);
	struct sockaddr_in d = sin4("10.9.9.9", 7000), other = sin4("10.9.9.8", 7000);
	fi_addr_t fa[3], rm;

	cr_assert_eq(fi_av_insert(av, &d, 1, &fa[0], 0, NULL), 1);
	cr_assert_eq(fi_av_insert(av, &other, 1, &fa[1], 0, NULL), 1);
	cr_assert_eq(fi_av_insert(av, &d, 1, &fa[2], 0, NULL), 1);
	cour_lock_acquire(&dom.lock);
	cr_expect(cour_av_same_locked(cav, fa[0], fa[2]), "two insertions of one address");
	cr_expect(cour_av_same_locked(cav, fa[2], fa[0]));
	cr_expect(cour_av_same_locked(cav, fa[1], fa[1]));
	cr_expect(!cour_av_same_locked(cav, fa[0], fa[1]), "different addresses");
	cr_expect(!cour_av_same_locked(cav, fa[0], 17), "out of range");
	cour_lock_release(&dom.lock);
	rm = fa[2];
	cr_assert_eq(fi_av_remove(av, &rm, 1, 0), 0);
	cour_lock_acquire(&dom.lock);
	cr_expect(!cour_av_same_locked(cav, fa[0], fa[2]), "a removed copy names nothing");
	cour_lock_release(&dom.lock);
	cr_assert_eq(fi_close(&av->fid), 0);
}

/* ---- straddr ---- */

Test(av, straddr_prints_and_truncates)
{
	struct fid_av *av = open_av(FI_AV_TABLE, 0, 0);
	struct sockaddr_in a = sin4("10.1.2.3", 4567);
	const char *want = "fi_sockaddr_in://10.1.2.3:4567";
	char buf[64];
	size_t len = sizeof(buf);

	cr_assert_eq(fi_av_straddr(av, &a, buf, &len), buf);
	cr_expect_str_eq(buf, want);
	cr_expect_eq(len, strlen(want) + 1);

	memset(buf, 'x', sizeof(buf));
	len = 10;
	cr_assert_eq(fi_av_straddr(av, &a, buf, &len), buf);
	cr_expect_eq(len, strlen(want) + 1, "the needed size, not the written one");
	cr_expect_str_eq(buf, "fi_sockad");
	cr_expect_eq(buf[10], 'x', "nothing written past the given length");

	len = 0;
	cr_expect_eq(fi_av_straddr(av, &a, NULL, &len), NULL);
	cr_expect_eq(len, strlen(want) + 1);

	a.sin_family = AF_INET6;
	len = sizeof(buf);
	cr_expect_null(fi_av_straddr(av, &a, buf, &len));
	cr_assert_eq(fi_close(&av->fid), 0);
}

/* ---- insertsvc / insertsym ---- */

Test(av, insertsvc_numeric_and_unresolvable)
{
	struct fid_av *av = open_av(FI_AV_TABLE, 0, 0);
	struct sockaddr_in want = sin4("127.0.0.1", 9000);
	fi_addr_t fa = 77;
	int err = -1;

	cr_assert_eq(fi_av_insertsvc(av, "127.0.0.1", "9000", &fa, 0, NULL), 1);
	cr_expect_eq(fa, 0);
	expect_lookup4(av, 0, &want);

	fa = 77;
	cr_expect_eq(fi_av_insertsvc(av, "no-such-host.invalid", "9000", &fa, FI_SYNC_ERR, &err),
		     0);
	cr_expect_eq(fa, FI_ADDR_NOTAVAIL);
	cr_expect_eq(err, FI_EINVAL);

	/* FI_ADDR_STR in node, service NULL */
	struct sockaddr_in s2 = sin4("10.0.0.1", 77);
	cr_assert_eq(fi_av_insertsvc(av, "fi_sockaddr_in://10.0.0.1:77", NULL, &fa, 0, NULL), 1);
	cr_expect_eq(fa, 1, "the unresolvable name took no index");
	expect_lookup4(av, 1, &s2);

	cr_expect_eq(fi_av_insertsvc(av, "127.0.0.1", NULL, &fa, 0, NULL), -FI_EINVAL);
	cr_expect_eq(fi_av_insertsvc(av, "fi_sockaddr_in://10.0.0.1", NULL, &fa, 0, NULL),
		     -FI_EINVAL);
	cr_expect_eq(fi_av_insertsvc(av, "fi_sockaddr_in6://[::1]:5", NULL, &fa, 0, NULL),
		     -FI_EINVAL);
	cr_expect_eq(fi_av_insertsvc(av, "::1", "9000", &fa, 0, NULL), 0,
		     "an IPv6 address in an FI_SOCKADDR_IN AV");
	cr_assert_eq(fi_close(&av->fid), 0);
}

Test(av, insertsym_counts_nodes_then_services)
{
	struct fid_av *av = open_av(FI_AV_TABLE, 0, 0);
	const char *want_ip[4] = { "10.1.1.1", "10.1.1.1", "10.1.1.2", "10.1.1.2" };
	const uint16_t want_port[4] = { 5000, 5001, 5000, 5001 };
	fi_addr_t fa[6];
	int i;

	cr_assert_eq(fi_av_insertsym(av, "10.1.1.1", 2, "5000", 2, fa, 0, NULL), 4);
	for (i = 0; i < 4; i++) {
		struct sockaddr_in w = sin4(want_ip[i], want_port[i]);

		cr_expect_eq(fa[i], (fi_addr_t)i);
		expect_lookup4(av, fa[i], &w);
	}
	/* carry across an octet */
	cr_assert_eq(fi_av_insertsym(av, "10.1.1.255", 2, "80", 1, fa, 0, NULL), 2);
	struct sockaddr_in c0 = sin4("10.1.1.255", 80), c1 = sin4("10.1.2.0", 80);
	expect_lookup4(av, fa[0], &c0);
	expect_lookup4(av, fa[1], &c1);

	cr_expect_eq(fi_av_insertsym(av, "255.255.255.255", 2, "1", 1, fa, 0, NULL), -FI_EINVAL);
	cr_expect_eq(fi_av_insertsym(av, "10.0.0.1", 1, "65535", 2, fa, 0, NULL), -FI_EINVAL);
	cr_expect_eq(fi_av_insertsym(av, "10.0.0.1", 1, "http", 2, fa, 0, NULL), -FI_EINVAL);
	cr_expect_eq(fi_av_insertsym(av, "localhost", 2, "80", 1, fa, 0, NULL), -FI_EINVAL,
		     "a host name without numeric suffix cannot count");
	cr_expect_eq(fi_av_insertsym(av, "10.0.0.1", 0, "80", 1, fa, 0, NULL), 0);

	/* a counted host name resolves each node; these do not exist */
	int err[4] = { -1, -1, -1, -1 };
	cr_expect_eq(fi_av_insertsym(av, "nohost8.invalid9", 2, "80", 2, fa, FI_SYNC_ERR, err), 0);
	for (i = 0; i < 4; i++) {
		cr_expect_eq(fa[i], FI_ADDR_NOTAVAIL);
		cr_expect_eq(err[i], FI_EINVAL);
	}
	cr_assert_eq(fi_close(&av->fid), 0);
}

/* ---- asynchronous insertion through an EQ ---- */

struct eq_record {
	uint32_t               event;
	bool                   is_err;
	struct fi_eq_err_entry entry;
};
static struct eq_record eq_log[32];
static int eq_nlog;

static ssize_t fake_eq_write(struct fid_eq *eq, uint32_t event, const void *buf, size_t len,
			     uint64_t flags)
{
	cr_assert_eq(len, sizeof(struct fi_eq_entry));
	cr_assert_eq(flags, 0);
	cr_assert_lt(eq_nlog, (int)COUR_ARRAY_SIZE(eq_log));
	eq_log[eq_nlog].event = event;
	memcpy(&eq_log[eq_nlog].entry, buf, len);
	eq_nlog++;
	return (ssize_t)len;
}

/* The real one lives in cour_eq.c; the AV's error events go through it. */
ssize_t cour_eq_write_err(struct fid_eq *eq, const struct fi_eq_err_entry *err)
{
	cr_assert_lt(eq_nlog, (int)COUR_ARRAY_SIZE(eq_log));
	eq_log[eq_nlog].event = FI_AV_COMPLETE;
	eq_log[eq_nlog].is_err = true;
	eq_log[eq_nlog].entry = *err;
	eq_nlog++;
	return sizeof(*err);
}

static struct fi_ops_eq fake_eq_ops = { .size = sizeof(struct fi_ops_eq), .write = fake_eq_write };

static void fake_eq_init(struct cour_eq *eq)
{
	memset(eq, 0, sizeof(*eq));
	eq->eq_fid.fid.fclass = FI_CLASS_EQ;
	eq->eq_fid.ops = &fake_eq_ops;
	eq_nlog = 0;
}

Test(av, fi_event_insert_completes_through_the_eq)
{
	struct fid_av *av = open_av(FI_AV_TABLE, 0, FI_EVENT);
	struct sockaddr_in a[3] = { nth_addr(1), nth_addr(2), nth_addr(3) };
	struct cour_eq eq;
	fi_addr_t fa[3];
	int ctx, err[3];

	fake_eq_init(&eq);
	cr_expect_eq(fi_av_insert(av, a, 3, fa, 0, &ctx), -FI_ENOEQ, "no EQ bound yet");
	cr_assert_eq(fi_av_bind(av, &eq.eq_fid.fid, 0), 0);
	cr_expect_eq(eq.refcnt, 1);
	cr_expect_eq(fi_av_bind(av, &eq.eq_fid.fid, 0), -FI_EINVAL, "second EQ");

	a[1].sin_family = AF_UNIX;
	cr_assert_eq(fi_av_insert(av, a, 3, fa, 0, &ctx), 0, "asynchronous insert returns 0");
	cr_assert_eq(eq_nlog, 2);
	cr_expect(eq_log[0].is_err, "the error entry precedes the completion");
	cr_expect_eq(eq_log[0].event, FI_AV_COMPLETE);
	cr_expect_eq(eq_log[0].entry.data, 1, "index of the failed address");
	cr_expect_eq(eq_log[0].entry.err, FI_EINVAL);
	cr_expect_eq(eq_log[0].entry.context, &ctx);
	cr_expect_eq(eq_log[0].entry.fid, &av->fid);
	cr_expect_not(eq_log[1].is_err);
	cr_expect_eq(eq_log[1].event, FI_AV_COMPLETE);
	cr_expect_eq(eq_log[1].entry.data, 2, "count inserted");
	cr_expect_eq(eq_log[1].entry.context, &ctx);
	cr_expect_eq(eq_log[1].entry.fid, &av->fid);
	cr_expect_eq(fa[0], 0);
	cr_expect_eq(fa[1], FI_ADDR_NOTAVAIL);
	cr_expect_eq(fa[2], 1);
	expect_lookup4(av, 1, &a[2]);

	/* every insert gets its completion, even an empty or all-failed one */
	cr_assert_eq(fi_av_insert(av, &a[1], 1, fa, 0, &err), 0);
	cr_assert_eq(eq_nlog, 4);
	cr_expect(eq_log[2].is_err);
	cr_expect_eq(eq_log[3].entry.data, 0);
	cr_expect_eq(eq_log[3].entry.context, &err);
	cr_assert_eq(fi_av_insertsvc(av, "127.0.0.1", "1", NULL, 0, NULL), 0);
	cr_assert_eq(eq_nlog, 5);
	cr_expect_eq(eq_log[4].entry.data, 1);
	cr_expect_eq(fi_av_insert(av, a, 3, fa, FI_SYNC_ERR, err), -FI_EINVAL,
		     "FI_SYNC_ERR is for synchronous AVs");
	cr_assert_eq(fi_close(&av->fid), 0);
	cr_expect_eq(eq.refcnt, 0, "closing the AV releases the EQ");
}

Test(av, binds_only_to_an_eq)
{
	struct fid_av *av = open_av(FI_AV_TABLE, 0, 0);
	struct cour_eq eq;
	struct fid not_eq = { .fclass = FI_CLASS_CQ };

	fake_eq_init(&eq);
	cr_expect_eq(fi_av_bind(av, &not_eq, 0), -FI_EINVAL);
	cr_expect_eq(fi_av_bind(av, &eq.eq_fid.fid, FI_REMOTE_WRITE), -FI_EBADFLAGS);
	cr_expect_eq(eq.refcnt, 0);

	/* bound without FI_EVENT: inserts stay synchronous */
	struct sockaddr_in a = nth_addr(1);
	cr_assert_eq(fi_av_bind(av, &eq.eq_fid.fid, 0), 0);
	cr_expect_eq(fi_av_insert(av, &a, 1, NULL, 0, NULL), 1);
	cr_expect_eq(eq_nlog, 0);
	cr_assert_eq(fi_close(&av->fid), 0);
	cr_expect_eq(eq.refcnt, 0);
}

/* ---- IPv6 ---- */

Test(av6, sockaddr_in6_insert_lookup_straddr)
{
	struct fid_av *av = open_av(FI_AV_TABLE, 0, 0);
	struct sockaddr_in6 a[2] = {
		{ .sin6_family = AF_INET6, .sin6_port = htons(9000) },
		{ .sin6_family = AF_INET6, .sin6_port = htons(9001) },
	}, got;
	struct sockaddr_in v4 = sin4("10.0.0.1", 1);
	size_t len = sizeof(got);
	char buf[80];
	fi_addr_t fa[2];

	inet_pton(AF_INET6, "::1", &a[0].sin6_addr);
	inet_pton(AF_INET6, "fe80::1:2", &a[1].sin6_addr);
	cr_assert_eq(fi_av_insert(av, a, 2, fa, 0, NULL), 2, "sockaddr_in6 stride");
	cr_assert_eq(fi_av_lookup(av, fa[1], &got, &len), 0);
	cr_expect_eq(len, sizeof(struct sockaddr_in6));
	cr_expect_eq(got.sin6_family, AF_INET6);
	cr_expect_eq(got.sin6_port, htons(9001));
	cr_expect_arr_eq(&got.sin6_addr, &a[1].sin6_addr, 16);

	len = sizeof(buf);
	cr_assert_eq(fi_av_straddr(av, &a[0], buf, &len), buf);
	cr_expect_str_eq(buf, "fi_sockaddr_in6://[::1]:9000");

	cr_expect_eq(fi_av_insert(av, &v4, 1, NULL, 0, NULL), 0, "AF_INET in an IN6 AV");

	cr_assert_eq(fi_av_insertsvc(av, "fi_sockaddr_in6://[::1]:9002", NULL, fa, 0, NULL), 1);
	cr_assert_eq(fi_av_insertsym(av, "::1", 2, "7", 1, fa, 0, NULL), 2);
	len = sizeof(got);
	cr_assert_eq(fi_av_lookup(av, fa[1], &got, &len), 0);
	cr_expect_eq(got.sin6_addr.s6_addr[15], 2, "::1 + 1 is ::2");
	cr_expect_eq(got.sin6_port, htons(7));

	struct in6_addr carried;
	inet_pton(AF_INET6, "fe80::100", &carried);
	cr_assert_eq(fi_av_insertsym(av, "fe80::ff", 2, "7", 1, fa, 0, NULL), 2);
	len = sizeof(got);
	cr_assert_eq(fi_av_lookup(av, fa[1], &got, &len), 0);
	cr_expect_arr_eq(&got.sin6_addr, &carried, 16, "fe80::ff + 1 carries into fe80::100");
	cr_assert_eq(fi_close(&av->fid), 0);
}

/* A named AV holds max(count, 65536) entries (a sparse shared object): the next insertion
 * fails alone with FI_ENOSPC, and what was inserted stays. */
Test(av, named_av_full_refuses_the_next_address)
{
	enum { CAP = 65536, BATCH = 4096 };
	struct sockaddr_in *batch = calloc(BATCH, sizeof(*batch));
	fi_addr_t *fa = calloc(BATCH, sizeof(*fa));
	struct fi_av_attr attr = { .type = FI_AV_TABLE, .count = 16 };
	struct fid_av *av = NULL;
	struct sockaddr_in extra = nth_addr(CAP);
	fi_addr_t efa = 0;
	int err = 0;
	char name[64];

	cr_assert(batch && fa);
	snprintf(name, sizeof(name), "courier-unit-full.%d", (int)getpid());
	attr.name = name;
	cr_assert_eq(fi_av_open(&dom.domain_fid, &attr, &av, NULL), 0);
	for (uint32_t base = 0; base < CAP; base += BATCH) {
		for (uint32_t i = 0; i < BATCH; i++)
			batch[i] = nth_addr(base + i);
		cr_assert_eq(fi_av_insert(av, batch, BATCH, fa, 0, NULL), BATCH);
		cr_assert_eq(fa[BATCH - 1], (fi_addr_t)(base + BATCH - 1));
	}
	cr_assert_eq(fi_av_insert(av, &extra, 1, &efa, FI_SYNC_ERR, &err), 0);
	cr_assert_eq(err, FI_ENOSPC, "error %d (%s)", err, fi_strerror(err));
	cr_assert_eq(efa, FI_ADDR_NOTAVAIL);
	expect_lookup4(av, CAP - 1, &batch[BATCH - 1]);
	cr_assert_eq(fi_close(&av->fid), 0);
	free(batch);
	free(fa);
}
