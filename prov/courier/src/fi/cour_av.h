/*
 * Address vectors. FI_AV_TABLE and FI_AV_MAP share one representation: fi_addr_t is an index
 * into a growing table of entries, assigned in insertion order from 0 and never reused (a removed
 * entry stays a hole, so stale fi_addr_t values fail cleanly instead of reaching a new peer).
 * A reverse index from address to entry serves FI_SOURCE (cour_av_reverse_locked). Both are
 * util/cour_addr_table.h: about 40 bytes an address, as every rank's AV holds every rank.
 */
#ifndef COUR_AV_H
#define COUR_AV_H

#include "cour_fi.h"
#include "util/cour_addr.h"
#include "util/cour_addr_table.h"

struct cour_av_shm;                        /* a named AV's shared region (cour_av_shared.c) */

struct cour_av {
	struct fid_av          av_fid;
	struct cour_domain    *domain;
	int                    refcnt;     /* endpoints bound */
	enum fi_av_type        type;
	int                    addr_format; /* FI_SOCKADDR_IN or FI_SOCKADDR_IN6 */
	/* by fi_addr_t, and back; duplicate insertions each get their own fi_addr_t
	 * (FI_AV_TABLE indices follow insertion order) */
	struct cour_addr_table tab;
	uint64_t               generation; /* bumped on remove: cached lookups must revalidate */
	const uint64_t        *gen;        /* what endpoints watch: &generation, or a named
					    * AV's shared counter (any process's remove) */
	struct cour_av_shm    *shm;        /* named AV (fi_av_attr.name), else NULL */
	struct fid_eq         *eq;         /* FI_EVENT: fi_av_insert completes through the EQ */
	uint64_t               flags;      /* fi_av_attr.flags (FI_EVENT, FI_SYMMETRIC) */
	int                    rx_ctx_bits; /* fi_rx_addr: the top bits name a receive context */
};

/* What makes two addresses one: ip and port. is_v4 only says how to answer the application,
 * so a v4-mapped source reported by a dual-stack socket finds the IPv4 entry. */
#define COUR_AV_KEYLEN offsetof(struct cour_addr, is_v4)

/* Address of fi_addr, or NULL when it is out of range or removed. Lock held. */
const struct cour_addr *cour_av_lookup_locked(struct cour_av *av, fi_addr_t fi_addr);
/* fi_addr_t of addr, or FI_ADDR_NOTAVAIL. Lock held. */
fi_addr_t cour_av_reverse_locked(struct cour_av *av, const struct cour_addr *addr);
/* a and b name the same address: equal, or two insertions of one address. Lock held. */
bool cour_av_same_locked(struct cour_av *av, fi_addr_t a, fi_addr_t b);

/* ---- named AVs shared between the processes of a host (cour_av_shared.c) ----
 * The table lives in a POSIX shared-memory object; each process keeps its `tab` a mirror of
 * it, so fi_addr_t values mean the same everywhere. Writers append under a process-shared
 * lock; FI_READ opens map it read-only and only mirror. */
/* Opens or creates attr->name; sets attr->map_addr when it is 0. 0 or -FI_*. */
int  cour_av_shared_open(struct cour_av *av, struct fi_av_attr *attr);
void cour_av_shared_close(struct cour_av *av);
bool cour_av_shared_readonly(const struct cour_av *av);
/* Catch the mirror up with what other processes inserted or removed. Lock held. */
void cour_av_shared_sync_locked(struct cour_av *av);
/* Append / remove in the shared table and the mirror: 0 or a positive FI_* errno. */
int  cour_av_shared_add_locked(struct cour_av *av, const struct cour_addr *addr, uint32_t *idx);
int  cour_av_shared_remove_locked(struct cour_av *av, uint64_t idx);

#endif
