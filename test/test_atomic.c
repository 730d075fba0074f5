/*
 * The atomic operation table (proto/cour_atomic_ops.c) against fi_atomic(3):
 * - validity of every op x datatype x kind against a table written here from the man page;
 * - every valid op x datatype on the cross product of edge values, against a plain reference
 *   written here (no code shared with the implementation), with aligned and unaligned buffers,
 *   with and without fetching the old value;
 * - a few hand-computed answers, so that the reference itself is checked;
 * - errors leave memory untouched; fi_query_atomic answers;
 * - concurrency: several threads on one element must lose no update, on every path.
 */
#include <complex.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include <rdma/fi_errno.h>
#include <rdma/providers/fi_log.h>
#include <rdma/providers/fi_prov.h>

#include "proto/cour_atomic_ops.h"

/*
 * This program links the component alone, without libfabric (whose dependencies cost 0.4 s of
 * start-up in every Criterion worker): cour_prov and the two logging entry points are ours, and
 * they count what the component logs, so tests can check who warns.
 */
struct fi_provider cour_prov = { .name = "courier" };
static int log_count[FI_LOG_DEBUG + 1];   /* (libfabric 2.x has no FI_LOG_MAX) */

int fi_log_enabled(const struct fi_provider *prov, enum fi_log_level level,
		   enum fi_log_subsys subsys)
{
	return prov == &cour_prov;
}

void fi_log(const struct fi_provider *prov, enum fi_log_level level, enum fi_log_subsys subsys,
	    const char *func, int line, const char *fmt, ...)
{
	if ((unsigned)level <= FI_LOG_DEBUG)
		log_count[level]++;
}

#define NDT  (FI_UINT128 + 1)
#define NOPS FI_ATOMIC_OP_LAST

/* ---- expected validity, from fi_atomic(3) ----
 * Columns, in enum fi_datatype order: 1..8 INT8 UINT8 INT16 UINT16 INT32 UINT32 INT64 UINT64,
 * f FLOAT, d DOUBLE, c FLOAT_COMPLEX, C DOUBLE_COMPLEX, l LONG_DOUBLE, L LONG_DOUBLE_COMPLEX,
 * q INT128, Q UINT128. Bitwise ops need integers; complex numbers have no order. */
static const char *const expect_dt[NOPS] = {
	/*                    12345678fdcClLqQ */
	[FI_MIN]          = "xxxxxxxxxx..x.xx",
	[FI_MAX]          = "xxxxxxxxxx..x.xx",
	[FI_SUM]          = "xxxxxxxxxxxxxxxx",
	[FI_PROD]         = "xxxxxxxxxxxxxxxx",
	[FI_LOR]          = "xxxxxxxxxxxxxxxx",
	[FI_LAND]         = "xxxxxxxxxxxxxxxx",
	[FI_BOR]          = "xxxxxxxx......xx",
	[FI_BAND]         = "xxxxxxxx......xx",
	[FI_LXOR]         = "xxxxxxxxxxxxxxxx",
	[FI_BXOR]         = "xxxxxxxx......xx",
	[FI_ATOMIC_READ]  = "xxxxxxxxxxxxxxxx",
	[FI_ATOMIC_WRITE] = "xxxxxxxxxxxxxxxx",
	[FI_CSWAP]        = "xxxxxxxxxxxxxxxx",
	[FI_CSWAP_NE]     = "xxxxxxxxxxxxxxxx",
	[FI_CSWAP_LE]     = "xxxxxxxxxx..x.xx",
	[FI_CSWAP_LT]     = "xxxxxxxxxx..x.xx",
	[FI_CSWAP_GE]     = "xxxxxxxxxx..x.xx",
	[FI_CSWAP_GT]     = "xxxxxxxxxx..x.xx",
	[FI_MSWAP]        = "xxxxxxxx......xx",
};

/* Ops per kind, in enum fi_op order: MIN MAX SUM PROD LOR LAND BOR BAND LXOR BXOR READ WRITE
 * CSWAP CSWAP_NE CSWAP_LE CSWAP_LT CSWAP_GE CSWAP_GT MSWAP. */
static const char *const expect_kind[3] = {
	[COUR_ATOMIC_BASE]    = "xxxxxxxxxx.x.......",
	[COUR_ATOMIC_FETCH]   = "xxxxxxxxxxxx.......",
	[COUR_ATOMIC_COMPARE] = "............xxxxxxx",
};

static bool expect_valid(int op, int dt, int kind)
{
#ifndef __SIZEOF_INT128__
	if (dt == FI_INT128 || dt == FI_UINT128)
		return false;
#endif
	return expect_dt[op][dt] == 'x' && expect_kind[kind][op] == 'x';
}

static const size_t expect_size[NDT] = {
	1, 1, 2, 2, 4, 4, 8, 8, 4, 8, 8, 16,
	sizeof(long double), 2 * sizeof(long double), 16, 16
};

static bool is_compare(int op)
{
	return op >= FI_CSWAP;
}

Test(atomic, validity_every_op_dt_kind)
{
	int checked = 0;

	for (int op = 0; op < NOPS; op++)
		cr_assert_eq(strlen(expect_dt[op]), NDT, "table row %d", op);
	for (int k = 0; k < 3; k++)
		cr_assert_eq(strlen(expect_kind[k]), NOPS, "kind row %d", k);
	for (int dt = 0; dt < NDT; dt++) {
		size_t want = expect_size[dt];
#ifndef __SIZEOF_INT128__
		if (dt == FI_INT128 || dt == FI_UINT128)
			want = 0;
#endif
		cr_assert_eq(cour_atomic_dt_size(dt), want, "size of dt %d", dt);
		for (int op = 0; op < NOPS; op++)
			for (int k = 0; k < 3; k++, checked++)
				cr_assert_eq(cour_atomic_valid(op, dt, k), expect_valid(op, dt, k),
					     "op %d dt %d kind %d", op, dt, k);
	}
	cr_assert_eq(checked, NDT * NOPS * 3);
	cr_assert_eq(cour_atomic_dt_size(FI_VOID), 0);
	cr_assert_eq(cour_atomic_dt_size((enum fi_datatype)-1), 0);
	cr_assert_not(cour_atomic_valid((enum fi_op)FI_ATOMIC_OP_LAST, FI_UINT64, COUR_ATOMIC_FETCH));
	cr_assert_not(cour_atomic_valid(FI_NOOP, FI_UINT64, COUR_ATOMIC_BASE));
	cr_assert_not(cour_atomic_valid((enum fi_op)-1, FI_UINT64, COUR_ATOMIC_BASE));
	cr_assert_not(cour_atomic_valid(FI_SUM, FI_VOID, COUR_ATOMIC_BASE));
	cr_assert_not(cour_atomic_valid(FI_SUM, FI_UINT64, 3));
	cr_assert_not(cour_atomic_valid(FI_SUM, FI_UINT64, -1));
}

/* ---- the plain reference: non-atomic, type-generic, the man page's pseudo-code ---- */

#define REF_ANY(T)								\
	case FI_LOR: r = (o != 0) || (a != 0); break;				\
	case FI_LAND: r = (o != 0) && (a != 0); break;				\
	case FI_LXOR: r = ((o != 0) && !(a != 0)) || (!(o != 0) && (a != 0)); break; \
	case FI_ATOMIC_READ: r = o; break;					\
	case FI_ATOMIC_WRITE: r = a; break;					\
	case FI_CSWAP: r = o; if (c == o) r = a; break;				\
	case FI_CSWAP_NE: r = o; if (c != o) r = a; break;

#define REF_ORDER(T)								\
	case FI_MIN: r = o; if (a < o) r = a; break;				\
	case FI_MAX: r = o; if (a > o) r = a; break;				\
	case FI_CSWAP_LE: r = o; if (c <= o) r = a; break;			\
	case FI_CSWAP_LT: r = o; if (c < o) r = a; break;			\
	case FI_CSWAP_GE: r = o; if (c >= o) r = a; break;			\
	case FI_CSWAP_GT: r = o; if (c > o) r = a; break;

/* __builtin_*_overflow store the exact result wrapped to T's width: two's-complement wrap. */
#define REF_INT(T)								\
	case FI_SUM: (void)__builtin_add_overflow(o, a, &r); break;		\
	case FI_PROD: (void)__builtin_mul_overflow(o, a, &r); break;		\
	case FI_BOR: r = o | a; break;						\
	case FI_BAND: r = o & a; break;						\
	case FI_BXOR: r = o ^ a; break;						\
	case FI_MSWAP: r = (a & c) | (o & ~c); break;

#define REF_FLT(T)								\
	case FI_SUM: r = o + a; break;						\
	case FI_PROD: r = o * a; break;

#define REF_FN(tn, T, CASES)							\
static void ref_##tn(int op, void *rp, const void *op_, const void *ap, const void *cp) \
{										\
	T o, a, c, r;								\
	memcpy(&o, op_, sizeof(T));						\
	memcpy(&a, ap, sizeof(T));						\
	memcpy(&c, cp, sizeof(T));						\
	switch (op) {								\
	CASES									\
	default:								\
		cr_assert_fail("reference has no op %d for " #tn, op);		\
	}									\
	memcpy(rp, &r, sizeof(T));						\
}

#define REF_INT_FN(tn, T)  REF_FN(tn, T, REF_ANY(T) REF_ORDER(T) REF_INT(T))
#define REF_REAL_FN(tn, T) REF_FN(tn, T, REF_ANY(T) REF_ORDER(T) REF_FLT(T))
#define REF_CPLX_FN(tn, T) REF_FN(tn, T, REF_ANY(T) REF_FLT(T))

REF_INT_FN(i8, int8_t)
REF_INT_FN(u8, uint8_t)
REF_INT_FN(i16, int16_t)
REF_INT_FN(u16, uint16_t)
REF_INT_FN(i32, int32_t)
REF_INT_FN(u32, uint32_t)
REF_INT_FN(i64, int64_t)
REF_INT_FN(u64, uint64_t)
REF_REAL_FN(flt, float)
REF_REAL_FN(dbl, double)
REF_REAL_FN(ldbl, long double)
REF_CPLX_FN(cflt, float complex)
REF_CPLX_FN(cdbl, double complex)
REF_CPLX_FN(cldbl, long double complex)
#ifdef __SIZEOF_INT128__
REF_INT_FN(i128, __int128)
REF_INT_FN(u128, unsigned __int128)
#endif

/* ---- equality: bitwise, except that any NaN equals any NaN; long double by value and sign,
 * because its padding bytes carry nothing ---- */

static bool same_bytes(const void *x, const void *y, size_t n)
{
	return !memcmp(x, y, n);
}

#define SAME_REAL(tn, T, bitwise)						\
static bool same_real_##tn(T x, T y)						\
{										\
	if (isnan(x) || isnan(y))						\
		return isnan(x) && isnan(y);					\
	if (bitwise)								\
		return same_bytes(&x, &y, sizeof(T));				\
	return x == y && !signbit(x) == !signbit(y);				\
}										\
static bool same_##tn(const void *xp, const void *yp)				\
{										\
	T x, y;									\
	memcpy(&x, xp, sizeof(T));						\
	memcpy(&y, yp, sizeof(T));						\
	return same_real_##tn(x, y);						\
}										\
static bool same_c##tn(const void *xp, const void *yp)				\
{										\
	T x[2], y[2];								\
	memcpy(x, xp, sizeof(x));						\
	memcpy(y, yp, sizeof(y));						\
	return same_real_##tn(x[0], y[0]) && same_real_##tn(x[1], y[1]);	\
}

SAME_REAL(flt, float, true)
SAME_REAL(dbl, double, true)
SAME_REAL(ldbl, long double, false)

/* ---- edge values per datatype ---- */

static const int8_t e_i8[] = { 0, 1, 2, 3, -1, -2, INT8_MIN, INT8_MAX, INT8_MIN + 1,
			       INT8_MAX - 1, 0x5a, -0x5b, 16 };
static const uint8_t e_u8[] = { 0, 1, 2, 3, UINT8_MAX, UINT8_MAX - 1, 0x80, 0x7f, 0x5a, 0xa5,
				16 };
static const int16_t e_i16[] = { 0, 1, 2, 3, -1, -2, INT16_MIN, INT16_MAX, INT16_MIN + 1,
				 INT16_MAX - 1, 0x5a5a, -0x5a5b, 256 };
static const uint16_t e_u16[] = { 0, 1, 2, 3, UINT16_MAX, UINT16_MAX - 1, 0x8000, 0x7fff,
				  0x5a5a, 0xa5a5, 256 };
static const int32_t e_i32[] = { 0, 1, 2, 3, -1, -2, INT32_MIN, INT32_MAX, INT32_MIN + 1,
				 INT32_MAX - 1, 0x5a5a5a5a, -0x5a5a5a5b, 65536 };
static const uint32_t e_u32[] = { 0, 1, 2, 3, UINT32_MAX, UINT32_MAX - 1, 0x80000000u,
				  0x7fffffff, 0x5a5a5a5a, 0xa5a5a5a5, 65536 };
static const int64_t e_i64[] = { 0, 1, 2, 3, -1, -2, INT64_MIN, INT64_MAX, INT64_MIN + 1,
				 INT64_MAX - 1, 0x5a5a5a5a5a5a5a5a, -0x5a5a5a5a5a5a5a5b,
				 1ll << 32 };
static const uint64_t e_u64[] = { 0, 1, 2, 3, UINT64_MAX, UINT64_MAX - 1, 1ull << 63,
				  INT64_MAX, 0x5a5a5a5a5a5a5a5a, 0xa5a5a5a5a5a5a5a5, 1ull << 32 };
#ifdef __SIZEOF_INT128__
#define U128(hi, lo) (((unsigned __int128)(hi) << 64) | (unsigned __int128)(lo))
static const __int128 e_i128[] = {
	0, 1, 2, 3, -1, -2, (__int128)U128(1ull << 63, 0), (__int128)U128(INT64_MAX, UINT64_MAX),
	(__int128)U128(1ull << 63, 1), (__int128)U128(0, UINT64_MAX), (__int128)U128(1, 0),
	(__int128)U128(0x5a5a5a5a5a5a5a5a, 0xa5a5a5a5a5a5a5a5), -(__int128)U128(1, 0),
};
static const unsigned __int128 e_u128[] = {
	0, 1, 2, 3, U128(UINT64_MAX, UINT64_MAX), U128(UINT64_MAX, UINT64_MAX - 1),
	U128(1ull << 63, 0), U128(INT64_MAX, UINT64_MAX), U128(0, UINT64_MAX), U128(1, 0),
	U128(0x5a5a5a5a5a5a5a5a, 0xa5a5a5a5a5a5a5a5),
};
#endif
static const float e_flt[] = { 0.0f, -0.0f, 1.0f, -1.0f, 2.5f, -3.0f, FLT_MAX, -FLT_MAX,
			       FLT_MIN, FLT_TRUE_MIN, -FLT_TRUE_MIN, INFINITY, -INFINITY, NAN,
			       -NAN };
static const double e_dbl[] = { 0.0, -0.0, 1.0, -1.0, 2.5, -3.0, DBL_MAX, -DBL_MAX, DBL_MIN,
				DBL_TRUE_MIN, -DBL_TRUE_MIN, INFINITY, -INFINITY, NAN, -NAN };
static const long double e_ldbl[] = { 0.0L, -0.0L, 1.0L, -1.0L, 2.5L, -3.0L, LDBL_MAX,
				      -LDBL_MAX, LDBL_MIN, LDBL_TRUE_MIN, -LDBL_TRUE_MIN,
				      INFINITY, -INFINITY, NAN, -NAN };

#define CPLX_EDGES(C, MK, R, MAXV, TMIN) {						\
	MK(0, 0), MK(-(R)0, 0), MK(0, -(R)0), MK(1, 0), MK(0, 1), MK(-1, 2.5),		\
	MK(INFINITY, 0), MK(0, NAN), MK(NAN, NAN), MK(MAXV, MAXV), MK(TMIN, -TMIN),	\
	MK(1, -INFINITY), MK(-3, -0.5) }
static const float complex e_cflt[] = CPLX_EDGES(float complex, CMPLXF, float, FLT_MAX,
						 FLT_TRUE_MIN);
static const double complex e_cdbl[] = CPLX_EDGES(double complex, CMPLX, double, DBL_MAX,
						  DBL_TRUE_MIN);
static const long double complex e_cldbl[] = CPLX_EDGES(long double complex, CMPLXL,
							long double, LDBL_MAX, LDBL_TRUE_MIN);

struct ttype {
	const char *name;
	size_t      size;
	const void *edges;
	size_t      nedges;
	void      (*ref)(int op, void *r, const void *o, const void *a, const void *c);
	bool      (*same)(const void *x, const void *y);
};

#define SAME_INT(n) \
	static bool same_i##n(const void *x, const void *y) { return same_bytes(x, y, n); }
SAME_INT(1) SAME_INT(2) SAME_INT(4) SAME_INT(8) SAME_INT(16)

#define TT(tn, T, same) { #tn, sizeof(T), e_##tn, sizeof(e_##tn) / sizeof(T), ref_##tn, same }

static const struct ttype ttypes[NDT] = {
	[FI_INT8] = TT(i8, int8_t, same_i1),
	[FI_UINT8] = TT(u8, uint8_t, same_i1),
	[FI_INT16] = TT(i16, int16_t, same_i2),
	[FI_UINT16] = TT(u16, uint16_t, same_i2),
	[FI_INT32] = TT(i32, int32_t, same_i4),
	[FI_UINT32] = TT(u32, uint32_t, same_i4),
	[FI_INT64] = TT(i64, int64_t, same_i8),
	[FI_UINT64] = TT(u64, uint64_t, same_i8),
	[FI_FLOAT] = TT(flt, float, same_flt),
	[FI_DOUBLE] = TT(dbl, double, same_dbl),
	[FI_FLOAT_COMPLEX] = TT(cflt, float complex, same_cflt),
	[FI_DOUBLE_COMPLEX] = TT(cdbl, double complex, same_cdbl),
	[FI_LONG_DOUBLE] = TT(ldbl, long double, same_ldbl),
	[FI_LONG_DOUBLE_COMPLEX] = TT(cldbl, long double complex, same_cldbl),
#ifdef __SIZEOF_INT128__
	[FI_INT128] = TT(i128, __int128, same_i16),
	[FI_UINT128] = TT(u128, unsigned __int128, same_i16),
#endif
};

/* ---- the sweep: every (target, operand[, compare]) triple of edge values in one vector ---- */

static char *at(void *base, size_t k, size_t size)
{
	return (char *)base + k * size;
}

/* toff/boff: byte offsets from 64-byte alignment for the target and for the other buffers. */
static void sweep(int dt, int op, size_t toff, size_t boff, bool fetch)
{
	const struct ttype *t = &ttypes[dt];
	size_t s = t->size, n = t->nedges;
	size_t total = n * n * (is_compare(op) ? n : 1);
	size_t bytes = (total * s + 128 + 63) & ~(size_t)63;	/* aligned_alloc: a multiple */
	char *mem[5], *tgt, *opnd, *cmp, *res, *exp;
	int ret;

	for (int i = 0; i < 5; i++) {
		mem[i] = aligned_alloc(64, bytes);
		cr_assert_not_null(mem[i]);
		memset(mem[i], 0xee, bytes);
	}
	tgt = mem[0] + toff;
	opnd = mem[1] + boff;
	cmp = mem[2] + boff;
	res = mem[3] + boff;
	exp = mem[4];

	for (size_t k = 0; k < total; k++) {
		size_t i = k % n, j = (k / n) % n, l = k / (n * n);

		memcpy(at(tgt, k, s), at((void *)t->edges, i, s), s);
		memcpy(at(opnd, k, s), at((void *)t->edges, j, s), s);
		memcpy(at(cmp, k, s), at((void *)t->edges, l, s), s);
		t->ref(op, at(exp, k, s), at(tgt, k, s), at(opnd, k, s), at(cmp, k, s));
	}

	ret = cour_atomic_exec(op, dt, tgt, op == FI_ATOMIC_READ ? NULL : opnd,
			       is_compare(op) ? cmp : NULL, fetch ? res : NULL, total);
	cr_assert_eq(ret, 0, "%s op %d: exec returned %d", t->name, op, ret);

	for (size_t k = 0; k < total; k++) {
		size_t i = k % n, j = (k / n) % n, l = k / (n * n);

		cr_assert(t->same(at(tgt, k, s), at(exp, k, s)),
			  "%s op %d toff %zu boff %zu: target (edges t%zu a%zu c%zu) differs",
			  t->name, op, toff, boff, i, j, l);
		if (fetch)
			cr_assert(t->same(at(res, k, s), at((void *)t->edges, i, s)),
				  "%s op %d toff %zu: fetched old value (edge %zu) differs",
				  t->name, op, toff, i);
	}
	/* nothing written past the vectors */
	cr_assert_eq((unsigned char)tgt[total * s], 0xee, "%s op %d: target overrun", t->name, op);
	cr_assert_eq((unsigned char)res[fetch ? total * s : 0], 0xee, "%s op %d: result", t->name,
		     op);
	for (int i = 0; i < 5; i++)
		free(mem[i]);
}

static void sweep_dt(int dt)
{
	int ops = 0;

	for (int op = 0; op < NOPS; op++) {
		if (!expect_valid(op, dt, COUR_ATOMIC_FETCH) &&
		    !expect_valid(op, dt, COUR_ATOMIC_COMPARE))
			continue;
		if (op != FI_ATOMIC_READ)
			sweep(dt, op, 0, 0, false);	/* lock-free target, no fetch */
		sweep(dt, op, 0, 0, true);		/* lock-free target, fetch */
		sweep(dt, op, 0, 1, true);		/* unaligned operand/compare/result */
		sweep(dt, op, 1, 3, true);		/* unaligned target: lock path */
		ops++;
	}
	cr_assert_gt(ops, 0);
	cr_assert_eq(log_count[FI_LOG_WARN] + log_count[FI_LOG_INFO], 0, "success logged");
}

#define SWEEP_TEST(dt) Test(atomic_sweep, dt) { sweep_dt(dt); }
SWEEP_TEST(FI_INT8) SWEEP_TEST(FI_UINT8) SWEEP_TEST(FI_INT16) SWEEP_TEST(FI_UINT16)
SWEEP_TEST(FI_INT32) SWEEP_TEST(FI_UINT32) SWEEP_TEST(FI_INT64) SWEEP_TEST(FI_UINT64)
SWEEP_TEST(FI_FLOAT) SWEEP_TEST(FI_DOUBLE) SWEEP_TEST(FI_LONG_DOUBLE)
SWEEP_TEST(FI_FLOAT_COMPLEX) SWEEP_TEST(FI_DOUBLE_COMPLEX) SWEEP_TEST(FI_LONG_DOUBLE_COMPLEX)
#ifdef __SIZEOF_INT128__
SWEEP_TEST(FI_INT128) SWEEP_TEST(FI_UINT128)
#endif

/* ---- answers computed by hand: they pin down the reference's reading of the man page ---- */

#define ONE(op, dt, T, tv, av, cv, want_t) do {						\
	T t_ = (tv), a_ = (av), c_ = (cv), r_, w_ = (want_t), o_ = (tv);			\
	cr_assert_eq(cour_atomic_exec(op, dt, &t_, &a_, &c_, &r_, 1), 0);			\
	cr_assert(ttypes[dt].same(&t_, &w_), #op " " #T " " #tv " " #av " " #cv);	\
	cr_assert(ttypes[dt].same(&r_, &o_), #op " fetch");				\
} while (0)

Test(atomic, known_answers)
{
	/* CSWAP_xx: "if (compare <op> target) target = operand" */
	ONE(FI_CSWAP_LE, FI_INT32, int32_t, 2, 9, 1, 9);	/* 1 <= 2: swap */
	ONE(FI_CSWAP_LE, FI_INT32, int32_t, 2, 9, 2, 9);
	ONE(FI_CSWAP_LE, FI_INT32, int32_t, 2, 9, 3, 2);	/* 3 <= 2 is false */
	ONE(FI_CSWAP_LT, FI_INT32, int32_t, 2, 9, 2, 2);
	ONE(FI_CSWAP_LT, FI_INT32, int32_t, 2, 9, -5, 9);
	ONE(FI_CSWAP_GE, FI_UINT16, uint16_t, 2, 9, 3, 9);
	ONE(FI_CSWAP_GE, FI_UINT16, uint16_t, 2, 9, 1, 2);
	ONE(FI_CSWAP_GT, FI_UINT16, uint16_t, 2, 9, 2, 2);
	ONE(FI_CSWAP_GT, FI_INT64, int64_t, -2, 9, -1, 9);
	ONE(FI_CSWAP, FI_UINT64, uint64_t, 5, 6, 5, 6);
	ONE(FI_CSWAP_NE, FI_UINT64, uint64_t, 5, 6, 5, 5);
	/* MSWAP: (operand & compare) | (target & ~compare) */
	ONE(FI_MSWAP, FI_UINT8, uint8_t, 0xf0, 0xaa, 0x0f, 0xfa);
	ONE(FI_MSWAP, FI_INT16, int16_t, 0x1234, -1, 0x00ff, 0x12ff);
	/* wrap-around, signed and unsigned */
	ONE(FI_SUM, FI_INT8, int8_t, 127, 1, 0, -128);
	ONE(FI_SUM, FI_UINT8, uint8_t, 255, 1, 0, 0);
	ONE(FI_PROD, FI_UINT16, uint16_t, 0xffff, 0xffff, 0, 1);
	ONE(FI_PROD, FI_INT32, int32_t, INT32_MIN, -1, 0, INT32_MIN);
	ONE(FI_PROD, FI_INT64, int64_t, 1ll << 62, 4, 0, 0);
	ONE(FI_MIN, FI_INT8, int8_t, 0, -1, 0, -1);
	ONE(FI_MAX, FI_UINT8, uint8_t, 1, 255, 0, 255);
	/* logical: nonzero is true, the result is 0 or 1 */
	ONE(FI_LOR, FI_INT32, int32_t, 0, -7, 0, 1);
	ONE(FI_LAND, FI_INT32, int32_t, 4, -7, 0, 1);
	ONE(FI_LXOR, FI_INT32, int32_t, 4, -7, 0, 0);
	ONE(FI_LXOR, FI_UINT8, uint8_t, 0, 200, 0, 1);
	ONE(FI_LOR, FI_DOUBLE, double, NAN, 0.0, 0, 1.0);
	ONE(FI_LOR, FI_DOUBLE, double, -0.0, 0.0, 0, 0.0);
	ONE(FI_LAND, FI_FLOAT, float, 0.5f, -INFINITY, 0, 1.0f);
	/* IEEE comparisons: NaN never wins MIN/MAX, never equals; -0 == +0 */
	ONE(FI_MIN, FI_DOUBLE, double, 1.0, NAN, 0, 1.0);
	ONE(FI_MAX, FI_FLOAT, float, 1.0f, 2.0f, 0, 2.0f);
	ONE(FI_CSWAP, FI_DOUBLE, double, -0.0, 7.0, 0.0, 7.0);
	ONE(FI_CSWAP_NE, FI_DOUBLE, double, 3.0, 7.0, 3.0, 3.0);
	ONE(FI_SUM, FI_FLOAT, float, FLT_MAX, FLT_MAX, 0, INFINITY);
	ONE(FI_SUM, FI_LONG_DOUBLE, long double, 1.5L, 2.25L, 0, 3.75L);
	/* complex: (1+2i)(3+4i) = -5+10i; logical on complex; equality on both parts */
	ONE(FI_PROD, FI_DOUBLE_COMPLEX, double complex, CMPLX(1, 2), CMPLX(3, 4), 0,
	    CMPLX(-5, 10));
	ONE(FI_PROD, FI_FLOAT_COMPLEX, float complex, CMPLXF(0, 1), CMPLXF(0, 1), 0,
	    CMPLXF(-1, 0));
	ONE(FI_SUM, FI_LONG_DOUBLE_COMPLEX, long double complex, CMPLXL(1, 2), CMPLXL(-1, 0.5),
	    0, CMPLXL(0, 2.5));
	ONE(FI_LOR, FI_DOUBLE_COMPLEX, double complex, CMPLX(0, 3), 0, 0, CMPLX(1, 0));
	ONE(FI_LAND, FI_DOUBLE_COMPLEX, double complex, CMPLX(0, 3), CMPLX(2, 0), 0,
	    CMPLX(1, 0));
	ONE(FI_LXOR, FI_FLOAT_COMPLEX, float complex, CMPLXF(0, 3), CMPLXF(2, 0), 0,
	    CMPLXF(0, 0));
	ONE(FI_CSWAP, FI_DOUBLE_COMPLEX, double complex, CMPLX(1, 2), CMPLX(5, 5), CMPLX(1, 3),
	    CMPLX(1, 2));
	ONE(FI_CSWAP_NE, FI_DOUBLE_COMPLEX, double complex, CMPLX(1, 2), CMPLX(5, 5),
	    CMPLX(1, 3), CMPLX(5, 5));
#ifdef __SIZEOF_INT128__
	ONE(FI_SUM, FI_UINT128, unsigned __int128, U128(0, UINT64_MAX), 1, 0, U128(1, 0));
	ONE(FI_SUM, FI_INT128, __int128, (__int128)U128(INT64_MAX, UINT64_MAX), 1, 0,
	    (__int128)U128(1ull << 63, 0));
	ONE(FI_MIN, FI_INT128, __int128, 0, -1, 0, -1);
#endif
}

/* ---- errors touch nothing ---- */

Test(atomic, invalid_combinations_touch_nothing)
{
	uint8_t tgt[64], opnd[64], cmp[64], res[64];
	int invalid = 0;

	for (int dt = 0; dt < NDT; dt++) {
		for (int op = 0; op < NOPS; op++) {
			if (expect_valid(op, dt, COUR_ATOMIC_FETCH) ||
			    expect_valid(op, dt, COUR_ATOMIC_COMPARE))
				continue;
			memset(tgt, 0x11, sizeof(tgt));
			memset(opnd, 0x22, sizeof(opnd));
			memset(cmp, 0x33, sizeof(cmp));
			memset(res, 0x44, sizeof(res));
			cr_assert_eq(cour_atomic_exec(op, dt, tgt, opnd, cmp, res, 1),
				     -FI_EOPNOTSUPP, "op %d dt %d", op, dt);
			cr_assert_eq(log_count[FI_LOG_WARN], invalid + 1, "not warned");
			for (size_t i = 0; i < sizeof(tgt); i++)
				cr_assert(tgt[i] == 0x11 && res[i] == 0x44 && opnd[i] == 0x22 &&
					  cmp[i] == 0x33, "op %d dt %d touched byte %zu",
					  op, dt, i);
			invalid++;
		}
	}
	/* real types lack the 4 bitwise ops, complex ones also the 6 ordered ones */
	cr_assert_eq(invalid, 3 * 4 + 3 * 10);
	cr_assert_eq(cour_atomic_exec((enum fi_op)FI_ATOMIC_OP_LAST, FI_UINT64, tgt, opnd, cmp, res, 1),
		     -FI_EOPNOTSUPP);
	cr_assert_eq(cour_atomic_exec(FI_SUM, FI_VOID, tgt, opnd, cmp, res, 1), -FI_EOPNOTSUPP);
	cr_assert_eq(tgt[0], 0x11);
}

Test(atomic, missing_buffers)
{
	uint64_t tgt = 5, opnd = 7, cmp = 5, res = 99;

	cr_assert_eq(cour_atomic_exec(FI_SUM, FI_UINT64, &tgt, NULL, NULL, &res, 1), -FI_EINVAL);
	cr_assert_eq(cour_atomic_exec(FI_CSWAP, FI_UINT64, &tgt, &opnd, NULL, &res, 1),
		     -FI_EINVAL);
	cr_assert_eq(cour_atomic_exec(FI_MSWAP, FI_UINT64, &tgt, &opnd, NULL, NULL, 1),
		     -FI_EINVAL);
	cr_assert_eq(cour_atomic_exec(FI_ATOMIC_READ, FI_UINT64, &tgt, NULL, NULL, NULL, 1),
		     -FI_EINVAL);
	cr_assert_eq(cour_atomic_exec(FI_SUM, FI_UINT64, NULL, &opnd, NULL, &res, 1), -FI_EINVAL);
	cr_assert_eq(cour_atomic_exec(FI_SUM, FI_UINT64, &tgt, &opnd, NULL, &res, SIZE_MAX / 4),
		     -FI_EINVAL);
	cr_assert(tgt == 5 && res == 99);
	cr_assert_eq(log_count[FI_LOG_WARN], 6, "each error warns once");

	/* count 0 is a no-op; ATOMIC_READ ignores the operand; non-compare ops ignore compare */
	cr_assert_eq(cour_atomic_exec(FI_SUM, FI_UINT64, &tgt, &opnd, NULL, &res, 0), 0);
	cr_assert(tgt == 5 && res == 99);
	cr_assert_eq(cour_atomic_exec(FI_ATOMIC_READ, FI_UINT64, &tgt, NULL, NULL, &res, 1), 0);
	cr_assert(tgt == 5 && res == 5);
	cr_assert_eq(cour_atomic_exec(FI_SUM, FI_UINT64, &tgt, &opnd, &cmp, NULL, 1), 0);
	cr_assert_eq(tgt, 12);
	cr_assert_eq(log_count[FI_LOG_WARN], 6);
}

/* ---- fi_query_atomic ---- */

Test(atomic, query)
{
	static const uint64_t kind_flags[3] = {
		[COUR_ATOMIC_BASE] = 0,
		[COUR_ATOMIC_FETCH] = FI_FETCH_ATOMIC,
		[COUR_ATOMIC_COMPARE] = FI_COMPARE_ATOMIC,
	};
	const size_t max = 4096;
	struct fi_atomic_attr attr;

	for (int dt = 0; dt < NDT; dt++) {
		for (int op = 0; op < NOPS; op++) {
			for (int k = 0; k < 3; k++) {
				int ret;

				attr.count = attr.size = 12345;
				ret = cour_atomic_query(op, dt, kind_flags[k], max, &attr);
				if (!expect_valid(op, dt, k)) {
					cr_assert_eq(ret, -FI_EOPNOTSUPP, "op %d dt %d k %d",
						     op, dt, k);
					cr_assert(attr.count == 12345 && attr.size == 12345);
					continue;
				}
				cr_assert_eq(ret, 0, "op %d dt %d k %d", op, dt, k);
				cr_assert_eq(attr.size, expect_size[dt]);
				cr_assert_eq(attr.count, max / expect_size[dt]);
			}
		}
	}
	/* probing a table is not an error: unsupported answers are INFO, not WARN */
	cr_assert_eq(log_count[FI_LOG_WARN], 0);
	cr_assert_gt(log_count[FI_LOG_INFO], 0);
	cr_assert_eq(cour_atomic_query(FI_CSWAP, FI_UINT64, FI_FETCH_ATOMIC | FI_COMPARE_ATOMIC,
				       max, &attr), -FI_EINVAL);
	cr_assert_eq(log_count[FI_LOG_WARN], 1);
	cr_assert_eq(cour_atomic_query(FI_SUM, FI_UINT64, FI_TAGGED, max, &attr),
		     -FI_EOPNOTSUPP);
	cr_assert_eq(cour_atomic_query(FI_SUM, FI_UINT64, 0, max, NULL), -FI_EINVAL);
	/* a limit too small for one element of the type */
	cr_assert_eq(cour_atomic_query(FI_SUM, FI_LONG_DOUBLE_COMPLEX, 0, 16, &attr),
		     sizeof(long double) * 2 > 16 ? -FI_EOPNOTSUPP : 0);
	cr_assert_eq(cour_atomic_query(FI_SUM, FI_UINT64, 0, 7, &attr), -FI_EOPNOTSUPP);
	cr_assert_eq(cour_atomic_query(FI_SUM, FI_UINT64, 0, 8, &attr), 0);
	cr_assert_eq(attr.count, 1);
}

/* ---- concurrency: NTHREADS threads on one element; every path must lose no update ---- */

#define NTHREADS 4

struct conc {
	pthread_barrier_t start;
	void             *target;
	size_t            iters;	/* per thread */
	uint64_t         *fetched;	/* [NTHREADS * iters] for the SUM test */
	void            (*body)(struct conc *c, int id);
};

struct conc_arg {
	struct conc *c;
	int          id;
};

static void *conc_main(void *p)
{
	struct conc_arg *a = p;

	pthread_barrier_wait(&a->c->start);
	a->c->body(a->c, a->id);
	return NULL;
}

static void conc_run(struct conc *c)
{
	pthread_t th[NTHREADS];
	struct conc_arg args[NTHREADS];

	cr_assert_eq(pthread_barrier_init(&c->start, NULL, NTHREADS), 0);
	for (int i = 0; i < NTHREADS; i++) {
		args[i] = (struct conc_arg){ c, i };
		cr_assert_eq(pthread_create(&th[i], NULL, conc_main, &args[i]), 0);
	}
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&c->start);
}

/* FI_SUM of 1 with fetch, operand and result at odd addresses. Worker threads report failures
 * by count, checked after the join (Criterion asserts belong to the main thread). */
static int conc_failures;

static void body_sum_u64(struct conc *c, int id)
{
	char buf[2 * sizeof(uint64_t) + 1];
	uint64_t one = 1, old;

	memcpy(buf + 1, &one, sizeof(one));
	for (size_t i = 0; i < c->iters; i++) {
		if (cour_atomic_exec(FI_SUM, FI_UINT64, c->target, buf + 1, NULL, buf + 9, 1))
			__atomic_add_fetch(&conc_failures, 1, __ATOMIC_RELAXED);
		memcpy(&old, buf + 9, sizeof(old));
		c->fetched[id * c->iters + i] = old;
	}
}

static void check_sum_u64(void *target, size_t iters)
{
	size_t total = NTHREADS * iters;
	struct conc c = { .target = target, .iters = iters, .body = body_sum_u64 };
	uint8_t *seen = calloc(total, 1);
	uint64_t end;

	c.fetched = calloc(total, sizeof(uint64_t));
	cr_assert(seen && c.fetched);
	memset(target, 0, sizeof(uint64_t));
	conc_failures = 0;
	conc_run(&c);
	cr_assert_eq(conc_failures, 0);
	memcpy(&end, target, sizeof(end));
	cr_assert_eq(end, total, "lost updates: %lu of %zu", (unsigned long)end, total);
	/* each old value 0..total-1 was fetched exactly once: every RMW saw its predecessor */
	for (size_t i = 0; i < total; i++) {
		cr_assert_lt(c.fetched[i], total);
		cr_assert_eq(seen[c.fetched[i]]++, 0, "old value %lu fetched twice",
			     (unsigned long)c.fetched[i]);
	}
	free(seen);
	free(c.fetched);
}

Test(atomic_conc, sum_u64_lock_free, .timeout = 30)
{
	uint64_t target;

	check_sum_u64(&target, 500000);
}

Test(atomic_conc, sum_u64_unaligned_lock_path, .timeout = 30)
{
	_Alignas(64) char mem[64];

	check_sum_u64(mem + 3, 500000);
}

/* Increment by compare-and-swap: read, then CSWAP(compare = old, operand = old + 1) until
 * it succeeds; bounded in attempts. T is the datatype under test, the 128-bit one included. */
#define CSWAP_INC_BODY(name, T, DT)							\
static void name(struct conc *c, int id)						\
{											\
	char in[2 * sizeof(T) + 1], out[sizeof(T) + 1];					\
	size_t done = 0, tries = 0, max_tries = c->iters * 1000;			\
	T old, next, got;								\
											\
	while (done < c->iters && tries++ < max_tries) {				\
		if (cour_atomic_exec(FI_ATOMIC_READ, DT, c->target, NULL, NULL,		\
				     out + 1, 1))					\
			break;								\
		memcpy(&old, out + 1, sizeof(T));					\
		next = old + 1;								\
		memcpy(in + 1, &next, sizeof(T));					\
		memcpy(in + 1 + sizeof(T), &old, sizeof(T));				\
		if (cour_atomic_exec(FI_CSWAP, DT, c->target, in + 1,			\
				     in + 1 + sizeof(T), out + 1, 1))			\
			break;								\
		memcpy(&got, out + 1, sizeof(T));					\
		done += got == old;							\
	}										\
	if (done != c->iters)								\
		__atomic_add_fetch(&conc_failures, 1, __ATOMIC_RELAXED);		\
}

CSWAP_INC_BODY(body_cswap_u32, uint32_t, FI_UINT32)

Test(atomic_conc, cswap_u32, .timeout = 30)
{
	uint32_t target = 0;
	struct conc c = { .target = &target, .iters = 250000, .body = body_cswap_u32 };

	conc_failures = 0;
	conc_run(&c);
	cr_assert_eq(conc_failures, 0);
	cr_assert_eq(target, NTHREADS * 250000u);
}

#ifdef __SIZEOF_INT128__
CSWAP_INC_BODY(body_cswap_u128, unsigned __int128, FI_UINT128)

/* Starts just below 2^64 so that increments carry into the high half while others race. */
Test(atomic_conc, cswap_u128, .timeout = 30)
{
	_Alignas(16) unsigned __int128 target = U128(0, UINT64_MAX - 30000);
	struct conc c = { .target = &target, .iters = 200000, .body = body_cswap_u128 };

	conc_failures = 0;
	conc_run(&c);
	cr_assert_eq(conc_failures, 0);
	cr_assert(target == U128(1, NTHREADS * 200000 - 30000 - 1),
		  "got %016lx%016lx", (unsigned long)(target >> 64), (unsigned long)target);
}
#endif

/* long double always takes the lock path; double complex takes cmpxchg16b (or the locks). */
static void body_sum_ldbl(struct conc *c, int id)
{
	char in[sizeof(long double) + 1];
	long double one = 1.0L;

	memcpy(in + 1, &one, sizeof(one));
	for (size_t i = 0; i < c->iters; i++)
		if (cour_atomic_exec(FI_SUM, FI_LONG_DOUBLE, c->target, in + 1, NULL, NULL, 1))
			__atomic_add_fetch(&conc_failures, 1, __ATOMIC_RELAXED);
}

Test(atomic_conc, sum_long_double_lock_path, .timeout = 30)
{
	long double target = 0.0L;
	struct conc c = { .target = &target, .iters = 500000, .body = body_sum_ldbl };

	conc_failures = 0;
	conc_run(&c);
	cr_assert_eq(conc_failures, 0);
	cr_assert(target == NTHREADS * 500000.0L, "got %Lf", target);
}

static void body_sum_cdbl(struct conc *c, int id)
{
	double complex v = CMPLX(1, 2);

	for (size_t i = 0; i < c->iters; i++)
		if (cour_atomic_exec(FI_SUM, FI_DOUBLE_COMPLEX, c->target, &v, NULL, NULL, 1))
			__atomic_add_fetch(&conc_failures, 1, __ATOMIC_RELAXED);
}

Test(atomic_conc, sum_double_complex, .timeout = 30)
{
	_Alignas(16) double complex target = 0;
	struct conc c = { .target = &target, .iters = 400000, .body = body_sum_cdbl };

	conc_failures = 0;
	conc_run(&c);
	cr_assert_eq(conc_failures, 0);
	cr_assert(creal(target) == NTHREADS * 400000.0 && cimag(target) == NTHREADS * 800000.0,
		  "got %f%+fi", creal(target), cimag(target));
}
