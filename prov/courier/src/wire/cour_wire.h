/*
 * The wire interface: what the protocol engine needs from a datagram transport, one ops table
 * per kind of wire, chosen when the endpoint opens (FI_COURIER_WIRE), never tested in the data
 * path. A wire moves opaque datagrams between socket addresses; it knows nothing of
 * endpoints, peers, sequence numbers or completions, and includes only util/ and this header.
 *
 * The engine owns a struct cour_wire (embedded in its endpoint) and calls through w->ops:
 *
 *   open      bind the name (want may have port 0): set w->fd (readable when datagrams wait:
 *             the progress thread sleeps on it), w->addr and w->bound_sa/bound_len;
 *   close     undo open; datagrams still queued are lost, as on any wire;
 *   queue     add one datagram to the send batch: the header (finished by the engine,
 *             checksum included) is copied; the payload iov must stay valid until the next
 *             flush. A full batch is flushed first. pack > 0: the wire may carry it with
 *             the small datagrams queued next to it for the same address in one packed
 *             datagram of at most pack bytes (below), and, too big for that, may pad a
 *             short datagram before it so that a GSO run goes on into it (Padded
 *             datagrams); 0: alone, and nothing before it padded;
 *   flush     hand the batch over; datagrams the wire refuses are lost as far as the engine
 *             is concerned (its retransmit timer recovers them) and w->tx_blocked is set;
 *   poll      read up to COUR_WIRE_RX_BATCH datagrams and hand each to w->rx->packet;
 *             returns the count read;
 *   send_now  one datagram now (ACK, RESET, HELLO, datagram endpoint): 0 or -FI_EAGAIN;
 *   send_raw  one datagram already in a single buffer, sent as it is: with a key, its sender
 *             signed it already (cour_mac_sign_buf; CM, the fault decorator, test harnesses);
 *   peer_mtu  largest datagram (header included) worth sending to that address; 0 when this
 *             wire cannot send there at all (the engine then fails the peer's operations with
 *             FI_EHOSTUNREACH instead of retrying into the peer timeout).
 *
 * Upward, a wire calls only the receive ops the engine gave it (w->rx, w->rx_arg): each
 * received datagram, the question of where a big datagram's payload belongs (so the UDP wire
 * can read it in place), and the evidence that nothing listens at an address. Every wire is
 * unreliable and unordered as far as the engine knows.
 *
 * Fault injection (wire/cour_fault.c) is a decorator: it takes w->ops, keeps the wire itself in
 * w->base, and drops, duplicates, reorders or corrupts what the engine sends before the base
 * wire's send_raw puts it out.
 *
 * Packed datagrams (UDP wire). Small datagrams queued one after another for one address leave
 * as one: a rate of small messages costs the kernel, and a key's MAC, a datagram each, where
 * the engine's share per packet is a few hundred instructions. The receiving wire unpacks and
 * hands each packet up on its own, borrowed (as a GRO train's). Layout, trailer excluded:
 *
 *   0: COUR_WIRE_PACK_MARK (no packet of the engine starts with it: its version byte is
 *      small), 1: 0 or COUR_WIRE_PACK_PADDED, 2-3: count n (little-endian), 4-7: 0;
 *   8: the n packets, each padded with zeros to a multiple of 8 (so every one is aligned);
 *   with PADDED, zeros up to the table;
 *   the last 2n bytes: the n packets' lengths, unpadded, little-endian.
 *
 * A packed datagram that breaks this layout is dropped whole (rx_bad).
 *
 * Padded datagrams. A GSO run is datagrams of one size but its last, and a stream's message
 * ends with a short one: a run cut at every message's end sends each message in a GSO call
 * of its own (and the receiver reads a train of its own). Where a datagram of the run's size
 * for the same address follows that may join it (queue's pack), the short one leaves as a
 * PADDED pack of one, of the run's size, and the run goes on (cour_udp_tx.c, cour_udp_pad);
 * only for datagrams small enough that COUR_WIRE_PAD_RUN of them fit a run, as at MTU 1500.
 *
 * The same-host path is not a wire of this table: the ring (wire/cour_shm_ring.h) is reliable
 * and ordered and refuses a packet when full, and the engine drives it per peer
 * (proto/cour_shm_peer.c).
 */
#ifndef COUR_WIRE_H
#define COUR_WIRE_H

#include "util/cour_util.h"
#include "util/cour_addr.h"
#include "util/cour_pool.h"
#include "wire/cour_mac.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#define COUR_WIRE_TX_BATCH  64    /* datagrams per flush (GSO runs of up to 64 KB at MTU 1500) */
#define COUR_WIRE_RX_BATCH  16    /* datagrams per recvmmsg */
#define COUR_WIRE_IOV_MAX   8     /* payload iovecs per datagram (the header is one more) */
#define COUR_WIRE_HDR_MAX   96    /* bytes of header a queued datagram may have */
#define COUR_WIRE_DGRAM_MAX 65000 /* largest datagram sent, header included (under UDP's 65507) */
/* payload bytes that make a datagram worth reading in place (two system calls, no copy) */
#define COUR_WIRE_DIRECT_MIN 8192
/* receive buffers a wire needs: a UDP GRO train is up to 64 KB */
#define COUR_WIRE_RXBUF_MIN 65536
/* bytes of one UDP GSO call: the burst a TCP sender's TSO hands a NIC */
#define COUR_WIRE_GSO_BYTES 65000
/* packed datagrams (above): the first byte, the layout's fixed header, the largest datagram
 * that joins a pack, the most packets and bytes in one, and the bytes one flush may pack */
#define COUR_WIRE_PACK_MARK  0xc5
#define COUR_WIRE_PACK_HDR   8
#define COUR_WIRE_PACK_PKT   1024
#define COUR_WIRE_PACK_CNT   64
#define COUR_WIRE_PACK_BYTES 16384
#define COUR_WIRE_PACK_ARENA 65536
/* byte 1 of a padded pack, and the fewest datagrams of a size a run must hold to be padded */
#define COUR_WIRE_PACK_PADDED 1
#define COUR_WIRE_PAD_RUN    16

struct cour_wire;
struct cour_trace;

/* What a wire hands upward; every call is made from inside poll (or, for refused, a send). */
struct cour_wire_rx_ops {
	/* One datagram, len bytes in buf, from sa. Returns the buffer to read the next one into:
	 * buf again, or a fresh one when the engine kept buf (NULL: none could be had). */
	void *(*packet)(void *arg, void *buf, size_t len, const struct sockaddr_storage *sa,
			socklen_t sa_len);
	/* A datagram of len bytes from sa whose first hdr_len bytes are hdr (peeked): where its
	 * payload (len - hdr_len bytes) belongs, or NULL to read it whole as usual. With run
	 * non-NULL, len bytes are a GRO train of datagrams of seg bytes (the last may be
	 * shorter) and hdr the first one's header: the answer is where the first payload
	 * belongs, and *run how many of the train's datagrams (1 or more) the engine expects to
	 * carry the next pieces of the same data, their payloads end to end from there. */
	void *(*direct)(void *arg, const void *hdr, size_t len, size_t seg, size_t *run,
			const struct sockaddr_storage *sa, socklen_t sa_len);
	/* Whether hdr, read i datagrams after first in a train whose payloads are plen bytes,
	 * is the piece direct expected there: if not, its payload landed in another piece's
	 * place, and the wire copies it out before the engine handles anything. */
	bool  (*in_run)(const void *first, const void *hdr, size_t i, size_t plen);
	/* That datagram, len bytes read as hdr (hdr_len bytes, writable) + its payload in place
	 * (where direct said); the engine checks it. checked: hdr holds the very bytes direct
	 * was just asked about and accepted (a train's piece), so what direct verified of the
	 * header holds; false when the read may have brought other bytes than the peek. */
	void  (*placed)(void *arg, void *hdr, const void *payload, size_t len, bool checked,
			const struct sockaddr_storage *sa, socklen_t sa_len);
	/* Optional, and only with no key: the first n datagrams of a train read in place, each
	 * the piece in_run said (hdrs[i], its payload at dst + i * plen, plen bytes but the
	 * last's, last bytes), handled as placed would one by one; the engine looks up their
	 * sender once. Returns how many it handled: piece k < n it did not take goes the way
	 * placed refuses a piece (copied out, handled as a datagram), then the rest. */
	size_t (*placed_run)(void *arg, uint8_t (*hdrs)[COUR_WIRE_HDR_MAX], size_t n, char *dst,
			     size_t plen, size_t last, const struct sockaddr_storage *sa,
			     socklen_t sa_len);
	/* Nothing listens at sa (ICMP port unreachable): evidence the engine may weigh. */
	void  (*refused)(void *arg, const struct sockaddr_storage *sa, socklen_t sa_len);
	/* The fault decorator's "hello=N": is this datagram the engine's handshake? */
	bool  (*is_handshake)(const void *pkt, size_t len);
	size_t hdr_len;               /* the header direct and placed speak of */
	/* What a doorbell socket takes (cour_wire.bell_fd): datagrams whose byte at bell_at[0]
	 * is bell_is[0] and whose byte at bell_at[1] has a bit of bell_is[1] set */
	uint16_t bell_at[2];
	uint8_t  bell_is[2];
};

/* Counted by the wire; the endpoint adds them to its statistics. */
struct cour_wire_stats {
	uint64_t tx_pkts, tx_bytes;   /* payload bytes, headers not counted */
	uint64_t rx_pkts, rx_in_place;
	uint64_t rx_bad;              /* larger than any packet, or otherwise unreadable */
	uint64_t gso_sends, gso_segs; /* UDP GSO calls, and the datagrams they carried */
	uint64_t gro_trains, gro_segs; /* coalesced UDP GRO buffers, and their datagrams */
	uint64_t sock_drops;          /* dropped by the kernel: receive buffer full (SO_RXQ_OVFL) */
	uint64_t packs, packed;       /* packed datagrams sent, and the packets they carried */
	uint64_t packs_rcvd;          /* packed datagrams received whole */
	uint64_t pads;                /* short datagrams padded to continue a GSO run */
	uint64_t bell_rcvd;           /* datagrams the doorbell socket took (cour_udp.c) */
};

struct cour_wire_ops {
	const char *name;
	int      (*open)(struct cour_wire *w, const struct cour_addr *want);
	void     (*close)(struct cour_wire *w);
	void     (*queue)(struct cour_wire *w, const void *sa, socklen_t sa_len,
			  const void *hdr, size_t hdr_len, const struct iovec *iov, size_t iovcnt,
			  uint32_t pack);
	int      (*flush)(struct cour_wire *w);
	int      (*poll)(struct cour_wire *w);
	int      (*send_now)(struct cour_wire *w, const void *sa,
			     socklen_t sa_len, const void *hdr, size_t hdr_len,
			     const struct iovec *iov, size_t iovcnt);
	void     (*send_raw)(struct cour_wire *w, const void *sa, socklen_t sa_len,
			     const char *buf, size_t len);
	uint32_t (*peer_mtu)(struct cour_wire *w, const struct cour_addr *addr);
	/* read the doorbell socket (bell_fd) and hand its datagrams up as poll does; NULL:
	 * the wire has none */
	int      (*bell)(struct cour_wire *w);
};

struct cour_wire {
	const struct cour_wire_ops *ops;      /* what the engine calls: the wire's, or a decorator's */
	const struct cour_wire_ops *base;     /* the wire itself */
	void                *priv;            /* the base wire's own state, if any */
	void                *deco;            /* the decorator's state, if any */
	struct cour_trace   *trace;           /* packet capture (wire/cour_trace.h), or NULL */
	int                  fd;              /* readable when datagrams wait; -1: closed */
	/* set before open: an epoll set the progress thread sleeps on (0 or less: none); a UDP
	 * wire then opens a doorbell socket on its port (bell_fd, -1: none) for the probes a
	 * peer sends when our ACK is late, which cour_wire_bell_arm adds to the set */
	int                  bell_epfd;
	int                  bell_fd;
	struct cour_addr     addr;            /* bound address: fi_getname */
	struct sockaddr_storage bound_sa;
	socklen_t            bound_len;
	bool                 tx_blocked;      /* the socket refused datagrams: the engine retries */
	/* the engine's hint, set while it handles a batch: big data datagrams stream in, so the
	 * next poll peeks each header and asks rx->direct where its payload goes */
	bool                 rx_direct;
	/* ...and the message goes on past the datagrams just read (a lone train that a batch
	 * read takes in one call is read in place only when it continues a message) */
	bool                 rx_direct_more;
	/* set by the wire while the buffer handed to rx->packet is not the engine's to keep
	 * (a segment of a GRO train): the engine copies what it holds */
	bool                 rx_borrowed;
	size_t               rx_train_len;    /* ...and the whole train's length then */
	/* ...and when it was read (cour_now_us, 0: no train): its pieces, 44 at MTU 1500, share
	 * this clock reading (a reading each was 7% of a receiver's time, cour_bw -S 32k) */
	uint64_t             rx_train_us;
	/* when the kernel took the datagram being handed up (CLOCK_REALTIME, ns; 0: unknown):
	 * congestion control subtracts the time it then waited for a process to read it */
	uint64_t             rx_stamp_ns;
	/* ...which the kernel gives once stamps_on: they cost a ping-pong 0.2 us a round trip,
	 * so they come on only when they serve: the engine asks (stamps_want) when a
	 * congestion window first holds a send back, the UDP wire when a read brings a batch */
	bool                 stamps_want, stamps_on;
	bool                 gso_on, gro_on;  /* UDP GSO sends, UDP GRO receives in use */
	/* set before open: bind with SO_REUSEPORT beside a listening socket and connect to
	 * this address, so only its datagrams reach us (an accepted FI_EP_MSG endpoint) */
	const struct cour_addr *connect_to;
	const struct cour_wire_rx_ops *rx;
	void                *rx_arg;
	struct cour_pool    *rxbuf_pool;      /* the engine's packet buffers (rxbuf_size bytes) */
	size_t               rxbuf_size;
	struct cour_wire_stats stats;
	/* with a key (cour_wire_auth): every datagram sent gets a trailer, every one received
	 * is checked and loses it before the engine sees it (cour_mac.h) */
	struct cour_mac     *mac;

	/* receive batch: buffers owned by the batch until the engine keeps one; the first
	 * rx_stale headers to set again before the next call (0: all) */
	uint32_t             rx_stale;
	/* the last read found the socket empty: the next reads one datagram (cour_udp_poll) */
	bool                 rx_single;
	void                *rx_bufs[COUR_WIRE_RX_BATCH];
	struct mmsghdr       rx_msgs[COUR_WIRE_RX_BATCH];
	struct iovec         rx_iov[COUR_WIRE_RX_BATCH];
	struct sockaddr_storage rx_sa[COUR_WIRE_RX_BATCH];
	/* transmit batch: header copies (the engine's are rewritten per send) and iovecs */
	struct mmsghdr       tx_msgs[COUR_WIRE_TX_BATCH];
	struct iovec         tx_iov[COUR_WIRE_TX_BATCH][COUR_WIRE_IOV_MAX + 2];
	_Alignas(8) uint8_t  tx_hdrs[COUR_WIRE_TX_BATCH][COUR_WIRE_HDR_MAX];
	struct cour_mac_trailer tx_trl[COUR_WIRE_TX_BATCH];   /* with a key */
	uint32_t             tx_len[COUR_WIRE_TX_BATCH];  /* datagram bytes, header included */
	uint32_t             tx_pack[COUR_WIRE_TX_BATCH]; /* the queue's pack bound; 0: alone */
	bool                 tx_join[COUR_WIRE_TX_BATCH]; /* may follow a padded datagram */
	uint32_t             tx_count;
	/* packing: the open pack (the queue's last entry, still growing; UINT32_MAX: none), its
	 * packets' lengths, and where packs are built (COUR_WIRE_PACK_ARENA bytes, allocated at
	 * the first pack, reused once the queue is empty) */
	uint32_t             pack_open, pack_n;
	uint16_t             pack_lens[COUR_WIRE_PACK_CNT];
	char                *pack_arena;
	uint32_t             pack_used;
	/* what a flush hands the kernel: single datagrams, and GSO runs (wire/cour_udp_tx.c) */
	struct mmsghdr       out_msgs[COUR_WIRE_TX_BATCH];
	uint32_t             out_first[COUR_WIRE_TX_BATCH], out_segs[COUR_WIRE_TX_BATCH];
	struct iovec         out_iov[COUR_WIRE_TX_BATCH * (COUR_WIRE_IOV_MAX + 2)];
	union { char buf[CMSG_SPACE(sizeof(uint16_t))]; struct cmsghdr align; }
			     out_ctl[COUR_WIRE_TX_BATCH];
	/* control data of the receive batch: the GRO segment size, the socket's drop count, the
	 * arrival time */
	union { char buf[CMSG_SPACE(sizeof(int)) + CMSG_SPACE(sizeof(uint32_t)) +
			 CMSG_SPACE(sizeof(struct timespec))];
		struct cmsghdr align; } rx_ctl[COUR_WIRE_RX_BATCH];
};

extern const struct cour_wire_ops cour_udp_wire;
extern const struct cour_wire_ops cour_loop_wire;

/* The wire FI_COURIER_WIRE names, or NULL (logged) if it names none. */
const struct cour_wire_ops *cour_wire_lookup(const char *name);

/* A closed wire of that kind, receiving into the engine through rx. Then ops->open. */
void cour_wire_init(struct cour_wire *w, const struct cour_wire_ops *ops,
		    const struct cour_wire_rx_ops *rx, void *rx_arg, struct cour_pool *rxbuf_pool,
		    size_t rxbuf_size);

/* Join the doorbell to bell_epfd, if the wire opened one: once the engine reads it (an
 * enabled endpoint), or its datagrams would wake the thread for nobody to take. A doorbell
 * the set cannot watch is closed (-FI_EOTHER): probes then reach the data socket (cour_udp.c) */
int  cour_wire_bell_arm(struct cour_wire *w);

/* ---- wire/cour_wire.c: shared by the wires ---- */
/* The receive batch's buffers, from the engine's pool. */
int  cour_wire_rxbufs_init(struct cour_wire *w);
void cour_wire_rxbufs_fini(struct cour_wire *w);
/* One datagram to sa: the header, then the payload iovecs. */
struct cour_wire_msg {
	struct msghdr        m;
	struct iovec         v[COUR_WIRE_IOV_MAX + 2];
	struct cour_mac_trailer t;
};
void cour_wire_msghdr(struct cour_wire_msg *w, const void *sa, socklen_t sa_len, const void *hdr,
		      size_t hdr_len, const struct iovec *iov, size_t iovcnt);
/* A datagram's bytes padded to the 8-byte alignment of packets in a pack. */
static inline uint32_t cour_wire_pad8(size_t n)
{
	return (uint32_t)((n + 7) & ~(size_t)7);
}
/* A packed datagram (first byte COUR_WIRE_PACK_MARK) of len bytes in buf, its trailer checked
 * and gone: each packet handed up borrowed once the whole layout checks out, or none (the
 * datagram dropped, rx_bad). buf stays the wire's. */
void cour_wire_unpack(struct cour_wire *w, char *buf, size_t len,
		      const struct sockaddr_storage *sa, socklen_t sa_len);
/* A received datagram of len bytes (trailer checked and gone) up to the engine: unpacked if
 * packed, else rx->packet. Returns the buffer to read the next one into (as rx->packet). */
static inline void *cour_wire_up(struct cour_wire *w, void *buf, size_t len,
				 const struct sockaddr_storage *sa, socklen_t sa_len)
{
	if (COUR_UNLIKELY(len && *(const uint8_t *)buf == COUR_WIRE_PACK_MARK)) {
		cour_wire_unpack(w, buf, len, sa, sa_len);
		return buf;
	}
	return w->rx->packet(w->rx_arg, buf, len, sa, sa_len);
}
/* A datagram the wire could not read (too big): counted, said at debug level. */
void cour_wire_drop(struct cour_wire *w, const char *why);
/* The ends a key's tag covers (cour_mac.h): from src to dst. */
static inline void cour_mac_ends_of(struct cour_mac_ends *e, const struct cour_addr *src,
				    const struct cour_addr *dst)
{
	memcpy(e->src, src->ip, 16);
	memcpy(e->src + 16, &src->port, 2);
	memcpy(e->dst, dst->ip, 16);
	memcpy(e->dst + 16, &dst->port, 2);
}
/* The ends of a datagram between self and the socket address sa: sent to it (out), or
 * received from it. An address that is no sockaddr_in/in6 counts as all zeros. */
void cour_mac_ends_sa(struct cour_mac_ends *e, const struct cour_addr *self, const void *sa,
		      socklen_t sa_len, bool out);
/* With a key, sign the datagram v[0..n) to sa into t and append t as v[n] (v has room for
 * it): returns the datagram's iovec count, n or n + 1. Inline: without a key, one branch per
 * datagram sent. */
static inline size_t cour_wire_sign(struct cour_wire *w, const void *sa, socklen_t sa_len,
				    struct iovec *v, size_t n, struct cour_mac_trailer *t)
{
	struct cour_mac_ends e;

	if (!w->mac)
		return n;
	cour_mac_ends_sa(&e, &w->addr, sa, sa_len, true);
	cour_mac_sign(w->mac, &e, v, n, t);
	v[n].iov_base = t;
	v[n].iov_len = COUR_MAC_LEN;
	return n + 1;
}
/* Sign, in place, a datagram of len bytes to sa whose buffer has COUR_MAC_LEN bytes of room
 * after it (cour_mac_sign_buf between this wire's name and sa). */
void cour_wire_sign_buf(struct cour_wire *w, const void *sa, socklen_t sa_len, void *buf,
			size_t len);
/* From now on, authenticate with key (before open, or before the first peer's MTU is asked:
 * the trailer takes room). 0, or -FI_EINVAL/-FI_ENOMEM (logged). */
int  cour_wire_auth(struct cour_wire *w, const void *key, size_t len, uint32_t skew_s);
void cour_wire_auth_fini(struct cour_wire *w);
/* Check a received datagram of *len bytes in buf from sa to self with m: true (and *len
 * without the trailer) to take it; false when refused (counted, logged with sa). Also the
 * passive endpoint's, which has no wire. */
bool cour_mac_accept(struct cour_mac *m, const struct cour_addr *self, const void *buf,
		     size_t *len, const struct sockaddr_storage *sa, socklen_t sa_len);
/* Check a received datagram of *len bytes in buf with the wire's key, if it has one: true
 * (and *len without the trailer) to hand it up; false when refused (counted, logged). */
bool cour_wire_rx_auth(struct cour_wire *w, const void *buf, size_t *len,
		       const struct sockaddr_storage *sa, socklen_t sa_len);
/* The same for a datagram read in pieces (header, payload in place, trailer t); the wire has
 * a key. */
bool cour_wire_rx_auth_split(struct cour_wire *w, const void *hdr, size_t hdr_len,
			     const void *payload, size_t plen, const struct cour_mac_trailer *t,
			     const struct sockaddr_storage *sa, socklen_t sa_len);

/* ---- wire/cour_fault.c: the fault-injecting decorator (FI_COURIER_FAULT) ---- */
/* Wrap w (opened or not) in an injector for spec; 0, or -FI_EINVAL (logged) for a bad spec. */
int  cour_fault_wrap(struct cour_wire *w, const char *spec);
void cour_fault_unwrap(struct cour_wire *w);
/* Does it touch packets at all (more than lost HELLOs)? false when not wrapped. */
bool cour_fault_on_packets(const struct cour_wire *w);
struct cour_fault_counts {
	uint64_t drops, dups, corrupts, reorders;
};
void cour_fault_counts(const struct cour_wire *w, struct cour_fault_counts *c);

#endif
