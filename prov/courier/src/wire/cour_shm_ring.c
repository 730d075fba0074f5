/*
 * The shared-memory receive ring; the design, the layout and the reasons are in
 * cour_shm_ring.h. This file needs nothing of courier but util/'s logging and clock.
 */
#define COUR_SHM_RING_TESTING     /* declares the test hooks, which are always built */
#include "util/cour_util.h"
#include "wire/cour_shm_ring.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x0008u     /* Linux 6.3; older headers lack it */
#endif

#define COUR_SHM_NCELLS_MAX   65536u
#define COUR_SHM_PAYLOAD_MIN  64u
#define COUR_SHM_PAYLOAD_MAX  65536u
#define COUR_SHM_PUT_TRIES    1024   /* contention or garbage: then -FI_EAGAIN, the engine retries */
#define COUR_SHM_PEEK_SKIPS   64     /* cells one peek may skip (corrupt or reclaimed) */
#define COUR_SHM_STUCK_US     100000 /* a head cell RESERVED this long: ask whether its pid lives */

struct cour_shm_ring {
	/* read on every call: the geometry, private copies never re-read from the mapping */
	uint8_t             *slots;
	uint8_t             *cells;
	uint32_t             mask;
	uint32_t             cell_size;
	uint32_t             cell_payload;
	uint32_t             pid;       /* ours, written into the cells we reserve */
	struct cour_shm_hdr *hdr;
	uint64_t             head;      /* consumer: the next position to read */
	bool                 ready;     /* consumer: the last peek returned the head cell */
	bool                 owner;
	int                  fd;        /* owner: the memfd; producer: -1 */
	size_t               bytes;

	/* consumer: the head cell that stays unpublished, and since when */
	uint64_t             stuck_pos;
	uint64_t             stuck_word;
	uint64_t             stuck_since;   /* 0: not watching */
	uint64_t             reclaimed;
	uint64_t             corrupt;

	/* producer: where the owner holds the ring, and which file that was */
	char                 owner_path[64];
	dev_t                owner_dev;
	ino_t                owner_ino;

	/* owner: which grant slots are free (bit set), and the last lease's generation */
	uint64_t             grant_free;
	uint64_t             grant_gen;

	/* owner: which boxes are free (bit set), and the last claim's generation */
	uint32_t             box_free;
	uint32_t             box_gen;
	uint32_t             ncells;
};

static inline struct cour_shm_slot *cour_shm_slot_at(const struct cour_shm_ring *r, uint64_t pos)
{
	return (struct cour_shm_slot *)(r->slots + (size_t)(pos & r->mask) * COUR_SHM_SLOT);
}

static inline uint8_t *cour_shm_cell_at(const struct cour_shm_ring *r, uint64_t pos)
{
	return r->cells + (size_t)(pos & r->mask) * r->cell_size;
}

static inline uint64_t *cour_shm_state_at(const struct cour_shm_ring *r, uint64_t pos)
{
	return &cour_shm_slot_at(r, pos)->state;
}

/* where a packet of len bytes with a tag of tag_len bytes at pos lives, and its tag */
static inline uint8_t *cour_shm_data_at(const struct cour_shm_ring *r, uint64_t pos, uint32_t len,
					uint32_t tag_len)
{
	return cour_shm_fits_slot(len, tag_len) ? cour_shm_slot_at(r, pos)->data :
						  cour_shm_cell_at(r, pos);
}

static inline uint8_t *cour_shm_tag_at(const struct cour_shm_ring *r, uint64_t pos, uint32_t len,
				       uint32_t tag_len)
{
	return cour_shm_slot_at(r, pos)->data + (cour_shm_fits_slot(len, tag_len) ? len : 0);
}

static inline uint64_t cour_shm_word_seq(uint64_t w)
{
	return w >> COUR_SHM_SEQ_SHIFT;
}

static inline unsigned cour_shm_word_state(uint64_t w)
{
	return (w >> COUR_SHM_STATE_SHIFT) & 3;
}

/* the word for position pos in this ring: its seq is the position's lap (cour_shm_lap_word) */
static inline uint64_t cour_shm_rword(const struct cour_shm_ring *r, uint64_t pos, unsigned state,
				      uint32_t pid)
{
	return cour_shm_lap_word(r->mask, pos, state, pid);
}

/* the word's lap minus the position's, as a signed 40-bit difference (a multiple of ncells) */
static inline int64_t cour_shm_seq_diff(const struct cour_shm_ring *r, uint64_t w, uint64_t pos)
{
	return (int64_t)((cour_shm_word_seq(w) - (pos & ~(uint64_t)r->mask))
			 << COUR_SHM_SEQ_SHIFT) >> COUR_SHM_SEQ_SHIFT;
}

static uint32_t cour_shm_cell_size(uint32_t cell_payload)
{
	return (cell_payload + 63u) & ~63u;
}

static bool cour_shm_geometry_ok(uint32_t ncells, uint32_t cell_payload)
{
	return ncells >= 2 && ncells <= COUR_SHM_NCELLS_MAX && !(ncells & (ncells - 1)) &&
	       cell_payload >= COUR_SHM_PAYLOAD_MIN && cell_payload <= COUR_SHM_PAYLOAD_MAX;
}

static int cour_shm_errno(int e)
{
	switch (e) {
	case ENOENT:
	case ESRCH:
	case ENOTDIR:
		return -FI_ENOENT;
	case EACCES:
	case EPERM:
		return -FI_EACCES;
	case ENOMEM:
	case EMFILE:
	case ENFILE:
	case ENOSPC:
		return -FI_ENOMEM;
	default:
		return -FI_EINVAL;
	}
}

static int cour_shm_pid(uint32_t *pid)
{
	pid_t p = getpid();

	if (p <= 0 || (uint32_t)p > COUR_SHM_PID_MASK) {
		COUR_WARN(FI_LOG_EP_CTRL, "shm ring: pid %d does not fit the cell state word\n", p);
		return -FI_EINVAL;
	}
	*pid = (uint32_t)p;
	return 0;
}

static uint64_t cour_shm_nonce(void)
{
	uint64_t n = 0;

	for (int i = 0; i < 4 && !n; i++) {
		if (getrandom(&n, sizeof(n), GRND_NONBLOCK) != sizeof(n))
			n = 0;
	}
	if (!n) {
		/* the nonce only tells our ring from a stale locator: uniqueness is enough */
		n = cour_now_us() * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid() << 32 ^
		    (uintptr_t)&n;
		n |= 1;
	}
	return n;
}

static int cour_shm_memfd(void)
{
	int fd = memfd_create("courier-shm-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_NOEXEC_SEAL);

	if (fd < 0 && errno == EINVAL)     /* a kernel before 6.3 */
		fd = memfd_create("courier-shm-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	return fd;
}

int cour_shm_ring_create(uint32_t ncells, uint32_t cell_payload, struct cour_shm_ring **out,
			 struct cour_shm_locator *loc)
{
	struct cour_shm_ring *r;
	uint32_t cell_size, pid;
	long page = sysconf(_SC_PAGESIZE);
	size_t bytes;
	void *base;
	int ret;

	if (!out || !loc || !cour_shm_geometry_ok(ncells, cell_payload)) {
		COUR_WARN(FI_LOG_EP_CTRL, "shm ring: bad geometry %u cells of %u bytes\n", ncells,
			  cell_payload);
		return -FI_EINVAL;
	}
	ret = cour_shm_pid(&pid);
	if (ret)
		return ret;
	if (page <= 0)
		page = 4096;
	cell_size = cour_shm_cell_size(cell_payload);
	bytes = cour_shm_box_off(ncells, cell_size, COUR_BOX_COUNT);
	bytes = (bytes + (size_t)page - 1) & ~((size_t)page - 1);

	r = calloc(1, sizeof(*r));
	if (!r) {
		COUR_WARN(FI_LOG_EP_CTRL, "shm ring: out of memory\n");
		return -FI_ENOMEM;
	}
	r->fd = cour_shm_memfd();
	if (r->fd < 0) {
		ret = cour_shm_errno(errno);
		COUR_WARN(FI_LOG_EP_CTRL, "shm ring: memfd_create: %s\n", strerror(errno));
		goto free_ring;
	}
	if (ftruncate(r->fd, (off_t)bytes)) {
		ret = errno == EINVAL || errno == EFBIG ? -FI_ENOMEM : cour_shm_errno(errno);
		COUR_WARN(FI_LOG_EP_CTRL, "shm ring: ftruncate %zu: %s\n", bytes, strerror(errno));
		goto close_fd;
	}
	if (fcntl(r->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) {
		ret = -FI_EINVAL;
		COUR_WARN(FI_LOG_EP_CTRL, "shm ring: sealing the memfd: %s\n", strerror(errno));
		goto close_fd;
	}
	base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
	if (base == MAP_FAILED) {
		ret = cour_shm_errno(errno);
		COUR_WARN(FI_LOG_EP_CTRL, "shm ring: mmap %zu bytes: %s\n", bytes, strerror(errno));
		goto close_fd;
	}

	r->hdr = base;
	r->slots = (uint8_t *)base + cour_shm_slot_off(0);
	r->cells = (uint8_t *)base + cour_shm_cell_off(ncells, cell_size, 0);
	r->mask = ncells - 1;
	r->cell_size = cell_size;
	r->cell_payload = cell_payload;
	r->pid = pid;
	r->owner = true;
	r->bytes = bytes;
	r->grant_free = ~0ull;
	r->box_free = ~0u;
	r->ncells = ncells;

	/* The file is fresh: every slot's word reads 0, FREE for the first lap, so no slot page
	 * is written here; a ring nobody sends to keeps its header page and the one its poll
	 * reads. Nobody can map it before the locator leaves us. */
	r->hdr->version = COUR_SHM_VERSION;
	r->hdr->hdr_size = sizeof(struct cour_shm_hdr);
	r->hdr->nonce = cour_shm_nonce();
	r->hdr->bytes = bytes;
	r->hdr->ncells = ncells;
	r->hdr->cell_size = cell_size;
	r->hdr->cell_payload = cell_payload;
	r->hdr->owner_pid = pid;
	__atomic_store_n(&r->hdr->magic, COUR_SHM_MAGIC, __ATOMIC_RELEASE);

	loc->pid = pid;
	loc->fd = r->fd;
	loc->nonce = r->hdr->nonce;
	loc->bytes = bytes;
	*out = r;
	COUR_DBG(FI_LOG_EP_CTRL, "shm ring: /proc/%u/fd/%d, %u cells of %u bytes, %zu bytes\n",
		 pid, r->fd, ncells, cell_payload, bytes);
	return 0;

close_fd:
	close(r->fd);
free_ring:
	free(r);
	return ret;
}

/* The header of a freshly mapped peer ring, each field read once: 0 or -FI_EINVAL. */
static int cour_shm_check_hdr(const struct cour_shm_hdr *h, const struct cour_shm_locator *loc,
			      uint32_t *ncells, uint32_t *cell_payload)
{
	uint64_t magic = __atomic_load_n(&h->magic, __ATOMIC_ACQUIRE);
	uint32_t version = __atomic_load_n(&h->version, __ATOMIC_RELAXED);
	uint32_t hdr_size = __atomic_load_n(&h->hdr_size, __ATOMIC_RELAXED);
	uint64_t nonce = __atomic_load_n(&h->nonce, __ATOMIC_RELAXED);
	uint64_t bytes = __atomic_load_n(&h->bytes, __ATOMIC_RELAXED);
	uint32_t n = __atomic_load_n(&h->ncells, __ATOMIC_RELAXED);
	uint32_t size = __atomic_load_n(&h->cell_size, __ATOMIC_RELAXED);
	uint32_t payload = __atomic_load_n(&h->cell_payload, __ATOMIC_RELAXED);
	const char *why = NULL;

	if (magic != COUR_SHM_MAGIC)
		why = "magic";
	else if (version != COUR_SHM_VERSION)
		why = "version";
	else if (nonce != loc->nonce)
		why = "nonce (a stale locator?)";
	else if (hdr_size != sizeof(struct cour_shm_hdr))
		why = "header size";
	else if (bytes != loc->bytes)
		why = "size";
	else if (!cour_shm_geometry_ok(n, payload))
		why = "cell count or payload";
	else if (size != cour_shm_cell_size(payload))
		why = "cell size";
	else if (cour_shm_box_off(n, size, COUR_BOX_COUNT) > bytes)
		why = "cells or boxes past the end";
	if (why) {
		COUR_WARN(FI_LOG_EP_CTRL, "shm ring /proc/%u/fd/%d: bad %s\n", loc->pid, loc->fd, why);
		return -FI_EINVAL;
	}
	*ncells = n;
	*cell_payload = payload;
	return 0;
}

int cour_shm_ring_attach(const struct cour_shm_locator *loc, struct cour_shm_ring **out)
{
	struct cour_shm_ring *r;
	uint32_t ncells, cell_payload, pid;
	char path[64];
	struct stat st;
	void *base;
	int fd, seals, ret;

	if (!loc || !out || !loc->pid || loc->pid > INT32_MAX || loc->fd < 0 || !loc->nonce ||
	    loc->bytes < sizeof(struct cour_shm_hdr) || loc->bytes > SIZE_MAX / 2) {
		COUR_WARN(FI_LOG_EP_CTRL, "shm ring: malformed locator\n");
		return -FI_EINVAL;
	}
	ret = cour_shm_pid(&pid);
	if (ret)
		return ret;
	snprintf(path, sizeof(path), "/proc/%u/fd/%d", loc->pid, loc->fd);

	/* look before opening: opening some devices or FIFOs has side effects or blocks */
	if (stat(path, &st)) {
		int e = errno;

		ret = cour_shm_errno(e);
		/* the usual reason: the peer exited or closed its endpoint since it said hello */
		if (e == ENOENT && kill((pid_t)loc->pid, 0) && errno == ESRCH)
			COUR_INFO(FI_LOG_EP_CTRL, "peer process %u has exited: its shared memory "
				  "ring is gone\n", loc->pid);
		else if (e == ENOENT)
			COUR_INFO(FI_LOG_EP_CTRL, "peer process %u closed its endpoint (no ring at "
				  "%s)\n", loc->pid, path);
		else
			COUR_WARN(FI_LOG_EP_CTRL, "shm ring %s: %s\n", path, strerror(e));
		return ret;
	}
	if (!S_ISREG(st.st_mode)) {
		COUR_WARN(FI_LOG_EP_CTRL, "shm ring %s: not a regular file\n", path);
		return -FI_EINVAL;
	}
	fd = open(path, O_RDWR | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		ret = cour_shm_errno(errno);
		COUR_WARN(FI_LOG_EP_CTRL, "shm ring %s: open: %s\n", path, strerror(errno));
		return ret;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != loc->bytes) {
		COUR_WARN(FI_LOG_EP_CTRL, "shm ring %s: not a file of %" PRIu64 " bytes\n", path,
			  loc->bytes);
		ret = -FI_EINVAL;
		goto close_fd;
	}
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
		COUR_WARN(FI_LOG_EP_CTRL, "shm ring %s: not a memfd sealed against shrinking\n",
			  path);
		ret = -FI_EINVAL;
		goto close_fd;
	}
	base = mmap(NULL, (size_t)loc->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED) {
		ret = cour_shm_errno(errno);
		COUR_WARN(FI_LOG_EP_CTRL, "shm ring %s: mmap: %s\n", path, strerror(errno));
		goto close_fd;
	}
	ret = cour_shm_check_hdr(base, loc, &ncells, &cell_payload);
	if (ret)
		goto unmap;
	r = calloc(1, sizeof(*r));
	if (!r) {
		COUR_WARN(FI_LOG_EP_CTRL, "shm ring: out of memory\n");
		ret = -FI_ENOMEM;
		goto unmap;
	}
	close(fd);              /* the mapping keeps the file */
	r->hdr = base;
	r->slots = (uint8_t *)base + cour_shm_slot_off(0);
	r->cell_size = cour_shm_cell_size(cell_payload);
	r->cells = (uint8_t *)base + cour_shm_cell_off(ncells, r->cell_size, 0);
	r->mask = ncells - 1;
	r->ncells = ncells;
	r->cell_payload = cell_payload;
	r->pid = pid;
	r->fd = -1;
	r->bytes = (size_t)loc->bytes;
	snprintf(r->owner_path, sizeof(r->owner_path), "%s", path);
	r->owner_dev = st.st_dev;
	r->owner_ino = st.st_ino;
	*out = r;
	return 0;

unmap:
	munmap(base, (size_t)loc->bytes);
close_fd:
	close(fd);
	return ret;
}

void cour_shm_ring_close(struct cour_shm_ring *r)
{
	if (!r)
		return;
	munmap(r->hdr, r->bytes);
	if (r->fd >= 0)
		close(r->fd);
	free(r);
}

uint32_t cour_shm_ring_payload_max(const struct cour_shm_ring *r)
{
	return r->cell_payload;
}

uint64_t cour_shm_ring_reclaimed(const struct cour_shm_ring *r)
{
	return r->reclaimed;
}

uint64_t cour_shm_ring_corrupt(const struct cour_shm_ring *r)
{
	return r->corrupt;
}

void *cour_shm_ring_base(const struct cour_shm_ring *r)
{
	return r->hdr;
}

/* ---- producer ---- */

/* Take the cell of the next free position: 0 and *pos, or -FI_EAGAIN (full, or no luck in
 * COUR_SHM_PUT_TRIES attempts). */
int cour_shm_ring_reserve(struct cour_shm_ring *r, uint64_t *pos_out, bool advance_tail)
{
	uint64_t *tailp = &r->hdr->tail;
	uint64_t pos = __atomic_load_n(tailp, __ATOMIC_RELAXED);

	for (int i = 0; i < COUR_SHM_PUT_TRIES; i++) {
		uint64_t *st = cour_shm_state_at(r, pos);
		uint64_t w = cour_shm_rword(r, pos, COUR_SHM_FREE, 0);
		uint64_t expect;
		int64_t d;

		/* The CAS without a load first: a read would fault in every cached page around
		 * the state word (see the layout); a failed CAS tells what the word holds.
		 * acquire: the consumer's reads of the previous lap precede our writes;
		 * seq_cst: the load of `armed` after it (see Sleeping in the header) */
		if (COUR_LIKELY(__atomic_compare_exchange_n(st, &w,
							    cour_shm_rword(r, pos, COUR_SHM_RESERVED,
									  r->pid),
							    false, __ATOMIC_SEQ_CST,
							    __ATOMIC_RELAXED))) {
			expect = pos;
			if (advance_tail)
				__atomic_compare_exchange_n(tailp, &expect, pos + 1, false,
							    __ATOMIC_RELAXED, __ATOMIC_RELAXED);
			*pos_out = pos;
			return 0;
		}
		d = cour_shm_seq_diff(r, w, pos);
		if (d < 0)
			return -FI_EAGAIN;  /* the previous lap's packet is still unread: full */
		/* d == 0: taken by a producer that has not moved the tail yet (or died first);
		 * d > 0: consumed or reclaimed already. Either way the tail lags: move it on. */
		expect = pos;
		if (__atomic_compare_exchange_n(tailp, &expect, pos + 1, false, __ATOMIC_RELAXED,
						__ATOMIC_RELAXED))
			pos++;
		else
			pos = expect;
	}
	COUR_DBG(FI_LOG_EP_DATA, "shm ring: no cell after %d tries\n", COUR_SHM_PUT_TRIES);
	return -FI_EAGAIN;
}

static int cour_shm_check_put(const struct cour_shm_ring *r, uint32_t tag_len, size_t hdr_len,
			      const struct iovec *iov, size_t iovcnt, uint32_t *total)
{
	size_t len = hdr_len;

	if (tag_len > COUR_SHM_TAG_MAX) {
		COUR_WARN(FI_LOG_EP_DATA, "shm ring: tag of %u bytes\n", tag_len);
		return -FI_EINVAL;
	}
	for (size_t i = 0; i < iovcnt && len <= r->cell_payload; i++)
		len += COUR_MIN(iov[i].iov_len, (size_t)r->cell_payload + 1);
	if (len > r->cell_payload) {
		COUR_WARN(FI_LOG_EP_DATA, "shm ring: packet larger than a cell (%u bytes)\n",
			  r->cell_payload);
		return -FI_EMSGSIZE;
	}
	*total = (uint32_t)len;
	return 0;
}

static void cour_shm_publish(struct cour_shm_ring *r, uint64_t pos, const void *tag,
			     uint32_t tag_len, const void *hdr, size_t hdr_len,
			     const struct iovec *iov, size_t iovcnt, uint32_t total)
{
	struct cour_shm_slot *c = cour_shm_slot_at(r, pos);
	uint8_t *p = cour_shm_data_at(r, pos, total, tag_len);

	if (tag_len)
		memcpy(cour_shm_tag_at(r, pos, total, tag_len), tag, tag_len);
	if (hdr_len) {
		memcpy(p, hdr, hdr_len);
		p += hdr_len;
	}
	for (size_t i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len) {
			memcpy(p, iov[i].iov_base, iov[i].iov_len);
			p += iov[i].iov_len;
		}
	}
	c->len = total;
	c->tag_len = tag_len;
	__atomic_store_n(cour_shm_state_at(r, pos),
			 cour_shm_rword(r, pos, COUR_SHM_PUBLISHED, r->pid), __ATOMIC_RELEASE);
}

/* After the reservation's seq_cst CAS, before the copy: does the consumer sleep? (header) */
static void cour_shm_wake_check(struct cour_shm_ring *r, bool *wake)
{
	if (wake && COUR_UNLIKELY(__atomic_load_n(&r->hdr->armed, __ATOMIC_SEQ_CST)) &&
	    __atomic_exchange_n(&r->hdr->armed, 0, __ATOMIC_SEQ_CST))
		*wake = true;
}

int cour_shm_ring_commit(struct cour_shm_ring *r, uint64_t pos, const void *tag,
			 uint32_t tag_len, const void *hdr, size_t hdr_len,
			 const struct iovec *iov, size_t iovcnt, bool *wake)
{
	uint32_t total = 0;
	int ret = cour_shm_check_put(r, tag_len, hdr_len, iov, iovcnt, &total);

	if (ret)
		return ret;
	/* (the test's reservation had no look at `armed`: late, but before the publish, and the
	 * consumer refuses to sleep on the reserved cell meanwhile) */
	cour_shm_wake_check(r, wake);
	cour_shm_publish(r, pos, tag, tag_len, hdr, hdr_len, iov, iovcnt, total);
	return 0;
}

int cour_shm_ring_put(struct cour_shm_ring *r, const void *tag, uint32_t tag_len,
		      const void *hdr, size_t hdr_len, const struct iovec *iov, size_t iovcnt,
		      bool *wake)
{
	uint32_t total = 0;
	uint64_t pos;
	int ret;

	ret = cour_shm_check_put(r, tag_len, hdr_len, iov, iovcnt, &total);
	if (ret)
		return ret;
	ret = cour_shm_ring_reserve(r, &pos, true);
	if (ret)
		return ret;
	cour_shm_wake_check(r, wake);
	cour_shm_publish(r, pos, tag, tag_len, hdr, hdr_len, iov, iovcnt, total);
	return 0;
}

/* ---- consumer ---- */

/* Give the head cell back to the producers, for the next lap. */
static void cour_shm_advance(struct cour_shm_ring *r)
{
	__atomic_store_n(cour_shm_state_at(r, r->head),
			 cour_shm_rword(r, r->head + r->mask + 1, COUR_SHM_FREE, 0), __ATOMIC_RELEASE);
	r->head++;
	__atomic_store_n(&r->hdr->head, r->head, __ATOMIC_RELAXED);
	r->ready = false;
}

static bool cour_shm_pid_gone(uint32_t pid)
{
	return kill((pid_t)pid, 0) == -1 && errno == ESRCH;
}

/*
 * The head cell holds w, neither free nor published. Most often a producer is copying into it
 * right now; watch it, and once it has stayed the same for COUR_SHM_STUCK_US take it back if
 * its producer is dead (or if w is garbage no protocol step writes). true: the head moved.
 */
static bool cour_shm_unstick(struct cour_shm_ring *r, uint64_t w)
{
	uint64_t now = cour_now_us(), pos = r->head, expect = pos;
	uint32_t pid = (uint32_t)w & COUR_SHM_PID_MASK;
	bool reserved;

	if (!r->stuck_since || r->stuck_pos != pos || r->stuck_word != w) {
		r->stuck_pos = pos;
		r->stuck_word = w;
		r->stuck_since = now;
		return false;
	}
	if (cour_us_since(now, r->stuck_since) < COUR_SHM_STUCK_US)
		return false;
	r->stuck_since = now;   /* the next verdict, if this one spares it, in another period */
	reserved = cour_shm_seq_diff(r, w, pos) == 0 && pid &&
		   cour_shm_word_state(w) == COUR_SHM_RESERVED;
	if (reserved && !cour_shm_pid_gone(pid))
		return false;   /* alive, merely slow: never taken from it */
	if (!__atomic_compare_exchange_n(cour_shm_state_at(r, pos), &w,
					 cour_shm_rword(r, pos + r->mask + 1, COUR_SHM_FREE, 0), false,
					 __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		return false;   /* it changed under us: watch again */
	if (reserved) {
		r->reclaimed++;
		COUR_WARN(FI_LOG_EP_DATA, "shm ring: producer %u died holding cell %" PRIu64
			  ", skipped\n", pid, pos);
	} else {
		r->corrupt++;
		COUR_WARN(FI_LOG_EP_DATA, "shm ring: garbage state %#" PRIx64 " in cell %" PRIu64
			  ", reset\n", w, pos);
	}
	r->stuck_since = 0;
	r->head++;
	r->ready = false;
	__atomic_store_n(&r->hdr->head, r->head, __ATOMIC_RELAXED);
	/* the producer may have died before moving the tail */
	__atomic_compare_exchange_n(&r->hdr->tail, &expect, pos + 1, false, __ATOMIC_RELAXED,
				    __ATOMIC_RELAXED);
	return true;
}

const void *cour_shm_ring_peek(struct cour_shm_ring *r, uint32_t *len, const void **tag,
			       uint32_t *tag_len)
{
	assert(r->owner);
	for (int i = 0; i < COUR_SHM_PEEK_SKIPS; i++) {
		uint64_t w = __atomic_load_n(cour_shm_state_at(r, r->head), __ATOMIC_ACQUIRE);
		struct cour_shm_slot *c;
		uint32_t l, tl;

		if (COUR_LIKELY(w == cour_shm_rword(r, r->head, COUR_SHM_FREE, 0)))
			break;
		if (cour_shm_seq_diff(r, w, r->head) != 0 ||
		    cour_shm_word_state(w) != COUR_SHM_PUBLISHED) {
			if (cour_shm_unstick(r, w))
				continue;
			break;
		}
		c = cour_shm_slot_at(r, r->head);
		/* read once: a checked length must be the length used */
		l = __atomic_load_n(&c->len, __ATOMIC_RELAXED);
		tl = __atomic_load_n(&c->tag_len, __ATOMIC_RELAXED);
		if (COUR_UNLIKELY(l > r->cell_payload || tl > COUR_SHM_TAG_MAX)) {
			r->corrupt++;
			COUR_WARN(FI_LOG_EP_DATA, "shm ring: cell %" PRIu64 " of %u bytes, tag %u:"
				  " skipped\n", r->head, l, tl);
			cour_shm_advance(r);
			continue;
		}
		r->ready = true;
		*len = l;
		if (tag)
			*tag = cour_shm_tag_at(r, r->head, l, tl);
		if (tag_len)
			*tag_len = tl;
		return cour_shm_data_at(r, r->head, l, tl);
	}
	r->ready = false;
	return NULL;
}

void cour_shm_ring_pop(struct cour_shm_ring *r)
{
	if (!r->ready)
		return;
	cour_shm_advance(r);
}

bool cour_shm_ring_arm(struct cour_shm_ring *r)
{
	uint64_t *st = cour_shm_state_at(r, r->head);

	assert(r->owner);
	/* store armed, then read the head cell, both seq_cst: against the producer's seq_cst
	 * reservation and read of armed (cour_shm_wake_check), one of the two sees the other
	 * (a fence between relaxed accesses would do the same; ThreadSanitizer cannot model it) */
	__atomic_store_n(&r->hdr->armed, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(st, __ATOMIC_SEQ_CST) ==
	    cour_shm_rword(r, r->head, COUR_SHM_FREE, 0))
		return true;
	__atomic_store_n(&r->hdr->armed, 0, __ATOMIC_RELAXED);
	return false;
}

void cour_shm_ring_disarm(struct cour_shm_ring *r)
{
	__atomic_store_n(&r->hdr->armed, 0, __ATOMIC_RELAXED);
}

struct cour_shm_hdr *cour_shm_ring_hdr(const struct cour_shm_ring *r)
{
	return r->hdr;
}

bool cour_shm_ring_is_owner(const struct cour_shm_ring *r)
{
	return r->owner;
}

void cour_shm_ring_forget_pages(struct cour_shm_ring *r)
{
	if (!r->owner)
		(void)madvise(r->hdr, r->bytes, MADV_DONTNEED);
}

bool cour_shm_ring_owner_holds(const struct cour_shm_ring *r)
{
	struct stat st;

	return !r->owner && stat(r->owner_path, &st) == 0 && st.st_dev == r->owner_dev &&
	       st.st_ino == r->owner_ino;
}

/* ---- mailboxes ---- */

static uint8_t *cour_shm_box_lines(const struct cour_shm_ring *r, uint32_t idx)
{
	return (uint8_t *)r->hdr + cour_shm_box_off(r->ncells, r->cell_size, idx);
}

int cour_shm_box_claim(struct cour_shm_ring *r, struct cour_box_tx *b)
{
	uint32_t idx;

	assert(r->owner);
	if (!r->box_free)
		return -FI_EAGAIN;
	idx = (uint32_t)__builtin_ctz(r->box_free);
	r->box_free &= ~(1u << idx);
	r->box_gen = r->box_gen % COUR_BOX_GEN_MAX + 1;
	cour_box_tx_init(b, cour_shm_box_lines(r, idx), &r->hdr->box[idx], (uint16_t)idx,
			 r->box_gen);
	return 0;
}

void cour_shm_box_free(struct cour_shm_ring *r, struct cour_box_tx *b)
{
	if (!b->gen)
		return;
	assert(r->owner && b->idx < COUR_BOX_COUNT);
	/* nothing to clear: a consumer still polling it sees no entry of the next claim's
	 * generation (a hole reads as zeroes), and the claim resets the control lines. The
	 * pages go back to the host: a box is 8 KiB of shared memory while its pair talks */
	(void)fallocate(r->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			(off_t)cour_shm_box_off(r->ncells, r->cell_size, b->idx), COUR_BOX_BYTES);
	r->box_free |= 1u << b->idx;
	b->gen = 0;
	b->live = false;
}

/*
 * The consumer only reads a box, and a read fault on a shared mapping also maps the pages
 * around it that the file has in memory (the kernel's fault-around, up to 64 KiB): the
 * producer's boxes for other peers, which would count in our resident memory once per peer.
 * Fault-around stays inside one mapping, so the box gets one of its own: read-only, which
 * also says the consumer never writes there. Closed, its pages leave our memory (not the
 * file's).
 */
int cour_shm_box_open(struct cour_shm_ring *r, uint32_t idx, uint32_t gen, struct cour_box_rx *b)
{
	uint8_t *lines;

	if (r->owner || idx >= COUR_BOX_COUNT || !gen || gen > COUR_BOX_GEN_MAX)
		return -FI_EINVAL;
	lines = cour_shm_box_lines(r, idx);
	(void)mprotect(lines, COUR_BOX_BYTES, PROT_READ);   /* (else fault-around: more RSS) */
	cour_box_rx_open(b, lines, &r->hdr->box[idx], (uint16_t)idx, gen);
	return 0;
}

void cour_shm_box_close(struct cour_shm_ring *r, struct cour_box_rx *b)
{
	const uint8_t *lines = b->lines;

	if (!b->gen)
		return;
	cour_box_rx_close(b);
	if (r)                  /* (NULL: a box outside any ring file, as tests make) */
		(void)madvise((void *)lines, COUR_BOX_BYTES, MADV_DONTNEED);
}

bool cour_shm_ring_wake(struct cour_shm_ring *r)
{
	bool wake = false;

	cour_shm_wake_check(r, &wake);
	return wake;
}

bool cour_shm_ring_idle(const struct cour_shm_ring *r)
{
	return __atomic_load_n(cour_shm_state_at(r, r->head), __ATOMIC_SEQ_CST) ==
	       cour_shm_rword(r, r->head, COUR_SHM_FREE, 0);
}

/* ---- grants ---- */

#define COUR_GRANT_STATE_BITS 3
#define COUR_GRANT_GEN_MASK   ((1ull << (64 - COUR_GRANT_STATE_BITS)) - 1)

static inline uint64_t cour_grant_word(uint64_t gen, enum cour_shm_grant_state st)
{
	return (gen & COUR_GRANT_GEN_MASK) << COUR_GRANT_STATE_BITS | st;
}

int cour_shm_grant_open(struct cour_shm_ring *r, uint32_t *slot, uint64_t *gen)
{
	unsigned i;

	if (!r->owner || !r->grant_free)
		return -FI_EAGAIN;
	i = (unsigned)__builtin_ctzll(r->grant_free);
	r->grant_free &= ~(1ull << i);
	*gen = ++r->grant_gen & COUR_GRANT_GEN_MASK;
	*slot = i;
	/* release: nothing of ours needs ordering, but a producer must never see an older word */
	__atomic_store_n(&r->hdr->grant[i], cour_grant_word(*gen, COUR_GRANT_OPEN),
			 __ATOMIC_RELEASE);
	return 0;
}

enum cour_shm_grant_state cour_shm_grant_revoke(struct cour_shm_ring *r, uint32_t slot,
						uint64_t gen)
{
	uint64_t open = cour_grant_word(gen, COUR_GRANT_OPEN), w = open;

	assert(r->owner && slot < COUR_SHM_GRANTS);
	if (__atomic_compare_exchange_n(&r->hdr->grant[slot], &w,
					cour_grant_word(gen, COUR_GRANT_REVOKED), false,
					__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return COUR_GRANT_REVOKED;
	/* the producer's word: its copy is over once it says DONE or FAILED (acquire: and its
	 * effects are visible). Anything no protocol step writes is taken as a failure. */
	if (w == cour_grant_word(gen, COUR_GRANT_BUSY))
		return COUR_GRANT_BUSY;
	if (w == cour_grant_word(gen, COUR_GRANT_DONE))
		return COUR_GRANT_DONE;
	return COUR_GRANT_FAILED;
}

void cour_shm_grant_close(struct cour_shm_ring *r, uint32_t slot)
{
	assert(r->owner && slot < COUR_SHM_GRANTS);
	__atomic_store_n(&r->hdr->grant[slot], cour_grant_word(0, COUR_GRANT_FREE),
			 __ATOMIC_RELAXED);
	r->grant_free |= 1ull << slot;
}

uint32_t cour_shm_grants_open(const struct cour_shm_ring *r)
{
	return r->owner ? (uint32_t)__builtin_popcountll(~r->grant_free) : 0;
}

bool cour_shm_grant_take(struct cour_shm_ring *r, uint32_t slot, uint64_t gen)
{
	uint64_t w = cour_grant_word(gen, COUR_GRANT_OPEN);

	if (slot >= COUR_SHM_GRANTS || gen > COUR_GRANT_GEN_MASK)
		return false;
	return __atomic_compare_exchange_n(&r->hdr->grant[slot], &w,
					   cour_grant_word(gen, COUR_GRANT_BUSY), false,
					   __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
}

void cour_shm_grant_finish(struct cour_shm_ring *r, uint32_t slot, uint64_t gen, bool ok)
{
	if (slot >= COUR_SHM_GRANTS)
		return;
	/* release: the copy happens before the owner can see the lease end */
	__atomic_store_n(&r->hdr->grant[slot],
			 cour_grant_word(gen, ok ? COUR_GRANT_DONE : COUR_GRANT_FAILED),
			 __ATOMIC_RELEASE);
}
