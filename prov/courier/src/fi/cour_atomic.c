/*
 * fi_ops_atomic: thin adapters into cour_atomic_post (proto/cour_atomic_proto.c) under the
 * progress lock, and the *valid queries from the atomic table. Remote iocs up to rma_iov_limit
 * together cover exactly the elements of the local ones; several are posted as one atomic each
 * (the parts of cour_rma.c), each atomic per element as always.
 */
#include "cour_ep.h"
#include "proto/cour_atomic_ops.h"

#define COUR_IOC1(buf, n) (&(struct fi_ioc){ .addr = (void *)(buf), .count = (n) })

static ssize_t cour_atomic_common(struct fid_ep *ep_fid, struct cour_atomic_args *a)
{
	struct cour_ep *ep = cour_ep_of(ep_fid);
	ssize_t ret;

	cour_lock_acquire(&ep->domain->lock);
	ret = cour_post_begin(ep, ep_fid, false, &a->dest);
	if (COUR_UNLIKELY(ret))
		;
	else if (COUR_UNLIKELY(a->flags & FI_TRIGGER))
		ret = cour_trig_defer_locked(ep, &(struct cour_trig_op){
			.kind = COUR_TRIG_ATOMIC, .atomic = *a, .tx_owner = ep->pep.tx_owner });
	else
		ret = cour_atomic_post(&ep->pep, a);
	cour_post_end(ep);
	cour_lock_release(&ep->domain->lock);
	return ret;
}

/* The iocs of elements [off, off + n) of ioc[0..cnt): at most cnt of them, in out. */
static size_t cour_ioc_slice(const struct fi_ioc *ioc, size_t cnt, size_t off, size_t n,
			     size_t esz, struct fi_ioc *out)
{
	size_t k = 0;

	for (size_t i = 0; ioc && i < cnt && n; i++) {
		if (off >= ioc[i].count) {
			off -= ioc[i].count;
			continue;
		}
		size_t take = COUR_MIN(ioc[i].count - off, n);
		out[k].addr = (char *)ioc[i].addr + off * esz;
		out[k].count = take;
		k++;
		n -= take;
		off = 0;
	}
	return k;
}

/* Several remote iocs: one atomic for each, the local operands, compare values and
 * results sliced to match (the grouping of cour_rma.c: one completion, events once). */
/* What cour_atomic_post would refuse in any part, checked before the first is posted: a part
 * refused after others went out would leave the operation half done, completed in error. */
static int cour_atomic_parts_valid(const struct fi_msg_atomic *msg,
				   const struct cour_atomic_args *a, size_t esz)
{
	size_t total = 0;

	if (!cour_atomic_valid(msg->op, msg->datatype, a->kind)) {
		COUR_WARN(FI_LOG_EP_DATA, "atomic op %d on datatype %d is not offered\n",
			  (int)msg->op, (int)msg->datatype);
		return -FI_EOPNOTSUPP;
	}
	for (size_t j = 0; j < msg->rma_iov_count; j++) {
		size_t cnt = msg->rma_iov[j].count;

		if (!cnt || cnt > COUR_ATOMIC_MAX_BYTES / esz) {
			COUR_WARN(FI_LOG_EP_DATA, "atomic part %zu: %zu elements of %zu bytes: "
				  "1..%d bytes allowed\n", j, cnt, esz, COUR_ATOMIC_MAX_BYTES);
			return -FI_EINVAL;
		}
		total += cnt;
	}
	if ((a->kind == COUR_ATOMIC_COMPARE &&
	     cour_ioc_count(a->compare, a->compare_count) != total) ||
	    (a->kind != COUR_ATOMIC_BASE && cour_ioc_count(a->result, a->result_count) != total)) {
		COUR_WARN(FI_LOG_EP_DATA, "atomic of %zu elements: %zu compare values, room for "
			  "%zu results\n", total, cour_ioc_count(a->compare, a->compare_count),
			  cour_ioc_count(a->result, a->result_count));
		return -FI_EINVAL;
	}
	return 0;
}

static ssize_t cour_atomic_parts(struct fid_ep *ep_fid, const struct fi_msg_atomic *msg,
				 const struct cour_atomic_args *a)
{
	struct cour_ep *ep = cour_ep_of(ep_fid);
	size_t n = msg->rma_iov_count, off = 0, esz = cour_atomic_dt_size(msg->datatype);
	struct cour_rma_group *g;
	fi_addr_t addr = msg->addr;
	int ret;

	if (!esz) {
		COUR_WARN(FI_LOG_EP_DATA, "atomic datatype %d unknown\n", (int)msg->datatype);
		return -FI_EOPNOTSUPP;
	}
	if (msg->iov_count > COUR_IOV_MAX || a->compare_count > COUR_IOV_MAX ||
	    a->result_count > COUR_IOV_MAX) {
		COUR_WARN(FI_LOG_EP_DATA, "more than %d local iocs\n", COUR_IOV_MAX);
		return -FI_EINVAL;
	}
	ret = cour_atomic_parts_valid(msg, a, esz);
	if (ret)
		return ret;
	g = cour_rma_group_new(msg->context, a->flags,
			       FI_ATOMIC | (a->kind == COUR_ATOMIC_BASE ? FI_WRITE : FI_READ), n);
	if (!g)
		return -FI_ENOMEM;
	cour_lock_acquire(&ep->domain->lock);
	ret = cour_rma_parts_begin(ep, ep_fid, &addr, a->flags, n);
	if (ret)
		free(g);
	for (size_t j = 0; !ret && j < n; j++) {
		struct fi_ioc iov[COUR_IOV_MAX], cmp[COUR_IOV_MAX], res[COUR_IOV_MAX];
		struct cour_atomic_args part = *a;
		size_t cnt = msg->rma_iov[j].count;

		part.op = msg->op;
		part.dt = msg->datatype;
		part.count = cour_ioc_slice(msg->msg_iov, msg->iov_count, off, cnt, esz, iov);
		part.iov = iov;
		part.compare_count = cour_ioc_slice(a->compare, a->compare_count, off, cnt, esz,
						    cmp);
		part.compare = a->compare ? cmp : NULL;
		part.result_count = cour_ioc_slice(a->result, a->result_count, off, cnt, esz,
						   res);
		part.result = a->result ? res : NULL;
		part.dest = addr;
		part.addr = msg->rma_iov[j].addr;
		part.key = msg->rma_iov[j].key;
		part.data = msg->data;
		part.context = msg->context;
		if (j != n - 1)
			part.flags &= ~(uint64_t)FI_REMOTE_CQ_DATA;
		cour_rma_part_next(ep, g, j == n - 1, 0);
		ret = cour_rma_part_posted(g, cour_atomic_post(&ep->pep, &part), j, n);
		off += cnt;
	}
	cour_post_end(ep);
	cour_lock_release(&ep->domain->lock);
	return ret < 0 ? ret : 0;
}

static ssize_t cour_atomic_msg(struct fid_ep *ep, const struct fi_msg_atomic *msg,
			       struct cour_atomic_args *a)
{
	size_t n = 0, rn = 0;

	if (!msg->rma_iov || msg->rma_iov_count < 1 || msg->rma_iov_count > COUR_RMA_IOV_MAX) {
		COUR_WARN(FI_LOG_EP_DATA, "rma_iov_count %zu: courier's rma_iov_limit is %d\n",
			  msg->rma_iov_count, COUR_RMA_IOV_MAX);
		return -FI_EINVAL;
	}
	for (size_t i = 0; i < msg->rma_iov_count; i++)
		rn += msg->rma_iov[i].count;
	for (size_t i = 0; i < msg->iov_count && i <= COUR_IOV_MAX; i++)
		n += msg->msg_iov[i].count;
	if (msg->iov_count <= COUR_IOV_MAX && n != rn) {
		COUR_WARN(FI_LOG_EP_DATA, "local iocs hold %zu elements, the remote ones %zu\n", n,
			  rn);
		return -FI_EINVAL;
	}
	if (msg->rma_iov_count > 1)
		return cour_atomic_parts(ep, msg, a);
	a->op = msg->op;
	a->dt = msg->datatype;
	a->iov = msg->msg_iov;
	a->count = msg->iov_count;
	a->dest = msg->addr;
	a->addr = msg->rma_iov[0].addr;
	a->key = msg->rma_iov[0].key;
	a->data = msg->data;
	a->context = msg->context;
	return cour_atomic_common(ep, a);
}

/* ---- fi_atomic ---- */

static ssize_t cour_atomic_write(struct fid_ep *ep, const void *buf, size_t count, void *desc,
				 fi_addr_t dest, uint64_t addr, uint64_t key,
				 enum fi_datatype dt, enum fi_op op, void *context)
{
	struct cour_atomic_args a = {
		.kind = COUR_ATOMIC_BASE, .op = op, .dt = dt, .iov = COUR_IOC1(buf, count),
		.count = 1, .dest = dest, .addr = addr, .key = key, .context = context,
		.flags = cour_ep_tx_flags(ep),
	};
	return cour_atomic_common(ep, &a);
}

static ssize_t cour_atomic_writev(struct fid_ep *ep, const struct fi_ioc *iov, void **desc,
				  size_t count, fi_addr_t dest, uint64_t addr, uint64_t key,
				  enum fi_datatype dt, enum fi_op op, void *context)
{
	struct cour_atomic_args a = {
		.kind = COUR_ATOMIC_BASE, .op = op, .dt = dt, .iov = iov, .count = count,
		.dest = dest, .addr = addr, .key = key, .context = context,
		.flags = cour_ep_tx_flags(ep),
	};
	return cour_atomic_common(ep, &a);
}

static ssize_t cour_atomic_writemsg(struct fid_ep *ep, const struct fi_msg_atomic *msg,
				    uint64_t flags)
{
	struct cour_atomic_args a = { .kind = COUR_ATOMIC_BASE, .flags = flags };

	return cour_atomic_msg(ep, msg, &a);
}

static ssize_t cour_atomic_inject(struct fid_ep *ep, const void *buf, size_t count,
				  fi_addr_t dest, uint64_t addr, uint64_t key, enum fi_datatype dt,
				  enum fi_op op)
{
	struct cour_atomic_args a = {
		.kind = COUR_ATOMIC_BASE, .op = op, .dt = dt, .iov = COUR_IOC1(buf, count),
		.count = 1, .dest = dest, .addr = addr, .key = key,
		.flags = cour_ep_tx_flags(ep) | FI_INJECT, .silent = true,
	};
	return cour_atomic_common(ep, &a);
}

/* ---- fi_fetch_atomic ---- */

static ssize_t cour_atomic_readwrite(struct fid_ep *ep, const void *buf, size_t count,
				     void *desc, void *result, void *result_desc, fi_addr_t dest,
				     uint64_t addr, uint64_t key, enum fi_datatype dt,
				     enum fi_op op, void *context)
{
	struct cour_atomic_args a = {
		.kind = COUR_ATOMIC_FETCH, .op = op, .dt = dt, .iov = COUR_IOC1(buf, count),
		.count = 1, .result = COUR_IOC1(result, count), .result_count = 1,
		.dest = dest, .addr = addr, .key = key, .context = context,
		.flags = cour_ep_tx_flags(ep),
	};
	return cour_atomic_common(ep, &a);
}

static ssize_t cour_atomic_readwritev(struct fid_ep *ep, const struct fi_ioc *iov, void **desc,
				      size_t count, struct fi_ioc *resultv, void **result_desc,
				      size_t result_count, fi_addr_t dest, uint64_t addr,
				      uint64_t key, enum fi_datatype dt, enum fi_op op,
				      void *context)
{
	struct cour_atomic_args a = {
		.kind = COUR_ATOMIC_FETCH, .op = op, .dt = dt, .iov = iov, .count = count,
		.result = resultv, .result_count = result_count, .dest = dest, .addr = addr,
		.key = key, .context = context, .flags = cour_ep_tx_flags(ep),
	};
	return cour_atomic_common(ep, &a);
}

static ssize_t cour_atomic_readwritemsg(struct fid_ep *ep, const struct fi_msg_atomic *msg,
					struct fi_ioc *resultv, void **result_desc,
					size_t result_count, uint64_t flags)
{
	struct cour_atomic_args a = {
		.kind = COUR_ATOMIC_FETCH, .result = resultv, .result_count = result_count,
		.flags = flags,
	};
	return cour_atomic_msg(ep, msg, &a);
}

/* ---- fi_compare_atomic ---- */

static ssize_t cour_atomic_compwrite(struct fid_ep *ep, const void *buf, size_t count,
				     void *desc, const void *compare, void *compare_desc,
				     void *result, void *result_desc, fi_addr_t dest,
				     uint64_t addr, uint64_t key, enum fi_datatype dt,
				     enum fi_op op, void *context)
{
	struct cour_atomic_args a = {
		.kind = COUR_ATOMIC_COMPARE, .op = op, .dt = dt, .iov = COUR_IOC1(buf, count),
		.count = 1, .compare = COUR_IOC1(compare, count), .compare_count = 1,
		.result = COUR_IOC1(result, count), .result_count = 1, .dest = dest,
		.addr = addr, .key = key, .context = context,
		.flags = cour_ep_tx_flags(ep),
	};
	return cour_atomic_common(ep, &a);
}

static ssize_t cour_atomic_compwritev(struct fid_ep *ep, const struct fi_ioc *iov, void **desc,
				      size_t count, const struct fi_ioc *comparev,
				      void **compare_desc, size_t compare_count,
				      struct fi_ioc *resultv, void **result_desc,
				      size_t result_count, fi_addr_t dest, uint64_t addr,
				      uint64_t key, enum fi_datatype dt, enum fi_op op,
				      void *context)
{
	struct cour_atomic_args a = {
		.kind = COUR_ATOMIC_COMPARE, .op = op, .dt = dt, .iov = iov, .count = count,
		.compare = comparev, .compare_count = compare_count, .result = resultv,
		.result_count = result_count, .dest = dest, .addr = addr, .key = key,
		.context = context, .flags = cour_ep_tx_flags(ep),
	};
	return cour_atomic_common(ep, &a);
}

static ssize_t cour_atomic_compwritemsg(struct fid_ep *ep, const struct fi_msg_atomic *msg,
					const struct fi_ioc *comparev, void **compare_desc,
					size_t compare_count, struct fi_ioc *resultv,
					void **result_desc, size_t result_count, uint64_t flags)
{
	struct cour_atomic_args a = {
		.kind = COUR_ATOMIC_COMPARE, .compare = comparev, .compare_count = compare_count,
		.result = resultv, .result_count = result_count, .flags = flags,
	};
	return cour_atomic_msg(ep, msg, &a);
}

/* ---- what is offered ---- */

static int cour_atomic_valid_common(enum fi_datatype dt, enum fi_op op, int kind,
				    size_t *count)
{
	struct fi_atomic_attr attr;
	uint64_t flags = kind == COUR_ATOMIC_FETCH ? FI_FETCH_ATOMIC :
			 kind == COUR_ATOMIC_COMPARE ? FI_COMPARE_ATOMIC : 0;
	int ret = cour_atomic_query(op, dt, flags, COUR_ATOMIC_MAX_BYTES, &attr);

	if (ret)
		return ret;
	*count = attr.count;
	return 0;
}

static int cour_atomic_writevalid(struct fid_ep *ep, enum fi_datatype dt, enum fi_op op,
				  size_t *count)
{
	return cour_atomic_valid_common(dt, op, COUR_ATOMIC_BASE, count);
}

static int cour_atomic_readwritevalid(struct fid_ep *ep, enum fi_datatype dt, enum fi_op op,
				      size_t *count)
{
	return cour_atomic_valid_common(dt, op, COUR_ATOMIC_FETCH, count);
}

static int cour_atomic_compwritevalid(struct fid_ep *ep, enum fi_datatype dt, enum fi_op op,
				      size_t *count)
{
	return cour_atomic_valid_common(dt, op, COUR_ATOMIC_COMPARE, count);
}

/* fi_query_atomic, the domain-level form */
int cour_domain_query_atomic(struct fid_domain *domain, enum fi_datatype dt, enum fi_op op,
			     struct fi_atomic_attr *attr, uint64_t flags)
{
	return cour_atomic_query(op, dt, flags, COUR_ATOMIC_MAX_BYTES, attr);
}

struct fi_ops_atomic cour_atomic_ops = {
	.size = sizeof(struct fi_ops_atomic),
	.write = cour_atomic_write,
	.writev = cour_atomic_writev,
	.writemsg = cour_atomic_writemsg,
	.inject = cour_atomic_inject,
	.readwrite = cour_atomic_readwrite,
	.readwritev = cour_atomic_readwritev,
	.readwritemsg = cour_atomic_readwritemsg,
	.compwrite = cour_atomic_compwrite,
	.compwritev = cour_atomic_compwritev,
	.compwritemsg = cour_atomic_compwritemsg,
	.writevalid = cour_atomic_writevalid,
	.readwritevalid = cour_atomic_readwritevalid,
	.compwritevalid = cour_atomic_compwritevalid,
};
