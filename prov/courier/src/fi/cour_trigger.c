/*
 * Triggered operations (fi_trigger(3)): a transfer posted with FI_TRIGGER (in the call's flags,
 * or the default flags of an alias made with it) names a struct fi_triggered_context as its
 * context: FI_TRIGGER_THRESHOLD, a counter and a threshold. It is posted when the counter's
 * success value reaches the threshold, exactly as if the application had called it then with
 * FI_TRIGGER cleared; its completion reports the triggered context.
 *
 * The arguments are copied (iovecs and ioc arrays; the data stays the application's, which
 * must keep it valid until the operation completes). Waiting ones sit on the domain's
 * trig_wait list, holding a reference on their counter (which cannot close under them).
 * A counter that moves makes the ones it satisfied ready (cour_trig_check_locked, from every
 * place a counter changes); ready ones are posted at the end of a progress pass or right after
 * the application's own fi_cntr_add/set, never from inside the engine's completion path,
 * which is where counters usually move. One that cannot be posted for lack of room
 * (-FI_EAGAIN) stays ready and is tried on the next pass; any other failure completes it in
 * error on the endpoint's transmit (or receive) CQ, as a failed post would have been reported.
 */
#include "cour_ep.h"

#include <rdma/fi_trigger.h>
#include <stdlib.h>
#include <string.h>

struct cour_trig {
	struct cour_trig    *next;
	struct cour_ep      *ep;
	struct cour_cntr    *cntr;
	uint64_t             threshold;
	struct cour_trig_op  op;
	struct iovec         iov[COUR_IOV_MAX];
	struct fi_ioc        ioc[3][COUR_IOV_MAX];    /* atomic: operands, compare, result */
};

static ssize_t cour_trig_post_now(struct cour_ep *ep, const struct cour_trig_op *op)
{
	switch (op->kind) {
	case COUR_TRIG_SEND:
		return cour_msg_send(&ep->pep, op->iov, op->count, op->addr, op->tag, op->data,
				     op->context, op->flags, op->cq_flags);
	case COUR_TRIG_RECV:
		return cour_msg_recv(&ep->pep, op->iov, op->count, op->addr, op->tag, op->ignore,
				     op->context, op->flags, op->tagged);
	case COUR_TRIG_RMA:
		return cour_rma_post(&ep->pep, op->rma_type, op->iov, op->count, op->addr,
				     op->raddr, op->key, op->data, op->context, op->flags,
				     op->cq_flags);
	default:
		return cour_atomic_post(&ep->pep, &op->atomic);
	}
}

/* With the routing the original post had (a scalable endpoint's context) */
ssize_t cour_trig_post_locked(struct cour_ep *ep, const struct cour_trig_op *op)
{
	ssize_t ret;

	ep->pep.tx_owner = op->tx_owner;
	ep->pep.tx_rx_ctx = op->tx_rx_ctx;
	if (op->rx_q)
		ep->pep.rxq = op->rx_q;
	ret = cour_trig_post_now(ep, op);
	cour_post_end(ep);
	return ret;
}

static bool cour_trig_copy_iocs(struct fi_ioc *dst, const struct fi_ioc *src, size_t n)
{
	if (n > COUR_IOV_MAX)
		return false;
	if (n)
		memcpy(dst, src, n * sizeof(*src));
	return true;
}

ssize_t cour_trig_defer_locked(struct cour_ep *ep, const struct cour_trig_op *op)
{
	const struct fi_triggered_context *tc = op->kind == COUR_TRIG_ATOMIC ?
						op->atomic.context : op->context;
	struct cour_domain *dom = ep->domain;
	struct cour_cntr *c;
	struct cour_trig *t;

	if (!(ep->info->caps & FI_TRIGGER)) {
		COUR_WARN(FI_LOG_EP_DATA, "FI_TRIGGER on an endpoint opened without the "
			  "FI_TRIGGER capability\n");
		return -FI_EINVAL;
	}
	if (!tc || tc->event_type != FI_TRIGGER_THRESHOLD || !tc->trigger.threshold.cntr ||
	    tc->trigger.threshold.cntr->fid.fclass != FI_CLASS_CNTR) {
		COUR_WARN(FI_LOG_EP_DATA, "a triggered operation's context must be a struct "
			  "fi_triggered_context of FI_TRIGGER_THRESHOLD with a counter\n");
		return -FI_EINVAL;
	}
	c = COUR_CONTAINER_OF(tc->trigger.threshold.cntr, struct cour_cntr, cntr_fid);
	if (c->domain != dom) {
		COUR_WARN(FI_LOG_EP_DATA, "a triggered operation's counter is of another "
			  "domain\n");
		return -FI_EINVAL;
	}
	if (__atomic_load_n(&c->value, __ATOMIC_ACQUIRE) >= tc->trigger.threshold.threshold) {
		struct cour_trig_op now = *op;

		now.flags &= ~FI_TRIGGER;
		now.atomic.flags &= ~FI_TRIGGER;
		return cour_trig_post_locked(ep, &now);
	}
	if ((op->kind != COUR_TRIG_ATOMIC && op->count > COUR_IOV_MAX)) {
		COUR_WARN(FI_LOG_EP_DATA, "%zu iovecs: iov_limit is %d\n", op->count,
			  COUR_IOV_MAX);
		return -FI_EINVAL;
	}
	t = calloc(1, sizeof(*t));
	if (!t)
		return -FI_ENOMEM;
	t->ep = ep;
	t->cntr = c;
	t->threshold = tc->trigger.threshold.threshold;
	t->op = *op;
	t->op.flags &= ~FI_TRIGGER;
	if (op->kind == COUR_TRIG_ATOMIC) {
		struct cour_atomic_args *a = &t->op.atomic;

		a->flags &= ~FI_TRIGGER;
		if (!cour_trig_copy_iocs(t->ioc[0], a->iov, a->count) ||
		    !cour_trig_copy_iocs(t->ioc[1], a->compare, a->compare_count) ||
		    !cour_trig_copy_iocs(t->ioc[2], a->result, a->result_count)) {
			free(t);
			COUR_WARN(FI_LOG_EP_DATA, "more than %d iocs\n", COUR_IOV_MAX);
			return -FI_EINVAL;
		}
		a->iov = a->iov ? t->ioc[0] : NULL;
		a->compare = a->compare ? t->ioc[1] : NULL;
		a->result = a->result ? t->ioc[2] : NULL;
	} else if (op->count) {
		memcpy(t->iov, op->iov, op->count * sizeof(*op->iov));
		t->op.iov = t->iov;
	}
	cour_ref_inc(&c->refcnt);
	t->next = dom->trig_wait;
	dom->trig_wait = t;
	return 0;
}

void cour_trig_check_locked(struct cour_domain *dom, struct cour_cntr *c)
{
	uint64_t v = __atomic_load_n(&c->value, __ATOMIC_ACQUIRE);
	struct cour_trig **pp = &dom->trig_wait;

	while (*pp) {
		struct cour_trig *t = *pp;

		if (t->cntr != c || v < t->threshold) {
			pp = &t->next;
			continue;
		}
		*pp = t->next;
		/* ready ones keep the order they were posted in, so append */
		t->next = NULL;
		struct cour_trig **tail = &dom->trig_ready;

		while (*tail)
			tail = &(*tail)->next;
		*tail = t;
	}
}

/* A triggered operation that could not be posted completes in error where its post would
 * have been reported. */
static void cour_trig_fail(struct cour_trig *t, int err)
{
	struct cour_pep *pep = &t->ep->pep;

	COUR_WARN(FI_LOG_EP_DATA, "a triggered operation failed to post: %s\n",
		  fi_strerror(err));
	if (t->op.kind == COUR_TRIG_RECV) {
		struct cour_cq_entry e = {
			.op_context = t->op.context,
			.flags = FI_RECV | (t->op.tagged ? FI_TAGGED : FI_MSG),
			.src = FI_ADDR_NOTAVAIL,
		};
		pep->up->rx_done(pep, t->op.rx_q, &e, t->op.flags | FI_COMPLETION, err, 0, 0);
		return;
	}
	struct cour_txe tmp = {
		.context = t->op.kind == COUR_TRIG_ATOMIC ? t->op.atomic.context : t->op.context,
		.op_flags = (t->op.kind == COUR_TRIG_ATOMIC ? t->op.atomic.flags : t->op.flags) |
			    FI_COMPLETION,
		.cq_flags = t->op.kind == COUR_TRIG_ATOMIC ? FI_ATOMIC | FI_WRITE :
			    t->op.cq_flags & ~COUR_CQF_NOCOMP,
	};
	pep->up->tx_done(pep, &tmp, err, 0);
}

void cour_trig_fire_locked(struct cour_domain *dom)
{
	struct cour_trig *t, *keep = NULL, **keep_tail = &keep;

	while ((t = dom->trig_ready)) {
		ssize_t ret;

		dom->trig_ready = t->next;
		t->next = NULL;
		ret = t->ep->pep.enabled ? cour_trig_post_locked(t->ep, &t->op) : -FI_EOPBADSTATE;
		if (ret == -FI_EAGAIN) {
			*keep_tail = t;
			keep_tail = &t->next;
			continue;
		}
		if (ret)
			cour_trig_fail(t, (int)-ret);
		cour_ref_dec(&t->cntr->refcnt);
		free(t);
	}
	dom->trig_ready = keep;
}

static bool cour_trig_of_ctx(const struct cour_trig *t, const struct cour_sep_ctx *x)
{
	return t->op.tx_owner == x || (x->q && t->op.rx_q == x->q);
}

void cour_trig_drop_owner_locked(struct cour_domain *dom, const struct cour_sep_ctx *x)
{
	struct cour_trig **lists[2] = { &dom->trig_wait, &dom->trig_ready };

	for (int i = 0; i < 2; i++) {
		struct cour_trig **pp = lists[i];

		while (*pp) {
			struct cour_trig *t = *pp;

			if (!cour_trig_of_ctx(t, x)) {
				pp = &t->next;
				continue;
			}
			*pp = t->next;
			cour_ref_dec(&t->cntr->refcnt);
			free(t);
		}
	}
}

void cour_trig_drop_ep_locked(struct cour_domain *dom, struct cour_ep *ep)
{
	struct cour_trig **lists[2] = { &dom->trig_wait, &dom->trig_ready };
	unsigned dropped = 0;

	for (int i = 0; i < 2; i++) {
		struct cour_trig **pp = lists[i];

		while (*pp) {
			struct cour_trig *t = *pp;

			if (t->ep != ep) {
				pp = &t->next;
				continue;
			}
			*pp = t->next;
			cour_ref_dec(&t->cntr->refcnt);
			free(t);
			dropped++;
		}
	}
	if (dropped)
		COUR_INFO(FI_LOG_EP_CTRL, "endpoint closed with %u triggered operation(s) that "
			  "never fired\n", dropped);
}
