/*
 * Object pools (util/cour_pool.[ch]): sizes rounded to 16, growth in chunks, the cap that turns
 * "out of descriptors" into -FI_EAGAIN, LIFO reuse, and pointers that survive growth.
 */
#include "util/cour_pool.h"

#include <criterion/criterion.h>
#include <stdbool.h>
#include <string.h>

TestSuite(pool, .timeout = 10);

#define NOBJ 64

Test(pool, sizes_round_up_to_16)
{
	const size_t in[]  = { 8, 9, 15, 16, 17, 24, 31, 32, 33, 100, 4096, 4097 };
	const size_t out[] = { 16, 16, 16, 16, 32, 32, 32, 32, 48, 112, 4096, 4112 };

	for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
		struct cour_pool p;

		cour_pool_init(&p, in[i], 4, 0);
		cr_assert_eq(p.obj_size, out[i], "object of %zu bytes: %zu", in[i], p.obj_size);
		cr_assert_eq(p.total, 0, "init allocates nothing");
		cr_assert_eq(p.in_use, 0);
		cr_assert_null(p.free);
		cour_pool_fini(&p);
	}
}

/*
 * Objects smaller than a pointer (1..7 bytes) once got obj_size 0 (sizeof(void *) rounded
 * down instead of up): every object of a chunk was the same address and the free-list link
 * was written past the chunk.
 */
Test(pool, tiny_objects_still_hold_the_free_link)
{
	struct cour_pool p;
	void *a, *b;

	cour_pool_init(&p, 1, 4, 0);
	cr_assert_eq(p.obj_size, 16);
	a = cour_pool_get(&p);
	b = cour_pool_get(&p);
	cr_assert_neq(a, b);
	cour_pool_fini(&p);
}

Test(pool, chunk_of_zero_means_one)
{
	struct cour_pool p;

	cour_pool_init(&p, 32, 0, 0);
	cr_assert_eq(p.chunk_objs, 1);
	cr_assert_not_null(cour_pool_get(&p));
	cr_assert_eq(p.total, 1);
	cr_assert_not_null(cour_pool_get(&p));
	cr_assert_eq(p.total, 2);
	cour_pool_fini(&p);
}

Test(pool, grows_one_chunk_at_a_time)
{
	struct cour_pool p;
	void *o[9];

	cour_pool_init(&p, 40, 4, 0);
	for (int i = 0; i < 9; i++) {
		o[i] = cour_pool_get(&p);
		cr_assert_not_null(o[i]);
		cr_assert_eq(p.in_use, (size_t)i + 1);
		cr_assert_eq(p.total, ((size_t)i / 4 + 1) * 4, "after %d gets: total %zu", i + 1,
			     p.total);
	}
	for (int i = 0; i < 9; i++)
		cour_pool_put(&p, o[i]);
	cr_assert_eq(p.in_use, 0);
	cr_assert_eq(p.total, 12, "putting back never frees");
	cour_pool_fini(&p);
	cr_assert_eq(p.total, 0);
	cr_assert_eq(p.in_use, 0);
	cr_assert_null(p.free);
	cr_assert_null(p.chunks);
}

Test(pool, objects_are_aligned_distinct_and_whole)
{
	struct cour_pool p;
	unsigned char *o[NOBJ];

	cour_pool_init(&p, 24, 7, 0);          /* 24 -> 32 bytes, chunks of 7: odd sizes */
	for (int i = 0; i < NOBJ; i++) {
		o[i] = cour_pool_get(&p);
		cr_assert_not_null(o[i]);
		cr_assert_eq((uintptr_t)o[i] % 16, 0, "object %d at %p", i, (void *)o[i]);
		memset(o[i], i + 1, p.obj_size);  /* the whole rounded size is ours */
	}
	for (int i = 0; i < NOBJ; i++)
		for (size_t b = 0; b < p.obj_size; b++)
			cr_assert_eq(o[i][b], i + 1, "object %d byte %zu overwritten", i, b);
	cour_pool_fini(&p);
}

Test(pool, the_cap_is_exact_and_a_put_makes_room)
{
	struct cour_pool p;
	void *o[5], *again;

	cour_pool_init(&p, 16, 4, 5);          /* a cap that is no multiple of the chunk */
	for (int i = 0; i < 5; i++) {
		o[i] = cour_pool_get(&p);
		cr_assert_not_null(o[i], "get %d under the cap", i);
	}
	cr_assert_eq(p.total, 5, "the last chunk is cut to the cap");
	for (int i = 0; i < 3; i++)
		cr_assert_null(cour_pool_get(&p), "get beyond the cap must fail");
	cr_assert_eq(p.in_use, 5, "a failed get changes nothing");
	cr_assert_eq(p.total, 5);

	cour_pool_put(&p, o[2]);
	again = cour_pool_get(&p);
	cr_assert_eq(again, o[2], "the freed object comes back");
	cr_assert_null(cour_pool_get(&p));
	cour_pool_fini(&p);
}

Test(pool, cap_below_one_chunk)
{
	struct cour_pool p;

	cour_pool_init(&p, 64, 64, 2);
	cr_assert_not_null(cour_pool_get(&p));
	cr_assert_eq(p.total, 2);
	cr_assert_not_null(cour_pool_get(&p));
	cr_assert_null(cour_pool_get(&p));
	cour_pool_fini(&p);
}

Test(pool, reuse_is_last_in_first_out)
{
	struct cour_pool p;
	void *a, *b, *c;

	cour_pool_init(&p, 16, 8, 0);
	a = cour_pool_get(&p);
	b = cour_pool_get(&p);
	c = cour_pool_get(&p);
	cr_assert(a != b && b != c && a != c);
	cour_pool_put(&p, a);
	cour_pool_put(&p, c);
	cr_assert_eq(cour_pool_get(&p), c);
	cr_assert_eq(cour_pool_get(&p), a);
	cr_assert_eq(p.in_use, 3);
	cour_pool_fini(&p);
}

Test(pool, growth_keeps_earlier_objects_in_place)
{
	struct cour_pool p;
	uint64_t *o[NOBJ];

	cour_pool_init(&p, sizeof(uint64_t) * 2, 2, 0);
	for (int i = 0; i < NOBJ; i++) {
		o[i] = cour_pool_get(&p);
		cr_assert_not_null(o[i]);
		o[i][0] = 0xabcd0000u + (uint64_t)i;
		o[i][1] = ~(uint64_t)i;
	}
	cr_assert_eq(p.total, NOBJ);
	for (int i = 0; i < NOBJ; i++) {
		cr_assert_eq(o[i][0], 0xabcd0000u + (uint64_t)i, "object %d moved or clobbered", i);
		cr_assert_eq(o[i][1], ~(uint64_t)i);
	}
	cour_pool_fini(&p);
}

Test(pool, every_object_comes_back_once)
{
	struct cour_pool p;
	void *o[NOBJ], *seen[NOBJ];

	cour_pool_init(&p, 48, 16, NOBJ);
	for (int i = 0; i < NOBJ; i++)
		o[i] = cour_pool_get(&p);
	cr_assert_null(cour_pool_get(&p));
	for (int i = 0; i < NOBJ; i++)
		cour_pool_put(&p, o[i]);
	/* drain again: the same NOBJ objects, each exactly once */
	for (int i = 0; i < NOBJ; i++) {
		bool known = false;

		seen[i] = cour_pool_get(&p);
		cr_assert_not_null(seen[i]);
		for (int j = 0; j < NOBJ; j++)
			known |= seen[i] == o[j];
		cr_assert(known, "get %d returned an object the pool never handed out", i);
		for (int j = 0; j < i; j++)
			cr_assert_neq(seen[i], seen[j], "object handed out twice");
	}
	cr_assert_null(cour_pool_get(&p));
	cr_assert_eq(p.total, NOBJ);
	cour_pool_fini(&p);
}

Test(pool, usable_again_after_fini)
{
	struct cour_pool p;

	cour_pool_init(&p, 16, 4, 4);
	for (int i = 0; i < 4; i++)
		cr_assert_not_null(cour_pool_get(&p));
	cr_assert_null(cour_pool_get(&p));
	cour_pool_fini(&p);
	/* fini keeps the parameters and drops every object: the pool grows from nothing again */
	cr_assert_not_null(cour_pool_get(&p));
	cr_assert_eq(p.total, 4);
	cr_assert_eq(p.in_use, 1);
	cour_pool_fini(&p);
}
