/*
 * Progress: what runs the protocol engine. Manual progress runs inside every CQ, counter and EQ
 * read and wait. Automatic progress adds one thread per domain that sleeps on the endpoints'
 * sockets and the next engine timer: it never spins, and while the application itself drives
 * progress (it polled during the thread's last nap) the thread stands back, napping 1 ms at a
 * time on its wake fd alone, so the two neither fight over the lock nor take turns on the
 * CPU on the latency path. It sleeps on the endpoints' doorbells in its naps too: a peer
 * whose send waits for our ACK asks with a probe, which the kernel hands to the doorbell
 * (wire/cour_udp.c), so an application that computes between calls does not hold the peer.
 */
#include "cour_ep.h"

#include <poll.h>
#include <stdlib.h>
#include <unistd.h>

#define COUR_APP_NAP_US      1000
#define COUR_APP_NAP_MAX_US  16000
#define COUR_MAX_SLEEP_US    100000
#define COUR_POLL_MAX        64
#define COUR_UDP_GAP_US      4
#define COUR_UDP_GAP_MAX_US  64
/* a socket that had packets this recently still counts as a way data comes in */
#define COUR_NET_RECENT_US   10000

static void cour_ep_progress(struct cour_pep *ep)
{
	int n, rounds = 0;
	uint64_t now;
	bool slept = ep->shm_armed;

	ep->in_progress = true;
	if (ep->tx_deferred) {          /* sends posted since the last pass, in one batch */
		ep->tx_deferred = false;
		cour_wire_flush(ep);
	}
	/* drain, but bounded so one busy endpoint cannot starve the others */
	if (ep->shm_ring) {
		if (COUR_UNLIKELY(slept)) {
			/* awake: producers need not ring any more */
			ep->shm_armed = false;
			cour_shm_disarm(ep);
		}
		cour_ep_clock_refresh(ep, slept);
		cour_shm_poll(ep);
		if (COUR_UNLIKELY(ep->box_sweep_us) && ep->now_us >= ep->box_sweep_us)
			cour_shm_boxes_sweep(ep, ep->now_us);
	}
	/* With same-host peers, a socket read per call would cost more than the whole shm
	 * path, and a read in progress when a ring packet lands delays it by a system call: a
	 * polling application reads the socket every udp_gap_us, which doubles while the socket
	 * stays empty (to COUR_UDP_GAP_MAX_US: a UDP peer's first packet waits that much at
	 * worst) and drops back while it has packets. A sleeper reads it when woken. */
	now = 0;
	if (ep->shm_ring && ep->stats.shm_peers && !slept) {
		now = ep->now_us;      /* read for the ring, just above */
		if (cour_us_since(now, ep->udp_last_us) < ep->udp_gap_us)
			goto timers;
		ep->udp_last_us = now;
	}
	do {
		n = cour_wire_poll(ep);
	} while (n == COUR_RX_BATCH && ++rounds < 8);
	if (n || rounds) {
		ep->udp_gap_us = COUR_UDP_GAP_US;
		ep->udp_rx_us = now ? now : cour_ep_clock_refresh(ep, false);
	} else if (ep->udp_gap_us < COUR_UDP_GAP_MAX_US)
		ep->udp_gap_us = ep->udp_gap_us ? ep->udp_gap_us * 2 : COUR_UDP_GAP_US;
timers:
	if (COUR_UNLIKELY(ep->cm_deadline != 0)) {
		uint64_t t = cour_now_us();
		if (t >= ep->cm_deadline)
			ep->up->cm_tick(ep, t);
	}
	if (COUR_UNLIKELY(ep->grants != NULL))
		cour_rma_split_expire(ep, ep->now_us);  /* refreshed above: a ring is open */
	if (ep->active) {
		if (!now)
			now = ep->now_us = cour_now_us();
		if (!ep->next_timer || now >= ep->next_timer || ep->tx_blocked ||
		    ep->wire.tx_blocked) {
			ep->tx_blocked = false;
			ep->wire.tx_blocked = false;
			cour_ep_timers(ep, now);
		}
	} else if (COUR_UNLIKELY(ep->quiet != NULL)) {
		/* (a polling caller's clock moves every few microseconds: look then, not at
		 * every pass) */
		uint64_t t = cour_ep_clock_refresh(ep, false);

		if (t != ep->quiet_swept_us) {
			ep->quiet_swept_us = t;
			cour_peer_win_sweep(ep, t);
		}
	}
	ep->in_progress = false;
}

/*
 * Does this endpoint wait on the network? A UDP endpoint does, and one with same-host peers
 * does while its socket has had packets lately. Packets over veth or loopback are delivered
 * by softirq work that may need this very cpu; a ring is filled by a peer process, which on
 * a busy host gains nothing when we yield and costs us the rest of a time slice each time
 * (MPI on one host beside two busy processes: milliseconds per message). When only the
 * rings matter an application that spins keeps its cpu, as with libfabric's shm or Open
 * MPI's vader; MPI libraries yield on their own when they see their node oversubscribed.
 */
static inline bool cour_ep_waits_on_net(const struct cour_pep *ep)
{
	return !ep->shm_ring || !ep->stats.shm_peers ||
	       cour_us_since(ep->now_us, ep->udp_rx_us) < COUR_NET_RECENT_US;
}

void cour_domain_progress_locked(struct cour_domain *dom)
{
	struct cour_pep *ep;
	bool net = false;

	cour_lock_assert_held(&dom->lock);
	if (!dom->thread_running || !pthread_equal(pthread_self(), dom->progress_thread.tid))
		__atomic_store_n(&dom->app_polls, dom->app_polls + 1, __ATOMIC_RELAXED);
	DL_FOREACH2(dom->pdom.peps, ep, pdom_next) {
		cour_ep_progress(ep);
		net |= cour_ep_waits_on_net(ep);
	}
	dom->idle_yield = net;
	if (COUR_UNLIKELY(dom->trig_ready))
		cour_trig_fire_locked(dom);
	if (COUR_UNLIKELY(dom->mconds))
		cour_domain_mcond_retry_locked(dom);
}

/*
 * An application's poll: the pass above costs about 200 instructions when it finds nothing
 * (the clock, the socket's gap, the timers, the sweeps, every box and ring). On one core, two
 * ranks spinning in it take turns with the very instructions that carry the next message.
 * When every endpoint has same-host peers, what comes soonest comes through a ring or a
 * mailbox, so a poll reads only those (cour_shm_poll, which also frees a box waiting for its
 * ring) until the time-stamp counter has moved COUR_TICKS_GAP since the last full pass: what
 * waits on time (timers, the socket every udp_gap_us, sweeps) is then no later than the
 * clock the full pass keeps would make it anyway. Anything else to do (sends to flush or
 * retry, a sleeping thread's armed ring, connections, RMA grants, triggered operations,
 * mutex waits) takes the full pass at once. Without a time-stamp counter every poll is a
 * full pass.
 */
#if defined(__x86_64__)
static inline bool cour_ep_rings_only(const struct cour_pep *ep)
{
	return ep->shm_ring && ep->stats.shm_peers && !ep->tx_deferred && !ep->tx_blocked &&
	       !ep->wire.tx_blocked && !ep->shm_armed && !ep->cm_deadline && !ep->grants;
}

void cour_domain_poll_locked(struct cour_domain *dom)
{
	struct cour_pep *ep;
	uint64_t t;

	if (dom->trig_ready || dom->mconds)
		goto full;
	DL_FOREACH2(dom->pdom.peps, ep, pdom_next)
		if (!cour_ep_rings_only(ep))
			goto full;      /* (a UDP endpoint's poll pays no counter read) */
	t = __rdtsc();
	if (t - dom->quick_tsc >= COUR_TICKS_GAP) {
		dom->quick_tsc = t;
		goto full;
	}
	__atomic_store_n(&dom->app_polls, dom->app_polls + 1, __ATOMIC_RELAXED);
	DL_FOREACH2(dom->pdom.peps, ep, pdom_next) {
		ep->in_progress = true;
		cour_shm_poll(ep);
		ep->in_progress = false;
	}
	return;
full:
	cour_domain_progress_locked(dom);
}
#else
void cour_domain_poll_locked(struct cour_domain *dom)
{
	cour_domain_progress_locked(dom);
}
#endif

int64_t cour_domain_next_timer_locked(struct cour_domain *dom, uint64_t now)
{
	struct cour_pep *ep;
	int64_t best = -1;

	if (dom->shm_ready) {
		dom->shm_ready = false;
		return 0;        /* packets wait in a ring: no sleep */
	}
	for (struct cour_mcond *mc = dom->mconds; mc; mc = mc->next)
		if (__atomic_load_n(&mc->pending, __ATOMIC_RELAXED))
			best = 1000;    /* a wake the application's mutex held up: retry soon */
	DL_FOREACH2(dom->pdom.peps, ep, pdom_next) {
		uint64_t g = cour_rma_split_deadline(ep);

		if (ep->tx_deferred)
			return 0;        /* sends wait to be flushed: no sleep */

		if (g && (best < 0 || (int64_t)(g > now ? g - now : 0) < best))
			best = g > now ? (int64_t)(g - now) : 0;
		g = ep->cm_deadline;
		if (g && (best < 0 || (int64_t)(g > now ? g - now : 0) < best))
			best = g > now ? (int64_t)(g - now) : 0;
		if (!ep->active)
			continue;
		int64_t d = ep->next_timer > now ? (int64_t)(ep->next_timer - now) : 0;
		if (!ep->next_timer)
			d = 1000;
		if (best < 0 || d < best)
			best = d;
	}
	return best;
}

int cour_domain_poll_fds_locked(struct cour_domain *dom, struct pollfd *pfds, int max)
{
	struct cour_pep *ep;
	int n = 0;

	DL_FOREACH2(dom->pdom.peps, ep, pdom_next) {
		if (n == max)
			break;
		/* a same-host peer that finds the ring armed rings our socket */
		if (ep->shm_ring) {
			ep->shm_armed = true;
			if (!cour_shm_arm(ep))
				dom->shm_ready = true;
		}
		pfds[n].fd = ep->wire.fd;
		pfds[n].events = POLLIN;
		pfds[n].revents = 0;
		n++;
	}
	return n;
}

static void cour_sleep(struct pollfd *pfds, int n, int64_t us)
{
	struct timespec ts;

	if (us < 0 || us > COUR_MAX_SLEEP_US)
		us = COUR_MAX_SLEEP_US;
	ts.tv_sec = us / 1000000;
	ts.tv_nsec = (us % 1000000) * 1000;
	ppoll(pfds, (nfds_t)n, &ts, NULL);
}

void cour_domains_wait(struct cour_domain **doms, int ndoms, int extra_fd, int timeout_ms)
{
	struct pollfd pfds[COUR_POLL_MAX + 1];
	int64_t us = -1;
	int n = 0;

	if (extra_fd >= 0) {
		pfds[0].fd = extra_fd;
		pfds[0].events = POLLIN;
		pfds[0].revents = 0;
		n = 1;
	}
	for (int i = 0; i < ndoms; i++) {
		int64_t d;

		cour_lock_acquire(&doms[i]->lock);
		n += cour_domain_poll_fds_locked(doms[i], pfds + n, COUR_POLL_MAX + 1 - n);
		d = cour_domain_next_timer_locked(doms[i], cour_now_us());
		cour_lock_release(&doms[i]->lock);
		if (d >= 0 && (us < 0 || d < us))
			us = d;
	}
	if (timeout_ms >= 0 && (us < 0 || us > (int64_t)timeout_ms * 1000))
		us = (int64_t)timeout_ms * 1000;
	cour_sleep(pfds, n, us);
}

void cour_domain_wait(struct cour_domain *dom, int extra_fd, int timeout_ms)
{
	cour_domains_wait(&dom, 1, extra_fd, timeout_ms);
}

void cour_domain_kick(struct cour_domain *dom)
{
	uint64_t one = 1;

	if (dom->thread_running && write(dom->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		COUR_WARN(FI_LOG_DOMAIN, "kick progress thread: %s\n", strerror(errno));
}

/* Has the application driven progress since we last looked? A counter, not a clock: the
 * application's side of this is on every poll of the latency path. */
static bool cour_app_polled(struct cour_domain *dom, uint64_t *seen)
{
	uint64_t now = __atomic_load_n(&dom->app_polls, __ATOMIC_RELAXED);

	if (now == *seen)
		return false;
	*seen = now;
	return true;
}

/* Probes on the endpoints' doorbells (wire/cour_udp.c): a peer waits for our ACK. Read after
 * a pass, which read what it waits on, so the ACK each probe draws at once covers that. */
static void cour_domain_bells_locked(struct cour_domain *dom)
{
	struct cour_pep *ep;

	DL_FOREACH2(dom->pdom.peps, ep, pdom_next) {
		if (ep->wire.bell_fd < 0 || !ep->wire.base->bell)
			continue;
		ep->in_progress = true;
		ep->wire.base->bell(&ep->wire);
		ep->in_progress = false;
	}
}

#define COUR_FIXED_FDS 2        /* the wake fd and the doorbells' epoll set */

static void *cour_progress_main(void *arg)
{
	struct cour_domain *dom = arg;
	struct pollfd pfds[COUR_POLL_MAX + COUR_FIXED_FDS];
	uint64_t drain, seen = 0;

	pfds[0].fd = dom->wake_fd;
	pfds[0].events = POLLIN;
	pfds[1].fd = dom->pdom.bell_epfd > 0 ? dom->pdom.bell_epfd : -1;  /* (-1: ignored) */
	pfds[1].events = POLLIN;
	bool app_active = false, bell;
	int64_t nap = COUR_APP_NAP_US;

	while (!__atomic_load_n(&dom->thread_stop, __ATOMIC_ACQUIRE)) {
		int64_t us;
		int n;

		pfds[0].revents = pfds[1].revents = 0;
		if (app_active) {
			/* The application drives progress: neither the lock nor the sockets are
			 * ours until it stops. Napping on the wake fd and the doorbells alone
			 * keeps us from being woken by its packets and preempting it. */
			cour_sleep(pfds, COUR_FIXED_FDS, nap);
		} else {
			uint64_t now = cour_now_us();

			cour_lock_acquire(&dom->lock);
			n = cour_domain_poll_fds_locked(dom, pfds + COUR_FIXED_FDS, COUR_POLL_MAX);
			us = cour_domain_next_timer_locked(dom, now);
			cour_lock_release(&dom->lock);
			cour_sleep(pfds, n + COUR_FIXED_FDS, us);
		}
		if (pfds[0].revents & POLLIN) {
			if (read(dom->wake_fd, &drain, sizeof(drain)) < 0 && errno != EAGAIN)
				COUR_WARN(FI_LOG_DOMAIN, "progress wake fd: %s\n", strerror(errno));
		}
		/* one look per round, and its answer decides the next sleep too: a second look
		 * would find no new poll and send the thread back to the sockets */
		app_active = cour_app_polled(dom, &seen);
		bell = pfds[1].revents & POLLIN;
		if (bell) {
			/* a peer waits for our ACK, perhaps while the application computes */
			cour_lock_acquire(&dom->lock);
			cour_domain_progress_locked(dom);
			cour_domain_bells_locked(dom);
			cour_lock_release(&dom->lock);
		}
		if (app_active) {
			/* the longer the application keeps polling, the less we look: every
			 * wake-up takes a CPU from someone on a busy node */
			nap = COUR_MIN(nap * 2, (int64_t)COUR_APP_NAP_MAX_US);
			continue;
		}
		nap = COUR_APP_NAP_US;
		if (bell)
			continue;       /* (the pass ran above) */
		cour_lock_acquire(&dom->lock);
		cour_domain_progress_locked(dom);
		cour_lock_release(&dom->lock);
	}
	return NULL;
}

/* Asks the thread to return; it sees the flag at its next look, which the kick brings now. */
static void cour_progress_thread_ask_stop(void *arg)
{
	struct cour_domain *dom = arg;

	__atomic_store_n(&dom->thread_stop, true, __ATOMIC_RELEASE);
	cour_domain_kick(dom);
}

int cour_progress_thread_start(struct cour_domain *dom)
{
	int ret;

	dom->thread_stop = false;
	dom->thread_running = true;
	ret = cour_thread_start(&dom->progress_thread, cour_progress_main, dom,
				cour_progress_thread_ask_stop);
	if (ret) {
		dom->thread_running = false;
		COUR_WARN(FI_LOG_DOMAIN, "progress thread: %s\n", strerror(ret));
		return -FI_EOTHER;
	}
	return 0;
}

void cour_progress_thread_stop(struct cour_domain *dom)
{
	if (!dom->thread_running)
		return;
	cour_progress_thread_ask_stop(dom);
	cour_thread_join(&dom->progress_thread);
	dom->thread_running = false;
}
