/* The registry of running provider threads: see cour_threads.h. */
#include "cour_threads.h"

#include <utlist.h>

static pthread_mutex_t cour_threads_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cour_thread *cour_threads;

int cour_thread_start(struct cour_thread *t, void *(*fn)(void *), void *arg,
		      void (*stop)(void *arg))
{
	int ret;

	t->stop = stop;
	t->arg = arg;
	/* entered before it runs, so that no moment exists when it runs unlisted */
	pthread_mutex_lock(&cour_threads_lock);
	ret = pthread_create(&t->tid, NULL, fn, arg);
	if (!ret) {
		t->entered = true;
		DL_APPEND(cour_threads, t);
	}
	pthread_mutex_unlock(&cour_threads_lock);
	return ret;
}

/* Removes t if it is still entered; true if this call removed it. */
static bool cour_thread_leave(struct cour_thread *t)
{
	bool was;

	pthread_mutex_lock(&cour_threads_lock);
	was = t->entered;
	if (was) {
		DL_DELETE(cour_threads, t);
		t->entered = false;
	}
	pthread_mutex_unlock(&cour_threads_lock);
	return was;
}

void cour_thread_join(struct cour_thread *t)
{
	/* whoever removes the entry joins: the owner's close and the unload cannot both */
	if (cour_thread_leave(t))
		pthread_join(t->tid, NULL);
}

int cour_threads_stop_all(void)
{
	struct cour_thread *t;
	int n = 0;

	for (;;) {
		pthread_mutex_lock(&cour_threads_lock);
		t = cour_threads;
		if (t) {
			DL_DELETE(cour_threads, t);
			t->entered = false;
		}
		pthread_mutex_unlock(&cour_threads_lock);
		if (!t)
			return n;
		t->stop(t->arg);
		pthread_join(t->tid, NULL);
		n++;
	}
}
