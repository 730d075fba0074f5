/*
 * courier fabtests harness: the setup, out-of-band channel and completion loop shared by our
 * benchmarks and functional tests. Public libfabric API only, so one binary runs over any
 * provider (-p courier, -p tcp, -p "udp;ofi_rxd", -p sockets, -p shm).
 *
 * Roles: without a positional argument a program is the server; with one (the server's host)
 * it is the client. The two meet first on a TCP socket (the out-of-band channel, "oob"): the
 * client sends its run options (so the server follows the client's sizes and counts), then both
 * exchange their fi_getname() blobs, whatever their format or length, and fi_av_insert the
 * peer's. Barriers run over the same socket and keep driving the fabric while they wait,
 * because providers with manual progress (ofi_rxd) only handshake and acknowledge from inside
 * fi_cq_read.
 *
 * Setup: hints carry the program's caps, mode FI_CONTEXT|FI_CONTEXT2 (every operation gets a
 * struct fi_context2), mr_mode LOCAL|VIRT_ADDR|ALLOCATED|PROV_KEY|ENDPOINT (buffers are
 * registered, and bound under FI_MR_ENDPOINT, only when the provider keeps FI_MR_LOCAL). Of the
 * fi_info entries returned, the one whose source IP is our end of the oob socket wins, else
 * the first: so the fabric runs over the same interface as the oob (loopback for 127.0.0.1).
 * One tx and one rx CQ (FI_CQ_FORMAT_TAGGED, FI_WAIT_NONE), one FI_AV_TABLE.
 *
 * Bounds: every wait checks one deadline, set -T seconds after start; passing it prints what
 * was awaited and fails with -FI_ETIMEDOUT. A SIGALRM a little later ends the process if a call
 * blocks inside a provider, so no run can hang.
 *
 * Errors: functions return 0 or a negative FI_* code and print the cause once, where they see
 * it; callers only propagate.
 */
#ifndef COUR_FT_COMMON_H
#define COUR_FT_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <rdma/fi_ext_courier.h>

#define COUR_FT_DEFAULT_PORT     47592
#define COUR_FT_DEFAULT_TIMEOUT  60
#define COUR_FT_MAX_SIZES        32
#define COUR_FT_MAX_NAME         1024	/* largest fi_getname() blob we carry over the oob */
#define COUR_FT_ALIGN            4096

#define COUR_FT_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/*
 * Options. The "run" group travels from client to server in cour_ft_start(); the rest is local
 * to each side (each side names its own provider, and the two are checked to match).
 */
struct cour_ft_opts {
	/* local */
	const char *test_name;		/* set by the program; client and server must agree */
	const char *prov_name;		/* -p; NULL lets libfabric choose */
	enum fi_ep_type ep_type;	/* -e rdm|dgram */
	const char *dst_host;		/* positional: client mode */
	const char *bind_addr;		/* -B: where the server listens (default 127.0.0.1) */
	uint16_t oob_port;		/* -P */
	int timeout_s;			/* -T */
	enum fi_progress progress;	/* -M: data_progress hint; 0 leaves it to the provider */
	bool no_shm;			/* -D: FI_OPT_SHARED_MEMORY_PERMITTED false (this side) */
	uint64_t caps;			/* asked in hints; FI_TAGGED is dropped unless tagged */
	uint64_t msg_order;		/* ordering the program needs, asked in hints */
	enum fi_threading threading;	/* threading level asked; 0 leaves it to the provider */
	/*
	 * Optional: called on both sides once the run options are final (the server has the
	 * client's), before fi_getinfo, to derive caps or msg_order from them.
	 */
	void (*finalize)(struct cour_ft_opts *opts);

	/* run: copied from the client to the server */
	int nsizes;
	size_t sizes[COUR_FT_MAX_SIZES];
	long iterations;		/* -n; 0: the program's default for each size */
	long warmup;			/* -w; -1: the program's default */
	int window;			/* -W; 0: the program's default */
	bool tagged;			/* -t (default) or -m */
	bool verify;			/* -v */
};

struct cour_ft;

/* Called for every successful completion read from the tx or rx CQ. */
typedef void (*cour_ft_comp_cb)(struct cour_ft *ft, const struct fi_cq_tagged_entry *comp);

/*
 * Called for an error completion; return 0 if it was expected (it then counts as done) or a
 * negative code to fail the wait in progress. Unset: every error completion is fatal.
 */
typedef int (*cour_ft_err_cb)(struct cour_ft *ft, struct fid_cq *cq,
			      const struct fi_cq_err_entry *err);

struct cour_ft {
	struct cour_ft_opts opts;
	bool is_server;

	struct fi_info *hints;
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_cq *txcq;
	struct fid_cq *rxcq;
	struct fid_av *av;
	struct fid_ep *ep;
	fi_addr_t peer;

	int listen_fd;
	int oob_fd;
	char oob_local[64];		/* numeric address of our end of the oob socket */

	bool fabric_up;			/* endpoint enabled: oob waits drive progress */
	uint64_t deadline_ns;		/* CLOCK_MONOTONIC */
	uint64_t next_peer_check_ns;
	uint64_t tx_posted, tx_done;
	uint64_t rx_posted, rx_done;
	uint64_t next_mr_key;

	cour_ft_comp_cb tx_cb;
	cour_ft_comp_cb rx_cb;
	cour_ft_err_cb err_cb;
	void *app;			/* for the program's callbacks */
};

/* A buffer, registered when the provider needs local registration. */
struct cour_ft_buf {
	void *base;
	size_t len;
	struct fid_mr *mr;
	void *desc;
};

/* ---- options ---- */

/* Defaults for every field; the program may change caps, sizes, window... afterwards. */
void cour_ft_opts_init(struct cour_ft_opts *opts);

/*
 * Parse the common options, then those in prog_optstr through prog_opt (return 0 if taken,
 * nonzero to print usage and fail). Returns 0, 1 after printing help (-h), or -FI_EINVAL.
 */
typedef int (*cour_ft_opt_cb)(int opt, const char *arg, void *ctx);
int cour_ft_parse_opts(struct cour_ft_opts *opts, int argc, char **argv,
		       const char *prog_optstr, cour_ft_opt_cb prog_opt, void *ctx,
		       const char *prog_usage);
/* This side's endpoint options (-D), for an endpoint not yet enabled; 0 or the error. */
int cour_ft_ep_setopts(struct cour_ft *ft, struct fid_ep *ep);

void cour_ft_usage(FILE *out, const char *prog, const char *prog_usage);

/* "1,8,4k,1m" -> sizes; returns the count or -FI_EINVAL. */
int cour_ft_parse_sizes(const char *list, size_t *sizes, int max);

/* ---- life cycle ---- */

/*
 * Everything from the oob connection to an enabled endpoint with the peer in the AV and a first
 * barrier behind us. On the server, ft->opts' run group is replaced by the client's.
 * On failure the caller still calls cour_ft_close().
 */
int cour_ft_start(struct cour_ft *ft, const struct cour_ft_opts *opts);

/*
 * The last barrier, after every operation has completed: it keeps both sides progressing until
 * both are done, so late acknowledgements still flow. Free the buffers after it.
 */
int cour_ft_finish(struct cour_ft *ft);

/* Close whatever is open (buffers first, with cour_ft_buf_free); safe on a partial start. */
/* Close the endpoint first: its close may still send what the application's buffers hold
 * (data accepted is delivered), so buffers are freed only after it. */
void cour_ft_close_ep(struct cour_ft *ft);
void cour_ft_close(struct cour_ft *ft);

/* "# provider: tcp;ofi_rxm  ep_type: rdm  ..." on stdout. */
void cour_ft_print_header(const struct cour_ft *ft, const char *bench);

/* ---- data path ---- */

int cour_ft_buf_alloc(struct cour_ft *ft, size_t len, struct cour_ft_buf *buf);
void cour_ft_buf_free(struct cour_ft_buf *buf);

/*
 * Post a send or receive (tagged or not per opts.tagged), retrying -FI_EAGAIN while reading the
 * CQs, until the deadline. ctx must stay valid until the completion (it is a fi_context2, which
 * satisfies FI_CONTEXT and FI_CONTEXT2 providers).
 */
int cour_ft_post_send(struct cour_ft *ft, const void *buf, size_t len, void *desc,
		      uint64_t tag, struct fi_context2 *ctx);
int cour_ft_post_recv(struct cour_ft *ft, void *buf, size_t len, void *desc,
		      uint64_t tag, struct fi_context2 *ctx);

/* Read both CQs once; 0, or a negative code after a fatal error completion. */
int cour_ft_progress(struct cour_ft *ft);

/* Progress until tx_done (rx_done) reaches target, or fail at the deadline. */
int cour_ft_wait_tx(struct cour_ft *ft, uint64_t target);
int cour_ft_wait_rx(struct cour_ft *ft, uint64_t target);
/* Progress until every posted operation has completed. */
int cour_ft_wait_all(struct cour_ft *ft);

/* ---- out-of-band channel (ft_oob.c) ---- */

int cour_ft_oob_connect(struct cour_ft *ft);
void cour_ft_oob_close(struct cour_ft *ft);
int cour_ft_oob_send(struct cour_ft *ft, const void *buf, size_t len);
/* Receives exactly len bytes, driving the fabric (when it is up) while it waits. */
int cour_ft_oob_recv(struct cour_ft *ft, void *buf, size_t len);
/* Both sides meet; the fabric keeps progressing meanwhile. */
int cour_ft_barrier(struct cour_ft *ft);
/*
 * -FI_ECONNRESET if the peer closed the oob socket, i.e. died or gave up: fabric waits call it
 * every 100 ms so a failed peer ends the run at once instead of at the deadline.
 */
int cour_ft_oob_check_peer(struct cour_ft *ft);

/* ---- harness internals ---- */

/* ft_opts.c: the client sends its run options, the server adopts them (both check the test). */
int cour_ft_sync_opts(struct cour_ft *ft);

/* ---- utilities ---- */

uint64_t cour_ft_now_ns(void);
/* -FI_ETIMEDOUT (after printing what) once the deadline has passed, else 0. */
int cour_ft_check_deadline(const struct cour_ft *ft, const char *what);

/*
 * Data pattern: every byte depends on the message's sequence number and its offset, so a lost,
 * shifted, duplicated or misrouted message is caught. check returns 0 or -FI_EIO and sets
 * *bad_off to the first mismatching offset.
 */
void cour_ft_fill(void *buf, size_t len, uint64_t seq);
int cour_ft_check(const void *buf, size_t len, uint64_t seq, size_t *bad_off);
uint8_t cour_ft_pattern_byte(uint64_t seq, size_t off);

/* "4k" style size for tables. */
const char *cour_ft_size_str(size_t size, char *out, size_t outlen);

#define COUR_FT_ERR(fmt, ...) \
	fprintf(stderr, "cour_ft: %s: " fmt "\n", __func__, ##__VA_ARGS__)
#define COUR_FT_FIERR(call, ret) \
	fprintf(stderr, "cour_ft: %s: %s failed: %d (%s)\n", __func__, call, (int)(ret), \
		fi_strerror((int)-(ret)))

#endif /* COUR_FT_COMMON_H */
