/*
 * Memory regions. Keys: provider-chosen random 64-bit values (FI_MR_PROV_KEY, or when the
 * application asks for none), else the application's requested_key, unique per domain.
 * The engine's region table (struct cour_pdom, proto/cour_region.c) is what the target side of
 * RMA checks every access against; a struct cour_mr is the libfabric object around one region.
 */
#ifndef COUR_MR_H
#define COUR_MR_H

#include "cour_fi.h"
#include "proto/cour_engine.h"

struct cour_mr {
	struct fid_mr        mr_fid;
	struct cour_domain  *domain;
	struct cour_region   reg;          /* what the target checks: key, access, range, and
					    * (reg.counted) the events cntr counts */
	uint64_t             flags;
	uint64_t             offset;       /* fi_mr_attr.offset: base of offset-addressed access */
	struct cour_cntr    *cntr;         /* FI_REMOTE_WRITE/READ events (fi_mr_bind to a counter) */
	struct cour_ep      *ep;           /* FI_MR_ENDPOINT: the only endpoint remote accesses may
					    * arrive on; holds a reference (ep->refcnt), so the
					    * endpoint cannot close under the region */
	bool                 sealed;       /* fi_mr_enable was called: no more bindings (fi_mr(3)) */
};

static inline struct cour_mr *cour_mr_of_region(struct cour_region *r)
{
	return COUR_CONTAINER_OF(r, struct cour_mr, reg);
}

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

int cour_mr_reg(struct fid *fid, const void *buf, size_t len, uint64_t access, uint64_t offset,
		uint64_t requested_key, uint64_t flags, struct fid_mr **mr, void *context);
int cour_mr_regv(struct fid *fid, const struct iovec *iov, size_t count, uint64_t access,
		 uint64_t offset, uint64_t requested_key, uint64_t flags, struct fid_mr **mr,
		 void *context);
int cour_mr_regattr(struct fid *fid, const struct fi_mr_attr *attr, uint64_t flags,
		    struct fid_mr **mr);

#endif
