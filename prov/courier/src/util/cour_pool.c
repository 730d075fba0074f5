#include "util/cour_pool.h"

#include <stdlib.h>

struct cour_pool_chunk {
	struct cour_pool_chunk *next;
	/* objects follow, 16-byte aligned */
	_Alignas(16) unsigned char objs[];
};

void cour_pool_init(struct cour_pool *p, size_t obj_size, size_t chunk_objs, size_t max_objs)
{
	/* room for the free-list link, rounded up to 16 for alignment */
	p->obj_size = ((obj_size < sizeof(void *) ? sizeof(void *) : obj_size) + 15) & ~(size_t)15;
	p->chunk_objs = chunk_objs ? chunk_objs : 1;
	p->max_objs = max_objs;
	p->total = 0;
	p->in_use = 0;
	p->free = NULL;
	p->chunks = NULL;
}

void cour_pool_fini(struct cour_pool *p)
{
	struct cour_pool_chunk *c, *n;

	for (c = p->chunks; c; c = n) {
		n = c->next;
		free(c);
	}
	p->chunks = NULL;
	p->free = NULL;
	p->total = p->in_use = 0;
}

void *cour_pool_grow_get(struct cour_pool *p)
{
	struct cour_pool_chunk *c;
	size_t n = p->chunk_objs, i;

	if (p->max_objs) {
		if (p->total >= p->max_objs)
			return NULL;
		if (n > p->max_objs - p->total)
			n = p->max_objs - p->total;
	}
	c = malloc(sizeof(*c) + n * p->obj_size);
	if (!c)
		return NULL;
	c->next = p->chunks;
	p->chunks = c;
	for (i = 0; i < n; i++) {
		void *o = c->objs + i * p->obj_size;
		*(void **)o = p->free;
		p->free = o;
	}
	p->total += n;
	return cour_pool_get(p);
}
