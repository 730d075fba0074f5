/*
 * Windows in the ring header (wire/cour_shm_window.h): a producer may enter only an OPEN
 * window of the key it names, with the whole range inside; the owner's withdraw waits for
 * producers inside, in this process or another, and a withdrawn or re-offered window is
 * never entered under the old view.
 */
#define COUR_SHM_RING_TESTING
#include "fi/cour_fi.h"
#include "wire/cour_shm_window.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

TestSuite(shm_window, .timeout = 60);

/* cour_prov and a silent fi_log: test_log_silent.c */

static void pair(struct cour_shm_ring **own, struct cour_shm_ring **prod)
{
	struct cour_shm_locator loc;

	cr_assert_eq(cour_shm_ring_create(8, 128, own, &loc), 0);
	cr_assert_eq(cour_shm_ring_attach(&loc, prod), 0);
}

Test(shm_window, bounds_keys_and_generations)
{
	struct cour_shm_ring *own, *prod;
	static char region[8192];
	uint64_t dst, gen, g2;
	uint32_t slot, s2;

	pair(&own, &prod);
	cr_assert_not(cour_shm_window_enter(prod, 7, 0x1000, 8, &dst, &slot, &gen), "empty table");
	cr_assert_eq(cour_shm_window_publish(own, 7, 0x1000, sizeof(region), region, false,
					     &slot), 0);
	cr_assert_eq(cour_shm_window_publish(prod, 8, 0, 1, region, true, &s2), -FI_EINVAL,
		     "only the owner offers");

	cr_assert(cour_shm_window_enter(prod, 7, 0x1000, sizeof(region), &dst, &s2, &gen));
	cr_assert_eq(dst, (uint64_t)(uintptr_t)region, "the whole region, at its base");
	cr_assert_eq(s2, slot);
	cr_assert_not(cour_shm_window_notify(prod, s2), "published without notices");
	cour_shm_window_set_notify(own, slot, true);
	cr_assert(cour_shm_window_notify(prod, s2), "a counter bound since: notices wanted");
	cour_shm_window_leave(prod, s2, gen);
	cr_assert(cour_shm_window_enter(prod, 7, 0x1000 + 100, 50, &dst, &s2, &gen));
	cr_assert_eq(dst, (uint64_t)(uintptr_t)region + 100, "offset into the region");
	cour_shm_window_leave(prod, s2, gen);

	/* every range not wholly inside, including ones whose end would wrap */
	cr_assert_not(cour_shm_window_enter(prod, 8, 0x1000, 8, &dst, &s2, &gen), "other key");
	cr_assert_not(cour_shm_window_enter(prod, 7, 0xfff, 8, &dst, &s2, &gen), "starts before");
	cr_assert_not(cour_shm_window_enter(prod, 7, 0x1000 + sizeof(region) - 7, 8, &dst, &s2,
					    &gen), "ends after");
	cr_assert_not(cour_shm_window_enter(prod, 7, 0x1000, sizeof(region) + 1, &dst, &s2, &gen),
		      "longer than the region");
	cr_assert_not(cour_shm_window_enter(prod, 7, UINT64_MAX - 4, 16, &dst, &s2, &gen),
		      "wraps");
	cr_assert_not(cour_shm_window_enter(prod, 7, 0x1001, UINT64_MAX, &dst, &s2, &gen),
		      "wraps by length");

	/* withdrawn: nobody enters; offered again under another key: the old key is gone, and
	 * a leave of the old generation leaves the new one's count alone */
	cr_assert(cour_shm_window_enter(prod, 7, 0x1000, 8, &dst, &s2, &gen));
	cour_shm_window_leave(prod, s2, gen);
	cr_assert(cour_shm_window_withdraw(own, slot, 0));
	cr_assert_not(cour_shm_window_enter(prod, 7, 0x1000, 8, &dst, &s2, &gen));
	cr_assert_eq(cour_shm_window_publish(own, 9, 0, 64, region, true, &s2), 0);
	cr_assert_eq(s2, slot, "a withdrawn slot is reused");
	cr_assert(cour_shm_window_enter(prod, 9, 0, 64, &dst, &s2, &g2));
	cr_assert_neq(g2, gen, "with a new generation");
	cour_shm_window_leave(prod, s2, gen);           /* late, from the old generation */
	cr_assert_not(cour_shm_window_withdraw(own, s2, 1000),
		      "the new generation's producer is still inside");
	cour_shm_window_leave(prod, s2, g2);            /* after the owner gave up: no effect */

	/* the table has an end */
	for (int i = 0; i < COUR_SHM_WINDOWS; i++)
		cr_assert_eq(cour_shm_window_publish(own, 100 + i, 0, 64, region, true, &s2), 0,
			     "%d", i);
	cr_assert_eq(cour_shm_window_publish(own, 200, 0, 64, region, true, &s2), -FI_EAGAIN);

	/* windows outlive their owner in a producer's mapping: the producer must see it gone */
	cr_assert(cour_shm_ring_owner_holds(prod));
	cr_assert_not(cour_shm_ring_owner_holds(own), "asked of a producer's mapping only");
	cour_shm_ring_close(own);
	cr_assert_not(cour_shm_ring_owner_holds(prod), "the owner closed its ring");
	cour_shm_ring_close(prod);
}

/* Two producers inside at once; withdraw waits for both to leave, and closes the window to
 * new ones the moment it starts. */
struct inside {
	struct cour_shm_ring *prod;
	uint32_t slot;
	uint64_t gen;
	int hold_ms;
	volatile int *left;
};

static void *leave_later(void *arg)
{
	struct inside *in = arg;

	usleep((useconds_t)in->hold_ms * 1000);
	__atomic_add_fetch(in->left, 1, __ATOMIC_SEQ_CST);
	cour_shm_window_leave(in->prod, in->slot, in->gen);
	return NULL;
}

Test(shm_window, withdraw_waits_for_every_producer_inside)
{
	struct cour_shm_ring *own, *prod;
	static char region[4096];
	struct inside in[2];
	pthread_t th[2];
	volatile int left = 0;
	uint64_t dst, gen, t0;
	uint32_t slot, s;

	pair(&own, &prod);
	cr_assert_eq(cour_shm_window_publish(own, 5, 0, sizeof(region), region, true, &slot), 0);
	for (int i = 0; i < 2; i++) {
		in[i] = (struct inside){ .prod = prod, .hold_ms = 100 * (i + 1), .left = &left };
		cr_assert(cour_shm_window_enter(prod, 5, 0, 64, &dst, &in[i].slot, &in[i].gen));
	}
	for (int i = 0; i < 2; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, leave_later, &in[i]), 0);
	t0 = cour_now_us();
	cr_assert(cour_shm_window_withdraw(own, slot, 10000000));
	cr_assert_eq(left, 2, "withdraw returned with a producer inside");
	cr_assert_geq(cour_now_us() - t0, 150000);
	cr_assert_not(cour_shm_window_enter(prod, 5, 0, 64, &dst, &s, &gen));
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	cour_shm_ring_close(prod);
	cour_shm_ring_close(own);
}

/* Across processes: a child enters the parent's window and writes the parent's memory with
 * process_vm_writev, as an initiator does; once withdraw returns, the bytes are there and the
 * child can no longer enter. */
Test(shm_window, a_child_writes_through_the_window)
{
	struct cour_shm_ring *own;
	struct cour_shm_locator loc;
	static char region[65536];
	int go[2], st;
	uint32_t slot;
	pid_t pid;

	cr_assert_eq(cour_shm_ring_create(8, 128, &own, &loc), 0);
	cr_assert_eq(cour_shm_window_publish(own, 77, 0x10000, sizeof(region), region, true,
					     &slot), 0);
	cr_assert_eq(pipe(go), 0);
	pid = fork();
	if (!pid) {
		struct cour_shm_ring *prod;
		char buf[4096], c;
		uint64_t dst, gen;
		uint32_t s;
		struct iovec l = { buf, sizeof(buf) }, r;

		memset(buf, 0xa5, sizeof(buf));
		if (cour_shm_ring_attach(&loc, &prod) ||
		    !cour_shm_window_enter(prod, 77, 0x10000 + 8192, sizeof(buf), &dst, &s, &gen))
			_exit(10);
		r.iov_base = (void *)(uintptr_t)dst;
		r.iov_len = sizeof(buf);
		usleep(100000);                 /* the parent is withdrawing by now */
		if (process_vm_writev(getppid(), &l, 1, &r, 1, 0) != (ssize_t)sizeof(buf))
			_exit(errno == EPERM ? 77 : 11);
		cour_shm_window_leave(prod, s, gen);
		if (read(go[0], &c, 1) != 1)
			_exit(12);
		_exit(cour_shm_window_enter(prod, 77, 0x10000, 1, &dst, &s, &gen) ? 13 : 0);
	}
	usleep(20000);
	/* the child may not have entered yet: wait until it has, so that withdraw has a user */
	for (int i = 0; i < 1000 && !(__atomic_load_n(&cour_shm_ring_hdr(own)->window[slot].word,
						       __ATOMIC_ACQUIRE) & 0xffff00); i++)
		usleep(1000);
	cr_assert(cour_shm_window_withdraw(own, slot, 10000000));
	for (size_t i = 0; i < 4096; i++)
		cr_assert_eq((unsigned char)region[8192 + i], 0xa5, "byte %zu after withdraw", i);
	cr_assert_eq(region[8191], 0, "nothing before the range");
	cr_assert_eq(write(go[1], "x", 1), 1);
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st));
	if (WEXITSTATUS(st) == 77)
		cr_skip_test("process_vm_writev refused here (ptrace rules)");
	cr_assert_eq(WEXITSTATUS(st), 0, "child exit %d", WEXITSTATUS(st));
	cour_shm_ring_close(own);
}
