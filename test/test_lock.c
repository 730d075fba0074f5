/*
 * The progress lock's kinds (util/cour_util.h): the spin lock a FI_THREAD_DOMAIN domain with a
 * progress thread uses must exclude, including when its holder is descheduled while holding
 * it (the waiter then yields), and the mutex kind must too. Each test has two threads add to
 * a plain counter under the lock; a lost update shows as a short total.
 */
#include "util/cour_util.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>

TestSuite(lock, .timeout = 60);

#define ROUNDS 200000

struct shared {
	struct cour_lock lock;
	uint64_t         count;      /* guarded by lock, deliberately non-atomic */
	bool             nap;        /* yield while holding, every 1024th round */
};

static void *adder(void *arg)
{
	struct shared *s = arg;

	for (int i = 0; i < ROUNDS; i++) {
		cour_lock_acquire(&s->lock);
		uint64_t v = s->count;
		if (s->nap && (i & 1023) == 0)
			sched_yield();          /* the other thread meets the lock taken */
		s->count = v + 1;
		cour_lock_release(&s->lock);
	}
	return NULL;
}

static void race(enum cour_lock_kind kind, bool nap)
{
	struct shared s = { .nap = nap };
	pthread_t t[2];

	cour_lock_init(&s.lock, kind);
	for (int i = 0; i < 2; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, adder, &s), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	cr_assert_eq(s.count, 2u * ROUNDS, "kind %d: %llu of %u updates", kind,
		     (unsigned long long)s.count, 2u * ROUNDS);
	cr_assert_eq(s.lock.held, 0);
	cr_assert_eq(s.lock.spin, 0);
	cour_lock_destroy(&s.lock);
}

Test(lock, spin_excludes) { race(COUR_LOCK_SPIN, false); }
Test(lock, spin_excludes_a_holder_that_yields) { race(COUR_LOCK_SPIN, true); }
Test(lock, mutex_excludes) { race(COUR_LOCK_MUTEX, true); }

Test(lock, none_takes_nothing)
{
	struct cour_lock l;

	cour_lock_init(&l, COUR_LOCK_NONE);
	cr_assert_eq(l.kind, COUR_LOCK_NONE);
	cour_lock_acquire(&l);
	cour_lock_acquire(&l);          /* no lock: nesting is only counted */
	cr_assert_eq(l.held, 2);
	/* held, yet neither the mutex nor the spin word is taken */
	cr_assert_eq(pthread_mutex_trylock(&l.mutex), 0, "the mutex was taken");
	pthread_mutex_unlock(&l.mutex);
	cr_assert_eq(l.spin, 0);
	cour_lock_release(&l);
	cour_lock_release(&l);
	cr_assert_eq(l.held, 0);
	cour_lock_destroy(&l);
}
