#include "util/cour_addr_table.h"

#include <rdma/fi_errno.h>
#include <stdlib.h>
#include <string.h>

#define COUR_AT_CHUNK_SHIFT 10                  /* 1,024 entries (28 KiB) a chunk */
#define COUR_AT_CHUNK       (1u << COUR_AT_CHUNK_SHIFT)
#define COUR_AT_KEYLEN      offsetof(struct cour_addr, is_v4)   /* ip and port */

static struct cour_at_entry *cour_at_entry(const struct cour_addr_table *t, size_t idx)
{
	return &t->chunks[idx >> COUR_AT_CHUNK_SHIFT][idx & (COUR_AT_CHUNK - 1)];
}

/* FNV-1a over ip and port, then a final mix: low bits pick the slot */
static size_t cour_at_hash(const struct cour_addr *a)
{
	const uint8_t *p = (const uint8_t *)a;
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < COUR_AT_KEYLEN; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	h ^= h >> 29;
	return (size_t)h;
}

static bool cour_at_same(const struct cour_addr *a, const struct cour_addr *b)
{
	return !memcmp(a, b, COUR_AT_KEYLEN);
}

void cour_at_init(struct cour_addr_table *t)
{
	memset(t, 0, sizeof(*t));
}

void cour_at_fini(struct cour_addr_table *t)
{
	for (size_t i = 0; i < t->nchunks; i++)
		free(t->chunks[i]);
	free(t->chunks);
	free(t->index);
	memset(t, 0, sizeof(*t));
}

/* The index slot that holds addr's newest entry, or the empty slot where it would go. */
static size_t cour_at_slot(const struct cour_addr_table *t, const struct cour_addr *addr)
{
	size_t mask = t->index_cap - 1, s = cour_at_hash(addr) & mask;

	while (t->index[s] && !cour_at_same(&cour_at_entry(t, t->index[s] - 1)->addr, addr))
		s = (s + 1) & mask;
	return s;
}

static int cour_at_index_grow(struct cour_addr_table *t)
{
	size_t cap = t->index_cap ? t->index_cap * 2 : 64, old_cap = t->index_cap;
	uint32_t *old = t->index, *n = calloc(cap, sizeof(*n));

	if (!n)
		return -FI_ENOMEM;
	t->index = n;
	t->index_cap = cap;
	for (size_t i = 0; i < old_cap; i++)
		if (old[i])
			t->index[cour_at_slot(t, &cour_at_entry(t, old[i] - 1)->addr)] = old[i];
	free(old);
	return 0;
}

int cour_at_append(struct cour_addr_table *t, const struct cour_addr *addr, uint32_t *idx)
{
	size_t n = t->count, s;
	struct cour_at_entry *e;

	if (n >= COUR_AT_MAX)
		return -FI_ENOSPC;
	if ((t->index_used + 1) * 2 > t->index_cap && cour_at_index_grow(t))
		return -FI_ENOMEM;
	if ((n >> COUR_AT_CHUNK_SHIFT) == t->nchunks) {
		struct cour_at_entry **c = realloc(t->chunks, (t->nchunks + 1) * sizeof(*c));

		if (!c)
			return -FI_ENOMEM;
		t->chunks = c;
		c[t->nchunks] = malloc(COUR_AT_CHUNK * sizeof(**c));
		if (!c[t->nchunks])
			return -FI_ENOMEM;
		t->nchunks++;
	}
	e = cour_at_entry(t, n);
	e->addr = *addr;
	e->valid = 1;
	s = cour_at_slot(t, addr);
	if (t->index[s]) {
		e->older = t->index[s] - 1;
	} else {
		e->older = COUR_AT_NONE;
		t->index_used++;
	}
	t->index[s] = (uint32_t)n + 1;
	t->count++;
	*idx = (uint32_t)n;
	return 0;
}

const struct cour_addr *cour_at_get(const struct cour_addr_table *t, size_t idx)
{
	const struct cour_at_entry *e;

	if (idx >= t->count)
		return NULL;
	e = cour_at_entry(t, idx);
	return e->valid ? &e->addr : NULL;
}

uint32_t cour_at_find(const struct cour_addr_table *t, const struct cour_addr *addr)
{
	size_t s;

	if (!t->index_used)
		return COUR_AT_NONE;
	s = cour_at_slot(t, addr);
	return t->index[s] ? t->index[s] - 1 : COUR_AT_NONE;
}

/* Empty slot s, then move back every later entry of its probe run that may now stand
 * nearer its home slot, so that lookups never need tombstones. */
static void cour_at_index_delete(struct cour_addr_table *t, size_t s)
{
	size_t mask = t->index_cap - 1, j = s;

	for (;;) {
		j = (j + 1) & mask;
		if (!t->index[j])
			break;
		size_t home = cour_at_hash(&cour_at_entry(t, t->index[j] - 1)->addr) & mask;
		/* j's entry may fill s unless its home lies cyclically in (s, j] */
		bool stays = s <= j ? (home > s && home <= j) : (home > s || home <= j);
		if (!stays) {
			t->index[s] = t->index[j];
			s = j;
		}
	}
	t->index[s] = 0;
	t->index_used--;
}

int cour_at_remove(struct cour_addr_table *t, size_t idx)
{
	struct cour_at_entry *e, *p;
	size_t s;
	uint32_t head;

	if (idx >= t->count || !cour_at_entry(t, idx)->valid)
		return -FI_EINVAL;
	e = cour_at_entry(t, idx);
	s = cour_at_slot(t, &e->addr);
	head = t->index[s] - 1;        /* a valid entry's address is always indexed */
	if (head == idx) {
		if (e->older != COUR_AT_NONE)
			t->index[s] = e->older + 1;
		else
			cour_at_index_delete(t, s);
	} else {
		for (p = cour_at_entry(t, head); p->older != idx; p = cour_at_entry(t, p->older))
			;
		p->older = e->older;
	}
	e->valid = 0;
	e->older = COUR_AT_NONE;
	return 0;
}

size_t cour_at_bytes(const struct cour_addr_table *t)
{
	return t->nchunks * (COUR_AT_CHUNK * sizeof(struct cour_at_entry) + sizeof(void *)) +
	       t->index_cap * sizeof(uint32_t);
}
