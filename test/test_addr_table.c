/*
 * util/cour_addr_table.c, the AV's storage: indices in insertion order that are never reused,
 * the reverse index (newest valid entry of an address, older duplicates behind it), removal
 * anywhere in a duplicate chain, deletion by backward shift checked against a plain model
 * under random churn, and the bytes an address costs at 100,000 of them.
 */
#include "util/cour_addr_table.h"

#include <criterion/criterion.h>
#include <rdma/fi_errno.h>
#include <stdlib.h>
#include <string.h>

static struct cour_addr_table t;

static void setup(void)
{
	cour_at_init(&t);
}

static void teardown(void)
{
	cour_at_fini(&t);
}

TestSuite(addr_table, .init = setup, .fini = teardown, .timeout = 30);

/* 127.x.y.z:port from n, distinct for distinct n below 2^40 */
static struct cour_addr mk(uint64_t n)
{
	struct cour_addr a;

	memset(&a, 0, sizeof(a));
	a.ip[10] = a.ip[11] = 0xff;
	a.ip[12] = 127;
	a.ip[13] = (uint8_t)(n >> 32);
	a.ip[14] = (uint8_t)(n >> 24);
	a.ip[15] = (uint8_t)(n >> 16);
	a.port = (uint16_t)n;
	a.is_v4 = 1;
	return a;
}

static uint32_t add(uint64_t n)
{
	struct cour_addr a = mk(n);
	uint32_t i;

	cr_assert_eq(cour_at_append(&t, &a, &i), 0);
	return i;
}

static uint32_t find(uint64_t n)
{
	struct cour_addr a = mk(n);

	return cour_at_find(&t, &a);
}

Test(addr_table, indices_follow_insertion_and_are_never_reused)
{
	cr_assert_eq(find(1), COUR_AT_NONE, "an empty table finds nothing");
	for (uint64_t n = 0; n < 5; n++)
		cr_assert_eq(add(n + 1), n);
	cr_assert_eq(cour_at_remove(&t, 2), 0);
	cr_assert_null(cour_at_get(&t, 2), "a removed entry stays a hole");
	cr_assert_eq(add(99), 5);
	cr_assert_eq(cour_at_remove(&t, 2), -FI_EINVAL, "removed twice");
	cr_assert_eq(cour_at_remove(&t, 6), -FI_EINVAL, "never given");
	cr_assert_null(cour_at_get(&t, 6));
	struct cour_addr a = mk(4);
	cr_assert_arr_eq(cour_at_get(&t, 3), &a, sizeof(a));
	cr_assert_eq(find(3), COUR_AT_NONE);
	cr_assert_eq(find(4), 3);
}

Test(addr_table, a_v4_flag_does_not_make_another_address)
{
	struct cour_addr b = mk(7);

	b.is_v4 = 0;
	add(7);
	cr_assert_eq(cour_at_find(&t, &b), 0);
	cr_assert_eq(cour_at_get(&t, 0)->is_v4, 1, "the entry keeps what was inserted");
}

Test(addr_table, duplicates_find_the_newest_and_survive_any_removal)
{
	add(5);                 /* 0 */
	add(6);                 /* 1 */
	add(5);                 /* 2 */
	add(5);                 /* 3 */
	cr_assert_eq(find(5), 3);
	cr_assert_eq(cour_at_remove(&t, 2), 0);       /* the middle of the chain */
	cr_assert_eq(find(5), 3);
	cr_assert_eq(cour_at_remove(&t, 3), 0);       /* the head: the older one takes over */
	cr_assert_eq(find(5), 0);
	cr_assert_eq(add(5), 4);
	cr_assert_eq(find(5), 4);
	cr_assert_eq(cour_at_remove(&t, 0), 0);       /* the tail */
	cr_assert_eq(find(5), 4);
	cr_assert_eq(cour_at_remove(&t, 4), 0);
	cr_assert_eq(find(5), COUR_AT_NONE);
	cr_assert_eq(find(6), 1);
	cr_assert_eq(t.index_used, 1);
}

/* The model: for each address, its valid entries newest first; checked after every step. */
#define CHURN_ADDRS 300
#define CHURN_STEPS 20000

Test(addr_table, random_churn_matches_a_plain_model)
{
	static uint32_t owner[CHURN_STEPS];           /* entry -> address number */
	static bool valid[CHURN_STEPS];
	uint64_t x = 88172645463325252ull;
	size_t n = 0;

	for (int step = 0; step < CHURN_STEPS; step++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		if (n < 16 || x % 3) {
			uint32_t a = (uint32_t)(x >> 8) % CHURN_ADDRS;
			cr_assert_eq(add(a * 7919 + 1), n);
			owner[n] = a;
			valid[n++] = true;
		} else {
			size_t victim = (size_t)(x >> 8) % n;
			cr_assert_eq(cour_at_remove(&t, victim), valid[victim] ? 0 : -FI_EINVAL);
			valid[victim] = false;
		}
		if (step % 97 && step != CHURN_STEPS - 1)
			continue;
		for (uint32_t a = 0; a < CHURN_ADDRS; a++) {
			uint32_t want = COUR_AT_NONE;
			for (size_t i = n; i-- > 0;)
				if (valid[i] && owner[i] == a) {
					want = (uint32_t)i;
					break;
				}
			cr_assert_eq(find(a * 7919 + 1), want, "step %d address %u", step, a);
		}
	}
}

Test(addr_table, a_hundred_thousand_addresses_cost_under_64_bytes_each)
{
	const uint32_t n = 100000;

	for (uint32_t i = 0; i < n; i++)
		cr_assert_eq(add((uint64_t)i * 65537 + 3), i);
	for (uint32_t i = 0; i < n; i += 7)
		cr_assert_eq(find((uint64_t)i * 65537 + 3), i);
	cr_assert_eq(find(2), COUR_AT_NONE);
	cr_log_info("%zu bytes for %u addresses: %.1f each\n", cour_at_bytes(&t), n,
		    (double)cour_at_bytes(&t) / n);
	cr_assert_leq(cour_at_bytes(&t), (size_t)n * 64);
	for (uint32_t i = 0; i < n; i += 2)
		cr_assert_eq(cour_at_remove(&t, i), 0);
	for (uint32_t i = 0; i < n; i++)
		cr_assert_eq(find((uint64_t)i * 65537 + 3), i % 2 ? i : COUR_AT_NONE);
}
