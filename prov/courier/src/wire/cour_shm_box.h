/*
 * Mailboxes: one single-producer, single-consumer channel from an endpoint to one same-host
 * peer, for small messages (issue 31). The ring (cour_shm_ring.h) takes packets from any
 * number of producers, so a put pays a CAS on a state word the consumer wrote last lap and the
 * engine's 80-byte header; a box has one writer and one reader, so an entry is a few plain
 * stores and one publishing store, and an 8-byte message with its header is one cache line.
 *
 * Where a box lives: in its producer's ring file (COUR_BOX_COUNT of them after the cells), so
 * that the producer owns it, claims it without asking anyone, and frees it when the pair
 * ends. The consumer already maps that file (it is a producer of the same peer's ring) and
 * polls the box there. The consumer writes to the file only its box's control line in the
 * producer's header: how far it has read and whether it polls.
 *
 *   control lines (cour_box_ctl, the producer's header; written by the consumer)
 *     consumed   gen << 40 | line position the consumer has read up to; the producer reads
 *                it only when the room it knew of runs out
 *     polled     gen of the box the consumer polls (0: none): the producer uses a box only
 *                while its consumer says so. It reads the word before every entry; the
 *                consumer writes it when it opens and closes the box only, so the line
 *                stays in the producer's cache. An entry put in the instant between the
 *                consumer's close and the producer's next look is not read: the consumer
 *                closes a box only when it ends the pair (its peer reset or forgotten), when
 *                messages in flight fail anyway
 *   data: COUR_BOX_LINES lines of 64 bytes, entries of whole lines, in line positions that
 *   count from 0 forever (position p is line p mod COUR_BOX_LINES)
 *     entry      word (gen << 40 | p + 1 once published), len, flags, rx_id, credits, stamp,
 *                tag, data (40 bytes), then len bytes of payload
 *     pad        an entry with COUR_BOX_PAD that fills the lines up to the end of the box,
 *                where an entry would not fit: entries never wrap
 *     close      an entry with COUR_BOX_CLOSE and no payload: the producer puts nothing more
 *                in the box, and the consumer, having read every entry before it, closes it
 *                (ring version 9)
 *
 * The generation (24 bits, never 0) is the producer's count of claims: a line left from an
 * earlier pair's use of the box never reads as published for this one, so no box is cleared.
 * The producer publishes an entry with a seq_cst store and then reads the consumer ring's
 * `armed` flag; a consumer about to sleep sets `armed` and then looks at its boxes (seq_cst
 * too), so one of the two sees the other (as for the ring, cour_shm_ring.h, Sleeping).
 *
 * Everything the consumer reads is untrusted: an entry's header is copied once, its length
 * bounded and its lines checked to stay inside the box; a box that breaks those rules is
 * given up (cour_box_peek reports it), never read past. The producer treats the control line
 * the same way: a consumed position that is not one it could be leaves no room.
 */
#ifndef COUR_SHM_BOX_H
#define COUR_SHM_BOX_H

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define COUR_BOX_COUNT   32u                 /* boxes in each ring file */
#define COUR_BOX_BYTES   8192u
#define COUR_BOX_LINE    64u
#define COUR_BOX_LINES   (COUR_BOX_BYTES / COUR_BOX_LINE)
#define COUR_BOX_ENT_MAX 1024u               /* an entry spans at most 16 lines */
#define COUR_BOX_PAD     0x8000u             /* flags: filler up to the end of the box */
#define COUR_BOX_CLOSE   0x4000u             /* flags: the last entry: stop reading the box */
#define COUR_BOX_POS_BITS 40
#define COUR_BOX_GEN_MAX ((1u << 24) - 1)

struct cour_box_ent {
	uint64_t word;      /* gen << 40 | position + 1: published */
	uint32_t len;       /* payload bytes */
	uint16_t flags;     /* COUR_BOX_PAD or COUR_BOX_CLOSE, or the user's (below 0x4000) */
	uint16_t rx_id;
	uint32_t credits;
	uint32_t stamp;
	uint64_t tag;
	uint64_t data;
};
static_assert(sizeof(struct cour_box_ent) == 40, "a box entry's header is 40 bytes");
#define COUR_BOX_PAYLOAD_MAX (COUR_BOX_ENT_MAX - sizeof(struct cour_box_ent))

struct cour_box_ctl {
	uint64_t consumed;
	uint64_t pad1[7];
	uint64_t polled;            /* on a line of its own: written twice, read every put */
	uint64_t pad2[7];
};
static_assert(sizeof(struct cour_box_ctl) == 128, "a box's control lines are two lines");

/* the producer's private state of one box */
struct cour_box_tx {
	uint8_t             *lines;
	struct cour_box_ctl *ctl;
	uint64_t             head;    /* next line position to write */
	uint64_t             seen;    /* the consumer's position, as last read */
	uint32_t             gen;     /* 0: no box */
	uint16_t             idx;
	bool                 live;    /* its consumer polled it at the last look */
	bool                 closing; /* its close entry is in: nothing more goes in */
};

/* the consumer's private state of one box */
struct cour_box_rx {
	const uint8_t       *lines;
	struct cour_box_ctl *ctl;
	uint64_t             pos;     /* next line position to read */
	uint64_t             told;    /* the position last written to consumed */
	uint32_t             gen;     /* 0: not polling */
	uint16_t             idx;
	uint16_t             cur;     /* lines of the entry the last peek returned */
};

static inline uint64_t cour_box_word(uint32_t gen, uint64_t pos)
{
	return (uint64_t)gen << COUR_BOX_POS_BITS |
	       ((pos + 1) & ((1ull << COUR_BOX_POS_BITS) - 1));
}

/* Is box generation a later claim than b (0: none)? Generations count claims modulo
 * COUR_BOX_GEN_MAX, skipping 0. */
static inline bool cour_box_gen_after(uint32_t a, uint32_t b)
{
	uint32_t d = (a - b) & COUR_BOX_GEN_MAX;

	return a && (!b || (d && d < (COUR_BOX_GEN_MAX + 1) / 2));
}

static inline uint32_t cour_box_lines_of(uint32_t len)
{
	return (uint32_t)((sizeof(struct cour_box_ent) + len + COUR_BOX_LINE - 1) / COUR_BOX_LINE);
}

/* Producer, on a box it claimed (lines and ctl in its own file): start it (the control line
 * set for an unread box, nobody polling). */
void cour_box_tx_init(struct cour_box_tx *b, uint8_t *lines, struct cour_box_ctl *ctl,
		      uint16_t idx, uint32_t gen);
/* Producer: does the consumer poll the box (and may we put more into it)? */
static inline bool cour_box_tx_live(struct cour_box_tx *b)
{
	return b->live = b->gen && !b->closing &&
			 __atomic_load_n(&b->ctl->polled, __ATOMIC_ACQUIRE) == b->gen;
}
/* Producer: has the consumer stopped reading the box (closed it, or never opened it)? Then
 * nobody reads its lines: they may be claimed again, and their pages given back. */
static inline bool cour_box_tx_unread(const struct cour_box_tx *b)
{
	return __atomic_load_n(&b->ctl->polled, __ATOMIC_ACQUIRE) != b->gen;
}
/* Producer: one entry: hdr's len, flags, rx_id, credits, stamp, tag and data, then the
 * iovecs (len bytes in all, at most COUR_BOX_PAYLOAD_MAX). 0: published; -FI_EAGAIN: no room
 * (nothing written), or the consumer closed the box (live is cleared). */
int  cour_box_put(struct cour_box_tx *b, const struct cour_box_ent *hdr, const struct iovec *iov,
		  size_t iovcnt);
/* Producer: the close entry, stamped; then nothing more goes in (closing). 0, or -FI_EAGAIN:
 * no room, or closed by the consumer already. */
int  cour_box_close_put(struct cour_box_tx *b, uint32_t stamp);

/* Consumer: start polling a box of the producer's file (lines and ctl in our mapping of it),
 * and tell the producer. */
void cour_box_rx_open(struct cour_box_rx *b, const uint8_t *lines, struct cour_box_ctl *ctl,
		      uint16_t idx, uint32_t gen);
/* Consumer: stop, and tell the producer (unless the box was claimed again since). */
void cour_box_rx_close(struct cour_box_rx *b);
/* Consumer: the next entry's header, copied into *ent, and its payload; NULL when none is
 * published. *broken is set when the box breaks its rules (close it). Until cour_box_pop the
 * same entry is returned again. */
const void *cour_box_peek(struct cour_box_rx *b, struct cour_box_ent *ent, bool *broken);
static inline void cour_box_pop(struct cour_box_rx *b)
{
	b->pos += b->cur;
	b->cur = 0;
}
/* Consumer: is the next entry published? (the poll's test, before anything else is read) */
static inline bool cour_box_ready(const struct cour_box_rx *b)
{
	const struct cour_box_ent *e = (const struct cour_box_ent *)
		(b->lines + (b->pos % COUR_BOX_LINES) * COUR_BOX_LINE);

	return __atomic_load_n(&e->word, __ATOMIC_ACQUIRE) == cour_box_word(b->gen, b->pos);
}
/* Consumer: tell the producer how far we read (after a batch). */
void cour_box_release_now(struct cour_box_rx *b);
static inline void cour_box_release(struct cour_box_rx *b)
{
	if (b->pos != b->told)
		cour_box_release_now(b);
}
/* Consumer, before sleeping (after arming, seq_cst): is an entry published? */
bool cour_box_pending(const struct cour_box_rx *b);

#endif /* COUR_SHM_BOX_H */
