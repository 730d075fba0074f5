/*
 * Named address vectors (fi_av(3) `name`, FI_READ): one table that the processes of a host
 * share, so an fi_addr_t inserted by one process names the same peer in all of them (a
 * launcher or a node leader fills it; the others open it FI_READ and skip their own exchange).
 *
 * The table is a POSIX shared-memory object, /courier-av-<uid>-<name> (another user's AV of
 * the same name is another object). Layout: a header, the fi_addr_t array that map_addr points
 * at (entry i holds i: our fi_addr_t is the index), and the entries (address, valid). Writers
 * append and remove under a process-shared robust mutex, then publish with a release store of
 * `count` or `generation`; readers map the object read-only and never lock: each process
 * mirrors the shared entries into its own cour_addr_table, catching up when asked for an index
 * it has not seen or when `generation` moved (endpoints watch that counter directly, so a
 * remove in any process drops their cached peers).
 *
 * Lifetime: the name exists while the process that created it keeps the AV open (its close
 * unlinks it; mappings already made stay valid). A creator that died without closing leaves a
 * stale object: opens see its pid gone and treat the name as absent (FI_READ: -FI_ENOENT; a
 * writer replaces it).
 *
 * Capacity is fixed at creation: max(attr->count, 65536) entries, in a sparse object (pages are
 * paid for as entries are written); insertions past it fail with FI_ENOSPC.
 */
#include "cour_av.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define COUR_AV_SHM_MAGIC   0x7661727565697263ull     /* "courierav" */
#define COUR_AV_SHM_VERSION 1u
#define COUR_AV_SHM_MIN_CAP 65536u
#define COUR_AV_SHM_MAX_CAP (1u << 24)
#define COUR_AV_NAME_MAX    200                     /* bytes of the application's name */
#define COUR_AV_READY_WAIT_MS 2000                  /* for a creator still setting it up */

struct cour_av_shm_hdr {
	uint64_t        magic;
	uint32_t        version;
	uint32_t        addr_format;
	uint64_t        capacity;
	uint64_t        count;          /* entries published (release store) */
	uint64_t        generation;     /* bumped after each remove (release) */
	int32_t         creator_pid;
	uint32_t        ready;          /* header complete (release store, last) */
	pthread_mutex_t lock;           /* writers only; process-shared, robust */
	uint8_t         pad[64];
};

struct cour_av_shm_entry {
	struct cour_addr addr;
	uint32_t         valid;
};

struct cour_av_shm {
	struct cour_av_shm_hdr   *hdr;
	fi_addr_t                *map;
	struct cour_av_shm_entry *ent;
	size_t                    bytes;
	uint64_t                  gen_seen;
	bool                      readonly;
	bool                      creator;
	char                      path[16 + 3 * COUR_AV_NAME_MAX + 32];
};

static size_t cour_av_shm_bytes(uint64_t cap)
{
	return sizeof(struct cour_av_shm_hdr) + cap * sizeof(fi_addr_t) +
	       cap * sizeof(struct cour_av_shm_entry);
}

static void cour_av_shm_layout(struct cour_av_shm *s, void *base)
{
	s->hdr = base;
	s->map = (fi_addr_t *)(s->hdr + 1);
	s->ent = (struct cour_av_shm_entry *)(s->map + s->hdr->capacity);
}

/* "/courier-av-<uid>-<name>", with '/', '%' and control bytes written as %XX so that two
 * different names never meet in one object. */
static int cour_av_shm_path(struct cour_av_shm *s, const char *name)
{
	size_t n = strlen(name), o;

	if (!n || n > COUR_AV_NAME_MAX) {
		COUR_WARN(FI_LOG_AV, "AV name of %zu bytes: 1 to %d accepted\n", n,
			  COUR_AV_NAME_MAX);
		return -FI_EINVAL;
	}
	o = (size_t)snprintf(s->path, sizeof(s->path), "/courier-av-%u-", (unsigned)getuid());
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)name[i];

		if (c == '/' || c == '%' || c < 0x20 || c == 0x7f)
			o += (size_t)snprintf(s->path + o, sizeof(s->path) - o, "%%%02X", c);
		else
			s->path[o++] = (char)c;
	}
	s->path[o] = '\0';
	return 0;
}

static bool cour_av_shm_creator_gone(const struct cour_av_shm_hdr *h)
{
	return h->creator_pid > 0 && kill(h->creator_pid, 0) < 0 && errno == ESRCH;
}

static int cour_av_shm_create(struct cour_av_shm *s, int format, uint64_t cap)
{
	pthread_mutexattr_t ma;
	struct cour_av_shm_hdr *h;
	size_t bytes = cour_av_shm_bytes(cap);
	void *base;
	int fd = shm_open(s->path, O_RDWR | O_CREAT | O_EXCL, 0600);

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)bytes) < 0) {
		int err = errno;

		COUR_WARN(FI_LOG_AV, "named AV %s: cannot size it to %zu bytes: %s\n", s->path,
			  bytes, strerror(err));
		close(fd);
		shm_unlink(s->path);
		return -FI_ENOMEM;
	}
	base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (base == MAP_FAILED) {
		COUR_WARN(FI_LOG_AV, "named AV %s: mmap: %s\n", s->path, strerror(errno));
		shm_unlink(s->path);
		return -FI_ENOMEM;
	}
	h = base;
	h->magic = COUR_AV_SHM_MAGIC;
	h->version = COUR_AV_SHM_VERSION;
	h->addr_format = (uint32_t)format;
	h->capacity = cap;
	h->creator_pid = (int32_t)getpid();
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(&h->lock, &ma);
	pthread_mutexattr_destroy(&ma);
	__atomic_store_n(&h->ready, 1, __ATOMIC_RELEASE);
	s->bytes = bytes;
	s->creator = true;
	cour_av_shm_layout(s, base);
	return 0;
}

/* Maps an existing object; -FI_ENOENT when there is none (or only a dead creator's). */
static int cour_av_shm_attach(struct cour_av_shm *s, int format)
{
	struct timespec nap = { .tv_nsec = 1000000 };
	struct cour_av_shm_hdr *h;
	struct stat st;
	void *base;
	int fd, waited = 0;

	fd = shm_open(s->path, s->readonly ? O_RDONLY : O_RDWR, 0);
	if (fd < 0)
		return errno == ENOENT ? -FI_ENOENT : -errno;
	/* a creator between shm_open and its last store: give it a moment, not forever */
	for (;;) {
		if (fstat(fd, &st) < 0) {
			close(fd);
			return -errno;
		}
		if ((size_t)st.st_size >= sizeof(*h))
			break;
		if (waited++ >= COUR_AV_READY_WAIT_MS) {
			COUR_WARN(FI_LOG_AV, "named AV %s: never sized by its creator\n", s->path);
			close(fd);
			return -FI_ETIMEDOUT;
		}
		nanosleep(&nap, NULL);
	}
	base = mmap(NULL, (size_t)st.st_size, PROT_READ | (s->readonly ? 0 : PROT_WRITE),
		    MAP_SHARED, fd, 0);
	close(fd);
	if (base == MAP_FAILED) {
		COUR_WARN(FI_LOG_AV, "named AV %s: mmap: %s\n", s->path, strerror(errno));
		return -FI_ENOMEM;
	}
	h = base;
	while (!__atomic_load_n(&h->ready, __ATOMIC_ACQUIRE)) {
		if (waited++ >= COUR_AV_READY_WAIT_MS) {
			COUR_WARN(FI_LOG_AV, "named AV %s: never made ready by its creator\n",
				  s->path);
			munmap(base, (size_t)st.st_size);
			return -FI_ETIMEDOUT;
		}
		nanosleep(&nap, NULL);
	}
	if (h->magic != COUR_AV_SHM_MAGIC || h->version != COUR_AV_SHM_VERSION ||
	    h->capacity > COUR_AV_SHM_MAX_CAP ||
	    cour_av_shm_bytes(h->capacity) > (size_t)st.st_size) {
		COUR_WARN(FI_LOG_AV, "named AV %s: not a courier AV of this version\n", s->path);
		munmap(base, (size_t)st.st_size);
		return -FI_EINVAL;
	}
	if (cour_av_shm_creator_gone(h)) {
		COUR_INFO(FI_LOG_AV, "named AV %s: its creator (pid %d) is gone\n", s->path,
			  (int)h->creator_pid);
		munmap(base, (size_t)st.st_size);
		return -FI_ENOENT;
	}
	if ((int)h->addr_format != format) {
		COUR_WARN(FI_LOG_AV, "named AV %s holds address format %u, this domain uses %d\n",
			  s->path, h->addr_format, format);
		munmap(base, (size_t)st.st_size);
		return -FI_EINVAL;
	}
	s->bytes = (size_t)st.st_size;
	cour_av_shm_layout(s, base);
	return 0;
}

int cour_av_shared_open(struct cour_av *av, struct fi_av_attr *attr)
{
	struct cour_av_shm *s = calloc(1, sizeof(*s));
	uint64_t cap = attr->count > COUR_AV_SHM_MIN_CAP ? attr->count : COUR_AV_SHM_MIN_CAP;
	int ret;

	if (!s)
		return -FI_ENOMEM;
	s->readonly = attr->flags & FI_READ;
	ret = cour_av_shm_path(s, attr->name);
	if (ret)
		goto fail;
	if (cap > COUR_AV_SHM_MAX_CAP) {
		COUR_WARN(FI_LOG_AV, "named AV of %zu entries: at most %u\n", attr->count,
			  COUR_AV_SHM_MAX_CAP);
		ret = -FI_EINVAL;
		goto fail;
	}
	if (s->readonly) {
		ret = cour_av_shm_attach(s, av->addr_format);
		if (ret == -FI_ENOENT)
			/* an expected probe (MPICH looks for a launcher's AV, then goes on) */
			COUR_INFO(FI_LOG_AV, "named AV \"%s\" opened FI_READ does not exist\n",
				  attr->name);
	} else {
		/* create it, or join it; a dead creator's object is replaced, once */
		for (int tries = 0; tries < 2; tries++) {
			ret = cour_av_shm_create(s, av->addr_format, cap);
			if (ret != -EEXIST)
				break;
			ret = cour_av_shm_attach(s, av->addr_format);
			if (ret != -FI_ENOENT)
				break;
			shm_unlink(s->path);
		}
	}
	if (ret) {
		if (ret != -FI_ENOENT)
			COUR_WARN(FI_LOG_AV, "named AV %s: %s\n", s->path, fi_strerror(-ret));
		goto fail;
	}
	s->gen_seen = __atomic_load_n(&s->hdr->generation, __ATOMIC_ACQUIRE);
	av->shm = s;
	av->gen = &s->hdr->generation;
	cour_av_shared_sync_locked(av);
	if (!attr->map_addr)
		attr->map_addr = s->map;
	return 0;
fail:
	free(s);
	return ret;
}

void cour_av_shared_close(struct cour_av *av)
{
	struct cour_av_shm *s = av->shm;

	if (!s)
		return;
	if (s->creator)
		shm_unlink(s->path);
	munmap(s->hdr, s->bytes);
	free(s);
	av->shm = NULL;
	av->gen = &av->generation;
}

bool cour_av_shared_readonly(const struct cour_av *av)
{
	return av->shm && av->shm->readonly;
}

void cour_av_shared_sync_locked(struct cour_av *av)
{
	struct cour_av_shm *s = av->shm;
	uint64_t n = __atomic_load_n(&s->hdr->count, __ATOMIC_ACQUIRE);
	uint64_t g = __atomic_load_n(&s->hdr->generation, __ATOMIC_ACQUIRE);
	size_t seen = av->tab.count;

	if (n > s->hdr->capacity)
		n = s->hdr->capacity;
	for (size_t i = av->tab.count; i < n; i++) {
		struct cour_addr a = s->ent[i].addr;
		uint32_t idx;

		if (cour_at_append(&av->tab, &a, &idx)) {
			COUR_WARN(FI_LOG_AV, "named AV: no memory to mirror entry %zu\n", i);
			return;
		}
		if (!__atomic_load_n(&s->ent[i].valid, __ATOMIC_ACQUIRE))
			cour_at_remove(&av->tab, idx);
	}
	if (g != s->gen_seen) {
		for (size_t i = 0; i < seen; i++)
			if (!__atomic_load_n(&s->ent[i].valid, __ATOMIC_ACQUIRE) &&
			    cour_at_get(&av->tab, i))
				cour_at_remove(&av->tab, i);
		s->gen_seen = g;
	}
}

static void cour_av_shm_lock(struct cour_av_shm *s)
{
	if (pthread_mutex_lock(&s->hdr->lock) == EOWNERDEAD) {
		/* a writer died holding it: what it published is whole (count moves last) */
		COUR_WARN(FI_LOG_AV, "named AV %s: a writer died holding its lock\n", s->path);
		pthread_mutex_consistent(&s->hdr->lock);
	}
}

int cour_av_shared_add_locked(struct cour_av *av, const struct cour_addr *addr, uint32_t *idx)
{
	struct cour_av_shm *s = av->shm;
	uint64_t i;
	int ret = 0;

	cour_av_shm_lock(s);
	cour_av_shared_sync_locked(av);
	i = s->hdr->count;
	if (i >= s->hdr->capacity) {
		COUR_WARN(FI_LOG_AV, "named AV %s is full (%" PRIu64 " entries)\n", s->path, i);
		ret = FI_ENOSPC;
	} else if (av->tab.count != i) {
		ret = FI_ENOMEM;        /* the mirror could not keep up: do not diverge */
	} else if ((ret = -cour_at_append(&av->tab, addr, idx)) == 0) {
		s->ent[i].addr = *addr;
		__atomic_store_n(&s->ent[i].valid, 1, __ATOMIC_RELAXED);
		s->map[i] = i;
		__atomic_store_n(&s->hdr->count, i + 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&s->hdr->lock);
	return ret;
}

int cour_av_shared_remove_locked(struct cour_av *av, uint64_t idx)
{
	struct cour_av_shm *s = av->shm;
	int ret = FI_EINVAL;

	cour_av_shm_lock(s);
	cour_av_shared_sync_locked(av);
	if (idx < s->hdr->count && __atomic_load_n(&s->ent[idx].valid, __ATOMIC_RELAXED)) {
		__atomic_store_n(&s->ent[idx].valid, 0, __ATOMIC_RELEASE);
		__atomic_add_fetch(&s->hdr->generation, 1, __ATOMIC_RELEASE);
		cour_at_remove(&av->tab, idx);
		ret = 0;
	}
	pthread_mutex_unlock(&s->hdr->lock);
	return ret;
}
