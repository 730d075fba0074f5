/*
 * Unit tests of event queues (cour_eq.c) through the fi_eq_* API on a hand-built fabric.
 */
#include "fi/cour_cq.h"
#include "proto/cour_errno.h"

#include "test_mcond.h"

#include <criterion/criterion.h>
#include <poll.h>
#include <pthread.h>
#include <time.h>
#include <stdlib.h>
#include <unistd.h>

static struct cour_fabric fab;
/* only what fi_eq_open needs: the fabric is not under test */
static struct fi_ops_fabric fab_ops = {
	.size = sizeof(struct fi_ops_fabric),
	.eq_open = cour_eq_open,
};

static void setup(void)
{
	memset(&fab, 0, sizeof(fab));
	fab.fabric_fid.fid.fclass = FI_CLASS_FABRIC;
	fab.fabric_fid.ops = &fab_ops;
}

static void teardown(void)
{
	cr_expect_eq(fab.refcnt, 0, "objects left open on the fabric: %d", fab.refcnt);
}

TestSuite(eq, .init = setup, .fini = teardown, .timeout = 20);

static struct fid_eq *open_eq(enum fi_wait_obj wait_obj)
{
	struct fi_eq_attr attr = { .size = 4, .flags = FI_WRITE, .wait_obj = wait_obj };
	struct fid_eq *eq = NULL;
	int ret;

	ret = fi_eq_open(&fab.fabric_fid, &attr, &eq, NULL);
	cr_assert_eq(ret, 0, "fi_eq_open: %d", ret);
	cr_assert_not_null(eq);
	return eq;
}

static void close_eq(struct fid_eq *eq)
{
	cr_assert_eq(fi_close(&eq->fid), 0);
}

static struct fi_eq_entry mk(uintptr_t i)
{
	struct fi_eq_entry e = {
		.fid = (fid_t)(0x3000 + i),
		.context = (void *)(0x4000 + i),
		.data = 1000 + i,
	};
	return e;
}

static void put(struct fid_eq *eq, uintptr_t i)
{
	struct fi_eq_entry e = mk(i);

	cr_assert_eq(fi_eq_write(eq, FI_AV_COMPLETE, &e, sizeof(e), 0), (ssize_t)sizeof(e));
}

static void put_err(struct fid_eq *eq, uintptr_t i, int err, int prov_errno, const char *data)
{
	struct fi_eq_err_entry e = {
		.fid = (fid_t)(0x3000 + i),
		.context = (void *)(0x4000 + i),
		.data = 1000 + i,
		.err = err,
		.prov_errno = prov_errno,
		.err_data = (void *)data,
		.err_data_size = data ? strlen(data) + 1 : 0,
	};

	cr_assert_eq(cour_eq_write_err(eq, &e), (ssize_t)sizeof(e));
}

static void expect_event(struct fid_eq *eq, uintptr_t i, uint64_t flags)
{
	struct fi_eq_entry got;
	uint32_t event = 0;
	ssize_t ret;

	memset(&got, 0, sizeof(got));
	ret = fi_eq_read(eq, &event, &got, sizeof(got), flags);
	cr_assert_eq(ret, (ssize_t)sizeof(got), "fi_eq_read: %zd", ret);
	cr_assert_eq(event, FI_AV_COMPLETE);
	cr_assert_eq(got.fid, (fid_t)(0x3000 + i));
	cr_assert_eq(got.context, (void *)(0x4000 + i));
	cr_assert_eq(got.data, 1000 + i);
}

static bool fd_readable(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	return poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLIN);
}

Test(eq, write_read_peek)
{
	struct fid_eq *eq = open_eq(FI_WAIT_NONE);
	struct fi_eq_entry got;
	uint32_t event;

	cr_assert_eq(fab.refcnt, 1);
	cr_assert_eq(fi_eq_read(eq, &event, &got, sizeof(got), 0), -FI_EAGAIN);
	put(eq, 1);
	put(eq, 2);
	expect_event(eq, 1, FI_PEEK);
	expect_event(eq, 1, FI_PEEK);
	expect_event(eq, 1, 0);
	expect_event(eq, 2, 0);
	cr_assert_eq(fi_eq_read(eq, &event, &got, sizeof(got), 0), -FI_EAGAIN);
	cr_assert_eq(fi_eq_read(eq, &event, &got, sizeof(got), FI_PEEK), -FI_EAGAIN);
	close_eq(eq);
}

/* events of any size keep their bytes and their order */
Test(eq, variable_sizes_in_order)
{
	struct fid_eq *eq = open_eq(FI_WAIT_NONE);
	unsigned char buf[600], want[600];
	uint32_t event;
	size_t i, j;
	ssize_t ret;

	for (i = 0; i < 500; i++) {
		for (j = 0; j < i; j++)
			want[j] = (unsigned char)(i * 7 + j);
		cr_assert_eq(fi_eq_write(eq, (uint32_t)i, want, i, 0), (ssize_t)i);
	}
	for (i = 0; i < 500; i++) {
		for (j = 0; j < i; j++)
			want[j] = (unsigned char)(i * 7 + j);
		ret = fi_eq_read(eq, &event, buf, sizeof(buf), 0);
		cr_assert_eq(ret, (ssize_t)i);
		cr_assert_eq(event, i);
		cr_assert_arr_eq(buf, want, i);
	}
	cr_assert_eq(fi_eq_read(eq, &event, buf, sizeof(buf), 0), -FI_EAGAIN);
	close_eq(eq);
}

Test(eq, buffer_too_small_keeps_event)
{
	struct fid_eq *eq = open_eq(FI_WAIT_NONE);
	struct fi_eq_entry got;
	uint32_t event;

	put(eq, 3);
	cr_assert_eq(fi_eq_read(eq, &event, &got, sizeof(got) - 1, 0), -FI_ETOOSMALL);
	expect_event(eq, 3, 0);
	close_eq(eq);
}

Test(eq, errors_in_order_and_readerr)
{
	struct fid_eq *eq = open_eq(FI_WAIT_NONE);
	struct fi_eq_err_entry err;
	struct fi_eq_entry got;
	char mine[8];
	uint32_t event;

	cr_assert_eq(fi_eq_readerr(eq, &err, 0), -FI_EAGAIN);
	put(eq, 1);
	put_err(eq, 2, FI_EADDRNOTAVAIL, COUR_E_BAD_ADDR, "bad address 1.2.3.4");
	put(eq, 3);
	put_err(eq, 4, FI_EINVAL, COUR_E_REMOTE, "xyz");

	cr_assert_eq(fi_eq_readerr(eq, &err, 0), -FI_EAGAIN, "error reported out of order");
	expect_event(eq, 1, 0);
	cr_assert_eq(fi_eq_read(eq, &event, &got, sizeof(got), 0), -FI_EAVAIL);
	cr_assert_eq(fi_eq_read(eq, &event, &got, sizeof(got), FI_PEEK), -FI_EAVAIL);

	/* err_data_size 0: our buffer */
	memset(&err, 0, sizeof(err));
	cr_assert_eq(fi_eq_readerr(eq, &err, FI_PEEK), (ssize_t)sizeof(err));
	cr_assert_eq(err.err, FI_EADDRNOTAVAIL);
	memset(&err, 0, sizeof(err));
	cr_assert_eq(fi_eq_readerr(eq, &err, 0), (ssize_t)sizeof(err));
	cr_assert_eq(err.fid, (fid_t)0x3002);
	cr_assert_eq(err.context, (void *)0x4002);
	cr_assert_eq(err.data, 1002);
	cr_assert_eq(err.err, FI_EADDRNOTAVAIL);
	cr_assert_eq(err.prov_errno, COUR_E_BAD_ADDR);
	cr_assert_not_null(err.err_data);
	cr_assert_eq(err.err_data_size, sizeof("bad address 1.2.3.4"));
	cr_assert_str_eq(err.err_data, "bad address 1.2.3.4");
	cr_assert_str_eq(fi_eq_strerror(eq, err.prov_errno, err.err_data, NULL, 0),
			 "destination fi_addr_t not in the address vector");

	expect_event(eq, 3, 0);

	/* the application's buffer: copy what fits */
	memset(&err, 0, sizeof(err));
	memset(mine, 'q', sizeof(mine));
	err.err_data = mine;
	err.err_data_size = 2;
	cr_assert_eq(fi_eq_readerr(eq, &err, 0), (ssize_t)sizeof(err));
	cr_assert_eq(err.err, FI_EINVAL);
	cr_assert_eq(err.err_data, mine);
	cr_assert_eq(err.err_data_size, 2);
	cr_assert_eq(mine[0], 'x');
	cr_assert_eq(mine[1], 'y');
	cr_assert_eq(mine[2], 'q', "copied past err_data_size");
	cr_assert_str_eq(fi_eq_strerror(eq, COUR_E_REMOTE, NULL, mine, sizeof(mine)), "target ");

	cr_assert_eq(fi_eq_read(eq, &event, &got, sizeof(got), 0), -FI_EAGAIN);
	cr_assert_eq(fi_eq_readerr(eq, &err, 0), -FI_EAGAIN);
	close_eq(eq);
}

Test(eq, sread_on_wait_none_is_invalid)
{
	struct fid_eq *eq = open_eq(FI_WAIT_NONE);
	struct fi_eq_entry got;
	uint32_t event;
	int fd;

	cr_assert_eq(fi_eq_sread(eq, &event, &got, sizeof(got), 10, 0), -FI_EINVAL);
	cr_assert_eq(fi_control(&eq->fid, FI_GETWAIT, &fd), -FI_ENODATA);
	close_eq(eq);
}

Test(eq, sread_times_out)
{
	struct fid_eq *eq = open_eq(FI_WAIT_UNSPEC);
	struct fi_eq_entry got;
	uint32_t event;
	uint64_t t0, dt;

	t0 = cour_now_us();
	cr_assert_eq(fi_eq_sread(eq, &event, &got, sizeof(got), 0, 0), -FI_EAGAIN);
	cr_assert_lt(cour_now_us() - t0, 50000);
	t0 = cour_now_us();
	cr_assert_eq(fi_eq_sread(eq, &event, &got, sizeof(got), 150, 0), -FI_EAGAIN);
	dt = cour_now_us() - t0;
	cr_assert_geq(dt, 150000, "sread returned after %lu us, before its timeout", dt);
	cr_assert_lt(dt, 1500000, "sread took %lu us for a 150 ms timeout", dt);
	put(eq, 5);
	cr_assert_eq(fi_eq_sread(eq, &event, &got, sizeof(got), 1000, 0), (ssize_t)sizeof(got));
	cr_assert_eq(got.data, 1005);
	put_err(eq, 6, FI_EIO, COUR_E_SEND, NULL);
	cr_assert_eq(fi_eq_sread(eq, &event, &got, sizeof(got), 1000, 0), -FI_EAVAIL);
	close_eq(eq);
}

struct writer {
	struct fid_eq *eq;
	int            delay_ms;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;

	usleep(w->delay_ms * 1000);
	put(w->eq, 7);
	return NULL;
}

Test(eq, sread_woken_by_write)
{
	struct fid_eq *eq = open_eq(FI_WAIT_FD);
	struct writer w = { .eq = eq, .delay_ms = 100 };
	struct fi_eq_entry got;
	uint32_t event = 0;
	pthread_t th;
	uint64_t t0, dt;
	ssize_t ret;

	cr_assert_eq(pthread_create(&th, NULL, writer_main, &w), 0);
	t0 = cour_now_us();
	ret = fi_eq_sread(eq, &event, &got, sizeof(got), -1, 0);
	dt = cour_now_us() - t0;
	pthread_join(th, NULL);
	cr_assert_eq(ret, (ssize_t)sizeof(got));
	cr_assert_eq(event, FI_AV_COMPLETE);
	cr_assert_eq(got.data, 1007);
	cr_assert_geq(dt, 90000);
	cr_assert_lt(dt, 3000000, "write did not wake sread (%lu us)", dt);
	close_eq(eq);
}

Test(eq, getwait_fd_follows_queue)
{
	struct fid_eq *eq = open_eq(FI_WAIT_FD);
	enum fi_wait_obj wo = FI_WAIT_NONE;
	struct fi_eq_err_entry err;
	int fd = -1;

	cr_assert_eq(fi_control(&eq->fid, FI_GETWAIT, &fd), 0);
	cr_assert_geq(fd, 0);
	cr_assert_eq(fi_control(&eq->fid, FI_GETWAITOBJ, &wo), 0);
	cr_assert_eq(wo, FI_WAIT_FD);
	cr_assert_not(fd_readable(fd));
	put(eq, 1);
	put(eq, 2);
	cr_assert(fd_readable(fd));
	expect_event(eq, 1, FI_PEEK);
	cr_assert(fd_readable(fd), "peek cleared the fd");
	expect_event(eq, 1, 0);
	cr_assert(fd_readable(fd), "fd cleared with an event queued");
	expect_event(eq, 2, 0);
	cr_assert_not(fd_readable(fd), "fd readable on an empty EQ");
	put_err(eq, 3, FI_EIO, COUR_E_SEND, NULL);
	cr_assert(fd_readable(fd));
	memset(&err, 0, sizeof(err));
	cr_assert_eq(fi_eq_readerr(eq, &err, 0), (ssize_t)sizeof(err));
	cr_assert_null(err.err_data);
	cr_assert_eq(err.err_data_size, 0);
	cr_assert_not(fd_readable(fd));
	close_eq(eq);
}

Test(eq, bad_wait_obj_and_close)
{
	struct fi_eq_attr attr = { .wait_obj = FI_WAIT_POLLFD };
	struct fid_eq *eq = NULL;

	cr_assert_eq(fi_eq_open(&fab.fabric_fid, &attr, &eq, NULL), -FI_ENOSYS);
	attr.wait_obj = FI_WAIT_SET;        /* without a set (test_wait.c has them) */
	cr_assert_eq(fi_eq_open(&fab.fabric_fid, &attr, &eq, NULL), -FI_EINVAL);
	cr_assert_null(eq);
	cr_assert_eq(fab.refcnt, 0);

	eq = open_eq(FI_WAIT_UNSPEC);
	put(eq, 1);
	put_err(eq, 2, FI_EIO, COUR_E_SEND, "left behind");
	cour_ref_inc(&COUR_CONTAINER_OF(eq, struct cour_eq, eq_fid)->refcnt);
	cr_assert_eq(fi_close(&eq->fid), -FI_EBUSY);
	cour_ref_dec(&COUR_CONTAINER_OF(eq, struct cour_eq, eq_fid)->refcnt);
	close_eq(eq);
	cr_assert_eq(fab.refcnt, 0);
}

/* ---- FI_WAIT_MUTEX_COND (test_mcond.h) ---- */

static int eq_ready(void *obj)
{
	struct fi_eq_entry e;
	uint32_t ev;

	return fi_eq_read(obj, &ev, &e, sizeof(e), 0) > 0;
}

Test(eq, mutex_cond_wakes_a_sleeper)
{
	struct fid_eq *eq = open_eq(FI_WAIT_MUTEX_COND);
	struct mc_waiter w = { .ready = eq_ready, .obj = eq };
	struct fi_eq_entry e = { .context = (void *)0x42 };
	enum fi_wait_obj obj = FI_WAIT_NONE;
	pthread_t t;

	cr_assert_eq(fi_control(&eq->fid, FI_GETWAITOBJ, &obj), 0);
	cr_assert_eq(obj, FI_WAIT_MUTEX_COND);
	cr_assert_eq(fi_control(&eq->fid, FI_GETWAIT, &w.mc), 0);
	cr_assert_eq(pthread_create(&t, NULL, mc_wait, &w), 0);
	usleep(200000);
	cr_assert_eq(fi_eq_write(eq, FI_NOTIFY, &e, sizeof(e), 0), (ssize_t)sizeof(e));
	pthread_join(t, NULL);
	cr_assert(w.got, "the waiter never saw the event");
	cr_assert_lt(w.waited_ms, 3000, "woken after %lu ms", (unsigned long)w.waited_ms);
	close_eq(eq);
}
