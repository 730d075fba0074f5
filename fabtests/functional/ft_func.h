/*
 * Shared pieces of the functional tests: start with the exact provider asked for, a queue of
 * completions filled by every read of the CQs (the harness's barriers read them too, so the
 * tests must not lose what a barrier saw), and assertion macros that say what differed.
 */
#ifndef COUR_FT_FUNC_H
#define COUR_FT_FUNC_H

#include <rdma/fi_ext_courier.h>

#include "ft_common.h"

#define FUNC_QLEN 8192

/* One completion as the test sees it: a success entry or an error entry. */
struct func_comp {
	bool is_err;
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
};

struct func_queue {
	struct func_comp ent[FUNC_QLEN];
	unsigned int head, tail;	/* tail - head entries, FIFO */
};

struct func {
	struct cour_ft ft;
	struct func_queue txq, rxq;
	const char *prog;
	int failures;
};

/* Fail the test function: print where and why, return -FI_EIO. */
#define FUNC_ASSERT(f, cond, fmt, ...) do { \
	if (!(cond)) { \
		fprintf(stderr, "%s: %s:%d: assertion failed: %s: " fmt "\n", (f)->prog, \
			__func__, __LINE__, #cond, ##__VA_ARGS__); \
		(f)->failures++; \
		return -FI_EIO; \
	} \
} while (0)

#define FUNC_CALL(f, call) do { \
	int func_ret_ = (int)(call); \
	if (func_ret_) { \
		fprintf(stderr, "%s: %s:%d: %s failed: %d (%s)\n", (f)->prog, __func__, \
			__LINE__, #call, func_ret_, fi_strerror(-func_ret_)); \
		(f)->failures++; \
		return func_ret_ < 0 ? func_ret_ : -FI_EIO; \
	} \
} while (0)

/*
 * Parse the common options (plus the program's), start, install the completion queueing
 * callbacks and refuse a layered provider when a plain one was named (fi_getinfo lists
 * "courier;ofi_rxd" before "courier").
 */
int func_init(struct func *f, int argc, char **argv, const char *name, uint64_t caps,
	      uint64_t order, const char *prog_optstr, cour_ft_opt_cb prog_opt, void *ctx,
	      const char *prog_usage);
/* Like func_init after option parsing, for programs that set their own options. */
int func_start(struct func *f, struct cour_ft_opts *opts);
int func_finish(struct func *f);
/* The end of main: close the endpoint, buf (may be empty) and the rest, and say how it went
 * ("<prog>: FAIL (ret)" if ret or an assertion failed, else "<prog>: server|client passed").
 * Returns the exit status, 0 or 1. */
int func_exit(struct func *f, struct cour_ft_buf *buf, int ret);

/*
 * Next completion on the tx (rx) CQ, waiting at most timeout_ms (and never past the harness's
 * deadline). Returns 0 with *c filled, or -FI_ETIMEDOUT / another negative code.
 */
int func_next(struct func *f, bool tx, struct func_comp *c, int timeout_ms);
/* 0 if no completion arrives on that CQ within ms, else -FI_EIO (and prints it). */
int func_expect_quiet(struct func *f, bool tx, int ms);

/* Retry a posting expression while it returns -FI_EAGAIN, progressing meanwhile. */
#define FUNC_POST(f, expr) func_post_ret((f), #expr, ({ \
	ssize_t r_; int n_ = 0; \
	while ((r_ = (expr)) == -FI_EAGAIN && n_++ < 10000000) { \
		if (cour_ft_progress(&(f)->ft)) break; \
		if ((n_ & 1023) == 0 && cour_ft_check_deadline(&(f)->ft, #expr)) break; \
	} r_; }))
int func_post_ret(struct func *f, const char *what, ssize_t ret);

/* Bytes [0, len) of buf hold message seq's pattern, else print the first mismatch. */
int func_check_data(struct func *f, const void *buf, size_t len, uint64_t seq, const char *what);

/* courier statistics of an endpoint; -FI_ENOSYS over other providers. */
int func_get_stats(struct fid_ep *ep, struct fi_courier_stats *st);
bool func_is_courier(const struct func *f);
/* Route the harness's completions and errors into f->txq / f->rxq (func_start does this). */
void func_use_queues(struct func *f);
/* One completion from cq (any cq of the test's), bounded by the harness deadline; an error
 * completion fails the test, naming what was awaited. */
int func_read_one(struct func *f, struct fid_cq *cq, struct fi_cq_tagged_entry *e,
		  const char *what);
void func_sleep_ms(struct func *f, int ms);	/* progressing meanwhile */

#endif
