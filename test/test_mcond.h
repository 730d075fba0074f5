/*
 * FI_WAIT_MUTEX_COND in the unit tests of CQs, counters and EQs: an application thread sleeps
 * on the object's mutex/cond pair, the pattern fi_cq(3) describes (check under the mutex, wait
 * on the condition, check again), for at most 5 s; the test then says whether it saw the
 * object become readable, and how long it slept.
 */
#ifndef COUR_TEST_MCOND_H
#define COUR_TEST_MCOND_H

#include <rdma/fi_domain.h>

#include <pthread.h>
#include <stdint.h>
#include <time.h>

struct mc_waiter {
	struct fi_mutex_cond mc;
	int                (*ready)(void *obj);   /* 1: something to read */
	void                *obj;
	int                  got;
	uint64_t             waited_ms;
};

static inline uint64_t mc_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static inline void *mc_wait(void *arg)
{
	struct mc_waiter *w = arg;
	uint64_t t0 = mc_now_ms();
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 5;
	pthread_mutex_lock(w->mc.mutex);
	while (!(w->got = w->ready(w->obj)) &&
	       pthread_cond_timedwait(w->mc.cond, w->mc.mutex, &until) == 0)
		;
	if (!w->got)
		w->got = w->ready(w->obj);
	pthread_mutex_unlock(w->mc.mutex);
	w->waited_ms = mc_now_ms() - t0;
	return NULL;
}

#endif
