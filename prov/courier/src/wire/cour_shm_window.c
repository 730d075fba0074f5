/*
 * Windows in a ring's header: the lease protocol of cour_shm_window.h.
 */
#include "util/cour_util.h"
#include "wire/cour_shm_window.h"

#include <sched.h>

enum {
	COUR_WIN_FREE = 0,
	COUR_WIN_OPEN,
	COUR_WIN_CLOSING,
};

#define COUR_WIN_USERS_SHIFT 8
#define COUR_WIN_USERS_MAX   0xffffu
#define COUR_WIN_GEN_SHIFT   24
#define COUR_WIN_GEN_MASK    ((1ull << (64 - COUR_WIN_GEN_SHIFT)) - 1)
#define COUR_WIN_ENTER_TRIES 64       /* CAS races with other producers, then the checked way */

static inline unsigned cour_win_state(uint64_t w)
{
	return (unsigned)(w & 0xff);
}

static inline uint32_t cour_win_users(uint64_t w)
{
	return (uint32_t)(w >> COUR_WIN_USERS_SHIFT) & COUR_WIN_USERS_MAX;
}

static inline uint64_t cour_win_gen(uint64_t w)
{
	return w >> COUR_WIN_GEN_SHIFT;
}

static inline uint64_t cour_win_word(uint64_t gen, uint32_t users, unsigned state)
{
	return (gen & COUR_WIN_GEN_MASK) << COUR_WIN_GEN_SHIFT |
	       (uint64_t)users << COUR_WIN_USERS_SHIFT | state;
}

int cour_shm_window_publish(struct cour_shm_ring *r, uint64_t key, uint64_t start, uint64_t len,
			    void *base, bool notify, uint32_t *slot)
{
	struct cour_shm_window *win = cour_shm_ring_hdr(r)->window;

	if (!cour_shm_ring_is_owner(r))
		return -FI_EINVAL;
	for (uint32_t i = 0; i < COUR_SHM_WINDOWS; i++) {
		uint64_t w = __atomic_load_n(&win[i].word, __ATOMIC_RELAXED);

		if (cour_win_state(w) != COUR_WIN_FREE)
			continue;
		/* FREE: no producer reads these (its CAS would need an OPEN word of their gen) */
		__atomic_store_n(&win[i].key, key, __ATOMIC_RELAXED);
		__atomic_store_n(&win[i].start, start, __ATOMIC_RELAXED);
		__atomic_store_n(&win[i].len, len, __ATOMIC_RELAXED);
		__atomic_store_n(&win[i].base, (uint64_t)(uintptr_t)base, __ATOMIC_RELAXED);
		__atomic_store_n(&win[i].notify, (uint64_t)notify, __ATOMIC_RELAXED);
		__atomic_store_n(&win[i].word, cour_win_word(cour_win_gen(w) + 1, 0, COUR_WIN_OPEN),
				 __ATOMIC_RELEASE);
		*slot = i;
		return 0;
	}
	return -FI_EAGAIN;
}

bool cour_shm_window_withdraw(struct cour_shm_ring *r, uint32_t slot, uint64_t wait_us)
{
	struct cour_shm_window *win = &cour_shm_ring_hdr(r)->window[slot];
	uint64_t w = __atomic_load_n(&win->word, __ATOMIC_ACQUIRE), since = 0;

	assert(cour_shm_ring_is_owner(r) && slot < COUR_SHM_WINDOWS);
	for (;;) {
		uint64_t gen = cour_win_gen(w), next;
		uint32_t users = cour_win_users(w);

		if (cour_win_state(w) == COUR_WIN_FREE)
			return true;
		/* acquire on success: the copies of producers that left are visible to us */
		next = users ? cour_win_word(gen, users, COUR_WIN_CLOSING)
			     : cour_win_word(gen, 0, COUR_WIN_FREE);
		if (next != w) {
			if (__atomic_compare_exchange_n(&win->word, &w, next, false,
							__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
				w = next;
			continue;
		}
		/* CLOSING with producers inside: each is one system call from leaving */
		if (!since) {
			since = cour_now_us();
		} else if (cour_now_us() - since >= wait_us) {
			__atomic_store_n(&win->word, cour_win_word(gen, 0, COUR_WIN_FREE),
					 __ATOMIC_RELEASE);
			return false;
		}
		sched_yield();
		w = __atomic_load_n(&win->word, __ATOMIC_ACQUIRE);
	}
}

bool cour_shm_window_enter(struct cour_shm_ring *r, uint64_t key, uint64_t raddr, uint64_t len,
			   uint64_t *dst, uint32_t *slot, uint64_t *gen)
{
	struct cour_shm_window *win = cour_shm_ring_hdr(r)->window;
	int tries = COUR_WIN_ENTER_TRIES;

	for (uint32_t i = 0; i < COUR_SHM_WINDOWS; i++) {
		uint64_t w = __atomic_load_n(&win[i].word, __ATOMIC_ACQUIRE), start, wlen, off;

		if (cour_win_state(w) != COUR_WIN_OPEN ||
		    __atomic_load_n(&win[i].key, __ATOMIC_RELAXED) != key)
			continue;
		start = __atomic_load_n(&win[i].start, __ATOMIC_RELAXED);
		wlen = __atomic_load_n(&win[i].len, __ATOMIC_RELAXED);
		*dst = __atomic_load_n(&win[i].base, __ATOMIC_RELAXED);
		/* [raddr, raddr + len) inside [start, start + wlen), no end computed that wraps */
		if (raddr < start || len > wlen || (off = raddr - start) > wlen - len)
			return false;
		*dst += off;
		while (cour_win_state(w) == COUR_WIN_OPEN && cour_win_users(w) < COUR_WIN_USERS_MAX &&
		       tries-- > 0) {
			uint64_t gen_read = cour_win_gen(w);
			uint64_t in = cour_win_word(gen_read, cour_win_users(w) + 1, COUR_WIN_OPEN);

			/* the gen in the CAS is the one the fields above were read under */
			if (__atomic_compare_exchange_n(&win[i].word, &w, in, false,
							__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
				*slot = i;
				*gen = gen_read;
				return true;
			}
			if (cour_win_gen(w) != gen_read)
				return false;   /* withdrawn and offered again: the fields moved */
		}
		return false;
	}
	return false;
}

void cour_shm_window_leave(struct cour_shm_ring *r, uint32_t slot, uint64_t gen)
{
	struct cour_shm_window *win = &cour_shm_ring_hdr(r)->window[slot];
	uint64_t w = __atomic_load_n(&win->word, __ATOMIC_RELAXED);
	int tries = COUR_WIN_ENTER_TRIES * 16;

	/* release: our copy happens before the owner sees us gone. Only our own generation's
	 * count moves: an owner that gave up waiting has freed the word already. */
	while (cour_win_gen(w) == gen && cour_win_users(w) > 0 &&
	       cour_win_state(w) != COUR_WIN_FREE && tries-- > 0) {
		uint64_t out = cour_win_word(gen, cour_win_users(w) - 1, cour_win_state(w));

		if (__atomic_compare_exchange_n(&win->word, &w, out, false, __ATOMIC_RELEASE,
						__ATOMIC_RELAXED))
			return;
	}
}

void cour_shm_window_set_notify(struct cour_shm_ring *r, uint32_t slot, bool notify)
{
	assert(cour_shm_ring_is_owner(r) && slot < COUR_SHM_WINDOWS);
	__atomic_store_n(&cour_shm_ring_hdr(r)->window[slot].notify, (uint64_t)notify,
			 __ATOMIC_RELAXED);
}

bool cour_shm_window_notify(struct cour_shm_ring *r, uint32_t slot)
{
	return slot < COUR_SHM_WINDOWS &&
	       __atomic_load_n(&cour_shm_ring_hdr(r)->window[slot].notify, __ATOMIC_RELAXED);
}
