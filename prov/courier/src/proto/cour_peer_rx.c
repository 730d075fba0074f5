/*
 * Incoming packets: the checks every one passes (version, type, length, checksum, session),
 * then the receive window (in-order delivery, early packets held, duplicates answered), and
 * what the endpoint's wire calls (cour_ep_wire_rx: every datagram, and the UDP wire's reading
 * in place). The sending side is cour_peer_tx.c.
 */
#include "proto/cour_engine.h"
#include "proto/cour_rel.h"

#include <stdlib.h>

/* the UDP wire tells a packed datagram from a packet by its first byte */
static_assert(COUR_WIRE_VERSION != COUR_WIRE_PACK_MARK, "a packet would look packed");

/* With a key, a packet the wire handed up passed its datagram's tag, which covers every byte:
 * its sender computed no crc (cour_hdr_finish), unless FI_COURIER_CHECKSUM asks for one. */
static inline bool cour_pkt_tagged(const struct cour_pep *ep, const struct cour_base_hdr *h)
{
	return ep->wire.mac && (h->flags & COUR_F_MAC) && !cour_params.checksum;
}

/* Checks that every byte the header claims is really there, and that it is intact. */
static bool cour_pkt_valid(struct cour_pep *ep, void *buf, size_t len)
{
	struct cour_base_hdr *h = buf;
	uint32_t crc, want;
	size_t hlen;

	/* no courier packet is longer than COUR_MAX_PKT: a longer datagram is not one, whatever
	 * its header says (the wire's buffers may hold more: a GRO train is read whole) */
	if (len < COUR_BASE_HDR_LEN || len > COUR_MAX_PKT || h->version != COUR_WIRE_VERSION ||
	    h->type == 0 || h->type >= COUR_PKT_TYPE_MAX || (h->flags & ~COUR_F_ALL))
		return false;
	hlen = (h->type == COUR_PKT_ACK || h->type == COUR_PKT_RESET ||
		h->type == COUR_PKT_HELLO) ? COUR_BASE_HDR_LEN : COUR_PKT_HDR_LEN;
	if (len < hlen)
		return false;
	/* an ACK's payload (a SACK bitmap) and a HELLO's are checksummed: a corrupt bit would
	 * mark a lost packet as received, or point us at the wrong memory */
	if (hlen == COUR_BASE_HDR_LEN && len > hlen &&
	    (!(h->flags & COUR_F_PCSUM) ||
	     (h->type == COUR_PKT_ACK && len - hlen > COUR_SACK_EXT_MAX) ||
	     (h->type == COUR_PKT_HELLO && len - hlen != sizeof(struct cour_shm_hello)) ||
	     h->type == COUR_PKT_RESET))
		return false;
	if (h->type == COUR_PKT_HELLO && len != hlen + sizeof(struct cour_shm_hello))
		return false;
	if (ep->rx_borrowed)
		return true;    /* from a same-host ring, where the crc field is the sender's put
				 * count (cour_shm_put): memory has no bit errors to catch */
	if (cour_params.checksum && hlen == COUR_PKT_HDR_LEN && !(h->flags & COUR_F_PCSUM))
		return false;
	if (ep->rx_placed)
		return true;    /* checked whole by cour_ep_rx_placed, payload in place */
	/* flag MAC: keyed, the wire checked the tag; unkeyed, cour_ep_rx_packet drops it right
	 * after as authenticated (drop_bad_mac), which its missing crc must not hide */
	if ((h->flags & COUR_F_MAC) && !cour_params.checksum)
		return true;
	want = h->crc;
	h->crc = 0;
	/* the sender chained header then payload; crc32c chains, so one pass over the datagram */
	crc = cour_crc32c(0, buf, (h->flags & COUR_F_PCSUM) ? len : hlen);
	h->crc = want;
	return crc == want;
}

/* An ACK at the end of this progress pass (the timers run right after the wire's batch) */
static void cour_peer_ack_at_pass_end(struct cour_peer *peer, uint64_t now)
{
	if (!peer->ack_needed || peer->ack_deadline > now) {
		peer->ack_needed = true;
		peer->ack_deadline = now;
		cour_ep_timer_at(peer->ep, now);
	}
}

/*
 * An in-order packet its handler rejects took a sequence number the genuine packet needed: the
 * session can no longer finish what is in flight (a message missing a fragment would wait for
 * ever, its sender answering every probe). Only a broken peer or a forged packet that carried
 * the live sessions gets here; end the session, so both sides fail their operations with an
 * error instead of hanging. false: the session is gone.
 */
static bool cour_peer_deliver(struct cour_peer *peer, const struct cour_pkt_hdr *hdr,
			      const char *payload, size_t plen)
{
	uint64_t bad = peer->ep->stats.drop_bad_hdr;
	char str[80];

	cour_msg_handle(peer, hdr, payload, plen);
	if (COUR_LIKELY(peer->ep->stats.drop_bad_hdr == bad))
		return true;
	COUR_WARN(FI_LOG_EP_DATA, "peer %s: packet %u (type %u) does not fit the session; "
		  "resetting it\n", cour_addr_str(&peer->addr, str, sizeof(str)), hdr->base.seq,
		  hdr->base.type);
	peer->ep->stats.peers_reset++;
	cour_peer_reset(peer, COUR_E_PROTOCOL);
	return false;
}

/* In-order delivery of seq, then of every held packet it unblocks. */
static void cour_peer_rx_inorder(struct cour_peer *peer, char *buf, size_t len)
{
	struct cour_pep *ep = peer->ep;

	/* rx_next moves first: whatever the handler sends (a CTS, a DONE) must already
	 * acknowledge the packet that caused it */
	peer->rx_next++;
	peer->rx_since_ack++;
	peer->rx_stamp_ns = ep->rx_borrowed ? 0 : ep->wire.rx_stamp_ns;
	if (!cour_peer_deliver(peer, (const struct cour_pkt_hdr *)buf, buf + COUR_PKT_HDR_LEN,
			       len - COUR_PKT_HDR_LEN))
		return;
	ep->rx_placed = false;      /* only that packet's payload was read into place */
	while (peer->rx_held && cour_rxslot_of(peer, peer->rx_next)->buf) {
		struct cour_rxslot *slot = cour_rxslot_of(peer, peer->rx_next);
		void *held = slot->buf;

		slot->buf = NULL;
		peer->rx_held--;
		peer->rx_next++;
		peer->rx_since_ack++;
		bool ok = cour_peer_deliver(peer, held, (char *)held + COUR_PKT_HDR_LEN,
					    slot->len - COUR_PKT_HDR_LEN);
		cour_pool_put(&ep->rxbuf_pool, held);
		if (!ok)
			return;
	}
}

/* A SHORT message (cour_short_send): an EAGER message of one packet outside the sequence. It
 * can keep its order only in a ring; over UDP it is a forgery or a broken sender. */
static void cour_peer_rx_short(struct cour_peer *peer, const struct cour_pkt_hdr *pkt,
			       size_t len)
{
	const char *payload = (const char *)(pkt + 1);
	size_t plen = len - COUR_PKT_HDR_LEN;
	struct cour_pkt_hdr hdr;

	if (COUR_UNLIKELY(!peer->ep->rx_borrowed || pkt->msg.offset ||
			  pkt->msg.total_len != plen || plen > COUR_EAGER_LIMIT)) {
		COUR_DROP_BAD(peer->ep, "SHORT message not from a ring, or not whole");
		return;
	}
	if (cour_msg_short_posted(peer, pkt, payload, plen))
		return;
	hdr = *pkt;
	hdr.base.type = COUR_PKT_EAGER;
	cour_peer_deliver(peer, &hdr, payload, plen);
}

/* A SHORT from the peer's mailbox (cour_short_box): the same message as a ring SHORT, in the
 * box's compact header. The box belongs to the pair, so there is no address, session or
 * sequence to check; the credits it carries are the peer's grant to us. */
void cour_peer_rx_box(struct cour_peer *peer, const struct cour_box_ent *e, const void *payload)
{
	struct cour_pep *ep = peer->ep;
	struct cour_pkt_hdr hdr;

	ep->stats.rx_pkts++;
	ep->stats.shm_rx_pkts++;
	ep->stats.shm_box_rx++;
	ep->stats.rx_bytes += sizeof(*e) + e->len;
	peer->last_heard_us = ep->now_us;
	if (cour_credit_granted(peer, e->credits))
		cour_peer_push(peer);           /* (nothing to do unless sends wait for them) */
	if (COUR_UNLIKELY(e->len > COUR_EAGER_LIMIT ||
			  (e->flags & ~(COUR_F_TAGGED | COUR_F_CQ_DATA | COUR_F_RXCTX)))) {
		COUR_DROP_BAD(ep, "mailbox entry too long or with flags it cannot have");
		return;
	}
	hdr.base.flags = e->flags;
	hdr.msg.tag = e->tag;
	hdr.msg.data = e->data;
	if (cour_msg_short_posted(peer, &hdr, payload, e->len))
		return;
	memset(&hdr, 0, sizeof(hdr));
	hdr.base.type = COUR_PKT_EAGER;
	hdr.base.flags = e->flags;
	hdr.base.src_session = peer->remote_session;
	hdr.base.dst_session = peer->local_session;
	hdr.msg.rx_id = e->rx_id;
	hdr.msg.tag = e->tag;
	hdr.msg.data = e->data;
	hdr.msg.total_len = e->len;
	cour_peer_deliver(peer, &hdr, payload, e->len);
}

/* Whether a payload piece of len bytes (header included) has more of its data after it. */
static inline bool cour_pkt_has_more(const struct cour_msg_hdr *m, size_t len)
{
	return len > COUR_PKT_HDR_LEN && m->offset + (len - COUR_PKT_HDR_LEN) < m->total_len;
}

/* An authenticated packet at an endpoint with no key (or, from a broken sender, the reverse):
 * its trailer would pass for payload. Two jobs, one keyed and one not, meet here. */
static void cour_ep_rx_keyless(struct cour_pep *ep, const struct sockaddr_storage *sa,
			       socklen_t sa_len)
{
	struct cour_addr from;
	char str[80] = "?";

	if (ep->stats.drop_bad_mac++ % 1024)
		return;
	if (cour_addr_from_sockaddr(&from, sa, sa_len) == 0)
		cour_addr_str(&from, str, sizeof(str));
	COUR_WARN(FI_LOG_EP_DATA, "packet from %s dropped: %s (%" PRIu64 " so far)\n", str,
		  ep->wire.mac ? "not authenticated, and this endpoint has a key" :
				 "authenticated, and this endpoint has no key", ep->stats.drop_bad_mac);
}

/* A packet that failed validation. One from a courier of another wire version (a node left
 * on an older release) would otherwise fail as silently as line noise until the peer timeout:
 * say so, the first and every 1024th time. */
static void cour_ep_rx_invalid(struct cour_pep *ep, const void *buf, size_t len,
			       const struct sockaddr_storage *sa, socklen_t sa_len)
{
	const struct cour_base_hdr *h = buf;
	struct cour_addr from;
	char str[80] = "?";

	COUR_DROP_BAD(ep, "failed validation (version, type, length or checksum)");
	if (len < COUR_BASE_HDR_LEN || h->version == COUR_WIRE_VERSION || !h->version ||
	    h->version > COUR_WIRE_VERSION + 8 || !h->type || h->type > COUR_PKT_TYPE_MAX + 8 ||
	    ep->rx_other_version++ % 1024)
		return;
	if (cour_addr_from_sockaddr(&from, sa, sa_len) == 0)
		cour_addr_str(&from, str, sizeof(str));
	COUR_WARN(FI_LOG_EP_DATA, "packet from %s dropped: courier wire protocol version %u, this "
		  "endpoint speaks version %u (courier releases of other wire versions do not talk: "
		  "install one release on every node; %" PRIu64 " such packets so far)\n", str,
		  h->version, COUR_WIRE_VERSION, ep->rx_other_version);
}

/*
 * With a key, a session starts only when it is proven fresh (docs/protocol.md, Sessions). A
 * packet whose src_session we do not know (the peer's first, its restart, its RESET) is taken
 * only if it names, as dst_session, a session of ours chosen after everything the attacker
 * could have recorded: our session while we have none with the peer (chosen when our state
 * for it began), else the one we offered since (session_offer). One that names no session
 * of ours, or our current one, is answered with a challenge, a RESET from that session to the
 * sender's, and dropped: an honest sender learns it and sends again naming it; a recorded
 * packet cannot, whatever its age. One that names another session of ours is stale (the
 * caller's rule): a challenge sent to a session that is not the receiver's, as one answering
 * a replay is, must draw no answer, or the live peer would prove our offer for it. So a
 * replayed first packet, or one of an earlier incarnation of the peer, never ends a live
 * session, and a genuine restart does after one round trip.
 * Returns true when the packet goes on through the caller's rules, false when it was dropped.
 */
#define COUR_CHALLENGE_GAP_US 1000    /* challenges to one peer at most this often */
static bool cour_peer_session_fresh(struct cour_pep *ep, struct cour_peer *peer,
				    const struct cour_base_hdr *h, bool answer, uint64_t now)
{
	uint32_t offer = peer->remote_session ? peer->session_offer : peer->local_session;
	char str[80];

	if (offer && h->dst_session == offer) {
		if (peer->remote_session) {
			COUR_INFO(FI_LOG_EP_DATA, "peer %s restarted (session %08x -> %08x, "
				  "proven fresh)\n", cour_addr_str(&peer->addr, str, sizeof(str)),
				  peer->remote_session, h->src_session);
			ep->stats.peers_reset++;
			cour_peer_reset(peer, COUR_E_PEER_RESET);
			peer->local_session = offer;
		}
		peer->remote_session = h->src_session;
		ep->stats.session_proofs++;
		if (h->type == COUR_PKT_RESET) {
			/* our challenge, or theirs answered: our next packet is its proof (or it
			 * waits for one), and what it dropped unread goes again now */
			cour_peer_send_ack(peer, 0);
			cour_peer_resend_window(peer, now);
			if (cour_shm_hello_pending(peer))
				peer->hello_next_us = 0;
		}
		return true;
	}
	if (h->dst_session && h->dst_session != peer->local_session)
		return true;                    /* stale: the caller drops it */
	ep->stats.drop_unproven++;
	if (!answer || (peer->challenge_us && now - peer->challenge_us < COUR_CHALLENGE_GAP_US))
		return false;
	if (peer->remote_session && !peer->session_offer)
		peer->session_offer = cour_session_new();
	peer->challenge_us = now;
	ep->stats.session_challenges++;
	cour_send_reset_from(ep, peer, peer->remote_session ? peer->session_offer :
			     peer->local_session, h->src_session);
	return false;
}

/* Whether a packet of len bytes is part of big data streaming in over the wire, in big
 * datagrams or GRO trains of them: the next poll reads such packets in place (RDATA, WRITE
 * and READ_RESP from here; an eager message's once its sender is known, cour_peer_rx_packet) */
static bool cour_ep_rx_big(struct cour_pep *ep, uint8_t type, size_t len)
{
	bool big = (ep->wire.rx_borrowed ? ep->wire.rx_train_len : len) >=
		   COUR_PKT_HDR_LEN + COUR_WIRE_DIRECT_MIN && !ep->rx_borrowed;

	if (big && (type == COUR_PKT_RDATA || type == COUR_PKT_WRITE ||
		    type == COUR_PKT_READ_RESP)) {
		ep->wire.rx_direct = true;
		ep->wire.rx_direct_more = true;
	}
	return big;
}

static void *cour_peer_rx_packet(struct cour_peer *peer, void *buf, size_t len, bool probe,
				 bool big);

void *cour_ep_rx_packet(struct cour_pep *ep, void *buf, size_t len,
			const struct sockaddr_storage *sa, socklen_t sa_len)
{
	struct cour_pkt_hdr *hdr = buf;
	struct cour_base_hdr *h = &hdr->base;
	struct cour_peer *peer;
	struct cour_addr from;
	bool probe, msg, big;

	if (COUR_UNLIKELY(len >= COUR_BASE_HDR_LEN && h->type == COUR_PKT_CM)) {
		if (cour_addr_from_sockaddr(&from, sa, sa_len) == 0) {
			from.is_v4 = ep->wire.addr.is_v4;
			cour_ep_rx_cm(ep, buf, len, &from);
		}
		return buf;
	}
	if (!cour_pkt_valid(ep, buf, len) ||
	    cour_addr_from_sockaddr(&from, sa, sa_len) != 0) {
		cour_ep_rx_invalid(ep, buf, len, sa, sa_len);
		return buf;
	}
	/* over UDP, the wire checked and removed a trailer exactly when it has a key: a
	 * packet that says otherwise still has its trailer, or never had one */
	if (COUR_UNLIKELY(!ep->rx_borrowed && !(h->flags & COUR_F_MAC) != !ep->wire.mac)) {
		cour_ep_rx_keyless(ep, sa, sa_len);
		return buf;
	}
	from.is_v4 = ep->wire.addr.is_v4;
	ep->stats.rx_bytes += len;
	big = cour_ep_rx_big(ep, h->type, len);
	if (h->type == COUR_PKT_DGRAM || ep->type == FI_EP_DGRAM) {
		if (h->type == COUR_PKT_DGRAM && ep->type == FI_EP_DGRAM)
			cour_msg_handle_dgram(ep, hdr, (char *)buf + COUR_PKT_HDR_LEN,
					      len - COUR_PKT_HDR_LEN, &from);
		else
			COUR_DROP_BAD(ep, "datagram packet on a reliable endpoint or the reverse");
		return buf;
	}

	/* a probe from a sender we forgot (we restarted) must learn that, so it gets a peer and,
	 * below, a RESET */
	probe = h->type == COUR_PKT_ACK && (h->flags & COUR_F_PROBE);
	if (!h->src_session) {          /* every sender has a session: make no peer for it */
		ep->stats.drop_stale_session++;
		return buf;
	}
	msg = cour_pkt_sequenced(h->type) || h->type == COUR_PKT_SHORT;
	peer = cour_peer_by_addr_locked(ep, &from, msg || probe || h->type == COUR_PKT_HELLO);
	if (!peer) {
		ep->stats.drop_stale_session++;
		return buf;
	}
	/* (with a key, what passes names our session: proven, or stale just below) */
	if (COUR_UNLIKELY(ep->wire.mac && !ep->rx_borrowed &&
			  h->src_session != peer->remote_session) &&
	    !cour_peer_session_fresh(ep, peer, h, msg || probe || h->type == COUR_PKT_HELLO ||
				     h->type == COUR_PKT_RESET, cour_ep_clock(ep)))
		return buf;
	if (h->dst_session && h->dst_session != peer->local_session) {
		/* meant for an earlier session of ours: tell the sender, unless it is itself
		 * only a plain ACK or a RESET (never answer those: two sides must not ping-pong) */
		ep->stats.drop_stale_session++;
		if (msg || probe)
			cour_send_reset(ep, peer, h->src_session);
		return buf;
	}
	if (h->src_session != peer->remote_session) {
		if (peer->remote_session) {
			char str[80];
			COUR_INFO(FI_LOG_EP_DATA, "peer %s restarted (session %08x -> %08x)\n",
				  cour_addr_str(&peer->addr, str, sizeof(str)),
				  peer->remote_session, h->src_session);
			ep->stats.peers_reset++;
			/* A sender that names our current session knows it: keep it. A new session
			 * of ours would look like our restart to it, and the two sides would reset
			 * each other for ever (a stale packet of an old session can start that). */
			uint32_t keep = h->dst_session == peer->local_session ? h->dst_session : 0;
			cour_peer_reset(peer, COUR_E_PEER_RESET);
			if (keep)
				peer->local_session = keep;
		} else if (h->type == COUR_PKT_RESET && h->dst_session != peer->local_session) {
			return buf;
		}
		peer->remote_session = h->src_session;
	}
	return cour_peer_rx_packet(peer, buf, len, probe, big);
}

/* A packet from peer that passed every check of cour_ep_rx_packet (or of the train path,
 * cour_ep_rx_placed_run): the ACK it carries, then its own meaning. probe: an ACK that asks
 * for one back; big: part of big data streaming in (the next poll may read it in place).
 * Returns the buffer the wire reads into next (buf, unless a packet held for later kept it). */
static void *cour_peer_rx_packet(struct cour_peer *peer, void *buf, size_t len, bool probe,
				 bool big)
{
	struct cour_pep *ep = peer->ep;
	struct cour_pkt_hdr *hdr = buf;
	struct cour_base_hdr *h = &hdr->base;
	uint32_t w = (uint32_t)cour_params.window;
	uint64_t now;

	if (ep->rx_borrowed) {
		/* from the ring, where the crc field is the peer's count of its ordered puts to
		 * us (cour_shm_put): what it sent through its mailbox before an ordered packet
		 * goes first */
		if (peer->inbox.gen && cour_pkt_ordered(h->type))
			cour_shm_box_drain(peer, h->crc);
		peer->ring_got = h->crc;
	}
	now = cour_ep_clock(ep);
	peer->last_heard_us = ep->heard_us = now;
	if (h->type == COUR_PKT_ACK) {
		ep->stats.acks_rcvd++;
		if (COUR_UNLIKELY(h->flags & COUR_F_WANT))
			cour_credit_want(peer, 0);  /* a stalled sender: more units, if we can */
		if (probe)
			cour_peer_send_ack(peer, 0);
	}
	if (h->type == COUR_PKT_ACK && len > COUR_BASE_HDR_LEN)
		cour_peer_ack(peer, h, now, (const uint8_t *)buf + COUR_BASE_HDR_LEN,
			      len - COUR_BASE_HDR_LEN);
	else
		cour_peer_ack(peer, h, now, NULL, 0);
	/* An eager message goes into place only from a peer we have nothing in flight to (its
	 * ACKs, just above, counted). In a halo (both send at once) a few trains wait at a
	 * time, and one batch call and a copy from cache beat a peek and a scattered read
	 * each; a stream's receiver, which only acknowledges, gains from reading in place. */
	if (big && h->type == COUR_PKT_EAGER && hdr->msg.total_len >= COUR_WIRE_DIRECT_MIN &&
	    !cour_peer_sending(peer)) {
		ep->wire.rx_direct = true;
		ep->wire.rx_direct_more = cour_pkt_has_more(&hdr->msg, len);
	}
	if (COUR_UNLIKELY(h->type == COUR_PKT_HELLO))
		cour_shm_hello_handle(peer, (const struct cour_shm_hello *)
				      ((const char *)buf + COUR_BASE_HDR_LEN));
	if (h->type == COUR_PKT_SHORT) {
		cour_peer_rx_short(peer, hdr, len);
		return buf;
	}
	if (!cour_pkt_sequenced(h->type))
		return buf;

	cour_peer_activate(peer);
	if (h->seq == peer->rx_next) {
		cour_peer_rx_inorder(peer, buf, len);
		if (ep->rx_borrowed && !peer->rx_held) {
			/* from the ring: the sender counted it acknowledged when it put it there */
			peer->rx_since_ack = 0;
			return buf;
		}
		/* over UDP from a peer whose ring we mapped: it moves to the ring once all it
		 * sent is acknowledged, so do not make it wait (this ends with the move). Inside
		 * a GRO train the count-based ACK waits for the end of this progress pass: one
		 * ACK for the train at most, as TCP acknowledges one GRO segment */
		bool train = ep->wire.rx_borrowed;
		/* Inside a train, a piece with more of its message behind it: the rest is on its
		 * way, so the ACK waits for a quarter of the window or the ACK delay (a stream at
		 * MTU 1500 drew one per progress pass, ~1.5 trains, and each cost the receiver
		 * 3-5 us, 16% of its time). A message's last piece is acknowledged at the end of
		 * the pass: its sender may be waiting for the completion. Not when nothing waits
		 * (NOWAIT: an MPI_Send that libfabric's inject took, whose answer comes next): an
		 * ACK of its own was a datagram each way on the path, 4.5 us of a 16 KiB
		 * ping-pong's 18.5 between two namespaces at MTU 1500, and the answer carries it. */
		bool has_more = cour_pkt_has_more(&hdr->msg, len);
		bool data = h->type == COUR_PKT_EAGER || h->type == COUR_PKT_RDATA;
		bool last = data && !has_more;
		bool first = data && !hdr->msg.offset;
		bool nowait = last && (h->flags & COUR_F_NOWAIT);
		/* A message's last piece while packets of ours to the peer are in flight: the two
		 * crossed (a halo exchange: both send, then both wait for their sends), so no
		 * answer of ours comes to carry the ACK, and each side waited the ACK delay
		 * (mpi_bench halo 8 B across veth: 21.5 us against ob1+tcp's 13.2). A
		 * ping-pong's ping finds its answer's predecessor acknowledged: it still waits. */
		bool crossed = last && !nowait && cour_peer_sending(peer);
		/* The last piece of a waited message of several whose sender has a receive posted
		 * for our answer (READY), from a peer whose messages we answer at once (a
		 * ping-pong, a request and its reply): acknowledged as an inject's is (NOWAIT),
		 * so the answer carries the ACK. An ACK of its own put a datagram on the
		 * receiver's path between the message and the answer (5-7 us of a 32 KiB
		 * ping-pong's 17-27 between two namespaces at MTU 1500), while the sender only
		 * waited. If the ACK goes alone meanwhile (the ACK delay ran out, the count of a
		 * stream came, the sender asked), the peer's last pieces are acknowledged at the
		 * pass end again until an answer comes back within the delay (cour_peer_answered).
		 * Not for one-packet messages, whose stream needs the count for its window. */
		bool for_answer = last && hdr->msg.offset && (h->flags & COUR_F_READY) &&
				  !nowait && !crossed && !peer->rx_held && !peer->shm &&
				  !(h->flags & COUR_F_DC);
		bool defer = for_answer && peer->answers;
		bool waits = nowait || defer;       /* a last piece whose ACK may wait */
		bool more = (train && has_more) || waits;
		uint32_t every = more ? COUR_MAX((uint32_t)COUR_ACK_EVERY,
						 COUR_MIN((uint32_t)COUR_ACK_TRAIN, w / 4)) :
					COUR_ACK_EVERY;
		/* A deferred last piece may end a message of many trains, whose tail after its
		 * last count ACK is up to two counts (the rule below holds the count back near a
		 * message's end). When nothing of an earlier message is unacknowledged (a
		 * ping-pong's, not a stream's) that tail waits for the answer too, up to three
		 * quarters of the window: with one count, every message of 64 pieces or more
		 * (88 KiB at MTU 1500) drew an ACK of its own again (4.5 us of a 256 KiB
		 * ping-pong's tail); a stream, whose deferral then ended later, lost bandwidth. */
		if (first)
			peer->rx_msg_seq = h->seq;
		if (defer && cour_seq_ge(peer->rx_next - peer->rx_since_ack, peer->rx_msg_seq))
			every = COUR_MIN(2 * every + 1, w / 4 * 3);
		/* ...but not when less than that is left of the message: its last piece draws
		 * the ACK soon anyway, and one datagram more on the receiver then lands right
		 * when the last train does (a 256 KiB ping-pong at MTU 1500: 4 us of its tail) */
		bool due = peer->rx_held ||
			   (peer->rx_since_ack >= every &&
			    (!more || waits || hdr->msg.total_len - hdr->msg.offset -
			     (len - COUR_PKT_HDR_LEN) > (uint64_t)every * (len - COUR_PKT_HDR_LEN)));

		if (for_answer)
			peer->ans_wait_us = (uint32_t)now | 1;
		if (peer->shm || (!train && due)) {
			cour_peer_send_ack_via(peer, 0, !ep->rx_borrowed);
		} else if ((train && due) || crossed) {
			/* (while holes are held, too: one SACK for the train, not one a packet) */
			cour_peer_ack_at_pass_end(peer, now);
		} else if (peer->rx_since_ack) {
			/* (an answer the handler sent already carried the ACK) The delay runs from
			 * the first packet the ACK covers, but for a last piece that waits for
			 * the answer from that piece: the answer has the whole delay. From the
			 * first, it ran out in the last train of any message that took longer (a
			 * 256 KiB ping-pong at MTU 1500 in the machine's slower state, 100 us a
			 * hop: an ACK alone, 5.5 us of the tail, and the deferral off). */
			if (!peer->ack_needed || defer) {
				peer->ack_needed = true;
				peer->ack_deadline = now + (uint64_t)cour_params.ack_delay_us;
				cour_ep_timer_at(ep, peer->ack_deadline);
			}
			peer->ack_for_answer |= defer;
		}
		return buf;
	}
	if (cour_seq_lt(h->seq, peer->rx_next)) {
		ep->stats.dup_rcvd++;
		cour_peer_send_ack_via(peer, COUR_F_DUP, !ep->rx_borrowed);  /* it missed our ACK */
		return buf;
	}
	if (h->seq - peer->rx_next >= w) {
		ep->stats.drop_window++;
		return buf;
	}
	if (!cour_peer_rxwin_fit(peer, h->seq)) {
		ep->stats.drop_no_buf++;
		return buf;
	}
	struct cour_rxslot *slot = cour_rxslot_of(peer, h->seq);
	if (slot->buf) {
		ep->stats.dup_rcvd++;
		return buf;
	}
	void *fresh = cour_pool_get(&ep->rxbuf_pool);
	if (!fresh) {
		ep->stats.drop_no_buf++;
		return buf;
	}
	if (ep->rx_borrowed || ep->wire.rx_borrowed) {
		/* the ring's cell (or the wire's GRO buffer) is reused once we return: keep a
		 * copy */
		memcpy(fresh, buf, len);
		slot->buf = fresh;
		fresh = buf;
	} else {
		slot->buf = buf;
	}
	slot->len = (uint32_t)len;
	peer->rx_held++;
	ep->stats.ooo_rcvd++;
	/* SACK tells the sender about the hole now: at the end of this pass inside a GRO train
	 * (a lost burst leaves the whole next train out of order: one ACK for it, not one for
	 * each of its packets, each making the sender scan its window) */
	if (ep->wire.rx_borrowed)
		cour_peer_ack_at_pass_end(peer, now);
	else
		cour_peer_send_ack(peer, 0);
	return fresh;
}

/* Where plen bytes of payload of the in-order piece h (EAGER, RDATA, WRITE or READ_RESP)
 * belong, in one contiguous place, or NULL. */
static void *cour_ep_piece_dest(struct cour_peer *peer, const struct cour_pkt_hdr *h,
				size_t plen)
{
	switch (h->base.type) {
	case COUR_PKT_EAGER:
		return cour_msg_eager_dest(peer, h, plen);
	case COUR_PKT_RDATA:
		return cour_msg_rdata_dest(peer, h, plen);
	case COUR_PKT_WRITE:
		return cour_rma_write_dest(peer, h, plen);
	default:
		return cour_rma_read_dest(peer, h, plen);
	}
}

/* Whether a header the wire read (not yet handled) is one whose payload may land in place
 * before the handler runs, first bytes long with it: only what the handler would accept as is,
 * since a pending READ_RESP may need the old bytes (cour_rma_order_guard). A payload under a
 * checksum or a key's tag is checked after it landed (cour_ep_rx_placed; the wire's check of
 * the trailer drops it if bad), so only into a receive or a read that nobody reads before it
 * completes, never into RMA memory. */
static bool cour_direct_hdr_ok(const struct cour_pep *ep, const void *peeked, size_t first)
{
	struct cour_pkt_hdr h;
	uint32_t want;

	memcpy(&h, peeked, sizeof(h));
	want = h.base.crc;
	if (first <= COUR_PKT_HDR_LEN || first > COUR_MAX_PKT ||
	    h.base.version != COUR_WIRE_VERSION || (h.base.flags & ~COUR_F_ALL) ||
	    (h.base.type != COUR_PKT_RDATA && h.base.type != COUR_PKT_READ_RESP &&
	     h.base.type != COUR_PKT_EAGER &&
	     (h.base.type != COUR_PKT_WRITE || (h.base.flags & (COUR_F_PCSUM | COUR_F_MAC)))) ||
	    (h.base.type == COUR_PKT_READ_RESP && (h.base.flags & COUR_F_CMA)))
		return false;
	h.base.crc = 0;
	/* (keyed: the wire checks the tag once the datagram is read, before placed runs) */
	return (h.base.flags & COUR_F_PCSUM) || cour_pkt_tagged(ep, &h.base) ||
	       cour_crc32c(0, &h, COUR_PKT_HDR_LEN) == want;
}

/* ...and the next piece of peer's sequence, in its current sessions. */
static bool cour_direct_peer_ok(const struct cour_peer *peer, const struct cour_pkt_hdr *h)
{
	return !peer->ctrlq && h->base.seq == peer->rx_next && h->base.src_session &&
	       h->base.src_session == peer->remote_session &&
	       h->base.dst_session == peer->local_session;
}

/* Where the payload of the datagram whose header the wire peeked belongs: an in-order EAGER,
 * RDATA, WRITE or READ_RESP piece with a contiguous destination, or NULL. For a GRO train
 * (run), also how many of its datagrams fit end to end from there, were they the next pieces
 * of the same data: the wire checks that each is (cour_ep_rx_in_run) once they are read. */
static void *cour_ep_rx_direct(void *arg, const void *peeked, size_t len, size_t seg,
			       size_t *run, const struct sockaddr_storage *sa, socklen_t sa_len)
{
	struct cour_pep *ep = arg;
	struct cour_pkt_hdr h;
	struct cour_peer *peer;
	struct cour_addr from;
	size_t first = run ? seg : len, plen = first - COUR_PKT_HDR_LEN;
	void *dst;

	if (!cour_direct_hdr_ok(ep, peeked, first) ||
	    cour_addr_from_sockaddr(&from, sa, sa_len) != 0)
		return NULL;
	memcpy(&h, peeked, sizeof(h));
	from.is_v4 = ep->wire.addr.is_v4;
	peer = cour_peer_by_addr_locked(ep, &from, false);
	if (!peer || !cour_direct_peer_ok(peer, &h))
		return NULL;
	dst = cour_ep_piece_dest(peer, &h, plen);
	if (!dst || !run)
		return dst;
	/* the longest prefix of the train whose payloads fit end to end from dst (a prefix
	 * fits if a longer one does: binary search) */
	size_t nseg = (len + seg - 1) / seg, lo = 1, hi = nseg;
	size_t last = len - (nseg - 1) * seg;

	if (last <= COUR_PKT_HDR_LEN)
		hi = nseg - 1;      /* a last datagram with no payload is no piece */
	while (lo < hi) {
		size_t k = (lo + hi + 1) / 2;
		size_t ext = k < nseg ? k * plen : (nseg - 1) * plen + last - COUR_PKT_HDR_LEN;

		if (cour_ep_piece_dest(peer, &h, ext) == dst)
			lo = k;
		else
			hi = k - 1;
	}
	*run = lo;
	return dst;
}

/* Whether hdr, i datagrams into a train after first, is the piece of the same data with the
 * payload plen * i bytes further (what cour_ep_rx_direct assumed). */
static bool cour_ep_rx_in_run(const void *first, const void *hdr, size_t i, size_t plen)
{
	struct cour_pkt_hdr a, b;

	memcpy(&a, first, sizeof(a));
	memcpy(&b, hdr, sizeof(b));
	return b.base.version == a.base.version && b.base.type == a.base.type &&
	       b.base.src_session == a.base.src_session &&
	       b.base.dst_session == a.base.dst_session && b.base.seq == a.base.seq + (uint32_t)i &&
	       b.msg.msg_id == a.msg.msg_id && b.msg.rx_id == a.msg.rx_id &&
	       b.msg.tag == a.msg.tag && b.msg.raddr == a.msg.raddr &&
	       b.msg.total_len == a.msg.total_len && b.msg.offset == a.msg.offset + i * plen;
}

/* The checksum of a datagram read as header + payload in place (cour_pkt_valid's, split).
 * checked: cour_ep_rx_direct just verified this very header, and only the header is summed. */
static bool cour_ep_placed_ok(struct cour_pkt_hdr *hdr, const void *payload, size_t len,
			      bool checked)
{
	uint32_t want = hdr->base.crc, crc;

	if (checked && !(hdr->base.flags & COUR_F_PCSUM))
		return true;

	hdr->base.crc = 0;
	crc = cour_crc32c(0, hdr, sizeof(*hdr));
	if (hdr->base.flags & COUR_F_PCSUM)
		crc = cour_crc32c(crc, payload, len - sizeof(*hdr));
	hdr->base.crc = want;
	return crc == want;
}

/* cour_ep_rx_packet for a datagram whose payload the wire read where cour_ep_rx_direct said */
static void cour_ep_rx_placed(void *arg, void *hdr, const void *payload, size_t len,
			      bool checked, const struct sockaddr_storage *sa, socklen_t sa_len)
{
	struct cour_pep *ep = arg;
	void *ret;

	if (!cour_pkt_tagged(ep, hdr) && !cour_ep_placed_ok(hdr, payload, len, checked)) {
		/* the bytes that landed belong to a receive still in progress: the resent
		 * packet overwrites them before anyone may read them */
		COUR_DROP_BAD(ep, "payload read in place failed its checksum");
		return;
	}
	ep->stats.rx_in_place++;
	ep->rx_placed = true;
	/* (a train's pieces share the wire's clock reading, cour_ep_clock) */
	ret = cour_ep_rx_packet(ep, hdr, len, sa, sa_len);
	ep->rx_placed = false;
	/* it was in order with nothing held, so it was handled at once, never kept */
	assert(ret == hdr);
	(void)ret;
}

/*
 * The first n datagrams of a GRO train read as header + payload in place (piece i's header
 * hdrs[i], its payload at dst + i * plen, plen bytes but the last's, last bytes), each the
 * piece after the one before (the wire checked, cour_ep_rx_in_run), handled in order without
 * asking per piece what cour_ep_rx_direct and cour_ep_rx_packet ask of any datagram: the
 * sender is looked up once, and each piece checked only for what handling the ones before
 * could change (its peer's sequence and sessions, where its payload belongs now) and for
 * what it carries of its own (its header's crc, its flags). A train's pieces are most of
 * the packets a receiver handles at MTU 1500: per piece, the two lookups and checks cost
 * about as many instructions as the handling. Returns how many were handled: the wire
 * takes piece k (if k < n) the usual way, and the rest after it.
 */
static size_t cour_ep_rx_placed_run(void *arg, uint8_t (*hdrs)[COUR_WIRE_HDR_MAX], size_t n,
				    char *dst, size_t plen, size_t last,
				    const struct sockaddr_storage *sa, socklen_t sa_len)
{
	struct cour_pep *ep = arg;
	struct cour_peer *peer;
	struct cour_addr from;

	if (cour_addr_from_sockaddr(&from, sa, sa_len) != 0)
		return 0;
	from.is_v4 = ep->wire.addr.is_v4;
	peer = cour_peer_by_addr_locked(ep, &from, false);
	if (!peer)
		return 0;
	for (size_t i = 0; i < n; i++) {
		struct cour_pkt_hdr *h = (struct cour_pkt_hdr *)hdrs[i];
		size_t pl = i + 1 < n ? plen : last, len = COUR_PKT_HDR_LEN + pl;
		char *at = dst + i * plen;

		/* (one with a trailer at an endpoint with no key, or without the payload's crc
		 * that FI_COURIER_CHECKSUM asks for, goes the usual way: dropped) */
		if (!cour_direct_hdr_ok(ep, h, len) || (h->base.flags & COUR_F_MAC) ||
		    (cour_params.checksum && !(h->base.flags & COUR_F_PCSUM)) ||
		    !cour_direct_peer_ok(peer, h) || cour_ep_piece_dest(peer, h, pl) != at)
			return i;
		if (!cour_ep_placed_ok(h, at, len, true)) {
			COUR_DROP_BAD(ep, "payload read in place failed its checksum");
			continue;
		}
		ep->stats.rx_in_place++;
		ep->stats.rx_bytes += len;
		ep->rx_placed = true;
		cour_peer_rx_packet(peer, h, len, false, cour_ep_rx_big(ep, h->base.type, len));
		ep->rx_placed = false;
	}
	return n;
}

static void *cour_ep_wire_packet(void *arg, void *buf, size_t len,
				 const struct sockaddr_storage *sa, socklen_t sa_len)
{
	return cour_ep_rx_packet(arg, buf, len, sa, sa_len);
}

static void cour_ep_wire_refused(void *arg, const struct sockaddr_storage *sa, socklen_t sa_len)
{
	cour_peer_refused(arg, sa, sa_len);
}

static bool cour_pkt_is_hello(const void *pkt, size_t len)
{
	return len >= COUR_BASE_HDR_LEN && ((const struct cour_base_hdr *)pkt)->type == COUR_PKT_HELLO;
}

const struct cour_wire_rx_ops cour_ep_wire_rx = {
	.packet = cour_ep_wire_packet,
	.direct = cour_ep_rx_direct,
	.in_run = cour_ep_rx_in_run,
	.placed = cour_ep_rx_placed,
	.placed_run = cour_ep_rx_placed_run,
	.refused = cour_ep_wire_refused,
	.is_handshake = cour_pkt_is_hello,
	.hdr_len = COUR_PKT_HDR_LEN,
	/* the doorbell takes probes (ACK|PROBE: a peer waits for our ACK, cour_peer_nudge);
	 * flags are little-endian, PROBE in their first byte */
	.bell_at = { offsetof(struct cour_base_hdr, type), offsetof(struct cour_base_hdr, flags) },
	.bell_is = { COUR_PKT_ACK, COUR_F_PROBE },
};
_Static_assert(COUR_F_PROBE < 0x100, "the doorbell's filter reads the flags' first byte");
