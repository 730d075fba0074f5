/*
 * Memory region unit tests: cour_mr.c over a hand-built domain, through the public fi_mr_*
 * inlines, and the target-side check (cour_region_check, proto/cour_region.c) the RMA engine
 * relies on, over the regions cour_mr.c registers.
 */
#include "fi/cour_mr.h"
#include "fi/cour_cq.h"
#include "fi/cour_ep.h"
#include "proto/cour_errno.h"

#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdlib.h>

static struct cour_domain dom;
/* Endpoints as cour_mr.c sees them: a fid, a domain, a reference count. ep_a is the one
 * remote accesses arrive on unless a test says otherwise; alien belongs to another domain. */
static struct cour_domain other_dom;
static struct cour_ep ep_a, ep_b, alien;
static struct fi_ops_mr test_mr_ops = {
	.size = sizeof(struct fi_ops_mr),
	.reg = cour_mr_reg,
	.regv = cour_mr_regv,
	.regattr = cour_mr_regattr,
};

static void setup(void)
{
	memset(&dom, 0, sizeof(dom));
	cour_lock_init(&dom.lock, COUR_LOCK_MUTEX);
	dom.pdom.lock = &dom.lock;
	dom.domain_fid.fid.fclass = FI_CLASS_DOMAIN;
	dom.domain_fid.mr = &test_mr_ops;
	memset(&ep_a, 0, sizeof(ep_a));
	memset(&ep_b, 0, sizeof(ep_b));
	memset(&alien, 0, sizeof(alien));
	ep_a.ep_fid.fid.fclass = ep_b.ep_fid.fid.fclass = alien.ep_fid.fid.fclass = FI_CLASS_EP;
	ep_a.domain = ep_b.domain = &dom;
	alien.domain = &other_dom;
	ep_a.pep.pdom = ep_b.pep.pdom = &dom.pdom;
	ep_a.pep.lock = ep_b.pep.lock = &dom.lock;
	alien.pep.pdom = &other_dom.pdom;
	alien.pep.lock = &other_dom.lock;
}

static void teardown(void)
{
	cr_expect_eq(dom.refcnt, 0, "regions left open: %d", dom.refcnt);
	cr_expect_null(dom.pdom.regions, "the key table must be empty after every close");
	cr_expect_eq(dom.lock.held, 0, "progress lock left held");
	cr_expect_eq(ep_a.refcnt + ep_b.refcnt + alien.refcnt, 0,
		     "endpoint references left: %d %d %d", ep_a.refcnt, ep_b.refcnt, alien.refcnt);
	cour_lock_destroy(&dom.lock);
}

TestSuite(mr, .init = setup, .fini = teardown, .timeout = 30);

static struct fid_mr *reg(const void *buf, size_t len, uint64_t access, uint64_t offset,
			  uint64_t key, uint64_t flags)
{
	struct fid_mr *mr = NULL;
	int ret = fi_mr_reg(&dom.domain_fid, buf, len, access, offset, key, flags, &mr, NULL);

	cr_assert_eq(ret, 0, "fi_mr_reg: %d", ret);
	cr_assert_not_null(mr);
	return mr;
}

/* An access arriving on endpoint ep. */
static int check_on(struct cour_ep *ep, uint64_t key, uint64_t addr, size_t len,
		    uint64_t access, void **ptr)
{
	int ret;

	cour_lock_acquire(&dom.lock);
	ret = cour_region_check(&ep->pep, key, addr, len, access, ptr, NULL);
	cour_lock_release(&dom.lock);
	return ret;
}

static int check(uint64_t key, uint64_t addr, size_t len, uint64_t access, void **ptr)
{
	return check_on(&ep_a, key, addr, len, access, ptr);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* ---- keys ---- */

Test(mr, provider_keys_are_unique_and_look_random)
{
	enum { N = 1000 };
	static struct fid_mr *mrs[N];
	static uint64_t keys[N], sorted[N];
	static char buf[64];
	int i, b, close_pairs = 0;

	dom.mr_mode = FI_MR_PROV_KEY | FI_MR_VIRT_ADDR;
	for (i = 0; i < N; i++) {
		/* requested_key is ignored under FI_MR_PROV_KEY: asking for 5 every time works */
		mrs[i] = reg(buf, sizeof(buf), FI_REMOTE_READ, 0, 5, 0);
		keys[i] = fi_mr_key(mrs[i]);
		cr_assert_neq(keys[i], FI_KEY_NOTAVAIL);
	}
	cr_expect_eq(dom.refcnt, N);
	memcpy(sorted, keys, sizeof(keys));
	qsort(sorted, N, sizeof(uint64_t), cmp_u64);
	for (i = 1; i < N; i++)
		cr_assert_neq(sorted[i], sorted[i - 1], "duplicate provider key 0x%" PRIx64,
			      sorted[i]);
	/* Not a counter in disguise: successive keys differ by far more than a step, and every
	 * bit is set in about half the keys (1000 random keys: 500 +- 16; the bounds are ~12
	 * sigma, so this fails only for keys that are not random). */
	for (i = 1; i < N; i++) {
		uint64_t d = keys[i] > keys[i - 1] ? keys[i] - keys[i - 1] : keys[i - 1] - keys[i];

		close_pairs += d < (1ULL << 32);
	}
	cr_expect_leq(close_pairs, 2, "%d successive keys within 2^32 of each other",
		      close_pairs);
	for (b = 0; b < 64; b++) {
		int ones = 0;

		for (i = 0; i < N; i++)
			ones += (keys[i] >> b) & 1;
		cr_expect(ones > 300 && ones < 700, "bit %d set in %d of %d keys", b, ones, N);
	}
	for (i = 0; i < N; i++)
		cr_assert_eq(fi_close(&mrs[i]->fid), 0);
}

Test(mr, requested_keys_are_used_and_unique_per_domain)
{
	static char buf[64];
	struct fid_mr *a, *b, *c = NULL;

	dom.mr_mode = FI_MR_VIRT_ADDR;
	a = reg(buf, sizeof(buf), FI_REMOTE_WRITE, 0, 42, 0);
	cr_expect_eq(fi_mr_key(a), 42);
	cr_expect_eq(fi_mr_desc(a), COUR_CONTAINER_OF(a, struct cour_mr, mr_fid),
		     "desc is the struct cour_mr");
	cr_expect_eq(fi_mr_reg(&dom.domain_fid, buf, 8, FI_REMOTE_WRITE, 0, 42, 0, &c, NULL),
		     -FI_ENOKEY);
	cr_expect_null(c, "no result on failure");
	b = reg(buf, sizeof(buf), FI_REMOTE_WRITE, 0, 0, 0);
	cr_expect_eq(fi_mr_key(b), 0, "key 0 is a key like any other (OpenSHMEM uses it)");
	cr_expect_eq(dom.refcnt, 2);
	cr_assert_eq(fi_close(&a->fid), 0);
	a = reg(buf, sizeof(buf), FI_REMOTE_WRITE, 0, 42, 0);
	cr_expect_eq(fi_mr_key(a), 42, "a closed region's key is free again");
	cr_assert_eq(fi_close(&a->fid), 0);
	cr_assert_eq(fi_close(&b->fid), 0);

	/* FI_KEY_NOTAVAIL asks for no particular key: the provider picks one */
	a = reg(buf, sizeof(buf), FI_REMOTE_WRITE, 0, FI_KEY_NOTAVAIL, 0);
	cr_expect_neq(fi_mr_key(a), FI_KEY_NOTAVAIL);
	cr_assert_eq(fi_close(&a->fid), 0);
}

/* ---- the target-side check ---- */

Test(mr, check_virtual_addresses)
{
	static char buf[4096];
	uint64_t base = (uintptr_t)buf;
	void *p = NULL;
	struct fid_mr *rw, *ro;
	uint64_t krw, kro;

	dom.mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY;
	rw = reg(buf, sizeof(buf), FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0);
	ro = reg(buf, sizeof(buf), FI_REMOTE_READ, 0, 0, 0);
	krw = fi_mr_key(rw);
	kro = fi_mr_key(ro);

	cr_expect_eq(check(krw, base, sizeof(buf), FI_REMOTE_WRITE, &p), COUR_E_OK);
	cr_expect_eq(p, buf);
	cr_expect_eq(check(krw, base + 4095, 1, FI_REMOTE_READ, &p), COUR_E_OK, "last byte");
	cr_expect_eq(p, buf + 4095);
	cr_expect_eq(check(krw, base + 4096, 0, FI_REMOTE_READ, &p), COUR_E_OK,
		     "empty access at the end");
	p = NULL;
	cr_expect_eq(check(krw, base + 4096, 1, FI_REMOTE_READ, &p), COUR_E_BOUNDS,
		     "one past the end");
	cr_expect_null(p, "no pointer on failure");
	cr_expect_eq(check(krw, base + 4095, 2, FI_REMOTE_READ, &p), COUR_E_BOUNDS);
	cr_expect_eq(check(krw, base - 1, 1, FI_REMOTE_READ, &p), COUR_E_BOUNDS);
	cr_expect_eq(check(krw, base, 4097, FI_REMOTE_READ, &p), COUR_E_BOUNDS);
	cr_expect_eq(check(krw, UINT64_MAX, 2, FI_REMOTE_READ, &p), COUR_E_BOUNDS,
		     "addr + len wraps");
	cr_expect_eq(check(krw, base + 8, SIZE_MAX, FI_REMOTE_READ, &p), COUR_E_BOUNDS,
		     "len wraps");
	cr_expect_eq(check(krw, 0, 8, FI_REMOTE_READ, &p), COUR_E_BOUNDS,
		     "offset 0 is not an address under FI_MR_VIRT_ADDR");

	cr_expect_eq(check(kro, base, 8, FI_REMOTE_READ, &p), COUR_E_OK);
	cr_expect_eq(check(kro, base, 8, FI_REMOTE_WRITE, &p), COUR_E_ACCESS);
	cr_expect_eq(check(kro, base, 8, FI_REMOTE_READ | FI_REMOTE_WRITE, &p), COUR_E_ACCESS);
	cr_expect_eq(check(krw ^ kro ^ 1, base, 8, FI_REMOTE_READ, &p), COUR_E_BAD_KEY);

	cr_assert_eq(fi_close(&ro->fid), 0);
	cr_expect_eq(check(kro, base, 8, FI_REMOTE_READ, &p), COUR_E_BAD_KEY,
		     "a closed region rejects late accesses");
	cr_expect_eq(check(krw, base, 8, FI_REMOTE_READ, &p), COUR_E_OK);
	cr_assert_eq(fi_close(&rw->fid), 0);
}

Test(mr, check_offsets)
{
	static char buf[4096];
	void *p = NULL;
	struct fid_mr *z, *o;

	dom.mr_mode = 0;
	z = reg(buf, sizeof(buf), FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 1, 0);
	o = reg(buf, sizeof(buf), FI_REMOTE_READ | FI_REMOTE_WRITE, 1000, 2, 0);

	cr_expect_eq(check(1, 0, sizeof(buf), FI_REMOTE_WRITE, &p), COUR_E_OK);
	cr_expect_eq(p, buf);
	cr_expect_eq(check(1, 4095, 1, FI_REMOTE_WRITE, &p), COUR_E_OK);
	cr_expect_eq(p, buf + 4095);
	cr_expect_eq(check(1, 4096, 1, FI_REMOTE_WRITE, &p), COUR_E_BOUNDS);
	cr_expect_eq(check(1, (uintptr_t)buf, 1, FI_REMOTE_WRITE, &p), COUR_E_BOUNDS,
		     "a virtual address is not an offset");
	cr_expect_eq(check(1, UINT64_MAX, 1, FI_REMOTE_WRITE, &p), COUR_E_BOUNDS);
	cr_expect_eq(check(1, UINT64_MAX, 2, FI_REMOTE_WRITE, &p), COUR_E_BOUNDS);

	cr_expect_eq(check(2, 1000, 1, FI_REMOTE_READ, &p), COUR_E_OK);
	cr_expect_eq(p, buf);
	cr_expect_eq(check(2, 1000 + 4095, 1, FI_REMOTE_READ, &p), COUR_E_OK);
	cr_expect_eq(p, buf + 4095);
	cr_expect_eq(check(2, 999, 1, FI_REMOTE_READ, &p), COUR_E_BOUNDS);
	cr_expect_eq(check(2, 1000 + 4096, 1, FI_REMOTE_READ, &p), COUR_E_BOUNDS);
	cr_assert_eq(fi_close(&z->fid), 0);
	cr_assert_eq(fi_close(&o->fid), 0);
}

Test(mr, whole_address_space_registration)
{
	/* OpenSHMEM without FI_MR_VIRT_ADDR: fi_mr_reg(0, UINT64_MAX), key 0, offsets = addresses */
	static uint64_t word;
	void *p = NULL;
	struct fid_mr *mr;

	dom.mr_mode = 0;
	mr = reg(NULL, SIZE_MAX, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0);
	cr_expect_eq(check(0, (uintptr_t)&word, sizeof(word), FI_REMOTE_WRITE, &p), COUR_E_OK);
	cr_expect_eq(p, &word);
	cr_expect_eq(check(0, UINT64_MAX - 7, 8, FI_REMOTE_WRITE, &p), COUR_E_BOUNDS,
		     "the region ends one byte short of 2^64");
	cr_assert_eq(fi_close(&mr->fid), 0);

	struct fid_mr *bad = NULL;
	static char c;
	cr_expect_eq(fi_mr_reg(&dom.domain_fid, &c, SIZE_MAX, FI_REMOTE_READ, 0, 1, 0, &bad, NULL),
		     -FI_EINVAL, "a region that wraps the address space");
}

Test(mr, zero_length_region)
{
	static char c;
	void *p = NULL;
	struct fid_mr *mr;

	dom.mr_mode = FI_MR_VIRT_ADDR;
	mr = reg(&c, 0, FI_REMOTE_READ, 0, 9, 0);
	cr_expect_eq(check(9, (uintptr_t)&c, 0, FI_REMOTE_READ, &p), COUR_E_OK);
	cr_expect_eq(check(9, (uintptr_t)&c, 1, FI_REMOTE_READ, &p), COUR_E_BOUNDS);
	cr_assert_eq(fi_close(&mr->fid), 0);
}

/* ---- enabling and binding ---- */

Test(mr, endpoint_mode_needs_bind_and_enable)
{
	static char buf[64];
	struct fid_mr *mr;
	uint64_t key;
	void *p;

	dom.mr_mode = FI_MR_ENDPOINT | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR;
	mr = reg(buf, sizeof(buf), FI_REMOTE_WRITE, 0, 0, 0);
	key = fi_mr_key(mr);
	cr_expect_eq(check(key, (uintptr_t)buf, 8, FI_REMOTE_WRITE, &p), COUR_E_BAD_KEY,
		     "not enabled yet");
	cr_expect_eq(fi_mr_enable(mr), -FI_EINVAL, "enable before the endpoint binding");
	cr_expect_eq(check(key, (uintptr_t)buf, 8, FI_REMOTE_WRITE, &p), COUR_E_BAD_KEY);
	cr_assert_eq(fi_mr_bind(mr, &ep_a.ep_fid.fid, FI_REMOTE_WRITE), 0,
		     "OpenSHMEM passes FI_REMOTE_WRITE when binding to the endpoint");
	cr_expect_eq(COUR_CONTAINER_OF(mr, struct cour_mr, mr_fid)->ep, &ep_a);
	cr_expect_eq(ep_a.refcnt, 1, "the binding holds the endpoint open");
	cr_expect_eq(check(key, (uintptr_t)buf, 8, FI_REMOTE_WRITE, &p), COUR_E_BAD_KEY,
		     "bound but not enabled");
	cr_assert_eq(fi_mr_enable(mr), 0);
	p = NULL;
	cr_expect_eq(check(key, (uintptr_t)buf, 8, FI_REMOTE_WRITE, &p), COUR_E_OK);
	cr_expect_eq(p, buf);
	cr_expect_eq(fi_mr_bind(mr, &ep_b.ep_fid.fid, 0), -FI_EINVAL, "no binding after enable");
	cr_expect_eq(fi_mr_enable(mr), 0, "enable twice is harmless");
	cr_expect_eq(ep_a.refcnt, 1);
	cr_expect_eq(ep_b.refcnt, 0);
	cr_assert_eq(fi_close(&mr->fid), 0);
	cr_expect_eq(ep_a.refcnt, 0, "closing the region lets the endpoint close");
}

Test(mr, endpoint_mode_region_answers_its_endpoint_only)
{
	static char buf[64];
	struct fid_mr *ma, *mb;
	uint64_t ka, kb, addr = (uintptr_t)buf;
	void *p = NULL;

	dom.mr_mode = FI_MR_ENDPOINT | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR;
	ma = reg(buf, sizeof(buf), FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0);
	mb = reg(buf, sizeof(buf), FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0);
	ka = fi_mr_key(ma);
	kb = fi_mr_key(mb);
	cr_assert_eq(fi_mr_bind(ma, &ep_a.ep_fid.fid, 0), 0);
	cr_assert_eq(fi_mr_bind(mb, &ep_b.ep_fid.fid, 0), 0);
	cr_assert_eq(fi_mr_enable(ma), 0);
	cr_assert_eq(fi_mr_enable(mb), 0);

	cr_expect_eq(check_on(&ep_a, ka, addr, 8, FI_REMOTE_WRITE, &p), COUR_E_OK);
	cr_expect_eq(p, buf);
	cr_expect_eq(check_on(&ep_b, kb, addr + 8, 8, FI_REMOTE_READ, &p), COUR_E_OK);
	cr_expect_eq(p, buf + 8);
	p = NULL;
	/* through the other endpoint the key is unknown: the same answer as a bad key, before
	 * bounds and access are looked at */
	cr_expect_eq(check_on(&ep_b, ka, addr, 8, FI_REMOTE_WRITE, &p), COUR_E_BAD_KEY);
	cr_expect_eq(check_on(&ep_a, kb, addr, 8, FI_REMOTE_READ, &p), COUR_E_BAD_KEY);
	cr_expect_eq(check_on(&ep_b, ka, addr + 4096, 8, FI_REMOTE_WRITE, &p), COUR_E_BAD_KEY,
		     "out of bounds too: nothing about the region leaks to another endpoint");
	cr_expect_null(p, "no pointer on failure");
	cr_expect_eq(ep_a.refcnt, 1);
	cr_expect_eq(ep_b.refcnt, 1);
	cr_assert_eq(fi_close(&ma->fid), 0);
	cr_assert_eq(fi_close(&mb->fid), 0);
}

Test(mr, endpoint_binding_errors)
{
	static char buf[64];
	struct cour_mr *cmr;
	struct fid_mr *mr;

	dom.mr_mode = FI_MR_ENDPOINT;
	mr = reg(buf, sizeof(buf), FI_REMOTE_WRITE, 0, 1, 0);
	cmr = COUR_CONTAINER_OF(mr, struct cour_mr, mr_fid);
	cr_expect_eq(fi_mr_bind(mr, &alien.ep_fid.fid, 0), -FI_EINVAL,
		     "an endpoint of another domain");
	cr_expect_eq(fi_mr_bind(mr, &ep_a.ep_fid.fid, FI_SEND), -FI_EBADFLAGS);
	cr_expect_null(cmr->ep);
	cr_expect_eq(ep_a.refcnt + alien.refcnt, 0, "failed bindings take no reference");
	cr_assert_eq(fi_mr_bind(mr, &ep_a.ep_fid.fid, 0), 0);
	cr_expect_eq(fi_mr_bind(mr, &ep_a.ep_fid.fid, 0), -FI_EINVAL, "bound twice");
	cr_expect_eq(fi_mr_bind(mr, &ep_b.ep_fid.fid, 0), -FI_EINVAL,
		     "a region belongs to one endpoint");
	cr_expect_eq(cmr->ep, &ep_a);
	cr_expect_eq(ep_a.refcnt, 1);
	cr_expect_eq(ep_b.refcnt, 0);
	cr_expect_eq(check(1, 0, 8, FI_REMOTE_WRITE, NULL), COUR_E_BAD_KEY, "not enabled");
	cr_assert_eq(fi_mr_enable(mr), 0);
	cr_expect_eq(check(1, 0, 8, FI_REMOTE_WRITE, NULL), COUR_E_OK, "offsets, app key 1");
	cr_assert_eq(fi_close(&mr->fid), 0);
}

Test(mr, endpoint_binding_without_endpoint_mode_has_no_effect)
{
	static char buf[64];
	struct fid_mr *mr;

	dom.mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY;
	mr = reg(buf, sizeof(buf), FI_REMOTE_WRITE, 0, 0, 0);
	cr_expect_eq(fi_mr_bind(mr, &alien.ep_fid.fid, 0), -FI_EINVAL,
		     "still an endpoint of another domain");
	cr_assert_eq(fi_mr_bind(mr, &ep_a.ep_fid.fid, 0), 0);
	cr_assert_eq(fi_mr_bind(mr, &ep_b.ep_fid.fid, 0), 0);
	cr_expect_null(COUR_CONTAINER_OF(mr, struct cour_mr, mr_fid)->ep);
	cr_expect_eq(ep_a.refcnt + ep_b.refcnt, 0, "nothing to hold: regions are the domain's");
	cr_expect_eq(check_on(&ep_b, fi_mr_key(mr), (uintptr_t)buf, 8, FI_REMOTE_WRITE, NULL),
		     COUR_E_OK, "usable without fi_mr_enable, through any endpoint");
	cr_assert_eq(fi_close(&mr->fid), 0);
}

Test(mr, rma_event_mode_disables_only_rma_event_regions)
{
	static char buf[64];
	struct fid_mr *ev, *plain;
	void *p;

	dom.mr_mode = FI_MR_RMA_EVENT;
	ev = reg(buf, sizeof(buf), FI_REMOTE_WRITE, 0, 1, FI_RMA_EVENT);
	plain = reg(buf, sizeof(buf), FI_REMOTE_WRITE, 0, 2, 0);
	cr_expect_eq(check(1, 0, 8, FI_REMOTE_WRITE, &p), COUR_E_BAD_KEY);
	cr_expect_eq(check(2, 0, 8, FI_REMOTE_WRITE, &p), COUR_E_OK);
	cr_assert_eq(fi_mr_enable(ev), 0);
	cr_expect_eq(check(1, 0, 8, FI_REMOTE_WRITE, &p), COUR_E_OK);
	cr_assert_eq(fi_close(&ev->fid), 0);
	cr_assert_eq(fi_close(&plain->fid), 0);
}

Test(mr, counter_binding)
{
	static char buf[64];
	struct cour_cntr cntr = { .cntr_fid.fid.fclass = FI_CLASS_CNTR, .domain = &dom };
	struct cour_cntr alien = { .cntr_fid.fid.fclass = FI_CLASS_CNTR };
	struct fid not_bindable = { .fclass = FI_CLASS_AV };
	struct fid_mr *mr;
	struct cour_mr *cmr;

	dom.mr_mode = 0;
	mr = reg(buf, sizeof(buf), FI_REMOTE_WRITE | FI_REMOTE_READ, 0, 3, 0);
	cmr = COUR_CONTAINER_OF(mr, struct cour_mr, mr_fid);
	cr_expect_eq(fi_mr_bind(mr, &cntr.cntr_fid.fid, 0), -FI_EINVAL, "counts nothing");
	cr_expect_eq(fi_mr_bind(mr, &cntr.cntr_fid.fid, FI_REMOTE_WRITE | FI_SEND),
		     -FI_EBADFLAGS);
	cr_expect_eq(fi_mr_bind(mr, &alien.cntr_fid.fid, FI_REMOTE_WRITE), -FI_EINVAL,
		     "a counter of another domain");
	cr_expect_eq(fi_mr_bind(mr, &not_bindable, 0), -FI_EINVAL);
	cr_expect_null(cmr->cntr);
	cr_assert_eq(fi_mr_bind(mr, &cntr.cntr_fid.fid, FI_REMOTE_WRITE | FI_REMOTE_READ), 0);
	cr_expect_eq(cmr->cntr, &cntr);
	cr_expect_eq(cmr->reg.counted, FI_REMOTE_WRITE | FI_REMOTE_READ);
	cr_expect_eq(cntr.refcnt, 1, "the counter cannot close under the region");
	cr_assert_eq(fi_mr_bind(mr, &cntr.cntr_fid.fid, FI_REMOTE_WRITE), 0, "rebind");
	cr_expect_eq(cntr.refcnt, 1);
	cr_assert_eq(fi_mr_enable(mr), 0);
	cr_assert_eq(fi_close(&mr->fid), 0);
	cr_expect_eq(cntr.refcnt, 0);
}

/* ---- the registration calls ---- */

Test(mr, regv_and_regattr)
{
	static char a[64], b[64];
	struct iovec iov[2] = { { a, sizeof(a) }, { b, sizeof(b) } };
	struct fid_mr *mr = NULL;
	int ctx;
	void *p;

	dom.mr_mode = FI_MR_VIRT_ADDR;
	cr_expect_eq(fi_mr_regv(&dom.domain_fid, iov, 2, FI_REMOTE_READ, 0, 1, 0, &mr, NULL),
		     -FI_EINVAL, "mr_iov_limit is 1");
	cr_expect_eq(fi_mr_regv(&dom.domain_fid, iov, 0, FI_REMOTE_READ, 0, 1, 0, &mr, NULL),
		     -FI_EINVAL);
	cr_expect_null(mr);
	cr_assert_eq(fi_mr_regv(&dom.domain_fid, &iov[1], 1, FI_REMOTE_READ, 0, 1, 0, &mr, &ctx),
		     0);
	cr_expect_eq(mr->fid.context, &ctx);
	cr_expect_eq(check(1, (uintptr_t)b, sizeof(b), FI_REMOTE_READ, &p), COUR_E_OK);
	cr_assert_eq(fi_close(&mr->fid), 0);

	struct fi_mr_attr attr = {
		.mr_iov = iov, .iov_count = 1, .access = FI_REMOTE_WRITE, .requested_key = 7,
		.context = &ctx,
	};
	cr_assert_eq(fi_mr_regattr(&dom.domain_fid, &attr, 0, &mr), 0);
	cr_expect_eq(fi_mr_key(mr), 7);
	cr_expect_eq(mr->fid.context, &ctx);
	cr_expect_eq(check(7, (uintptr_t)a + 63, 1, FI_REMOTE_WRITE, &p), COUR_E_OK);
	cr_expect_eq(p, a + 63);
	cr_expect_eq(fi_mr_refresh(mr, NULL, 0, 0), -FI_ENOSYS);
	uint64_t base;
	size_t ksz = 8;
	uint8_t raw[8];
	cr_expect_eq(fi_mr_raw_attr(mr, &base, raw, &ksz, 0), -FI_ENOSYS);
	cr_assert_eq(fi_close(&mr->fid), 0);

	attr.iov_count = 2;
	cr_expect_eq(fi_mr_regattr(&dom.domain_fid, &attr, 0, &mr), -FI_EINVAL);
	attr.iov_count = 1;
	attr.auth_key_size = 4;
	cr_expect_eq(fi_mr_regattr(&dom.domain_fid, &attr, 0, &mr), -FI_EINVAL);
	cr_expect_eq(fi_mr_reg(&dom.domain_fid, a, 8, FI_REMOTE_READ, 0, 1, FI_RMA_PMEM, &mr,
			       NULL), -FI_EBADFLAGS);
}

Test(mr, legacy_basic_mode_means_virt_addr_and_provider_keys)
{
	static char buf[64];
	struct fid_mr *a, *b;
	void *p;

	dom.mr_mode = COUR_MR_BASIC;
	a = reg(buf, sizeof(buf), FI_REMOTE_READ, 0, 1, 0);
	b = reg(buf, sizeof(buf), FI_REMOTE_READ, 0, 1, 0);
	cr_expect_neq(fi_mr_key(a), fi_mr_key(b), "requested keys ignored");
	cr_expect_eq(check(fi_mr_key(a), (uintptr_t)buf + 8, 8, FI_REMOTE_READ, &p), COUR_E_OK);
	cr_expect_eq(p, buf + 8);
	cr_assert_eq(fi_close(&a->fid), 0);
	cr_assert_eq(fi_close(&b->fid), 0);
}
