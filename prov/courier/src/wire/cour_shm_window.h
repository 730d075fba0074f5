/*
 * Windows: regions of a ring owner's memory that same-host producers may write into
 * themselves, with process_vm_writev, without a round trip.
 *
 * Why: a single-copy write is otherwise pulled by the target after it checked the key, so the
 * initiator waits for the target's progress and answer on every write. With a window the
 * owner has checked the region once, when it was registered: a producer finds the key in the
 * owner's ring header, checks bounds itself, and copies. The owner learns of the write from a
 * notice packet (its events and counters), not from the copy.
 *
 * The danger is the usual one of touching another process's memory after its check: the
 * owner may close the region and free the memory at any time. So a window is a lease that
 * any number of producers hold at once:
 *
 *   FREE --owner publish--> OPEN{gen, users 0}
 *   OPEN{gen, n} --producer CAS--> OPEN{gen, n + 1} (copying) --producer fetch_sub--> n
 *   OPEN{gen, 0} --owner CAS--> FREE            (withdrawn)
 *   OPEN{gen, n} --owner CAS--> CLOSING{gen, n} --producers leave--> CLOSING{gen, 0} --> FREE
 *
 * A producer copies only between its CAS and its fetch_sub, and its CAS succeeds only on an
 * OPEN word of the generation whose fields it read. So once the owner's CAS leaves OPEN, no
 * copy can start, and once users is 0 none is in flight. Withdrawing waits for one system call
 * of each producer inside, or a bound (a producer dead inside never leaves: its process is
 * gone, so it writes no more either, but the count cannot tell that from slow).
 *
 * Fields other than the word are written by the owner only while the word is FREE, then the
 * word is published with release; a producer reads them after an acquire load of an OPEN word
 * and confirms the generation with its CAS, so it never copies under a torn view. Everything
 * in the header is untrusted to producers: bounds are checked without overflow.
 */
#ifndef COUR_SHM_WINDOW_H
#define COUR_SHM_WINDOW_H

#include "cour_shm_ring.h"

/* Owner: offer [start, start + len) (base: its address here) under key; notify: producers
 * must tell us of each write (we count them). 0 and the slot, or -FI_EAGAIN when every window
 * is in use (writes there then go the checked way). */
int  cour_shm_window_publish(struct cour_shm_ring *r, uint64_t key, uint64_t start, uint64_t len,
			     void *base, bool notify, uint32_t *slot);
/* Owner: from now on producers do (not) tell us of their writes. A producer that read the old
 * value races with the change, as a write racing with fi_mr_bind does. */
void cour_shm_window_set_notify(struct cour_shm_ring *r, uint32_t slot, bool notify);
/* Owner: take the window back, waiting for producers inside for up to wait_us. false: some
 * producer stayed inside that long (the window is closed to new ones all the same). */
bool cour_shm_window_withdraw(struct cour_shm_ring *r, uint32_t slot, uint64_t wait_us);

/* Producer, on a peer's ring: enter the window holding key if [raddr, raddr + len) lies in
 * it; *dst is the address to write in the owner's process. true: copy, then leave with the
 * slot and generation it gave. */
bool cour_shm_window_enter(struct cour_shm_ring *r, uint64_t key, uint64_t raddr, uint64_t len,
			   uint64_t *dst, uint32_t *slot, uint64_t *gen);
void cour_shm_window_leave(struct cour_shm_ring *r, uint32_t slot, uint64_t gen);
/* Producer, inside: does the owner want a notice of this write? */
bool cour_shm_window_notify(struct cour_shm_ring *r, uint32_t slot);

#endif /* COUR_SHM_WINDOW_H */
