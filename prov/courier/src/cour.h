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
 *   The lock is a real mutex only when someone can race: FI_THREAD_SAFE, or a progress thread
 *   (FI_PROGRESS_AUTO). Under FI_THREAD_DOMAIN/COMPLETION with manual progress it costs nothing.
 *   Waiting (fi_cq_sread, fi_cntr_wait, fi_eq_sread) never holds the lock while asleep.
 */
#ifndef COUR_H
#define COUR_H

#include <config.h>

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_atomic.h>
#include <rdma/providers/fi_log.h>
#include <rdma/providers/fi_prov.h>

#include <uthash.h>
#include <utlist.h>

#define COUR_PROV_NAME    "courier"
#define COUR_FABRIC_NAME  "courier"
#define COUR_DOMAIN_NAME  "udp"
#define COUR_PROV_VERSION FI_VERSION(0, 1)
#define COUR_FI_VERSION   FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION)

#define COUR_HIDDEN __attribute__((visibility("hidden")))
#define COUR_LIKELY(x)   __builtin_expect(!!(x), 1)
#define COUR_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define COUR_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define COUR_CONTAINER_OF(ptr, type, field) ((type *)((char *)(ptr) - offsetof(type, field)))
#define COUR_MIN(a, b) ((a) < (b) ? (a) : (b))
#define COUR_MAX(a, b) ((a) > (b) ? (a) : (b))

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

extern struct fi_provider cour_prov;

#define COUR_WARN(subsys, ...) FI_WARN(&cour_prov, subsys, __VA_ARGS__)
#define COUR_INFO(subsys, ...) FI_INFO(&cour_prov, subsys, __VA_ARGS__)
#define COUR_DBG(subsys, ...)  FI_LOG(&cour_prov, FI_LOG_DEBUG, subsys, __VA_ARGS__)

/* ---- parameters (FI_COURIER_*), read once at fi_prov_ini; see cour_init.c and the man page ---- */
struct cour_params {
	size_t   mtu;              /* max UDP payload per packet, bytes (0: per peer, from the route) */
	size_t   window;           /* send window, packets per peer */
	size_t   credits;          /* eager messages a sender may have unconsumed at a receiver */
	size_t   eager_max;        /* largest message sent eagerly; larger ones use rendezvous */
	size_t   inject_size;      /* bytes copied at call time by fi_inject and FI_INJECT */
	size_t   tx_size;          /* transmit queue depth per endpoint */
	size_t   rx_size;          /* posted receives guaranteed per endpoint (more may be posted) */
	size_t   unexp_max;        /* unexpected bytes buffered with their credit already back */
	int      ack_delay_us;     /* how long an ACK may wait for a packet to ride on */
	int      rto_min_us;       /* retransmit timeout floor */
	int      rto_max_us;       /* retransmit timeout ceiling (after backoff) */
	int      peer_timeout_ms;  /* silence after which a peer with pending work is unreachable */
	int      peer_warn_ms;     /* silence after which that is said once (warning) */
	int      refused_grace_ms; /* a peer whose host refuses us may be silent this long */
	int      linger_ms;        /* fi_close of an endpoint waits this long for sends to land */
	int      manual_thread;    /* a progress thread under FI_PROGRESS_MANUAL too */
	int      checksum;         /* also checksum payloads (headers are always checked) */
	int      stats;            /* print per-endpoint statistics at close */
	size_t   sockbuf;          /* SO_SNDBUF / SO_RCVBUF request, bytes */
	char    *iface_addr;       /* local address to bind when no node is given */
	char    *fault;            /* fault injection spec, see wire/cour_fault.c */
	char    *wire;             /* "udp" (default) or "loop" (one process, for tests) */
	int      shm;              /* same-host peers through shared memory */
	int      shm_push;         /* same-host RMA writes copied by the initiator into windows */
	int      cma_refuse_after; /* tests: single copies past this many fail as refused; -1 */
	int      lease_hold_ms;    /* tests: an initiator holds a shared RMA's lease this long */
};
extern struct cour_params cour_params;

/* ---- time ---- */
static inline uint64_t cour_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/*
 * Microseconds from then to now, 0 if then is later. A progress pass reads the clock once and
 * hands that reading around (ep->now_us), while packets handled in the pass stamp peers with
 * fresher readings: a plain now - then would wrap to ~2^64 and call a peer heard a microsecond
 * ago silent for ever (it did: spurious FI_EHOSTUNREACH under load).
 */
static inline uint64_t cour_us_since(uint64_t now, uint64_t then)
{
	return now > then ? now - then : 0;
}

/* ---- the progress lock (see the essay at the top of this file) ---- */
struct cour_lock {
	pthread_mutex_t mutex;
	bool            active;     /* false: a single thread drives everything, no lock needed */
	pthread_t       owner;      /* for assertions only, valid while held and active */
	int             held;
};

static inline void cour_lock_init(struct cour_lock *l, bool active)
{
	pthread_mutex_init(&l->mutex, NULL);
	l->active = active;
	l->held = 0;
}

static inline void cour_lock_destroy(struct cour_lock *l)
{
	pthread_mutex_destroy(&l->mutex);
}

static inline void cour_lock_acquire(struct cour_lock *l)
{
	if (l->active)
		pthread_mutex_lock(&l->mutex);
	l->held++;
}

static inline void cour_lock_release(struct cour_lock *l)
{
	assert(l->held > 0);
	l->held--;
	if (l->active)
		pthread_mutex_unlock(&l->mutex);
}

#define cour_lock_assert_held(l) assert((l)->held > 0)

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

	struct cour_ep     *eps;           /* endpoints to progress, utlist DL via ep->dom_next */
	struct cour_mr     *mr_by_key;     /* uthash of registered regions (cour_mr.c) */

	/* automatic progress: a thread that sleeps on the endpoints' fds and the next timer */
	pthread_t           progress_thread;
	bool                thread_running;
	bool                progress_thread_on; /* auto progress, or manual with manual_thread */
	volatile bool       thread_stop;
	int                 wake_fd;       /* eventfd: kicks the thread (new ep, close) */
	uint64_t            app_polls;       /* progress calls by the application, not the thread */
	bool                shm_ready;       /* an armed ring already held packets: do not sleep */
};

/* Run the protocol engine once for every endpoint of the domain. Lock held. */
void cour_domain_progress_locked(struct cour_domain *dom);

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

/* Wake the progress thread so it sees a new endpoint or a closing domain. */
void cour_domain_kick(struct cour_domain *dom);
/* cour_atomic.c: fi_query_atomic */
int  cour_domain_query_atomic(struct fid_domain *domain, enum fi_datatype dt, enum fi_op op,
			      struct fi_atomic_attr *attr, uint64_t flags);
/* proto/cour_rma_proto.c: a region is closing; reads still served from it are copied aside,
 * and copies shared with initiators end (proto/cour_rma_split.c) */
struct cour_mr;
void cour_rma_mr_closing(struct cour_domain *dom, const struct cour_mr *mr);

/* ---- domain helpers used by every object ---- */
static inline void cour_ref_inc(int *ref) { __atomic_add_fetch(ref, 1, __ATOMIC_RELAXED); }
static inline int  cour_ref_dec(int *ref) { return __atomic_sub_fetch(ref, 1, __ATOMIC_RELAXED); }
static inline int  cour_ref_get(int *ref) { return __atomic_load_n(ref, __ATOMIC_RELAXED); }

/* ---- provider entry points (cour_attr.c, cour_fabric.c) ---- */
int cour_getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
		 const struct fi_info *hints, struct fi_info **info);
int cour_fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context);
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
int cour_ep_open(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep,
		 void *context);

/* ---- "not supported" slots for ops tables (libfabric exports none of its own) ---- */
int cour_no_close(struct fid *fid);
int cour_no_bind(struct fid *fid, struct fid *bfid, uint64_t flags);
int cour_no_control(struct fid *fid, int command, void *arg);
int cour_no_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops, void *context);
int cour_no_tostr(const struct fid *fid, char *buf, size_t len);
int cour_no_ops_set(struct fid *fid, const char *name, uint64_t flags, void *ops, void *context);

#endif /* COUR_H */
