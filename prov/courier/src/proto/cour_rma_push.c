/*
 * RMA writes that the initiator copies itself into a same-host target (FI_COURIER_SHM_PUSH).
 *
 * A single-copy write (proto/cour_cma.c) is pulled by the target after it checked key, bounds
 * and access, and completes on its answer: every write costs the initiator a round trip
 * through the target's progress. Here the target has done the check once, at registration:
 * it publishes each region open to remote writes as a window in its ring header
 * (wire/cour_shm_window.h: key, range, where it is in its memory, held against closing).
 * The initiator finds the key there, checks the range, enters the window, writes with one
 * process_vm_writev, leaves, and completes the write at once: the bytes are in place, which
 * is every completion level fi_cq(3) names. A WRITE|CMA|PUSHED notice follows in the ring so
 * that the target raises the events a write raises (FI_RMA_EVENT counters), if it has a
 * counter that counts them: the window says so, and otherwise nothing reaches the target.
 *
 * Writes from COUR_SPLIT_MIN on keep the shared copy (proto/cour_rma_split.c): two processes
 * copying halves at once move a big write faster than the initiator alone.
 *
 * Only when nothing else of ours is in flight to that peer: the copy overtakes everything
 * queued, and the endpoint promises order (RAW, WAR, WAW, SAW, WAS). Not for writes carrying
 * remote CQ data (the target must see those in order with its receives), nor when a window
 * cannot be found or entered, nor when the kernel refuses the copy: then nothing was written
 * and the write goes the checked way, which also reports the right error for a bad key or
 * range. A region that closes, or an endpoint, takes its windows back first, waiting out
 * initiators inside (one system call each).
 */
#include "proto/cour_engine.h"
#include "wire/cour_shm_window.h"

#define COUR_PUSH_WAIT_US  (10u * 1000 * 1000)   /* an initiator inside this long: close anyway */
#define COUR_PUSH_HELD_US  1000                  /* how old "the owner holds its ring" may be */

/* ---- target: windows on our regions ---- */

static bool cour_push_offers(const struct cour_pep *ep, const struct cour_region *mr)
{
	return cour_params.shm_push && ep->shm_ring && ep->enabled && mr->enabled && mr->len &&
	       (mr->access & FI_REMOTE_WRITE) && (!mr->only || mr->only == ep);
}

/* Does the target count remote writes into mr (a notice of each pushed write)? */
static bool cour_push_counted(const struct cour_pep *ep, const struct cour_region *mr)
{
	return (ep->target_events | mr->counted) & FI_REMOTE_WRITE;
}

void cour_rma_push_offer(struct cour_pep *ep, struct cour_region *mr)
{
	uint32_t slot;

	cour_lock_assert_held(ep->lock);
	if (!cour_push_offers(ep, mr))
		return;
	for (uint32_t i = 0; i < COUR_SHM_WINDOWS; i++)
		if (ep->win_mr[i] == mr)
			return;
	/* all windows taken: writes to this region go the checked way, no harm done */
	if (cour_shm_window_publish(ep->shm_ring, mr->key, mr->start, mr->len, mr->base,
				    cour_push_counted(ep, mr), &slot))
		return;
	ep->win_mr[slot] = mr;
}

void cour_rma_push_offer_all(struct cour_pep *ep)
{
	struct cour_region *mr, *tmp;

	HASH_ITER(hh, ep->pdom->regions, mr, tmp)
		cour_rma_push_offer(ep, mr);
}

void cour_rma_push_mr_ready(struct cour_pdom *pdom, struct cour_region *mr)
{
	struct cour_pep *ep;

	DL_FOREACH2(pdom->peps, ep, pdom_next)
		cour_rma_push_offer(ep, mr);
}

/* A counter was bound to mr after its windows went up */
void cour_rma_push_mr_counted(struct cour_pdom *pdom, const struct cour_region *mr)
{
	struct cour_pep *ep;

	DL_FOREACH2(pdom->peps, ep, pdom_next)
		for (uint32_t i = 0; i < COUR_SHM_WINDOWS; i++)
			if (ep->win_mr[i] == mr)
				cour_shm_window_set_notify(ep->shm_ring, i,
							   cour_push_counted(ep, mr));
}

static void cour_push_withdraw(struct cour_pep *ep, uint32_t slot)
{
	if (!cour_shm_window_withdraw(ep->shm_ring, slot, COUR_PUSH_WAIT_US))
		COUR_WARN(FI_LOG_MR, "region 0x%" PRIx64 ": a same-host initiator was still "
			  "writing into it after %u s (dead, or stopped in the kernel); closed "
			  "anyway\n", ep->win_mr[slot]->key, COUR_PUSH_WAIT_US / 1000000);
	ep->win_mr[slot] = NULL;
}

void cour_rma_push_mr_closing(struct cour_pdom *pdom, const struct cour_region *mr)
{
	struct cour_pep *ep;

	DL_FOREACH2(pdom->peps, ep, pdom_next)
		for (uint32_t i = 0; i < COUR_SHM_WINDOWS; i++)
			if (ep->win_mr[i] == mr)
				cour_push_withdraw(ep, i);
}

void cour_rma_push_ep_close(struct cour_pep *ep)
{
	for (uint32_t i = 0; i < COUR_SHM_WINDOWS; i++)
		if (ep->win_mr[i])
			cour_push_withdraw(ep, i);
}

/* WRITE|CMA|PUSHED: the initiator wrote through our window; count the write's events. */
void cour_rma_push_rx(struct cour_peer *peer, const struct cour_pkt_hdr *hdr, size_t plen)
{
	struct cour_pep *ep = peer->ep;
	struct cour_region *mr = NULL;

	if (plen || !(hdr->base.flags & COUR_F_CMA) || !peer->shm) {
		COUR_DROP_BAD(ep, "PUSHED notice with a payload, or from a peer off our host");
		return;
	}
	/* a region closed since: its window was withdrawn after the copy, nothing to raise */
	if (cour_region_check(ep, hdr->msg.tag, hdr->msg.raddr, hdr->msg.total_len,
				 FI_REMOTE_WRITE, NULL, &mr))
		return;
	ep->stats.shm_push_notices++;
	cour_rma_target_event(ep, mr, FI_REMOTE_WRITE, NULL, hdr->base.flags);
}

/* ---- initiator ---- */

/*
 * Our mapping of a peer's ring outlives the peer: after it exits or execs, its windows still
 * read OPEN, and its pid (pid_max may be 32768) can come to name another process of ours,
 * whose memory we would write. So before pushing we want to know that the owner still holds
 * the ring under the fd it named, asked at most every COUR_PUSH_HELD_US: a pid cannot be
 * reused that fast (the kernel hands them out in a cycle), which leaves an exec of the target
 * in the last millisecond, the same window a shared copy's lease has.
 */
static bool cour_push_owner_holds(struct cour_peer *peer)
{
	uint64_t now = cour_now_us();

	if (now - peer->push_held_us < COUR_PUSH_HELD_US)
		return true;
	if (!cour_shm_ring_owner_holds(peer->shm))
		return false;
	peer->push_held_us = now;
	return true;
}

bool cour_rma_push_try(struct cour_peer *peer, struct cour_txe *txe)
{
	struct cour_pep *ep = peer->ep;
	struct cour_txe *n = NULL;
	uint64_t dst, gen;
	uint32_t slot;
	int rc;

	/* from COUR_SPLIT_MIN on, both processes copying halves at once beats one copier */
	if (!cour_params.shm_push || txe->msg_len >= COUR_SPLIT_MIN || !peer->via_shm ||
	    !peer->shm || peer->cma_off || (txe->hdr_flags & COUR_F_CQ_DATA) ||
	    txe->iov_count != 1 || !cour_peer_tx_idle(peer) || !cour_push_owner_holds(peer))
		return false;
	if (!cour_shm_window_enter(peer->shm, txe->tag, txe->raddr, txe->msg_len, &dst, &slot,
				   &gen))
		return false;
	if (cour_shm_window_notify(peer->shm, slot)) {
		n = cour_ctrl_txe(peer, COUR_PKT_WRITE, txe->msg_id, 0, COUR_F_CMA | COUR_F_PUSHED);
		if (!n) {
			cour_shm_window_leave(peer->shm, slot, gen);
			return false;
		}
	}
	rc = cour_cma_push(peer, txe->iov, txe->iov_count, dst, txe->msg_len);
	cour_shm_window_leave(peer->shm, slot, gen);
	if (rc) {
		/* nothing we can tell apart from a partial copy: the checked way writes it all
		 * again, or reports what the target finds wrong */
		if (n)
			cour_pool_put(&ep->txe_pool, n);
		return false;
	}
	if (n) {
		n->tag = txe->tag;
		n->raddr = txe->raddr;
		n->msg_len = txe->msg_len;
		n->notice = true;  /* the engine's own: freed once in the ring, never reported */
		n->resp_done = true;
		cour_peer_enqueue(peer, n);
	}
	ep->stats.shm_rma_pushed++;
	cour_txe_complete(ep, txe, 0, 0);
	return true;
}
