/*
 * courier: provider-wide definitions shared by every object and by the protocol engine.
 *
 * Object model (one file each): fabric -> domain -> {av, cq, cntr, eq, mr, ep}.
 * Dependencies point one way: fi_ops adapters (cour_msg.c, cour_tagged.c) -> protocol engine
 * (proto/) -> wires (wire/) -> utilities (util/).
 *
 * Locking design, written once here:
 *   Every object that belongs to a domain is guarded by the domain's single lock, the "progress
 *   lock" (struct cour_domain.lock). API entry points take it, do their work (which may run the
 *   progress engine) and drop it; internal helpers named *_locked assert that it is held.
 *   The lock is a real mutex whenever two threads can meet in the engine: progress walks every
 *   endpoint of the domain, so every threading level but FI_THREAD_DOMAIN can, and so can a
 *   progress thread. Under FI_THREAD_DOMAIN with no progress thread it costs nothing
 *   (cour_attr_lock_needed).
 *   Waiting (fi_cq_sread, fi_cntr_wait, fi_eq_sread) never holds the lock while asleep.
 */
#ifndef COUR_H
#define COUR_H

#include "util/cour_util.h"
#include "util/cour_params.h"
#include "util/cour_threads.h"
#include "proto/cour_pdom.h"

#include <sched.h>

#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_tagged.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_atomic.h>

#include <uthash.h>
#include <utlist.h>

#define COUR_PROV_NAME    "courier"
#define COUR_FABRIC_NAME  "courier"
#define COUR_DOMAIN_NAME  "udp"
/* the project's version (configure.ac), as fi_info shows it */
#define COUR_PROV_VERSION FI_VERSION(COUR_VERSION_MAJOR, COUR_VERSION_MINOR)
#define COUR_FI_VERSION   FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION)

/*
 * The legacy mr_mode values and FI_ORDER_NONE are ABI (applications of API < 1.5 still pass
 * them, and fi_mr(3) says how to answer), but libfabric 2.x deprecates their names: courier
 * uses its own, checked against the headers that still define them plainly.
 */
#define COUR_MR_UNSPEC   0
#define COUR_MR_BASIC    (1 << 0)
#define COUR_MR_SCALABLE (1 << 1)
#define COUR_ORDER_NONE  0ULL
#if FI_MAJOR_VERSION < 2
_Static_assert(FI_MR_UNSPEC == COUR_MR_UNSPEC && FI_MR_BASIC == COUR_MR_BASIC &&
	       FI_MR_SCALABLE == COUR_MR_SCALABLE && FI_ORDER_NONE == COUR_ORDER_NONE,
	       "legacy mr_mode and FI_ORDER_NONE values");
#endif

/*
 * FI_PROGRESS_CONTROL_UNIFIED (libfabric 1.21, in control_progress; 2.x, in progress, the
 * field 1.x calls data_progress): the application serializes control and data calls, which
 * implies manual progress (fi_domain(3)). Open MPI's btl/ofi after 5.0 asks it under
 * FI_THREAD_DOMAIN when built against libfabric 1.21 or later.
 * 1.17's headers do not name it; the value is ABI.
 */
#define COUR_PROGRESS_CONTROL_UNIFIED 3
#ifdef FI_PROGRESS_CONTROL_UNIFIED
_Static_assert(FI_PROGRESS_CONTROL_UNIFIED == COUR_PROGRESS_CONTROL_UNIFIED,
	       "FI_PROGRESS_CONTROL_UNIFIED");
#endif


/* ---- fabric ---- */
struct cour_fabric {
	struct fid_fabric fabric_fid;
	int               refcnt;     /* domains and eqs opened on it; atomic */
};

/* ---- domain ---- */
struct cour_ep;
struct cour_cq;
struct cour_cntr;

struct cour_domain {
	struct fid_domain   domain_fid;
	struct cour_fabric *fabric;
	struct fi_info     *info;          /* our copy of the info the domain was opened with */
	struct cour_lock    lock;          /* the progress lock */
	int                 refcnt;        /* objects opened on the domain; atomic */
	enum fi_threading   threading;
	enum fi_progress    data_progress;
	uint64_t            mr_mode;

	struct cour_pdom    pdom;          /* the engine's half: enabled endpoints (to progress),
					    * registered regions (proto/cour_region.h) */

	/* automatic progress: a thread that sleeps on the endpoints' fds and the next timer */
	struct cour_thread  progress_thread; /* entered in util/cour_threads.c while it runs */
	bool                thread_running;
	bool                progress_thread_on; /* auto progress, or manual with manual_thread */
	volatile bool       thread_stop;
	int                 wake_fd;       /* eventfd: kicks the thread (new ep, close) */
	uint64_t            app_polls;       /* progress calls by the application, not the thread */
	bool                shm_ready;       /* an armed ring already held packets: do not sleep */
	struct cour_trig   *trig_wait;       /* triggered operations: waiting for their counter */
	struct cour_trig   *trig_ready;      /* ...and reached, to post (cour_trigger.c) */
	struct cour_mcond  *mconds;          /* FI_WAIT_MUTEX_COND CQs and counters (cour_cq.h) */
	bool                idle_yield;      /* an endpoint waits on the network (cour_idle_poll) */
	uint64_t            quick_tsc;       /* time-stamp counter at the last full pass a poll
					      * ran (cour_domain_poll_locked) */
	/* the secret its endpoints authenticate datagrams with unless they bring their own
	 * (cour_auth.c): domain_attr->auth_key, else FI_COURIER_AUTH_KEY_FILE's; len 0: none */
	void               *auth_key;
	size_t              auth_key_len;
};

/* Run the protocol engine once for every endpoint of the domain. Lock held. */
struct cour_trig;
void cour_domain_progress_locked(struct cour_domain *dom);

/* An application's poll (fi_cq_read): a full pass, or when only rings and mailboxes can
 * bring anything and they hold nothing, a look at them alone (cour_progress.c). Lock held. */
void cour_domain_poll_locked(struct cour_domain *dom);

/* Lock, progress, unlock: what every CQ/counter/EQ read and wait does first. */
static inline void cour_domain_progress(struct cour_domain *dom)
{
	cour_lock_acquire(&dom->lock);
	cour_domain_progress_locked(dom);
	cour_lock_release(&dom->lock);
}

/* Bound on the next wait: microseconds until the earliest engine timer (ack, retransmit,
 * unreachable check) of any endpoint in the domain, or -1 when none is armed. Lock held. */
int64_t cour_domain_next_timer_locked(struct cour_domain *dom, uint64_t now);

/* Fill pfds (at most max) with the fds a sleeper must watch for this domain's endpoints. Lock held.
 * Returns the count. */
struct pollfd;
int cour_domain_poll_fds_locked(struct cour_domain *dom, struct pollfd *pfds, int max);

/*
 * Sleep until something may have happened in the domain: a packet on any endpoint fd, a signal
 * on extra_fd (>= 0), or the next engine timer, bounded by timeout_ms (-1: no bound of the
 * caller's own). Called WITHOUT the lock. Returns after at most one wake-up; the caller then
 * progresses and re-checks its condition.
 */
void cour_domain_wait(struct cour_domain *dom, int extra_fd, int timeout_ms);
/* The same over several domains at once (a wait set's members). */
void cour_domains_wait(struct cour_domain **doms, int ndoms, int extra_fd, int timeout_ms);

/*
 * An application read that found nothing. While data comes over the network, a process that
 * polls in a loop on a busy host holds a cpu that the kernel's delivery of its packets may
 * need (two namespaces beside two busy processes: 8 B ping-pong timed out 2-4 times in 15
 * before this yield): every COUR_IDLE_YIELD empty reads in a row it yields. Not while only
 * same-host rings bring data (net false, cour_ep_waits_on_net): there the yield handed a
 * busy process a whole time slice per message. With nothing else runnable, sched_yield
 * returns at once.
 */
#define COUR_IDLE_YIELD 64
/* Counts an empty read in *idle (the CQ's, lock held: a thread-local counter cost a call to
 * __tls_get_addr per read in a dlopen'ed provider, 2% of a polling rank): true when the
 * caller should yield, after dropping the lock. */
static inline bool cour_idle_poll(uint32_t *idle, bool found, bool net)
{
	if (found) {
		*idle = 0;
		return false;
	}
	return COUR_UNLIKELY(++*idle % COUR_IDLE_YIELD == 0) && net;
}

/* Wake the progress thread so it sees a new endpoint or a closing domain. */
void cour_domain_kick(struct cour_domain *dom);
/* cour_atomic.c: fi_query_atomic */
int  cour_domain_query_atomic(struct fid_domain *domain, enum fi_datatype dt, enum fi_op op,
			      struct fi_atomic_attr *attr, uint64_t flags);

/* ---- provider entry points (cour_attr.c, cour_fabric.c) ---- */
int cour_getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
		 const struct fi_info *hints, struct fi_info **info);
int cour_fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context);
/* ---- cour_auth.c: where an endpoint's secret comes from ---- */
/* 0 if len fits a key (16 to 4096 bytes), else -FI_EINVAL, logged naming what. */
int  cour_auth_key_ok(size_t len, const char *what);
/* A copy of the secret info names: with_ep, its ep_attr->auth_key first; then its
 * domain_attr->auth_key; then FI_COURIER_AUTH_KEY_FILE's. 0 with *len 0: none. */
int  cour_auth_key(const struct fi_info *info, bool with_ep, void **key, size_t *len);
/* A copy of len bytes of src in *key (malloc'd), *key_len = len: 0 or -FI_ENOMEM. */
int  cour_auth_dup(const void *src, size_t len, void **key, size_t *key_len);
void cour_auth_key_free(void *key, size_t len);

int cour_domain_open(struct fid_fabric *fabric, struct fi_info *info, struct fid_domain **dom,
		     void *context);
int cour_eq_open(struct fid_fabric *fabric, struct fi_eq_attr *attr, struct fid_eq **eq,
		 void *context);
int cour_av_open(struct fid_domain *domain, struct fi_av_attr *attr, struct fid_av **av,
		 void *context);
int cour_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr, struct fid_cq **cq,
		 void *context);
int cour_cntr_open(struct fid_domain *domain, struct fi_cntr_attr *attr, struct fid_cntr **cntr,
		   void *context);
int cour_poll_open(struct fid_domain *domain, struct fi_poll_attr *attr,
		   struct fid_poll **pollset);
int cour_ep_open(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep,
		 void *context);

/* ---- "not supported" slots for ops tables (libfabric exports none of its own) ---- */
int cour_no_close(struct fid *fid);
int cour_no_bind(struct fid *fid, struct fid *bfid, uint64_t flags);
int cour_no_control(struct fid *fid, int command, void *arg);
int cour_no_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops, void *context);
int cour_no_tostr(const struct fid *fid, char *buf, size_t len);
int cour_no_ops_set(struct fid *fid, const char *name, uint64_t flags, void *ops, void *context);
int cour_no_connect(struct fid_ep *ep, const void *addr, const void *param, size_t len);
int cour_no_listen(struct fid_pep *pep);
int cour_no_accept(struct fid_ep *ep, const void *param, size_t len);
int cour_no_reject(struct fid_pep *pep, fid_t handle, const void *param, size_t len);
int cour_no_shutdown(struct fid_ep *ep, uint64_t flags);
int cour_no_join(struct fid_ep *ep, const void *addr, uint64_t flags, struct fid_mc **mc,
		 void *context);
int cour_no_getpeer(struct fid_ep *ep, void *addr, size_t *addrlen);

#endif /* COUR_H */
