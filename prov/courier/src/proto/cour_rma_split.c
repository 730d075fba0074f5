/*
 * Big RMA with a same-host peer, copied by both processes at once.
 *
 * A single-copy write or read (proto/cour_cma.c) is one process_vm_readv/writev done by the
 * target, which checks key, bounds and access first, while the initiator waits idle. From
 * COUR_SPLIT_MIN on, the target shares the copy: it checks the whole operation, opens a lease
 * in its ring (wire/cour_shm_ring.h, Grants) and sends a grant (RMA_RESP|CMA: "copy
 * [offset, total_len) at raddr yourself, under lease tag/data"), then copies [0, split)
 * itself. The initiator takes the lease, copies its part (a write pushes, a read pulls), ends
 * the lease and says DONE|CMA. The target then answers as for any RMA (remote events, the
 * RMA_RESP that completes the operation).
 *
 * Why a lease and not just the check: the initiator touches our memory after our check, so a
 * region could be closed and its memory freed in between. Closing a region, an endpoint or a
 * peer's session settles its grants first: the revoke CAS either wins (the initiator will
 * never copy; we copy its part ourselves or drop it) or waits out a copy in progress, which
 * is one system call of the initiator's, or its death.
 *
 * Order (the endpoint promises RAW, WAR, WAW, SAW, SAR): the initiator copies its parts in
 * the order the grants arrive, which is the order of its operations, and each grant is
 * opened after all earlier operations' target parts are done. What remains is a later
 * operation whose target-side work meets an earlier grant's initiator part: before it runs,
 * that grant and all earlier ones of the peer are settled (cour_rma_split_guard). Messages,
 * atomics and writes carrying remote CQ data settle all of the peer's grants: their target
 * sees them complete and may look at anything. Back-to-back big writes to one buffer (the
 * usual bandwidth test) do not meet: each one's target part is the other's target part.
 *
 * An initiator that does not answer (manual progress, not polling) holds nothing up for long:
 * after COUR_GRANT_WAIT_US the target takes the lease back and copies the rest itself.
 */
#include "proto/cour_engine.h"
#include "wire/cour_shm_ring.h"

#include <sched.h>
#include <stdlib.h>
#include <time.h>

#define COUR_GRANT_WAIT_US  5000          /* an unanswered grant, then the target copies */
#define COUR_GRANT_BUSY_MAX_US 10000000   /* a copy in progress this long: give up, loudly */

/* Bytes [off, off + len) of the operation, by the target: pull (write) or push (read). */
static int cour_split_copy(struct cour_grant *g, uint64_t off, uint64_t len)
{
	struct iovec l = { .iov_base = g->dst + off, .iov_len = len };

	if (!len)
		return 0;
	if (!g->peer->shm || g->peer->cma_off)
		return -FI_EPERM;
	return g->type == COUR_PKT_WRITE ? cour_cma_pull(g->peer, &l, 1, g->iaddr + off, len)
					 : cour_cma_push(g->peer, &l, 1, g->iaddr + off, len);
}

static int cour_split_errno(int rc)
{
	return !rc ? 0 : rc == -FI_EPERM ? COUR_E_CMA_REFUSED : COUR_E_REMOTE;
}

/* Take the lease back, or wait out the initiator's copy: REVOKED, DONE or FAILED. */
static enum cour_shm_grant_state cour_split_revoke(struct cour_grant *g)
{
	struct cour_pep *ep = g->peer->ep;
	uint64_t start = 0, checked = 0, now;
	enum cour_shm_grant_state st;
	char str[80];

	for (;;) {
		st = cour_shm_grant_revoke(ep->shm_ring, g->slot, g->gen);
		if (st != COUR_GRANT_BUSY)
			return st;
		now = cour_now_us();
		if (!start)
			start = checked = now;
		if (now - checked >= 1000) {
			checked = now;
			if (cour_shm_peer_gone(g->peer)) {
				/* a process that exited copies no more */
				COUR_INFO(FI_LOG_EP_DATA, "peer %s exited while copying its half "
					  "of a shared RMA\n",
					  cour_addr_str(&g->peer->addr, str, sizeof(str)));
				return COUR_GRANT_FAILED;
			}
		}
		if (now - start >= COUR_GRANT_BUSY_MAX_US) {
			COUR_WARN(FI_LOG_EP_DATA, "peer %s has been copying a shared RMA for %u s "
				  "and is alive (stopped?): going on without it\n",
				  cour_addr_str(&g->peer->addr, str, sizeof(str)),
				  COUR_GRANT_BUSY_MAX_US / 1000000);
			return COUR_GRANT_FAILED;
		}
		sched_yield();
	}
}

static void cour_split_free(struct cour_grant *g)
{
	struct cour_pep *ep = g->peer->ep;

	cour_shm_grant_close(ep->shm_ring, g->slot);
	DL_DELETE(ep->grants, g);
	g->peer->grants_open--;
	free(g);
}

/* End g: the lease ends, the initiator's part is done by someone, the operation is answered. */
static void cour_split_settle(struct cour_grant *g)
{
	struct cour_pep *ep = g->peer->ep;
	int err = 0;

	if (cour_split_revoke(g) != COUR_GRANT_DONE) {
		ep->stats.shm_grants_revoked++;
		err = cour_split_errno(cour_split_copy(g, g->split, g->total - g->split));
	}
	cour_rma_target_finish(g->peer, g->type, g->msg_id, g->hdr_flags, g->total, g->data,
			       g->mr, err);
	cour_split_free(g);
}

/* ---- target ---- */

bool cour_rma_split_try(struct cour_peer *peer, const struct cour_pkt_hdr *hdr, char *dst,
			struct cour_region *mr)
{
	struct cour_pep *ep = peer->ep;
	uint64_t total = hdr->msg.total_len;
	struct cour_grant *g;
	struct cour_txe *txe;
	int rc;

	if (total < COUR_SPLIT_MIN || !peer->peer_pulls || !ep->shm_ring)
		return false;
	/* order: what we copy now must not meet an earlier grant's part still to come */
	cour_rma_split_guard(peer, dst, dst + (total / 2), hdr->base.flags & COUR_F_CQ_DATA);
	g = calloc(1, sizeof(*g));
	txe = cour_ctrl_txe(peer, COUR_PKT_RMA_RESP, hdr->msg.msg_id, 0, COUR_F_CMA);
	if (!g || !txe || cour_shm_grant_open(ep->shm_ring, &g->slot, &g->gen)) {
		free(g);
		if (txe)
			cour_pool_put(&ep->txe_pool, txe);
		return false;       /* all leases out (or no memory): copy it all ourselves */
	}
	g->peer = peer;
	g->mr = mr;
	g->type = hdr->base.type;
	g->hdr_flags = hdr->base.flags;
	g->msg_id = hdr->msg.msg_id;
	g->data = hdr->msg.data;
	g->total = total;
	g->split = (total / 2) & ~(uint64_t)4095;
	g->dst = dst;
	g->iaddr = hdr->msg.offset;
	g->opened_us = cour_now_us();   /* (ep->now_us lags by the copies of a batch) */
	DL_APPEND(ep->grants, g);
	peer->grants_open++;
	ep->stats.shm_rma_split++;

	/* the grant goes out first: the initiator copies while we do */
	txe->built = g->split;                  /* the header's offset */
	txe->raddr = (uint64_t)(uintptr_t)(dst + g->split);
	txe->tag = g->slot;
	txe->data = g->gen;
	txe->msg_len = total;
	cour_peer_enqueue(peer, txe);

	rc = cour_split_copy(g, 0, g->split);
	if (rc) {
		/* our own part failed: end it now (a refusal makes the initiator resend the
		 * operation as packets; a bad address fails it) */
		cour_split_revoke(g);
		cour_rma_target_finish(peer, g->type, g->msg_id, g->hdr_flags, total, g->data, mr,
				       cour_split_errno(rc));
		cour_split_free(g);
	}
	return true;
}

void cour_rma_split_done_rx(struct cour_peer *peer, const struct cour_pkt_hdr *hdr)
{
	struct cour_grant *g;

	DL_FOREACH(peer->ep->grants, g)
		if (g->peer == peer && g->msg_id == hdr->msg.msg_id)
			break;
	if (!g) {
		/* settled already (ordering, timeout): the lease told the initiator */
		COUR_DBG(FI_LOG_EP_DATA, "DONE for a shared RMA settled already\n");
		return;
	}
	cour_split_settle(g);
}

void cour_rma_split_guard_slow(struct cour_peer *peer, const char *lo, const char *hi, bool all)
{
	struct cour_grant *g, *tmp, *last = NULL;

	DL_FOREACH(peer->ep->grants, g)
		if (g->peer == peer &&
		    (all || (lo < g->dst + g->total && g->dst + g->split < hi)))
			last = g;
	if (!last)
		return;
	/* and every earlier one of the peer: parts of two grants may meet too */
	DL_FOREACH_SAFE(peer->ep->grants, g, tmp) {
		bool end = g == last;
		if (g->peer == peer)
			cour_split_settle(g);
		if (end)
			break;
	}
}

void cour_rma_split_expire(struct cour_pep *ep, uint64_t now)
{
	while (ep->grants && cour_us_since(now, ep->grants->opened_us) >= COUR_GRANT_WAIT_US &&
	       ep->grants->opened_us <= now)
		cour_split_settle(ep->grants);
}

uint64_t cour_rma_split_deadline(const struct cour_pep *ep)
{
	return ep->grants ? ep->grants->opened_us + COUR_GRANT_WAIT_US : 0;
}

void cour_rma_split_mr_closing(struct cour_pdom *pdom, const struct cour_region *mr)
{
	struct cour_grant *g;
	struct cour_pep *ep;

	/* the operations were admitted before the close: they complete, from memory that is
	 * still there until we return */
	DL_FOREACH2(pdom->peps, ep, pdom_next) {
again:
		DL_FOREACH(ep->grants, g)
			if (g->mr == mr) {
				/* settles more than g (the peer's earlier ones): look again */
				cour_rma_split_guard_slow(g->peer, NULL, NULL, true);
				goto again;
			}
	}
}

void cour_rma_split_peer_reset(struct cour_peer *peer)
{
	struct cour_grant *g, *tmp;

	if (!peer->grants_open)
		return;
	DL_FOREACH_SAFE(peer->ep->grants, g, tmp) {
		if (g->peer != peer)
			continue;
		cour_split_revoke(g);   /* nobody to answer; only the lease must end */
		cour_split_free(g);
	}
}

/* ---- initiator ---- */

/* FI_COURIER_LEASE_HOLD (tests): hold the lease as a descheduled initiator would */
static void cour_lease_hold_test(void)
{
	struct timespec ts = { .tv_sec = cour_params.lease_hold_ms / 1000,
			       .tv_nsec = (long)(cour_params.lease_hold_ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts))
		;
}

/* A grant: copy our part of the operation under the lease, end it, say DONE. Whatever
 * happens the target hears back, as it holds the operation open until then. */
void cour_rma_split_grant_rx(struct cour_peer *peer, const struct cour_pkt_hdr *hdr)
{
	struct cour_txe *txe = cour_rma_find_op(peer, hdr->msg.msg_id);
	uint64_t split = hdr->msg.offset, total = hdr->msg.total_len;
	uint32_t slot = (uint32_t)hdr->msg.tag;
	uint64_t gen = hdr->msg.data;
	uint32_t err = COUR_E_CMA_REFUSED;      /* "not copied: do it yourself" */
	struct iovec iov[COUR_IOV_MAX];
	size_t n;
	int rc;

	if (!txe || (txe->op_type != COUR_PKT_WRITE && txe->op_type != COUR_PKT_READ_REQ) ||
	    !(txe->hdr_flags & COUR_F_CMA) || txe->resp_done || total != txe->msg_len ||
	    !split || split >= total || hdr->msg.tag >= COUR_SHM_GRANTS) {
		COUR_DROP_BAD(peer->ep, "RMA grant for no shared operation");
	} else if (peer->shm && !peer->cma_off && cour_shm_grant_take(peer->shm, slot, gen)) {
		if (COUR_UNLIKELY(cour_params.lease_hold_ms))
			cour_lease_hold_test();
		n = cour_iov_slice(txe->iov, txe->iov_count, split, total - split, iov);
		rc = txe->op_type == COUR_PKT_WRITE
			? cour_cma_push(peer, iov, n, hdr->msg.raddr, total - split)
			: cour_cma_pull(peer, iov, n, hdr->msg.raddr, total - split);
		cour_shm_grant_finish(peer->shm, slot, gen, rc == 0);
		err = rc ? COUR_E_CMA_REFUSED : 0;
	}
	cour_send_ctrl_flags(peer, COUR_PKT_DONE, hdr->msg.msg_id, err, 0, COUR_F_CMA);
}
