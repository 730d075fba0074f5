/*
 * Memory regions. Keys: provider-chosen random 64-bit values (FI_MR_PROV_KEY, or when the
 * application asks for none), else the application's requested_key, unique per domain.
 * The domain's table (uthash on key) is what the target side of RMA checks every access against.
 */
#ifndef COUR_MR_H
#define COUR_MR_H

#include "cour.h"

struct cour_mr {
	struct fid_mr        mr_fid;
	struct cour_domain  *domain;
	uint64_t             key;
	uint64_t             access;       /* FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_* */
	uint64_t             flags;
	void                *base;         /* lowest address of the region */
	size_t               len;          /* one contiguous region (mr_iov_limit is 1) */
	uint64_t             offset;       /* fi_mr_attr.offset: base of offset-addressed access */
	struct cour_cntr    *cntr;         /* FI_REMOTE_WRITE/READ events (fi_mr_bind to a counter) */
	uint64_t             cntr_flags;   /* FI_REMOTE_WRITE and/or FI_REMOTE_READ: what cntr counts */
	struct cour_ep      *ep;           /* FI_MR_ENDPOINT: the only endpoint remote accesses may
					    * arrive on; holds a reference (ep->refcnt), so the
					    * endpoint cannot close under the region */
	bool                 enabled;      /* FI_MR_ENDPOINT regions are usable after fi_mr_enable */
	bool                 sealed;       /* fi_mr_enable was called: no more bindings (fi_mr(3)) */
	UT_hash_handle       hh;
};

/* Domain mr_mode as this file reads it: the legacy FI_MR_BASIC means VIRT_ADDR|ALLOCATED|PROV_KEY
 * (fi_mr(3)); FI_MR_SCALABLE means none of them. */
static inline uint64_t cour_mr_mode(const struct cour_domain *dom)
{
	if (dom->mr_mode == COUR_MR_BASIC)
		return FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	if (dom->mr_mode == COUR_MR_SCALABLE)
		return 0;
	return dom->mr_mode;
}

/*
 * Check a remote access that arrived on endpoint ep, at the target: the key exists in ep's
 * domain and the region is enabled (under FI_MR_ENDPOINT: and bound to ep, else the key is
 * unknown to ep), [addr, addr+len) is inside the region (addr is a virtual address under
 * FI_MR_VIRT_ADDR, an offset otherwise) and access is allowed. On success sets *ptr to local
 * memory and returns 0; else returns a COUR_E_* code (COUR_E_BAD_KEY, COUR_E_BOUNDS,
 * COUR_E_ACCESS). Lock held.
 */
int cour_mr_check_locked(struct cour_ep *ep, uint64_t key, uint64_t addr, size_t len,
			 uint64_t access, void **ptr, struct cour_mr **mr);

int cour_mr_reg(struct fid *fid, const void *buf, size_t len, uint64_t access, uint64_t offset,
		uint64_t requested_key, uint64_t flags, struct fid_mr **mr, void *context);
int cour_mr_regv(struct fid *fid, const struct iovec *iov, size_t count, uint64_t access,
		 uint64_t offset, uint64_t requested_key, uint64_t flags, struct fid_mr **mr,
		 void *context);
int cour_mr_regattr(struct fid *fid, const struct fi_mr_attr *attr, uint64_t flags,
		    struct fid_mr **mr);

#endif
