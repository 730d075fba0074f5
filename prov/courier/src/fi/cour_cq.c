/*
 * Completion queues (fi_cq(3)).
 *
 * Successes live in a ring of struct cour_cq_entry that doubles when full, so the engine never
 * has to drop or defer a completion; they are converted to the application's format only when
 * read. Errors live in a separate FIFO, each stamped with the number of successes written before
 * it, which keeps arrival order without mixing two entry sizes in one ring: fi_cq_read returns
 * the successes that precede the oldest error, then -FI_EAVAIL until fi_cq_readerr takes it.
 *
 * Waking sleepers: signal_fd is an eventfd. With FI_WAIT_FD the application polls it itself, so
 * it is kept readable exactly while the CQ holds something (written on empty -> non-empty,
 * drained on non-empty -> empty, both under the progress lock). With FI_WAIT_UNSPEC only
 * fi_cq_sread sleeps on it, and writers kick it only while someone sleeps (waiters > 0), which
 * keeps the syscall off the fast path.
 */
#include "cour_cq.h"
#include "proto/cour_errno.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define COUR_CQ_DEF_SIZE  1024
#define COUR_CQ_MIN_SIZE  16
/* attr->size is only a hint and the ring grows, so a huge request need not be allocated upfront */
#define COUR_CQ_MAX_INIT  65536

static struct fi_ops_cq cour_cq_ops;
static struct fi_ops cour_cq_fi_ops;

/* ---- wait object helpers, shared with cour_cntr.c and cour_eq.c ---- */

int cour_wait_fd_open(enum fi_wait_obj wait_obj, enum fi_log_subsys subsys, const char *what,
		      int *fd)
{
	int efd;

	switch (wait_obj) {
	case FI_WAIT_NONE:
		*fd = -1;
		return 0;
	case FI_WAIT_UNSPEC:
	case FI_WAIT_FD:
	case FI_WAIT_SET:	/* an fd as FI_WAIT_FD, in the set's epoll (cour_wait.c) */
	case FI_WAIT_YIELD:	/* a blocking wait is a valid way to honour a spin request */
		break;
	case FI_WAIT_MUTEX_COND:	/* the pair is the object's (cour_mcond_new) */
		break;
	case FI_WAIT_POLLFD:
		COUR_WARN(subsys, "%s: wait object %d not supported (use FI_WAIT_NONE, "
			  "FI_WAIT_UNSPEC, FI_WAIT_FD, FI_WAIT_MUTEX_COND or FI_WAIT_SET)\n", what,
			  (int)wait_obj);
		return -FI_ENOSYS;
	default:
		COUR_WARN(subsys, "%s: unknown wait object %d\n", what, (int)wait_obj);
		return -FI_EINVAL;
	}
	efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (efd < 0) {
		COUR_WARN(subsys, "%s: eventfd: %s\n", what, strerror(errno));
		return -FI_ENOMEM;
	}
	*fd = efd;
	return 0;
}

void cour_fd_kick(int fd)
{
	uint64_t one = 1;

	/* only fails when the counter would overflow, and then the fd is readable anyway */
	if (write(fd, &one, sizeof(one)) != sizeof(one) && errno != EAGAIN)
		COUR_WARN(FI_LOG_CORE, "eventfd write: %s\n", strerror(errno));
}

void cour_fd_drain(int fd)
{
	uint64_t v;

	if (read(fd, &v, sizeof(v)) != sizeof(v) && errno != EAGAIN)
		COUR_WARN(FI_LOG_CORE, "eventfd read: %s\n", strerror(errno));
}

/* ---- FI_WAIT_MUTEX_COND (cour_cq.h) ---- */

struct cour_mcond *cour_mcond_new(void)
{
	struct cour_mcond *mc = calloc(1, sizeof(*mc));

	if (!mc)
		return NULL;
	pthread_mutex_init(&mc->mutex, NULL);
	pthread_cond_init(&mc->cond, NULL);
	return mc;
}

void cour_mcond_free(struct cour_mcond *mc)
{
	if (!mc)
		return;
	pthread_cond_destroy(&mc->cond);
	pthread_mutex_destroy(&mc->mutex);
	free(mc);
}

bool cour_mcond_signal(struct cour_mcond *mc)
{
	if (pthread_mutex_trylock(&mc->mutex) == 0) {
		/* the waiter is before its check or asleep: either way it sees this */
		__atomic_store_n(&mc->pending, false, __ATOMIC_RELAXED);
		pthread_cond_broadcast(&mc->cond);
		pthread_mutex_unlock(&mc->mutex);
		return true;
	}
	pthread_cond_broadcast(&mc->cond);
	__atomic_store_n(&mc->pending, true, __ATOMIC_RELAXED);
	return false;
}


int cour_mcond_getwait(struct cour_mcond *mc, int command, void *arg)
{
	switch (command) {
	case FI_GETWAIT:
		if (!arg)
			return -FI_EINVAL;
		((struct fi_mutex_cond *)arg)->mutex = &mc->mutex;
		((struct fi_mutex_cond *)arg)->cond = &mc->cond;
		return 0;
	case FI_GETWAITOBJ:
		if (!arg)
			return -FI_EINVAL;
		*(enum fi_wait_obj *)arg = FI_WAIT_MUTEX_COND;
		return 0;
	default:
		return -FI_ENOSYS;
	}
}

int cour_wait_getwait(int fd, int command, void *arg)
{
	switch (command) {
	case FI_GETWAIT:
		if (fd < 0)
			return -FI_ENODATA;
		if (!arg)
			return -FI_EINVAL;
		*(int *)arg = fd;
		return 0;
	case FI_GETWAITOBJ:
		if (!arg)
			return -FI_EINVAL;
		*(enum fi_wait_obj *)arg = fd < 0 ? FI_WAIT_NONE : FI_WAIT_FD;
		return 0;
	default:
		return -FI_ENOSYS;
	}
}

/* Milliseconds left until deadline_us (0: none), rounded up so that we never wake early. */
int cour_wait_remaining_ms(uint64_t deadline_us)
{
	uint64_t now;

	if (!deadline_us)
		return -1;
	now = cour_now_us();
	if (now >= deadline_us)
		return 0;
	return (int)COUR_MIN((deadline_us - now + 999) / 1000, (uint64_t)INT32_MAX);
}

/* ---- writers (engine side, lock held) ---- */

static void cour_cq_notify_locked(struct cour_cq *cq, bool was_empty)
{
	if (cq->signal_fd < 0)
		return;
	if (COUR_UNLIKELY(cq->mc) &&
	    (was_empty || __atomic_load_n(&cq->mc->pending, __ATOMIC_RELAXED)))
		cour_mcond_signal(cq->mc);
	if (__atomic_load_n(&cq->waiters, __ATOMIC_ACQUIRE) > 0 ||
	    (cq->wait_obj == FI_WAIT_FD && was_empty))
		cour_fd_kick(cq->signal_fd);
}

/* (cold and apart: the write's fast path then saves no registers for it) */
static __attribute__((noinline, cold)) int cour_cq_grow_locked(struct cour_cq *cq)
{
	size_t cap = cq->ring_cap * 2, first;
	struct cour_cq_entry *ring;

	ring = malloc(cap * sizeof(*ring));
	if (!ring) {
		COUR_WARN(FI_LOG_CQ, "cannot grow CQ ring to %zu entries\n", cap);
		return -FI_ENOMEM;
	}
	/* unwrap: the oldest entry goes to index 0 */
	first = COUR_MIN(cq->count, cq->ring_cap - cq->head);
	memcpy(ring, cq->ring + cq->head, first * sizeof(*ring));
	memcpy(ring + first, cq->ring, (cq->count - first) * sizeof(*ring));
	free(cq->ring);
	cq->ring = ring;
	cq->ring_cap = cap;
	cq->head = 0;
	return 0;
}

/* Word by word: e was just built on the caller's stack by 8-byte stores, and a copy in
 * 16-byte loads cannot be forwarded from them but waits for them to retire (this write was
 * 6.6% of a message-rate run's cycles in perf, 2.4% once copied this way) */
static inline void cour_cq_entry_copy(struct cour_cq_entry *dst, const struct cour_cq_entry *e)
{
	const uint64_t *from = (const uint64_t *)e;
	uint64_t *to = (uint64_t *)dst;

	_Static_assert(sizeof(*e) % 8 == 0, "an entry is whole words");
#pragma GCC unroll 8
	for (size_t i = 0; i < sizeof(*e) / 8; i++)
		__atomic_store_n(&to[i], __atomic_load_n(&from[i], __ATOMIC_RELAXED), __ATOMIC_RELAXED);
}

int cour_cq_write_locked(struct cour_cq *cq, const struct cour_cq_entry *e)
{
	bool was_empty;
	int ret;

	cour_lock_assert_held(&cq->domain->lock);
	if (cq->count == cq->ring_cap) {
		ret = cour_cq_grow_locked(cq);
		if (ret)
			return ret;
	}
	was_empty = cour_cq_empty_locked(cq);
	cour_cq_entry_copy(&cq->ring[(cq->head + cq->count) & (cq->ring_cap - 1)], e);
	cq->count++;
	cq->succ_in++;
	if (cq->signal_fd >= 0)
		cour_cq_notify_locked(cq, was_empty);
	return 0;
}

int cour_cq_write_err_locked(struct cour_cq *cq, const struct cour_cq_entry *e, int err,
			     int prov_errno, size_t olen)
{
	struct cour_cq_err *ce;
	bool was_empty;

	cour_lock_assert_held(&cq->domain->lock);
	assert(err > 0);
	ce = calloc(1, sizeof(*ce));
	if (!ce) {
		COUR_WARN(FI_LOG_CQ, "no memory for an error completion (err %d, prov_errno %d)\n",
			  err, prov_errno);
		return -FI_ENOMEM;
	}
	ce->seq = cq->succ_in;
	ce->e.op_context = e->op_context;
	ce->e.flags = e->flags;
	ce->e.len = e->len;
	ce->e.buf = e->buf;
	ce->e.data = e->data;
	ce->e.tag = e->tag;
	ce->e.olen = olen;
	ce->e.err = err;
	ce->e.prov_errno = prov_errno;

	was_empty = cour_cq_empty_locked(cq);
	if (cq->errs_tail)
		cq->errs_tail->next = ce;
	else
		cq->errs = ce;
	cq->errs_tail = ce;
	cq->err_count++;
	cour_cq_notify_locked(cq, was_empty);
	return 0;
}

/* ---- readers ---- */

/* Successes that may be returned now: those written before the oldest error, or all. */
static inline size_t cour_cq_readable_locked(const struct cour_cq *cq)
{
	if (cq->errs)
		return (size_t)(cq->errs->seq - cq->succ_out);
	return cq->count;
}

static void cour_cq_format(const struct cour_cq *cq, const struct cour_cq_entry *e, void *dst)
{
	switch (cq->format) {
	case FI_CQ_FORMAT_MSG: {
		struct fi_cq_msg_entry *m = dst;

		m->op_context = e->op_context;
		m->flags = e->flags;
		m->len = e->len;
		break;
	}
	case FI_CQ_FORMAT_DATA: {
		struct fi_cq_data_entry *d = dst;

		d->op_context = e->op_context;
		d->flags = e->flags;
		d->len = e->len;
		d->buf = e->buf;
		d->data = e->data;
		break;
	}
	case FI_CQ_FORMAT_TAGGED: {
		struct fi_cq_tagged_entry *t = dst;

		t->op_context = e->op_context;
		t->flags = e->flags;
		t->len = e->len;
		t->buf = e->buf;
		t->data = e->data;
		t->tag = e->tag;
		break;
	}
	default: {
		struct fi_cq_entry *c = dst;

		c->op_context = e->op_context;
		break;
	}
	}
}

/* Copy up to count readable successes out. Lock held. */
static ssize_t cour_cq_take_locked(struct cour_cq *cq, void *buf, size_t count,
				   fi_addr_t *src_addr)
{
	size_t n = cour_cq_readable_locked(cq), i;
	const struct cour_cq_entry *e;

	if (n == 0)
		return cq->errs ? -FI_EAVAIL : -FI_EAGAIN;
	n = COUR_MIN(n, count);
	for (i = 0; i < n; i++) {
		e = &cq->ring[(cq->head + i) & (cq->ring_cap - 1)];
		cour_cq_format(cq, e, (char *)buf + i * cq->entry_size);
		if (src_addr)
			src_addr[i] = e->src;
	}
	cq->head = (cq->head + n) & (cq->ring_cap - 1);
	cq->count -= n;
	/* Emptied: the next entries go where the last ones were, in lines still in this
	 * cache. Walking on around a ring of thousands of entries took a cache miss every
	 * entry or two (a seventh of a sender's time at 3 M messages/s). */
	if (!cq->count)
		cq->head = 0;
	cq->succ_out += n;
	if (n && cq->wait_obj == FI_WAIT_FD && cour_cq_empty_locked(cq))
		cour_fd_drain(cq->signal_fd);
	return (ssize_t)n;
}

static ssize_t cour_cq_readfrom(struct fid_cq *cq_fid, void *buf, size_t count,
				fi_addr_t *src_addr)
{
	struct cour_cq *cq = COUR_CONTAINER_OF(cq_fid, struct cour_cq, cq_fid);
	struct cour_domain *dom = cq->domain;
	ssize_t ret;
	bool yield, drained, passed = false;

	if (COUR_UNLIKELY(count && !buf))
		return -FI_EINVAL;
	cour_lock_acquire(&dom->lock);
	/* Completions already here are returned without a progress pass, which costs a socket
	 * read (a system call) on a UDP endpoint: the caller is about to act on them (a
	 * ping-pong's next send waits for the last one's completion, found by the pass that
	 * brought the reply, and paid a second read, 2 us of its 5). The next call progresses.
	 * A read of count 0 asks for progress alone, and always gets it.
	 * A read that ran a pass and handed out all it found leaves the queue drained; MPI
	 * libraries read on until a read comes back empty, and that read's pass would be
	 * another socket read (0.3 us) between a message and the answer the caller is about to
	 * send. So a read of a drained queue runs no pass, once: the read after it does. */
	drained = cq->drained;
	cq->drained = false;
	if (!count) {
		cour_domain_progress_locked(dom);
	} else if (!cq->count && !drained) {
		cour_domain_poll_locked(dom);
		passed = true;
	}
	ret = cour_cq_take_locked(cq, buf, count, src_addr);
	cq->drained = passed && ret > 0 && !cq->count;
	yield = cour_idle_poll(&cq->idle_polls, ret != -FI_EAGAIN, dom->idle_yield);
	cour_lock_release(&dom->lock);
	if (yield)
		sched_yield();
	return ret;
}

static ssize_t cour_cq_read(struct fid_cq *cq_fid, void *buf, size_t count)
{
	return cour_cq_readfrom(cq_fid, buf, count, NULL);
}

static ssize_t cour_cq_readerr(struct fid_cq *cq_fid, struct fi_cq_err_entry *buf,
			       uint64_t flags)
{
	struct cour_cq *cq = COUR_CONTAINER_OF(cq_fid, struct cour_cq, cq_fid);
	struct cour_domain *dom = cq->domain;
	struct cour_cq_err *ce;
	size_t app_err_data_size;
	void *app_err_data;

	if (!buf)
		return -FI_EINVAL;
	cour_lock_acquire(&dom->lock);
	cour_domain_progress_locked(dom);
	ce = cq->errs;
	/* an error is only reported once the successes that preceded it have been read */
	if (!ce || ce->seq != cq->succ_out) {
		cour_lock_release(&dom->lock);
		return -FI_EAGAIN;
	}
	cq->errs = ce->next;
	if (!cq->errs)
		cq->errs_tail = NULL;
	cq->err_count--;
	if (cq->wait_obj == FI_WAIT_FD && cour_cq_empty_locked(cq))
		cour_fd_drain(cq->signal_fd);
	cour_lock_release(&dom->lock);

	/* Courier has no err_data. With err_data_size 0 the provider's buffer would be returned
	 * (none: NULL); otherwise the application's buffer is kept and 0 bytes are copied. */
	app_err_data = buf->err_data;
	app_err_data_size = buf->err_data_size;
	*buf = ce->e;
	buf->err_data = app_err_data_size ? app_err_data : NULL;
	buf->err_data_size = 0;
	free(ce);
	return 1;
}

static ssize_t cour_cq_sreadfrom(struct fid_cq *cq_fid, void *buf, size_t count,
				 fi_addr_t *src_addr, const void *cond, int timeout)
{
	struct cour_cq *cq = COUR_CONTAINER_OF(cq_fid, struct cour_cq, cq_fid);
	struct cour_domain *dom = cq->domain;
	uint64_t deadline = timeout >= 0 ? cour_now_us() + (uint64_t)timeout * 1000 : 0;
	bool fd_mode = cq->wait_obj == FI_WAIT_FD;
	bool slept = false, sig;
	size_t want = 1;
	ssize_t ret;
	int left;

	if (cq->signal_fd < 0) {
		COUR_WARN(FI_LOG_CQ, "fi_cq_sread on a CQ opened with FI_WAIT_NONE\n");
		return -FI_EINVAL;
	}
	if (COUR_UNLIKELY(count && !buf))
		return -FI_EINVAL;
	/* The threshold is a hint (fi_cq(3)). With FI_WAIT_FD the fd stays readable while anything
	 * is queued, so waiting for more would spin: the hint is ignored there. */
	if (cq->wait_cond == FI_CQ_COND_THRESHOLD && cond && !fd_mode)
		want = COUR_MAX(COUR_MIN(*(const size_t *)cond, count), (size_t)1);

	for (;;) {
		cour_lock_acquire(&dom->lock);
		if (slept) {
			/* Only the last sleeper clears the fd (another counted in waiters may not
			 * have reached its poll yet). With FI_WAIT_FD the fd mirrors the queue:
			 * only an empty queue may clear it (a late fi_cq_signal kick, say). */
			if (__atomic_sub_fetch(&cq->waiters, 1, __ATOMIC_ACQ_REL) == 0 &&
			    (!fd_mode || cour_cq_empty_locked(cq)))
				cour_fd_drain(cq->signal_fd);
		}
		cour_domain_progress_locked(dom);
		left = cour_wait_remaining_ms(deadline);
		sig = __atomic_exchange_n(&cq->signaled, false, __ATOMIC_ACQ_REL);
		/* read early when the threshold cannot be reached (an error is queued behind the
		 * successes), when time is up, or when signaled */
		if (cour_cq_readable_locked(cq) >= want || cq->errs || left == 0 || sig) {
			ret = cour_cq_take_locked(cq, buf, count, src_addr);
			if (ret != -FI_EAGAIN || left == 0 || sig) {
				if (ret == -FI_EAGAIN && fd_mode)
					cour_fd_drain(cq->signal_fd);
				cour_lock_release(&dom->lock);
				return ret;
			}
		}
		/* counted under the lock: a writer after this point sees us and kicks the fd */
		__atomic_add_fetch(&cq->waiters, 1, __ATOMIC_RELEASE);
		cour_lock_release(&dom->lock);
		cour_domain_wait(dom, cq->signal_fd, left);
		slept = true;
	}
}

static ssize_t cour_cq_sread(struct fid_cq *cq_fid, void *buf, size_t count, const void *cond,
			     int timeout)
{
	return cour_cq_sreadfrom(cq_fid, buf, count, NULL, cond, timeout);
}

/* Not under the lock: a sleeper in sread does not hold it, and fi_cq_signal usually comes from
 * another thread, whatever the threading level. The flag is set before the kick so that a
 * sleeper woken by the kick sees it. */
static int cour_cq_signal(struct fid_cq *cq_fid)
{
	struct cour_cq *cq = COUR_CONTAINER_OF(cq_fid, struct cour_cq, cq_fid);

	if (cq->signal_fd < 0) {
		COUR_WARN(FI_LOG_CQ, "fi_cq_signal on a CQ opened with FI_WAIT_NONE\n");
		return -FI_EINVAL;
	}
	__atomic_store_n(&cq->signaled, true, __ATOMIC_RELEASE);
	cour_fd_kick(cq->signal_fd);
	return 0;
}

const char *cour_strerror(int prov_errno, char *buf, size_t len)
{
	const char *s = cour_errno_str(prov_errno);

	if (buf && len) {
		snprintf(buf, len, "%s", s);
		return buf;
	}
	return s;
}

static const char *cour_cq_strerror(struct fid_cq *cq_fid, int prov_errno, const void *err_data,
				    char *buf, size_t len)
{
	return cour_strerror(prov_errno, buf, len);
}

/* ---- open, control, close ---- */

static int cour_cq_control(struct fid *fid, int command, void *arg)
{
	struct cour_cq *cq = COUR_CONTAINER_OF(fid, struct cour_cq, cq_fid.fid);

	if (cq->mc)
		return cour_mcond_getwait(cq->mc, command, arg);
	return cour_wait_getwait(cq->wait_obj == FI_WAIT_FD || cq->wait_obj == FI_WAIT_UNSPEC ?
				 cq->signal_fd : -1, command, arg);
}

static void cour_cq_free(struct cour_cq *cq)
{
	struct cour_cq_err *ce, *next;

	for (ce = cq->errs; ce; ce = next) {
		next = ce->next;
		free(ce);
	}
	if (cq->wait_set)
		cour_wait_set_leave(cq->wait_set, cq->domain, cq->signal_fd);
	if (cq->signal_fd >= 0)
		close(cq->signal_fd);
	if (cq->mc) {
		cour_lock_acquire(&cq->domain->lock);
		cour_domain_mcond_del_locked(cq->domain, cq->mc);
		cour_lock_release(&cq->domain->lock);
		cour_mcond_free(cq->mc);
	}
	free(cq->ring);
	free(cq);
}

static int cour_cq_close(struct fid *fid)
{
	struct cour_cq *cq = COUR_CONTAINER_OF(fid, struct cour_cq, cq_fid.fid);
	struct cour_domain *dom = cq->domain;

	if (cour_ref_get(&cq->refcnt) > 0) {
		COUR_WARN(FI_LOG_CQ, "CQ still bound to %d endpoint(s)\n", cour_ref_get(&cq->refcnt));
		return -FI_EBUSY;
	}
	cour_cq_free(cq);
	cour_ref_dec(&dom->refcnt);
	return 0;
}

static size_t cour_cq_entry_size(enum fi_cq_format format)
{
	switch (format) {
	case FI_CQ_FORMAT_UNSPEC:
	case FI_CQ_FORMAT_CONTEXT:
		return sizeof(struct fi_cq_entry);
	case FI_CQ_FORMAT_MSG:
		return sizeof(struct fi_cq_msg_entry);
	case FI_CQ_FORMAT_DATA:
		return sizeof(struct fi_cq_data_entry);
	case FI_CQ_FORMAT_TAGGED:
		return sizeof(struct fi_cq_tagged_entry);
	default:
		return 0;
	}
}

int cour_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr, struct fid_cq **cq_fid,
		 void *context)
{
	struct cour_domain *dom = COUR_CONTAINER_OF(domain, struct cour_domain, domain_fid);
	struct fi_cq_attr def = { .format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_NONE };
	struct cour_cq *cq;
	size_t cap;
	int ret;

	if (!cq_fid)
		return -FI_EINVAL;
	if (!attr)
		attr = &def;
	if (!cour_cq_entry_size(attr->format)) {
		COUR_WARN(FI_LOG_CQ, "unsupported CQ format %d\n", (int)attr->format);
		return -FI_ENOSYS;
	}
	if (attr->wait_obj != FI_WAIT_NONE && attr->wait_cond != FI_CQ_COND_NONE &&
	    attr->wait_cond != FI_CQ_COND_THRESHOLD) {
		COUR_WARN(FI_LOG_CQ, "unknown CQ wait_cond %d\n", (int)attr->wait_cond);
		return -FI_EINVAL;
	}
	/* FI_AFFINITY's signaling_vector is a hint we have no use for (no interrupts) */

	cq = calloc(1, sizeof(*cq));
	if (!cq) {
		COUR_WARN(FI_LOG_CQ, "no memory for a CQ\n");
		return -FI_ENOMEM;
	}
	ret = cour_wait_fd_open(attr->wait_obj, FI_LOG_CQ, "fi_cq_open", &cq->signal_fd);
	if (ret)
		goto free_cq;

	cap = attr->size ? attr->size : COUR_CQ_DEF_SIZE;
	cap = COUR_MIN(COUR_MAX(cap, (size_t)COUR_CQ_MIN_SIZE), (size_t)COUR_CQ_MAX_INIT);
	cq->ring_cap = 1;
	while (cq->ring_cap < cap)
		cq->ring_cap <<= 1;
	cq->ring = malloc(cq->ring_cap * sizeof(*cq->ring));
	if (!cq->ring) {
		COUR_WARN(FI_LOG_CQ, "no memory for a CQ of %zu entries\n", cq->ring_cap);
		ret = -FI_ENOMEM;
		goto close_fd;
	}
	if (attr->wait_obj == FI_WAIT_SET) {
		ret = cour_wait_set_join(attr->wait_set, dom->fabric, dom, cq->signal_fd,
					 FI_LOG_CQ, "fi_cq_open");
		if (ret) {
			free(cq->ring);
			goto close_fd;
		}
		cq->wait_set = attr->wait_set;
	}

	cq->domain = dom;
	cq->format = attr->format == FI_CQ_FORMAT_UNSPEC ? FI_CQ_FORMAT_CONTEXT : attr->format;
	cq->entry_size = cour_cq_entry_size(cq->format);
	/* a member of a wait set is an FI_WAIT_FD CQ whose fd the set watches */
	cq->wait_obj = attr->wait_obj == FI_WAIT_SET ? FI_WAIT_FD : attr->wait_obj;
	cq->wait_cond = attr->wait_obj == FI_WAIT_NONE ? FI_CQ_COND_NONE : attr->wait_cond;
	cq->cq_fid.fid.fclass = FI_CLASS_CQ;
	cq->cq_fid.fid.context = context;
	cq->cq_fid.fid.ops = &cour_cq_fi_ops;
	cq->cq_fid.ops = &cour_cq_ops;
	if (attr->wait_obj == FI_WAIT_MUTEX_COND) {
		cq->mc = cour_mcond_new();
		if (!cq->mc) {
			free(cq->ring);
			ret = -FI_ENOMEM;
			goto close_fd;
		}
		cour_lock_acquire(&dom->lock);
		cour_domain_mcond_add_locked(dom, cq->mc);
		cour_lock_release(&dom->lock);
	}
	cour_ref_inc(&dom->refcnt);
	*cq_fid = &cq->cq_fid;
	return 0;

close_fd:
	if (cq->signal_fd >= 0)
		close(cq->signal_fd);
free_cq:
	free(cq);
	return ret;
}

static struct fi_ops_cq cour_cq_ops = {
	.size = sizeof(struct fi_ops_cq),
	.read = cour_cq_read,
	.readfrom = cour_cq_readfrom,
	.readerr = cour_cq_readerr,
	.sread = cour_cq_sread,
	.sreadfrom = cour_cq_sreadfrom,
	.signal = cour_cq_signal,
	.strerror = cour_cq_strerror,
};

static struct fi_ops cour_cq_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = cour_cq_close,
	.bind = cour_no_bind,
	.control = cour_cq_control,
	.ops_open = cour_no_ops_open,
	.tostr = cour_no_tostr,
	.ops_set = cour_no_ops_set,
};

/* ---- the domain's pending FI_WAIT_MUTEX_COND wakes (cour_cq.h) ---- */

void cour_domain_mcond_add_locked(struct cour_domain *dom, struct cour_mcond *mc)
{
	mc->next = dom->mconds;
	dom->mconds = mc;
}

void cour_domain_mcond_del_locked(struct cour_domain *dom, struct cour_mcond *mc)
{
	for (struct cour_mcond **pp = &dom->mconds; *pp; pp = &(*pp)->next)
		if (*pp == mc) {
			*pp = mc->next;
			return;
		}
}

bool cour_domain_mcond_retry_locked(struct cour_domain *dom)
{
	bool left = false;

	for (struct cour_mcond *mc = dom->mconds; mc; mc = mc->next)
		if (__atomic_load_n(&mc->pending, __ATOMIC_RELAXED) && !cour_mcond_signal(mc))
			left = true;
	return left;
}
