/*
 * Single copy between processes of one host (process_vm_readv/writev), for large messages and
 * RMA to peers reached through shared memory.
 *
 * The side that owns the checks does the copy, so nothing changes in who validates what:
 *   - rendezvous: the RTS names the sender's buffer (COUR_F_CMA, raddr); the receiver, once a
 *     receive matches, pulls the bytes it accepts and answers CTS|CMA, which completes the
 *     send (the data is placed: delivery complete);
 *   - RMA write: one bare WRITE|CMA names the initiator's buffer (offset field); the target
 *     checks key, bounds and access for the whole write, pulls, answers RMA_RESP;
 *   - RMA read: READ_REQ|CMA names the initiator's buffer; the target checks, pushes, answers
 *     RMA_RESP.
 * Where the kernel refuses (ptrace rules, seccomp, another user), the first refusal is logged
 * at info level, counted, and that peer is served by copying through the ring from then on:
 * a message gets a plain CTS, a read plain READ_RESP packets, and a write is answered
 * COUR_E_CMA_REFUSED, which makes the initiator send it again as packets. The application
 * never sees the difference.
 */
#include "proto/cour_engine.h"

#include <inttypes.h>
#include <pthread.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

/*
 * How long an operation must be to go by single copy to a shared-memory peer.
 * RMA from 32 KiB: a pushed or pulled write needs no packet through the target's ring and,
 * pushed, not even the target's progress.
 * Messages from COUR_SPLIT_MIN (256 KiB) always, where single copy and its shared form win.
 * Below it the ring costs two copies and the kernel one, which pins the span's pages on every
 * call; which costs less depends on where the two processes run:
 *   - sharing a core's caches, the ring's copies run at cache speed: a 64 KiB Open MPI
 *     ping-pong took 1.6-2.9 us through the ring against 5.6-6.5 by single copy;
 *   - on cores whose caches each line must cross, every copy moves it: 7.4 us against 5.5,
 *     and a halo exchange 13.8 against 6.2 (45% of its messages arrived before their
 *     receive, which the ring path copies a third time, into an unexpected buffer).
 * So the sender times its big ring puts (proto/cour_shm_peer.c): while they copy slower than
 * COUR_RING_SLOW_MBPS (14-21 GB/s across cores in this VM, above 50 within one core's
 * caches), a message of COUR_CMA_LONE_MIN up to COUR_SPLIT_MIN that is alone on its way to
 * the peer (no single-copy rendezvous of ours to it still waiting for its CTS) goes by single
 * copy: what a ping-pong or a halo waits for. One shorter than COUR_MSG_SPLIT_MIN posted
 * behind such a rendezvous (a window of sends) goes through the ring, where both processes
 * copy at once and the bandwidth stays the ring's, and its puts keep the rate measured (one
 * as long as a split goes by single copy too, to stay behind it: a window of 128 KiB sends
 * moves 0.86x the ring's rate, 1.15x ob1+vader's). At 8 KiB the ring won even across cores
 * (2.2 against 2.6 us); at 16 KiB single copy did (3.2 against 3.6). Below COUR_CMA_ANSWER_MIN
 * a message is alone only if it also answers one (the peer's last message came after our last
 * send): in a window of 16 KiB sends each one posted after a CTS was alone again, and the
 * receiver's pulls with their RTS and CTS cost more than the ring's copies there (8.9 against
 * 11.3 GB/s), while a ping-pong's and a halo's messages answer.
 */
#define COUR_CMA_RMA_MIN    (32u << 10)
#define COUR_CMA_MSG_MIN    COUR_SPLIT_MIN
#define COUR_CMA_LONE_MIN   (16u << 10)
#define COUR_CMA_ANSWER_MIN (32u << 10)
#define COUR_RING_SLOW_MBPS 32000u

/*
 * The put rate does not see what a pull costs before it copies a byte: the system call and
 * the pinning of the span's pages. A few hundred ns on bare metal; in a VM whose guest page
 * tables go through the hypervisor every system call took about 1 us and a pull about 1.8 us
 * more than its copy (4 KiB 2.0 us, 32 KiB 3.4, 128 KiB 6.4), and the ring won a lone message
 * up to 128 KiB: Open MPI's 32 KiB latency 3.5-3.9 us against 6.6-7.0, a 16 KiB halo 1.1-3.2
 * against 7.1-8.8 (docs/performance.md, One host). Where a pull costs COUR_PULL_DEAR_NS or more
 * before its copy, a lone message goes by single copy only from COUR_CMA_DEAR_MIN. Measured
 * once per process, on its own pages (the same call and pinning), at the first endpoint open.
 */
#define COUR_PULL_DEAR_NS   1500u
#define COUR_CMA_DEAR_MIN   (128u << 10)

static uint64_t cour_pull_fixed_ns;   /* 0: not measured, or the kernel refused */
static pthread_once_t cour_pull_once = PTHREAD_ONCE_INIT;

static void cour_pull_measure(void)
{
	char src[256], dst[sizeof(src)];
	struct iovec l = { .iov_base = dst, .iov_len = sizeof(dst) };
	struct iovec r = { .iov_base = src, .iov_len = sizeof(src) };
	uint64_t best = UINT64_MAX;

	memset(src, 0x5a, sizeof(src));
	for (int i = 0; i < 6; i++) {
		uint64_t t0 = cour_now_ns();

		if (process_vm_readv(getpid(), &l, 1, &r, 1, 0) != (ssize_t)sizeof(src))
			return;
		/* (the first calls warm the path up) */
		if (i >= 2)
			best = COUR_MIN(best, cour_now_ns() - t0);
	}
	cour_pull_fixed_ns = best;
	COUR_INFO(FI_LOG_EP_CTRL, "a pull costs %" PRIu64 " ns before its copy%s\n", best,
		  best >= COUR_PULL_DEAR_NS ? ": same-host messages below 128 KiB go through the "
		  "rings" : "");
}

void cour_cma_measure(void)
{
	pthread_once(&cour_pull_once, cour_pull_measure);
}

/* Is a pull dear here? (for tests, FI_COURIER_PULL_NS says; FI_COURIER_SHM_LONE, set, is a
 * test that means the ring's rate alone) */
static inline bool cour_cma_pull_dear(void)
{
	if (cour_params.pull_ns >= 0)
		return (uint32_t)cour_params.pull_ns >= COUR_PULL_DEAR_NS;
	return cour_params.shm_lone < 0 && cour_pull_fixed_ns >= COUR_PULL_DEAR_NS;
}

/* Do this endpoint's copies into rings cross between caches? (FI_COURIER_SHM_LONE decides
 * for tests) */
static bool cour_cma_ring_slow(const struct cour_pep *ep)
{
	if (cour_params.shm_lone >= 0)
		return cour_params.shm_lone;
	return ep->shm_copy_mbps && ep->shm_copy_mbps < COUR_RING_SLOW_MBPS;
}

/* Will the peer move our bytes itself? (It decides whether it can: its HELLO said.) */
static inline bool cour_cma_peer(const struct cour_peer *peer, size_t count)
{
	return peer->shm && peer->peer_pulls && count == 1;
}

bool cour_cma_rma_usable(const struct cour_peer *peer, size_t len, size_t count)
{
	return cour_cma_peer(peer, count) && len >= COUR_CMA_RMA_MIN;
}

/* From what length a message of count iovecs goes by single copy now (SIZE_MAX: never) */
static size_t cour_cma_msg_min(const struct cour_peer *peer, size_t count)
{
	if (!cour_cma_peer(peer, count))
		return SIZE_MAX;
	/* (behind a single copy the receiver may split, one as long goes the same way: sent
	 * eagerly it could complete first, cour_msg_proto.c) */
	if (peer->rts_cma)
		return COUR_MSG_SPLIT_MIN;
	if (!cour_cma_ring_slow(peer->ep))
		return COUR_CMA_MSG_MIN;
	if (cour_cma_pull_dear())
		return COUR_CMA_DEAR_MIN;
	return peer->msg_sent ? COUR_CMA_ANSWER_MIN : COUR_CMA_LONE_MIN;
}

bool cour_cma_msg_usable(const struct cour_peer *peer, size_t len, size_t count)
{
	return len >= cour_cma_msg_min(peer, count);
}

/* An inject of up to a ring cell goes eager whatever single copy would pay: its bytes are
 * copied before the call returns anyway, and the cell is that copy (SHORT). One that finds too
 * little credit for it asks for more (RTS|WANT) instead of going by single copy for good. */
size_t cour_cma_eager_max(const struct cour_peer *peer, size_t count, uint64_t flags)
{
	size_t max = COUR_MIN(cour_params.eager_max, cour_cma_msg_min(peer, count) - 1);

	if ((flags & FI_INJECT) && peer->via_shm)
		max = COUR_MAX(max, COUR_MIN(cour_params.eager_max,
					     (size_t)peer->mtu - COUR_PKT_HDR_LEN));
	return max;
}

/* FI_COURIER_CMA_REFUSE_AFTER: this copy is refused as a test asked (process-wide count) */
static bool cour_cma_test_refuses(void)
{
	static uint64_t done;

	return COUR_UNLIKELY(cour_params.cma_refuse_after >= 0) &&
	       __atomic_fetch_add(&done, 1, __ATOMIC_RELAXED) >=
	       (uint64_t)cour_params.cma_refuse_after;
}

/* 0, -FI_EPERM (the kernel refuses: fall back, already logged and counted), or -FI_EFAULT
 * (an address is wrong: the operation fails). */
static int cour_cma_move(struct cour_peer *peer, bool pull, const struct iovec *local,
			 size_t nlocal, uint64_t raddr, size_t len)
{
	struct cour_pep *ep = peer->ep;
	struct iovec remote = { .iov_base = (void *)(uintptr_t)raddr, .iov_len = len };
	size_t done = 0;
	char str[80];

	while (done < len) {
		/* the kernel moves at most a few MiB per call on some versions: go on from
		 * where it stopped */
		struct iovec l[COUR_IOV_MAX];
		size_t n = cour_iov_slice(local, COUR_MIN(nlocal, (size_t)COUR_IOV_MAX), done,
					  len - done, l);

		remote.iov_base = (void *)(uintptr_t)(raddr + done);
		remote.iov_len = len - done;
		ssize_t r = -1;

		errno = EPERM;
		if (!cour_cma_test_refuses())
			r = pull ? process_vm_readv((pid_t)peer->shm_pid, l, n, &remote, 1, 0)
				 : process_vm_writev((pid_t)peer->shm_pid, l, n, &remote, 1, 0);
		if (r > 0) {
			done += (size_t)r;
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && (errno == EPERM || errno == EACCES || errno == ENOSYS)) {
			peer->cma_off = true;
			ep->stats.shm_copy_fallbacks++;
			COUR_INFO(FI_LOG_EP_DATA, "single copy with %s refused (%s): copying "
				  "through shared memory instead\n",
				  cour_addr_str(&peer->addr, str, sizeof(str)), strerror(errno));
			return -FI_EPERM;
		}
		COUR_WARN(FI_LOG_EP_DATA, "%s of %zu bytes at %#" PRIx64 " in pid %u: %s\n",
			  pull ? "process_vm_readv" : "process_vm_writev", len - done, raddr + done,
			  peer->shm_pid, r < 0 ? strerror(errno) : "no progress");
		return -FI_EFAULT;
	}
	ep->stats.shm_single_copy_bytes += len;
	return 0;
}

int cour_cma_pull(struct cour_peer *peer, const struct iovec *local, size_t nlocal,
		  uint64_t raddr, size_t len)
{
	return cour_cma_move(peer, true, local, nlocal, raddr, len);
}

int cour_cma_push(struct cour_peer *peer, const struct iovec *local, size_t nlocal,
		  uint64_t raddr, size_t len)
{
	return cour_cma_move(peer, false, local, nlocal, raddr, len);
}
