/*
 * Same-host peers over shared memory: the engine's second path of an RDM endpoint, beside its
 * wire (the ring itself is wire/cour_shm_ring.c; this file is the handshake and the use of it).
 *
 * Every RDM endpoint on the UDP wire owns a receive ring (cour_shm_ring.c: a memfd, so no name
 * exists anywhere that could outlive the process). Addresses stay plain UDP socket addresses;
 * locality is discovered, not declared: the first time an endpoint sends to a peer it also
 * sends a HELLO over UDP with its host identity and its ring's locator. A receiver that finds
 * the same host (same kernel boot, network and pid namespaces) maps the ring through
 * /proc/<pid>/fd and answers with its own HELLO, so both sides learn in one round trip.
 * A peer in another namespace, on another host, or of another user simply stays on UDP.
 *
 * Packets keep their headers and sequence numbers over shm: a session starts on UDP and moves
 * to the ring once nothing sent over UDP is unacknowledged, and the sequence numbers keep the
 * order across the switch. The ring is reliable and ordered, so a packet put into it counts as
 * acknowledged at once (no ACK, no retransmit timer); a full ring stops the sender and the
 * packet is retried in order. Liveness: a peer process that exits is seen through a pidfd.
 *
 * A consumer about to sleep arms its ring; the producer that finds it armed sends one ACK over
 * UDP, the doorbell, to the consumer's socket, which is what sleepers poll. A polling consumer
 * never arms, so the latency path has no system call.
 */
#include "proto/cour_engine.h"
#include "wire/cour_shm_ring.h"
#include "wire/cour_trace.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* 128 positions: a ring's slots are 32 KiB and its cells at most 2 MiB, resident as used.
 * 256 measured no faster anywhere (cour_bw 16 KiB on one host 2.5x slower: the cells a
 * stream cycles through no longer fit the caches) and cost a 128-rank host 1.4x the shared
 * memory (docs/architecture.md, Where each byte goes). */
#define COUR_SHM_CELLS     128
#define COUR_SHM_CELL      (16384 + 128)  /* one 16 KiB fragment plus headers per cell */
#define COUR_SHM_POLL_MAX  64             /* packets per poll: the UDP wire gets its turn */

static uint8_t cour_host_id[32];
static pthread_once_t cour_host_once = PTHREAD_ONCE_INIT;

static uint64_t cour_ns_inode(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* boot id, then the network and pid namespace inodes. A /proc that cannot tell leaves zeros,
 * and zeros never match (see cour_shm_same_host). */
static void cour_host_id_init(void)
{
	char text[64] = "";
	uint64_t ns[2];
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	size_t k = 0;

	if (fd >= 0) {
		ssize_t n = read(fd, text, sizeof(text) - 1);
		text[n > 0 ? n : 0] = 0;
		close(fd);
	}
	for (const char *c = text; *c && k < 32; c++) {
		int v = (*c >= '0' && *c <= '9') ? *c - '0' :
			(*c >= 'a' && *c <= 'f') ? *c - 'a' + 10 : -1;
		if (v < 0)
			continue;
		cour_host_id[k / 2] |= (uint8_t)(k % 2 ? v : v << 4);
		k++;
	}
	ns[0] = cour_ns_inode("/proc/self/ns/net");
	ns[1] = cour_ns_inode("/proc/self/ns/pid");
	memcpy(cour_host_id + 16, ns, sizeof(ns));
}

static bool cour_shm_same_host(const uint8_t *host)
{
	static const uint8_t zero[16];

	pthread_once(&cour_host_once, cour_host_id_init);
	return memcmp(cour_host_id, zero, 16) && memcmp(cour_host_id + 16, zero, 16) &&
	       memcmp(host, cour_host_id, sizeof(cour_host_id)) == 0;
}

int cour_shm_ep_open(struct cour_pep *ep)
{
	int ret;

	if (!cour_params.shm || ep->type != FI_EP_RDM || ep->wire.base != &cour_udp_wire)
		return 0;
	if (cour_fault_on_packets(&ep->wire)) {
		COUR_INFO(FI_LOG_EP_CTRL, "fault injection lives in the UDP wire: shared memory "
			  "off for this endpoint\n");
		return 0;
	}
	pthread_once(&cour_host_once, cour_host_id_init);
	cour_cma_measure();
	ret = cour_shm_ring_create(COUR_SHM_CELLS, COUR_SHM_CELL, &ep->shm_ring, &ep->shm_loc);
	if (ret) {
		/* UDP reaches every peer: losing shm costs speed, not function */
		COUR_INFO(FI_LOG_EP_CTRL, "no shared-memory ring (%s): same-host peers use UDP\n",
			  fi_strerror(-ret));
		ep->shm_ring = NULL;
	}
	return 0;
}

void cour_shm_ep_close(struct cour_pep *ep)
{
	if (!ep->shm_ring)
		return;
	cour_rma_push_ep_close(ep);        /* no initiator may write after this */
	ep->stats.shm_reclaimed = cour_shm_ring_reclaimed(ep->shm_ring);
	cour_shm_ring_close(ep->shm_ring);
	ep->shm_ring = NULL;
}

/* Stop polling the peer's box to us (our mapping of its file must still be there). */
static void cour_shm_inbox_close(struct cour_peer *peer)
{
	struct cour_pep *ep = peer->ep;

	if (!peer->inbox.gen)
		return;
	cour_shm_box_close(peer->shm, &peer->inbox);
	for (uint32_t i = 0; i < ep->ninboxes; i++)
		if (ep->inboxes[i] == peer) {
			ep->inboxes[i] = ep->inboxes[--ep->ninboxes];
			break;
		}
	peer->box_blocked = false;
}

/* The peer named a box of its file for us (its HELLO): poll it, and say so in its control line,
 * which is what lets the peer use it. Only a later claim than the last box we opened: a HELLO
 * is a datagram that may come late or again, and one naming a box we closed (its close entry
 * read) would have us read its entries a second time from the start, as new messages. A box
 * ends with its close entry, never with a HELLO: a HELLO that named none ended a box the peer
 * still put entries into. A later claim ends the old box, which the peer gave up first. */
static void cour_shm_inbox_open(struct cour_peer *peer, const struct cour_shm_hello *h)
{
	struct cour_pep *ep = peer->ep;

	if (!cour_box_gen_after(h->box_gen, peer->inbox_last))
		return;
	cour_shm_inbox_close(peer);
	if (ep->ninboxes == COUR_BOX_COUNT ||
	    cour_shm_box_open(peer->shm, h->box_idx, h->box_gen, &peer->inbox))
		return;
	peer->inbox_last = h->box_gen;
	ep->inboxes[ep->ninboxes++] = peer;
}

/* How long a box may go unused before it goes back (FI_COURIER_WIN_IDLE, 1 ms at least). */
static inline uint64_t cour_shm_box_idle_us(void)
{
	return COUR_MAX((uint64_t)cour_params.win_idle_ms, (uint64_t)1) * 1000;
}

/* Our box to the peer goes back to the ring's free ones, its pages out of the file. */
static void cour_shm_box_release(struct cour_pep *ep, struct cour_peer *peer)
{
	uint16_t idx = peer->box.idx;

	if (!peer->box.gen)
		return;
	if (ep->shm_ring)
		cour_shm_box_free(ep->shm_ring, &peer->box);
	peer->box.gen = 0;
	if (ep->box_peers[idx] == peer) {
		ep->box_peers[idx] = NULL;
		if (!--ep->boxes_out)
			ep->box_sweep_us = 0;
	}
	peer->box_want = 0;
}

void cour_shm_peer_detach(struct cour_peer *peer)
{
	cour_shm_inbox_close(peer);
	peer->inbox_last = 0;                   /* (a new ring counts its claims anew) */
	cour_shm_box_release(peer->ep, peer);
	peer->push_held_us = 0;
	peer->box_want = 0;
	peer->hello_tries = 0;
	peer->hello_next_us = 0;
	peer->via_shm = false;
	peer->cma_off = true;
	peer->peer_mapped = false;
	peer->peer_pulls = false;
	peer->shm_blocked = false;
	if (peer->shm) {
		cour_shm_ring_close(peer->shm);
		peer->shm = NULL;
	}
	if (peer->pidfd >= 0)
		close(peer->pidfd);
	peer->pidfd = -1;
}

void cour_shm_hello_send(struct cour_peer *peer, uint32_t flags)
{
	struct cour_pep *ep = peer->ep;
	struct cour_shm_hello hello;
	struct cour_pkt_hdr hdr;
	struct iovec iov = { .iov_base = &hello, .iov_len = sizeof(hello) };

	memset(&hello, 0, sizeof(hello));
	pthread_once(&cour_host_once, cour_host_id_init);   /* (cour_shm_ep_open did, mostly) */
	memcpy(hello.host, cour_host_id, sizeof(hello.host));
	hello.pid = ep->shm_loc.pid;
	hello.fd = ep->shm_loc.fd;
	hello.nonce = ep->shm_loc.nonce;
	hello.bytes = ep->shm_loc.bytes;
	hello.probe = (uint64_t)(uintptr_t)&ep->shm_loc.nonce;
	hello.uid = (uint32_t)getuid();
	hello.flags = flags;
	if (peer->shm)
		hello.flags |= COUR_HELLO_MAPPED | (peer->cma_off ? 0 : COUR_HELLO_PULLS);
	/* our mailbox for it, if it needs one (cour_shm_box_want): it polls it once it reads this;
	 * not one we are closing, which the peer may have closed already */
	if (!peer->box.closing) {
		hello.box_gen = peer->box.gen;
		hello.box_idx = peer->box.idx;
	}
	memset(&hdr.base, 0, sizeof(hdr.base));
	hdr.base.type = COUR_PKT_HELLO;
	hdr.base.flags = COUR_F_PCSUM;
	cour_hdr_finish(peer, &hdr, COUR_BASE_HDR_LEN, &iov, 1);
	/* over UDP even when mapped: the peer may have lost our ring (it restarted) */
	cour_wire_send_now(ep, &peer->sa, peer->sa_len, &hdr, COUR_BASE_HDR_LEN, &iov, 1);
}

/* A HELLO is one unsequenced datagram: a full socket buffer loses it, and the pair would stay
 * on UDP for good (or half of it: one side mapped, its answer lost). So sending to a peer that
 * has not said it mapped our ring asks again, a few times, further apart each time; a peer on
 * another host never answers and costs COUR_HELLO_TRIES packets. */
void cour_shm_hello_again(struct cour_peer *peer)
{
	uint64_t now = cour_ep_clock(peer->ep);

	if (now < peer->hello_next_us)
		return;
	/* asked again for a box: the live flag is the last send's, so look at the box itself (the
	 * peer may have polled it since, with nothing sent to it after) */
	if (peer->peer_mapped && peer->box.gen && cour_box_tx_live(&peer->box))
		return;
	cour_shm_hello_send(peer, COUR_HELLO_REPLY);
	peer->hello_next_us = now + ((uint64_t)COUR_HELLO_GAP_US << peer->hello_tries);
	peer->hello_tries++;
}

/* Can we single-copy with the peer? Read the 8 bytes its HELLO points at: they hold its nonce.
 * Decided once per peer; a refusal is the fallback the stats count. */
static void cour_shm_cma_test(struct cour_peer *peer, const struct cour_shm_hello *h)
{
	struct iovec l;
	uint64_t got = 0;

	l.iov_base = &got;
	l.iov_len = sizeof(got);
	peer->cma_off = cour_cma_pull(peer, &l, 1, h->probe, sizeof(got)) != 0 ||
			got != h->nonce;
}

void cour_shm_hello_handle(struct cour_peer *peer, const struct cour_shm_hello *h)
{
	struct cour_pep *ep = peer->ep;
	struct cour_shm_locator loc = {
		.pid = h->pid, .fd = h->fd, .nonce = h->nonce, .bytes = h->bytes,
	};
	char str[80];
	int ret;

	if (!ep->shm_ring || !cour_shm_same_host(h->host))
		return;
	/* With a key, a ring is trusted like the key file: only processes of our own user
	 * (who can read that file, and whose rings the kernel lets us map) share one with us.
	 * This HELLO passed the key's check; a process of another user (root aside, whom
	 * nothing here stops) stays on authenticated UDP. docs/protocol.md, threat model. */
	if (ep->wire.mac && h->uid != (uint32_t)getuid()) {
		COUR_INFO(FI_LOG_EP_CTRL, "peer %s is on this host but another user's: with a "
			  "key it stays on UDP\n", cour_addr_str(&peer->addr, str, sizeof(str)));
		return;
	}
	if (peer->shm && peer->shm_pid == h->pid && peer->shm_nonce == h->nonce)
		goto answer;              /* a repeat: nothing new to map */
	cour_shm_peer_detach(peer);
	ret = cour_shm_ring_attach(&loc, &peer->shm);
	if (ret) {
		COUR_INFO(FI_LOG_EP_CTRL, "peer %s is on this host but its ring cannot be mapped "
			  "(%s%s): it stays on UDP\n", cour_addr_str(&peer->addr, str, sizeof(str)),
			  fi_strerror(-ret), h->uid != (uint32_t)getuid() ? ", another user" : "");
		peer->shm = NULL;
		return;
	}
	peer->shm_pid = h->pid;
	peer->shm_nonce = h->nonce;
	peer->pidfd = (int)syscall(SYS_pidfd_open, (pid_t)h->pid, 0);
	cour_peer_mtu_set(peer, COUR_MIN(cour_shm_ring_payload_max(peer->shm),
					 (uint32_t)COUR_MAX_PKT));
	/* nothing unacknowledged: the ring at once (else cour_peer_push, once all is) */
	peer->via_shm = !cour_peer_sending(peer);
	ep->stats.shm_peers++;
	cour_shm_cma_test(peer, h);
	COUR_INFO(FI_LOG_EP_CTRL, "peer %s reached through shared memory (pid %u)\n",
		  cour_addr_str(&peer->addr, str, sizeof(str)), h->pid);
answer:
	cour_shm_inbox_open(peer, h);
	if (h->flags & COUR_HELLO_MAPPED) {
		peer->peer_mapped = true;
		peer->peer_pulls = h->flags & COUR_HELLO_PULLS;
	}
	/* ask back until the peer has told whether it can single-copy with us */
	if (h->flags & COUR_HELLO_REPLY)
		cour_shm_hello_send(peer, (h->flags & COUR_HELLO_MAPPED) ? 0 : COUR_HELLO_REPLY);
}

/* Has the peer's process exited? Only asked when the peer owes us something. A pidfd is
 * readable once its process has exited; poll() also answers 1 for a descriptor that is not
 * open (POLLNVAL) or in error, which says nothing of the peer: that is logged, the pidfd
 * dropped, and the peer left to the silence timeout. */
bool cour_shm_peer_gone(struct cour_peer *peer)
{
	struct pollfd pfd = { .fd = peer->pidfd, .events = POLLIN };
	char str[80];

	if (peer->pidfd < 0 || poll(&pfd, 1, 0) != 1)
		return false;
	if (COUR_LIKELY(pfd.revents == POLLIN || pfd.revents == (POLLIN | POLLHUP)))
		return true;
	COUR_WARN(FI_LOG_EP_CTRL, "peer %s (pid %u): its pidfd %d polls 0x%x, not an exit: no "
		  "longer watched (its silence still counts)\n",
		  cour_addr_str(&peer->addr, str, sizeof(str)), peer->shm_pid, peer->pidfd,
		  (unsigned)pfd.revents);
	if (!(pfd.revents & POLLNVAL))
		close(peer->pidfd);
	peer->pidfd = -1;
	return false;
}

/* The peer sleeps on its socket: an ACK over UDP wakes it (an ordinary, valid packet, so a
 * receiver needs no special case, and garbage cannot pass for it). */
static void cour_shm_doorbell(struct cour_peer *peer)
{
	struct cour_pkt_hdr hdr;

	memset(&hdr.base, 0, sizeof(hdr.base));
	hdr.base.type = COUR_PKT_ACK;
	cour_hdr_finish(peer, &hdr, COUR_BASE_HDR_LEN, NULL, 0);
	if (cour_wire_send_now(peer->ep, &peer->sa, peer->sa_len, &hdr, COUR_BASE_HDR_LEN,
			       NULL, 0) == 0)
		peer->ep->stats.shm_doorbells++;
}

/* One finished packet into the peer's ring, the doorbell if the peer sleeps. Its crc field,
 * which nobody checks in a ring, carries the count of our ordered puts to this peer (packets
 * with a sequence number, and SHORTs), this one included: a box entry carries the count
 * before it, and the peer takes the two in the order they were sent (cour_shm_poll). An ACK
 * or a RESET orders nothing, so it counts nothing: an entry never waits for one. */
static int cour_shm_put(struct cour_peer *peer, struct cour_base_hdr *hdr, size_t hdr_len,
			const struct iovec *iov, size_t iovcnt)
{
	struct cour_pep *ep = peer->ep;
	uint32_t ordered = cour_pkt_ordered(hdr->type);
	bool wake = false;
	int ret;

	hdr->crc = peer->ring_puts + ordered;
	ret = cour_shm_ring_put(peer->shm, &ep->wire.bound_sa, ep->wire.bound_len, hdr, hdr_len, iov,
				iovcnt, &wake);
	if (COUR_UNLIKELY(ret))
		return ret;
	peer->ring_puts += ordered;
	if (COUR_UNLIKELY(ep->wire.trace))
		cour_trace_shm(&ep->wire, true, &peer->sa, peer->sa_len, hdr, hdr_len, iov, iovcnt);
	ep->stats.shm_tx_pkts++;
	ep->stats.tx_pkts++;
	if (COUR_UNLIKELY(wake))
		cour_shm_doorbell(peer);
	return 0;
}

/* One put of a big packet in COUR_SHM_RATE_EVERY is timed: its copy rate says whether the
 * two processes share a core's caches (proto/cour_cma.c, cour_cma_ring_slow). Two clock
 * readings cost about 1% of a 16 KiB put where the copy is fast. */
#define COUR_SHM_RATE_MIN   (8u << 10)
#define COUR_SHM_RATE_EVERY 8
/* The first lap of a ring faults its cells' pages in: a 16 KiB ping-pong's first puts
 * measured 1.2 GB/s, and the single copy they chose left no put to correct them. So the
 * puts of the first COUR_SHM_RATE_WARM big packets are not timed. */
#define COUR_SHM_RATE_WARM  128

/* When a put of bytes starts, if it is one to time; else 0 */
static inline uint64_t cour_shm_rate_start(struct cour_pep *ep, size_t bytes)
{
	if (bytes < COUR_SHM_RATE_MIN)
		return 0;
	if (ep->shm_copy_warm < COUR_SHM_RATE_WARM) {
		ep->shm_copy_warm++;
		return 0;
	}
	return ++ep->shm_copy_tick % COUR_SHM_RATE_EVERY == 0 ? cour_now_ns() : 0;
}

/* ...and when it ended */
static void cour_shm_rate_note(struct cour_pep *ep, size_t bytes, uint64_t t0)
{
	uint64_t ns = cour_now_ns() - t0;
	uint64_t mbps = bytes * 1000u / (ns ? ns : 1);
	uint32_t r = (uint32_t)COUR_MIN(COUR_MAX(mbps, (uint64_t)1), (uint64_t)UINT32_MAX / 8);

	/* (a moving average over about eight samples: one descheduled put does not decide) */
	ep->shm_copy_mbps = ep->shm_copy_mbps ? (ep->shm_copy_mbps * 7 + r) / 8 : r;
}

/* A sequenced packet: 0, or -FI_EAGAIN when the ring is full (nothing was sent). */
int cour_shm_send(struct cour_peer *peer, const struct cour_pkt_hdr *hdr, size_t hdr_len,
		  const struct iovec *iov, size_t iovcnt)
{
	struct cour_pep *ep = peer->ep;
	struct cour_pkt_hdr h;
	size_t bytes = 0;
	uint64_t t0;
	int ret;

	memcpy(&h, hdr, hdr_len);
	cour_hdr_finish_fields(peer, &h);
	for (size_t k = 0; k < iovcnt; k++)
		bytes += iov[k].iov_len;
	t0 = cour_shm_rate_start(ep, bytes);
	ret = cour_shm_put(peer, &h.base, hdr_len, iov, iovcnt);
	if (ret == 0) {
		if (t0)
			cour_shm_rate_note(ep, bytes, t0);
		ep->stats.tx_bytes += bytes;
	}
	return ret;
}

/*
 * A mailbox costs both sides memory for as long as the pair lasts (its 8 KiB in our file and
 * in the peer's resident memory, which polls it), and a ring file has COUR_BOX_COUNT of them.
 * Most pairs of a big job exchange a handful of messages (an all-to-all, a barrier), for
 * which the ring does as well; so a pair gets its box once its small messages through the ring
 * show it talks: after COUR_BOX_AFTER of them a box is claimed and named in a HELLO, and the
 * peer polls it from when it reads that. The HELLO is one datagram: asked again as any HELLO
 * is (cour_shm_hello_pending) until the peer polls the box; with every box taken, the ring.
 */
static void cour_shm_box_want(struct cour_pep *ep, struct cour_peer *peer)
{
	/* (a box claimed already: the timers ask again while it is not polled) */
	if (++peer->box_want < COUR_BOX_AFTER || !ep->shm_ring || ep->wire.trace ||
	    peer->box.gen || cour_shm_box_claim(ep->shm_ring, &peer->box))
		return;
	ep->box_peers[peer->box.idx] = peer;
	ep->box_head_seen[peer->box.idx] = UINT64_MAX;     /* (not looked at yet) */
	if (!ep->boxes_out++)
		ep->box_sweep_us = cour_ep_clock(ep) + cour_shm_box_idle_us();
	peer->hello_tries = 0;
	peer->hello_next_us = 0;
	cour_shm_hello_again(peer);
	cour_peer_activate(peer);
	cour_ep_timer_at(ep, peer->hello_next_us);
}

/*
 * The boxes of pairs gone quiet go back: a box is 8 KiB of our file, and two pages in the peer,
 * which polls it. Every FI_COURIER_WIN_IDLE ms we look at each box we write. One that nothing
 * went into since the last look gets a close entry; the peer, having taken every entry before
 * it, stops polling, and says so (polled); then the box is free again and its pages are
 * punched out of the file. A box the peer does not poll (it closed it, or never read our
 * HELLO) goes at once. A pair that talks again gets a box again as any pair does: after
 * COUR_BOX_AFTER small messages through the ring.
 */
void cour_shm_boxes_sweep(struct cour_pep *ep, uint64_t now)
{
	for (uint32_t i = 0; i < COUR_BOX_COUNT; i++) {
		struct cour_peer *peer = ep->box_peers[i];
		struct cour_box_tx *b;

		if (!peer)
			continue;
		b = &peer->box;
		if (!b->closing && b->head != ep->box_head_seen[i]) {
			ep->box_head_seen[i] = b->head;         /* used since the last look */
			continue;
		}
		if (cour_box_tx_unread(b)) {
			ep->stats.shm_box_freed++;
			cour_shm_box_release(ep, peer);
			continue;
		}
		/* (no room: the peer is behind on it; the next look tries again) */
		if (!b->closing)
			(void)cour_box_close_put(b, peer->ring_puts);
	}
	if (ep->boxes_out)
		ep->box_sweep_us = now + cour_shm_box_idle_us();
}

/* A SHORT through the peer's mailbox (wire/cour_shm_box.h): the same message in a 40-byte
 * header, with no address, session or sequence fields, as the box belongs to the pair. Its
 * stamp is the count of our ring puts before it: the peer takes it only after those
 * (cour_shm_poll), and takes it before any ring packet we put after it. false: no room, the
 * caller puts it into the ring. Tracing (FI_COURIER_TRACE) keeps every packet in the ring,
 * where the capture sees it. */
static bool cour_short_box(struct cour_pep *ep, struct cour_peer *peer, const struct iovec *iov,
			   size_t count, size_t len, uint64_t tag, uint64_t data, uint64_t flags,
			   uint64_t cq_flags)
{
	struct cour_box_ent e;

	e.len = (uint32_t)len;
	e.flags = (uint16_t)((cq_flags & FI_TAGGED ? COUR_F_TAGGED : 0) |
			     (flags & FI_REMOTE_CQ_DATA ? COUR_F_CQ_DATA : 0) |
			     (ep->tx_rx_ctx ? COUR_F_RXCTX : 0));
	e.rx_id = (uint16_t)ep->tx_rx_ctx;
	e.credits = peer->credits_granted;
	e.stamp = peer->ring_puts;
	e.tag = tag;
	e.data = data;
	if (cour_box_put(&peer->box, &e, iov, count))
		return false;
	peer->credits_sent = peer->credits_granted;
	ep->stats.shm_box++;
	ep->stats.shm_tx_pkts++;
	ep->stats.tx_pkts++;
	if (COUR_UNLIKELY(cour_shm_ring_wake(peer->shm)))
		cour_shm_doorbell(peer);
	return true;
}

/* May a message of len bytes go as SHORT to this peer now? Its credit cost, or 0. */
static inline uint32_t cour_short_cost(struct cour_peer *peer, size_t len, uint64_t flags)
{
	if (!cour_peer_ring_clear(peer, flags) ||
	    len + COUR_PKT_HDR_LEN > peer->mtu || len > cour_cma_eager_max(peer, 1, flags))
		return 0;
	return cour_credit_short(peer, len);
}

/* ...and through the peer's mailbox? */
static inline bool cour_short_boxable(struct cour_pep *ep, struct cour_peer *peer, size_t len)
{
	return peer->box.gen && len <= COUR_BOX_PAYLOAD_MAX && ep->tx_rx_ctx <= UINT16_MAX &&
	       !ep->wire.trace && cour_box_tx_live(&peer->box);
}

/* A SHORT is in: its credit spent, the send completed. */
static inline void cour_short_sent(struct cour_pep *ep, struct cour_peer *peer, uint32_t cost,
				   size_t len, uint64_t tag, void *context, uint64_t flags,
				   uint64_t cq_flags)
{
	peer->tx_credit_used += cost;
	peer->msg_sent = true;
	ep->stats.tx_bytes += len;
	ep->stats.shm_short++;
	cour_tx_done_now(ep, context, flags, cq_flags, len, tag);
	ep->stats.tx_msgs++;
}

/*
 * The short path (issue 31): a message of one packet to a peer whose ring we write goes in as
 * SHORT and completes here, with no descriptor, no window slot and no sequence number. The
 * engine would do the same work and more: in the ring means acknowledged, so an EAGER
 * message's txe lived only from the post to the put. The ring keeps the order of what is put
 * in it, so the message may skip the sequence only while nothing sequenced waits here to be
 * put ahead of it (queues empty, ring not refusing) and no eager message sent as RTS for lack
 * of credit waits for its CTS (it must complete first). The receiver matches it as EAGER
 * (cour_peer_rx.c), so credits, matching, unexpected messages and receive contexts are the
 * engine's own. Delivery-complete and fenced sends keep the engine's path.
 */
bool cour_short_send(struct cour_pep *ep, struct cour_peer *peer, const struct iovec *iov,
		     size_t count, size_t len, uint64_t tag, uint64_t data, void *context,
		     uint64_t flags, uint64_t cq_flags)
{
	struct cour_pkt_hdr h;
	uint32_t cost;

	assert(peer->via_shm);
	cost = cour_short_cost(peer, len, flags);
	if (!cost)
		return false;
	if (cour_short_boxable(ep, peer, len) &&
	    cour_short_box(ep, peer, iov, count, len, tag, data, flags, cq_flags))
		goto sent;
	memset(&h, 0, sizeof(h));
	h.base.type = COUR_PKT_SHORT;
	h.base.flags = (cq_flags & FI_TAGGED ? COUR_F_TAGGED : 0) |
		       (flags & FI_REMOTE_CQ_DATA ? COUR_F_CQ_DATA : 0);
	if (COUR_UNLIKELY(ep->tx_rx_ctx)) {
		h.base.flags |= COUR_F_RXCTX;
		h.msg.rx_id = ep->tx_rx_ctx;
	}
	h.msg.msg_id = peer->next_msg_id;
	h.msg.tag = tag;
	h.msg.data = data;
	h.msg.total_len = len;
	cour_hdr_finish_fields(peer, &h);
	/* (timed too: a ping-pong of one size may put nothing else, cour_cma.c) */
	uint64_t t0 = cour_shm_rate_start(ep, len);

	if (cour_shm_put(peer, &h.base, COUR_PKT_HDR_LEN, iov, count))
		return false;           /* full: the engine queues it and retries in order */
	if (t0)
		cour_shm_rate_note(ep, len, t0);
	peer->next_msg_id++;
	/* (live as cour_short_boxable just read it) */
	if (COUR_UNLIKELY(!peer->box.live) && len <= COUR_BOX_PAYLOAD_MAX)
		cour_shm_box_want(ep, peer);
sent:
	cour_short_sent(ep, peer, cost, len, tag, context, flags, cq_flags);
	return true;
}

/*
 * A send of one buffer that the peer's mailbox takes, straight from the API call: what
 * cour_msg_send and cour_short_send would do for it, without their generality (an iovec
 * array, the endpoint types, the ring, the engine). Open MPI's small sends come here. false,
 * having changed nothing but perhaps made the peer: the caller takes the whole path.
 */
bool cour_short_send1(struct cour_pep *ep, fi_addr_t dest, const void *buf, size_t len,
		      uint64_t tag, uint64_t data, void *context, uint64_t flags,
		      uint64_t cq_flags)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct cour_peer *peer;
	uint32_t cost;

	if (len > COUR_BOX_PAYLOAD_MAX || ep->type == FI_EP_DGRAM ||
	    ((flags & FI_INJECT) && len > cour_params.inject_size))
		return false;
	peer = cour_peer_get_locked(ep, dest);
	if (!peer || !peer->via_shm)
		return false;
	cost = cour_short_cost(peer, len, flags);
	if (!cost || !cour_short_boxable(ep, peer, len) ||
	    !cour_short_box(ep, peer, &iov, 1, len, tag, data, flags, cq_flags))
		return false;
	cour_short_sent(ep, peer, cost, len, tag, context, flags, cq_flags);
	return true;
}

/* An unsequenced packet (ACK, RESET) already finished: through the ring when the peer is
 * mapped, else (or when the ring is full) over the endpoint's wire. */
int cour_peer_send_now(struct cour_peer *peer, const void *hdr, size_t hdr_len,
		       const struct iovec *iov, size_t iovcnt)
{
	struct cour_pep *ep = peer->ep;

	if (peer->via_shm && hdr_len <= sizeof(struct cour_pkt_hdr)) {
		struct cour_pkt_hdr h;        /* (its crc is the UDP wire's, if the ring is full) */

		memcpy(&h, hdr, hdr_len);
		if (cour_shm_put(peer, &h.base, hdr_len, iov, iovcnt) == 0)
			return 0;
	}
	return cour_wire_send_now(ep, &peer->sa, peer->sa_len, hdr, hdr_len, iov, iovcnt);
}

/*
 * Taking a peer's mailbox entries in the order it sent them, among its ring packets. Each
 * entry carries the count of the peer's ring puts before it (stamp), and each ring packet its
 * own count (cour_shm_put), of which the last handled is ring_got:
 *  - an entry stamped after ring_got waits: a ring packet sent before it is still in the ring
 *    (published before the entry, so it is there to take);
 *  - before a ring packet is handled, the entries stamped before it are (the packet's own
 *    count says which, cour_shm_box_drain).
 * A ring packet dropped before its peer was found (a stale session) leaves ring_got behind:
 * the entry waits only until the ring is seen empty, which proves everything put before the
 * entry was taken (cour_shm_poll).
 */
static int cour_shm_box_take(struct cour_peer *peer, int max, bool until, uint32_t before)
{
	struct cour_pep *ep = peer->ep;
	struct cour_box_ent e;
	const void *payload;
	bool broken = false;
	int n = 0;

	while (n < max && peer->inbox.gen &&
	       (payload = cour_box_peek(&peer->inbox, &e, &broken)) != NULL) {
		if (until ? !cour_seq_lt(e.stamp, before) : cour_seq_gt(e.stamp, peer->ring_got)) {
			if (!until) {
				peer->box_blocked = true;
				peer->box_stamp = e.stamp;
				ep->box_blocked = true;
			}
			break;
		}
		cour_box_pop(&peer->inbox);
		if (COUR_UNLIKELY(e.flags & COUR_BOX_CLOSE)) {
			/* its last entry: every one before it was taken (cour_shm_boxes_sweep) */
			cour_shm_inbox_close(peer);
			break;
		}
		cour_peer_rx_box(peer, &e, payload);
		n++;
	}
	if (COUR_UNLIKELY(broken)) {
		char str[80];

		ep->stats.shm_box_broken++;
		COUR_WARN(FI_LOG_EP_DATA, "peer %s: its mailbox holds an entry that cannot be; "
			  "no longer read (its messages go through the ring when it sees that)\n",
			  cour_addr_str(&peer->addr, str, sizeof(str)));
		cour_shm_inbox_close(peer);
	} else if (peer->inbox.gen) {
		cour_box_release(&peer->inbox);
	}
	return n;
}

void cour_shm_box_drain(struct cour_peer *peer, uint32_t before)
{
	cour_shm_box_take(peer, INT32_MAX, true, before);
}

static int cour_shm_boxes_poll(struct cour_pep *ep)
{
	int n = 0;

	ep->box_blocked = false;
	/* (a handler may close an inbox, which moves the last one into its place: it waits
	 * for the next pass) */
	for (uint32_t i = 0; i < ep->ninboxes; i++) {
		struct cour_peer *peer = ep->inboxes[i];

		peer->box_blocked = false;
		if (cour_box_ready(&peer->inbox))
			n += cour_shm_box_take(peer, COUR_SHM_POLL_MAX, false, 0);
	}
	return n;
}

/* The ring is empty, so the entries that waited for ring packets wait for nothing. */
static int cour_shm_boxes_unblock(struct cour_pep *ep)
{
	for (uint32_t i = 0; i < ep->ninboxes; i++) {
		struct cour_peer *peer = ep->inboxes[i];

		if (peer->box_blocked && cour_seq_gt(peer->box_stamp, peer->ring_got))
			peer->ring_got = peer->box_stamp;
	}
	return cour_shm_boxes_poll(ep);
}

int cour_shm_poll(struct cour_pep *ep)
{
	struct sockaddr_storage sa;
	const void *pkt, *tag;
	uint32_t len, tag_len;
	int n = 0, boxed = 0;

	ep->rx_borrowed = true;
	if (ep->ninboxes)
		boxed = cour_shm_boxes_poll(ep);
	while (n < COUR_SHM_POLL_MAX &&
	       (pkt = cour_shm_ring_peek(ep->shm_ring, &len, &tag, &tag_len)) != NULL) {
		n++;
		if (COUR_UNLIKELY(ep->wire.trace))
			cour_trace_shm(&ep->wire, false, tag, tag_len, pkt, len, NULL, 0);
		ep->stats.rx_pkts++;
		ep->stats.shm_rx_pkts++;
		if (tag_len > sizeof(sa)) {
			COUR_DROP_BAD(ep, "shm packet with an oversized sender address");
		} else {
			memcpy(&sa, tag, tag_len);
			/* borrowed: the engine copies what it must keep (rx_borrowed) */
			cour_ep_rx_packet(ep, (void *)pkt, len, &sa, (socklen_t)tag_len);
		}
		cour_shm_ring_pop(ep->shm_ring);
	}
	if (COUR_UNLIKELY(ep->box_blocked) && cour_shm_ring_idle(ep->shm_ring))
		boxed += cour_shm_boxes_unblock(ep);
	ep->rx_borrowed = false;
	return n + boxed;
}

bool cour_shm_arm(struct cour_pep *ep)
{
	if (!ep->shm_ring)
		return true;
	if (!cour_shm_ring_arm(ep->shm_ring))
		return false;
	/* armed (seq_cst): a producer publishing in a box from now on sees it and rings */
	for (uint32_t i = 0; i < ep->ninboxes; i++)
		if (cour_box_pending(&ep->inboxes[i]->inbox)) {
			cour_shm_ring_disarm(ep->shm_ring);
			return false;
		}
	return true;
}

void cour_shm_disarm(struct cour_pep *ep)
{
	if (ep->shm_ring)
		cour_shm_ring_disarm(ep->shm_ring);
}
