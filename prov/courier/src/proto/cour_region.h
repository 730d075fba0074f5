/*
 * The engine's registered regions, kept per domain (proto/cour_pdom.h) and looked up by key
 * at the target; the code is proto/cour_region.c. proto/cour_engine.h includes this header.
 */
#ifndef COUR_REGION_H
#define COUR_REGION_H

#include "util/cour_util.h"
#include "proto/cour_pdom.h"

#include <uthash.h>

/*
 * A registered memory region as the target checks it (struct cour_mr wraps one). Remote
 * addresses name byte 0 as `start`: its virtual address under FI_MR_VIRT_ADDR, else the
 * registration's offset.
 */
struct cour_region {
	UT_hash_handle       hh;              /* pdom->regions, on key */
	uint64_t             key;
	uint64_t             access;          /* FI_REMOTE_READ | FI_REMOTE_WRITE | ... */
	void                *base;            /* lowest address of the region */
	size_t               len;             /* one contiguous region (mr_iov_limit is 1) */
	uint64_t             start;
	uint64_t             counted;         /* events a counter bound to the region counts */
	struct cour_pep     *only;            /* FI_MR_ENDPOINT: the one endpoint it serves */
	bool                 enabled;         /* FI_MR_ENDPOINT regions: after fi_mr_enable */
};

/*
 * Check a remote access that arrived on endpoint ep, at the target: the key exists in ep's
 * domain and the region is enabled (under FI_MR_ENDPOINT: and bound to ep, else the key is
 * unknown to ep), [addr, addr+len) is inside the region and access is allowed. On success
 * sets *ptr to local memory (and *reg) and returns 0; else a COUR_E_* code (COUR_E_BAD_KEY,
 * COUR_E_BOUNDS, COUR_E_ACCESS). Lock held. (proto/cour_region.c)
 */
int cour_region_check(struct cour_pep *ep, uint64_t key, uint64_t addr, size_t len,
		      uint64_t access, void **ptr, struct cour_region **reg);
/* Add r to the domain (its key unique there: 0) or -FI_ENOKEY; remove it. Lock held. */
int  cour_region_add(struct cour_pdom *pdom, struct cour_region *r);
void cour_region_del(struct cour_pdom *pdom, struct cour_region *r);
struct cour_region *cour_region_find(struct cour_pdom *pdom, uint64_t key);

#endif /* COUR_REGION_H */
