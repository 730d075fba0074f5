/*
 * waits: every way an application sleeps on courier, woken by every kind of event source.
 * `waits [-p prov] [-M manual]` is the sleeper (server), the same with 127.0.0.1 the writer.
 *
 *   A. three threads sleep in fi_cntr_wait on one counter (FI_WAIT_UNSPEC) bound to a region
 *      with FI_REMOTE_WRITE, each for the next of WAIT_N thresholds, while the peer writes
 *      the region WAIT_N times at random intervals: the events are raised by the progress
 *      thread (auto progress) or by the sleeping call's own progress (manual progress without
 *      the thread, FI_COURIER_MANUAL_THREAD=0): several sleepers on one fd, none may miss it;
 *   B. the application polls a counter's own fd (FI_WAIT_FD, fi_control FI_GETWAIT) after
 *      fi_trywait, as an event loop does: no provider cap on its sleep, so an event that does
 *      not make the fd readable is a hang, here a failure after 10 s;
 *   C. two threads sleep in fi_cntr_wait while a third application thread adds to the counter;
 *   D. a thread sleeps in fi_cq_sread while another signals the CQ (fi_cq_signal): each signal
 *      ends exactly one sleep with -FI_EAGAIN.
 * Every wait has a timeout far beyond the events' pace; running into one fails the test.
 */
#define _GNU_SOURCE

#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ft_rma.h"

#define WAIT_N       100
#define WAIT_MS      20000
#define POLL_MS      10000
#define SLEEPERS     3

struct waits {
	struct rma r;
	uint64_t *mem;               /* two 4 KiB regions */
	struct fid_mr *mr[2];
	struct fid_cntr *cntr[3];    /* A: region 0, B: region 1 (FI_WAIT_FD), C: local */
	struct fid_cq *cq;           /* D */
	struct rma_region reg[2];
	pthread_barrier_t bar;
	int fails;
};

struct sleeper {
	struct waits *w;
	struct fid_cntr *c;
	int id;
};

static void __attribute__((format(printf, 2, 3))) say_fail(struct waits *w, const char *fmt,
								...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "waits: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	__atomic_add_fetch(&w->fails, 1, __ATOMIC_RELAXED);
}

/* A and C: sleep for thresholds 1..WAIT_N in turn */
static void *sleeper_main(void *arg)
{
	struct sleeper *s = arg;

	for (long i = 1; i <= WAIT_N; i++) {
		int ret = fi_cntr_wait(s->c, (uint64_t)i, WAIT_MS);

		if (ret) {
			say_fail(s->w, "sleeper %d: fi_cntr_wait for %ld: %d (%s), counter at %llu",
				 s->id, i, ret, fi_strerror(-ret),
				 (unsigned long long)fi_cntr_read(s->c));
			return NULL;
		}
	}
	return NULL;
}

static int run_sleepers(struct waits *w, struct fid_cntr *c, int n, void *(*other)(void *))
{
	pthread_t th[SLEEPERS + 1];
	struct sleeper s[SLEEPERS];
	int k;

	for (k = 0; k < n; k++) {
		s[k] = (struct sleeper){ w, c, k };
		if (pthread_create(&th[k], NULL, sleeper_main, &s[k]))
			return -FI_EOTHER;
	}
	if (other && pthread_create(&th[n], NULL, other, w))
		return -FI_EOTHER;
	for (k = 0; k < n + (other != NULL); k++)
		pthread_join(th[k], NULL);
	return 0;
}

/* C: another application thread moves the counter */
static void *adder_main(void *arg)
{
	struct waits *w = arg;

	for (int i = 0; i < WAIT_N; i++) {
		usleep((useconds_t)(rand() % 2000));
		if (fi_cntr_add(w->cntr[2], 1))
			say_fail(w, "fi_cntr_add %d failed", i);
	}
	return NULL;
}

/* D: each signal ends one sleep */
static void *signaler_main(void *arg)
{
	struct waits *w = arg;

	for (int i = 0; i < WAIT_N; i++) {
		pthread_barrier_wait(&w->bar);
		usleep((useconds_t)(rand() % 1000));
		if (fi_cq_signal(w->cq))
			say_fail(w, "fi_cq_signal %d failed", i);
		pthread_barrier_wait(&w->bar);
	}
	return NULL;
}

static int phase_sread(struct waits *w)
{
	struct fi_cq_tagged_entry e;
	pthread_t th;

	pthread_barrier_init(&w->bar, NULL, 2);
	if (pthread_create(&th, NULL, signaler_main, w))
		return -FI_EOTHER;
	for (int i = 0; i < WAIT_N; i++) {
		ssize_t ret;

		pthread_barrier_wait(&w->bar);
		ret = fi_cq_sread(w->cq, &e, 1, NULL, WAIT_MS);
		if (ret != -FI_EAGAIN)
			say_fail(w, "fi_cq_sread %d: %zd, want -FI_EAGAIN (signaled)", i, ret);
		pthread_barrier_wait(&w->bar);
	}
	pthread_join(th, NULL);
	pthread_barrier_destroy(&w->bar);
	return 0;
}

/* B: an event loop on the counter's own fd */
static int phase_fd(struct waits *w)
{
	struct func *f = &w->r.f;
	struct fid *fid = &w->cntr[1]->fid;
	int fd = -1, sleeps = 0;

	FUNC_CALL(f, fi_control(fid, FI_GETWAIT, &fd));
	FUNC_ASSERT(f, fd >= 0, "FI_GETWAIT gave fd %d", fd);
	for (uint64_t i = 1; i <= WAIT_N; i++) {
		while (fi_cntr_read(w->cntr[1]) < i) {
			struct pollfd p = { .fd = fd, .events = POLLIN };
			int ret = fi_trywait(f->ft.fabric, &fid, 1);

			if (ret == -FI_EAGAIN)
				continue;       /* something to read first, or no one to wake us */
			FUNC_ASSERT(f, ret == 0, "fi_trywait: %d", ret);
			ret = poll(&p, 1, POLL_MS);
			sleeps++;
			FUNC_ASSERT(f, ret == 1, "poll on the counter's fd: %d after %d ms with the "
				    "counter at %llu, want %llu: a missed wake-up", ret, POLL_MS,
				    (unsigned long long)fi_cntr_read(w->cntr[1]),
				    (unsigned long long)i);
		}
	}
	printf("waits: B: %d sleeps on the counter's fd, every one woken\n", sleeps);
	return 0;
}

static int sleeper_side(struct waits *w)
{
	struct func *f = &w->r.f;

	FUNC_CALL(f, rma_send_region(&w->r, &w->reg[0]));
	FUNC_CALL(f, rma_send_region(&w->r, &w->reg[1]));
	FUNC_CALL(f, cour_ft_barrier(&f->ft));
	FUNC_CALL(f, run_sleepers(w, w->cntr[0], SLEEPERS, NULL));
	FUNC_ASSERT(f, w->fails == 0, "A failed");
	FUNC_ASSERT(f, w->mem[0] == WAIT_N, "region 0 holds %llu", (unsigned long long)w->mem[0]);
	printf("waits: A: %d threads woken for each of %d remote writes\n", SLEEPERS, WAIT_N);
	FUNC_CALL(f, cour_ft_barrier(&f->ft));
	FUNC_CALL(f, phase_fd(w));
	FUNC_CALL(f, cour_ft_barrier(&f->ft));
	FUNC_CALL(f, run_sleepers(w, w->cntr[2], 2, adder_main));
	FUNC_ASSERT(f, w->fails == 0, "C failed");
	printf("waits: C: 2 threads woken by a third one's fi_cntr_add %d times\n", WAIT_N);
	FUNC_CALL(f, phase_sread(w));
	FUNC_ASSERT(f, w->fails == 0, "D failed");
	printf("waits: D: fi_cq_sread ended by fi_cq_signal from another thread %d times\n",
	       WAIT_N);
	return 0;
}

static int writer_side(struct waits *w)
{
	struct func *f = &w->r.f;
	struct fi_context2 ctx;

	FUNC_CALL(f, rma_recv_region(&w->r, &w->reg[0]));
	FUNC_CALL(f, rma_recv_region(&w->r, &w->reg[1]));
	for (int k = 0; k < 2; k++) {
		FUNC_CALL(f, cour_ft_barrier(&f->ft));
		for (uint64_t i = 1; i <= WAIT_N; i++) {
			w->mem[0] = i;
			usleep((useconds_t)(rand() % 3000));
			FUNC_POST(f, fi_write(f->ft.ep, w->mem, 8, NULL, f->ft.peer,
					      rma_raddr(&w->reg[k], 0), w->reg[k].key, &ctx));
			FUNC_CALL(f, rma_expect_ok(&w->r, true, &ctx, FI_RMA | FI_WRITE, "write"));
		}
	}
	return cour_ft_barrier(&f->ft);
}

static int open_objects(struct waits *w)
{
	struct func *f = &w->r.f;
	struct fid_domain *dom = f->ft.domain;
	struct fi_cntr_attr ca = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC };
	struct fi_cq_attr qa = { .format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_UNSPEC };

	for (int k = 0; k < 3; k++) {
		ca.wait_obj = k == 1 ? FI_WAIT_FD : FI_WAIT_UNSPEC;
		FUNC_CALL(f, fi_cntr_open(dom, &ca, &w->cntr[k], NULL));
	}
	FUNC_CALL(f, fi_cq_open(dom, &qa, &w->cq, NULL));
	for (int k = 0; k < 2; k++)
		FUNC_CALL(f, rma_mr_reg_cntr(&w->r, (char *)w->mem + 4096 * k, 4096,
					     FI_REMOTE_WRITE, w->cntr[k], FI_REMOTE_WRITE,
					     &w->mr[k], &w->reg[k]));
	return 0;
}

int main(int argc, char **argv)
{
	static struct waits w;
	struct func *f = &w.r.f;
	int ret;

	srand((unsigned)getpid());
	ret = rma_init(&w.r, argc, argv, "waits", FI_RMA | FI_WRITE | FI_REMOTE_WRITE |
		       FI_RMA_EVENT, NULL, NULL, NULL, NULL, "");
	if (ret)
		goto out;
	printf("waits (%s): provider %s, progress %s\n", f->ft.is_server ? "sleeper" : "writer",
	       f->ft.info->fabric_attr->prov_name,
	       f->ft.info->domain_attr->data_progress == FI_PROGRESS_AUTO ? "auto" : "manual");
	fflush(stdout);
	ret = posix_memalign((void **)&w.mem, 4096, 8192) ? -FI_ENOMEM : 0;
	if (ret)
		goto out;
	memset(w.mem, 0, 8192);
	if (f->ft.is_server) {
		ret = open_objects(&w);
		if (!ret)
			ret = sleeper_side(&w);
	} else {
		ret = writer_side(&w);
	}
	if (!ret)
		ret = rma_finish(&w.r);
out:
	for (int k = 0; k < 2; k++)
		rma_mr_close(&w.r, &w.mr[k]);
	for (int k = 0; k < 3; k++)
		if (w.cntr[k])
			fi_close(&w.cntr[k]->fid);
	if (w.cq)
		fi_close(&w.cq->fid);
	rma_close(&w.r);
	free(w.mem);
	if (ret || f->failures || w.fails) {
		fprintf(stderr, "waits: FAIL (%d)\n", ret);
		return 1;
	}
	printf("waits: PASS (%s)\n", f->ft.is_server ? "sleeper" : "writer");
	return 0;
}
