/*
 * atomic: fi_atomic, fi_fetch_atomic and fi_compare_atomic between two processes; the server
 * is the target (`atomic [-p prov] [-k basic|scalable]`, and the same with 127.0.0.1 for the
 * initiator). atomic_hammer.c has many initiators on one counter.
 *
 * Every op x datatype x form (base, fetch, compare) goes through fi_atomicvalid /
 * fi_fetch_atomicvalid / fi_compare_atomicvalid. A combination that makes no sense (bit operations on floating types, orderings of complex numbers, the compare
 * ops outside the compare form...) must be refused with -FI_EOPNOTSUPP; over courier every
 * combination that makes sense must be offered, with a count of 512 bytes' worth of elements,
 * and fi_query_atomic must agree. Every offered combination then runs once, on its own slot
 * of the target's memory, with as many elements as allowed (at most 512 bytes), in turn as the
 * plain, v (operands, compare values and results split differently), msg (with remote CQ
 * data) and inject call. Values are small integers, stored also in the floating and complex
 * types, so every result is exact and compared by value: the initiator computes each
 * element's old and new value, checks the fetched old values, and the target checks every
 * element, the rest of the slot and the slots no operation touched. Over courier, which
 * documents unaligned targets, every other slot starts 1 to 7 bytes off alignment. Counters at
 * both ends count exactly; remote CQ data arrives once per msg-form write atomic.
 */
#define _GNU_SOURCE

#include <complex.h>
#include <stdlib.h>
#include <string.h>

#include "ft_rma.h"

#define NOPS     (FI_MSWAP + 1)
#define NDT      (FI_UINT128 + 1)
#define NKINDS   3
#define NSLOTS   (NKINDS * NOPS * NDT)
#define SLOT_MAX 512			/* operand bytes per operation at most */
#define STRIDE   1024			/* slot: SLOT_MAX of elements, then a guard */
#define WINDOW   64

enum { K_BASE, K_FETCH, K_COMPARE };
static const char *const kind_name[NKINDS] = { "fi_atomic", "fi_fetch_atomic",
					       "fi_compare_atomic" };
static const char *const op_name[NOPS] = {
	"MIN", "MAX", "SUM", "PROD", "LOR", "LAND", "BOR", "BAND", "LXOR", "BXOR",
	"ATOMIC_READ", "ATOMIC_WRITE", "CSWAP", "CSWAP_NE", "CSWAP_LE", "CSWAP_LT", "CSWAP_GE",
	"CSWAP_GT", "MSWAP",
};

/* ---- the reference: one element at a time, in the element's own type ---- */

struct dt_desc {
	const char *name;
	size_t size;
	void (*set)(void *p, int re, int im);
	void (*add)(void *out, const void *in, int d);	/* out = in + d */
	bool (*eq)(const void *a, const void *b);
	/* *t = op(*t, *o, *c); false if op means nothing for the type */
	bool (*apply)(enum fi_op op, void *t, const void *o, const void *c);
	bool bits;				/* integers: masks make sense */
};

#define LOAD(T, v, p)  T v; memcpy(&v, (p), sizeof(T))

/* arithmetic in WT, an unsigned type at least as wide, wraps as the target must */
#define DT_INT(tn, T, WT)						\
static void set_##tn(void *p, int re, int im)				\
{ T v = (T)re; (void)im; memcpy(p, &v, sizeof(v)); }			\
static void add_##tn(void *out, const void *in, int d)			\
{ LOAD(T, v, in); v = (T)((WT)v + (WT)(T)d); memcpy(out, &v, sizeof(v)); } \
static bool eq_##tn(const void *a, const void *b)			\
{ LOAD(T, x, a); LOAD(T, y, b); return x == y; }			\
static bool apply_##tn(enum fi_op op, void *tp, const void *op_, const void *cp) \
{									\
	LOAD(T, t, tp); LOAD(T, o, op_); LOAD(T, c, cp);		\
	switch (op) {							\
	case FI_MIN: if (o < t) t = o; break;				\
	case FI_MAX: if (o > t) t = o; break;				\
	case FI_SUM: t = (T)((WT)t + (WT)o); break;			\
	case FI_PROD: t = (T)((WT)t * (WT)o); break;			\
	case FI_LOR: t = (T)(t || o); break;				\
	case FI_LAND: t = (T)(t && o); break;				\
	case FI_BOR: t = (T)(t | o); break;				\
	case FI_BAND: t = (T)(t & o); break;				\
	case FI_LXOR: t = (T)((t && !o) || (!t && o)); break;		\
	case FI_BXOR: t = (T)(t ^ o); break;				\
	case FI_ATOMIC_READ: break;					\
	case FI_ATOMIC_WRITE: t = o; break;				\
	case FI_CSWAP: if (c == t) t = o; break;			\
	case FI_CSWAP_NE: if (c != t) t = o; break;			\
	case FI_CSWAP_LE: if (c <= t) t = o; break;			\
	case FI_CSWAP_LT: if (c < t) t = o; break;			\
	case FI_CSWAP_GE: if (c >= t) t = o; break;			\
	case FI_CSWAP_GT: if (c > t) t = o; break;			\
	case FI_MSWAP: t = (T)((o & c) | (t & ~c)); break;		\
	default: return false;						\
	}								\
	memcpy(tp, &t, sizeof(t));					\
	return true;							\
}

#define DT_REAL(tn, T)							\
static void set_##tn(void *p, int re, int im)				\
{ T v = (T)re; (void)im; memset(p, 0, sizeof(v)); memcpy(p, &v, sizeof(v)); } \
static void add_##tn(void *out, const void *in, int d)			\
{ LOAD(T, v, in); v += (T)d; memcpy(out, &v, sizeof(v)); }		\
static bool eq_##tn(const void *a, const void *b)			\
{ LOAD(T, x, a); LOAD(T, y, b); return x == y; }			\
static bool apply_##tn(enum fi_op op, void *tp, const void *op_, const void *cp) \
{									\
	LOAD(T, t, tp); LOAD(T, o, op_); LOAD(T, c, cp);		\
	switch (op) {							\
	case FI_MIN: if (o < t) t = o; break;				\
	case FI_MAX: if (o > t) t = o; break;				\
	case FI_SUM: t = t + o; break;					\
	case FI_PROD: t = t * o; break;					\
	case FI_LOR: t = (T)(t || o); break;				\
	case FI_LAND: t = (T)(t && o); break;				\
	case FI_LXOR: t = (T)((t && !o) || (!t && o)); break;		\
	case FI_ATOMIC_READ: break;					\
	case FI_ATOMIC_WRITE: t = o; break;				\
	case FI_CSWAP: if (c == t) t = o; break;			\
	case FI_CSWAP_NE: if (c != t) t = o; break;			\
	case FI_CSWAP_LE: if (c <= t) t = o; break;			\
	case FI_CSWAP_LT: if (c < t) t = o; break;			\
	case FI_CSWAP_GE: if (c >= t) t = o; break;			\
	case FI_CSWAP_GT: if (c > t) t = o; break;			\
	default: return false;						\
	}								\
	memcpy(tp, &t, sizeof(t));					\
	return true;							\
}

#define DT_COMPLEX(tn, T, MK)						\
static void set_##tn(void *p, int re, int im)				\
{ T v = MK(re, im); memset(p, 0, sizeof(v)); memcpy(p, &v, sizeof(v)); } \
static void add_##tn(void *out, const void *in, int d)			\
{ LOAD(T, v, in); v += d; memcpy(out, &v, sizeof(v)); }		\
static bool eq_##tn(const void *a, const void *b)			\
{ LOAD(T, x, a); LOAD(T, y, b); return x == y; }			\
static bool apply_##tn(enum fi_op op, void *tp, const void *op_, const void *cp) \
{									\
	LOAD(T, t, tp); LOAD(T, o, op_); LOAD(T, c, cp);		\
	switch (op) {							\
	case FI_SUM: t = t + o; break;					\
	case FI_PROD: t = t * o; break;					\
	case FI_LOR: t = (T)(t || o); break;				\
	case FI_LAND: t = (T)(t && o); break;				\
	case FI_LXOR: t = (T)((t && !o) || (!t && o)); break;		\
	case FI_ATOMIC_READ: break;					\
	case FI_ATOMIC_WRITE: t = o; break;				\
	case FI_CSWAP: if (c == t) t = o; break;			\
	case FI_CSWAP_NE: if (c != t) t = o; break;			\
	default: return false;						\
	}								\
	memcpy(tp, &t, sizeof(t));					\
	return true;							\
}

DT_INT(i8, int8_t, unsigned int)
DT_INT(u8, uint8_t, unsigned int)
DT_INT(i16, int16_t, unsigned int)
DT_INT(u16, uint16_t, unsigned int)
DT_INT(i32, int32_t, uint32_t)
DT_INT(u32, uint32_t, uint32_t)
DT_INT(i64, int64_t, uint64_t)
DT_INT(u64, uint64_t, uint64_t)
DT_REAL(flt, float)
DT_REAL(dbl, double)
DT_REAL(ldbl, long double)
DT_COMPLEX(cflt, float complex, CMPLXF)
DT_COMPLEX(cdbl, double complex, CMPLX)
DT_COMPLEX(cldbl, long double complex, CMPLXL)
#ifdef __SIZEOF_INT128__
DT_INT(i128, __int128, unsigned __int128)
DT_INT(u128, unsigned __int128, unsigned __int128)
#endif

#define DT(e, tn, T, bits) [e] = { #e, sizeof(T), set_##tn, add_##tn, eq_##tn, apply_##tn, bits }
static const struct dt_desc dts[NDT] = {
	DT(FI_INT8, i8, int8_t, true), DT(FI_UINT8, u8, uint8_t, true),
	DT(FI_INT16, i16, int16_t, true), DT(FI_UINT16, u16, uint16_t, true),
	DT(FI_INT32, i32, int32_t, true), DT(FI_UINT32, u32, uint32_t, true),
	DT(FI_INT64, i64, int64_t, true), DT(FI_UINT64, u64, uint64_t, true),
	DT(FI_FLOAT, flt, float, false), DT(FI_DOUBLE, dbl, double, false),
	DT(FI_FLOAT_COMPLEX, cflt, float complex, false),
	DT(FI_DOUBLE_COMPLEX, cdbl, double complex, false),
	DT(FI_LONG_DOUBLE, ldbl, long double, false),
	DT(FI_LONG_DOUBLE_COMPLEX, cldbl, long double complex, false),
#ifdef __SIZEOF_INT128__
	DT(FI_INT128, i128, __int128, true), DT(FI_UINT128, u128, unsigned __int128, true),
#endif
};

/* Whether op belongs to the form at all (fi_atomic(3)). */
static bool kind_takes(int kind, int op)
{
	switch (kind) {
	case K_BASE:
		return op <= FI_BXOR || op == FI_ATOMIC_WRITE;
	case K_FETCH:
		return op <= FI_ATOMIC_WRITE;
	default:
		return op >= FI_CSWAP;
	}
}

/* Whether the combination makes sense: the form takes op, and op means something on dt. */
static bool meaningful(int kind, int op, int dt)
{
	unsigned char t[32] = { 0 }, o[32] = { 0 }, c[32] = { 0 };

	if (!dts[dt].size || !kind_takes(kind, op))
		return false;
	return dts[dt].apply((enum fi_op)op, t, o, c);
}

static int slot_of(int kind, int op, int dt)
{
	return (kind * NOPS + op) * NDT + dt;
}

/* Small integers: exact in every type, and zero now and then for the logical ops. */
static void val_init(int slot, int i, void *p, int dt)
{
	dts[dt].set(p, (slot * 7 + i * 3) % 11 - 3, (slot + i * 5) % 5 - 2);
}

static void val_operand(int slot, int i, void *p, int dt)
{
	dts[dt].set(p, (slot * 5 + i * 7 + 1) % 9 - 2, (slot * 3 + i) % 4 - 1);
}

/* compare values: equal, below and above the target in turn; MSWAP: bit masks */
static void val_compare(int slot, int i, void *p, int dt, int op)
{
	unsigned char init[32];

	if (op == FI_MSWAP) {
		memset(p, i % 2 ? 0xf0 : 0x3c, dts[dt].size);
		return;
	}
	val_init(slot, i, init, dt);
	dts[dt].add(p, init, i % 3 == 0 ? 0 : i % 3 == 1 ? -1 : 1);
}

static void hex(char *out, size_t len, const void *p, size_t size)
{
	const unsigned char *b = p;
	size_t i, n = 0;

	for (i = size; i-- > 0 && n + 3 < len;)
		n += (size_t)snprintf(out + n, len - n, "%02x", b[i]);
}

/* ---- the sweep ---- */

struct atom {
	struct rma r;
	char *mem;			/* target: the slots; initiator: operands */
	char *pristine;			/* target: the slots as initialised */
	char *cmp, *res;		/* initiator: compare values, results */
	struct fid_mr *mr, *lmr;
	void *desc;
	struct rma_region reg;
	size_t valid_count[NSLOTS];	/* 0: not offered */
	uint16_t ran[NSLOTS];		/* elements each slot's operation had (0: none) */
	uint8_t form[NSLOTS];
	struct fi_context2 ctx[NSLOTS];
	size_t inject_size, iov_limit;
	uint64_t data_mask;
	bool unaligned;			/* courier: odd slots start 1..7 bytes off */
};

/* Offset of slot's first element in the target's memory. courier documents unaligned
 * targets (they take its lock path); other providers get aligned ones only. */
static size_t slot_addr(const struct atom *a, int slot)
{
	return (size_t)slot * STRIDE + (a->unaligned && slot % 2 ? (size_t)(slot / 2 % 7) + 1 : 0);
}

static int valid_call(struct atom *a, int kind, int op, int dt, size_t *count)
{
	struct fid_ep *ep = a->r.f.ft.ep;

	if (kind == K_BASE)
		return fi_atomicvalid(ep, (enum fi_datatype)dt, (enum fi_op)op, count);
	if (kind == K_FETCH)
		return fi_fetch_atomicvalid(ep, (enum fi_datatype)dt, (enum fi_op)op, count);
	return fi_compare_atomicvalid(ep, (enum fi_datatype)dt, (enum fi_op)op, count);
}

/* What the provider offers, checked against what makes sense. */
static int atom_validity(struct atom *a)
{
	struct func *f = &a->r.f;
	static const uint64_t qflags[NKINDS] = { 0, FI_FETCH_ATOMIC, FI_COMPARE_ATOMIC };
	bool courier = func_is_courier(f);
	struct fi_atomic_attr attr;
	int kind, op, dt, ret, nvalid = 0, ninvalid = 0;
	size_t count;

	for (kind = 0; kind < NKINDS; kind++)
	for (op = 0; op < NOPS; op++)
	for (dt = 0; dt < NDT; dt++) {
		int slot = slot_of(kind, op, dt);
		bool sense = meaningful(kind, op, dt);

		count = 0;
		ret = valid_call(a, kind, op, dt, &count);
		FUNC_ASSERT(f, ret == 0 || ret == -FI_EOPNOTSUPP, "%s %s %s: valid call "
			    "returned %d (%s), want 0 or -FI_EOPNOTSUPP", kind_name[kind],
			    op_name[op], dts[dt].name, ret, fi_strerror(-ret));
		FUNC_ASSERT(f, ret || sense, "%s %s %s is offered but makes no sense (want "
			    "-FI_EOPNOTSUPP)", kind_name[kind], op_name[op], dts[dt].name);
		FUNC_ASSERT(f, ret || count >= 1, "%s %s %s: offered with count 0",
			    kind_name[kind], op_name[op], dts[dt].name);
		if (courier) {
			FUNC_ASSERT(f, !sense || !ret, "courier does not offer %s %s %s",
				    kind_name[kind], op_name[op], dts[dt].name);
			FUNC_ASSERT(f, ret || count == SLOT_MAX / dts[dt].size, "%s %s %s: count "
				    "%zu, want %zu", kind_name[kind], op_name[op], dts[dt].name,
				    count, SLOT_MAX / dts[dt].size);
			memset(&attr, 0, sizeof(attr));
			FUNC_ASSERT(f, fi_query_atomic(f->ft.domain, (enum fi_datatype)dt,
						       (enum fi_op)op, &attr, qflags[kind]) == ret,
				    "fi_query_atomic disagrees on %s %s %s", kind_name[kind],
				    op_name[op], dts[dt].name);
			FUNC_ASSERT(f, ret || (attr.count == count && attr.size == dts[dt].size),
				    "fi_query_atomic %s %s %s: count %zu size %zu",
				    kind_name[kind], op_name[op], dts[dt].name, attr.count,
				    attr.size);
		}
		a->valid_count[slot] = ret ? 0 : count;
		nvalid += !ret;
		ninvalid += !!ret;
	}
	printf("atomic: %d combinations offered, %d refused with -FI_EOPNOTSUPP\n", nvalid,
	       ninvalid);
	return 0;
}

static size_t slot_count(const struct atom *a, int slot, int dt)
{
	size_t n = SLOT_MAX / dts[dt].size;

	return a->valid_count[slot] < n ? a->valid_count[slot] : n;
}

/* Post slot's operation with n elements in form a->form[slot]. */
static int atom_post(struct atom *a, int kind, int op, int dt, int slot, size_t n, bool *signalled)
{
	struct func *f = &a->r.f;
	struct fid_ep *ep = f->ft.ep;
	fi_addr_t dst = f->ft.peer;
	size_t sz = dts[dt].size, h = n >= 2 && a->iov_limit >= 2 ? n / 2 : n, r1 = n >= 2 &&
		    a->iov_limit >= 2 ? 1 : n;
	char *buf = a->mem + (size_t)slot * SLOT_MAX, *cmp = a->cmp + (size_t)slot * SLOT_MAX;
	char *res = a->res + (size_t)slot * SLOT_MAX;
	void *d = a->desc, *desc[2] = { d, d };
	struct fi_ioc iov[2] = { { buf, h }, { buf + h * sz, n - h } };
	struct fi_ioc civ[2] = { { cmp, h }, { cmp + h * sz, n - h } };
	struct fi_ioc riv[2] = { { res, r1 }, { res + r1 * sz, n - r1 } };
	size_t niov = h < n ? 2 : 1, nres = r1 < n ? 2 : 1;
	struct fi_rma_ioc rma = { .addr = rma_raddr(&a->reg, slot_addr(a, slot)),
				  .count = n, .key = a->reg.key };
	struct fi_msg_atomic msg = { .msg_iov = iov, .desc = desc, .iov_count = niov,
				     .addr = dst, .rma_iov = &rma, .rma_iov_count = 1,
				     .datatype = (enum fi_datatype)dt, .op = (enum fi_op)op,
				     .context = &a->ctx[slot], .data = (uint64_t)slot };
	enum fi_datatype t = (enum fi_datatype)dt;
	enum fi_op o = (enum fi_op)op;
	void *ctx = &a->ctx[slot];
	int form = slot % (kind == K_BASE ? 4 : 3);

	if (form == 3 && n * sz > a->inject_size)
		form = 0;
	a->form[slot] = (uint8_t)form;
	*signalled = form != 3;
	switch (kind * 4 + form) {
	case K_BASE * 4 + 0:
		return FUNC_POST(f, fi_atomic(ep, buf, n, d, dst, rma.addr, rma.key, t, o, ctx));
	case K_BASE * 4 + 1:
		return FUNC_POST(f, fi_atomicv(ep, iov, desc, niov, dst, rma.addr, rma.key, t, o,
					       ctx));
	case K_BASE * 4 + 2:
		return FUNC_POST(f, fi_atomicmsg(ep, &msg, FI_COMPLETION |
						 (a->data_mask ? FI_REMOTE_CQ_DATA : 0)));
	case K_BASE * 4 + 3:
		return FUNC_POST(f, fi_inject_atomic(ep, buf, n, dst, rma.addr, rma.key, t, o));
	case K_FETCH * 4 + 0:
		return FUNC_POST(f, fi_fetch_atomic(ep, buf, n, d, res, d, dst, rma.addr, rma.key,
						    t, o, ctx));
	case K_FETCH * 4 + 1:
		return FUNC_POST(f, fi_fetch_atomicv(ep, iov, desc, niov, riv, desc, nres, dst,
						     rma.addr, rma.key, t, o, ctx));
	case K_FETCH * 4 + 2:
		return FUNC_POST(f, fi_fetch_atomicmsg(ep, &msg, riv, desc, nres, FI_COMPLETION));
	case K_COMPARE * 4 + 0:
		return FUNC_POST(f, fi_compare_atomic(ep, buf, n, d, cmp, d, res, d, dst, rma.addr,
						      rma.key, t, o, ctx));
	case K_COMPARE * 4 + 1:
		return FUNC_POST(f, fi_compare_atomicv(ep, iov, desc, niov, civ, desc, niov, riv,
						       desc, nres, dst, rma.addr, rma.key, t, o,
						       ctx));
	default:
		return FUNC_POST(f, fi_compare_atomicmsg(ep, &msg, civ, desc, niov, riv, desc, nres,
							 FI_COMPLETION));
	}
}

/* One completion of the sweep: a success for a slot we posted, with the right flags. */
static int atom_reap(struct atom *a, const bool *pending)
{
	struct func *f = &a->r.f;
	struct func_comp c;
	int slot, kind;
	uint64_t want;

	FUNC_CALL(f, func_next(f, true, &c, 20000));
	slot = (int)((struct fi_context2 *)c.e.op_context - a->ctx);
	FUNC_ASSERT(f, slot >= 0 && slot < NSLOTS && pending[slot], "completion for op_context "
		    "%p", c.e.op_context);
	kind = slot / (NOPS * NDT);
	FUNC_ASSERT(f, !c.is_err, "%s %s %s: error %d (%s), prov_errno %d", kind_name[kind],
		    op_name[slot / NDT % NOPS], dts[slot % NDT].name, c.err.err,
		    fi_strerror(c.err.err), c.err.prov_errno);
	want = FI_ATOMIC | (kind == K_BASE ? FI_WRITE : FI_READ);
	FUNC_ASSERT(f, (c.e.flags & RMA_CQ_KIND) == want, "%s %s %s: flags 0x%llx, want 0x%llx",
		    kind_name[kind], op_name[slot / NDT % NOPS], dts[slot % NDT].name,
		    (unsigned long long)(c.e.flags & RMA_CQ_KIND), (unsigned long long)want);
	return slot;
}

static int sweep_check_result(struct atom *a, int slot)
{
	struct func *f = &a->r.f;
	int kind = slot / (NOPS * NDT), op = slot / NDT % NOPS, dt = slot % NDT;
	size_t sz = dts[dt].size, n = a->ran[slot], i;
	const char *res = a->res + (size_t)slot * SLOT_MAX;
	unsigned char want[32];
	char gs[80], ws[80];

	for (i = 0; i < n; i++) {
		val_init(slot, (int)i, want, dt);
		if (dts[dt].eq(res + i * sz, want))
			continue;
		hex(gs, sizeof(gs), res + i * sz, sz);
		hex(ws, sizeof(ws), want, sz);
		FUNC_ASSERT(f, false, "%s %s %s (form %d) element %zu of %zu: fetched 0x%s, want "
			    "0x%s", kind_name[kind], op_name[op], dts[dt].name, a->form[slot], i, n,
			    gs, ws);
	}
	for (i = n * sz; n && i < SLOT_MAX; i++)
		FUNC_ASSERT(f, (unsigned char)res[i] == 0xab, "%s %s %s (form %d): result byte %zu "
			    "of the slot written", kind_name[kind], op_name[op], dts[dt].name,
			    a->form[slot], i);
	return 0;
}

static int sweep_initiator(struct atom *a)
{
	struct func *f = &a->r.f;
	static bool pending[NSLOTS];
	uint64_t nw = 0, nr = 0;
	int kind, op, dt, slot, out = 0, ret, bad = 0;
	size_t n, i, sz;
	bool sig;

	memset(a->res, 0xab, (size_t)NSLOTS * SLOT_MAX);
	for (kind = 0; kind < NKINDS; kind++)
	for (op = 0; op < NOPS; op++)
	for (dt = 0; dt < NDT; dt++) {
		slot = slot_of(kind, op, dt);
		if (!a->valid_count[slot])
			continue;
		n = slot_count(a, slot, dt);
		sz = dts[dt].size;
		for (i = 0; i < n; i++) {
			val_operand(slot, (int)i, a->mem + (size_t)slot * SLOT_MAX + i * sz, dt);
			val_compare(slot, (int)i, a->cmp + (size_t)slot * SLOT_MAX + i * sz, dt, op);
		}
		while (out >= WINDOW) {
			ret = atom_reap(a, pending);
			if (ret < 0)
				return ret;
			pending[ret] = false;
			out--;
		}
		FUNC_CALL(f, atom_post(a, kind, op, dt, slot, n, &sig));
		a->ran[slot] = (uint16_t)n;
		pending[slot] = sig;
		out += sig;
		if (kind == K_BASE)
			nw++;
		else
			nr++;
	}
	while (out > 0) {
		ret = atom_reap(a, pending);
		if (ret < 0)
			return ret;
		pending[ret] = false;
		out--;
	}
	FUNC_CALL(f, func_expect_quiet(f, true, 0));
	FUNC_CALL(f, rma_cntr_wait(&a->r, RMA_CNTR_WRITE, nw, 0, 5000));
	FUNC_CALL(f, rma_cntr_wait(&a->r, RMA_CNTR_READ, nr, 0, 5000));
	/* the target checks its memory whatever we find here */
	FUNC_CALL(f, cour_ft_oob_send(&f->ft, a->ran, sizeof(a->ran)));
	FUNC_CALL(f, cour_ft_oob_send(&f->ft, a->form, sizeof(a->form)));

	/* fetched old values: the target's initial ones; past n, nothing written */
	for (slot = NOPS * NDT; slot < NSLOTS; slot++)
		bad += sweep_check_result(a, slot) != 0;
	FUNC_ASSERT(f, bad == 0, "%d operations fetched wrong values", bad);
	printf("atomic sweep: %llu write atomics, %llu fetching ones; results check\n",
	       (unsigned long long)nw, (unsigned long long)nr);
	return cour_ft_barrier(&f->ft);
}

/* Every slot: the operation's result element by element, the rest as initialised. */
static int sweep_check_slot(struct atom *a, int slot)
{
	struct func *f = &a->r.f;
	int kind = slot / (NOPS * NDT), op = slot / NDT % NOPS, dt = slot % NDT;
	size_t sz = dts[dt].size, n = a->ran[slot], i;
	size_t at = slot_addr(a, slot), j;
	const char *base = a->mem + at;
	unsigned char want[32], opnd[32], cmp[32];
	char gs[80], ws[80];

	for (i = 0; i < n; i++) {
		val_init(slot, (int)i, want, dt);
		val_operand(slot, (int)i, opnd, dt);
		val_compare(slot, (int)i, cmp, dt, op);
		FUNC_ASSERT(f, dts[dt].apply((enum fi_op)op, want, opnd, cmp), "no reference");
		if (dts[dt].eq(base + i * sz, want))
			continue;
		hex(gs, sizeof(gs), base + i * sz, sz);
		hex(ws, sizeof(ws), want, sz);
		FUNC_ASSERT(f, false, "%s %s %s (form %d) element %zu of %zu: target holds 0x%s, "
			    "want 0x%s", kind_name[kind], op_name[op], dts[dt].name, a->form[slot],
			    i, n, gs, ws);
	}
	for (j = (size_t)slot * STRIDE; j < (size_t)(slot + 1) * STRIDE; j++)
		FUNC_ASSERT(f, (j >= at && j < at + n * sz) || a->mem[j] == a->pristine[j],
			    "%s %s %s (%zu elements at +%zu): byte %zu of the slot changed",
			    kind_name[kind], op_name[op], dts[dt].name, n, at % STRIDE,
			    j % STRIDE);
	return 0;
}

static int sweep_target(struct atom *a)
{
	struct func *f = &a->r.f;
	struct func_comp c;
	static bool seen[NSLOTS];
	uint64_t nw = 0, nr = 0, ndata = 0, v = 0, e = 0, v2 = 0, e2 = 0;
	int slot, dt, i, k, bad = 0;

	for (slot = 0; slot < NSLOTS; slot++) {
		dt = slot % NDT;
		memset(a->mem + (size_t)slot * STRIDE, 0xa5, STRIDE);
		for (i = 0; dts[dt].size && i < (int)(SLOT_MAX / dts[dt].size); i++)
			val_init(slot, i, a->mem + slot_addr(a, slot) + i * dts[dt].size, dt);
	}
	memcpy(a->pristine, a->mem, (size_t)NSLOTS * STRIDE);
	FUNC_CALL(f, rma_send_region(&a->r, &a->reg));
	FUNC_CALL(f, cour_ft_oob_recv(&f->ft, a->ran, sizeof(a->ran)));
	FUNC_CALL(f, cour_ft_oob_recv(&f->ft, a->form, sizeof(a->form)));
	for (slot = 0; slot < NSLOTS; slot++) {
		if (!a->ran[slot])
			continue;
		FUNC_ASSERT(f, a->valid_count[slot], "the initiator ran slot %d, which our "
			    "endpoint does not offer", slot);
		/* any op but FI_ATOMIC_READ writes target memory, every fetch or compare reads
		 * it (fi_atomic(3)): one event may raise both counters */
		if (slot / NDT % NOPS != FI_ATOMIC_READ)
			nw++;
		if (slot >= NOPS * NDT)
			nr++;
		ndata += slot < NOPS * NDT && a->form[slot] == 2 && a->data_mask;
	}
	/* a write to target memory raises FI_REMOTE_WRITE, data returned raises FI_REMOTE_READ
	 * (fi_atomic(3), fi_cntr(3)): a fetch-add or a swap raises both */
	for (k = 0; k < 5000 && a->r.cntr[RMA_CNTR_RMT_WRITE]; k++) {
		rma_cntr_get(&a->r, RMA_CNTR_RMT_WRITE, &v, &e);
		rma_cntr_get(&a->r, RMA_CNTR_RMT_READ, &v2, &e2);
		if (v >= nw && v2 >= nr)
			break;
		func_sleep_ms(f, 1);
	}
	if (a->r.cntr[RMA_CNTR_RMT_WRITE])
		FUNC_ASSERT(f, v == nw && v2 == nr && !e && !e2, "remote counters: write %llu "
			    "read %llu (errors %llu %llu), want %llu %llu", (unsigned long long)v,
			    (unsigned long long)v2, (unsigned long long)e, (unsigned long long)e2,
			    (unsigned long long)nw, (unsigned long long)nr);
	for (slot = 0; slot < NSLOTS; slot++)
		bad += sweep_check_slot(a, slot) != 0;
	FUNC_ASSERT(f, bad == 0, "%d slots hold wrong values", bad);
	for (k = 0; k < (int)ndata; k++) {
		FUNC_CALL(f, func_next(f, false, &c, 5000));
		slot = (int)c.e.data;
		FUNC_ASSERT(f, !c.is_err && (c.e.flags & FI_REMOTE_CQ_DATA) && slot >= 0 &&
			    slot < NOPS * NDT && a->ran[slot] && a->form[slot] == 2 && !seen[slot],
			    "remote CQ data: err %d flags 0x%llx data 0x%llx", c.err.err,
			    (unsigned long long)c.e.flags, (unsigned long long)c.e.data);
		seen[slot] = true;
		if (func_is_courier(f))
			FUNC_ASSERT(f, (c.e.flags & RMA_CQ_KIND) ==
				    (FI_ATOMIC | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA),
				    "remote CQ data flags 0x%llx", (unsigned long long)c.e.flags);
	}
	FUNC_CALL(f, func_expect_quiet(f, false, 0));
	printf("atomic sweep: target memory checks after %llu write and %llu fetching atomics, "
	       "%llu remote CQ data\n", (unsigned long long)nw, (unsigned long long)nr,
	       (unsigned long long)ndata);
	return cour_ft_barrier(&f->ft);
}

/* courier only: what it documents about refusing at post time */
static int sweep_refusals(struct atom *a)
{
	struct func *f = &a->r.f;
	struct fid_ep *ep = f->ft.ep;
	ssize_t ret;

	ret = fi_atomic(ep, a->mem, 1, a->desc, f->ft.peer, a->reg.addr, a->reg.key, FI_DOUBLE,
			FI_BOR, &a->ctx[0]);
	FUNC_ASSERT(f, ret == -FI_EOPNOTSUPP, "fi_atomic(FI_BOR, FI_DOUBLE): %zd", ret);
	ret = fi_atomic(ep, a->mem, SLOT_MAX / 8 + 1, a->desc, f->ft.peer, a->reg.addr,
			a->reg.key, FI_UINT64, FI_SUM, &a->ctx[0]);
	FUNC_ASSERT(f, ret == -FI_EINVAL, "fi_atomic of %d uint64_t: %zd", SLOT_MAX / 8 + 1, ret);
	return func_expect_quiet(f, true, 10);
}

static int run_sweep(struct atom *a)
{
	struct func *f = &a->r.f;
	size_t len = (size_t)NSLOTS * STRIDE;

	a->unaligned = func_is_courier(f);
	FUNC_CALL(f, atom_validity(a));
	FUNC_ASSERT(f, !posix_memalign((void **)&a->mem, 4096, len) &&
		    !posix_memalign((void **)&a->pristine, 4096, len), "out of memory");
	memset(a->mem, 0, len);
	if (f->ft.is_server) {
		FUNC_CALL(f, rma_mr_reg(&a->r, a->mem, len, FI_REMOTE_READ | FI_REMOTE_WRITE,
					&a->mr, &a->reg));
		return sweep_target(a);
	}
	/* operands, compare values and results: SLOT_MAX each per slot */
	a->cmp = a->pristine;
	a->res = a->pristine + (size_t)NSLOTS * SLOT_MAX;
	FUNC_CALL(f, rma_local_reg(&a->r, a->mem, len, &a->lmr, &a->desc));
	if (a->lmr)
		FUNC_ASSERT(f, false, "FI_MR_LOCAL: not supported by this test");
	FUNC_CALL(f, rma_recv_region(&a->r, &a->reg));
	if (func_is_courier(f))
		FUNC_CALL(f, sweep_refusals(a));
	return sweep_initiator(a);
}

int main(int argc, char **argv)
{
	static struct atom a;
	struct func *f = &a.r.f;
	size_t cq_data;
	int ret;

	ret = rma_init(&a.r, argc, argv, "atomic", FI_ATOMIC | FI_READ | FI_WRITE |
		       FI_REMOTE_READ | FI_REMOTE_WRITE | FI_RMA_EVENT, NULL, NULL, NULL, NULL,
		       NULL);
	if (ret)
		goto out;
	a.inject_size = f->ft.info->tx_attr->inject_size;
	a.iov_limit = f->ft.info->tx_attr->iov_limit;
	cq_data = f->ft.info->domain_attr->cq_data_size;
	a.data_mask = cq_data >= 8 ? ~0ULL : cq_data ? (1ULL << (8 * cq_data)) - 1 : 0;
	printf("atomic sweep (%s): provider %s, key mode %s, mr_mode 0x%x\n",
	       f->ft.is_server ? "target" : "initiator", f->ft.info->fabric_attr->prov_name,
	       a.r.keymode == RMA_KEYS_BASIC ? "basic" : "scalable",
	       f->ft.info->domain_attr->mr_mode);
	fflush(stdout);
	ret = run_sweep(&a);
	if (!ret)
		ret = rma_finish(&a.r);
out:
	rma_mr_close(&a.r, &a.mr);
	rma_mr_close(&a.r, &a.lmr);
	rma_close(&a.r);
	free(a.mem);
	free(a.pristine);
	if (ret || f->failures) {
		fprintf(stderr, "atomic sweep: FAIL (%d)\n", ret);
		return 1;
	}
	printf("atomic sweep: PASS (%s)\n", f->ft.is_server ? "target" : "initiator");
	return 0;
}
