/*
 * Message protocols and matching, for fi_msg and fi_tagged alike.
 *
 *   eager       (<= eager_max): the message goes out at once in one or more EAGER packets; the
 *               receiver places it in a matching posted buffer, or keeps it as unexpected in a
 *               buffer of its own (bounded by the sender's credits).
 *   rendezvous  (> eager_max): an RTS announces the message; once a receive matches it the
 *               receiver answers CTS with how much it accepts, and RDATA packets land straight
 *               in the posted buffer.
 * Packets reach cour_msg_handle in sequence order per peer, so an eager message's fragments
 * arrive in order and back to back: one reassembly in progress per peer (peer->rx_cur).
 */
#include "proto/cour_engine.h"
#include "proto/cour_msg_int.h"

#include <stdlib.h>

/* ---- completions ---- */

void cour_msg_report_rx(struct cour_pep *ep, struct cour_rxe *rxe, uint64_t flags, size_t len,
			size_t olen, void *buf, uint64_t tag, uint64_t data, fi_addr_t src,
			int err, int prov_errno)
{
	struct cour_cq_entry e = {
		.op_context = rxe->context,
		.flags = flags,
		.len = len,
		.buf = buf,
		.data = data,
		.tag = tag,
		.src = src,
	};

	if (err || olen) {
		ep->up->rx_done(ep, rxe->q, &e, rxe->op_flags | flags, err ? err : FI_ETRUNC,
				err ? prov_errno : COUR_E_TRUNC, olen);
		return;
	}
	ep->up->rx_done(ep, rxe->q, &e, rxe->op_flags | flags, 0, 0, 0);
	ep->stats.rx_msgs++;
}

static void cour_rxe_free(struct cour_pep *ep, struct cour_rxe *rxe)
{
	(void)ep;
	cour_pool_put(&rxe->q->rxe_pool, rxe);
}

/* A matched message is complete (or failed): report it, release its receive. */
static void cour_rxmsg_finish(struct cour_pep *ep, struct cour_rxmsg *m, int err, int prov_errno)
{
	struct cour_rxe *rxe = m->rxe;
	bool tagged = m->hdr_flags & COUR_F_TAGGED;
	uint64_t flags = FI_RECV | (tagged ? FI_TAGGED : FI_MSG);
	size_t olen = m->total_len > m->accept_len ? m->total_len - m->accept_len : 0;
	bool multi = rxe->op_flags & FI_MULTI_RECV;
	fi_addr_t src = m->peer ? cour_peer_fi_addr(m->peer) : m->dgram_src;

	if (m->hdr_flags & COUR_F_CQ_DATA)
		flags |= FI_REMOTE_CQ_DATA;
	if (multi) {
		rxe->multi_pending--;
		if (rxe->multi_retired && !rxe->multi_pending)
			flags |= FI_MULTI_RECV;
	}
	cour_msg_report_rx(ep, rxe, flags, m->accept_len, olen,
			 (char *)rxe->iov[0].iov_base + m->slice_off, m->tag,
			 (m->hdr_flags & COUR_F_CQ_DATA) ? m->data : 0, src, err, prov_errno);
	if (!multi || (rxe->multi_retired && !rxe->multi_pending))
		cour_rxe_free(ep, rxe);
	m->rxe = NULL;
}

/* ---- matching ---- */

static bool cour_match(struct cour_pep *ep, const struct cour_rxe *rxe, bool tagged, uint64_t tag,
		       fi_addr_t src)
{
	if (tagged && ((rxe->tag ^ tag) & ~rxe->ignore))
		return false;
	return cour_msg_src_match(ep, rxe->src, src);
}

struct cour_rxe *cour_msg_find_rxe(struct cour_pep *ep, bool tagged, uint64_t tag, fi_addr_t src)
{
	struct cour_rxe *rxe;

	DL_FOREACH(*cour_rxq(ep, tagged), rxe)
		if (cour_match(ep, rxe, tagged, tag, src))
			return rxe;
	return NULL;
}

/* Copy len bytes from src to byte dst_off onwards of iov[0..count) (which holds them). */
static void cour_iov_copy_in(const struct iovec *iov, uint32_t count, uint64_t dst_off,
			     const char *src, size_t len)
{
	for (uint32_t i = 0; i < count && len; i++) {
		size_t l = iov[i].iov_len;
		if (dst_off >= l) {
			dst_off -= l;
			continue;
		}
		size_t take = COUR_MIN(l - dst_off, len);
		memcpy((char *)iov[i].iov_base + dst_off, src, take);
		src += take;
		len -= take;
		dst_off = 0;
	}
}

/* Copy bytes [off, off + len) of a message into the receive it matched, within accept_len. */
static void cour_rx_copy(struct cour_rxmsg *m, uint64_t off, const char *src, size_t len)
{
	if (off >= m->accept_len)
		return;
	cour_iov_copy_in(m->rxe->iov, m->rxe->iov_count, m->slice_off + off, src,
			 COUR_MIN(len, m->accept_len - off));
}

/* A matched RTS|CMA: take the data from the sender's memory ourselves. true: done (CTS|CMA
 * tells the sender); false: the plain rendezvous follows (refused, or a bad address). */
/*
 * Split copy: a big message into one contiguous buffer is copied by both processes at once.
 * The CTS asks the sender to write the second half into our buffer itself (it is ours until
 * the receive completes, so nothing can free it meanwhile), and we pull the first half; its
 * RDATA|CMA, or plain RDATA packets if it cannot, brings the rest. Not for delivery-complete
 * sends: the sender would complete before our half is in.
 * The CTS goes before our pull, so that both copies run at once. A pull refused then (the
 * first one to this peer, or a policy changed since) leaves a hole, [0, split): our DONE says
 * so and the sender fills it too (cour_tx_split_fill). No pull is tried first to find out:
 * where a system call costs a microsecond or two, that probe was a fifth of a 256 KiB
 * ping-pong (docs/performance.md, One host).
 * From COUR_MSG_SPLIT_MIN (128 KiB): there a pull of the whole message took 6.6-8.2 us and
 * halves with the CTS's round trip won, an Open MPI ping-pong 1.1-1.3x.
 * A split message completes only when the sender's half is in, not when it is matched, so a
 * later message of the peer's could complete first: behind an RTS|CMA the sender sends those
 * of this length by single copy too (cour_cma_msg_min), and while a split waits for its half
 * no RTS|CMA of that peer is pulled whole (it splits, or goes plain: its data comes behind).
 */
static bool cour_rx_cma_split(struct cour_peer *peer, struct cour_rxmsg *m,
			      const struct iovec *iov, size_t n)
{
	struct cour_pep *ep = peer->ep;
	struct cour_txe *txe;
	struct iovec first;
	int rc;

	/* (nor while a single copy of ours waits for the peer: it pulls from us meanwhile, as
	 * in a halo exchange, and each side pulling its whole message keeps both busy without
	 * the split's extra round trip: mpi_bench halo 256 KiB, 1.2x) */
	if (n != 1 || m->accept_len < COUR_MSG_SPLIT_MIN || (m->hdr_flags & COUR_F_DC) ||
	    !peer->peer_pulls || peer->rts_cma)
		return false;
	txe = cour_ctrl_txe(peer, COUR_PKT_CTS, m->msg_id, ep->next_rx_id, COUR_F_CMA);
	if (!txe)
		return false;
	m->split = (m->accept_len / 2) & ~(uint64_t)4095;
	ep->stats.shm_split_rx++;
	m->rx_id = ep->next_rx_id++;
	cour_rdv_add(ep, m);
	txe->msg_len = m->accept_len;
	txe->built = m->split;                      /* the header's offset: where it starts */
	txe->raddr = (uint64_t)(uintptr_t)iov[0].iov_base + m->split;
	cour_peer_enqueue(peer, txe);               /* in its ring before we start copying */
	cour_msg_credit_return(peer, m);            /* the RTS itself is consumed */
	first.iov_base = iov[0].iov_base;
	first.iov_len = m->split;
	rc = cour_cma_pull(peer, &first, 1, m->cma_addr, m->split);
	/* refused: the sender writes our part too, and says so with an RDATA|CMA at 0 */
	m->split_hole = rc == -FI_EPERM;
	m->hole_filled = 0;
	m->split_failed = rc && !m->split_hole;
	m->received = m->split;
	/* done with the sender's buffer: its send may complete (it waits for this) */
	cour_send_ctrl(peer, COUR_PKT_DONE, m->msg_id, m->split_hole ? COUR_E_CMA_REFUSED : 0, 0);
	return true;
}

static bool cour_rx_cma_pull(struct cour_peer *peer, struct cour_rxmsg *m)
{
	struct iovec iov[COUR_IOV_MAX];
	size_t n;

	if (!(m->hdr_flags & COUR_F_CMA) || !peer->shm || peer->cma_off || m->discard)
		return false;
	/* the receive's bytes for m: [slice_off, slice_off + accept_len) of rxe */
	n = cour_iov_slice(m->rxe->iov, m->rxe->iov_count, m->slice_off, m->accept_len, iov);
	if (cour_rx_cma_split(peer, m, iov, n))
		return true;
	if (peer->rx_split_pending)
		return false;           /* it would complete before the split ahead of it */
	if (m->accept_len && cour_cma_pull(peer, iov, n, m->cma_addr, m->accept_len))
		return false;
	m->received = m->accept_len;
	cour_send_ctrl_flags(peer, COUR_PKT_CTS, m->msg_id, 0, m->accept_len, COUR_F_CMA);
	cour_msg_credit_return(peer, m);      /* the RTS itself is consumed */
	cour_rxmsg_finish(peer->ep, m, 0, 0);
	cour_pool_put(&peer->ep->rxmsg_pool, m);
	return true;
}

/* Give message m the receive rxe: reserve its space and move any data already here. A
 * rendezvous message is cleared to send; an eager one completes in cour_rx_eager_data. */
static bool cour_bind(struct cour_pep *ep, struct cour_rxmsg *m, struct cour_rxe *rxe)
{
	struct cour_peer *peer = m->peer;
	bool retired = true;

	cour_unexp_settle(ep, m);
	m->rxe = rxe;
	if (rxe->op_flags & FI_MULTI_RECV) {
		size_t space = rxe->iov[0].iov_len - rxe->multi_off;
		m->slice_off = rxe->multi_off;
		m->accept_len = COUR_MIN(m->total_len, space);
		rxe->multi_off += m->accept_len;
		rxe->multi_pending++;
		if (rxe->iov[0].iov_len - rxe->multi_off < ep->min_multi_recv) {
			rxe->multi_retired = true;
			DL_DELETE(*cour_rxq(ep, m->hdr_flags & COUR_F_TAGGED), rxe);
		} else {
			retired = false;
		}
	} else {
		m->slice_off = 0;
		m->accept_len = COUR_MIN(m->total_len, rxe->buf_len);
		DL_DELETE(*cour_rxq(ep, m->hdr_flags & COUR_F_TAGGED), rxe);
	}

	if (m->rts && cour_rx_cma_pull(peer, m))
		return retired;
	if (m->rts) {
		m->rx_id = ep->next_rx_id++;
		cour_rdv_add(ep, m);
		cour_send_ctrl(peer, COUR_PKT_CTS, m->msg_id, m->rx_id, m->accept_len);
		cour_msg_credit_return(peer, m);      /* the RTS itself is consumed */
		return retired;
	}
	if (m->ubuf) {
		cour_rx_copy(m, 0, m->ubuf, m->received);
		free(m->ubuf);
		m->ubuf = NULL;
	}
	return retired;
}

/* An eager message that has all its bytes and a receive: report it and consume the credit. */
static void cour_rx_eager_done(struct cour_peer *peer, struct cour_rxmsg *m)
{
	struct cour_pep *ep = peer->ep;

	if (m->hdr_flags & COUR_F_DC)
		cour_send_ctrl(peer, COUR_PKT_DONE, m->msg_id, 0, 0);
	if (m->nomem)
		cour_rxmsg_finish(ep, m, FI_ENOMEM, COUR_E_REMOTE);
	else
		cour_rxmsg_finish(ep, m, 0, 0);
	cour_msg_credit_return(peer, m);
	cour_pool_put(&ep->rxmsg_pool, m);
}

/* Bytes of an eager message, in order: into the receive if matched, else the unexpected copy
 * (unless the wire read them there: cour_msg_eager_dest). */
static void cour_rx_eager_data(struct cour_peer *peer, struct cour_rxmsg *m,
			       const char *payload, size_t plen)
{
	if (!peer->ep->rx_placed) {
		if (m->rxe)
			cour_rx_copy(m, m->received, payload, plen);
		else if (m->ubuf)
			memcpy(m->ubuf + m->received, payload, plen);
	}
	m->received += plen;
	if (m->received < m->total_len) {
		peer->rx_cur = m;
		return;
	}
	if (peer->rx_cur == m)
		peer->rx_cur = NULL;
	if (m->rxe) {
		cour_rx_eager_done(peer, m);
	} else if (m->discard) {    /* discarded while still arriving */
		cour_msg_credit_return(peer, m);
		free(m->ubuf);
		cour_pool_put(&peer->ep->rxmsg_pool, m);
	}
	/* else: unexpected and complete, it waits in its queue for a receive */
}

bool cour_msg_bind_unexp(struct cour_pep *ep, struct cour_rxmsg *m, struct cour_rxe *rxe)
{
	bool rts = m->rts, retired;

	retired = cour_bind(ep, m, rxe);  /* (a single-copy rendezvous finishes m in there) */
	if (!rts && !m->adopting && m->received == m->total_len)
		cour_rx_eager_done(m->peer, m);
	/* else: rendezvous cleared to send, or the rest of an eager message is on its way */
	return retired;
}

void cour_msg_bind_dgram(struct cour_pep *ep, struct cour_rxmsg *m, struct cour_rxe *rxe,
			 const char *payload, fi_addr_t src)
{
	m->dgram_src = src;
	cour_bind(ep, m, rxe);
	cour_rx_copy(m, 0, payload, m->received);
	cour_rxmsg_finish(ep, m, 0, 0);
}

void cour_msg_fail_matched(struct cour_pep *ep, struct cour_rxmsg *m, int err, int prov_errno)
{
	if (m->rxe)
		cour_rxmsg_finish(ep, m, err, prov_errno);
	free(m->ubuf);
	cour_pool_put(&ep->rxmsg_pool, m);
}

void cour_msg_discard(struct cour_pep *ep, struct cour_rxmsg *m, bool consumed)
{
	struct cour_peer *peer = m->peer;

	DL_DELETE(*(m->hdr_flags & COUR_F_TAGGED ? &m->q->utag : &m->q->umsg), m);
	cour_unexp_settle(ep, m);
	free(m->ubuf);
	m->ubuf = NULL;
	if (!consumed) {
		if (peer->rx_cur == m)
			peer->rx_cur = NULL;
		if (m->adopting)
			cour_rdv_del(ep, m);
		cour_pool_put(&ep->rxmsg_pool, m);
		return;
	}
	m->discard = true;
	if (m->rts) {
		/* the sender completes once it has "sent" the zero bytes we accept */
		m->rx_id = ep->next_rx_id++;
		m->accept_len = 0;
		cour_rdv_add(ep, m);
		cour_send_ctrl(peer, COUR_PKT_CTS, m->msg_id, m->rx_id, 0);
		cour_msg_credit_return(peer, m);
		return;
	}
	if (peer->rx_cur == m || m->adopting)
		return;             /* finishes in cour_rx_eager_data or cour_rx_adopted_data */
	cour_msg_credit_return(peer, m);
	cour_pool_put(&ep->rxmsg_pool, m);
}

/* ---- receive side: packets ---- */

/*
 * An unexpected RTS that the sender sent only for lack of credit units (it says WANT;
 * cour_credit.c) is cleared at once into a buffer of ours if we can afford it: such sends
 * still complete before their receive is posted, as eager ones would (two ranks that both
 * send, then both receive, rely on that). From here on it is an eager message whose bytes
 * come as RDATA. Not a rendezvous of its own (a single copy would complete it the moment it
 * is matched, before one cleared earlier and still arriving), nor delivery complete: placed
 * in our buffer is not delivered.
 * An RTS of eager size left as it is (not affordable, or plain: the sender took its single
 * copy away behind a short one) holds the peer's later ones back until a receive takes it:
 * adopted, a later one would be whole when its receive is posted and complete at once, while
 * the first one's data only then starts to come, out of the order they were sent in. One by
 * single copy holds nothing back: it completes when matched (split, before any later one of
 * its length: cour_rx_cma_split).
 */
static void cour_rts_adopt(struct cour_peer *peer, struct cour_rxmsg *m)
{
	struct cour_pep *ep = peer->ep;

	if (m->total_len > cour_params.eager_max)
		return;
	if (!(m->hdr_flags & COUR_F_WANT) || peer->rx_rts_held || (m->hdr_flags & COUR_F_DC) ||
	    !cour_unexp_affordable(ep, sizeof(*m) + m->total_len) ||
	    !(m->ubuf = malloc(m->total_len ? m->total_len : 1))) {
		if (!(m->hdr_flags & COUR_F_CMA)) {
			m->held = true;         /* (until it leaves the queue: cour_unexp_settle) */
			peer->rx_rts_held++;
		}
		return;
	}
	m->rts = false;
	m->adopting = true;
	m->accept_len = m->total_len;
	m->rx_id = ep->next_rx_id++;
	cour_rdv_add(ep, m);
	cour_send_ctrl(peer, COUR_PKT_CTS, m->msg_id, m->rx_id, m->total_len);
	ep->stats.rts_adopted++;
}

/* RDATA of an adopted message, in order: into its receive once it has one, else our copy. */
static void cour_rx_adopted_data(struct cour_peer *peer, struct cour_rxmsg *m,
				 const struct cour_pkt_hdr *hdr, const char *payload, size_t plen)
{
	struct cour_pep *ep = peer->ep;

	if (hdr->msg.offset != m->received || plen > m->total_len - m->received ||
	    (hdr->base.flags & COUR_F_CMA)) {
		COUR_DROP_BAD(ep, "RDATA that does not continue an adopted message");
		return;
	}
	if (!ep->rx_placed) {           /* (else the wire read it into place) */
		if (m->rxe)
			cour_rx_copy(m, m->received, payload, plen);
		else if (m->ubuf)
			memcpy(m->ubuf + m->received, payload, plen);
	}
	m->received += plen;
	if (m->received < m->total_len)
		return;
	/* all in (a message of 0 bytes too: its one empty RDATA came) */
	cour_rdv_del(ep, m);
	m->adopting = false;
	if (m->rxe) {
		cour_rx_eager_done(peer, m);
	} else if (m->discard) {
		cour_msg_credit_return(peer, m);
		free(m->ubuf);
		cour_pool_put(&ep->rxmsg_pool, m);
	}
	/* else: unexpected and complete, it waits in its queue for a receive */
}

static void cour_handle_new_in(struct cour_peer *peer, const struct cour_pkt_hdr *hdr,
			       const char *payload, size_t plen)
{
	struct cour_pep *ep = peer->ep;
	bool tagged = hdr->base.flags & COUR_F_TAGGED;
	bool rts = hdr->base.type == COUR_PKT_RTS;
	struct cour_rxmsg *m;
	struct cour_rxe *rxe;

	if (!rts && (hdr->msg.offset != 0 || plen > hdr->msg.total_len ||
		     hdr->msg.total_len > COUR_EAGER_LIMIT)) {
		COUR_DROP_BAD(ep, "bad eager first fragment");
		return;
	}
	if (rts && hdr->msg.total_len > COUR_MAX_MSG_SIZE) {
		COUR_DROP_BAD(ep, "RTS longer than max_msg_size");
		return;
	}
	/* a sender may start only what we granted: one that ignores the grant would make us
	 * hold unbounded unexpected data */
	if (!cour_credit_admit(peer, hdr->base.type, hdr->msg.total_len)) {
		COUR_DROP_BAD(ep, "message beyond the credits granted");
		return;
	}
	if (rts && (hdr->base.flags & COUR_F_WANT))
		cour_credit_want(peer, hdr->msg.total_len);
	m = cour_pool_get(&ep->rxmsg_pool);
	if (!m) {
		COUR_WARN(FI_LOG_EP_DATA, "out of memory for a message: dropped\n");
		return;
	}
	memset(m, 0, sizeof(*m));
	m->q = ep->rxq;
	m->units = cour_credit_cost(hdr->base.type, hdr->msg.total_len);
	m->session = peer->local_session;
	m->peer = peer;
	m->msg_id = hdr->msg.msg_id;
	m->hdr_flags = hdr->base.flags;
	m->rts = rts;
	m->tag = hdr->msg.tag;
	m->data = hdr->msg.data;
	m->total_len = hdr->msg.total_len;
	if (rts && (hdr->base.flags & COUR_F_CMA))
		m->cma_addr = hdr->msg.offset;

	rxe = cour_msg_find_rxe(ep, tagged, m->tag, cour_peer_fi_addr(peer));
	if (rxe) {
		cour_bind(ep, m, rxe);
	} else {
		ep->stats.unexpected_msgs++;
		if (rts)
			cour_rts_adopt(peer, m);
		else if (m->total_len) {
			m->ubuf = malloc(m->total_len);
			if (!m->ubuf) {
				COUR_WARN(FI_LOG_EP_DATA, "out of memory for an unexpected "
					  "message of %" PRIu64 " bytes\n", m->total_len);
				m->nomem = true;
			}
		}
		DL_APPEND(*(tagged ? &ep->rxq->utag : &ep->rxq->umsg), m);
		cour_unexp_add(peer, m);
	}
	if (!rts)
		cour_rx_eager_data(peer, m, payload, plen);
}

/* A SHORT message (one packet outside the sequence, cour_peer_rx.c), or an EAGER one of one
 * packet, for which a plain receive is posted: what cour_handle_new_in, cour_bind and
 * cour_rx_eager_done would do for it, without a record. false, having changed nothing:
 * anything else (no receive yet, a multi-receive buffer, receive contexts, delivery
 * complete, RMA ordering to keep) takes the whole path. */
bool cour_msg_short_posted(struct cour_peer *peer, const struct cour_pkt_hdr *hdr,
			   const char *payload, size_t plen)
{
	struct cour_pep *ep = peer->ep;
	bool tagged = hdr->base.flags & COUR_F_TAGGED;
	struct cour_rxe *rxe;

	peer->msg_sent = false;         /* (a message from the peer, whichever way it goes) */
	if (COUR_UNLIKELY(!cour_msg_plain_path(peer, hdr) || (hdr->base.flags & COUR_F_DC)))
		return false;
	fi_addr_t src = cour_peer_fi_addr(peer);
	rxe = cour_msg_find_rxe(ep, tagged, hdr->msg.tag, src);
	if (!rxe || (rxe->op_flags & FI_MULTI_RECV) ||
	    !cour_credit_admit(peer, COUR_PKT_EAGER, plen))
		return false;

	/* what cour_rx_copy, cour_rxmsg_finish and cour_msg_credit_return do for a message
	 * that is all here, of this session, and not counted as unexpected: no record */
	size_t accept = COUR_MIN(plen, rxe->buf_len);
	uint64_t flags = FI_RECV | (tagged ? FI_TAGGED : FI_MSG);
	uint64_t data = 0;

	DL_DELETE(*cour_rxq(ep, tagged), rxe);
	if (ep->rx_placed)      /* (the wire read it there: cour_msg_eager_dest) */
		;
	else if (COUR_LIKELY(rxe->iov_count == 1))
		memcpy(rxe->iov[0].iov_base, payload, accept);
	else
		cour_iov_copy_in(rxe->iov, rxe->iov_count, 0, payload, accept);
	if (hdr->base.flags & COUR_F_CQ_DATA) {
		flags |= FI_REMOTE_CQ_DATA;
		data = hdr->msg.data;
	}
	cour_msg_report_rx(ep, rxe, flags, accept, plen - accept, rxe->iov[0].iov_base,
			   hdr->msg.tag, data, src, 0, 0);
	cour_rxe_free(ep, rxe);
	cour_peer_credit_return(peer, cour_credit_cost(COUR_PKT_EAGER, plen));
	return true;
}

/* The queue a new message goes to: the endpoint's (an endpoint that is not scalable has one:
 * a context index is ignored), or on a scalable endpoint the receive context its sender
 * named (fi_rx_addr; context 0 when it named none). NULL: no such context open here. */
static struct cour_rxq *cour_msg_rxq_for(struct cour_pep *ep, const struct cour_pkt_hdr *hdr)
{
	uint32_t i = (hdr->base.flags & COUR_F_RXCTX) ? hdr->msg.rx_id : 0;
	struct cour_rxq *q;

	if (COUR_LIKELY(!ep->nrxq))
		return ep->rxq;
	q = i < ep->nrxq ? ep->rxqs[i] : NULL;
	return q && !q->closed ? q : NULL;
}

/* A message's first packet: matched and queued in the queue it names. One for a receive
 * context that is not open is taken as unexpected into the endpoint's own queue (a scalable
 * endpoint posts nothing there) and discarded at once, as FI_DISCARD would: its data is
 * dropped as it comes, its credit returned, a rendezvous sender answered; the session goes
 * on. The sender is not told (its send completes); the target logs it. */
static void cour_handle_new(struct cour_peer *peer, const struct cour_pkt_hdr *hdr,
			    const char *payload, size_t plen)
{
	struct cour_pep *ep = peer->ep;
	struct cour_rxq *q = cour_msg_rxq_for(ep, hdr), *saved = ep->rxq;
	bool tagged = hdr->base.flags & COUR_F_TAGGED;
	struct cour_rxmsg **uq, *tail;

	peer->msg_sent = false;
	/* a whole message in one packet, for a plain receive that waits: as a SHORT, no record */
	if (hdr->base.type == COUR_PKT_EAGER && plen == hdr->msg.total_len &&
	    cour_msg_short_posted(peer, hdr, payload, plen))
		return;
	if (COUR_LIKELY(q)) {
		ep->rxq = q;
		cour_handle_new_in(peer, hdr, payload, plen);
		ep->rxq = saved;
		return;
	}
	COUR_WARN(FI_LOG_EP_DATA, "message for receive context %u, which is not open here: "
		  "discarded\n", (hdr->base.flags & COUR_F_RXCTX) ? hdr->msg.rx_id : 0);
	ep->rxq = &ep->own_rxq;
	uq = tagged ? &ep->own_rxq.utag : &ep->own_rxq.umsg;
	tail = *uq ? (*uq)->prev : NULL;
	cour_handle_new_in(peer, hdr, payload, plen);
	if (*uq && (*uq)->prev != tail)
		cour_msg_discard(ep, (*uq)->prev, true);
	ep->rxq = saved;
}

static void cour_handle_more(struct cour_peer *peer, const struct cour_pkt_hdr *hdr,
			     const char *payload, size_t plen)
{
	struct cour_rxmsg *m = peer->rx_cur;

	if (!m || m->msg_id != hdr->msg.msg_id || hdr->msg.offset != m->received ||
	    plen > m->total_len - m->received) {
		COUR_DROP_BAD(peer->ep, "eager fragment does not continue the message in progress");
		return;
	}
	cour_rx_eager_data(peer, m, payload, plen);
}

/* The send waiting for a CTS or DONE. Its own packets are normally acknowledged by then (the
 * answer carries the ACK), but an answer may overtake the ACK of a retransmitted packet. */
static struct cour_txe *cour_find_wait(struct cour_peer *peer, uint32_t msg_id, uint8_t type)
{
	struct cour_txe *txe;

	DL_FOREACH(peer->tx_wait, txe)
		if (txe->msg_id == msg_id && txe->op_type == type)
			return txe;
	DL_FOREACH(peer->tx_inflight, txe)
		if (txe->msg_id == msg_id && txe->op_type == type)
			return txe;
	return NULL;
}

/* The receiver pulls the first half and asks us to write [offset, total_len) into its buffer
 * at raddr: do it, and tell it with a bare RDATA|CMA; or, if we cannot, send that part as
 * plain RDATA from offset (cour_rx_cma_split). */
static void cour_tx_cma_split(struct cour_peer *peer, struct cour_txe *txe,
			      const struct cour_pkt_hdr *hdr)
{
	uint64_t split = hdr->msg.offset, total = hdr->msg.total_len;
	struct iovec iov[COUR_IOV_MAX];
	size_t n;

	if (!(txe->hdr_flags & COUR_F_CMA) || (txe->hdr_flags & COUR_F_DC) || split >= total) {
		COUR_DROP_BAD(peer->ep, "split CTS for a rendezvous that cannot split");
		return;
	}
	txe->hdr_flags &= (uint16_t)~COUR_F_CMA;
	txe->op_type = COUR_PKT_RDATA;
	txe->rx_id = hdr->msg.rx_id;
	txe->total_len = total;
	/* the receiver is reading [0, split) from our buffer meanwhile: the send completes only
	 * with its DONE, whatever happens here */
	txe->split_wait = true;
	txe->split_at = split;
	txe->split_base = hdr->msg.raddr - split;
	n = cour_iov_slice(txe->iov, txe->iov_count, split, total - split, iov);
	if (peer->shm && !peer->cma_off &&
	    cour_cma_push(peer, iov, n, hdr->msg.raddr, total - split) == 0) {
		txe->hdr_flags |= COUR_F_CMA;   /* a bare RDATA|CMA: "written" */
		txe->total_len = split;
	}
	cour_txe_detach_slots(peer, txe);
	DL_DELETE(*txe->list, txe);
	txe->list = NULL;
	txe->built = split;                     /* the receiver has the bytes before */
	cour_peer_enqueue(peer, txe);
}

static void cour_handle_cts(struct cour_peer *peer, const struct cour_pkt_hdr *hdr)
{
	struct cour_txe *txe = cour_find_wait(peer, hdr->msg.msg_id, COUR_PKT_RTS);

	if (!txe || hdr->msg.total_len > txe->msg_len) {
		COUR_DROP_BAD(peer->ep, "CTS for no waiting rendezvous");
		return;
	}
	cour_credit_rts_cleared(peer, txe);
	if ((hdr->base.flags & COUR_F_CMA) && hdr->msg.offset) {
		cour_tx_cma_split(peer, txe, hdr);
		return;
	}
	if (hdr->base.flags & COUR_F_CMA) {
		/* the receiver took the data from our buffer: placed, so complete */
		if (!(txe->hdr_flags & COUR_F_CMA)) {
			COUR_DROP_BAD(peer->ep, "CTS|CMA for a rendezvous that offered none");
			return;
		}
		cour_txe_detach_slots(peer, txe);
		DL_DELETE(*txe->list, txe);
		txe->list = NULL;
		cour_txe_complete(peer->ep, txe, 0, 0);
		return;
	}
	/* RDATA's offset is an offset again, and it wants nothing */
	txe->hdr_flags &= (uint16_t)~(COUR_F_CMA | COUR_F_WANT);
	txe->op_type = COUR_PKT_RDATA;
	txe->rx_id = hdr->msg.rx_id;
	txe->total_len = hdr->msg.total_len;
	cour_txe_requeue(peer, txe);
}

/* Packets of txe still unacknowledged: their slots will release them, but they must not count
 * against what txe builds next, nor reach it once it is gone. */
void cour_txe_detach_slots(struct cour_peer *peer, struct cour_txe *txe)
{
	for (uint32_t s = peer->tx_una; txe->pkts_out && s != peer->tx_next; s++)
		if (cour_txslot(peer, s)->txe == txe) {
			cour_txslot(peer, s)->txe = NULL;
			txe->pkts_out--;
		}
}

void cour_txe_requeue(struct cour_peer *peer, struct cour_txe *txe)
{
	cour_txe_detach_slots(peer, txe);
	DL_DELETE(*txe->list, txe);
	txe->list = NULL;
	txe->built = 0;
	cour_peer_enqueue(peer, txe);
}

static void cour_handle_rdata(struct cour_peer *peer, const struct cour_pkt_hdr *hdr,
			      const char *payload, size_t plen)
{
	struct cour_pep *ep = peer->ep;
	struct cour_rxmsg *m;
	uint32_t id = hdr->msg.rx_id;

	HASH_FIND(hh, ep->rdv_by_id, &id, sizeof(id), m);
	if (m && m->adopting && m->peer == peer) {
		cour_rx_adopted_data(peer, m, hdr, payload, plen);
		return;
	}
	if (m && m->peer == peer && m->split_hole && (hdr->base.flags & COUR_F_CMA) &&
	    hdr->msg.offset == 0 && !plen) {
		/* the sender wrote the part of our half we were refused (or could not) */
		m->split_hole = false;
		m->split_failed = hdr->msg.data != 0;
		goto complete;
	}
	if (m && m->peer == peer && m->split_hole && !(hdr->base.flags & COUR_F_CMA) &&
	    hdr->msg.offset == m->hole_filled && plen <= m->split - hdr->msg.offset) {
		/* ...or, refused too, sends it in packets (in order, below m->received) */
		cour_rx_copy(m, hdr->msg.offset, payload, plen);
		m->hole_filled += plen;
		m->split_hole = m->hole_filled < m->split;
		goto complete;
	}
	if (!m || m->peer != peer || hdr->msg.offset != m->received ||
	    plen > m->accept_len - m->received) {
		COUR_DROP_BAD(ep, "RDATA for no matched rendezvous");
		return;
	}
	if (m->discard) {           /* FI_DISCARD answered with a CTS for nothing */
		cour_rdv_del(ep, m);
		cour_pool_put(&ep->rxmsg_pool, m);
		return;
	}
	if (hdr->base.flags & COUR_F_CMA) {
		/* the sender wrote its half of a split copy into our buffer itself */
		if (!m->split || hdr->msg.offset != m->split || plen) {
			COUR_DROP_BAD(ep, "RDATA|CMA for no split copy");
			return;
		}
		plen = m->accept_len - m->received;
		payload = NULL;
		ep->rx_placed = true;
	}
	if (!peer->ep->rx_placed)       /* (else the wire read it into place) */
		cour_rx_copy(m, m->received, payload, plen);
	m->received += plen;
	if (hdr->base.flags & COUR_F_CMA)
		ep->rx_placed = false;
complete:
	if (m->received < m->accept_len || m->split_hole)
		return;
	cour_rdv_del(ep, m);
	if (COUR_UNLIKELY(m->split_failed))
		cour_rxmsg_finish(ep, m, FI_EIO, COUR_E_REMOTE);
	else
		cour_rxmsg_finish(ep, m, 0, 0);
	cour_pool_put(&ep->rxmsg_pool, m);
}

/* The receiver of a split copy was refused its own half: write [0, split_at) into its buffer
 * too, and tell it (a bare RDATA|CMA at 0; data: failed). If we are refused as well, send
 * that part in plain RDATA packets, from a copy: the send completes now, as the receiver no
 * longer reads our buffer. */
static void cour_tx_split_fill(struct cour_peer *peer, struct cour_txe *txe)
{
	uint64_t len = txe->split_at;
	struct iovec iov[COUR_IOV_MAX];
	struct cour_txe *n = cour_ctrl_txe(peer, COUR_PKT_RDATA, txe->msg_id, txe->rx_id,
					   COUR_F_CMA);
	size_t cnt;
	int rc = -FI_EPERM;

	if (!n)
		return;             /* the receive waits for its peer timeout */
	cnt = cour_iov_slice(txe->iov, txe->iov_count, 0, len, iov);
	if (peer->shm && !peer->cma_off)
		rc = cour_cma_push(peer, iov, cnt, txe->split_base, len);
	n->notice = true;
	n->msg_len = txe->msg_len;
	if (rc == -FI_EPERM && (n->snap = malloc(len))) {
		/* byte i of the message at snap + i: packets carry their message offsets */
		char *to = n->snap;
		for (size_t k = 0; k < cnt; to += iov[k].iov_len, k++)
			memcpy(to, iov[k].iov_base, iov[k].iov_len);
		n->hdr_flags = 0;
		n->iov[0].iov_base = n->snap;
		n->iov[0].iov_len = len;
		n->iov_count = 1;
		n->built = 0;
		n->total_len = len;
		cour_peer_enqueue(peer, n);
		return;
	}
	n->built = 0;                           /* the header's offset... */
	n->total_len = 0;                       /* ...and no payload */
	n->data = rc ? COUR_E_REMOTE : 0;
	cour_peer_enqueue(peer, n);
}

static void cour_handle_done(struct cour_peer *peer, const struct cour_pkt_hdr *hdr)
{
	struct cour_txe *txe = cour_find_wait(peer, hdr->msg.msg_id, COUR_PKT_EAGER);

	if (!txe) {
		/* a split copy's receiver has read its half of our buffer */
		txe = cour_find_wait(peer, hdr->msg.msg_id, COUR_PKT_RDATA);
		if (!txe)
			DL_FOREACH(peer->ctrlq, txe)
				if (txe->msg_id == hdr->msg.msg_id && txe->op_type == COUR_PKT_RDATA)
					break;
		if (txe && txe->split_wait) {
			if (hdr->msg.rx_id == COUR_E_CMA_REFUSED)
				cour_tx_split_fill(peer, txe);
			txe->split_wait = false;
			if (txe->list == &peer->tx_wait) {
				DL_DELETE(peer->tx_wait, txe);
				txe->list = NULL;
				cour_txe_complete(peer->ep, txe, 0, 0);
			} else if (txe->list == &peer->tx_inflight) {
				cour_txe_check_done(peer, txe);
			}
			return;
		}
		txe = NULL;
	}
	if (!txe) {
		COUR_DROP_BAD(peer->ep, "DONE for no waiting send");
		return;
	}
	if (txe->pkts_out)
		return;     /* completes when its packets are acknowledged, see below */
	DL_DELETE(peer->tx_wait, txe);
	txe->list = NULL;
	cour_txe_complete(peer->ep, txe, 0, 0);
}

void cour_msg_handle(struct cour_peer *peer, const struct cour_pkt_hdr *hdr,
		     const char *payload, size_t plen)
{
	if (COUR_UNLIKELY(peer->ctrlq != NULL) && cour_pkt_writes_memory(hdr->base.type))
		cour_rma_order_guard(peer);
	if (hdr->base.type == COUR_PKT_EAGER || hdr->base.type == COUR_PKT_RTS)
		cour_rma_split_guard(peer, NULL, NULL, true);    /* SAW, SAR */
	switch (hdr->base.type) {
	case COUR_PKT_EAGER:
		if (hdr->msg.offset == 0 && !(peer->rx_cur &&
					      peer->rx_cur->msg_id == hdr->msg.msg_id))
			cour_handle_new(peer, hdr, payload, plen);
		else
			cour_handle_more(peer, hdr, payload, plen);
		break;
	case COUR_PKT_RTS:
		cour_handle_new(peer, hdr, payload, 0);
		break;
	case COUR_PKT_CTS:
		cour_handle_cts(peer, hdr);
		break;
	case COUR_PKT_RDATA:
		cour_handle_rdata(peer, hdr, payload, plen);
		break;
	case COUR_PKT_DONE:
		if (hdr->base.flags & COUR_F_CMA)
			cour_rma_split_done_rx(peer, hdr);
		else
			cour_handle_done(peer, hdr);
		break;
	case COUR_PKT_WRITE:
	case COUR_PKT_READ_REQ:
	case COUR_PKT_READ_RESP:
	case COUR_PKT_RMA_RESP:
	case COUR_PKT_ATOMIC:
		cour_rma_handle(peer, hdr, payload, plen);
		break;
	default:
		COUR_DROP_BAD(peer->ep, "unknown message type");
		break;
	}
}
