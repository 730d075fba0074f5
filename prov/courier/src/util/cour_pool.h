/*
 * Fixed-size object pools: the fast path never calls malloc. A pool hands out objects from a
 * free list and grows in chunks (so pointers stay valid) up to a cap; the cap is how the
 * provider turns "out of descriptors" into -FI_EAGAIN instead of unbounded memory.
 * Not thread-safe: pools belong to an endpoint and are used under the progress lock.
 */
#ifndef COUR_POOL_H
#define COUR_POOL_H

#include <stddef.h>
#include <stdint.h>

struct cour_pool_chunk;

struct cour_pool {
	size_t                  obj_size;   /* rounded up to 16 */
	size_t                  chunk_objs; /* objects per growth step */
	size_t                  max_objs;   /* 0: unbounded */
	size_t                  total;      /* objects allocated so far */
	size_t                  in_use;
	void                   *free;       /* singly linked through the first word */
	struct cour_pool_chunk *chunks;
};

void  cour_pool_init(struct cour_pool *p, size_t obj_size, size_t chunk_objs, size_t max_objs);
void  cour_pool_fini(struct cour_pool *p);
void *cour_pool_grow_get(struct cour_pool *p);   /* slow path of cour_pool_get */

/* An object (contents undefined), or NULL when the pool is at its cap or malloc fails. */
static inline void *cour_pool_get(struct cour_pool *p)
{
	void *o = p->free;

	if (__builtin_expect(!o, 0))
		return cour_pool_grow_get(p);
	p->free = *(void **)o;
	p->in_use++;
	return o;
}

static inline void cour_pool_put(struct cour_pool *p, void *o)
{
	*(void **)o = p->free;
	p->free = o;
	p->in_use--;
}

#endif
