/*
 * Completion queues and counters: the engine's only way of telling the application anything.
 * The engine calls the *_locked writers with the domain's progress lock held; the fi_ops read
 * and wait paths (cour_cq.c, cour_cntr.c) take the lock, progress the domain, then read.
 */
#ifndef COUR_CQ_H
#define COUR_CQ_H

#include "cour_fi.h"
#include "proto/cour_engine.h"

/* struct cour_cq_entry, one completion as the engine reports it, is proto/cour_pep.h's;
 * formatted per the CQ's fi_cq_format on read. */

/* An error completion waiting in cq->errs. It reaches the head of the CQ once every success
 * written before it (seq of them in the CQ's lifetime) has been read. */
struct cour_cq_err {
	struct cour_cq_err     *next;
	uint64_t                seq;
	struct fi_cq_err_entry  e;         /* err_data NULL, err_data_size 0: we have none to give */
};

struct cour_cq {
	struct fid_cq        cq_fid;
	struct cour_domain  *domain;
	int                  refcnt;       /* endpoints bound to it */
	enum fi_cq_format    format;
	size_t               entry_size;   /* of the application's format */
	enum fi_wait_obj     wait_obj;
	uint32_t             idle_polls;   /* empty reads in a row (cour_idle_poll) */
	/* the last read ran a pass and handed out everything it found: the next read of an
	 * empty queue runs none (cour_cq_readfrom) */
	bool                 drained;
	/* completions: a ring that grows, so that no completion is ever lost to a full queue */
	struct cour_cq_entry *ring;
	size_t               ring_cap, head, count;
	/* error completions, in order, each with its own copy of err_data */
	struct cour_cq_err   *errs, *errs_tail;
	size_t               err_count;
	int                  signal_fd;    /* eventfd: fi_cq_signal and FI_WAIT_FD */
	struct cour_mcond   *mc;           /* FI_WAIT_MUTEX_COND, else NULL */
	struct fid_wait     *wait_set;     /* FI_WAIT_SET: the set watching signal_fd */
	volatile int         waiters;      /* sleepers in sread: writers kick signal_fd if > 0 */
	volatile bool        signaled;     /* fi_cq_signal: wake one sread with -FI_EAGAIN */
	/* Ordering of successes against errors (see struct cour_cq_err): successes ever written
	 * and ever read. */
	uint64_t             succ_in, succ_out;
	enum fi_cq_wait_cond wait_cond;
};

/* Append a successful completion. Never fails (the ring grows); -FI_ENOMEM only if malloc does. */
int cour_cq_write_locked(struct cour_cq *cq, const struct cour_cq_entry *e);
/* Append an error completion: err is positive (FI_ETRUNC, ...); olen for truncation; prov_errno
 * one of enum cour_errno (cour_errno.h). */
int cour_cq_write_err_locked(struct cour_cq *cq, const struct cour_cq_entry *e, int err,
			     int prov_errno, size_t olen);

struct cour_cntr {
	struct fid_cntr      cntr_fid;
	struct cour_domain  *domain;
	int                  refcnt;
	enum fi_wait_obj     wait_obj;
	uint64_t             events;       /* FI_CNTR_EVENTS_COMP (the only kind) */
	volatile uint64_t    value;
	volatile uint64_t    err;
	int                  signal_fd;
	struct cour_mcond   *mc;           /* FI_WAIT_MUTEX_COND, else NULL */
	volatile int         waiters;
	bool                 fd_armed;     /* FI_WAIT_FD: signal_fd readable since the last read */
	bool                 warned_none;  /* fi_cntr_wait on FI_WAIT_NONE said once */
	struct fid_wait     *wait_set;     /* FI_WAIT_SET: the set watching signal_fd */
	/* fi_poll's baseline: the values when a poll set last reported the counter, or when the
	 * application last set or added to it (cour_poll.c) */
	uint64_t             poll_value, poll_err;
};

/* Nothing to read: no entry and no error. Lock held. */
static inline bool cour_cq_empty_locked(const struct cour_cq *cq)
{
	return cq->count == 0 && cq->errs == NULL;
}

void cour_cntr_inc_locked(struct cour_cntr *c);
void cour_cntr_inc_err_locked(struct cour_cntr *c);

/*
 * Event queues belong to the fabric, not to a domain, so they have their own mutex instead of a
 * progress lock: the AV (FI_EVENT) and the application write them from any thread. Events are
 * kept in arrival order, errors among them; the queue grows, it never overruns. With a wait
 * object, signal_fd is readable exactly while the queue holds an event (level-triggered), so
 * poll()/epoll on FI_GETWAIT's fd and fi_eq_sread agree.
 */
struct cour_eq_event;

struct cour_eq {
	struct fid_eq         eq_fid;
	struct cour_fabric   *fabric;
	int                   refcnt;      /* objects bound to it (av, ep): close refuses while > 0 */
	enum fi_wait_obj      wait_obj;
	pthread_mutex_t       mutex;
	struct cour_eq_event *events;      /* utlist DL, oldest first */
	size_t                count;
	void                 *err_data;    /* handed out by the last fi_eq_readerr, freed on the next */
	int                   signal_fd;   /* eventfd, -1 with FI_WAIT_NONE */
	struct fid_wait      *wait_set;    /* FI_WAIT_SET: the set watching signal_fd */
	struct cour_mcond    *mc;          /* FI_WAIT_MUTEX_COND, else NULL */
};

/* Queue an error event (fi_eq_write cannot express one). err->err positive; err->err_data, if
 * err_data_size > 0, is copied. Returns sizeof(*err) or a negative FI_* code. */
ssize_t cour_eq_write_err(struct fid_eq *eq, const struct fi_eq_err_entry *err);
/* Queue an event for the provider's own use (connection management): as fi_eq_write. */
ssize_t cour_eq_post(struct cour_eq *eq, uint32_t event, const void *buf, size_t len);

/* ---- wait objects, shared by CQs, counters and EQs (cour_cq.c) ---- */

/* Validate a wait_obj and create its eventfd (*fd = -1 for FI_WAIT_NONE). FI_WAIT_YIELD is
 * served by blocking; FI_WAIT_MUTEX_COND has an eventfd too (our own waits use it);
 * FI_WAIT_POLLFD is -FI_ENOSYS. */
int cour_wait_fd_open(enum fi_wait_obj wait_obj, enum fi_log_subsys subsys, const char *what,
		      int *fd);
void cour_fd_kick(int fd);     /* make the eventfd readable */
void cour_fd_drain(int fd);    /* make it unreadable again */
/* fi_control FI_GETWAIT (int * for the fd; -FI_ENODATA without one) and FI_GETWAITOBJ. */
int cour_wait_getwait(int fd, int command, void *arg);

/*
 * FI_WAIT_MUTEX_COND (cour_cq.c): the application waits on our condition variable under our
 * mutex; whoever makes the object readable broadcasts it holding that mutex, so a wake-up
 * between the application's check and its wait is never lost. The engine writes completions
 * under the progress lock, and an application may hold the mutex while it calls us: so the
 * engine only ever try-locks it. When the mutex is busy it broadcasts anyway (a waiter
 * already asleep wakes) and marks the wake pending; pending wakes are retried at the end of
 * every progress pass, and the progress thread naps at most 1 ms while one is pending.
 */
struct cour_mcond {
	pthread_mutex_t      mutex;
	pthread_cond_t       cond;
	bool                 pending;      /* atomic */
	struct cour_mcond   *next;         /* the domain's list (CQs and counters) */
};
struct cour_mcond *cour_mcond_new(void);
void cour_mcond_free(struct cour_mcond *mc);
/* Wake waiters; never blocks. true: done, false: left pending (mutex busy). */
bool cour_mcond_signal(struct cour_mcond *mc);
/* FI_GETWAIT / FI_GETWAITOBJ for an object with a mutex/cond pair. */
int cour_mcond_getwait(struct cour_mcond *mc, int command, void *arg);
/* The domain's pending wakes (lock held), and whether one is left. */
bool cour_domain_mcond_retry_locked(struct cour_domain *dom);
void cour_domain_mcond_add_locked(struct cour_domain *dom, struct cour_mcond *mc);
void cour_domain_mcond_del_locked(struct cour_domain *dom, struct cour_mcond *mc);
/* ms left until deadline_us, rounded up; -1 when deadline_us is 0 (no deadline). */
int cour_wait_remaining_ms(uint64_t deadline_us);

/* ---- wait sets (cour_wait.c) ---- */
int cour_wait_open(struct fid_fabric *fabric, struct fi_wait_attr *attr,
		   struct fid_wait **waitset);
/* A CQ, counter (dom: its domain) or EQ (dom NULL) opened with FI_WAIT_SET puts its fd in the
 * set; the set's close refuses while members remain. */
int cour_wait_set_join(struct fid_wait *set, struct cour_fabric *fabric, struct cour_domain *dom,
		       int fd, enum fi_log_subsys subsys, const char *what);
void cour_wait_set_leave(struct fid_wait *set, struct cour_domain *dom, int fd);
/* fi_cq_strerror / fi_eq_strerror: the cour_errno string, copied into buf when one is given. */
const char *cour_strerror(int prov_errno, char *buf, size_t len);

#endif
