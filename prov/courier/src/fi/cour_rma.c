/*
 * fi_ops_rma: thin adapters into cour_rma_post (proto/cour_rma_proto.c) under the progress
 * lock. Local iovecs up to iov_limit; remote iovecs up to rma_iov_limit (COUR_RMA_IOV_MAX):
 * an operation with several is posted as one engine operation per remote iovec (each with
 * its slice of the local ones), grouped: the target raises its events once, for the last
 * part (COUR_F_PART on the others; remote CQ data rides the last), and the initiator reports
 * one completion, when every part is done, with the first error (cour_rma_group_done).
 */
#include "cour_ep.h"

#include <stdlib.h>

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

bool cour_rma_group_done(const struct cour_txe *txe, struct cour_txe *whole, int *err,
			 int *prov_errno)
{
	struct cour_rma_group *g = txe->group;

	if (*err && !g->err) {
		g->err = *err;
		g->prov_errno = *prov_errno;
	}
	if (--g->left)
		return false;
	memset(whole, 0, sizeof(*whole));
	whole->context = g->context;
	whole->owner = g->owner;
	whole->op_flags = g->op_flags;
	whole->cq_flags = g->cq_flags;
	*err = g->err;
	*prov_errno = g->prov_errno;
	free(g);
	return true;
}

struct cour_rma_group *cour_rma_group_new(void *context, uint64_t flags, uint64_t cq_flags,
					  size_t n)
{
	struct cour_rma_group *g = calloc(1, sizeof(*g));

	if (!g)
		return NULL;
	g->context = context;
	g->op_flags = flags;
	g->cq_flags = cq_flags;
	g->left = g->total = (uint32_t)n;
	return g;
}

int cour_rma_parts_begin(struct cour_ep *ep, struct fid_ep *ep_fid, fi_addr_t *addr,
			 uint64_t flags, size_t n)
{
	int ret = cour_post_begin(ep, ep_fid, false, addr);

	if (ret)
		return ret;
	if (flags & FI_TRIGGER) {
		COUR_WARN(FI_LOG_EP_DATA, "FI_TRIGGER with %zu remote iovecs: one at most\n", n);
		return -FI_EINVAL;
	}
	/* room for every part, or none is posted */
	return ep->pep.tx_outstanding + n > cour_params.tx_size ? -FI_EAGAIN : 0;
}

void cour_rma_part_next(struct cour_ep *ep, struct cour_rma_group *g, bool last,
			uint64_t whole_len)
{
	g->owner = ep->pep.tx_owner;
	ep->pep.tx_group = g;
	ep->pep.tx_part = !last;
	ep->pep.tx_whole_len = (uint32_t)whole_len;     /* <= max_msg_size, 32 bits */
}

int cour_rma_part_posted(struct cour_rma_group *g, ssize_t ret, size_t j, size_t n)
{
	if (!ret)
		return 0;
	if (!j) {
		free(g);
		return (int)ret;
	}
	/* the parts already posted finish; the operation completes in error */
	COUR_WARN(FI_LOG_EP_DATA, "part %zu of %zu of an operation not posted: %s\n", j, n,
		  fi_strerror((int)-ret));
	g->err = (int)-ret;
	g->left -= (uint32_t)(n - j);
	return 1;
}

/* Several remote iovecs: one engine operation for each, local bytes sliced to match. */
static ssize_t cour_rma_parts(struct fid_ep *ep_fid, const struct fi_msg_rma *msg,
			      uint64_t flags, uint8_t type)
{
	struct cour_ep *ep = cour_ep_of(ep_fid);
	uint64_t cq_flags = FI_RMA | (type == COUR_PKT_WRITE ? FI_WRITE : FI_READ);
	size_t n = msg->rma_iov_count, off = 0, whole = 0;
	struct cour_rma_group *g;
	fi_addr_t addr = msg->addr;
	int ret;

	for (size_t j = 0; j < n; j++)
		whole += msg->rma_iov[j].len;
	if (whole > COUR_MAX_MSG_SIZE) {
		COUR_WARN(FI_LOG_EP_DATA, "RMA of %zu bytes exceeds max_msg_size\n", whole);
		return -FI_EMSGSIZE;
	}
	/* inject_size bounds the operation, not each part: refused before any part is posted
	 * (a part refused later would post the others and complete the whole in error) */
	if ((flags & FI_INJECT) && type == COUR_PKT_WRITE && whole > cour_params.inject_size) {
		COUR_WARN(FI_LOG_EP_DATA, "inject write of %zu bytes exceeds inject_size %zu\n",
			  whole, cour_params.inject_size);
		return -FI_EINVAL;
	}
	g = cour_rma_group_new(msg->context, flags, cq_flags, n);
	if (!g)
		return -FI_ENOMEM;
	cour_lock_acquire(&ep->domain->lock);
	ret = cour_rma_parts_begin(ep, ep_fid, &addr, flags, n);
	if (ret)
		free(g);
	for (size_t j = 0; !ret && j < n; j++) {
		struct iovec part[COUR_IOV_MAX];
		size_t len = msg->rma_iov[j].len;
		size_t cnt = cour_iov_slice(msg->msg_iov, msg->iov_count, off, len, part);
		bool last = j == n - 1;

		cour_rma_part_next(ep, g, last, whole);
		ret = cour_rma_part_posted(g, cour_rma_post(&ep->pep, type, part, cnt, addr,
				msg->rma_iov[j].addr, msg->rma_iov[j].key, msg->data, msg->context,
				last ? flags : flags & ~(uint64_t)FI_REMOTE_CQ_DATA, cq_flags), j, n);
		off += len;
	}
	cour_post_end(ep);
	cour_lock_release(&ep->domain->lock);
	return ret < 0 ? ret : 0;
}

/* fi_msg_rma: remote iovecs as long as the local ones together. */
static ssize_t cour_rma_msg(struct fid_ep *ep, const struct fi_msg_rma *msg, uint64_t flags,
			    uint8_t type)
{
	size_t len = 0, rlen = 0;

	if (!msg->rma_iov || msg->rma_iov_count < 1 || msg->rma_iov_count > COUR_RMA_IOV_MAX) {
		COUR_WARN(FI_LOG_EP_DATA, "rma_iov_count %zu: courier's rma_iov_limit is %d\n",
			  msg->rma_iov_count, COUR_RMA_IOV_MAX);
		return -FI_EINVAL;
	}
	for (size_t i = 0; i < msg->rma_iov_count; i++)
		rlen += msg->rma_iov[i].len;
	for (size_t i = 0; i < msg->iov_count && i <= COUR_IOV_MAX; i++)
		len += msg->msg_iov[i].iov_len;
	if (msg->iov_count <= COUR_IOV_MAX && len != rlen) {
		COUR_WARN(FI_LOG_EP_DATA, "local iovecs hold %zu bytes, the remote ones %zu\n", len,
			  rlen);
		return -FI_EINVAL;
	}
	if (msg->rma_iov_count > 1) {
		if (msg->iov_count > COUR_IOV_MAX) {
			COUR_WARN(FI_LOG_EP_DATA, "iov count %zu exceeds iov_limit %d\n",
				  msg->iov_count, COUR_IOV_MAX);
			return -FI_EINVAL;
		}
		return cour_rma_parts(ep, msg, flags, type);
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
