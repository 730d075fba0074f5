/*
 * Endpoints: the fid_ep object (bind, enable, names, options, cancel, close), the statistics
 * extension, and how a finished send is reported.
 */
#include "cour_ep.h"
#include "cour_attr.h"
#include "cour_mr.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define COUR_MIN_MULTI_RECV_DEFAULT 64

extern struct fi_ops_msg cour_msg_ops;
extern struct fi_ops_tagged cour_tagged_ops;
static struct fi_ops_ep cour_ep_ops;
static struct fi_ops_cm cour_cm_ops;
static struct fi_ops_cm cour_msg_cm_ops;
extern struct fi_ops_rma cour_no_rma_ops, cour_rma_ops;
extern struct fi_ops_atomic cour_no_atomic_ops, cour_atomic_ops;

/* ---- what the engine reports (struct cour_up_ops) ---- */

static void cour_ep_tx_done(struct cour_pep *pep, const struct cour_txe *txe, int err,
			    int prov_errno)
{
	struct cour_ep *ep = cour_ep_of_pep(pep);
	struct cour_txe whole;

	/* one part of an RMA with several remote iovecs: the whole completes with the last */
	if (COUR_UNLIKELY(txe->group)) {
		if (!cour_rma_group_done(txe, &whole, &err, &prov_errno))
			return;
		txe = &whole;
	}
	const struct cour_sink *b = txe->owner ? cour_sep_ctx_sink(txe->owner) : &ep->b;
	struct cour_cq_entry e = {
		.op_context = txe->context,
		.flags = txe->cq_flags & ~COUR_CQF_NOCOMP,
		.len = err ? txe->msg_len : 0,
		.src = FI_ADDR_NOTAVAIL,
		.tag = err ? txe->tag : 0,
	};

	/* fi_cntr(3): reads and fetching atomics count as reads, writes and plain atomics as
	 * writes, messages as sends */
	struct cour_cntr *cntr = (txe->cq_flags & FI_READ) ? b->read_cntr :
				 (txe->cq_flags & FI_WRITE) ? b->write_cntr : b->send_cntr;

	if (err) {
		/* errors are reported even for inject and unsignalled sends */
		if (b->tx_cq)
			cour_cq_write_err_locked(b->tx_cq, &e, err, prov_errno, 0);
		if (cntr)
			cour_cntr_inc_err_locked(cntr);
		return;
	}
	if (b->tx_cq && !(txe->cq_flags & COUR_CQF_NOCOMP) &&
	    (!b->tx_selective || (txe->op_flags & FI_COMPLETION)))
		cour_cq_write_locked(b->tx_cq, &e);
	if (cntr)
		cour_cntr_inc_locked(cntr);
}

static void cour_ep_rx_done(struct cour_pep *pep, const struct cour_rxq *q,
			    const struct cour_cq_entry *e, uint64_t op_flags, int err,
			    int prov_errno, size_t olen)
{
	struct cour_ep *ep = cour_ep_of_pep(pep);
	const struct cour_sink *b = q && q->owner ? cour_sep_ctx_sink(q->owner) : &ep->b;

	if (COUR_UNLIKELY(q && q->closed))
		return;         /* its receive context was closed: nobody reads its completions */
	if (err) {
		if (b->rx_cq)
			cour_cq_write_err_locked(b->rx_cq, e, err, prov_errno, olen);
		if (b->recv_cntr)
			cour_cntr_inc_err_locked(b->recv_cntr);
		return;
	}
	if (b->rx_cq && (!b->rx_selective || (op_flags & FI_COMPLETION)))
		cour_cq_write_locked(b->rx_cq, e);
	if (b->recv_cntr)
		cour_cntr_inc_locked(b->recv_cntr);
}

/* The endpoint's remote counters and the region's counter each move once for one event,
 * even when one counter is bound for both FI_REMOTE_READ and FI_REMOTE_WRITE. */
static void cour_ep_target_done(struct cour_pep *pep, struct cour_region *r, uint64_t events,
				const struct cour_cq_entry *cq_data)
{
	struct cour_ep *ep = cour_ep_of_pep(pep);
	/* a scalable endpoint's target events go to its receive context 0 */
	const struct cour_sink *b = pep->nrxq && pep->rxqs[0] && pep->rxqs[0]->owner ?
				    cour_sep_ctx_sink(pep->rxqs[0]->owner) : &ep->b;
	struct cour_cntr *w = (events & FI_REMOTE_WRITE) ? b->rmt_write_cntr : NULL;
	struct cour_cntr *rd = (events & FI_REMOTE_READ) ? b->rmt_read_cntr : NULL;

	if (w)
		cour_cntr_inc_locked(w);
	if (rd && rd != w)
		cour_cntr_inc_locked(rd);
	if (r && (r->counted & events))
		cour_cntr_inc_locked(cour_mr_of_region(r)->cntr);
	if (cq_data && b->rx_cq)
		cour_cq_write_locked(b->rx_cq, cq_data);
}

static const struct cour_addr *cour_ep_av_lookup(struct cour_pep *pep, fi_addr_t fi_addr)
{
	struct cour_ep *ep = cour_ep_of_pep(pep);

	return ep->av ? cour_av_lookup_locked(ep->av, fi_addr) : NULL;
}

static fi_addr_t cour_ep_av_reverse(struct cour_pep *pep, const struct cour_addr *addr)
{
	struct cour_ep *ep = cour_ep_of_pep(pep);

	return ep->av ? cour_av_reverse_locked(ep->av, addr) : FI_ADDR_NOTAVAIL;
}

static bool cour_ep_av_same(struct cour_pep *pep, fi_addr_t a, fi_addr_t b)
{
	struct cour_ep *ep = cour_ep_of_pep(pep);

	return ep->av && cour_av_same_locked(ep->av, a, b);
}

static void cour_ep_domain_progress(struct cour_pep *pep)
{
	cour_domain_progress_locked(cour_ep_of_pep(pep)->domain);
}

const struct cour_up_ops cour_ep_up = {
	.tx_done = cour_ep_tx_done,
	.rx_done = cour_ep_rx_done,
	.target_done = cour_ep_target_done,
	.av_lookup = cour_ep_av_lookup,
	.av_reverse = cour_ep_av_reverse,
	.av_same = cour_ep_av_same,
	.progress = cour_ep_domain_progress,
};

/* A connected endpoint has no AV: every address names its one peer (fi_addr 0) */
static const struct cour_addr *cour_ep_msg_lookup(struct cour_pep *pep, fi_addr_t fi_addr)
{
	return cour_cm_peer(&cour_ep_of_pep(pep)->conn);
}

static fi_addr_t cour_ep_msg_reverse(struct cour_pep *pep, const struct cour_addr *addr)
{
	return cour_cm_reverse(&cour_ep_of_pep(pep)->conn, addr);
}

static bool cour_ep_msg_same(struct cour_pep *pep, fi_addr_t a, fi_addr_t b)
{
	return true;
}

const struct cour_up_ops cour_ep_msg_up = {
	.tx_done = cour_ep_tx_done,
	.rx_done = cour_ep_rx_done,
	.target_done = cour_ep_target_done,
	.av_lookup = cour_ep_msg_lookup,
	.av_reverse = cour_ep_msg_reverse,
	.av_same = cour_ep_msg_same,
	.progress = cour_ep_domain_progress,
	.cm_rx = cour_cm_rx,
	.cm_tick = cour_cm_tick,
	.peer_lost = cour_cm_peer_lost,
	.cm_refused = cour_cm_refused,
};

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

	if (ep->pep.enabled) {
		COUR_WARN(FI_LOG_EP_CTRL, "bind after fi_enable\n");
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

/* ---- enable, names, options ---- */

int cour_ep_enable_common(struct cour_ep *ep)
{
	struct cour_domain *dom = ep->domain;
	uint64_t caps = ep->info->caps;

	if (ep->pep.enabled)
		return 0;
	if (ep->pep.type == FI_EP_MSG && !ep->conn.eq) {
		COUR_WARN(FI_LOG_EP_CTRL, "fi_enable: no EQ bound to a connected endpoint\n");
		return -FI_ENOEQ;
	}
	if (!ep->av && ep->pep.type != FI_EP_MSG) {
		COUR_WARN(FI_LOG_EP_CTRL, "fi_enable: no address vector bound\n");
		return -FI_ENOAV;
	}
	if (ep->ntx || ep->nrx)
		;       /* a scalable endpoint: its contexts have the bindings */
	else if (((caps & FI_SEND) || !(caps & (FI_SEND | FI_RECV))) && !ep->b.tx_cq &&
		 !ep->b.send_cntr) {
		COUR_WARN(FI_LOG_EP_CTRL, "fi_enable: no transmit CQ or counter bound\n");
		return -FI_ENOCQ;
	}
	if (!ep->ntx && !ep->nrx &&
	    ((caps & FI_RECV) || !(caps & (FI_SEND | FI_RECV))) && !ep->b.rx_cq &&
	    !ep->b.recv_cntr) {
		COUR_WARN(FI_LOG_EP_CTRL, "fi_enable: no receive CQ or counter bound\n");
		return -FI_ENOCQ;
	}
	cour_lock_acquire(&dom->lock);
	DL_APPEND2(dom->pdom.peps, &ep->pep, pdom_prev, pdom_next);
	ep->pep.enabled = true;
	cour_rma_push_offer_all(&ep->pep);
	cour_lock_release(&dom->lock);
	cour_domain_kick(dom);
	return 0;
}

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

/* ---- statistics ---- */

/* The engine's counters with the wire's (and its fault injector's) added in. */
static void cour_ep_stats_locked(struct cour_ep *ep, struct fi_courier_stats *s)
{
	const struct cour_wire_stats *w = &ep->pep.wire.stats;
	struct cour_fault_counts f;

	*s = ep->pep.stats;
	s->tx_pkts += w->tx_pkts;
	s->tx_bytes += w->tx_bytes;
	s->rx_pkts += w->rx_pkts;
	s->rx_in_place += w->rx_in_place;
	s->drop_bad_hdr += w->rx_bad;
	s->udp_gso = ep->pep.wire.gso_on;
	s->udp_gro = ep->pep.wire.gro_on;
	s->udp_gso_sends = w->gso_sends;
	s->udp_gso_segs = w->gso_segs;
	s->udp_gro_trains = w->gro_trains;
	s->udp_gro_segs = w->gro_segs;
	s->rx_sock_drops = w->sock_drops;
	s->udp_packs = w->packs;
	s->udp_packed = w->packed;
	s->udp_packs_rcvd = w->packs_rcvd;
	s->peers = ep->pep.peer_count;
	cour_fault_counts(&ep->pep.wire, &f);
	s->fault_drops = f.drops;
	s->fault_dups = f.dups;
	s->fault_corrupts = f.corrupts;
	s->fault_reorders = f.reorders;
	if (ep->pep.wire.mac) {
		struct cour_mac_counts m;

		cour_mac_counts(ep->pep.wire.mac, &m);
		s->drop_bad_mac += m.forged;
		s->drop_replay += m.replayed;
	}
}

static int cour_ep_get_stats(struct fid_ep *ep_fid, struct fi_courier_stats *stats)
{
	struct cour_ep *ep = cour_ep_of(ep_fid);

	if (!stats)
		return -FI_EINVAL;
	cour_lock_acquire(&ep->domain->lock);
	cour_ep_stats_locked(ep, stats);
	cour_lock_release(&ep->domain->lock);
	return 0;
}

static struct fi_courier_ops_ep cour_ep_ext_ops = {
	.size = sizeof(struct fi_courier_ops_ep),
	.get_stats = cour_ep_get_stats,
};

static int cour_ep_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops,
			    void *context)
{
	if (!name || strcmp(name, FI_COURIER_EP_OPS))
		return -FI_ENOSYS;
	*ops = &cour_ep_ext_ops;
	return 0;
}

/* Congestion control: the totals, then the window of each peer across the network (the
 * first COUR_CC_PRINT_PEERS of them). */
#define COUR_CC_PRINT_PEERS 16
static void cour_ep_print_cc(struct cour_ep *ep, const struct fi_courier_stats *s,
			     const char *me)
{
	static const char *const mode[] = { "delay", "compete", "probe" };
	struct cour_peer *peer, *tmp;
	char str[80];
	int n = 0;

	fprintf(stderr, "courier stats %s: cc_cwnd %" PRIu64 " cc_base_rtt_us %" PRIu64
		" cc_qdelay_us %" PRIu64 " cc_cuts_delay %" PRIu64 " cc_cuts_loss %" PRIu64
		" cc_cuts_timeout %" PRIu64 " cc_loss_random %" PRIu64 " cc_compete %" PRIu64
		" cc_stalls %" PRIu64 " cc_rto_spurious %" PRIu64 "\n", me, s->cc_cwnd,
		s->cc_base_rtt_us, s->cc_qdelay_us, s->cc_cuts_delay, s->cc_cuts_loss,
		s->cc_cuts_timeout, s->cc_loss_random, s->cc_compete, s->cc_stalls,
		s->cc_rto_spurious);
	HASH_ITER(hh, ep->pep.peers, peer, tmp) {
		if (peer->via_shm || !peer->cc.base_us)
			continue;
		if (n++ == COUR_CC_PRINT_PEERS)
			break;
		fprintf(stderr, "courier cc %s: peer %s cwnd %u ssthresh %u base_rtt_us %u "
			"qdelay_us %u srtt_us %" PRIu64 " mode %s\n", me,
			cour_addr_str(&peer->addr, str, sizeof(str)), peer->cc.cwnd,
			peer->cc.ssthresh, peer->cc.base_us, peer->cc.qdelay_us, peer->srtt_us,
			mode[peer->cc.mode]);
	}
}

static void cour_ep_print_stats(struct cour_ep *ep)
{
	struct fi_courier_stats s;
	char str[80];

	cour_ep_stats_locked(ep, &s);
	fprintf(stderr, "courier stats %s: tx_pkts %" PRIu64 " rx_pkts %" PRIu64
		" tx_bytes %" PRIu64 " rx_bytes %" PRIu64 " tx_msgs %" PRIu64 " rx_msgs %" PRIu64
		" acks_sent %" PRIu64 " acks_rcvd %" PRIu64 " retrans_timeout %" PRIu64
		" retrans_fast %" PRIu64 " dup %" PRIu64 " ooo %" PRIu64 " drop_window %" PRIu64
		" drop_bad_hdr %" PRIu64 " drop_stale %" PRIu64 " drop_no_buf %" PRIu64
		" credit_stalls %" PRIu64 " window_stalls %" PRIu64 " unexpected %" PRIu64
		" unreachable %" PRIu64 " peer_resets %" PRIu64 " srtt_us %" PRIu64
		" fault_drop %" PRIu64 " fault_dup %" PRIu64 " fault_corrupt %" PRIu64
		" fault_reorder %" PRIu64 " rx_in_place %" PRIu64 " peers_evicted %" PRIu64
		" peer_silences %" PRIu64 " unexp_credit_early %" PRIu64 " linger_waits %" PRIu64
		" linger_lost %" PRIu64 " peers_refused %" PRIu64 "\n",
		cour_addr_str(&ep->pep.wire.addr, str, sizeof(str)), s.tx_pkts, s.rx_pkts, s.tx_bytes,
		s.rx_bytes, s.tx_msgs, s.rx_msgs, s.acks_sent, s.acks_rcvd, s.retrans_timeout,
		s.retrans_fast, s.dup_rcvd, s.ooo_rcvd, s.drop_window, s.drop_bad_hdr,
		s.drop_stale_session, s.drop_no_buf, s.credit_stalls, s.window_stalls,
		s.unexpected_msgs, s.peers_unreachable, s.peers_reset, s.rtt_srtt_us,
		s.fault_drops, s.fault_dups, s.fault_corrupts, s.fault_reorders, s.rx_in_place,
		s.peers_evicted, s.peer_silences, s.unexp_credit_early, s.linger_waits,
		s.linger_lost, s.peers_refused);
	if (ep->pep.shm_ring)
		fprintf(stderr, "courier stats %s: shm_peers %" PRIu64 " shm_tx_pkts %" PRIu64
			" shm_rx_pkts %" PRIu64 " shm_ring_full %" PRIu64 " shm_doorbells %" PRIu64
			" shm_single_copy_bytes %" PRIu64 " shm_copy_fallbacks %" PRIu64
			" shm_reclaimed %" PRIu64 " shm_rma_split %" PRIu64
			" shm_grants_revoked %" PRIu64 " shm_rma_pushed %" PRIu64
			" shm_push_notices %" PRIu64 " shm_short %" PRIu64 " shm_box %" PRIu64
			" shm_box_rx %" PRIu64 " shm_box_broken %" PRIu64 "\n", str, s.shm_peers,
			s.shm_tx_pkts,
			s.shm_rx_pkts, s.shm_ring_full, s.shm_doorbells, s.shm_single_copy_bytes,
			s.shm_copy_fallbacks, cour_shm_ring_reclaimed(ep->pep.shm_ring),
			s.shm_rma_split, s.shm_grants_revoked, s.shm_rma_pushed,
			s.shm_push_notices, s.shm_short, s.shm_box, s.shm_box_rx, s.shm_box_broken);
	if (ep->pep.wire.base == &cour_udp_wire)
		fprintf(stderr, "courier stats %s: udp_gso %" PRIu64 " udp_gro %" PRIu64
			" udp_gso_sends %" PRIu64 " udp_gso_segs %" PRIu64 " udp_gro_trains %" PRIu64
			" udp_gro_segs %" PRIu64 " rx_sock_drops %" PRIu64 " udp_packs %" PRIu64
			" udp_packed %" PRIu64 " udp_packs_rcvd %" PRIu64 "\n", str, s.udp_gso,
			s.udp_gro, s.udp_gso_sends, s.udp_gso_segs, s.udp_gro_trains,
			s.udp_gro_segs, s.rx_sock_drops, s.udp_packs, s.udp_packed,
			s.udp_packs_rcvd);
	fprintf(stderr, "courier stats %s: peers %" PRIu64 " win_bytes %" PRIu64 " win_grows %"
		PRIu64 " win_frees %" PRIu64 "\n", str, s.peers, s.win_bytes, s.win_grows,
		s.win_frees);
	fprintf(stderr, "courier stats %s: unexp_bytes %" PRIu64 " unexp_peak %" PRIu64
		" credit_rts %" PRIu64 " credit_grants %" PRIu64 " credit_refused %" PRIu64
		" credit_repaid %" PRIu64 " rts_adopted %" PRIu64 " retrans_probe %" PRIu64 "\n",
		str, s.unexp_bytes, s.unexp_peak, s.credit_rts, s.credit_grants, s.credit_refused,
		s.credit_repaid, s.rts_adopted, s.retrans_probe);
	if (cour_params.cc && ep->pep.wire.base == &cour_udp_wire)
		cour_ep_print_cc(ep, &s, str);
	if (ep->pep.wire.mac || s.drop_bad_mac)
		fprintf(stderr, "courier stats %s: authenticated %d drop_bad_mac %" PRIu64
			" drop_replay %" PRIu64 "\n", str, ep->pep.wire.mac != NULL,
			s.drop_bad_mac, s.drop_replay);
	if (ep->pep.wire.mac)
		fprintf(stderr, "courier stats %s: session_challenges %" PRIu64 " session_proofs %"
			PRIu64 " drop_unproven %" PRIu64 "\n", str, s.session_challenges,
			s.session_proofs, s.drop_unproven);
}

/* ---- open and close ---- */

/*
 * Data accepted is data delivered: an inject that returned, or a send the application did
 * not wait for, still goes out after fi_close (MPICH finalizes right after its injects).
 * Progress until every peer has taken everything (or was found dead, which fails it), at
 * most linger_ms; what is left then is logged with its peer and counted.
 */
static bool cour_ep_tx_pending(const struct cour_ep *ep)
{
	struct cour_peer *peer, *tmp;

	HASH_ITER(hh, ep->pep.peers, peer, tmp)
		if (cour_peer_tx_pending(peer))
			return true;
	return false;
}

static void cour_ep_linger(struct cour_ep *ep)
{
	struct cour_domain *dom = ep->domain;
	uint64_t deadline = cour_now_us() + (uint64_t)cour_params.linger_ms * 1000;
	struct cour_peer *peer, *tmp;
	char str[80], me[80];

	if (!cour_ep_tx_pending(ep))
		return;
	ep->pep.stats.linger_waits++;
	for (;;) {
		if (cour_now_us() >= deadline)
			break;
		cour_domain_progress_locked(dom);
		if (!cour_ep_tx_pending(ep))
			return;
		cour_lock_release(&dom->lock);
		cour_domain_wait(dom, -1, 10);
		cour_lock_acquire(&dom->lock);
	}
	HASH_ITER(hh, ep->pep.peers, peer, tmp) {
		size_t n = cour_peer_tx_pending(peer);

		if (!n)
			continue;
		ep->pep.stats.linger_lost += n;
		COUR_WARN(FI_LOG_EP_CTRL, "endpoint %s closed with %zu operation(s) to %s not "
			  "delivered after FI_COURIER_LINGER=%d ms: they are lost\n",
			  cour_addr_str(&ep->pep.wire.addr, me, sizeof(me)), n,
			  cour_addr_str(&peer->addr, str, sizeof(str)), cour_params.linger_ms);
	}
}

static int cour_ep_close(struct fid *fid)
{
	return cour_ep_close_common(COUR_CONTAINER_OF(fid, struct cour_ep, ep_fid.fid));
}

int cour_ep_close_common(struct cour_ep *ep)
{
	struct cour_domain *dom = ep->domain;

	/* FI_MR_ENDPOINT regions bound to us (cour_mr.c), aliases and a scalable endpoint's
	 * contexts hold a reference: they close first */
	if (cour_ref_get(&ep->refcnt) > 0) {
		COUR_WARN(FI_LOG_EP_CTRL, "endpoint still used by %d memory region(s), aliases "
			  "or contexts\n", cour_ref_get(&ep->refcnt));
		return -FI_EBUSY;
	}
	cour_lock_acquire(&dom->lock);
	cour_trig_drop_ep_locked(dom, ep);
	if (ep->pep.enabled) {
		cour_ep_linger(ep);
		DL_DELETE2(dom->pdom.peps, &ep->pep, pdom_prev, pdom_next);
	}
	if (ep->pep.type == FI_EP_MSG)
		cour_cm_ep_close(ep);     /* after the linger: the data goes first */
	ep->pep.enabled = false;
	cour_peer_free_all(&ep->pep);
	cour_msg_ep_close(&ep->pep);
	if (cour_params.stats)
		cour_ep_print_stats(ep);
	cour_shm_ep_close(&ep->pep);
	ep->pep.wire.ops->close(&ep->pep.wire);
	cour_sink_release(&ep->b);
	if (ep->av)
		cour_ref_dec(&ep->av->refcnt);
	cour_srx_unbind(ep);
	cour_lock_release(&dom->lock);

	cour_pep_free(&ep->pep);
	fi_freeinfo(ep->info);
	cour_ref_dec(&dom->refcnt);
	free(ep->tx_ctx);
	free(ep->rx_ctx);
	free(ep);
	return 0;
}

int cour_ep_open(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep_fid,
		 void *context)
{
	return cour_ep_open_common(domain, info, ep_fid, context, false);
}

int cour_ep_open_common(struct fid_domain *domain, struct fi_info *info,
			struct fid_ep **ep_fid, void *context, bool scalable)
{
	struct cour_domain *dom = COUR_CONTAINER_OF(domain, struct cour_domain, domain_fid);
	struct cour_addr want;
	struct cour_ep *ep;
	int ret;

	/* an info edited after fi_getinfo may ask for what courier does not do: say so now */
	ret = cour_info_check(info);
	if (ret)
		return ret;
	ret = cour_attr_bind_addr(info, &want);
	if (ret)
		return ret;
	if (!scalable && info->ep_attr &&
	    ((info->ep_attr->tx_ctx_cnt > 1 && info->ep_attr->tx_ctx_cnt != FI_SHARED_CONTEXT) ||
	     (info->ep_attr->rx_ctx_cnt > 1 && info->ep_attr->rx_ctx_cnt != FI_SHARED_CONTEXT))) {
		COUR_WARN(FI_LOG_EP_CTRL, "fi_endpoint with %zu transmit and %zu receive contexts: "
			  "more than one is a scalable endpoint (fi_scalable_ep)\n",
			  info->ep_attr->tx_ctx_cnt, info->ep_attr->rx_ctx_cnt);
		return -FI_EINVAL;
	}
	ep = calloc(1, sizeof(*ep));
	if (!ep)
		return -FI_ENOMEM;
	ep->info = fi_dupinfo(info);
	if (!ep->info) {
		free(ep);
		return -FI_ENOMEM;
	}
	ep->domain = dom;
	ep->pep.type = info->ep_attr->type;
	ep->pep.caps = info->caps;
	ep->pep.tx_op_flags = info->tx_attr ? info->tx_attr->op_flags : 0;
	ep->pep.rx_op_flags = info->rx_attr ? info->rx_attr->op_flags : 0;
	ep->pep.min_multi_recv = COUR_MIN_MULTI_RECV_DEFAULT;
	if (info->ep_attr->type == FI_EP_MSG && info->handle &&
	    info->handle->fclass == FI_CLASS_PEP) {
		ret = cour_cm_pep_give_addr(info->handle, &want);
		if (ret)
			goto err_free;
	} else if (info->ep_attr->type == FI_EP_MSG && info->handle &&
		   cour_cm_ep_from_request(&ep->conn, info->handle)) {
		COUR_WARN(FI_LOG_EP_CTRL, "info->handle is no pending connection request\n");
		ret = -FI_EINVAL;
		goto err_free;
	}
	if (info->ep_attr->type == FI_EP_MSG) {
		ep->pep.av_gen = &ep->conn.gen;
		if (ep->conn.conn_id)      /* accepting: share the listener's port */
			ep->pep.wire_peer = &ep->conn.peer;
	}
	/* its own secret, else the domain's (read by cour_pep_open only) */
	if (info->ep_attr->auth_key_size) {
		ret = cour_auth_key_ok(info->ep_attr->auth_key_size, "ep_attr->auth_key");
		if (ret)
			goto err_free;
		ep->pep.auth_key = info->ep_attr->auth_key;
		ep->pep.auth_key_len = info->ep_attr->auth_key_size;
	} else {
		ep->pep.auth_key = dom->auth_key;
		ep->pep.auth_key_len = dom->auth_key_len;
	}
	ret = cour_pep_open(&ep->pep, &dom->pdom,
			    info->ep_attr->type == FI_EP_MSG ? &cour_ep_msg_up : &cour_ep_up, &want);
	ep->pep.auth_key = NULL;
	if (ret)
		goto err_free;

	ep->ep_fid.fid.fclass = FI_CLASS_EP;
	ep->ep_fid.fid.context = context;
	ep->ep_fid.fid.ops = &cour_ep_fi_ops;
	ep->ep_fid.ops = &cour_ep_ops;
	ep->ep_fid.cm = ep->pep.type == FI_EP_MSG ? &cour_msg_cm_ops : &cour_cm_ops;
	ep->ep_fid.msg = &cour_msg_ops;   /* the generic path tells RDM from DGRAM */
	ep->ep_fid.tagged = &cour_tagged_ops;
	/* one-sided operations need the reliable engine */
	ep->ep_fid.rma = ep->pep.type != FI_EP_DGRAM ? &cour_rma_ops : &cour_no_rma_ops;
	ep->ep_fid.atomic = ep->pep.type != FI_EP_DGRAM ? &cour_atomic_ops : &cour_no_atomic_ops;
	cour_ref_inc(&dom->refcnt);
	*ep_fid = &ep->ep_fid;
	return 0;

err_free:
	fi_freeinfo(ep->info);
	free(ep);
	return ret;
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

static struct fi_ops_ep cour_ep_ops = {
	.size = sizeof(struct fi_ops_ep),
	.cancel = cour_ep_cancel,
	.getopt = cour_ep_getopt_fid,
	.setopt = cour_ep_setopt_fid,
	.tx_ctx = cour_ep_no_tx_ctx,
	.rx_ctx = cour_ep_no_rx_ctx,
	.rx_size_left = cour_ep_rx_size_left,
	.tx_size_left = cour_ep_tx_size_left,
};

static struct fi_ops_cm cour_msg_cm_ops = {
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

static struct fi_ops_cm cour_cm_ops = {
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
