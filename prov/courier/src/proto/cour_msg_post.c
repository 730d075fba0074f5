/*
 * The application's side of messaging: posting sends and receives (with FI_PEEK, FI_CLAIM,
 * FI_DISCARD and FI_MULTI_RECV), cancel, datagram endpoints, and cleanup when a peer's session
 * or the endpoint ends. Called with the progress lock held.
 */
#include "proto/cour_engine.h"
#include "proto/cour_msg_int.h"

#include <stdlib.h>

static size_t cour_iov_len(const struct iovec *iov, size_t count)
{
	size_t len = 0;

	for (size_t i = 0; i < count; i++)
		len += iov[i].iov_len;
	return len;
}

/* ---- send ---- */

static int cour_dgram_send(struct cour_pep *ep, const struct iovec *iov, size_t count,
			   size_t len, fi_addr_t dest, uint64_t tag, uint64_t data, void *context,
			   uint64_t flags, uint64_t cq_flags)
{
	const struct cour_addr *addr = ep->up->av_lookup(ep, dest);
	struct sockaddr_storage ss;
	struct cour_pkt_hdr hdr;
	socklen_t sl;
	int ret;

	if (!addr) {
		COUR_WARN(FI_LOG_EP_DATA, "send to fi_addr %" PRIu64 " not in the AV\n", dest);
		return -FI_EINVAL;
	}
	if (len > COUR_DGRAM_MAX_MSG) {
		COUR_WARN(FI_LOG_EP_DATA, "datagram of %zu bytes exceeds max_msg_size %u\n",
			  len, COUR_DGRAM_MAX_MSG);
		return -FI_EMSGSIZE;
	}
	sl = (socklen_t)cour_addr_to_sockaddr(addr, &ss);
	memset(&hdr, 0, sizeof(hdr));
	hdr.base.type = COUR_PKT_DGRAM;
	hdr.base.flags = (cq_flags & FI_TAGGED ? COUR_F_TAGGED : 0) |
			 (flags & FI_REMOTE_CQ_DATA ? COUR_F_CQ_DATA : 0) |
			 (ep->wire.mac ? COUR_F_MAC : 0);
	hdr.base.src_session = 1;
	hdr.msg.tag = tag;
	hdr.msg.data = data;
	hdr.msg.total_len = len;
	cour_hdr_finish(NULL, &hdr, COUR_PKT_HDR_LEN, iov, count);
	ret = cour_wire_send_now(ep, &ss, sl, &hdr, COUR_PKT_HDR_LEN, iov, count);
	if (ret)
		return ret;
	ep->stats.tx_bytes += len;
	cour_tx_done_now(ep, context, flags, cq_flags, len, tag);
	ep->stats.tx_msgs++;
	return 0;
}

static int cour_txe_alloc(struct cour_pep *ep, struct cour_txe **txe)
{
	if (COUR_UNLIKELY(ep->tx_outstanding >= cour_params.tx_size))
		return -FI_EAGAIN;
	*txe = cour_pool_get(&ep->txe_pool);
	if (COUR_UNLIKELY(!*txe))
		return -FI_EAGAIN;
	(*txe)->owner = ep->tx_owner;
	(*txe)->group = NULL;           /* (an RMA part sets its own after its memset) */
	return 0;
}

int cour_txe_get(struct cour_pep *ep, fi_addr_t dest, const char *what, struct cour_peer **peer,
		 struct cour_txe **txe)
{
	*peer = cour_peer_get_locked(ep, dest);
	if (COUR_UNLIKELY(!*peer)) {
		COUR_WARN(FI_LOG_EP_DATA, "%s to fi_addr %" PRIu64 " not in the AV\n", what, dest);
		return -FI_EINVAL;
	}
	return cour_txe_alloc(ep, txe);
}

/* The bytes of iov copied into buf (an inject buffer): txe reads them from there on. Packets
 * already built hold offsets into the message, not addresses, so they follow. (iov may be
 * txe->iov itself: it is read whole before txe->iov[0] is written.) */
static void cour_txe_own_copy(struct cour_txe *txe, char *buf, const struct iovec *iov,
			      size_t count)
{
	size_t off = 0;

	for (size_t i = 0; i < count; i++) {
		memcpy(buf + off, iov[i].iov_base, iov[i].iov_len);
		off += iov[i].iov_len;
	}
	txe->inject_buf = buf;
	txe->iov[0].iov_base = buf;
	txe->iov[0].iov_len = off;
	txe->iov_count = 1;
}

int cour_txe_set_data(struct cour_pep *ep, struct cour_txe *txe, const struct iovec *iov,
		      size_t count, bool inject)
{
	if (inject) {
		char *buf = cour_pool_get(&ep->inject_pool);

		if (!buf)
			return -FI_EAGAIN;
		cour_txe_own_copy(txe, buf, iov, count);
		return 0;
	}
	if (count)       /* iov may be NULL for an empty message */
		memcpy(txe->iov, iov, count * sizeof(*iov));
	txe->iov_count = (uint32_t)count;
	return 0;
}

/* Is txe still on one of the peer's lists, not yet complete? (Pointers compared only: a txe
 * that is on none completed and went back to its pool.) */
static bool cour_txe_listed(const struct cour_peer *peer, const struct cour_txe *txe)
{
	const struct cour_txe *lists[] = { peer->txq, peer->tx_inflight, peer->tx_wait };

	for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++)
		for (const struct cour_txe *t = lists[i]; t; t = t->next)
			if (t == txe)
				return true;
	return false;
}

/* Would the peer's answer to a message of ours to dest find a receive posted (COUR_F_READY)?
 * The first few posted receives of the kind are looked at, not all: a guess. A wrong one
 * makes the answer unexpected here, as the answer to a message without the flag would be if
 * it carried the ACK (an MPI_Send's sender posts its MPI_Recv only once the send is
 * complete: its ping-pong's answer arrived unexpected, a copy more, when it carried the
 * ACK: 0.77-0.81x at 256 KiB-1 MiB between two namespaces at MTU 9000). */
static bool cour_answer_ready(struct cour_pep *ep, fi_addr_t dest, bool tagged)
{
	const struct cour_rxe *rxe;
	int n = 0;

	if (!ep->rxq || ep->tx_rx_ctx)
		return false;       /* (the answer's receive context is the peer's choice) */
	DL_FOREACH(*cour_rxq(ep, tagged), rxe) {
		if (rxe->src == FI_ADDR_UNSPEC || rxe->src == dest)
			return true;
		if (++n == 4)
			break;
	}
	return false;
}

/* A message of ours to the peer after a waited one of its own ended: an answer if within the
 * ACK delay, and then the last ACK of its next one waits for ours (cour_ep_rx_packet). */
static void cour_peer_answered(struct cour_peer *peer)
{
	peer->answers = (uint32_t)cour_now_us() - peer->ans_wait_us <=
			(uint32_t)cour_params.ack_delay_us;
	peer->ans_wait_us = 0;
}

int cour_msg_send(struct cour_pep *ep, const struct iovec *iov, size_t count, fi_addr_t dest,
		  uint64_t tag, uint64_t data, void *context, uint64_t flags, uint64_t cq_flags)
{
	size_t len = cour_iov_len(iov, count);
	struct cour_peer *peer;
	struct cour_txe *txe;
	char *spare = NULL;
	int ret;

	if (COUR_UNLIKELY(count > COUR_IOV_MAX)) {
		COUR_WARN(FI_LOG_EP_DATA, "iov count %zu exceeds iov_limit %d\n", count,
			  COUR_IOV_MAX);
		return -FI_EINVAL;
	}
	if (COUR_UNLIKELY((flags & FI_INJECT) && len > cour_params.inject_size)) {
		COUR_WARN(FI_LOG_EP_DATA, "inject of %zu bytes exceeds inject_size %zu\n", len,
			  cour_params.inject_size);
		return -FI_EINVAL;
	}
	if (ep->type == FI_EP_DGRAM)
		return cour_dgram_send(ep, iov, count, len, dest, tag, data, context, flags,
				       cq_flags);
	if (COUR_UNLIKELY(len > COUR_MAX_MSG_SIZE)) {
		COUR_WARN(FI_LOG_EP_DATA, "message of %zu bytes exceeds max_msg_size\n", len);
		return -FI_EMSGSIZE;
	}
	peer = cour_peer_get_locked(ep, dest);
	if (COUR_UNLIKELY(!peer)) {
		COUR_WARN(FI_LOG_EP_DATA, "send to fi_addr %" PRIu64 " not in the AV\n", dest);
		return -FI_EINVAL;
	}
	if (peer->via_shm &&
	    cour_short_send(ep, peer, iov, count, len, tag, data, context, flags, cq_flags))
		return 0;
	/* An inject bigger than a ring cell to a same-host peer goes into the peer's ring
	 * straight from the caller's buffer, in this call, as any send there would: a copy
	 * into an inject buffer first made a 32 KiB MPI_Send 1.1-2.4x slower on one host. Only
	 * when it goes eagerly, nothing queued ahead and the credit there (short of it, it
	 * would go as an RTS that names the caller's buffer for the peer to read later); a
	 * message the ring did not take whole is copied, into the buffer held ready here,
	 * before we return. */
	bool ring_direct = (flags & FI_INJECT) && peer->via_shm &&
			   cour_peer_ring_clear(peer, flags) && len <= cour_params.eager_max &&
			   cour_credit_short(peer, len);

	if (ring_direct && !(spare = cour_pool_get(&ep->inject_pool)))
		return -FI_EAGAIN;
	ret = cour_txe_alloc(ep, &txe);
	if (COUR_UNLIKELY(ret)) {
		if (spare)
			cour_pool_put(&ep->inject_pool, spare);
		return ret;
	}
	ep->tx_outstanding++;
	txe->list = NULL;
	txe->context = context;
	txe->op_flags = flags;
	txe->cq_flags = cq_flags;
	txe->tag = tag;
	txe->data = data;
	txe->msg_len = len;
	txe->built = 0;
	txe->pkts_out = 0;
	txe->rx_id = 0;
	txe->inject_buf = NULL;
	txe->snap = NULL;           /* the RMA fields stay unread for messages, but this is freed */
	txe->split_wait = false;
	txe->notice = false;
	txe->short_rts = false;
	txe->rts_plain = false;
	txe->rts_cma = false;
	txe->raddr = 0;
	txe->msg_id = peer->next_msg_id++;
	txe->hdr_flags = (cq_flags & FI_TAGGED ? COUR_F_TAGGED : 0) |
			 (flags & FI_REMOTE_CQ_DATA ? COUR_F_CQ_DATA : 0);
	if (COUR_UNLIKELY(ep->tx_rx_ctx)) {
		/* the peer's receive context (EAGER and RTS carry it; RDATA gets the CTS's id) */
		txe->rx_id = ep->tx_rx_ctx;
		txe->hdr_flags |= COUR_F_RXCTX;
	}
	if (cour_txe_set_data(ep, txe, iov, count, (flags & FI_INJECT) && !ring_direct)) {
		cour_pool_put(&ep->txe_pool, txe);
		ep->tx_outstanding--;
		return -FI_EAGAIN;
	}
	/* (a direct inject never takes single copy: the peer would pull after we returned) */
	if (!ring_direct && len > cour_cma_eager_max(peer, txe->iov_count, flags)) {
		txe->op_type = COUR_PKT_RTS;
		txe->total_len = 0;         /* the RTS carries no payload; CTS sets the length */
		if (cour_cma_msg_usable(peer, len, txe->iov_count))
			txe->hdr_flags |= COUR_F_CMA;
		/* the sender completes a split copy once its own half is written: not before the
		 * receiver's, if delivery complete was asked */
		if (flags & FI_DELIVERY_COMPLETE)
			txe->hdr_flags |= COUR_F_DC;
	} else {
		txe->op_type = COUR_PKT_EAGER;
		txe->total_len = len;
		if (flags & FI_DELIVERY_COMPLETE)
			txe->hdr_flags |= COUR_F_DC;
		else if (cour_tx_unwatched(ep, cq_flags))
			txe->hdr_flags |= COUR_F_NOWAIT;   /* its ACK can wait for our peer's answer */
	}
	if (!peer->via_shm && !(txe->hdr_flags & (COUR_F_DC | COUR_F_NOWAIT)) &&
	    cour_answer_ready(ep, dest, cq_flags & FI_TAGGED))
		txe->hdr_flags |= COUR_F_READY;
	if (COUR_UNLIKELY(peer->ans_wait_us))
		cour_peer_answered(peer);
	peer->msg_sent = true;
	cour_peer_enqueue(peer, txe);
	if (spare) {
		/* (a packet of ours that found the ring full keeps it listed) */
		if (cour_txe_listed(peer, txe))
			cour_txe_own_copy(txe, spare, txe->iov, txe->iov_count);
		else
			cour_pool_put(&ep->inject_pool, spare);
	}
	return 0;
}

/* ---- receive ---- */

/* where an unexpected message came from: its peer's address, or a datagram's source */
static fi_addr_t cour_unexp_src(const struct cour_rxmsg *m)
{
	return m->peer ? cour_peer_fi_addr(m->peer) : m->dgram_src;
}

static bool cour_unexp_match(struct cour_pep *ep, struct cour_rxmsg *m, bool tagged,
			     uint64_t tag, uint64_t ignore, fi_addr_t src)
{
	if (m->claimed)
		return false;
	if (tagged && ((m->tag ^ tag) & ~ignore))
		return false;
	return cour_msg_src_match(ep, src, cour_unexp_src(m));
}

static struct cour_rxmsg *cour_find_unexp(struct cour_pep *ep, bool tagged, uint64_t tag,
					  uint64_t ignore, fi_addr_t src)
{
	struct cour_rxmsg *m;

	DL_FOREACH(tagged ? ep->rxq->utag : ep->rxq->umsg, m)
		if (cour_unexp_match(ep, m, tagged, tag, ignore, src))
			return m;
	return NULL;
}

static struct cour_rxmsg **cour_unexpq(struct cour_pep *ep, bool tagged)
{
	return tagged ? &ep->rxq->utag : &ep->rxq->umsg;
}

/* The endpoint an unexpected message arrived at: in a shared receive context not always the
 * one the receive was posted through, and the one its completion and its protocol belong to */
static struct cour_pep *cour_mep(struct cour_pep *ep, const struct cour_rxmsg *m)
{
	return m->peer ? m->peer->ep : m->dgram_ep ? m->dgram_ep : ep;
}

/* An unexpected datagram (off its queue) is done with: its copy and record go back */
static void cour_dgram_unexp_free(struct cour_rxmsg *m)
{
	struct cour_pep *ep = m->dgram_ep;

	ep->rxq->dgram_bytes -= m->total_len;
	free(m->ubuf);
	cour_pool_put(&ep->rxmsg_pool, m);
}

/* A receive takes an unexpected datagram: one datagram fills one receive */
static void cour_dgram_unexp_take(struct cour_rxmsg *m, struct cour_rxe *rxe)
{
	struct cour_rxmsg tmp = *m;

	tmp.ubuf = NULL;
	tmp.next = tmp.prev = NULL;
	cour_msg_bind_dgram(m->dgram_ep, &tmp, rxe, m->ubuf, m->dgram_src);
	cour_dgram_unexp_free(m);
}

/* FI_PEEK (with FI_CLAIM or FI_DISCARD): report what waits, without receiving it. */
static int cour_msg_peek(struct cour_pep *ep, struct cour_rxe *rxe, fi_addr_t src)
{
	struct cour_rxmsg *m = cour_find_unexp(ep, true, rxe->tag, rxe->ignore, src);
	uint64_t flags = FI_RECV | FI_TAGGED;

	if (!m) {
		cour_msg_report_rx(ep, rxe, flags, 0, 0, NULL, rxe->tag, 0, FI_ADDR_NOTAVAIL,
				   FI_ENOMSG, COUR_E_NOMSG);
		return 0;
	}
	struct cour_pep *mep = cour_mep(ep, m);
	fi_addr_t src_addr = cour_unexp_src(m);
	uint64_t tag = m->tag, len = m->total_len;
	uint64_t data = (m->hdr_flags & COUR_F_CQ_DATA) ? m->data : 0;

	if (m->hdr_flags & COUR_F_CQ_DATA)
		flags |= FI_REMOTE_CQ_DATA;
	if ((rxe->op_flags & FI_DISCARD) && !m->peer) {
		DL_DELETE(*cour_unexpq(ep, true), m);
		cour_dgram_unexp_free(m);
	} else if (rxe->op_flags & FI_DISCARD) {
		cour_msg_discard(mep, m, true);
	} else if (rxe->op_flags & FI_CLAIM) {
		m->claimed = true;
		m->claim_ctx = rxe->context;
	}
	cour_msg_report_rx(mep, rxe, flags, len, 0, NULL, tag, data, src_addr, 0, 0);
	return 0;
}

int cour_msg_recv(struct cour_pep *ep, const struct iovec *iov, size_t count, fi_addr_t src,
		  uint64_t tag, uint64_t ignore, void *context, uint64_t flags, bool tagged)
{
	struct cour_rxe *rxe;
	struct cour_rxmsg *m;
	int ret = 0;

	if (COUR_UNLIKELY(count > COUR_IOV_MAX)) {
		COUR_WARN(FI_LOG_EP_DATA, "iov count %zu exceeds iov_limit %d\n", count,
			  COUR_IOV_MAX);
		return -FI_EINVAL;
	}
	if (COUR_UNLIKELY((flags & FI_MULTI_RECV) && count != 1)) {
		COUR_WARN(FI_LOG_EP_DATA, "FI_MULTI_RECV needs exactly one iov, got %zu\n", count);
		return -FI_EINVAL;
	}
	if (!(ep->caps & FI_DIRECTED_RECV) && !(ep->rx_op_flags & FI_DIRECTED_RECV))
		src = FI_ADDR_UNSPEC;
	rxe = cour_pool_get(&ep->rxq->rxe_pool);
	if (COUR_LIKELY(rxe))
		rxe->q = ep->rxq;
	if (COUR_UNLIKELY(!rxe)) {
		COUR_WARN(FI_LOG_EP_DATA, "out of memory for a posted receive (%zu posted)\n",
			  ep->rxq->rxe_pool.in_use);
		return -FI_EAGAIN;
	}
	rxe->context = context;
	rxe->op_flags = flags;
	rxe->tag = tag;
	rxe->ignore = tagged ? ignore : 0;
	rxe->src = src;
	rxe->iov_count = (uint32_t)count;
	if (COUR_LIKELY(count == 1)) {
		/* word by word: the caller's iovec was just stored a word at a time, and
		 * memcpy's one 16-byte load would wait for those stores to retire */
		rxe->iov[0].iov_base = __atomic_load_n(&iov[0].iov_base, __ATOMIC_RELAXED);
		rxe->iov[0].iov_len = __atomic_load_n(&iov[0].iov_len, __ATOMIC_RELAXED);
		rxe->buf_len = rxe->iov[0].iov_len;
	} else {
		if (count)
			memcpy(rxe->iov, iov, count * sizeof(*iov));
		rxe->buf_len = cour_iov_len(iov, count);
	}
	rxe->multi_off = 0;
	rxe->multi_pending = 0;
	rxe->multi_retired = false;

	if (tagged && (flags & FI_PEEK)) {
		/* a message whose send completed may still wait in our socket or ring: take in
		 * what has arrived before answering that nothing has */
		ep->up->progress(ep);
		ret = cour_msg_peek(ep, rxe, src);
		cour_pool_put(&ep->rxq->rxe_pool, rxe);
		return ret;
	}
	if (tagged && (flags & FI_CLAIM)) {
		/* the message an earlier FI_PEEK|FI_CLAIM reserved for this context */
		DL_FOREACH(ep->rxq->utag, m)
			if (m->claimed && m->claim_ctx == context)
				break;
		if (!m) {
			COUR_WARN(FI_LOG_EP_DATA, "FI_CLAIM: no message claimed by context %p\n",
				  context);
			cour_pool_put(&ep->rxq->rxe_pool, rxe);
			return -FI_EINVAL;
		}
		if (flags & FI_DISCARD) {
			cour_msg_report_rx(cour_mep(ep, m), rxe, FI_RECV | FI_TAGGED, 0, 0, NULL,
					   m->tag, 0, cour_unexp_src(m), 0, 0);
			if (m->peer) {
				cour_msg_discard(cour_mep(ep, m), m, true);
			} else {
				DL_DELETE(ep->rxq->utag, m);
				cour_dgram_unexp_free(m);
			}
			cour_pool_put(&ep->rxq->rxe_pool, rxe);
			return 0;
		}
		m->claimed = false;
		DL_PREPEND(*cour_rxq(ep, tagged), rxe);   /* (binding takes it off again) */
		DL_DELETE(ep->rxq->utag, m);
		if (!m->peer)
			cour_dgram_unexp_take(m, rxe);
		else
			cour_msg_bind_unexp(cour_mep(ep, m), m, rxe);
		return 0;
	}

	DL_APPEND(*cour_rxq(ep, tagged), rxe);
	/* Unexpected messages are taken in arrival order; a multi-receive buffer may take
	 * several until it retires. */
	uint64_t ign = rxe->ignore;
	if (!*cour_unexpq(ep, tagged))
		return 0;               /* (the usual case: no call for an empty queue) */
	while ((m = cour_find_unexp(ep, tagged, tag, ign, src))) {
		DL_DELETE(*cour_unexpq(ep, tagged), m);
		if (!m->peer) {
			/* (a multi-receive buffer takes one now, the next with the next post) */
			cour_dgram_unexp_take(m, rxe);
			break;
		}
		/* a retired receive may already be freed by its last completion */
		if (cour_msg_bind_unexp(cour_mep(ep, m), m, rxe))
			break;
	}
	return 0;
}

int cour_msg_cancel(struct cour_pep *ep, void *context)
{
	struct cour_rxe *rxe;

	for (int t = 0; t < 2; t++) {
		struct cour_rxe **q = cour_rxq(ep, t);
		DL_FOREACH(*q, rxe) {
			if (rxe->context != context)
				continue;
			DL_DELETE(*q, rxe);
			if ((rxe->op_flags & FI_MULTI_RECV) && rxe->multi_pending) {
				/* slices still filling: it completes with the last of them */
				rxe->multi_retired = true;
				return 0;
			}
			/* a canceled multi-receive buffer is released, and says so */
			cour_msg_report_rx(ep, rxe, FI_RECV | (t ? FI_TAGGED : FI_MSG) |
					   (rxe->op_flags & FI_MULTI_RECV), 0, 0, NULL, rxe->tag, 0,
					   FI_ADDR_NOTAVAIL, FI_ECANCELED, COUR_E_CANCELED);
			cour_pool_put(&ep->rxq->rxe_pool, rxe);
			return 0;
		}
	}
	return -FI_ENOENT;
}

/* ---- datagram endpoints ---- */

void cour_msg_handle_dgram(struct cour_pep *ep, const struct cour_pkt_hdr *hdr,
			   const char *payload, size_t plen, const struct cour_addr *from)
{
	bool tagged = hdr->base.flags & COUR_F_TAGGED;
	fi_addr_t src = ep->up->av_reverse(ep, from);
	struct cour_rxmsg m;
	struct cour_rxe *rxe;

	if (hdr->msg.total_len != plen) {
		COUR_DROP_BAD(ep, "datagram length disagrees with its header");
		return;
	}
	rxe = cour_msg_find_rxe(ep, tagged, hdr->msg.tag, src);
	if (!rxe) {
		/* as the socket would have: a datagram waits for its receive, up to a socket
		 * buffer's worth (FI_COURIER_SOCKBUF) of them; past that it is dropped */
		struct cour_rxmsg *u = NULL;

		if (ep->rxq->dgram_bytes + plen <= cour_params.sockbuf)
			u = cour_pool_get(&ep->rxmsg_pool);
		if (u) {
			memset(u, 0, sizeof(*u));
			u->ubuf = malloc(plen ? plen : 1);
		}
		if (!u || !u->ubuf) {
			if (u)
				cour_pool_put(&ep->rxmsg_pool, u);
			ep->stats.drop_no_buf++;
			return;
		}
		memcpy(u->ubuf, payload, plen);
		u->hdr_flags = hdr->base.flags;
		u->tag = hdr->msg.tag;
		u->data = hdr->msg.data;
		u->total_len = u->received = plen;
		u->dgram_src = src;
		u->dgram_ep = ep;
		u->q = ep->rxq;
		ep->rxq->dgram_bytes += plen;
		ep->stats.unexpected_msgs++;
		DL_APPEND(*cour_unexpq(ep, tagged), u);
		return;
	}
	memset(&m, 0, sizeof(m));
	m.q = ep->rxq;
	m.hdr_flags = hdr->base.flags;
	m.tag = hdr->msg.tag;
	m.data = hdr->msg.data;
	m.total_len = plen;
	m.received = plen;
	cour_msg_bind_dgram(ep, &m, rxe, payload, src);
}

/* ---- cleanup ---- */

void cour_msg_peer_reset(struct cour_peer *peer, int prov_errno)
{
	struct cour_pep *ep = peer->ep;
	struct cour_rxmsg *m, *tmp;
	int err = cour_errno_fi(prov_errno) == FI_EHOSTUNREACH ? FI_EHOSTUNREACH :
		  prov_errno == COUR_E_EP_CLOSED ? FI_ECANCELED : FI_ECONNRESET;

	/* a matched message that will never finish: its receive completes in error */
	if (peer->rx_cur) {
		m = peer->rx_cur;
		peer->rx_cur = NULL;
		if (m->rxe) {
			cour_msg_fail_matched(ep, m, err, prov_errno);
		} else {
			/* partial unexpected data is worthless without the rest */
			cour_msg_discard(ep, m, false);
		}
	}
	HASH_ITER(hh, ep->rdv_by_id, m, tmp) {
		if (m->peer != peer)
			continue;
		if (m->adopting && !m->rxe) {   /* its data will never come */
			if (m->discard) {       /* the application discarded it already */
				cour_rdv_del(ep, m);
				cour_pool_put(&ep->rxmsg_pool, m);
			} else {                /* still unexpected */
				cour_msg_discard(ep, m, false);
			}
			continue;
		}
		cour_rdv_del(ep, m);
		cour_msg_fail_matched(ep, m, err, prov_errno);
	}
	/* unexpected RTS from the old session can never be cleared to send */
	for (int t = 0; t < 2; t++) {
		DL_FOREACH_SAFE(*cour_unexpq(ep, t), m, tmp)
			if (m->peer == peer && m->rts)
				cour_msg_discard(ep, m, false);
	}
}

void cour_msg_flush_posted(struct cour_pep *ep)
{
	struct cour_rxe *rxe, *rtmp;

	for (int t = 0; t < 2; t++)
		DL_FOREACH_SAFE(*cour_rxq(ep, t), rxe, rtmp) {
			DL_DELETE(*cour_rxq(ep, t), rxe);
			/* a multi-receive buffer with slices still filling is freed by the last */
			if ((rxe->op_flags & FI_MULTI_RECV) && rxe->multi_pending)
				rxe->multi_retired = true;
			else
				cour_pool_put(&rxe->q->rxe_pool, rxe);
		}
}

static void cour_msg_q_close(struct cour_pep *ep, bool shared)
{
	struct cour_rxmsg *m, *mtmp;
	struct cour_rxe *rxe, *rtmp;

	/* a shared receive context keeps its receives, and the other endpoints' messages */
	for (int t = 0; t < 2; t++) {
		DL_FOREACH_SAFE(*cour_unexpq(ep, t), m, mtmp) {
			if (shared && cour_mep(ep, m) != ep)
				continue;
			DL_DELETE(*cour_unexpq(ep, t), m);
			if (!m->peer && m->dgram_ep)
				ep->rxq->dgram_bytes -= m->total_len;
			free(m->ubuf);
		}
		if (shared)
			continue;
		DL_FOREACH_SAFE(*cour_rxq(ep, t), rxe, rtmp)
			DL_DELETE(*cour_rxq(ep, t), rxe);
	}
}

void cour_msg_ep_close(struct cour_pep *ep)
{
	struct cour_rxq *saved = ep->rxq;
	struct cour_rxmsg *m, *mtmp;

	cour_msg_q_close(ep, ep->rxq != &ep->own_rxq);
	/* a scalable endpoint's receive contexts (their queues outlive the contexts) */
	for (uint32_t i = 0; i < ep->nrxq; i++) {
		if (!ep->rxqs[i])
			continue;
		ep->rxq = ep->rxqs[i];
		cour_msg_q_close(ep, false);
	}
	ep->rxq = saved;
	HASH_ITER(hh, ep->rdv_by_id, m, mtmp)
		HASH_DEL(ep->rdv_by_id, m);
}
