/*
 * fi_ops_rma: thin adapters into cour_rma_post (proto/cour_rma_proto.c) under the progress
 * lock. One remote iovec per operation (rma_iov_limit 1); local iovecs up to iov_limit.
 */
#include "cour_ep.h"

#define COUR_IOV1(buf, len) (&(struct iovec){ .iov_base = (void *)(buf), .iov_len = (len) })

static inline ssize_t cour_rma_common(struct fid_ep *ep_fid, uint8_t type,
				      const struct iovec *iov, size_t count, fi_addr_t addr,
				      uint64_t raddr, uint64_t key, uint64_t data, void *context,
				      uint64_t flags, uint64_t silent)
{
	struct cour_ep *ep = cour_ep_of(ep_fid);
	/* only the fi_inject_* calls complete silently (silent = COUR_CQF_NOCOMP): the FI_INJECT
	 * flag of a *msg call (or of tx op_flags) only frees the buffer at return (fi_rma(3)) */
	uint64_t cq_flags = FI_RMA | (type == COUR_PKT_WRITE ? FI_WRITE : FI_READ) | silent;
	ssize_t ret;

	cour_lock_acquire(&ep->domain->lock);
	ret = cour_post_begin(ep, ep_fid, false, &addr);
	if (COUR_UNLIKELY(ret))
		;
	else if (COUR_UNLIKELY(flags & FI_TRIGGER))
		ret = cour_trig_defer_locked(ep, &(struct cour_trig_op){
			.kind = COUR_TRIG_RMA, .rma_type = type, .iov = iov, .count = count,
			.addr = addr, .raddr = raddr, .key = key, .data = data,
			.context = context, .flags = flags, .cq_flags = cq_flags,
			.tx_owner = ep->pep.tx_owner });
	else
		ret = cour_rma_post(&ep->pep, type, iov, count, addr, raddr, key, data, context,
				    flags, cq_flags);
	cour_post_end(ep);
	cour_lock_release(&ep->domain->lock);
	return ret;
}

/* fi_msg_rma: exactly one remote iovec, as long as the local ones together. */
static ssize_t cour_rma_msg(struct fid_ep *ep, const struct fi_msg_rma *msg, uint64_t flags,
			    uint8_t type)
{
	size_t len = 0;

	if (msg->rma_iov_count != 1 || !msg->rma_iov) {
		COUR_WARN(FI_LOG_EP_DATA, "rma_iov_count %zu: courier's rma_iov_limit is 1\n",
			  msg->rma_iov_count);
		return -FI_EINVAL;
	}
	for (size_t i = 0; i < msg->iov_count && i <= COUR_IOV_MAX; i++)
		len += msg->msg_iov[i].iov_len;
	if (msg->iov_count <= COUR_IOV_MAX && len != msg->rma_iov[0].len) {
		COUR_WARN(FI_LOG_EP_DATA, "local iovecs hold %zu bytes, the remote one %zu\n", len,
			  msg->rma_iov[0].len);
		return -FI_EINVAL;
	}
	return cour_rma_common(ep, type, msg->msg_iov, msg->iov_count, msg->addr,
			       msg->rma_iov[0].addr, msg->rma_iov[0].key, msg->data, msg->context,
			       flags, 0);
}

static ssize_t cour_read(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src,
			 uint64_t addr, uint64_t key, void *context)
{
	return cour_rma_common(ep, COUR_PKT_READ_REQ, COUR_IOV1(buf, len), 1, src, addr, key, 0,
			       context, cour_ep_tx_flags(ep), 0);
}

static ssize_t cour_readv(struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count,
			  fi_addr_t src, uint64_t addr, uint64_t key, void *context)
{
	return cour_rma_common(ep, COUR_PKT_READ_REQ, iov, count, src, addr, key, 0, context,
			       cour_ep_tx_flags(ep), 0);
}

static ssize_t cour_readmsg(struct fid_ep *ep, const struct fi_msg_rma *msg, uint64_t flags)
{
	return cour_rma_msg(ep, msg, flags & ~FI_REMOTE_CQ_DATA, COUR_PKT_READ_REQ);
}

static ssize_t cour_write(struct fid_ep *ep, const void *buf, size_t len, void *desc,
			  fi_addr_t dest, uint64_t addr, uint64_t key, void *context)
{
	return cour_rma_common(ep, COUR_PKT_WRITE, COUR_IOV1(buf, len), 1, dest, addr, key, 0,
			       context, cour_ep_tx_flags(ep), 0);
}

static ssize_t cour_writev(struct fid_ep *ep, const struct iovec *iov, void **desc,
			   size_t count, fi_addr_t dest, uint64_t addr, uint64_t key, void *context)
{
	return cour_rma_common(ep, COUR_PKT_WRITE, iov, count, dest, addr, key, 0, context,
			       cour_ep_tx_flags(ep), 0);
}

static ssize_t cour_writemsg(struct fid_ep *ep, const struct fi_msg_rma *msg, uint64_t flags)
{
	return cour_rma_msg(ep, msg, flags, COUR_PKT_WRITE);
}

static ssize_t cour_inject_write(struct fid_ep *ep, const void *buf, size_t len, fi_addr_t dest,
				 uint64_t addr, uint64_t key)
{
	return cour_rma_common(ep, COUR_PKT_WRITE, COUR_IOV1(buf, len), 1, dest, addr, key, 0,
			       NULL, cour_ep_tx_flags(ep) | FI_INJECT,
			       COUR_CQF_NOCOMP);
}

static ssize_t cour_writedata(struct fid_ep *ep, const void *buf, size_t len, void *desc,
			      uint64_t data, fi_addr_t dest, uint64_t addr, uint64_t key,
			      void *context)
{
	return cour_rma_common(ep, COUR_PKT_WRITE, COUR_IOV1(buf, len), 1, dest, addr, key, data,
			       context, cour_ep_tx_flags(ep) | FI_REMOTE_CQ_DATA, 0);
}

static ssize_t cour_inject_writedata(struct fid_ep *ep, const void *buf, size_t len,
				     uint64_t data, fi_addr_t dest, uint64_t addr, uint64_t key)
{
	return cour_rma_common(ep, COUR_PKT_WRITE, COUR_IOV1(buf, len), 1, dest, addr, key, data,
			       NULL, cour_ep_tx_flags(ep) | FI_INJECT | FI_REMOTE_CQ_DATA,
			       COUR_CQF_NOCOMP);
}

struct fi_ops_rma cour_rma_ops = {
	.size = sizeof(struct fi_ops_rma),
	.read = cour_read,
	.readv = cour_readv,
	.readmsg = cour_readmsg,
	.write = cour_write,
	.writev = cour_writev,
	.writemsg = cour_writemsg,
	.inject = cour_inject_write,
	.writedata = cour_writedata,
	.injectdata = cour_inject_writedata,
};
