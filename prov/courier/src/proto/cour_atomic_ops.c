/*
 * The atomic operation table (see cour_atomic_ops.h for which op applies to which datatype).
 *
 * How each element is made atomic
 * -------------------------------
 * Every operation is one read-modify-write of one element: read the old value, compute the new
 * one with a per-(op, datatype) function, store it if the operation says so. Three paths:
 *
 *  1. CAS, 1/2/4/8 bytes: the element is naturally aligned and the compiler promises lock-free
 *     atomics of that size. An __atomic load, then a compare-exchange loop on the bit pattern
 *     (floats and float complex included: the function computes on the value, the CAS compares
 *     the exact bits that were read, so it never mistakes -0.0 for +0.0 or loses a NaN).
 *  2. CAS, 16 bytes: double complex and the 128-bit integers, naturally aligned, on x86-64 CPUs
 *     with cmpxchg16b (checked once with cpuid; the answer is fixed for the process lifetime).
 *     The first read is itself a cmpxchg16b, because a plain 16-byte load may tear.
 *  3. Locks: everything else, i.e. long double and long double complex always (their size and
 *     format are compiler-specific: 12 or 16 bytes, x87 extended or IEEE quad, padding bytes),
 *     unaligned targets (the region is the application's, any offset may be named), and 16-byte
 *     types without cmpxchg16b. A striped table of mutexes keyed by a hash of (address >> 4);
 *     the same element always maps to the same stripe, and an element holds one stripe at a time,
 *     so there is no lock order to respect.
 *
 * The path is a pure function of (datatype, element address, CPU), so one element of one
 * datatype is never updated by a locked and a lock-free access at the same time. The man page
 * promises atomicity per datatype only: mixing datatypes over the same bytes is not covered,
 * and neither are processes other than this one (the locks are process-local).
 *
 * The CAS loops are unbounded on purpose: a failed CAS means another thread's operation
 * succeeded, so the system as a whole always progresses, and giving up would lose an update.
 * Path 2 reads with a cmpxchg16b, which stores (the value it found), so even FI_ATOMIC_READ of
 * a 16-byte element needs writable memory: the caller must not run it on a read-only mapping.
 */
#include "util/cour_util.h"
#include "proto/cour_atomic_ops.h"

#include <complex.h>
#include <stdlib.h>

#if defined(__x86_64__) && defined(__SIZEOF_INT128__)
#include <cpuid.h>
#define COUR_HAVE_CAS16 1
#else
#define COUR_HAVE_CAS16 0
#endif

#define COUR_ATOMIC_DT_COUNT (FI_UINT128 + 1)
#define COUR_ATOMIC_STRIPES  64	/* power of two */

/* One element in a local, suitably aligned buffer; the member names the datatype. */
union cour_atomic_val {
	int8_t                   i8;
	uint8_t                  u8;
	int16_t                  i16;
	uint16_t                 u16;
	int32_t                  i32;
	uint32_t                 u32;
	int64_t                  i64;
	uint64_t                 u64;
#ifdef __SIZEOF_INT128__
	__int128                 i128;
	unsigned __int128        u128;
#endif
	float                    flt;
	double                   dbl;
	long double              ldbl;
	float _Complex           cflt;
	double _Complex          cdbl;
	long double _Complex     cldbl;
	uint8_t                  bytes[sizeof(long double _Complex)];
};

/* Computes the new value into r from the old value o, the operand a and the compare value c;
 * returns false when the target must be left as it is (r is then not written). */
typedef bool (*cour_atomic_fn)(union cour_atomic_val *r, const union cour_atomic_val *o,
			       const union cour_atomic_val *a, const union cour_atomic_val *c);

struct cour_atomic_type {
	size_t         size;
	bool           lock_always;	/* path 3 whatever the alignment */
	cour_atomic_fn fn[FI_ATOMIC_OP_LAST];	/* NULL: op not defined for this datatype */
};

static const struct cour_atomic_type cour_atomic_types[COUR_ATOMIC_DT_COUNT];

/* ---- the per-(op, datatype) functions ---- */

#define COUR_FN(tn, m, name, cond, val)							\
static bool cour_##name##_##tn(union cour_atomic_val *r, const union cour_atomic_val *vo,	\
			       const union cour_atomic_val *va,				\
			       const union cour_atomic_val *vc)				\
{											\
	__typeof__(r->m) o = vo->m, a = va->m, c = vc->m;				\
	(void)o; (void)a; (void)c;							\
	if (!(cond))									\
		return false;								\
	r->m = (val);									\
	return true;									\
}

/* Defined for every datatype: logic on "nonzero", plain moves, equality. */
#define COUR_FNS_ANY(tn, m)						\
	COUR_FN(tn, m, lor, 1, o || a)					\
	COUR_FN(tn, m, land, 1, o && a)					\
	COUR_FN(tn, m, lxor, 1, !o != !a)				\
	COUR_FN(tn, m, read, 0, o)					\
	COUR_FN(tn, m, write, 1, a)					\
	COUR_FN(tn, m, cswap, c == o, a)				\
	COUR_FN(tn, m, cswap_ne, c != o, a)

/* Defined for ordered (non-complex) datatypes. */
#define COUR_FNS_ORDER(tn, m)						\
	COUR_FN(tn, m, min, a < o, a)					\
	COUR_FN(tn, m, max, a > o, a)					\
	COUR_FN(tn, m, cswap_le, c <= o, a)				\
	COUR_FN(tn, m, cswap_lt, c < o, a)				\
	COUR_FN(tn, m, cswap_ge, c >= o, a)				\
	COUR_FN(tn, m, cswap_gt, c > o, a)

/* Integers only. */
#define COUR_FNS_BITS(tn, m)						\
	COUR_FN(tn, m, bor, 1, o | a)					\
	COUR_FN(tn, m, band, 1, o & a)					\
	COUR_FN(tn, m, bxor, 1, o ^ a)					\
	COUR_FN(tn, m, mswap, 1, (a & c) | (o & ~c))

/* Integer arithmetic in the unsigned type U (at least as wide as int, so that nothing is
 * promoted to a signed int that could overflow); the conversion back to a signed type wraps
 * (GCC defines it as modulo 2^bits). */
#define COUR_FNS_IARITH(tn, m, U)					\
	COUR_FN(tn, m, sum, 1, (U)o + (U)a)				\
	COUR_FN(tn, m, prod, 1, (U)o * (U)a)

#define COUR_FNS_FARITH(tn, m)						\
	COUR_FN(tn, m, sum, 1, o + a)					\
	COUR_FN(tn, m, prod, 1, o * a)

#define COUR_FNS_INT(tn, U)						\
	COUR_FNS_ANY(tn, tn) COUR_FNS_ORDER(tn, tn)			\
	COUR_FNS_BITS(tn, tn) COUR_FNS_IARITH(tn, tn, U)
#define COUR_FNS_REAL(tn)						\
	COUR_FNS_ANY(tn, tn) COUR_FNS_ORDER(tn, tn) COUR_FNS_FARITH(tn, tn)
#define COUR_FNS_COMPLEX(tn)						\
	COUR_FNS_ANY(tn, tn) COUR_FNS_FARITH(tn, tn)

COUR_FNS_INT(i8, uint32_t)
COUR_FNS_INT(u8, uint32_t)
COUR_FNS_INT(i16, uint32_t)
COUR_FNS_INT(u16, uint32_t)
COUR_FNS_INT(i32, uint32_t)
COUR_FNS_INT(u32, uint32_t)
COUR_FNS_INT(i64, uint64_t)
COUR_FNS_INT(u64, uint64_t)
#ifdef __SIZEOF_INT128__
COUR_FNS_INT(i128, unsigned __int128)
COUR_FNS_INT(u128, unsigned __int128)
#endif
COUR_FNS_REAL(flt)
COUR_FNS_REAL(dbl)
COUR_FNS_REAL(ldbl)
COUR_FNS_COMPLEX(cflt)
COUR_FNS_COMPLEX(cdbl)
COUR_FNS_COMPLEX(cldbl)

/* ---- path 1: lock-free CAS on 1/2/4/8 bytes ---- */

#define COUR_RMW_CAS(n, UT)								\
static void cour_atomic_rmw##n(void *target, cour_atomic_fn fn,				\
			       const union cour_atomic_val *a,				\
			       const union cour_atomic_val *c, union cour_atomic_val *old)	\
{											\
	UT *p = target, cur, next;							\
	union cour_atomic_val nv = { 0 };						\
											\
	cur = __atomic_load_n(p, __ATOMIC_SEQ_CST);					\
	for (;;) {									\
		memcpy(old->bytes, &cur, n);						\
		if (!fn(&nv, old, a, c))						\
			return;								\
		memcpy(&next, nv.bytes, n);						\
		if (__atomic_compare_exchange_n(p, &cur, next, false,			\
						__ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))	\
			return;								\
	}										\
}

COUR_RMW_CAS(1, uint8_t)
COUR_RMW_CAS(2, uint16_t)
COUR_RMW_CAS(4, uint32_t)
COUR_RMW_CAS(8, uint64_t)

/* ---- path 2: cmpxchg16b ---- */

#if COUR_HAVE_CAS16
static bool cour_atomic_have_cas16(void)
{
	static int state;	/* 0: not asked yet, 1: yes, 2: no; every thread finds the same */
	unsigned int eax, ebx, ecx, edx;
	int s = __atomic_load_n(&state, __ATOMIC_RELAXED);

	if (COUR_UNLIKELY(!s)) {
		s = (__get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_CMPXCHG16B)) ? 1 : 2;
		__atomic_store_n(&state, s, __ATOMIC_RELAXED);
	}
	return s == 1;
}

/* The __sync builtins are expanded inline to lock cmpxchg16b under target("cx16"), while the
 * __atomic ones would call libatomic, whose 16-byte choice we do not control. */
__attribute__((target("cx16")))
static void cour_atomic_rmw16(void *target, cour_atomic_fn fn, const union cour_atomic_val *a,
			      const union cour_atomic_val *c, union cour_atomic_val *old)
{
	unsigned __int128 *p = target, cur, next, prev;
	union cour_atomic_val nv = { 0 };

	cur = __sync_val_compare_and_swap(p, 0, 0);
	for (;;) {
		memcpy(old->bytes, &cur, 16);
		if (!fn(&nv, old, a, c))
			return;
		memcpy(&next, nv.bytes, 16);
		prev = __sync_val_compare_and_swap(p, cur, next);
		if (prev == cur)
			return;
		cur = prev;
	}
}
#else
static bool cour_atomic_have_cas16(void)
{
	return false;
}

static void cour_atomic_rmw16(void *target, cour_atomic_fn fn, const union cour_atomic_val *a,
			      const union cour_atomic_val *c, union cour_atomic_val *old)
{
	abort();	/* unreachable: cour_atomic_have_cas16() is false */
}
#endif

/* ---- path 3: striped locks ---- */

static struct {
	pthread_mutex_t mutex;
} __attribute__((aligned(64))) cour_atomic_stripes[COUR_ATOMIC_STRIPES] = {
	[0 ... COUR_ATOMIC_STRIPES - 1] = { PTHREAD_MUTEX_INITIALIZER },
};

static pthread_mutex_t *cour_atomic_stripe(const void *target)
{
	uint64_t h = ((uint64_t)(uintptr_t)target >> 4) * 0x9e3779b97f4a7c15ull;

	return &cour_atomic_stripes[h >> (64 - 6)].mutex;
}

_Static_assert(COUR_ATOMIC_STRIPES == 1 << 6, "the stripe hash keeps 6 bits");

static void cour_atomic_rmw_locked(const struct cour_atomic_type *t, void *target,
				   cour_atomic_fn fn, const union cour_atomic_val *a,
				   const union cour_atomic_val *c, union cour_atomic_val *old)
{
	pthread_mutex_t *m = cour_atomic_stripe(target);
	union cour_atomic_val nv = { 0 };

	pthread_mutex_lock(m);
	memcpy(old->bytes, target, t->size);
	if (fn(&nv, old, a, c))
		memcpy(target, nv.bytes, t->size);
	pthread_mutex_unlock(m);
}

static void cour_atomic_rmw(const struct cour_atomic_type *t, void *target, cour_atomic_fn fn,
			    const union cour_atomic_val *a, const union cour_atomic_val *c,
			    union cour_atomic_val *old)
{
	bool cas = !t->lock_always && !((uintptr_t)target & (t->size - 1));

	if (cas && t->size == 1 && __atomic_always_lock_free(1, 0))
		cour_atomic_rmw1(target, fn, a, c, old);
	else if (cas && t->size == 2 && __atomic_always_lock_free(2, 0))
		cour_atomic_rmw2(target, fn, a, c, old);
	else if (cas && t->size == 4 && __atomic_always_lock_free(4, 0))
		cour_atomic_rmw4(target, fn, a, c, old);
	else if (cas && t->size == 8 && __atomic_always_lock_free(8, 0))
		cour_atomic_rmw8(target, fn, a, c, old);
	else if (cas && t->size == 16 && cour_atomic_have_cas16())
		cour_atomic_rmw16(target, fn, a, c, old);
	else
		cour_atomic_rmw_locked(t, target, fn, a, c, old);
}

/* ---- the API ---- */

static const struct cour_atomic_type *cour_atomic_type_get(enum fi_datatype dt)
{
	if ((unsigned)dt >= COUR_ATOMIC_DT_COUNT || !cour_atomic_types[dt].size)
		return NULL;
	return &cour_atomic_types[dt];
}

static cour_atomic_fn cour_atomic_fn_get(enum fi_op op, enum fi_datatype dt)
{
	const struct cour_atomic_type *t = cour_atomic_type_get(dt);

	if (!t || (unsigned)op >= FI_ATOMIC_OP_LAST)
		return NULL;
	return t->fn[op];
}

static bool cour_atomic_kind_has(int kind, enum fi_op op)
{
	switch (kind) {
	case COUR_ATOMIC_BASE:
		return (unsigned)op <= FI_BXOR || op == FI_ATOMIC_WRITE;
	case COUR_ATOMIC_FETCH:
		return (unsigned)op <= FI_ATOMIC_WRITE;
	case COUR_ATOMIC_COMPARE:
		return op >= FI_CSWAP && op <= FI_MSWAP;
	default:
		return false;
	}
}

size_t cour_atomic_dt_size(enum fi_datatype dt)
{
	const struct cour_atomic_type *t = cour_atomic_type_get(dt);

	return t ? t->size : 0;
}

bool cour_atomic_valid(enum fi_op op, enum fi_datatype dt, int kind)
{
	return cour_atomic_kind_has(kind, op) && cour_atomic_fn_get(op, dt);
}

int cour_atomic_exec(enum fi_op op, enum fi_datatype dt, void *target, const void *operand,
		     const void *compare, void *result, size_t count)
{
	const struct cour_atomic_type *t = cour_atomic_type_get(dt);
	cour_atomic_fn fn = cour_atomic_fn_get(op, dt);
	union cour_atomic_val a = { 0 }, c = { 0 }, old = { 0 };
	bool is_compare = op >= FI_CSWAP && op <= FI_MSWAP;
	size_t i, off;

	if (!fn) {
		COUR_WARN(FI_LOG_EP_DATA, "atomic op %d is not defined for datatype %d\n", op, dt);
		return -FI_EOPNOTSUPP;
	}
	if (!count)
		return 0;
	if (!target || count > SIZE_MAX / t->size) {
		COUR_WARN(FI_LOG_EP_DATA, "atomic op %d: target %p, count %zu is not usable\n",
			  op, target, count);
		return -FI_EINVAL;
	}
	if ((op != FI_ATOMIC_READ && !operand) || (is_compare && !compare) ||
	    (op == FI_ATOMIC_READ && !result)) {
		COUR_WARN(FI_LOG_EP_DATA, "atomic op %d: missing buffer (operand %p, compare %p, "
			  "result %p)\n", op, operand, compare, result);
		return -FI_EINVAL;
	}

	for (i = 0, off = 0; i < count; i++, off += t->size) {
		if (op != FI_ATOMIC_READ)
			memcpy(a.bytes, (const char *)operand + off, t->size);
		if (is_compare)
			memcpy(c.bytes, (const char *)compare + off, t->size);
		cour_atomic_rmw(t, (char *)target + off, fn, &a, &c, &old);
		if (result)
			memcpy((char *)result + off, old.bytes, t->size);
	}
	return 0;
}

/* Applications probe whole op x datatype tables with fi_query_atomic, so an unsupported
 * combination is an answer, logged at INFO level rather than as a warning. */
int cour_atomic_query(enum fi_op op, enum fi_datatype dt, uint64_t flags, size_t max_bytes,
		      struct fi_atomic_attr *attr)
{
	int kind = COUR_ATOMIC_BASE;
	size_t size;

	if ((flags & FI_FETCH_ATOMIC) && (flags & FI_COMPARE_ATOMIC)) {
		COUR_WARN(FI_LOG_DOMAIN, "FI_FETCH_ATOMIC and FI_COMPARE_ATOMIC both set\n");
		return -FI_EINVAL;
	}
	if (!attr) {
		COUR_WARN(FI_LOG_DOMAIN, "fi_query_atomic without an attr to fill\n");
		return -FI_EINVAL;
	}
	if (flags & FI_TAGGED) {
		COUR_INFO(FI_LOG_DOMAIN, "atomics on tagged buffers are not supported\n");
		return -FI_EOPNOTSUPP;
	}
	if (flags & FI_FETCH_ATOMIC)
		kind = COUR_ATOMIC_FETCH;
	else if (flags & FI_COMPARE_ATOMIC)
		kind = COUR_ATOMIC_COMPARE;

	if (!cour_atomic_valid(op, dt, kind)) {
		COUR_INFO(FI_LOG_DOMAIN, "atomic op %d on datatype %d (kind %d) not supported\n",
			  op, dt, kind);
		return -FI_EOPNOTSUPP;
	}
	size = cour_atomic_types[dt].size;
	if (max_bytes < size) {
		COUR_INFO(FI_LOG_DOMAIN, "datatype %d (%zu bytes) exceeds the %zu-byte limit\n",
			  dt, size, max_bytes);
		return -FI_EOPNOTSUPP;
	}
	attr->size = size;
	attr->count = max_bytes / size;
	return 0;
}

/* ---- the table ---- */

#define COUR_ROW_ANY(tn)							\
	[FI_LOR] = cour_lor_##tn, [FI_LAND] = cour_land_##tn,			\
	[FI_LXOR] = cour_lxor_##tn, [FI_ATOMIC_READ] = cour_read_##tn,		\
	[FI_ATOMIC_WRITE] = cour_write_##tn, [FI_CSWAP] = cour_cswap_##tn,	\
	[FI_CSWAP_NE] = cour_cswap_ne_##tn,					\
	[FI_SUM] = cour_sum_##tn, [FI_PROD] = cour_prod_##tn
#define COUR_ROW_ORDER(tn)							\
	[FI_MIN] = cour_min_##tn, [FI_MAX] = cour_max_##tn,			\
	[FI_CSWAP_LE] = cour_cswap_le_##tn, [FI_CSWAP_LT] = cour_cswap_lt_##tn,	\
	[FI_CSWAP_GE] = cour_cswap_ge_##tn, [FI_CSWAP_GT] = cour_cswap_gt_##tn
#define COUR_ROW_BITS(tn)							\
	[FI_BOR] = cour_bor_##tn, [FI_BAND] = cour_band_##tn,			\
	[FI_BXOR] = cour_bxor_##tn, [FI_MSWAP] = cour_mswap_##tn

#define COUR_TYPE_INT(tn)						\
	{ .size = sizeof(((union cour_atomic_val *)0)->tn),		\
	  .fn = { COUR_ROW_ANY(tn), COUR_ROW_ORDER(tn), COUR_ROW_BITS(tn) } }
#define COUR_TYPE_REAL(tn, lock)					\
	{ .size = sizeof(((union cour_atomic_val *)0)->tn), .lock_always = lock,	\
	  .fn = { COUR_ROW_ANY(tn), COUR_ROW_ORDER(tn) } }
#define COUR_TYPE_COMPLEX(tn, lock)					\
	{ .size = sizeof(((union cour_atomic_val *)0)->tn), .lock_always = lock,	\
	  .fn = { COUR_ROW_ANY(tn) } }

static const struct cour_atomic_type cour_atomic_types[COUR_ATOMIC_DT_COUNT] = {
	[FI_INT8] = COUR_TYPE_INT(i8),
	[FI_UINT8] = COUR_TYPE_INT(u8),
	[FI_INT16] = COUR_TYPE_INT(i16),
	[FI_UINT16] = COUR_TYPE_INT(u16),
	[FI_INT32] = COUR_TYPE_INT(i32),
	[FI_UINT32] = COUR_TYPE_INT(u32),
	[FI_INT64] = COUR_TYPE_INT(i64),
	[FI_UINT64] = COUR_TYPE_INT(u64),
	[FI_FLOAT] = COUR_TYPE_REAL(flt, false),
	[FI_DOUBLE] = COUR_TYPE_REAL(dbl, false),
	[FI_FLOAT_COMPLEX] = COUR_TYPE_COMPLEX(cflt, false),
	[FI_DOUBLE_COMPLEX] = COUR_TYPE_COMPLEX(cdbl, false),
	[FI_LONG_DOUBLE] = COUR_TYPE_REAL(ldbl, true),
	[FI_LONG_DOUBLE_COMPLEX] = COUR_TYPE_COMPLEX(cldbl, true),
#ifdef __SIZEOF_INT128__
	[FI_INT128] = COUR_TYPE_INT(i128),
	[FI_UINT128] = COUR_TYPE_INT(u128),
#endif
};
