/*
 * Addresses by index and indices by address, for the AV (cour_av.c), at about 40 bytes an
 * entry: an MPI job inserts every rank's address in every rank's AV, so at 100,000 ranks the
 * entry is what the AV costs. uthash would give each entry a 56-byte handle plus a heap block
 * of its own; here an entry is 28 bytes in a chunked array (chunks never move, so a returned
 * address stays valid while the table grows) and the reverse index is an open-addressing array
 * of 32-bit entry numbers (linear probing, at most half full, deletion by backward shift: no
 * tombstones to pile up under insert/remove churn).
 *
 * Indices are assigned 0, 1, 2... in insertion order and never reused; a removed entry stays
 * as a hole. Several entries may hold one address (duplicate insertions): the index maps the
 * address to its newest valid entry, which chains to older valid ones, so removing any of them
 * leaves the address found. Not thread-safe (the AV's caller holds the domain lock).
 */
#ifndef COUR_ADDR_TABLE_H
#define COUR_ADDR_TABLE_H

#include "util/cour_addr.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define COUR_AT_NONE     UINT32_MAX
#define COUR_AT_MAX      (UINT32_MAX - 1)       /* entries a table can hold */

struct cour_at_entry {
	struct cour_addr addr;
	uint32_t         older;      /* the previous valid entry of this address, COUR_AT_NONE */
	uint32_t         valid;
};

struct cour_addr_table {
	struct cour_at_entry **chunks;
	size_t                 nchunks;
	size_t                 count;      /* entries appended, holes included */
	uint32_t              *index;      /* entry + 1 of each address's newest; 0: empty */
	size_t                 index_cap;  /* a power of two */
	size_t                 index_used;
};

void cour_at_init(struct cour_addr_table *t);
void cour_at_fini(struct cour_addr_table *t);
/* Append addr as entry t->count: 0, or -FI_ENOMEM (or -FI_ENOSPC past COUR_AT_MAX). */
int  cour_at_append(struct cour_addr_table *t, const struct cour_addr *addr, uint32_t *idx);
/* The address of entry idx, or NULL for an index never given or removed. */
const struct cour_addr *cour_at_get(const struct cour_addr_table *t, size_t idx);
/* The newest valid entry holding addr (compared on ip and port), or COUR_AT_NONE. */
uint32_t cour_at_find(const struct cour_addr_table *t, const struct cour_addr *addr);
/* Remove entry idx: 0, or -FI_EINVAL when it is not a valid entry. */
int  cour_at_remove(struct cour_addr_table *t, size_t idx);
/* Bytes the table holds in memory (entries, chunk list, index). */
size_t cour_at_bytes(const struct cour_addr_table *t);

#endif
