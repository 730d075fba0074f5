/*
 * Mailboxes between two same-host endpoints (the layout and the rules: cour_shm_box.h).
 */
#include "wire/cour_shm_box.h"

#include <rdma/fi_errno.h>
#include <string.h>

#define COUR_BOX_POS_MASK ((1ull << COUR_BOX_POS_BITS) - 1)

static inline struct cour_box_ent *cour_box_at(uint8_t *lines, uint64_t pos)
{
	return (struct cour_box_ent *)(lines + (pos % COUR_BOX_LINES) * COUR_BOX_LINE);
}

void cour_box_tx_init(struct cour_box_tx *b, uint8_t *lines, struct cour_box_ctl *ctl,
		      uint16_t idx, uint32_t gen)
{
	b->lines = lines;
	b->ctl = ctl;
	b->head = 0;
	b->seen = 0;
	b->gen = gen;
	b->idx = idx;
	b->live = false;
	b->closing = false;
	__atomic_store_n(&ctl->consumed, (uint64_t)gen << COUR_BOX_POS_BITS, __ATOMIC_RELAXED);
	__atomic_store_n(&ctl->polled, 0, __ATOMIC_RELEASE);
}

/* Read where the consumer is. Room for `need` lines from the head? A control line that names
 * another generation, or a position we never wrote, leaves none. */
static bool cour_box_room(struct cour_box_tx *b, uint64_t need)
{
	uint64_t c = __atomic_load_n(&b->ctl->consumed, __ATOMIC_ACQUIRE);
	uint64_t behind = (b->head - c) & COUR_BOX_POS_MASK;

	if (__atomic_load_n(&b->ctl->polled, __ATOMIC_RELAXED) != b->gen) {
		b->live = false;                /* closed: the consumer reads no more */
		return false;
	}
	if (c >> COUR_BOX_POS_BITS != b->gen || behind > COUR_BOX_LINES)
		return false;
	b->seen = b->head - behind;
	return b->head + need - b->seen <= COUR_BOX_LINES;
}

static int cour_box_put_ent(struct cour_box_tx *b, const struct cour_box_ent *hdr,
			    const struct iovec *iov, size_t iovcnt)
{
	uint32_t need = cour_box_lines_of(hdr->len);
	uint64_t idx = b->head % COUR_BOX_LINES;
	uint64_t pad = idx + need > COUR_BOX_LINES ? COUR_BOX_LINES - idx : 0;
	struct cour_box_ent *e;
	uint8_t *p;

	if (b->head + pad + need - b->seen > COUR_BOX_LINES && !cour_box_room(b, pad + need))
		return -FI_EAGAIN;
	if (pad) {
		e = cour_box_at(b->lines, b->head);
		e->len = 0;
		e->flags = COUR_BOX_PAD;
		__atomic_store_n(&e->word, cour_box_word(b->gen, b->head), __ATOMIC_RELEASE);
		b->head += pad;
	}
	e = cour_box_at(b->lines, b->head);
	/* field by field (loads the compiler may not merge): the caller just built hdr on its
	 * stack, and a load wider than the store it reads waits for that store to retire
	 * instead of being forwarded */
#define COUR_BOX_FIELD(f) (e->f = __atomic_load_n(&hdr->f, __ATOMIC_RELAXED))
	COUR_BOX_FIELD(len);
	COUR_BOX_FIELD(flags);
	COUR_BOX_FIELD(rx_id);
	COUR_BOX_FIELD(credits);
	COUR_BOX_FIELD(stamp);
	COUR_BOX_FIELD(tag);
	COUR_BOX_FIELD(data);
#undef COUR_BOX_FIELD
	p = (uint8_t *)(e + 1);
	for (size_t i = 0; i < iovcnt; i++) {
		memcpy(p, iov[i].iov_base, iov[i].iov_len);
		p += iov[i].iov_len;
	}
	assert(p == (uint8_t *)(e + 1) + hdr->len);
	/* seq_cst: the caller reads the consumer's `armed` next (cour_shm_box.h) */
	__atomic_store_n(&e->word, cour_box_word(b->gen, b->head), __ATOMIC_SEQ_CST);
	b->head += need;
	return 0;
}

int cour_box_put(struct cour_box_tx *b, const struct cour_box_ent *hdr, const struct iovec *iov,
		 size_t iovcnt)
{
	assert(hdr->len <= COUR_BOX_PAYLOAD_MAX &&
	       !(hdr->flags & (COUR_BOX_PAD | COUR_BOX_CLOSE)) && !b->closing);
	return cour_box_put_ent(b, hdr, iov, iovcnt);
}

int cour_box_close_put(struct cour_box_tx *b, uint32_t stamp)
{
	struct cour_box_ent e = { .flags = COUR_BOX_CLOSE, .stamp = stamp };
	int ret;

	if (!b->gen || b->closing || !cour_box_tx_live(b))
		return -FI_EAGAIN;
	ret = cour_box_put_ent(b, &e, NULL, 0);
	if (ret == 0) {
		b->closing = true;
		b->live = false;
	}
	return ret;
}

void cour_box_rx_open(struct cour_box_rx *b, const uint8_t *lines, struct cour_box_ctl *ctl,
		      uint16_t idx, uint32_t gen)
{
	b->lines = lines;
	b->ctl = ctl;
	b->pos = 0;
	b->told = 0;
	b->gen = gen;
	b->idx = idx;
	b->cur = 0;
	__atomic_store_n(&ctl->polled, (uint64_t)gen, __ATOMIC_RELEASE);
}

void cour_box_rx_close(struct cour_box_rx *b)
{
	uint64_t gen = b->gen;

	if (!gen)
		return;
	cour_box_release(b);
	(void)__atomic_compare_exchange_n(&b->ctl->polled, &gen, 0, false, __ATOMIC_RELEASE,
					  __ATOMIC_RELAXED);
	b->gen = 0;
}

const void *cour_box_peek(struct cour_box_rx *b, struct cour_box_ent *ent, bool *broken)
{
	for (int k = 0; k < 2; k++) {
		uint64_t idx = b->pos % COUR_BOX_LINES;
		const struct cour_box_ent *e = (const struct cour_box_ent *)
			(b->lines + idx * COUR_BOX_LINE);
		uint32_t need;

		if (__atomic_load_n(&e->word, __ATOMIC_ACQUIRE) != cour_box_word(b->gen, b->pos))
			return NULL;
		memcpy(ent, e, sizeof(*ent));
		if (ent->flags & COUR_BOX_PAD) {
			if (idx == 0)
				break;          /* a pad where an entry always fits */
			b->pos += COUR_BOX_LINES - idx;
			continue;
		}
		need = ent->len <= COUR_BOX_PAYLOAD_MAX ? cour_box_lines_of(ent->len) : 0;
		if (!need || idx + need > COUR_BOX_LINES)
			break;
		b->cur = (uint16_t)need;
		return e + 1;
	}
	*broken = true;
	return NULL;
}

void cour_box_release_now(struct cour_box_rx *b)
{
	b->told = b->pos;
	__atomic_store_n(&b->ctl->consumed,
			 (uint64_t)b->gen << COUR_BOX_POS_BITS | (b->pos & COUR_BOX_POS_MASK),
			 __ATOMIC_RELEASE);
}

bool cour_box_pending(const struct cour_box_rx *b)
{
	const struct cour_box_ent *e = (const struct cour_box_ent *)
		(b->lines + (b->pos % COUR_BOX_LINES) * COUR_BOX_LINE);

	return b->gen &&
	       __atomic_load_n(&e->word, __ATOMIC_SEQ_CST) == cour_box_word(b->gen, b->pos);
}
