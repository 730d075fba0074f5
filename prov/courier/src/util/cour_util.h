/*
 * The bottom layer's basics, shared by every layer above: compiler helpers, logging through
 * libfabric's provider log, the monotonic clock, the progress lock and reference counts.
 *
 * Layers (docs/architecture.md; scripts/check-layers.sh enforces them): util/ includes nothing
 * of courier but util/; wire/ adds wire/; proto/ adds proto/; the object layer (the files in
 * prov/courier/src itself) may include everything. This header is util/, so it needs only the
 * C library, pthreads and libfabric's public headers.
 */
#ifndef COUR_UTIL_H
#define COUR_UTIL_H

#include <config.h>

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>
#include <rdma/providers/fi_log.h>
#include <rdma/providers/fi_prov.h>

#define COUR_HIDDEN __attribute__((visibility("hidden")))
#define COUR_LIKELY(x)   __builtin_expect(!!(x), 1)
#define COUR_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define COUR_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define COUR_CONTAINER_OF(ptr, type, field) ((type *)((char *)(ptr) - offsetof(type, field)))
#define COUR_MIN(a, b) ((a) < (b) ? (a) : (b))
#define COUR_MAX(a, b) ((a) > (b) ? (a) : (b))

extern struct fi_provider cour_prov;

#define COUR_WARN(subsys, ...) FI_WARN(&cour_prov, subsys, __VA_ARGS__)
#define COUR_INFO(subsys, ...) FI_INFO(&cour_prov, subsys, __VA_ARGS__)
#define COUR_DBG(subsys, ...)  FI_LOG(&cour_prov, FI_LOG_DEBUG, subsys, __VA_ARGS__)

/* ---- time ---- */
static inline uint64_t cour_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

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
/* The wall clock: the same instant on every host whose clock is kept in step (NTP), and the
 * clock of the kernel's receive timestamps (SO_TIMESTAMPNS). */
static inline uint64_t cour_wall_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t cour_wall_us(void)
{
	return cour_wall_ns() / 1000u;
}

static inline uint64_t cour_us_since(uint64_t now, uint64_t then)
{
	return now > then ? now - then : 0;
}

/* ---- the progress lock (the locking design is written once, in fi/cour_fi.h) ---- */
/*
 * Three kinds. NONE: one thread drives everything. SPIN: two parties at most, the one
 * application thread a FI_THREAD_DOMAIN domain allows and our progress thread, which stands
 * back while the application polls: a taken lock is all but never met, and a glibc mutex's
 * lock and unlock (two atomic read-modify-writes and the calls) were a seventh of a rank's
 * time at 8 M small MPI messages a second; here the release is a plain store. MUTEX: any
 * number of application threads (FI_THREAD_SAFE and the per-object levels), which must be
 * able to sleep on one another.
 */
enum cour_lock_kind { COUR_LOCK_NONE, COUR_LOCK_SPIN, COUR_LOCK_MUTEX };

struct cour_lock {
	pthread_mutex_t mutex;
	uint8_t         kind;       /* enum cour_lock_kind */
	uint32_t        spin;       /* COUR_LOCK_SPIN: 1 while held */
	pthread_t       owner;      /* for assertions only, valid while held (kind not NONE) */
	int             held;
};

static inline void cour_lock_init(struct cour_lock *l, enum cour_lock_kind kind)
{
	pthread_mutex_init(&l->mutex, NULL);
	l->kind = (uint8_t)kind;
	l->spin = 0;
	l->held = 0;
}

static inline void cour_lock_destroy(struct cour_lock *l)
{
	pthread_mutex_destroy(&l->mutex);
}

#if defined(__x86_64__) || defined(__i386__)
#define cour_cpu_relax() __builtin_ia32_pause()
#else
#define cour_cpu_relax() do { } while (0)
#endif

/* Met the spin lock taken: the holder is our other party, perhaps preempted on this very
 * cpu (Open MPI binds a rank and so its threads to one), so after a short spin yield it the
 * cpu. The holder never sleeps with the lock. */
static inline __attribute__((cold)) void cour_lock_spin_wait(struct cour_lock *l)
{
	for (;;) {
		for (int i = 0; i < 256 && __atomic_load_n(&l->spin, __ATOMIC_RELAXED); i++)
			cour_cpu_relax();
		if (!__atomic_exchange_n(&l->spin, 1, __ATOMIC_ACQUIRE))
			return;
		sched_yield();
	}
}

static inline void cour_lock_acquire(struct cour_lock *l)
{
	if (l->kind == COUR_LOCK_SPIN) {
		if (__builtin_expect(__atomic_exchange_n(&l->spin, 1, __ATOMIC_ACQUIRE), 0))
			cour_lock_spin_wait(l);
	} else if (l->kind == COUR_LOCK_MUTEX) {
		pthread_mutex_lock(&l->mutex);
	}
	l->held++;
}

static inline void cour_lock_release(struct cour_lock *l)
{
	assert(l->held > 0);
	l->held--;
	if (l->kind == COUR_LOCK_SPIN)
		__atomic_store_n(&l->spin, 0, __ATOMIC_RELEASE);
	else if (l->kind == COUR_LOCK_MUTEX)
		pthread_mutex_unlock(&l->mutex);
}

#define cour_lock_assert_held(l) assert((l)->held > 0)

/* ---- reference counts of objects (atomic) ---- */
static inline void cour_ref_inc(int *ref) { __atomic_add_fetch(ref, 1, __ATOMIC_RELAXED); }
static inline int  cour_ref_dec(int *ref) { return __atomic_sub_fetch(ref, 1, __ATOMIC_RELAXED); }
static inline int  cour_ref_get(int *ref) { return __atomic_load_n(ref, __ATOMIC_RELAXED); }

#endif /* COUR_UTIL_H */
