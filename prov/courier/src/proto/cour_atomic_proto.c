/*
 * Atomics over the engine. One ATOMIC packet carries the whole operation (at most
 * COUR_ATOMIC_MAX_BYTES of operands, and as many compare values); the target checks the key,
 * bounds and rights, runs the atomic table (cour_atomic_ops.c) under its progress lock and
 * answers with RMA_RESP, carrying the old values for fetch and compare forms. Every atomic
 * thus completes at the initiator only after it was executed (delivery complete).
 *
 * rx_id packs what the target needs to decode the payload:
 *   bits 0..7 op, 8..15 datatype, 16..17 kind (enum cour_atomic_kind), 18..31 element count.
 */
#include "proto/cour_engine.h"
#include "proto/cour_atomic_ops.h"

#define COUR_ATOMIC_ID(op, dt, kind, count) \
	((uint32_t)(op) | (uint32_t)(dt) << 8 | (uint32_t)(kind) << 16 | (uint32_t)(count) << 18)

static char *cour_ioc_gather(char *dst, const struct fi_ioc *ioc, size_t n, size_t size)
{
	for (size_t i = 0; i < n; i++) {
		memcpy(dst, ioc[i].addr, ioc[i].count * size);
		dst += ioc[i].count * size;
	}
	return dst;
}

int cour_atomic_post(struct cour_pep *ep, const struct cour_atomic_args *a)
{
	size_t size = cour_atomic_dt_size(a->dt), count = cour_ioc_count(a->iov, a->count);
	bool has_operand = a->op != FI_ATOMIC_READ;
	struct cour_peer *peer;
	struct cour_txe *txe;
	int ret;
	char *p;

	if (!cour_atomic_valid(a->op, a->dt, a->kind) || !size) {
		COUR_WARN(FI_LOG_EP_DATA, "atomic op %d on datatype %d (%s) is not offered\n",
			  (int)a->op, (int)a->dt, a->kind == COUR_ATOMIC_BASE ? "base" :
			  a->kind == COUR_ATOMIC_FETCH ? "fetch" : "compare");
		return -FI_EOPNOTSUPP;
	}
	if (a->count > COUR_IOV_MAX || a->compare_count > COUR_IOV_MAX ||
	    a->result_count > COUR_IOV_MAX) {
		COUR_WARN(FI_LOG_EP_DATA, "atomic ioc count exceeds iov_limit %d\n", COUR_IOV_MAX);
		return -FI_EINVAL;
	}
	if (!count || count * size > COUR_ATOMIC_MAX_BYTES) {
		COUR_WARN(FI_LOG_EP_DATA, "atomic of %zu elements of %zu bytes: 1..%zu bytes "
			  "allowed (fi_query_atomic)\n", count, size, (size_t)COUR_ATOMIC_MAX_BYTES);
		return -FI_EINVAL;
	}
	if (a->kind == COUR_ATOMIC_COMPARE &&
	    cour_ioc_count(a->compare, a->compare_count) != count) {
		COUR_WARN(FI_LOG_EP_DATA, "compare atomic: %zu compare values for %zu operands\n",
			  cour_ioc_count(a->compare, a->compare_count), count);
		return -FI_EINVAL;
	}
	if (a->kind != COUR_ATOMIC_BASE &&
	    cour_ioc_count(a->result, a->result_count) != count) {
		COUR_WARN(FI_LOG_EP_DATA, "fetching atomic: room for %zu results, %zu operands\n",
			  cour_ioc_count(a->result, a->result_count), count);
		return -FI_EINVAL;
	}
	ret = cour_txe_get(ep, a->dest, "atomic", &peer, &txe);
	if (ret)
		return ret;
	memset(txe, 0, sizeof(*txe));
	txe->owner = ep->tx_owner;
	txe->group = ep->tx_group;
	/* operands are always copied: the packet is small, and inject forms need it anyway */
	p = txe->inject_buf = cour_pool_get(&ep->inject_pool);
	if (!p) {
		cour_pool_put(&ep->txe_pool, txe);
		return -FI_EAGAIN;
	}
	if (has_operand)
		p = cour_ioc_gather(p, a->iov, a->count, size);
	if (a->kind == COUR_ATOMIC_COMPARE)
		p = cour_ioc_gather(p, a->compare, a->compare_count, size);
	txe->iov[0].iov_base = txe->inject_buf;
	txe->iov[0].iov_len = (size_t)(p - (char *)txe->inject_buf);
	txe->iov_count = 1;
	for (size_t i = 0; a->kind != COUR_ATOMIC_BASE && i < a->result_count; i++) {
		txe->res_iov[i].iov_base = a->result[i].addr;
		txe->res_iov[i].iov_len = a->result[i].count * size;
	}
	txe->res_count = a->kind != COUR_ATOMIC_BASE ? (uint32_t)a->result_count : 0;

	ep->tx_outstanding++;
	txe->op_type = COUR_PKT_ATOMIC;
	txe->context = a->context;
	txe->op_flags = a->flags;
	txe->cq_flags = FI_ATOMIC | (a->kind == COUR_ATOMIC_BASE ? FI_WRITE : FI_READ) |
			(a->silent ? COUR_CQF_NOCOMP : 0);
	txe->tag = a->key;
	txe->raddr = a->addr;
	txe->data = a->data;
	txe->rx_id = COUR_ATOMIC_ID(a->op, a->dt, a->kind, count);
	txe->msg_len = count * size;
	txe->total_len = txe->iov[0].iov_len;
	txe->msg_id = peer->next_msg_id++;
	txe->hdr_flags = ((a->flags & FI_REMOTE_CQ_DATA) ? COUR_F_CQ_DATA : 0) |
			 (ep->tx_part ? COUR_F_PART : 0);
	txe->list = NULL;
	cour_peer_enqueue(peer, txe);
	return 0;
}

/* ---- target ---- */

/* Answer with the old values (fetch, compare) or nothing. */
static void cour_atomic_answer(struct cour_peer *peer, uint32_t id, const void *res, size_t len)
{
	struct cour_pep *ep = peer->ep;
	struct cour_txe *txe;

	if (!len) {
		cour_send_ctrl(peer, COUR_PKT_RMA_RESP, id, 0, 0);
		return;
	}
	txe = cour_pool_get(&ep->txe_pool);
	if (!txe || !(txe->inject_buf = cour_pool_get(&ep->inject_pool))) {
		if (txe)
			cour_pool_put(&ep->txe_pool, txe);
		COUR_WARN(FI_LOG_EP_DATA, "out of memory answering an atomic\n");
		return;             /* the initiator's atomic fails at its peer timeout */
	}
	void *buf = txe->inject_buf;
	memset(txe, 0, sizeof(*txe));
	txe->inject_buf = buf;
	memcpy(buf, res, len);
	txe->op_type = COUR_PKT_RMA_RESP;
	txe->msg_id = id;
	txe->iov[0].iov_base = buf;
	txe->iov[0].iov_len = len;
	txe->iov_count = 1;
	txe->total_len = len;
	txe->msg_len = len;
	cour_peer_enqueue(peer, txe);
}

void cour_atomic_handle(struct cour_peer *peer, const struct cour_pkt_hdr *hdr,
			const char *payload, size_t plen)
{
	struct cour_pep *ep = peer->ep;
	uint32_t id = hdr->msg.rx_id;
	enum fi_op op = (enum fi_op)(id & 0xff);
	enum fi_datatype dt = (enum fi_datatype)((id >> 8) & 0xff);
	int kind = (int)((id >> 16) & 3);
	size_t count = id >> 18, size = cour_atomic_dt_size(dt), bytes = count * size;
	size_t want = (op == FI_ATOMIC_READ ? 0 : bytes) + (kind == COUR_ATOMIC_COMPARE ? bytes : 0);
	uint64_t access = kind == COUR_ATOMIC_BASE ? FI_REMOTE_WRITE :
			  op == FI_ATOMIC_READ ? FI_REMOTE_READ : FI_REMOTE_READ | FI_REMOTE_WRITE;
	uint64_t result[COUR_ATOMIC_MAX_BYTES / sizeof(uint64_t)];
	struct cour_region *mr = NULL;
	void *target;
	int rc;

	if (kind > COUR_ATOMIC_COMPARE || !size || !count || bytes > COUR_ATOMIC_MAX_BYTES ||
	    !cour_atomic_valid(op, dt, kind) || plen != want) {
		COUR_DROP_BAD(ep, "ATOMIC with a bad op, datatype, count or length");
		return;
	}
	rc = cour_region_check(ep, hdr->msg.tag, hdr->msg.raddr, bytes, access, &target,
				  &mr);
	if (rc) {
		char str[80];
		ep->stats.rma_refused++;
		COUR_DBG(FI_LOG_EP_DATA, "refused atomic from %s: key %#" PRIx64 " addr %#" PRIx64
			 ": %s\n", cour_addr_str(&peer->addr, str, sizeof(str)), hdr->msg.tag,
			 hdr->msg.raddr, cour_errno_str(rc));
		cour_send_ctrl(peer, COUR_PKT_RMA_RESP, hdr->msg.msg_id, (uint32_t)rc, 0);
		return;
	}
	rc = cour_atomic_exec(op, dt, target, op == FI_ATOMIC_READ ? NULL : payload,
			      kind == COUR_ATOMIC_COMPARE ? payload + (want - bytes) : NULL,
			      kind == COUR_ATOMIC_BASE ? NULL : result, count);
	if (rc) {
		/* valid by the table a moment ago: cannot happen, but never answer success */
		COUR_WARN(FI_LOG_EP_DATA, "atomic op %d on datatype %d failed: %d\n", (int)op,
			  (int)dt, rc);
		cour_send_ctrl(peer, COUR_PKT_RMA_RESP, hdr->msg.msg_id, COUR_E_REMOTE, 0);
		return;
	}
	/* Target events follow what happened to target memory (fi_atomic(3), fi_cntr(3)): any op
	 * but FI_ATOMIC_READ wrote it, a fetch or compare also read it. OpenSHMEM sleeps on an
	 * FI_REMOTE_WRITE counter bound to its heap for swaps and compare-swaps. */
	uint64_t events = (op != FI_ATOMIC_READ ? FI_REMOTE_WRITE : 0) |
			  (kind != COUR_ATOMIC_BASE ? FI_REMOTE_READ : 0);
	if (hdr->base.flags & COUR_F_CQ_DATA) {
		struct cour_cq_entry e = {
			.flags = FI_ATOMIC | events | FI_REMOTE_CQ_DATA,
			.len = bytes,
			.data = hdr->msg.data,
			.src = cour_peer_fi_addr(peer),
		};
		cour_rma_target_event(ep, mr, events, &e, hdr->base.flags);
	} else {
		cour_rma_target_event(ep, mr, events, NULL, hdr->base.flags);
	}
	cour_atomic_answer(peer, hdr->msg.msg_id, result, kind == COUR_ATOMIC_BASE ? 0 : bytes);
}
