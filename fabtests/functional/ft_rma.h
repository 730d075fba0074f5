/*
 * Shared pieces of the RMA and atomic functional tests (rma.c, atomic.c): a start that chooses
 * its own mr_mode hints, binds the four RMA counters and may accept several initiators, memory
 * registration in both key modes, and the out-of-band exchange of regions.
 *
 * The harness's cour_ft_start() asks for one fixed mr_mode and enables the endpoint before a
 * program could bind counters, so these tests open the fabric themselves, into the same struct
 * cour_ft: the harness's barriers, oob calls, progress loop and cour_ft_close() then work as
 * usual, and the completion queues of ft_func.h (func_next) see every completion.
 *
 * Key modes (-k):
 *   basic     hints mr_mode FI_MR_VIRT_ADDR|FI_MR_ALLOCATED|FI_MR_PROV_KEY, and courier must
 *             return all three: remote addresses are virtual, keys the provider's. (Another
 *             provider may return fewer; the tests then follow what it returned.)
 *   scalable  hints mr_mode 0: the application picks the keys, remote addresses are offsets
 *             from the start of the region.
 * Either way the target sends {address, key, length} over the oob channel. Over a provider
 * other than courier that lacks FI_RMA_EVENT, the tests run without target counters.
 *
 * Several initiators (atomic hammer): the server accepts npeers oob connections on its port;
 * rma_peer() points the harness's oob calls at one of them.
 */
#ifndef COUR_FT_RMA_H
#define COUR_FT_RMA_H

#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>

#include "ft_func.h"

#define RMA_MAX_PEERS 8

enum rma_keymode { RMA_KEYS_BASIC, RMA_KEYS_SCALABLE };

enum rma_cntr_kind { RMA_CNTR_WRITE, RMA_CNTR_READ, RMA_CNTR_RMT_WRITE, RMA_CNTR_RMT_READ,
		     RMA_CNTR_COUNT };

/* What a target tells an initiator about one of its regions (host order; same-host tests). */
struct rma_region {
	uint64_t addr;		/* the remote address of the region's first byte */
	uint64_t key;
	uint64_t len;
};

struct rma {
	struct func f;
	enum rma_keymode keymode;
	int npeers;			/* server: initiators to accept (1 unless told) */
	bool virt_addr;			/* FI_MR_VIRT_ADDR: remote addresses are pointers */
	bool prov_key;			/* FI_MR_PROV_KEY: the provider picks the keys */
	bool local_mr;			/* FI_MR_LOCAL: local buffers need a descriptor */
	bool endpoint_mr;		/* FI_MR_ENDPOINT: regions are bound and enabled */
	uint64_t next_key;		/* scalable mode: the next key we request */
	struct fid_cntr *cntr[RMA_CNTR_COUNT];
	fi_addr_t peer[RMA_MAX_PEERS];
	int peer_fd[RMA_MAX_PEERS];	/* server: one oob socket per initiator */
};

/*
 * Parse the common options, -k basic|scalable and the program's own (prog_optstr must not use
 * k), then start: oob (npeers connections on a server), run options, finalize (optional: may
 * change opts->caps, or opts->progress to ask for a data progress model unless -M did),
 * fi_getinfo with the key mode's mr_mode, fabric, counters, names, a barrier.
 * r must be zeroed by the caller, who may set r->npeers (from its option callback too).
 */
int rma_init(struct rma *r, int argc, char **argv, const char *name, uint64_t caps,
	     void (*finalize)(struct cour_ft_opts *opts), const char *prog_optstr,
	     cour_ft_opt_cb prog_opt, void *ctx, const char *prog_usage);

/* The last barrier, with every initiator (func_finish with one). */
int rma_finish(struct rma *r);

/* Close regions first (rma_mr_close), then this: endpoint, counters, the rest. */
void rma_close(struct rma *r);

/* Point the harness's oob calls at initiator i (server with several), else a no-op. */
void rma_peer(struct rma *r, int i);

/*
 * Register [buf, buf + len) for access; in scalable mode with the next application key. Binds
 * and enables it under FI_MR_ENDPOINT. *reg gets what the initiator needs.
 */
int rma_mr_reg(struct rma *r, void *buf, size_t len, uint64_t access, struct fid_mr **mr,
	       struct rma_region *reg);
/* The same with cntr bound to the region for cntr_flags (FI_REMOTE_WRITE, FI_REMOTE_READ)
 * before it is enabled, as OpenSHMEM binds a counter to its heap. */
int rma_mr_reg_cntr(struct rma *r, void *buf, size_t len, uint64_t access,
		    struct fid_cntr *cntr, uint64_t cntr_flags, struct fid_mr **mr,
		    struct rma_region *reg);
void rma_mr_close(struct rma *r, struct fid_mr **mr);

/* A descriptor for local buffers when FI_MR_LOCAL asks for one (else *mr = NULL, desc NULL). */
int rma_local_reg(struct rma *r, void *buf, size_t len, struct fid_mr **mr, void **desc);

/* Remote address of byte off of a region. */
static inline uint64_t rma_raddr(const struct rma_region *reg, uint64_t off)
{
	return reg->addr + off;
}

int rma_send_region(struct rma *r, const struct rma_region *reg);
int rma_recv_region(struct rma *r, struct rma_region *reg);

/*
 * Wait until counter kind reaches value (bounded by ms and the deadline), progressing the CQs
 * meanwhile; fails if it passes value, or if its error count moved from err.
 */
int rma_cntr_wait(struct rma *r, enum rma_cntr_kind kind, uint64_t value, uint64_t err, int ms);
/* Counter now: value and error count. */
void rma_cntr_get(struct rma *r, enum rma_cntr_kind kind, uint64_t *value, uint64_t *err);
extern const char *const rma_cntr_name[RMA_CNTR_COUNT];

/* The next completion on the tx (rx) CQ must be a success for ctx with these flags. */
int rma_expect_ok(struct rma *r, bool tx, void *ctx, uint64_t flags, const char *what);

/* Flags that tell the kind of a completion, for comparisons. */
#define RMA_CQ_KIND (FI_SEND | FI_RECV | FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_READ | \
		     FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA | \
		     FI_MULTI_RECV)

#endif
