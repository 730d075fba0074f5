/*
 * Registered regions as the target sees them: the domain's table, and the check every remote
 * access passes before it touches memory (key, endpoint, access, bounds). struct cour_region
 * (cour_mr.c) is the libfabric object around one.
 */
#include "proto/cour_engine.h"

int cour_region_check(struct cour_pep *ep, uint64_t key, uint64_t addr, size_t len,
		      uint64_t access, void **ptr, struct cour_region **reg)
{
	struct cour_region *r;
	uint64_t off;

	cour_lock_assert_held(ep->lock);
	HASH_FIND(hh, ep->pdom->regions, &key, sizeof(uint64_t), r);
	/* r->only is set only under FI_MR_ENDPOINT: to other endpoints the region does not exist */
	if (!r || !r->enabled || (r->only && r->only != ep))
		return COUR_E_BAD_KEY;
	if ((r->access & access) != access)
		return COUR_E_ACCESS;
	/* [addr, addr + len) within [start, start + r->len), without ever computing an end
	 * that could wrap. */
	if (addr < r->start)
		return COUR_E_BOUNDS;
	off = addr - r->start;
	if (len > r->len || off > r->len - len)
		return COUR_E_BOUNDS;
	if (ptr)
		*ptr = (char *)r->base + off;
	if (reg)
		*reg = r;
	return COUR_E_OK;
}

struct cour_region *cour_region_find(struct cour_pdom *pdom, uint64_t key)
{
	struct cour_region *r;

	HASH_FIND(hh, pdom->regions, &key, sizeof(uint64_t), r);
	return r;
}

int cour_region_add(struct cour_pdom *pdom, struct cour_region *r)
{
	if (cour_region_find(pdom, r->key))
		return -FI_ENOKEY;
	HASH_ADD(hh, pdom->regions, key, sizeof(uint64_t), r);
	return 0;
}

void cour_region_del(struct cour_pdom *pdom, struct cour_region *r)
{
	HASH_DEL(pdom->regions, r);
}
