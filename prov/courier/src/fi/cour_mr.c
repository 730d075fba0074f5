/*
 * Memory regions (fi_mr(3), libfabric 1.17). See cour_mr.h for the object and the target check.
 *
 * Choices where the man page leaves room:
 * - access is taken literally: 0 grants nothing, and the target enforces every FI_REMOTE_* bit.
 * - A zero-length region is accepted (MPI windows of size 0 register one); only zero-length
 *   accesses at its start then pass the bounds check.
 * - offset (reserved in fi_mr(3)) is honoured: without FI_MR_VIRT_ADDR the region answers the
 *   addresses [offset, offset + len).
 * - Keys: with FI_MR_PROV_KEY, or when requested_key is FI_KEY_NOTAVAIL (the application asks
 *   for none), the provider picks a random key; else requested_key, and a key already in use in
 *   the domain is -FI_ENOKEY.
 * - Regions start disabled under FI_MR_ENDPOINT, and under FI_MR_RMA_EVENT when registered with
 *   FI_RMA_EVENT; fi_mr_enable enables (FI_MR_ENDPOINT: only once bound to an endpoint). After
 *   fi_mr_enable no binding is accepted. Counter bindings are accepted whatever the mode, since
 *   OpenSHMEM binds a target counter without FI_MR_RMA_EVENT.
 * - FI_MR_ENDPOINT: a region belongs to the one endpoint it is bound to. An access arriving on
 *   any other endpoint of the domain finds no region: it is refused as a bad key, exactly like
 *   a key never registered. One endpoint binding per region; an endpoint of another domain is
 *   refused. The binding holds a reference on the endpoint, which refuses to close
 *   (-FI_EBUSY) while regions are bound to it, as counters and EQs do while bound: libfabric's
 *   own fabtests close regions before the endpoint under FI_MR_ENDPOINT, and cxi (the provider
 *   that requires the mode) refuses the same way. Without FI_MR_ENDPOINT an endpoint binding is
 *   checked and has no effect: regions belong to the domain.
 */
#include "cour_mr.h"
#include "cour_cq.h"
#include "cour_ep.h"
#include "proto/cour_errno.h"

#include <inttypes.h>
#include <stdlib.h>
#include <sys/random.h>
#include <unistd.h>

#define COUR_MR_KEY_TRIES    64
#define COUR_MR_FEISTEL_ROUNDS 6

static struct fi_ops cour_mr_fi_ops;

/* ---- provider keys ----
 *
 * Key n is a keyed permutation (a Feistel network over the two 32-bit halves, round function the
 * splitmix64 finaliser of the half XOR a secret round key) of a counter with a random start. A
 * permutation of distinct counter values never repeats, so keys are unique across every domain
 * of the process without a search; with the round keys secret (getrandom, once per process)
 * a key observed on the wire says nothing usable about the next one. Process-wide rather than
 * per domain because uniqueness across domains costs nothing and struct cour_domain has no room.
 */
static struct {
	pthread_once_t once;
	uint64_t       round_key[COUR_MR_FEISTEL_ROUNDS];
	uint64_t       counter;
} cour_mr_keygen = { .once = PTHREAD_ONCE_INIT };

static uint64_t cour_mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

static void cour_mr_keygen_init(void)
{
	uint64_t seed[COUR_MR_FEISTEL_ROUNDS + 1];
	size_t got = 0;
	int i;

	while (got < sizeof(seed)) {
		ssize_t n = getrandom((char *)seed + got, sizeof(seed) - got, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	if (got < sizeof(seed)) {
		/* No getrandom: keys stay unique, only harder to guess than a counter. */
		uint64_t s = cour_now_us() ^ ((uint64_t)getpid() << 32) ^ (uintptr_t)&got;

		COUR_WARN(FI_LOG_MR, "getrandom failed (%s): provider MR keys are predictable\n",
			  strerror(errno));
		for (i = 0; i < COUR_MR_FEISTEL_ROUNDS + 1; i++) {
			s += 0x9e3779b97f4a7c15ULL;
			seed[i] = cour_mix64(s);
		}
	}
	for (i = 0; i < COUR_MR_FEISTEL_ROUNDS; i++)
		cour_mr_keygen.round_key[i] = seed[i];
	cour_mr_keygen.counter = seed[COUR_MR_FEISTEL_ROUNDS];
}

static uint64_t cour_mr_next_prov_key(void)
{
	uint64_t c;
	uint32_t l, r, t;
	int i;

	pthread_once(&cour_mr_keygen.once, cour_mr_keygen_init);
	c = __atomic_fetch_add(&cour_mr_keygen.counter, 1, __ATOMIC_RELAXED);
	l = (uint32_t)(c >> 32);
	r = (uint32_t)c;
	for (i = 0; i < COUR_MR_FEISTEL_ROUNDS; i++) {
		uint64_t f = cour_mix64(((uint64_t)r << 32 | r) ^ cour_mr_keygen.round_key[i]);

		t = l ^ (uint32_t)(f >> 32);
		l = r;
		r = t;
	}
	return (uint64_t)l << 32 | r;
}

/* ---- registration ---- */

static int cour_mr_create(struct fid *fid, const struct iovec *iov, size_t count,
			  uint64_t access, uint64_t offset, uint64_t requested_key,
			  uint64_t flags, void *context, struct fid_mr **mr_fid)
{
	struct cour_domain *dom = COUR_CONTAINER_OF(fid, struct cour_domain, domain_fid.fid);
	uint64_t mode = cour_mr_mode(dom);
	bool prov_key = (mode & FI_MR_PROV_KEY) || requested_key == FI_KEY_NOTAVAIL;
	struct cour_mr *mr;
	bool key_ok = false;
	int tries;

	if (!mr_fid) {
		COUR_WARN(FI_LOG_MR, "registration without a result pointer\n");
		return -FI_EINVAL;
	}
	if (count != 1 || !iov) {
		COUR_WARN(FI_LOG_MR, "%zu iovec entries: mr_iov_limit is 1\n", iov ? count : 0);
		return -FI_EINVAL;
	}
	if (flags & ~FI_RMA_EVENT) {
		COUR_WARN(FI_LOG_MR, "unsupported registration flags 0x%" PRIx64 "\n",
			  (uint64_t)(flags & ~FI_RMA_EVENT));
		return -FI_EBADFLAGS;
	}
	if (iov->iov_len && (uintptr_t)iov->iov_base > UINTPTR_MAX - (iov->iov_len - 1)) {
		COUR_WARN(FI_LOG_MR, "region %p + %zu wraps the address space\n", iov->iov_base,
			  iov->iov_len);
		return -FI_EINVAL;
	}

	mr = calloc(1, sizeof(*mr));
	if (!mr) {
		COUR_WARN(FI_LOG_MR, "out of memory for a memory region\n");
		return -FI_ENOMEM;
	}
	mr->domain = dom;
	mr->reg.access = access;
	mr->flags = flags;
	mr->reg.base = iov->iov_base;
	mr->reg.len = iov->iov_len;
	mr->offset = offset;
	mr->reg.start = (mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)iov->iov_base : offset;
	mr->reg.enabled = !(mode & FI_MR_ENDPOINT) &&
			  !((mode & FI_MR_RMA_EVENT) && (flags & FI_RMA_EVENT));
	mr->mr_fid.fid.fclass = FI_CLASS_MR;
	mr->mr_fid.fid.context = context;
	mr->mr_fid.fid.ops = &cour_mr_fi_ops;
	mr->mr_fid.mem_desc = mr;

	cour_lock_acquire(&dom->lock);
	for (tries = 0; tries < COUR_MR_KEY_TRIES && !key_ok; tries++) {
		mr->reg.key = prov_key ? cour_mr_next_prov_key() : requested_key;
		if (mr->reg.key == FI_KEY_NOTAVAIL)
			continue;    /* fi_mr_key's "no key" value: never hand it out */
		key_ok = cour_region_add(&dom->pdom, &mr->reg) == 0;
		if (!prov_key)
			break;
	}
	if (!key_ok) {
		cour_lock_release(&dom->lock);
		if (prov_key)
			COUR_WARN(FI_LOG_MR, "no free provider key after %d tries\n", tries);
		else
			COUR_WARN(FI_LOG_MR, "requested key 0x%" PRIx64 " is already in use in "
				  "this domain\n", requested_key);
		free(mr);
		return -FI_ENOKEY;
	}
	if (mr->reg.enabled)
		cour_rma_push_mr_ready(&dom->pdom, &mr->reg);
	cour_lock_release(&dom->lock);

	mr->mr_fid.key = mr->reg.key;
	cour_ref_inc(&dom->refcnt);
	*mr_fid = &mr->mr_fid;
	return 0;
}

int cour_mr_reg(struct fid *fid, const void *buf, size_t len, uint64_t access, uint64_t offset,
		uint64_t requested_key, uint64_t flags, struct fid_mr **mr, void *context)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };

	return cour_mr_create(fid, &iov, 1, access, offset, requested_key, flags, context, mr);
}

int cour_mr_regv(struct fid *fid, const struct iovec *iov, size_t count, uint64_t access,
		 uint64_t offset, uint64_t requested_key, uint64_t flags, struct fid_mr **mr,
		 void *context)
{
	return cour_mr_create(fid, iov, count, access, offset, requested_key, flags, context, mr);
}

int cour_mr_regattr(struct fid *fid, const struct fi_mr_attr *attr, uint64_t flags,
		    struct fid_mr **mr)
{
	if (!attr) {
		COUR_WARN(FI_LOG_MR, "fi_mr_regattr without attributes\n");
		return -FI_EINVAL;
	}
	/* iface and device are ignored: fi_mr(3) reads them only under FI_HMEM, never granted. */
	if (attr->auth_key_size) {
		COUR_WARN(FI_LOG_MR, "authorization keys are not supported\n");
		return -FI_EINVAL;
	}
	return cour_mr_create(fid, attr->mr_iov, attr->iov_count, attr->access, attr->offset,
			      attr->requested_key, flags, attr->context, mr);
}

/* ---- fid ---- */

static inline struct cour_mr *cour_mr_of(struct fid *fid)
{
	return COUR_CONTAINER_OF(fid, struct cour_mr, mr_fid.fid);
}

static int cour_mr_bind_ep_locked(struct cour_mr *mr, struct cour_ep *ep, uint64_t flags)
{
	cour_lock_assert_held(&mr->domain->lock);
	/* fi_mr(3) says flags "should be 0"; OpenSHMEM passes FI_REMOTE_WRITE */
	if (flags & ~(FI_REMOTE_WRITE | FI_REMOTE_READ)) {
		COUR_WARN(FI_LOG_MR, "endpoint binding flags 0x%" PRIx64 ": want 0 (or "
			  "FI_REMOTE_READ/WRITE, ignored)\n", flags);
		return -FI_EBADFLAGS;
	}
	if (ep->domain != mr->domain) {
		COUR_WARN(FI_LOG_MR, "region 0x%" PRIx64 ": fi_mr_bind to an endpoint of another "
			  "domain\n", mr->reg.key);
		return -FI_EINVAL;
	}
	if (!(cour_mr_mode(mr->domain) & FI_MR_ENDPOINT))
		return 0;
	if (mr->ep) {
		COUR_WARN(FI_LOG_MR, "FI_MR_ENDPOINT: region 0x%" PRIx64 " is already bound to %s "
			  "endpoint\n", mr->reg.key, mr->ep == ep ? "this" : "another");
		return -FI_EINVAL;
	}
	cour_ref_inc(&ep->refcnt);
	mr->ep = ep;
	mr->reg.only = &ep->pep;
	return 0;
}

static int cour_mr_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	const uint64_t events = FI_REMOTE_WRITE | FI_REMOTE_READ;
	struct cour_mr *mr = cour_mr_of(fid);
	struct cour_domain *dom = mr->domain;
	struct cour_cntr *cntr;
	int ret = 0;

	if (!bfid) {
		COUR_WARN(FI_LOG_MR, "fi_mr_bind to NULL\n");
		return -FI_EINVAL;
	}
	cour_lock_acquire(&dom->lock);
	if (mr->sealed) {
		COUR_WARN(FI_LOG_MR, "fi_mr_bind after fi_mr_enable (key 0x%" PRIx64 ")\n",
			  mr->reg.key);
		ret = -FI_EINVAL;
		goto unlock;
	}
	switch (bfid->fclass) {
	case FI_CLASS_CNTR:
		if (!(flags & events) || (flags & ~events)) {
			COUR_WARN(FI_LOG_MR, "counter binding flags 0x%" PRIx64 ": want "
				  "FI_REMOTE_WRITE and/or FI_REMOTE_READ\n", flags);
			ret = (flags & ~events) ? -FI_EBADFLAGS : -FI_EINVAL;
			goto unlock;
		}
		cntr = COUR_CONTAINER_OF(bfid, struct cour_cntr, cntr_fid.fid);
		if (cntr->domain != dom) {
			COUR_WARN(FI_LOG_MR, "counter of another domain\n");
			ret = -FI_EINVAL;
			goto unlock;
		}
		cour_ref_inc(&cntr->refcnt);
		if (mr->cntr)
			cour_ref_dec(&mr->cntr->refcnt);
		mr->cntr = cntr;
		mr->reg.counted = flags;
		cour_rma_push_mr_counted(&dom->pdom, &mr->reg); /* initiators: tell us of writes */
		break;
	case FI_CLASS_EP:
	case FI_CLASS_SEP:      /* Open MPI 5's btl/ofi binds its regions to its scalable one */
		ret = cour_mr_bind_ep_locked(mr, COUR_CONTAINER_OF(bfid, struct cour_ep, ep_fid.fid),
					     flags);
		break;
	case FI_CLASS_TX_CTX:
	case FI_CLASS_RX_CTX:   /* a context's memory is its scalable endpoint's */
		ret = cour_mr_bind_ep_locked(mr, COUR_CONTAINER_OF(bfid, struct cour_sep_ctx,
								   ep_fid.fid)->sep, flags);
		break;
	default:
		COUR_WARN(FI_LOG_MR, "a memory region binds to an endpoint or a counter, not to "
			  "fclass %zu\n", bfid->fclass);
		ret = -FI_EINVAL;
		break;
	}
unlock:
	cour_lock_release(&dom->lock);
	return ret;
}

static int cour_mr_enable_locked(struct cour_mr *mr)
{
	if ((cour_mr_mode(mr->domain) & FI_MR_ENDPOINT) && !mr->ep) {
		COUR_WARN(FI_LOG_MR, "FI_MR_ENDPOINT: region 0x%" PRIx64 " enabled before being "
			  "bound to an endpoint\n", mr->reg.key);
		return -FI_EINVAL;
	}
	mr->reg.enabled = true;
	mr->sealed = true;
	cour_rma_push_mr_ready(&mr->domain->pdom, &mr->reg);
	return 0;
}

static int cour_mr_control(struct fid *fid, int command, void *arg)
{
	struct cour_mr *mr = cour_mr_of(fid);
	int ret;

	switch (command) {
	case FI_ENABLE:
		cour_lock_acquire(&mr->domain->lock);
		ret = cour_mr_enable_locked(mr);
		cour_lock_release(&mr->domain->lock);
		return ret;
	default:
		/* FI_REFRESH, FI_GET_RAW_MR (fi_mr_raw_attr) and the rest: nothing to do for
		 * host memory registered by address range, and no raw keys. */
		return -FI_ENOSYS;
	}
}

static int cour_mr_close(struct fid *fid)
{
	struct cour_mr *mr = cour_mr_of(fid);
	struct cour_domain *dom = mr->domain;

	cour_lock_acquire(&dom->lock);
	cour_region_del(&dom->pdom, &mr->reg);
	/* from here every access with the key is refused; reads already being answered from
	 * the region must not touch it again */
	cour_rma_mr_closing(&dom->pdom, &mr->reg);
	if (mr->ep)
		cour_ref_dec(&mr->ep->refcnt);
	cour_lock_release(&dom->lock);
	if (mr->cntr)
		cour_ref_dec(&mr->cntr->refcnt);
	free(mr);
	cour_ref_dec(&dom->refcnt);
	return 0;
}

static struct fi_ops cour_mr_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = cour_mr_close,
	.bind = cour_mr_bind,
	.control = cour_mr_control,
	.ops_open = cour_no_ops_open,
	.tostr = cour_no_tostr,
	.ops_set = cour_no_ops_set,
};
