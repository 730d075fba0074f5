/*
 * Every thread the provider starts (a domain's progress thread, a passive endpoint's
 * listener) is entered here while it runs. libfabric unloads the provider at exit, after
 * our cleanup hook; an application that leaves a domain open (or whose close was refused
 * with -FI_EBUSY) would otherwise keep a thread running in unmapped code. The cleanup hook
 * stops and joins whatever is still entered.
 */
#ifndef COUR_THREADS_H
#define COUR_THREADS_H

#include <pthread.h>
#include <stdbool.h>

struct cour_thread {
	pthread_t           tid;
	void              (*stop)(void *arg); /* asks the thread to return soon; must not block */
	void               *arg;
	bool                entered;
	struct cour_thread *prev, *next;
};

/* Starts fn(arg) and enters it; stop(arg) is what cour_threads_stop_all calls. 0 or errno. */
int  cour_thread_start(struct cour_thread *t, void *(*fn)(void *), void *arg,
		       void (*stop)(void *arg));
/* Joins a thread whose owner already asked it to stop, and removes its entry. */
void cour_thread_join(struct cour_thread *t);
/* Stops and joins every entered thread; returns how many there were. */
int  cour_threads_stop_all(void);

#endif
