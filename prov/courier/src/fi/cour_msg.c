/*
 * fi_ops_msg and fi_ops_tagged: thin adapters that build an iovec and call the one generic
 * send or receive path (proto/cour_msg_post.c) under the progress lock.
 */
#include "cour_ep.h"

#define COUR_TX_FLAGS(ep, extra) (cour_ep_tx_flags(ep) | (extra))

static inline ssize_t cour_send_common(struct fid_ep *ep_fid, const struct iovec *iov,
				       size_t count, fi_addr_t dest, uint64_t tag, uint64_t data,
				       void *context, uint64_t flags, uint64_t cq_flags)
{
	struct cour_ep *ep = cour_ep_of(ep_fid);
	ssize_t ret;

	cour_lock_acquire(&ep->domain->lock);
	ret = cour_post_begin(ep, ep_fid, false, &dest);
	if (COUR_UNLIKELY(ret))
		;
	else if (COUR_UNLIKELY(flags & FI_TRIGGER))
		ret = cour_trig_defer_locked(ep, &(struct cour_trig_op){
			.kind = COUR_TRIG_SEND, .iov = iov, .count = count, .addr = dest,
			.tag = tag, .data = data, .context = context, .flags = flags,
			.cq_flags = cq_flags, .tx_owner = ep->pep.tx_owner,
			.tx_rx_ctx = ep->pep.tx_rx_ctx });
	else
		ret = cour_msg_send(&ep->pep, iov, count, dest, tag, data, context, flags,
				    cq_flags);
	cour_post_end(ep);
	cour_lock_release(&ep->domain->lock);
	return ret;
}

static inline ssize_t cour_recv_common(struct fid_ep *ep_fid, const struct iovec *iov,
				       size_t count, fi_addr_t src, uint64_t tag, uint64_t ignore,
				       void *context, uint64_t flags, bool tagged)
{
	struct cour_ep *ep = cour_ep_of(ep_fid);
	ssize_t ret;

	cour_lock_acquire(&ep->domain->lock);
	ret = cour_post_begin(ep, ep_fid, true, &src);
	if (COUR_UNLIKELY(ret))
		;
	else if (COUR_UNLIKELY(flags & FI_TRIGGER))
		ret = cour_trig_defer_locked(ep, &(struct cour_trig_op){
			.kind = COUR_TRIG_RECV, .iov = iov, .count = count, .addr = src,
			.tag = tag, .ignore = ignore, .context = context, .flags = flags,
			.tagged = tagged, .rx_q = ep->pep.rxq });
	else
		ret = cour_msg_recv(&ep->pep, iov, count, src, tag, ignore, context, flags,
				    tagged);
	cour_post_end(ep);
	cour_lock_release(&ep->domain->lock);
	return ret;
}

#define COUR_IOV1(buf, len) (&(struct iovec){ .iov_base = (void *)(buf), .iov_len = (len) })

/* A send of one buffer. On an endpoint posted to directly (not through a scalable
 * endpoint's context or with receive-context addressing) and without a trigger, under one
 * lock: straight into a same-host peer's mailbox if it takes it, else the generic send
 * (cour_post_begin and cour_post_end have nothing to do there). Otherwise the generic post. */
static inline ssize_t cour_send1(struct fid_ep *ep_fid, const void *buf, size_t len,
				 fi_addr_t dest, uint64_t tag, uint64_t data, void *context,
				 uint64_t flags, uint64_t cq_flags)
{
	struct cour_ep *ep = cour_ep_of(ep_fid);
	ssize_t ret = 0;

	if (COUR_UNLIKELY(!cour_ep_is_plain(ep_fid) || (flags & FI_TRIGGER) ||
			  (ep->av && ep->av->rx_ctx_bits)))
		return cour_send_common(ep_fid, COUR_IOV1(buf, len), 1, dest, tag, data,
					context, flags, cq_flags);
	cour_lock_acquire(&ep->domain->lock);
	if (!ep->pep.shm_ring || !cour_short_send1(&ep->pep, dest, buf, len, tag, data, context,
						   flags, cq_flags))
		ret = cour_msg_send(&ep->pep, COUR_IOV1(buf, len), 1, dest, tag, data, context,
				    flags, cq_flags);
	cour_lock_release(&ep->domain->lock);
	return ret;
}

/* ---- fi_msg ---- */

static ssize_t cour_recv(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src,
			 void *context)
{
	return cour_recv_common(ep, COUR_IOV1(buf, len), 1, src, 0, 0, context,
				cour_ep_rx_flags(ep), false);
}

static ssize_t cour_recvv(struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count,
			  fi_addr_t src, void *context)
{
	return cour_recv_common(ep, iov, count, src, 0, 0, context, cour_ep_rx_flags(ep),
				false);
}

static ssize_t cour_recvmsg(struct fid_ep *ep, const struct fi_msg *msg, uint64_t flags)
{
	return cour_recv_common(ep, msg->msg_iov, msg->iov_count, msg->addr, 0, 0,
				msg->context, flags, false);
}

static ssize_t cour_send(struct fid_ep *ep, const void *buf, size_t len, void *desc,
			 fi_addr_t dest, void *context)
{
	return cour_send1(ep, buf, len, dest, 0, 0, context,
			  COUR_TX_FLAGS(ep, 0), FI_SEND | FI_MSG);
}

static ssize_t cour_sendv(struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count,
			  fi_addr_t dest, void *context)
{
	return cour_send_common(ep, iov, count, dest, 0, 0, context,
				COUR_TX_FLAGS(ep, 0), FI_SEND | FI_MSG);
}

static ssize_t cour_sendmsg(struct fid_ep *ep, const struct fi_msg *msg, uint64_t flags)
{
	return cour_send_common(ep, msg->msg_iov, msg->iov_count, msg->addr, 0, msg->data,
				msg->context, flags, FI_SEND | FI_MSG);
}

static ssize_t cour_inject(struct fid_ep *ep, const void *buf, size_t len, fi_addr_t dest)
{
	return cour_send1(ep, buf, len, dest, 0, 0, NULL,
			  COUR_TX_FLAGS(ep, FI_INJECT),
			  FI_SEND | FI_MSG | COUR_CQF_NOCOMP);
}

static ssize_t cour_senddata(struct fid_ep *ep, const void *buf, size_t len, void *desc,
			     uint64_t data, fi_addr_t dest, void *context)
{
	return cour_send1(ep, buf, len, dest, 0, data, context,
			  COUR_TX_FLAGS(ep, FI_REMOTE_CQ_DATA),
			  FI_SEND | FI_MSG);
}

static ssize_t cour_injectdata(struct fid_ep *ep, const void *buf, size_t len, uint64_t data,
			       fi_addr_t dest)
{
	return cour_send1(ep, buf, len, dest, 0, data, NULL,
			  COUR_TX_FLAGS(ep, FI_INJECT | FI_REMOTE_CQ_DATA),
			  FI_SEND | FI_MSG | COUR_CQF_NOCOMP);
}

struct fi_ops_msg cour_msg_ops = {
	.size = sizeof(struct fi_ops_msg),
	.recv = cour_recv,
	.recvv = cour_recvv,
	.recvmsg = cour_recvmsg,
	.send = cour_send,
	.sendv = cour_sendv,
	.sendmsg = cour_sendmsg,
	.inject = cour_inject,
	.senddata = cour_senddata,
	.injectdata = cour_injectdata,
};

/* ---- fi_tagged ---- */

static ssize_t cour_trecv(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src,
			  uint64_t tag, uint64_t ignore, void *context)
{
	return cour_recv_common(ep, COUR_IOV1(buf, len), 1, src, tag, ignore, context,
				cour_ep_rx_flags(ep), true);
}

static ssize_t cour_trecvv(struct fid_ep *ep, const struct iovec *iov, void **desc,
			   size_t count, fi_addr_t src, uint64_t tag, uint64_t ignore,
			   void *context)
{
	return cour_recv_common(ep, iov, count, src, tag, ignore, context,
				cour_ep_rx_flags(ep), true);
}

static ssize_t cour_trecvmsg(struct fid_ep *ep, const struct fi_msg_tagged *msg, uint64_t flags)
{
	return cour_recv_common(ep, msg->msg_iov, msg->iov_count, msg->addr, msg->tag,
				msg->ignore, msg->context, flags, true);
}

static ssize_t cour_tsend(struct fid_ep *ep, const void *buf, size_t len, void *desc,
			  fi_addr_t dest, uint64_t tag, void *context)
{
	return cour_send1(ep, buf, len, dest, tag, 0, context,
			  COUR_TX_FLAGS(ep, 0), FI_SEND | FI_TAGGED);
}

static ssize_t cour_tsendv(struct fid_ep *ep, const struct iovec *iov, void **desc,
			   size_t count, fi_addr_t dest, uint64_t tag, void *context)
{
	return cour_send_common(ep, iov, count, dest, tag, 0, context,
				COUR_TX_FLAGS(ep, 0), FI_SEND | FI_TAGGED);
}

static ssize_t cour_tsendmsg(struct fid_ep *ep, const struct fi_msg_tagged *msg, uint64_t flags)
{
	return cour_send_common(ep, msg->msg_iov, msg->iov_count, msg->addr, msg->tag,
				msg->data, msg->context, flags, FI_SEND | FI_TAGGED);
}

static ssize_t cour_tinject(struct fid_ep *ep, const void *buf, size_t len, fi_addr_t dest,
			    uint64_t tag)
{
	return cour_send1(ep, buf, len, dest, tag, 0, NULL,
			  COUR_TX_FLAGS(ep, FI_INJECT),
			  FI_SEND | FI_TAGGED | COUR_CQF_NOCOMP);
}

static ssize_t cour_tsenddata(struct fid_ep *ep, const void *buf, size_t len, void *desc,
			      uint64_t data, fi_addr_t dest, uint64_t tag, void *context)
{
	return cour_send1(ep, buf, len, dest, tag, data, context,
			  COUR_TX_FLAGS(ep, FI_REMOTE_CQ_DATA),
			  FI_SEND | FI_TAGGED);
}

static ssize_t cour_tinjectdata(struct fid_ep *ep, const void *buf, size_t len, uint64_t data,
				fi_addr_t dest, uint64_t tag)
{
	return cour_send1(ep, buf, len, dest, tag, data, NULL,
			  COUR_TX_FLAGS(ep, FI_INJECT | FI_REMOTE_CQ_DATA),
			  FI_SEND | FI_TAGGED | COUR_CQF_NOCOMP);
}

struct fi_ops_tagged cour_tagged_ops = {
	.size = sizeof(struct fi_ops_tagged),
	.recv = cour_trecv,
	.recvv = cour_trecvv,
	.recvmsg = cour_trecvmsg,
	.send = cour_tsend,
	.sendv = cour_tsendv,
	.sendmsg = cour_tsendmsg,
	.inject = cour_tinject,
	.senddata = cour_tsenddata,
	.injectdata = cour_tinjectdata,
};
