/*
 * The shared-memory receive ring: how peers on the same host hand packets to an endpoint
 * without a socket. Each endpoint owns one ring; any number of producer processes put packets
 * in it, the owner alone takes them out (multi-producer, single-consumer, bounded, lock-free).
 *
 * Memory. The ring is a memfd (MFD_CLOEXEC, sealed against shrinking and growing) mapped
 * MAP_SHARED. No name exists in /dev/shm or anywhere else, so nothing outlives the processes
 * that map it, even under SIGKILL. A producer finds it through the owner's fd table,
 * /proc/<pid>/fd/<fd>, which the kernel lets only the same user (ptrace read access) open.
 * The seal matters: a truncated file would turn every access past its end into SIGBUS, in the
 * owner and in every producer; attach refuses a file without F_SEAL_SHRINK.
 *
 * Layout (native byte order: both ends are on one host):
 *
 *   offset 0    +---------------------------------------------------------------+
 *               | magic, version, hdr_size, nonce, bytes, ncells, cell_size,     |  written once
 *               | cell_payload, owner_pid                                        |  by the owner
 *   64          | head   (consumer's next position; informative, nobody relies)  |
 *   128         | tail   (producers' next position to reserve; a hint, see below)|
 *   192         | armed  (the consumer may be asleep: wake it after publishing)  |
 *   256         | grant[64] (leases on the owner's memory, see Grants)           |
 *   768         | window[32] (regions producers may write into, cour_shm_window.h)|
 *   2816        | box[32] (mailbox control lines, written by their consumers)    |
 *   6912        +---------------------------------------------------------------+
 *               | (unused: the header is alone in its 64 KiB, see cour_shm_slot_off)|
 *   65536       +---------------------------------------------------------------+
 *               | slot 0: state (8) | len (4) | tag_len (4) | packet, then tag (240)|  256 bytes
 *               | slot 1 ... slot ncells-1                                       |  each
 *   +ncells*256 +---------------------------------------------------------------+
 *               | cell 0: data of a packet too big for its slot                  |  cell_size
 *               | cell 1 ... cell ncells-1                                       |  bytes each,
 *               +---------------------------------------------------------------+  64-aligned
 *               | (to a page boundary) box 0 ... box 31: mailboxes this ring's   |  8 KiB each
 *               | owner writes to one peer each (cour_shm_box.h)                 |
 *               +---------------------------------------------------------------+
 *
 * Position p owns slot p and cell p (mod ncells). A packet that fits its slot with its tag
 * (cour_shm_fits_slot) lives there, the tag right behind it; a bigger one lives in its cell
 * and the slot holds only the state, the lengths and the tag. Why the tag goes behind the
 * packet (version 6): in front, a 32-byte field pushed a small message's 80-byte header and
 * payload onto a third cache line, and each line costs a transfer between the two cpus; an
 * 8-byte message and an IPv4 tag now take two (Open MPI's 8 B message rate on one host was
 * bound by those transfers).
 * Why two sizes (version 5): a cell is 16 KiB, so with every packet in its cell each small
 * packet landed on a page of its own. The owner's first lap of 256 cells made 1 MiB resident
 * (and took a page-allocating fault per packet), and a producer mapped a page per packet it
 * put. Sixteen slots share a page: small packets (control, acknowledgements, short messages)
 * keep the owner at its slots (then 64 KiB, 32 KiB since rings have 128 positions) and cost a
 * producer a page per sixteen positions. Version 4 put the state words on lines of their own
 * ahead of the cells for the same reason; the slots keep that, and the packet beside its
 * word is on the line the consumer reads anyway.
 * Why a state word holds the lap and not the position (version 8): with the position, the
 * owner had to write FREE{i} into every slot at creation, so every ring cost its 64 KiB of
 * slots at once, used or not. Open MPI opens a second endpoint per rank for one-sided
 * (btl/ofi), which on one host carries nothing (osc/rdma reaches same-host windows through
 * its own shared memory): at 128 ranks those idle rings were 8.7 MB of the node's shared
 * memory. With the lap, the fresh file's zeroes are the first lap's FREE words.
 * A producer never reads a state word before its CAS (a read fault on a shared mapping also
 * maps the cached pages around it, the kernel's fault-around); it maps the slots it takes
 * and the cells it writes, the owner its slots and the cells big packets used.
 *
 * Positions count packets from 0 forever (64 bits); position p lives in slot and cell
 * p & (ncells - 1), called "the cell" below. A slot's state word says, for one position, who
 * holds the cell:
 *
 *   bits 63..24  seq: the position's lap, p & ~(ncells - 1), low 40 bits
 *   bits 23..22  FREE (0), RESERVED (1), PUBLISHED (2); 3 is never written
 *   bits 21..0   pid of the producer that reserved it (Linux pids are below 2^22)
 *
 *   FREE{p} --producer CAS--> RESERVED{p,pid} --producer store--> PUBLISHED{p,pid}
 *     ^                            |                                     |
 *     +---- consumer store: FREE{p + ncells} <---- (dead pid: CAS) ------+--- consumer pops
 *
 * Why the reservation is a CAS on the cell word and not on the tail (as in the classic
 * per-cell sequence ring): the pid must be written in the same atomic step that takes the
 * cell. Then there is no instant at which a cell is taken but nobody can say by whom, so a
 * producer killed at any instruction leaves either nothing, a cell RESERVED under its pid, or
 * a PUBLISHED packet. The tail is only a hint of where to try: a producer finding the cell at
 * the tail already taken (or already reused) advances the tail for whoever took it, so a
 * producer that dies between its cell CAS and its tail CAS stops nobody.
 *
 * A reserved cell is never given up because of time alone: a live producer may be preempted
 * for seconds on a loaded host, and taking its cell back would let it write into a cell that
 * somebody else owns. The consumer, finding the head cell RESERVED and unchanged for
 * COUR_SHM_STUCK_US, asks kill(pid, 0): only ESRCH proves that the producer can never write
 * again (a process is reaped only after all its threads stopped and its memory is gone). It
 * then CASes the cell to FREE of the next lap and skips it (cour_shm_ring_reclaimed). Limits:
 * a dead producer that nobody reaps is a zombie and kill() still finds it, so its cell waits
 * until the zombie is reaped; a reused pid makes the consumer wait for the new process. Both
 * only delay, neither corrupts. Both ends must live in one pid namespace: a producer whose
 * /proc shows the owner under the locator's pid is in it in practice.
 *
 * Fast paths: an empty peek loads the head cell's first cache line once; a put is a load of
 * the tail, one CAS on the cell, one CAS on the tail (the price of the pid in the cell word:
 * the tail can no longer be the reservation), a load of `armed`, the copy and one release
 * store: no fence (see Sleeping). No system call: the clock is read, and kill() called, only while the head cell
 * stays RESERVED.
 *
 * Every word in the mapping is written by other processes and is treated as untrusted: sizes
 * and indices come from the mapping only after checks (positions are masked, lengths bounded),
 * the geometry is read once at attach and kept privately, and every retry loop is bounded
 * (put gives -FI_EAGAIN, peek gives NULL). A state word that no protocol step can produce,
 * found at the head for COUR_SHM_STUCK_US, is reset and skipped; a published cell whose
 * lengths are out of range is skipped at once. Bad data in a well-formed packet is the
 * engine's to detect, as on UDP. This guards against bugs and stray writes, not against a
 * malicious process of the same user, which could ptrace us anyway.
 *
 * Sleeping (see cour_shm_ring_arm): the consumer sets `armed`, a seq_cst fence, then looks at
 * the head cell and sleeps only if it is FREE. A producer reserves its cell with a seq_cst CAS,
 * then loads `armed`. In the single total order one of the two loads sees the other side's
 * write: either the producer sees `armed` (and rings the doorbell once it has published), or
 * the consumer sees the head cell taken (reserved is enough: arm refuses to sleep on a cell
 * being written) and does not sleep. The head cell is ours whenever it is FREE at arming time,
 * as every cell between the head and ours is taken or consumed. Looking at `armed` before the
 * copy instead of after the publish spares the put a fence, which would wait for the copy's
 * stores to reach the consumer's cache lines: most of a small put's cost.
 * The producer exchanges `armed` to 0, so exactly one producer rings per arming. Spurious
 * doorbells happen (a producer that saw `armed` before a disarm); the engine ignores them.
 *
 * Grants: the owner may let one producer copy into or out of its memory for a moment (half of
 * a big RMA, proto/cour_rma_split.c). A lease is one word in the header, which the owner must
 * be able to take back at any time, as the memory may be unregistered and freed:
 *
 *   FREE --owner--> OPEN{gen} --producer CAS--> BUSY{gen} --producer store--> DONE | FAILED{gen}
 *                       |                         (copying)
 *                       +--owner CAS--> REVOKED{gen}: the producer's CAS fails, it never copies
 *
 * The producer copies only between its CAS and its store, so once the owner's revoke CAS
 * succeeds, or the word leaves BUSY, no copy is in flight and none can start. A BUSY word
 * only has to be waited out for one system call of the producer (or its death). gen is the
 * owner's counter, so a grant packet that arrives late cannot take a slot's next lease.
 *
 * A handle belongs to the process that created or attached it: its pid is read once then,
 * since getpid() is a system call. A child after fork attaches on its own.
 */
#ifndef COUR_SHM_RING_H
#define COUR_SHM_RING_H

#include <assert.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "wire/cour_shm_box.h"

#define COUR_SHM_TAG_MAX 32

struct cour_shm_ring;                       /* one mapping: the owner's, or a producer's */

struct cour_shm_locator {                   /* what a producer needs to attach; sent in a packet */
	uint32_t pid;
	int32_t  fd;
	uint64_t nonce;                         /* random, nonzero */
	uint64_t bytes;                         /* size of the mapping */
};
static_assert(sizeof(struct cour_shm_locator) == 24, "locator layout is fixed");

/* Owner: create a ring of ncells (power of two, 2..65536) cells of cell_payload bytes (64..65536).
 * 0, -FI_EINVAL (arguments), -FI_ENOMEM. */
int  cour_shm_ring_create(uint32_t ncells, uint32_t cell_payload, struct cour_shm_ring **out,
			  struct cour_shm_locator *loc);
/* Producer: map a peer's ring. 0, -FI_ENOENT (no such process or fd), -FI_EACCES,
 * -FI_EINVAL (not a ring, wrong nonce, bad header), -FI_ENOMEM. */
int  cour_shm_ring_attach(const struct cour_shm_locator *loc, struct cour_shm_ring **out);
void cour_shm_ring_close(struct cour_shm_ring *r);   /* unmap (owner: also close the memfd) */
uint32_t cour_shm_ring_payload_max(const struct cour_shm_ring *r);

/* Producer: one packet made of hdr then the iovecs, with the sender's tag.
 * 0: published; -FI_EAGAIN: full (nothing written); -FI_EMSGSIZE: larger than a cell;
 * -FI_EINVAL: tag_len above COUR_SHM_TAG_MAX.
 * *wake: set true iff the consumer armed and this put must wake it (else left untouched).
 * wake NULL: the armed flag is left alone (someone else must wake the consumer). */
int  cour_shm_ring_put(struct cour_shm_ring *r, const void *tag, uint32_t tag_len,
		       const void *hdr, size_t hdr_len, const struct iovec *iov, size_t iovcnt,
		       bool *wake);

/* Consumer: the oldest published packet, or NULL if none. Valid until cour_shm_ring_pop.
 * tag and tag_len may be NULL. */
const void *cour_shm_ring_peek(struct cour_shm_ring *r, uint32_t *len, const void **tag,
			       uint32_t *tag_len);
/* Consumer: release the packet the last peek returned (nothing if it returned NULL). */
void cour_shm_ring_pop(struct cour_shm_ring *r);
/* Consumer, before sleeping: true if the ring is empty after arming, so a put will wake us.
 * false (a packet is published or still being written): poll again, do not sleep; the flag is
 * then cleared. */
bool cour_shm_ring_arm(struct cour_shm_ring *r);
void cour_shm_ring_disarm(struct cour_shm_ring *r);
uint64_t cour_shm_ring_reclaimed(const struct cour_shm_ring *r);  /* cells of dead producers skipped */

/* ---- grants (owner: open, revoke, state, close; producer: take, finish) ---- */
#define COUR_SHM_GRANTS 64
enum cour_shm_grant_state {
	COUR_GRANT_FREE = 0,
	COUR_GRANT_OPEN,            /* offered: the producer may take it */
	COUR_GRANT_BUSY,            /* the producer is copying */
	COUR_GRANT_DONE,            /* the producer copied its part */
	COUR_GRANT_FAILED,          /* the producer took it but could not copy */
	COUR_GRANT_REVOKED,         /* taken back before the producer took it */
};
/* Owner: a new lease; 0, or -FI_EAGAIN when all are in use. */
int  cour_shm_grant_open(struct cour_shm_ring *r, uint32_t *slot, uint64_t *gen);
/* Owner: take the lease back unless the producer has it: the state after the attempt
 * (REVOKED, BUSY, DONE or FAILED; BUSY means ask again). */
enum cour_shm_grant_state cour_shm_grant_revoke(struct cour_shm_ring *r, uint32_t slot,
						uint64_t gen);
void cour_shm_grant_close(struct cour_shm_ring *r, uint32_t slot);  /* owner: slot reusable */
uint32_t cour_shm_grants_open(const struct cour_shm_ring *r);       /* owner: leases in use */
/* Producer, on a peer's ring: true if the lease is ours to copy under (OPEN -> BUSY). */
bool cour_shm_grant_take(struct cour_shm_ring *r, uint32_t slot, uint64_t gen);
void cour_shm_grant_finish(struct cour_shm_ring *r, uint32_t slot, uint64_t gen, bool ok);

/* ---- mailboxes (cour_shm_box.h) ---- */
/* Owner: claim a box of our file for one peer, started for it; -FI_EAGAIN when all are taken. */
int  cour_shm_box_claim(struct cour_shm_ring *r, struct cour_box_tx *b);
void cour_shm_box_free(struct cour_shm_ring *r, struct cour_box_tx *b);  /* b->gen becomes 0 */
/* Producer of a peer's ring: poll the box idx of generation gen in that peer's file.
 * -FI_EINVAL: no such box. */
int  cour_shm_box_open(struct cour_shm_ring *r, uint32_t idx, uint32_t gen,
		       struct cour_box_rx *b);
/* ...and stop polling it (before the ring is closed): its pages leave our resident memory. */
void cour_shm_box_close(struct cour_shm_ring *r, struct cour_box_rx *b);
/* Producer, after publishing in a box of ours: does the consumer of this (its) ring sleep?
 * true once per arming, as cour_shm_ring_put's *wake. */
bool cour_shm_ring_wake(struct cour_shm_ring *r);
/* Owner: is the head cell free, so that nothing published before now is still in the ring? */
bool cour_shm_ring_idle(const struct cour_shm_ring *r);

/* The owner's header, for cour_shm_window.c (a producer's view of it is untrusted) */
struct cour_shm_hdr *cour_shm_ring_hdr(const struct cour_shm_ring *r);
bool cour_shm_ring_is_owner(const struct cour_shm_ring *r);
/* Producer: does the owner still hold this ring under the fd it named? false once it exited,
 * exec'd (the memfd is close-on-exec) or closed its endpoint, and for a process that took its
 * pid since. One stat() of /proc/<pid>/fd/<fd>. */
bool cour_shm_ring_owner_holds(const struct cour_shm_ring *r);
/* Producer, of a peer gone quiet: drop our page-table entries for its ring. The pages are the
 * owner's and stay (a shared mapping refills from the file on the next access, a minor fault
 * a page); our resident memory stops counting them. */
void cour_shm_ring_forget_pages(struct cour_shm_ring *r);

/* ---- the shared layout (for the static_asserts, and for tests that corrupt it) ---- */
#define COUR_SHM_MAGIC   0x474e495220524f43ull   /* "COR RING" as little-endian bytes */
#define COUR_SHM_VERSION 10u     /* 3: windows; 4: state words apart; 5: small packets in slots;
				  * 6: the tag behind the packet; 7: mailboxes; 8: laps in the
				  * state words; 9: a box's close entry (cour_shm_box.h); 10: a
				  * split message's refused part starts at 0 (cour_msg_proto.c) */
#define COUR_SHM_SLOT    256u    /* a position's state word, lengths, tag and small packet */

#define COUR_SHM_SEQ_SHIFT   24
#define COUR_SHM_STATE_SHIFT 22
#define COUR_SHM_PID_MASK    ((1u << COUR_SHM_STATE_SHIFT) - 1)

enum {
	COUR_SHM_FREE      = 0,
	COUR_SHM_RESERVED  = 1,
	COUR_SHM_PUBLISHED = 2,
};

/* One region of the owner's that producers may write into themselves (cour_shm_window.h).
 * word: gen << 24 | users << 8 | state; the other fields are the owner's, written while the
 * word is FREE and read by producers only between two loads of an OPEN word. */
#define COUR_SHM_WINDOWS 32
struct cour_shm_window {
	uint64_t word;
	uint64_t key;
	uint64_t start;             /* the address initiators name the region's first byte by */
	uint64_t len;
	uint64_t base;              /* where that byte is in the owner's address space */
	uint64_t notify;            /* nonzero: the owner counts writes, send it a notice */
	uint64_t pad[2];
};
static_assert(sizeof(struct cour_shm_window) == 64, "a window is one cache line");

struct cour_shm_hdr {
	uint64_t magic;
	uint32_t version;
	uint32_t hdr_size;          /* sizeof(struct cour_shm_hdr) */
	uint64_t nonce;             /* equals the locator's: a reused fd number is not our ring */
	uint64_t bytes;             /* size of the file */
	uint32_t ncells;
	uint32_t cell_size;         /* stride: cell_payload rounded up to 64 */
	uint32_t cell_payload;
	uint32_t owner_pid;
	alignas(64) uint64_t head;  /* written by the consumer after each pop */
	alignas(64) uint64_t tail;  /* CASed forward by producers */
	alignas(64) uint32_t armed; /* 1: consumer may sleep; a producer exchanges it to 0 */
	alignas(64) uint64_t grant[COUR_SHM_GRANTS];  /* gen << 3 | state */
	alignas(64) struct cour_shm_window window[COUR_SHM_WINDOWS];
	alignas(64) struct cour_box_ctl box[COUR_BOX_COUNT];   /* written by each box's consumer */
};
static_assert(offsetof(struct cour_shm_hdr, head) == 64, "head on its own line");
static_assert(offsetof(struct cour_shm_hdr, tail) == 128, "tail on its own line");
static_assert(offsetof(struct cour_shm_hdr, armed) == 192, "armed on its own line");
static_assert(offsetof(struct cour_shm_hdr, grant) == 256, "grants on lines of their own");
static_assert(offsetof(struct cour_shm_hdr, window) == 768, "windows on lines of their own");
static_assert(offsetof(struct cour_shm_hdr, box) == 2816, "box control lines after windows");
static_assert(sizeof(struct cour_shm_hdr) == 6912, "the header's size is fixed");

struct cour_shm_slot {
	uint64_t state;             /* see the state word above */
	uint32_t len;               /* packet bytes, valid once PUBLISHED */
	uint32_t tag_len;
	uint8_t  data[];            /* packet then tag (cour_shm_fits_slot), or the tag alone */
};
#define COUR_SHM_SLOT_ROOM (COUR_SHM_SLOT - 16u)
/* a packet this long lives in its slot whatever its tag */
#define COUR_SHM_INLINE (COUR_SHM_SLOT_ROOM - COUR_SHM_TAG_MAX)
static_assert(offsetof(struct cour_shm_slot, len) == 8, "slot layout");
static_assert(offsetof(struct cour_shm_slot, data) == 16, "slot layout");

/* Does a packet of len bytes live in its slot, with its tag of tag_len bytes behind it? */
static inline bool cour_shm_fits_slot(uint32_t len, uint32_t tag_len)
{
	return (uint64_t)len + tag_len <= COUR_SHM_SLOT_ROOM;
}

/* Offsets in the mapping of slot i and of cell i. The slots start 64 KiB in: a read fault on
 * a shared file mapping also maps the cached pages of its 64 KiB window (the kernel's
 * fault-around), so a producer reading a peer's header would map slots and cells it never
 * uses; alone in its window, the header maps alone. */
#define COUR_SHM_SLOTS_OFF 65536u
static_assert(sizeof(struct cour_shm_hdr) <= COUR_SHM_SLOTS_OFF, "header before the slots");
static inline size_t cour_shm_slot_off(uint32_t i)
{
	return COUR_SHM_SLOTS_OFF + (size_t)i * COUR_SHM_SLOT;
}

static inline size_t cour_shm_cell_off(uint32_t ncells, uint32_t cell_size, uint32_t i)
{
	return cour_shm_slot_off(ncells) + (size_t)i * cell_size;
}

/* The mailboxes (cour_shm_box.h) follow the cells, from a page boundary: a box's pages are
 * touched only once a pair uses it. */
static inline size_t cour_shm_box_off(uint32_t ncells, uint32_t cell_size, uint32_t i)
{
	return ((cour_shm_cell_off(ncells, cell_size, ncells) + 4095) & ~(size_t)4095) +
	       (size_t)i * COUR_BOX_BYTES;
}

static inline uint64_t cour_shm_word(uint64_t seq, unsigned state, uint32_t pid)
{
	return seq << COUR_SHM_SEQ_SHIFT | (uint64_t)state << COUR_SHM_STATE_SHIFT |
	       (pid & COUR_SHM_PID_MASK);
}

/* a slot's word for position pos of a ring of mask + 1 cells: seq is the position's lap, its
 * slot bits cleared, so that the first lap's FREE words are the fresh file's zeroes */
static inline uint64_t cour_shm_lap_word(uint32_t mask, uint64_t pos, unsigned state,
					 uint32_t pid)
{
	return cour_shm_word(pos & ~(uint64_t)mask, state, pid);
}

#ifdef COUR_SHM_RING_TESTING
/* put split in two, so that a test can reserve a cell and then die or sleep. advance_tail
 * false stops right after the cell CAS, the worst instant to die at. */
int  cour_shm_ring_reserve(struct cour_shm_ring *r, uint64_t *pos, bool advance_tail);
int  cour_shm_ring_commit(struct cour_shm_ring *r, uint64_t pos, const void *tag,
			  uint32_t tag_len, const void *hdr, size_t hdr_len,
			  const struct iovec *iov, size_t iovcnt, bool *wake);
/* published cells skipped because their lengths were out of range, and garbage state words reset */
uint64_t cour_shm_ring_corrupt(const struct cour_shm_ring *r);
/* the mapping, to corrupt it */
void *cour_shm_ring_base(const struct cour_shm_ring *r);
#endif

#endif /* COUR_SHM_RING_H */
