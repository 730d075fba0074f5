/*
 * The atomic operation table: what the TARGET runs to apply fi_atomic, fi_fetch_atomic and
 * fi_compare_atomic to its own (registered) memory. A pure component: no endpoint, no wire.
 *
 * Which operation applies to which datatype (fi_atomic(3) gives only the pseudo-code; these are
 * the readings courier reports through fi_*atomicvalid and fi_query_atomic):
 *
 *                      integers (8..128)   float/double/long double   complex types
 *   MIN MAX                   yes                  yes                    no  (no order)
 *   SUM PROD                  yes                  yes                    yes (C complex * )
 *   LOR LAND LXOR             yes                  yes                    yes (value != 0)
 *   BOR BAND BXOR             yes                  no                     no  (no bits)
 *   ATOMIC_READ/WRITE         yes                  yes                    yes
 *   CSWAP CSWAP_NE            yes                  yes (numeric ==)       yes (numeric ==)
 *   CSWAP_LE/LT/GE/GT         yes                  yes                    no  (no order)
 *   MSWAP                     yes                  no                     no  (no bits)
 *
 * Kinds: COUR_ATOMIC_BASE (fi_atomic) takes MIN..BXOR and ATOMIC_WRITE; COUR_ATOMIC_FETCH
 * (fi_fetch_atomic) takes those plus ATOMIC_READ; COUR_ATOMIC_COMPARE (fi_compare_atomic) takes
 * CSWAP..MSWAP.
 *
 * Arithmetic rules, element by element, as in the man page's pseudo-code:
 * - Integer SUM and PROD wrap modulo 2^bits, signed ones too (two's complement): they are done
 *   in the unsigned domain, so no signed overflow (undefined behaviour) happens.
 * - Logical ops treat a nonzero value (for complex: either part nonzero; NaN is nonzero) as true
 *   and store 0 or 1 of the element's type (1 + 0i for complex).
 * - Floating comparisons are IEEE ones: NaN compares false (MIN/MAX with a NaN operand leave the
 *   target alone, CSWAP never matches a NaN, CSWAP_NE always does), -0.0 == +0.0.
 * - CSWAP_xx compares compare (left) with the target (right): CSWAP_LE swaps if compare <= target.
 *   MSWAP: target = (operand & compare) | (target & ~compare).
 *
 * Atomicity is per element, against every other cour_atomic_exec on the same element with the
 * same datatype, in this process. How, and why, is explained in cour_atomic_ops.c.
 */
#ifndef COUR_ATOMIC_OPS_H
#define COUR_ATOMIC_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>

enum cour_atomic_kind {
	COUR_ATOMIC_BASE,	/* fi_atomic */
	COUR_ATOMIC_FETCH,	/* fi_fetch_atomic */
	COUR_ATOMIC_COMPARE,	/* fi_compare_atomic */
};

/* Bytes of one element of dt (sizeof long double for FI_LONG_DOUBLE); 0 for an unknown dt or
 * one this build cannot handle (the 128-bit integers without compiler support). */
size_t cour_atomic_dt_size(enum fi_datatype dt);

/* Elements in n iocs. */
static inline size_t cour_ioc_count(const struct fi_ioc *ioc, size_t n)
{
	size_t c = 0;

	for (size_t i = 0; i < n; i++)
		c += ioc[i].count;
	return c;
}

/* Whether op on dt is offered as an atomic of the given kind (enum cour_atomic_kind). */
bool cour_atomic_valid(enum fi_op op, enum fi_datatype dt, int kind);

/*
 * Applies op to count elements at target. For every element: if result is not NULL, the
 * target's old value is stored there; then the target is updated (if the operation says so).
 * operand may be NULL only for FI_ATOMIC_READ; compare must be given for the compare ops
 * (CSWAP..MSWAP) and is ignored otherwise; FI_ATOMIC_READ needs result. operand, compare and
 * result may be unaligned; target may be too (it then takes the lock path).
 * Returns 0, -FI_EOPNOTSUPP for an op/dt combination no kind offers, or -FI_EINVAL for missing
 * buffers; on error no memory is touched.
 */
int cour_atomic_exec(enum fi_op op, enum fi_datatype dt, void *target, const void *operand,
		     const void *compare, void *result, size_t count);

/*
 * fi_query_atomic's answer. flags: 0 (base), FI_FETCH_ATOMIC or FI_COMPARE_ATOMIC (not both:
 * -FI_EINVAL); FI_TAGGED (atomics on tagged buffers) is not offered. max_bytes is the payload
 * one operation may carry; attr->count = max_bytes / size. Returns -FI_EOPNOTSUPP when the
 * combination is not offered or not even one element fits; attr is written on success only.
 */
int cour_atomic_query(enum fi_op op, enum fi_datatype dt, uint64_t flags, size_t max_bytes,
		      struct fi_atomic_attr *attr);

#endif /* COUR_ATOMIC_OPS_H */
