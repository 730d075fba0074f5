/*
 * cour_syslog: an LD_PRELOAD library that logs a process's socket system calls (sendmsg,
 * sendmmsg, recvmsg, recvmmsg) with the monotonic clock before and after each, so that the
 * time a message's way takes can be split into the calls on it (fabtests/scripts/
 * hop-timeline.sh). Calls that fail with EAGAIN are counted, not logged: a polling receiver
 * makes millions. The log is kept in memory (COUR_SYSLOG_MAX entries, the rest counted) and
 * written at exit to $COUR_SYSLOG_DIR/syslog.<pid>, one line per call:
 *   t0_us t1_us kind bytes flags vlen        kind: 1 sendmsg 2 sendmmsg 3 recvmsg 4 recvmmsg
 * bytes: what the call moved (sendmmsg and recvmmsg: all its messages); flags: the call's;
 * vlen: iovecs (sendmsg, recvmsg) or messages (the mmsg calls). Two clock readings a call
 * (vDSO, ~20 ns each) is what it adds. Linux, glibc.
 */
#define _GNU_SOURCE

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define COUR_SYSLOG_MAX (1 << 21)

struct sl_ev {
	double t0, t1;
	int kind, flags;
	long bytes;
	unsigned vlen;
};

static struct sl_ev *sl_evs;
static long sl_n, sl_lost, sl_empty;

static double sl_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}

static void sl_rec(double t0, int kind, long bytes, int flags, unsigned vlen)
{
	if (!sl_evs && !(sl_evs = malloc(sizeof(*sl_evs) * COUR_SYSLOG_MAX)))
		return;
	if (sl_n >= COUR_SYSLOG_MAX) {
		sl_lost++;
		return;
	}
	sl_evs[sl_n++] = (struct sl_ev){ t0, sl_now(), kind, flags, bytes, vlen };
}

static long sl_mmsg_bytes(const struct mmsghdr *v, int n)
{
	long bytes = 0;

	for (int i = 0; i < n; i++)
		bytes += v[i].msg_len;
	return bytes;
}

/* the next definition of name: the real call */
static void *sl_real(void **slot, const char *name)
{
	if (!*slot)
		*slot = dlsym(RTLD_NEXT, name);
	return *slot;
}

ssize_t sendmsg(int fd, const struct msghdr *m, int flags)
{
	static void *real;
	ssize_t (*f)(int, const struct msghdr *, int) = sl_real(&real, "sendmsg");
	double t = sl_now();
	ssize_t r = f(fd, m, flags);
	int e = errno;

	if (r >= 0)
		sl_rec(t, 1, r, flags, (unsigned)m->msg_iovlen);
	errno = e;
	return r;
}

int sendmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags)
{
	static void *real;
	int (*f)(int, struct mmsghdr *, unsigned int, int) = sl_real(&real, "sendmmsg");
	double t = sl_now();
	int r = f(fd, v, n, flags);
	int e = errno;

	if (r > 0)
		sl_rec(t, 2, sl_mmsg_bytes(v, r), flags, (unsigned)r);
	errno = e;
	return r;
}

ssize_t recvmsg(int fd, struct msghdr *m, int flags)
{
	static void *real;
	ssize_t (*f)(int, struct msghdr *, int) = sl_real(&real, "recvmsg");
	double t = sl_now();
	ssize_t r = f(fd, m, flags);
	int e = errno;

	if (r >= 0)
		sl_rec(t, 3, r, flags, (unsigned)m->msg_iovlen);
	else
		sl_empty++;
	errno = e;
	return r;
}

int recvmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags, struct timespec *tmo)
{
	static void *real;
	int (*f)(int, struct mmsghdr *, unsigned int, int, struct timespec *) =
		sl_real(&real, "recvmmsg");
	double t = sl_now();
	int r = f(fd, v, n, flags, tmo);
	int e = errno;

	if (r > 0)
		sl_rec(t, 4, sl_mmsg_bytes(v, r), flags, (unsigned)r);
	else
		sl_empty++;
	errno = e;
	return r;
}

__attribute__((destructor)) static void sl_dump(void)
{
	const char *dir = getenv("COUR_SYSLOG_DIR");
	char path[4096];
	FILE *out;

	if (!dir || !sl_n)
		return;
	snprintf(path, sizeof(path), "%s/syslog.%d", dir, (int)getpid());
	if (!(out = fopen(path, "w")))
		return;
	fprintf(out, "# empty %ld lost %ld\n", sl_empty, sl_lost);
	for (long i = 0; i < sl_n; i++)
		fprintf(out, "%.3f %.3f %d %ld %d %u\n", sl_evs[i].t0, sl_evs[i].t1,
			sl_evs[i].kind, sl_evs[i].bytes, sl_evs[i].flags, sl_evs[i].vlen);
	fclose(out);
}
