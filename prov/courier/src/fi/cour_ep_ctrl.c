/*
 * Endpoints: the calls on an open fid_ep (bind, names, options, cancel, fi_control, the
 * aliases of fi_ep_alias) and the ops tables that lead to them. Open, enable and close are in
 * cour_ep.c, the statistics extension in cour_ep_stats.c.
 */
#include "cour_ep.h"

#include <stdlib.h>

/* ---- binding ---- */

int cour_sink_bind_cq(struct cour_sink *b, struct cour_domain *dom, struct cour_cq *cq,
		      uint64_t flags)
{
	if (flags & ~(FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION)) {
		COUR_WARN(FI_LOG_EP_CTRL, "unsupported CQ bind flags %#" PRIx64 "\n", flags);
		return -FI_EBADFLAGS;
	}
	if (cq->domain != dom) {
		COUR_WARN(FI_LOG_EP_CTRL, "CQ belongs to another domain\n");
		return -FI_EINVAL;
	}
	if (flags & FI_TRANSMIT) {
		if (b->tx_cq)
			return -FI_EALREADY;
		b->tx_cq = cq;
		b->tx_selective = flags & FI_SELECTIVE_COMPLETION;
		cour_ref_inc(&cq->refcnt);
	}
	if (flags & FI_RECV) {
		if (b->rx_cq)
			return -FI_EALREADY;
		b->rx_cq = cq;
		b->rx_selective = flags & FI_SELECTIVE_COMPLETION;
		cour_ref_inc(&cq->refcnt);
	}
	return 0;
}

int cour_sink_bind_cntr(struct cour_sink *b, enum fi_ep_type type, struct cour_cntr *cntr,
			uint64_t flags)
{
	static const struct { uint64_t flag; size_t off; } slots[] = {
		{ FI_SEND, offsetof(struct cour_sink, send_cntr) },
		{ FI_RECV, offsetof(struct cour_sink, recv_cntr) },
		{ FI_READ, offsetof(struct cour_sink, read_cntr) },
		{ FI_WRITE, offsetof(struct cour_sink, write_cntr) },
		{ FI_REMOTE_READ, offsetof(struct cour_sink, rmt_read_cntr) },
		{ FI_REMOTE_WRITE, offsetof(struct cour_sink, rmt_write_cntr) },
	};

	if (flags & ~(FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE)) {
		COUR_WARN(FI_LOG_EP_CTRL, "unsupported counter bind flags %#" PRIx64 "\n", flags);
		return -FI_EBADFLAGS;
	}
	if (type == FI_EP_DGRAM && (flags & ~(FI_SEND | FI_RECV))) {
		COUR_WARN(FI_LOG_EP_CTRL, "datagram endpoints have no RMA counters\n");
		return -FI_EBADFLAGS;
	}
	for (size_t i = 0; i < sizeof(slots) / sizeof(slots[0]); i++) {
		struct cour_cntr **slot = (void *)((char *)b + slots[i].off);
		if (!(flags & slots[i].flag))
			continue;
		if (*slot)
			cour_ref_dec(&(*slot)->refcnt);
		*slot = cntr;
		cour_ref_inc(&cntr->refcnt);
	}
	return 0;
}

void cour_sink_release(struct cour_sink *b)
{
	struct cour_cntr *c[] = { b->send_cntr, b->recv_cntr, b->read_cntr, b->write_cntr,
				  b->rmt_read_cntr, b->rmt_write_cntr };

	if (b->tx_cq)
		cour_ref_dec(&b->tx_cq->refcnt);
	if (b->rx_cq)
		cour_ref_dec(&b->rx_cq->refcnt);
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
		if (c[i])
			cour_ref_dec(&c[i]->refcnt);
	memset(b, 0, sizeof(*b));
}

/* The engine raises target events (FI_RMA_EVENT) only where a counter waits for them. */
void cour_ep_update_target_events(struct cour_ep *ep)
{
	const struct cour_sink *b = &ep->b;

	if (ep->pep.nrxq && ep->pep.rxqs[0] && ep->pep.rxqs[0]->owner)
		b = cour_sep_ctx_sink(ep->pep.rxqs[0]->owner);
	ep->pep.target_events = (b->rmt_write_cntr ? FI_REMOTE_WRITE : 0) |
				(b->rmt_read_cntr ? FI_REMOTE_READ : 0);
}

static int cour_ep_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	return cour_ep_bind_common(COUR_CONTAINER_OF(fid, struct cour_ep, ep_fid.fid), bfid,
				   flags);
}

int cour_ep_bind_common(struct cour_ep *ep, struct fid *bfid, uint64_t flags)
{
	int ret = 0;

	/* Counters and a shared transmit context may come after fi_enable: Sandia OpenSHMEM
	 * (single endpoint, its default since 1.5.3) binds its default context's counters and
	 * STX to its target endpoint, enabled already, as tcp, verbs and opx take. A counter
	 * bound then counts what completes from then on. The rest decides how the endpoint is
	 * built, so it must come before. */
	if (ep->pep.enabled && bfid->fclass != FI_CLASS_CNTR && bfid->fclass != FI_CLASS_STX_CTX) {
		COUR_WARN(FI_LOG_EP_CTRL, "cannot bind an object of class %zu after fi_enable: "
			  "only counters and a shared transmit context\n", bfid->fclass);
		return -FI_EOPBADSTATE;
	}
	cour_lock_acquire(&ep->domain->lock);
	switch (bfid->fclass) {
	case FI_CLASS_CQ:
		ret = cour_sink_bind_cq(&ep->b, ep->domain,
					COUR_CONTAINER_OF(bfid, struct cour_cq, cq_fid.fid), flags);
		break;
	case FI_CLASS_CNTR:
		ret = cour_sink_bind_cntr(&ep->b, ep->pep.type,
					  COUR_CONTAINER_OF(bfid, struct cour_cntr, cntr_fid.fid),
					  flags);
		if (!ret)
			ep->pep.tx_counted = true;
		cour_ep_update_target_events(ep);
		break;
	case FI_CLASS_AV:
		if (ep->av) {
			ret = -FI_EALREADY;
			break;
		}
		ep->av = COUR_CONTAINER_OF(bfid, struct cour_av, av_fid.fid);
		ep->pep.av_gen = ep->av->gen;
		cour_ref_inc(&ep->av->refcnt);
		break;
	case FI_CLASS_EQ:
		/* RDM and DGRAM endpoints post no connection events */
		if (ep->pep.type != FI_EP_MSG)
			break;
		if (ep->conn.eq)
			cour_ref_dec(&ep->conn.eq->refcnt);
		ep->conn.eq = COUR_CONTAINER_OF(bfid, struct cour_eq, eq_fid.fid);
		cour_ref_inc(&ep->conn.eq->refcnt);
		break;
	case FI_CLASS_SRX_CTX:
		ret = cour_srx_bind(ep, bfid);
		break;
	case FI_CLASS_STX_CTX:
		ret = cour_stx_bind(ep, bfid);
		break;
	default:
		COUR_WARN(FI_LOG_EP_CTRL, "cannot bind an object of class %zu\n", bfid->fclass);
		ret = -FI_EINVAL;
	}
	cour_lock_release(&ep->domain->lock);
	return ret;
}

/* ---- names, options, cancel, control ---- */

static int cour_ep_getname(fid_t fid, void *addr, size_t *addrlen)
{
	struct cour_ep *ep = COUR_CONTAINER_OF(fid, struct cour_ep, ep_fid.fid);

	return cour_addr_name_out(&ep->pep.wire.addr, addr, addrlen);
}

static int cour_ep_setname(fid_t fid, void *addr, size_t addrlen)
{
	struct cour_ep *ep = COUR_CONTAINER_OF(fid, struct cour_ep, ep_fid.fid);
	struct cour_addr want;
	int fd = ep->pep.wire.fd, ret;

	if (ep->pep.enabled) {
		COUR_WARN(FI_LOG_EP_CTRL, "fi_setname after fi_enable\n");
		return -FI_EOPBADSTATE;
	}
	if (cour_addr_from_sockaddr(&want, addr, addrlen)) {
		COUR_WARN(FI_LOG_EP_CTRL, "fi_setname: not a sockaddr_in/in6\n");
		return -FI_EINVAL;
	}
	ep->pep.wire.ops->close(&ep->pep.wire);
	ret = ep->pep.wire.ops->open(&ep->pep.wire, &want);
	if (ret) {
		COUR_WARN(FI_LOG_EP_CTRL, "fi_setname: the old name (fd %d) is gone too\n", fd);
		return ret;
	}
	return 0;
}

int cour_ep_getopt_fid(fid_t fid, int level, int optname, void *optval, size_t *optlen)
{
	struct cour_ep *ep = COUR_CONTAINER_OF(fid, struct cour_ep, ep_fid.fid);
	size_t v;

	if (level != FI_OPT_ENDPOINT)
		return -FI_ENOPROTOOPT;
	switch (optname) {
	case FI_OPT_MIN_MULTI_RECV:
		v = ep->pep.min_multi_recv;
		break;
	case FI_OPT_TX_SIZE:
		v = cour_params.tx_size;
		break;
	case FI_OPT_RX_SIZE:
		v = cour_params.rx_size;
		break;
	case FI_OPT_SEND_BUF_SIZE:
	case FI_OPT_RECV_BUF_SIZE:
		v = cour_params.sockbuf;
		break;
	case FI_OPT_CM_DATA_SIZE:
		if (ep->pep.type != FI_EP_MSG)
			return -FI_ENOPROTOOPT;
		v = COUR_CM_DATA_MAX;
		break;
	default:
		return -FI_ENOPROTOOPT;
	}
	if (!optlen || *optlen < sizeof(size_t)) {
		if (optlen)
			*optlen = sizeof(size_t);
		return -FI_ETOOSMALL;
	}
	memcpy(optval, &v, sizeof(v));
	*optlen = sizeof(v);
	return 0;
}

/*
 * The ring is made at fi_endpoint and nobody learns of it before the first HELLO, which only an
 * enabled endpoint sends or answers: closing it now keeps every peer on UDP in both directions
 * (a peer's HELLO finds no ring to offer). Allowed again, the ring is made anew.
 */
static int cour_ep_set_shm_permitted(struct cour_ep *ep, const void *optval, size_t optlen)
{
	bool permitted;

	if (optlen != sizeof(bool)) {
		COUR_WARN(FI_LOG_EP_CTRL, "FI_OPT_SHARED_MEMORY_PERMITTED takes a bool\n");
		return -FI_EINVAL;
	}
	if (ep->pep.enabled) {
		COUR_WARN(FI_LOG_EP_CTRL, "FI_OPT_SHARED_MEMORY_PERMITTED: set it before fi_enable\n");
		return -FI_EOPBADSTATE;
	}
	memcpy(&permitted, optval, sizeof(permitted));
	if (!permitted) {
		cour_shm_ep_close(&ep->pep);
		COUR_INFO(FI_LOG_EP_CTRL, "shared memory not permitted: same-host peers use UDP\n");
	} else if (!ep->pep.shm_ring) {
		cour_shm_ep_open(&ep->pep);
	}
	return 0;
}

int cour_ep_setopt_fid(fid_t fid, int level, int optname, const void *optval, size_t optlen)
{
	struct cour_ep *ep = COUR_CONTAINER_OF(fid, struct cour_ep, ep_fid.fid);

	if (level != FI_OPT_ENDPOINT)
		return -FI_ENOPROTOOPT;
	if (optname == FI_COURIER_OPT_SHARED_MEMORY_PERMITTED)
		return cour_ep_set_shm_permitted(ep, optval, optlen);
	if (optname != FI_OPT_MIN_MULTI_RECV)
		return -FI_ENOPROTOOPT;
	if (optlen != sizeof(size_t)) {
		COUR_WARN(FI_LOG_EP_CTRL, "FI_OPT_MIN_MULTI_RECV takes a size_t\n");
		return -FI_EINVAL;
	}
	memcpy(&ep->pep.min_multi_recv, optval, sizeof(size_t));
	return 0;
}

static ssize_t cour_ep_cancel(fid_t fid, void *context)
{
	struct cour_ep *ep = COUR_CONTAINER_OF(fid, struct cour_ep, ep_fid.fid);
	int ret;

	cour_lock_acquire(&ep->domain->lock);
	ret = cour_msg_cancel(&ep->pep, context);
	cour_lock_release(&ep->domain->lock);
	return ret;
}

static int cour_ep_alias(struct cour_ep *ep, struct fi_alias *al);

static int cour_ep_control(struct fid *fid, int command, void *arg)
{
	struct cour_ep *ep = COUR_CONTAINER_OF(fid, struct cour_ep, ep_fid.fid);
	uint64_t *flags = arg;

	switch (command) {
	case FI_ENABLE:
		return cour_ep_enable_common(ep);
	case FI_ALIAS:
		return cour_ep_alias(ep, arg);
	case FI_GETOPSFLAG:
		if (!flags)
			return -FI_EINVAL;
		if ((*flags & FI_TRANSMIT) && (*flags & FI_RECV))
			return -FI_EINVAL;
		*flags = (*flags & FI_RECV) ? ep->pep.rx_op_flags : ep->pep.tx_op_flags;
		return 0;
	case FI_SETOPSFLAG:
		if (!flags)
			return -FI_EINVAL;
		if (*flags & FI_RECV)
			ep->pep.rx_op_flags = *flags & ~(FI_TRANSMIT | FI_RECV);
		else
			ep->pep.tx_op_flags = *flags & ~(FI_TRANSMIT | FI_RECV);
		return 0;
	default:
		return -FI_ENOSYS;
	}
}

static int cour_ep_no_tx_ctx(struct fid_ep *sep, int index, struct fi_tx_attr *attr,
			     struct fid_ep **tx_ep, void *context)
{
	return -FI_ENOSYS;
}

static int cour_ep_no_rx_ctx(struct fid_ep *sep, int index, struct fi_rx_attr *attr,
			     struct fid_ep **rx_ep, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t cour_ep_rx_size_left(struct fid_ep *ep_fid)
{
	struct cour_ep *ep = cour_ep_of(ep_fid);

	/* rx_attr->size is a floor: past it receives are still taken while memory lasts */
	return ep->pep.rxq->rxe_pool.in_use < cour_params.rx_size ?
	       (ssize_t)(cour_params.rx_size - ep->pep.rxq->rxe_pool.in_use) : 1;
}

static ssize_t cour_ep_tx_size_left(struct fid_ep *ep_fid)
{
	struct cour_ep *ep = cour_ep_of(ep_fid);

	return (ssize_t)(cour_params.tx_size - ep->pep.tx_outstanding);
}

/* ---- fi_ep_alias: the same endpoint, other default flags ---- */

static struct cour_ep *cour_alias_parent(fid_t fid)
{
	return COUR_CONTAINER_OF(fid, struct cour_ep_alias, ep_fid.fid)->ep;
}

static int cour_alias_close(struct fid *fid)
{
	struct cour_ep_alias *a = COUR_CONTAINER_OF(fid, struct cour_ep_alias, ep_fid.fid);

	cour_ref_dec(&a->ep->refcnt);
	free(a);
	return 0;
}

static int cour_alias_control(struct fid *fid, int command, void *arg)
{
	struct cour_ep_alias *a = COUR_CONTAINER_OF(fid, struct cour_ep_alias, ep_fid.fid);
	uint64_t *flags = arg;

	switch (command) {
	case FI_GETOPSFLAG:
		if (!flags || ((*flags & FI_TRANSMIT) && (*flags & FI_RECV)))
			return -FI_EINVAL;
		*flags = (*flags & FI_RECV) ? a->rx_op_flags : a->tx_op_flags;
		return 0;
	case FI_SETOPSFLAG:
		if (!flags || ((*flags & FI_TRANSMIT) && (*flags & FI_RECV)))
			return -FI_EINVAL;
		if (*flags & FI_RECV)
			a->rx_op_flags = *flags & ~(FI_TRANSMIT | FI_RECV);
		else
			a->tx_op_flags = *flags & ~(FI_TRANSMIT | FI_RECV);
		return 0;
	default:
		COUR_WARN(FI_LOG_EP_CTRL, "fi_control %d on an endpoint alias\n", command);
		return -FI_ENOSYS;
	}
}

static ssize_t cour_alias_cancel(fid_t fid, void *context)
{
	struct cour_ep *ep = cour_alias_parent(fid);

	return fi_cancel(&ep->ep_fid.fid, context);
}

static int cour_alias_getopt(fid_t fid, int level, int optname, void *optval, size_t *optlen)
{
	return fi_getopt(&cour_alias_parent(fid)->ep_fid.fid, level, optname, optval, optlen);
}

static int cour_alias_setopt(fid_t fid, int level, int optname, const void *optval,
			     size_t optlen)
{
	return fi_setopt(&cour_alias_parent(fid)->ep_fid.fid, level, optname, optval, optlen);
}

static int cour_alias_setname(fid_t fid, void *addr, size_t addrlen)
{
	COUR_WARN(FI_LOG_EP_CTRL, "fi_setname on an endpoint alias\n");
	return -FI_EOPNOTSUPP;
}

static int cour_alias_getname(fid_t fid, void *addr, size_t *addrlen)
{
	return fi_getname(&cour_alias_parent(fid)->ep_fid.fid, addr, addrlen);
}

struct fi_ops cour_ep_alias_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = cour_alias_close,
	.bind = cour_no_bind,
	.control = cour_alias_control,
	.ops_open = cour_no_ops_open,
	.tostr = cour_no_tostr,
	.ops_set = cour_no_ops_set,
};

static struct fi_ops_ep cour_alias_ep_ops = {
	.size = sizeof(struct fi_ops_ep),
	.cancel = cour_alias_cancel,
	.getopt = cour_alias_getopt,
	.setopt = cour_alias_setopt,
	.tx_ctx = cour_ep_no_tx_ctx,
	.rx_ctx = cour_ep_no_rx_ctx,
	.rx_size_left = cour_ep_rx_size_left,
	.tx_size_left = cour_ep_tx_size_left,
};

static struct fi_ops_cm cour_alias_cm_ops = {
	.size = sizeof(struct fi_ops_cm),
	.setname = cour_alias_setname,
	.getname = cour_alias_getname,
	.getpeer = cour_no_getpeer,
	.connect = cour_no_connect,
	.listen = cour_no_listen,
	.accept = cour_no_accept,
	.reject = cour_no_reject,
	.shutdown = cour_no_shutdown,
	.join = cour_no_join,
};

/* fi_endpoint(3): flags hold FI_TRANSMIT or FI_RECV (not both) and the flags that replace
 * that side's defaults for operations posted through the alias; the other side's are the
 * endpoint's. The endpoint does not close while an alias of it is open. */
static int cour_ep_alias(struct cour_ep *ep, struct fi_alias *al)
{
	struct cour_ep_alias *a;
	uint64_t dir;

	if (!al || !al->fid) {
		COUR_WARN(FI_LOG_EP_CTRL, "FI_ALIAS without a struct fi_alias\n");
		return -FI_EINVAL;
	}
	dir = al->flags & (FI_TRANSMIT | FI_RECV);
	if (dir != FI_TRANSMIT && dir != FI_RECV) {
		COUR_WARN(FI_LOG_EP_CTRL, "fi_ep_alias flags need FI_TRANSMIT or FI_RECV, not "
			  "both\n");
		return -FI_EINVAL;
	}
	a = calloc(1, sizeof(*a));
	if (!a)
		return -FI_ENOMEM;
	a->ep = ep;
	a->tx_op_flags = dir == FI_TRANSMIT ? al->flags & ~dir : ep->pep.tx_op_flags;
	a->rx_op_flags = dir == FI_RECV ? al->flags & ~dir : ep->pep.rx_op_flags;
	a->ep_fid = ep->ep_fid;
	a->ep_fid.fid.ops = &cour_ep_alias_fi_ops;
	a->ep_fid.ops = &cour_alias_ep_ops;
	a->ep_fid.cm = &cour_alias_cm_ops;
	cour_ref_inc(&ep->refcnt);
	*al->fid = &a->ep_fid.fid;
	return 0;
}

struct fi_ops cour_ep_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = cour_ep_close,
	.bind = cour_ep_bind,
	.control = cour_ep_control,
	.ops_open = cour_ep_ops_open,
	.tostr = cour_no_tostr,
	.ops_set = cour_no_ops_set,
};

struct fi_ops_ep cour_ep_ops = {
	.size = sizeof(struct fi_ops_ep),
	.cancel = cour_ep_cancel,
	.getopt = cour_ep_getopt_fid,
	.setopt = cour_ep_setopt_fid,
	.tx_ctx = cour_ep_no_tx_ctx,
	.rx_ctx = cour_ep_no_rx_ctx,
	.rx_size_left = cour_ep_rx_size_left,
	.tx_size_left = cour_ep_tx_size_left,
};

struct fi_ops_cm cour_msg_cm_ops = {
	.size = sizeof(struct fi_ops_cm),
	.setname = cour_ep_setname,
	.getname = cour_ep_getname,
	.getpeer = cour_cm_getpeer,
	.connect = cour_cm_connect,
	.listen = cour_no_listen,
	.accept = cour_cm_accept,
	.reject = cour_no_reject,
	.shutdown = cour_cm_shutdown,
	.join = cour_no_join,
};

struct fi_ops_cm cour_cm_ops = {
	.size = sizeof(struct fi_ops_cm),
	.setname = cour_ep_setname,
	.getname = cour_ep_getname,
	.getpeer = cour_no_getpeer,
	.connect = cour_no_connect,
	.listen = cour_no_listen,
	.accept = cour_no_accept,
	.reject = cour_no_reject,
	.shutdown = cour_no_shutdown,
	.join = cour_no_join,
};
