/*
 * Address vectors. FI_AV_TABLE and FI_AV_MAP share one representation: fi_addr_t is an index
 * into a growing array of entries, assigned in insertion order from 0 and never reused (a removed
 * entry stays a tombstone, so stale fi_addr_t values fail cleanly instead of reaching a new peer).
 * A hash from address to index serves FI_SOURCE (cour_av_reverse_locked).
 */
#ifndef COUR_AV_H
#define COUR_AV_H

#include "cour.h"
#include "util/cour_addr.h"

struct cour_av_entry {
	struct cour_addr addr;
	bool             valid;
	UT_hash_handle   hh;        /* in av->by_addr while it is the newest valid entry of addr */
	fi_addr_t        fi_addr;
	/* Duplicate insertions each get their own fi_addr_t (FI_AV_TABLE indices must follow
	 * insertion order). The hash holds the newest valid one; older valid duplicates hang off
	 * it, newest first, so removing any of them leaves the address mapped. */
	struct cour_av_entry *dup_next;
};

struct cour_av {
	struct fid_av          av_fid;
	struct cour_domain    *domain;
	int                    refcnt;     /* endpoints bound */
	enum fi_av_type        type;
	int                    addr_format; /* FI_SOCKADDR_IN or FI_SOCKADDR_IN6 */
	struct cour_av_entry **entries;    /* by fi_addr_t; pointers stay stable as it grows */
	size_t                 count, cap;
	struct cour_av_entry  *by_addr;    /* uthash keyed on addr */
	uint64_t               generation; /* bumped on remove: cached lookups must revalidate */
	struct fid_eq         *eq;         /* FI_EVENT: fi_av_insert completes through the EQ */
	uint64_t               flags;      /* fi_av_attr.flags (FI_EVENT, FI_SYMMETRIC) */
};

/* The hash key of an entry: ip and port. is_v4 only says how to answer the application, so a
 * v4-mapped source reported by a dual-stack socket finds the IPv4 entry. */
#define COUR_AV_KEYLEN offsetof(struct cour_addr, is_v4)

/* Address of fi_addr, or NULL when it is out of range or removed. Lock held. */
const struct cour_addr *cour_av_lookup_locked(struct cour_av *av, fi_addr_t fi_addr);
/* fi_addr_t of addr, or FI_ADDR_NOTAVAIL. Lock held. */
fi_addr_t cour_av_reverse_locked(struct cour_av *av, const struct cour_addr *addr);
/* a and b name the same address: equal, or two insertions of one address. Lock held. */
bool cour_av_same_locked(struct cour_av *av, fi_addr_t a, fi_addr_t b);

#endif
