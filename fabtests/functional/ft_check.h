/*
 * Checks for the standalone functional tests (one process, or a parent and its child, no
 * harness): CHECK and CALL print where and what differed, count a failure and return -1 from
 * the test function; the program exits non-zero when any failed. The including file sets
 * FT_CHECK_NAME (its name in messages); ft_check_who adds a role ("P", "C") when set.
 */
#ifndef COUR_FT_CHECK_H
#define COUR_FT_CHECK_H

#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include <stdint.h>
#include <stdio.h>
#include <time.h>

#ifndef FT_CHECK_NAME
#error "define FT_CHECK_NAME before including ft_check.h"
#endif

static int failures;
static const char *ft_check_who = "";

#define CHECK(cond, ...) do { \
	if (!(cond)) { \
		fprintf(stderr, "%s%s%s: %s:%d: %s: ", FT_CHECK_NAME, *ft_check_who ? " " : "", \
			ft_check_who, __func__, __LINE__, #cond); \
		fprintf(stderr, __VA_ARGS__); \
		fprintf(stderr, "\n"); \
		failures++; \
		return -1; \
	} \
} while (0)

#define CALL(call) do { \
	int r_ = (int)(call); \
	if (r_) { \
		fprintf(stderr, "%s%s%s: %s:%d: %s: %d (%s)\n", FT_CHECK_NAME, \
			*ft_check_who ? " " : "", ft_check_who, __func__, __LINE__, #call, r_, \
			fi_strerror(-r_)); \
		failures++; \
		return -1; \
	} \
} while (0)

static inline uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* One completion from cq into *entry (in the CQ's format), calling progress() between reads:
 * 0; -1 (printed and counted) on an error entry or when ms milliseconds pass without one. */
static inline int ft_cq_wait_one(struct fid_cq *cq, void *entry, unsigned ms,
				 void (*progress)(void))
{
	uint64_t end = now_ms() + ms;

	while (now_ms() < end) {
		ssize_t n = fi_cq_read(cq, entry, 1);

		if (n == 1)
			return 0;
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry ee = { 0 };

			fi_cq_readerr(cq, &ee, 0);
			CHECK(0, "error completion %d (%s)", ee.err, fi_strerror(ee.err));
		}
		progress();
	}
	CHECK(0, "no completion in %u ms", ms);
}

#endif
