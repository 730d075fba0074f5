/*
 * RMA over the engine: fi_write and fi_read (atomics share the answer path).
 *
 * Initiator: a WRITE is the data in sequenced packets, a READ one READ_REQ; both ride the
 * control queue (they consume no receive buffer, so they need no credits) and wait for the
 * target's answer: RMA_RESP for a write, the READ_RESP data (or an RMA_RESP refusal) for a
 * read. A write therefore completes only once the target has placed it: every remote error
 * (key, bounds, access) reaches the initiator as an error completion, never silently.
 *
 * Target: every packet is checked against the key, the bounds and the access rights before
 * memory is touched (cour_region_check); a refusal is counted, logged at debug level and
 * answered, and the link goes on. Packets of one write arrive contiguously and in order (the
 * control queue builds one operation at a time), so the last one completes the write: remote
 * CQ data, FI_RMA_EVENT counters, RMA_RESP. Reads are served by a READ_RESP txe on the
 * target's control queue that sends straight from the registered memory.
 *
 * Ordering (WAR, SAR): READ_RESP packets are built lazily, so memory a read covers could be
 * changed by a later write before the read's data left. cour_rma_order_guard copies such
 * reads aside first. Closing a region does the same for reads still served from it.
 */
#include "proto/cour_engine.h"

#include <stdlib.h>

/* Our own operations only: the answers we are sending (READ_RESP, RMA_RESP) share the lists
 * and the msg_id space of the peer's operations, and must never be taken for ours. */
static bool cour_rma_is_op(const struct cour_txe *txe, uint32_t id)
{
	return txe->msg_id == id && (txe->op_type == COUR_PKT_WRITE ||
				     txe->op_type == COUR_PKT_READ_REQ ||
				     txe->op_type == COUR_PKT_ATOMIC);
}

struct cour_txe *cour_rma_find_op(struct cour_peer *peer, uint32_t id)
{
	struct cour_txe *txe;

	/* an answer can overtake the ACK of the request, so in-flight ops are candidates too */
	DL_FOREACH(peer->tx_wait, txe)
		if (cour_rma_is_op(txe, id))
			return txe;
	DL_FOREACH(peer->tx_inflight, txe)
		if (cour_rma_is_op(txe, id))
			return txe;
	DL_FOREACH(peer->ctrlq, txe)
		if (cour_rma_is_op(txe, id))
			return txe;
	return NULL;
}

/* ---- initiator ---- */

int cour_rma_post(struct cour_pep *ep, uint8_t type, const struct iovec *iov, size_t count,
		  fi_addr_t dest, uint64_t raddr, uint64_t key, uint64_t data, void *context,
		  uint64_t flags, uint64_t cq_flags)
{
	size_t len = 0;
	struct cour_peer *peer;
	struct cour_txe *txe;
	int ret;

	/* FI_INJECT frees a source buffer at return: a read has none (its buffer is where the
	 * data lands, so copying it aside would land the data in the copy) */
	if (type == COUR_PKT_READ_REQ)
		flags &= ~(uint64_t)FI_INJECT;
	if (COUR_UNLIKELY(count > COUR_IOV_MAX)) {
		COUR_WARN(FI_LOG_EP_DATA, "RMA iov count %zu exceeds iov_limit %d\n", count,
			  COUR_IOV_MAX);
		return -FI_EINVAL;
	}
	for (size_t i = 0; i < count; i++)
		len += iov[i].iov_len;
	if (COUR_UNLIKELY(len > COUR_MAX_MSG_SIZE)) {
		COUR_WARN(FI_LOG_EP_DATA, "RMA of %zu bytes exceeds max_msg_size\n", len);
		return -FI_EMSGSIZE;
	}
	if (COUR_UNLIKELY((flags & FI_INJECT) && len > cour_params.inject_size)) {
		COUR_WARN(FI_LOG_EP_DATA, "inject write of %zu bytes exceeds inject_size %zu\n",
			  len, cour_params.inject_size);
		return -FI_EINVAL;
	}
	ret = cour_txe_get(ep, dest, "RMA", &peer, &txe);
	if (COUR_UNLIKELY(ret))
		return ret;
	memset(txe, 0, sizeof(*txe));
	txe->owner = ep->tx_owner;
	txe->group = ep->tx_group;
	if (cour_txe_set_data(ep, txe, iov, count, flags & FI_INJECT)) {
		cour_pool_put(&ep->txe_pool, txe);
		return -FI_EAGAIN;
	}
	ep->tx_outstanding++;
	txe->op_type = type;
	txe->context = context;
	txe->op_flags = flags;
	txe->cq_flags = cq_flags;
	txe->tag = key;
	txe->raddr = raddr;
	txe->data = data;
	txe->msg_len = len;
	txe->total_len = type == COUR_PKT_WRITE ? len : 0;   /* a read request is bare */
	txe->msg_id = peer->next_msg_id++;
	txe->hdr_flags = (flags & FI_REMOTE_CQ_DATA) ? COUR_F_CQ_DATA : 0;
	if (ep->tx_part)
		txe->hdr_flags |= COUR_F_PART;
	else if (ep->tx_group && type == COUR_PKT_WRITE)
		txe->rx_id = ep->tx_whole_len;  /* the remote CQ data entry's length */
	/* the parts of one operation go as packets, in sequence, so the last one's events
	 * (remote CQ data) come after every part landed; a single copy could finish later */
	if (!ep->tx_group && cour_cma_rma_usable(peer, len, txe->iov_count)) {
		txe->hdr_flags |= COUR_F_CMA;  /* the target moves the bytes (proto/cour_cma.c) */
		txe->total_len = 0;
		/* ... or we do, through its window, and are done (proto/cour_rma_push.c) */
		if (type == COUR_PKT_WRITE && cour_rma_push_try(peer, txe))
			return 0;
	}
	txe->list = NULL;
	cour_peer_enqueue(peer, txe);
	return 0;
}

/* The target answered txe: it completes now if all its packets are acknowledged, or once
 * they are (cour_txe_check_done). */
static void cour_rma_answered(struct cour_peer *peer, struct cour_txe *txe, int prov_errno)
{
	txe->resp_done = true;
	txe->resp_err = prov_errno;
	if (txe->list == &peer->tx_wait) {
		DL_DELETE(peer->tx_wait, txe);
		txe->list = NULL;
		cour_txe_complete(peer->ep, txe, cour_errno_fi(prov_errno), prov_errno);
	} else if (txe->list == &peer->tx_inflight) {
		cour_txe_check_done(peer, txe);
	}
}

/* The read a READ_RESP answers, if it waits for exactly those bytes next */
static struct cour_txe *cour_rma_read_waiting(struct cour_peer *peer,
					      const struct cour_pkt_hdr *hdr, size_t plen)
{
	struct cour_txe *txe = cour_rma_find_op(peer, hdr->msg.msg_id);

	if (!txe || txe->op_type != COUR_PKT_READ_REQ || txe->resp_done ||
	    hdr->msg.total_len != txe->msg_len || hdr->msg.offset != txe->received ||
	    plen > txe->msg_len - hdr->msg.offset)
		return NULL;
	return txe;
}

/* Where a READ_RESP's payload goes in the application's buffer, if in one piece: the UDP
 * wire reads it straight there (cour_ep_rx_direct) */
void *cour_rma_read_dest(struct cour_peer *peer, const struct cour_pkt_hdr *hdr, size_t plen)
{
	struct cour_txe *txe = cour_rma_read_waiting(peer, hdr, plen);
	uint64_t off = hdr->msg.offset;

	if (!txe || (hdr->base.flags & COUR_F_CMA))
		return NULL;
	for (uint32_t i = 0; i < txe->iov_count; i++) {
		size_t l = txe->iov[i].iov_len;
		if (off >= l) {
			off -= l;
			continue;
		}
		return l - off >= plen ? (char *)txe->iov[i].iov_base + off : NULL;
	}
	return NULL;
}

/* READ_RESP: bytes [offset, offset + plen) of the read, into the application's buffer */
static void cour_rma_read_data(struct cour_peer *peer, const struct cour_pkt_hdr *hdr,
			       const char *payload, size_t plen)
{
	struct cour_txe *txe = cour_rma_read_waiting(peer, hdr, plen);
	uint64_t off = hdr->msg.offset, pos = 0;

	if (!txe) {
		COUR_DROP_BAD(peer->ep, "READ_RESP for no read waiting at that offset");
		return;
	}
	if (peer->ep->rx_placed) {      /* the wire read it into place */
		off += plen;
		plen = 0;
	}
	for (uint32_t i = 0; i < txe->iov_count && plen; i++) {
		size_t l = txe->iov[i].iov_len;
		if (off >= pos + l) {
			pos += l;
			continue;
		}
		size_t in = off - pos, take = COUR_MIN(l - in, plen);
		memcpy((char *)txe->iov[i].iov_base + in, payload, take);
		payload += take;
		plen -= take;
		off += take;
		pos += l;
	}
	txe->received = off;
	if (txe->received == txe->msg_len)
		cour_rma_answered(peer, txe, 0);
}

static void cour_rma_resp(struct cour_peer *peer, const struct cour_pkt_hdr *hdr,
			  const char *payload, size_t plen)
{
	struct cour_txe *txe = cour_rma_find_op(peer, hdr->msg.msg_id);
	uint32_t err = hdr->msg.rx_id;

	if (!txe || txe->resp_done || err >= COUR_E_MAX ||
	    (txe->op_type == COUR_PKT_READ_REQ && !err &&
	     (!(txe->hdr_flags & COUR_F_CMA) || txe->received))) {
		COUR_DROP_BAD(peer->ep, "RMA_RESP for no operation waiting");
		return;
	}
	if (COUR_UNLIKELY(err == COUR_E_CMA_REFUSED)) {
		if ((txe->op_type != COUR_PKT_WRITE && txe->op_type != COUR_PKT_READ_REQ) ||
		    !(txe->hdr_flags & COUR_F_CMA)) {
			COUR_DROP_BAD(peer->ep, "single copy refused for no single-copy RMA");
			return;
		}
		/* the target could not copy after all: the bytes go in packets (a write's
		 * data, a read's READ_RESP), the whole operation again */
		peer->peer_pulls = false;
		peer->ep->stats.shm_copy_fallbacks++;
		txe->hdr_flags &= (uint16_t)~COUR_F_CMA;
		txe->total_len = txe->op_type == COUR_PKT_WRITE ? txe->msg_len : 0;
		txe->received = 0;
		cour_txe_requeue(peer, txe);
		return;
	}
	if (txe->op_type == COUR_PKT_READ_REQ && !err)
		txe->received = txe->msg_len;     /* the target wrote it into our buffer */
	if (txe->op_type == COUR_PKT_ATOMIC && !err && txe->res_count) {
		/* the old values of a fetching atomic, into the result buffers */
		for (uint32_t i = 0; i < txe->res_count && plen; i++) {
			size_t take = COUR_MIN(txe->res_iov[i].iov_len, plen);
			memcpy(txe->res_iov[i].iov_base, payload, take);
			payload += take;
			plen -= take;
		}
	}
	cour_rma_answered(peer, txe, (int)err);
}

/* ---- target ---- */

/* One target event: the object layer moves the endpoint's remote counters and the region's
 * counter once each for it, and writes the remote CQ data completion if there is one. */
void cour_rma_target_event(struct cour_pep *ep, struct cour_region *mr, uint64_t events,
			   const struct cour_cq_entry *cq_data, uint16_t hdr_flags)
{
	ep->stats.rma_served++;
	if (hdr_flags & COUR_F_PART)
		return;         /* a part of an operation: its last part raises the events */
	ep->up->target_done(ep, mr, events, cq_data);
}

/* An answer with no payload: success, or the prov_errno of the check that failed. */
static void cour_rma_answer(struct cour_peer *peer, uint32_t id, int prov_errno)
{
	cour_send_ctrl(peer, COUR_PKT_RMA_RESP, id, (uint32_t)prov_errno, 0);
}

static void cour_rma_refuse(struct cour_peer *peer, const struct cour_pkt_hdr *hdr, int rc)
{
	char str[80];

	peer->ep->stats.rma_refused++;
	COUR_DBG(FI_LOG_EP_DATA, "refused %s from %s: key %#" PRIx64 " addr %#" PRIx64
		 " len %" PRIu64 ": %s\n", hdr->base.type == COUR_PKT_WRITE ? "write" : "read",
		 cour_addr_str(&peer->addr, str, sizeof(str)), hdr->msg.tag, hdr->msg.raddr,
		 hdr->msg.total_len, cour_errno_str(rc));
	cour_rma_answer(peer, hdr->msg.msg_id, rc);
}

static bool cour_rma_target_allowed(const struct cour_pep *ep, uint8_t type);

void cour_rma_target_finish(struct cour_peer *peer, uint8_t type, uint32_t msg_id,
			    uint16_t hdr_flags, uint64_t total, uint64_t data, struct cour_region *mr,
			    int prov_errno)
{
	struct cour_pep *ep = peer->ep;

	if (prov_errno) {
		cour_rma_answer(peer, msg_id, prov_errno);
		return;
	}
	if (type == COUR_PKT_WRITE && (hdr_flags & COUR_F_CQ_DATA)) {
		struct cour_cq_entry e = {
			.flags = FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA,
			.len = total,
			.data = data,
			.src = cour_peer_fi_addr(peer),
		};
		cour_rma_target_event(ep, mr, FI_REMOTE_WRITE, &e, hdr_flags);
	} else {
		cour_rma_target_event(ep, mr, type == COUR_PKT_WRITE ? FI_REMOTE_WRITE :
					      FI_REMOTE_READ, NULL, hdr_flags);
	}
	cour_rma_answer(peer, msg_id, 0);
}

/* The write's last byte has landed: remote CQ data, counters, the answer. */
static void cour_rma_write_done(struct cour_peer *peer, const struct cour_pkt_hdr *hdr,
				struct cour_region *mr)
{
	/* the last part of a write with several remote iovecs names the whole length */
	uint64_t len = (hdr->base.flags & COUR_F_CQ_DATA) && hdr->msg.rx_id ? hdr->msg.rx_id :
		       hdr->msg.total_len;

	cour_rma_target_finish(peer, COUR_PKT_WRITE, hdr->msg.msg_id, hdr->base.flags, len,
			       hdr->msg.data, mr, 0);
}

/* WRITE|CMA: one bare packet; the whole write is checked, then pulled from the initiator. */
static void cour_rma_write_cma(struct cour_peer *peer, const struct cour_pkt_hdr *hdr,
			       size_t plen)
{
	uint64_t total = hdr->msg.total_len;
	struct cour_region *mr = NULL;
	struct iovec l;
	void *dst;
	int rc;

	if (plen || total > COUR_MAX_MSG_SIZE) {
		COUR_DROP_BAD(peer->ep, "single-copy WRITE with a payload or too long");
		return;
	}
	peer->rma_rx_id = hdr->msg.msg_id;
	peer->rma_rx_err = 0;
	rc = cour_region_check(peer->ep, hdr->msg.tag, hdr->msg.raddr, total,
				  FI_REMOTE_WRITE, &dst, &mr);
	if (rc) {
		cour_rma_refuse(peer, hdr, rc);
		return;
	}
	if (!peer->shm || peer->cma_off) {
		cour_rma_answer(peer, hdr->msg.msg_id, COUR_E_CMA_REFUSED);
		return;
	}
	if (cour_rma_split_try(peer, hdr, dst, mr))
		return;
	cour_rma_split_guard(peer, dst, (char *)dst + total, hdr->base.flags & COUR_F_CQ_DATA);
	l.iov_base = dst;
	l.iov_len = total;
	rc = cour_cma_pull(peer, &l, 1, hdr->msg.offset, total);
	if (rc) {
		cour_rma_answer(peer, hdr->msg.msg_id,
				rc == -FI_EPERM ? COUR_E_CMA_REFUSED : COUR_E_REMOTE);
		return;
	}
	cour_rma_write_done(peer, hdr, mr);
}

static void cour_rma_write(struct cour_peer *peer, const struct cour_pkt_hdr *hdr,
			   const char *payload, size_t plen)
{
	struct cour_pep *ep = peer->ep;
	uint64_t off = hdr->msg.offset, total = hdr->msg.total_len;
	struct cour_region *mr = NULL;
	void *dst;
	int rc;

	if (hdr->base.flags & COUR_F_PUSHED) {
		cour_rma_push_rx(peer, hdr, plen);
		return;
	}
	if (hdr->base.flags & COUR_F_CMA) {
		cour_rma_write_cma(peer, hdr, plen);
		return;
	}

	if (total > COUR_MAX_MSG_SIZE || off > total || plen > total - off ||
	    (off != 0 && hdr->msg.msg_id != peer->rma_rx_id) ||
	    (off == 0 && plen == 0 && total != 0)) {
		COUR_DROP_BAD(ep, "WRITE fragment outside its operation");
		return;
	}
	if (off == 0) {
		peer->rma_rx_id = hdr->msg.msg_id;
		peer->rma_rx_err = 0;
	} else if (peer->rma_rx_err) {
		return;             /* refused already, and answered */
	}
	/* the whole write is checked before its first byte lands, so a refused write leaves
	 * the region untouched; every packet is checked again, as the region may close */
	rc = off == 0 ? cour_region_check(ep, hdr->msg.tag, hdr->msg.raddr, total,
					     FI_REMOTE_WRITE, &dst, NULL) : 0;
	if (!rc && off == 0)
		cour_rma_split_guard(peer, dst, (char *)dst + total,
				     hdr->base.flags & COUR_F_CQ_DATA);
	if (!rc)
		rc = cour_region_check(ep, hdr->msg.tag, hdr->msg.raddr + off, plen,
					  FI_REMOTE_WRITE, &dst, &mr);
	if (!rc && hdr->msg.raddr + off < hdr->msg.raddr)
		rc = COUR_E_BOUNDS;  /* the address wrapped */
	if (rc) {
		peer->rma_rx_err = rc;
		cour_rma_refuse(peer, hdr, rc);
		return;
	}
	if (plen && !ep->rx_placed)     /* (else the wire read it into place) */
		memcpy(dst, payload, plen);
	if (off + plen < total)
		return;
	cour_rma_write_done(peer, hdr, mr);
}

/* Where a later fragment of the write in progress will land, checked as its handler will
 * check it, so the UDP wire can read it straight there (cour_ep_rx_direct). The first
 * fragment, which checks the whole write, always takes the ordinary path. */
void *cour_rma_write_dest(struct cour_peer *peer, const struct cour_pkt_hdr *hdr, size_t plen)
{
	uint64_t off = hdr->msg.offset, total = hdr->msg.total_len;
	void *dst;

	if ((hdr->base.flags & (COUR_F_CMA | COUR_F_PUSHED)) || off == 0 ||
	    hdr->msg.msg_id != peer->rma_rx_id ||
	    peer->rma_rx_err || total > COUR_MAX_MSG_SIZE || off > total || plen > total - off ||
	    hdr->msg.raddr + off < hdr->msg.raddr ||
	    !cour_rma_target_allowed(peer->ep, COUR_PKT_WRITE))
		return NULL;
	if (cour_region_check(peer->ep, hdr->msg.tag, hdr->msg.raddr + off, plen,
				 FI_REMOTE_WRITE, &dst, NULL))
		return NULL;
	return dst;
}

static void cour_rma_read_req(struct cour_peer *peer, const struct cour_pkt_hdr *hdr)
{
	struct cour_pep *ep = peer->ep;
	uint64_t len = hdr->msg.total_len;
	struct cour_region *mr = NULL;
	struct cour_txe *txe;
	void *src = NULL;
	int rc;

	if (len > COUR_MAX_MSG_SIZE) {
		COUR_DROP_BAD(ep, "READ_REQ longer than max_msg_size");
		return;
	}
	rc = cour_region_check(ep, hdr->msg.tag, hdr->msg.raddr, len, FI_REMOTE_READ,
				  &src, &mr);
	if (rc) {
		cour_rma_refuse(peer, hdr, rc);
		return;
	}
	if ((hdr->base.flags & COUR_F_CMA) && peer->shm && !peer->cma_off &&
	    cour_rma_split_try(peer, hdr, src, mr))
		return;
	cour_rma_split_guard(peer, src, (char *)src + len, false);
	if ((hdr->base.flags & COUR_F_CMA) && peer->shm && !peer->cma_off) {
		/* straight into the initiator's buffer, now: no later write can reach it first */
		struct iovec l = { .iov_base = src, .iov_len = len };
		if (cour_cma_push(peer, &l, 1, hdr->msg.offset, len) == 0) {
			cour_rma_target_event(ep, mr, FI_REMOTE_READ, NULL, hdr->base.flags);
			cour_rma_answer(peer, hdr->msg.msg_id, 0);
			return;
		}
		/* refused or a bad address: the bytes go in packets, as for any read */
	}
	txe = cour_pool_get(&ep->txe_pool);
	if (!txe) {
		COUR_WARN(FI_LOG_EP_DATA, "out of memory serving a read\n");
		return;             /* the initiator's read fails at its peer timeout */
	}
	memset(txe, 0, sizeof(*txe));
	txe->op_type = COUR_PKT_READ_RESP;
	txe->msg_id = hdr->msg.msg_id;
	txe->iov[0].iov_base = src;
	txe->iov[0].iov_len = len;
	txe->iov_count = 1;
	txe->total_len = len;
	txe->msg_len = len;
	cour_rma_target_event(ep, mr, FI_REMOTE_READ, NULL, hdr->base.flags);
	cour_peer_enqueue(peer, txe);
}

/* An endpoint is a target only for what its capabilities say (fi_getinfo(3)). */
static bool cour_rma_target_allowed(const struct cour_pep *ep, uint8_t type)
{
	uint64_t caps = ep->caps;

	switch (type) {
	case COUR_PKT_WRITE:
		return (caps & FI_RMA) && (caps & FI_REMOTE_WRITE);
	case COUR_PKT_READ_REQ:
		return (caps & FI_RMA) && (caps & FI_REMOTE_READ);
	case COUR_PKT_ATOMIC:
		return (caps & FI_ATOMIC) && (caps & (FI_REMOTE_WRITE | FI_REMOTE_READ));
	default:
		return true;    /* answers to our own operations */
	}
}

void cour_rma_handle(struct cour_peer *peer, const struct cour_pkt_hdr *hdr,
		     const char *payload, size_t plen)
{
	if (COUR_UNLIKELY(!cour_rma_target_allowed(peer->ep, hdr->base.type))) {
		/* a write's later fragments are refused once, with the first */
		if (hdr->base.type != COUR_PKT_WRITE || hdr->msg.offset == 0)
			cour_rma_refuse(peer, hdr, COUR_E_ACCESS);
		return;
	}
	switch (hdr->base.type) {
	case COUR_PKT_WRITE:
		cour_rma_write(peer, hdr, payload, plen);
		break;
	case COUR_PKT_RMA_RESP:
		if (hdr->base.flags & COUR_F_CMA)
			cour_rma_split_grant_rx(peer, hdr);
		else
			cour_rma_resp(peer, hdr, payload, plen);
		break;
	case COUR_PKT_READ_REQ:
		cour_rma_read_req(peer, hdr);
		break;
	case COUR_PKT_READ_RESP:
		cour_rma_read_data(peer, hdr, payload, plen);
		break;
	case COUR_PKT_ATOMIC:
		cour_rma_split_guard(peer, NULL, NULL, true);
		cour_atomic_handle(peer, hdr, payload, plen);
		break;
	default:
		COUR_DROP_BAD(peer->ep, "not an RMA packet");
		break;
	}
}

/* ---- keeping reads consistent ---- */

/* Copy what a read serves aside: from now on it sends from the copy. false if out of memory. */
static bool cour_rma_snapshot(struct cour_pep *ep, struct cour_txe *txe)
{
	void *copy;

	if (txe->snap || !txe->total_len)
		return true;
	copy = malloc(txe->total_len);
	if (!copy)
		return false;
	memcpy(copy, txe->iov[0].iov_base, txe->total_len);
	txe->snap = copy;
	txe->iov[0].iov_base = copy;
	ep->stats.rma_snapshots++;
	return true;
}

void cour_rma_order_guard(struct cour_peer *peer)
{
	struct cour_txe *txe;

	/* only reads with bytes not yet in a packet can be overtaken */
	DL_FOREACH(peer->ctrlq, txe)
		if (txe->op_type == COUR_PKT_READ_RESP && txe->built < txe->total_len &&
		    !cour_rma_snapshot(peer->ep, txe))
			COUR_WARN(FI_LOG_EP_DATA, "out of memory keeping a read ahead of a write; "
				  "the read may see the newer data\n");
}

static void cour_rma_closing_list(struct cour_pep *ep, struct cour_txe *list, const char *lo,
				  const char *hi)
{
	struct cour_txe *txe;

	DL_FOREACH(list, txe) {
		const char *p = txe->iov[0].iov_base;
		if (txe->op_type != COUR_PKT_READ_RESP || txe->snap || p < lo || p >= hi)
			continue;
		if (!cour_rma_snapshot(ep, txe))
			COUR_WARN(FI_LOG_MR, "out of memory saving a read from a closing region\n");
	}
}

void cour_rma_mr_closing(struct cour_pdom *pdom, const struct cour_region *mr)
{
	const char *lo = mr->base, *hi = lo + mr->len;
	struct cour_peer *peer, *tmp;
	struct cour_pep *ep;

	cour_lock_assert_held(pdom->lock);
	cour_rma_push_mr_closing(pdom, mr);     /* initiators write into it no more */
	cour_rma_split_mr_closing(pdom, mr);
	DL_FOREACH2(pdom->peps, ep, pdom_next) {
		HASH_ITER(hh, ep->peers, peer, tmp) {
			cour_rma_closing_list(ep, peer->ctrlq, lo, hi);
			cour_rma_closing_list(ep, peer->tx_inflight, lo, hi);
		}
	}
}
