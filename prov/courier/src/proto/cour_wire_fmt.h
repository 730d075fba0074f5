/*
 * courier wire format, version 4 (4: the UDP wire packs small packets, wire/cour_wire.h).
 * docs/protocol.md describes it for humans; this header is the truth. All fields are
 * little-endian; courier builds only on little-endian hosts (checked below), so encoding is a
 * plain store.
 *
 * Every packet starts with the base header (32 bytes):
 *
 *   0       1       2               4                               8
 *   +-------+-------+---------------+-------------------------------+
 *   |version| type  |    flags      |   crc32c (header [+payload])  |
 *   +-------+-------+---------------+-------------------------------+
 *   |        src_session            |        dst_session            |  8
 *   +-------------------------------+-------------------------------+
 *   |        seq                    |        ack                    | 16
 *   +-------------------------------+-------------------------------+
 *   |        sack                   |        credits                | 24
 *   +-------------------------------+-------------------------------+
 *
 *   src_session  the sender's random nonce for this pair of endpoints (never 0)
 *   dst_session  the receiver's nonce as the sender knows it, 0 while unknown
 *   seq          sequence number of a sequenced packet (types EAGER..ATOMIC); 0 otherwise
 *   ack          cumulative: every sequenced packet below it has been received and processed
 *   sack         bit i set: packet ack + 1 + i has been received too
 *   credits      cumulative credit limit, in credit units (COUR_CREDIT_UNIT, 256 bytes): the
 *                sender of this header may be sent messages until the units they cost
 *                (cour_credit_cost) add up to this value. Before any header arrives a
 *                peer may send FI_COURIER_CREDITS units (the same on every process)
 *
 * Every other packet adds the operation header (48 bytes):
 *
 *   +-------------------------------+-------------------------------+
 *   |        msg_id                 |        rx_id                  | 32
 *   +-------------------------------+-------------------------------+
 *   |        tag                                                    | 40
 *   +---------------------------------------------------------------+
 *   |        data (remote CQ data)                                  | 48
 *   +---------------------------------------------------------------+
 *   |        total_len                                              | 56
 *   +---------------------------------------------------------------+
 *   |        offset                                                 | 64
 *   +---------------------------------------------------------------+
 *   |        raddr                                                  | 72
 *   +---------------------------------------------------------------+ 80, then payload
 *
 *   EAGER     a message or one fragment of it: payload is bytes [offset, offset + len)
 *   RTS       rendezvous request: a message of total_len bytes waits at the sender (msg_id)
 *   CTS       rendezvous clear: receiver's rx_id; total_len = bytes it accepts
 *   RDATA     rendezvous payload for rx_id at offset
 *   DONE      delivery notice for msg_id (sent when FI_DELIVERY_COMPLETE was asked)
 *   WRITE     RMA write msg_id of total_len bytes to key tag at raddr; this packet carries
 *             bytes [offset, offset + len); data is remote CQ data if CQ_DATA is set
 *   READ_REQ  RMA read msg_id: send back total_len bytes of key tag at raddr
 *   READ_RESP read data for msg_id: bytes [offset, offset + len) of total_len
 *   ATOMIC    atomic msg_id on key tag at raddr: rx_id = op | datatype << 8 | kind << 16
 *             (kind: 0 plain, 1 fetch, 2 compare); payload: operands, then compare values
 *   RMA_RESP  the target finished msg_id (WRITE, READ_REQ refused, ATOMIC): rx_id = 0 or the
 *             courier prov_errno of the check that failed; payload: an atomic's fetched values
 *   DGRAM     an unreliable datagram message (FI_EP_DGRAM)
 *   HELLO     base header + struct cour_shm_hello (always checksummed): the sender's host
 *             identity and how to map its shared-memory receive ring (proto/cour_shm_peer.c)
 *   CM        base header + struct cour_cm_hdr + data_len bytes of the application's CM
 *             data (always checksummed): connection management of FI_EP_MSG endpoints
 *             (cour_cm.c); sessions 0, never sequenced
 *   SHORT     an EAGER message of one packet (offset 0, payload total_len bytes) outside the
 *             sequence: seq 0, the sender completed it when it put it. Only in a ring, only
 *             while nothing sequenced waits at the sender, so that the ring's order is the
 *             order of sending (proto/cour_shm_peer.c, cour_short_send)
 *
 * RMA packets need no credits (they consume no receive buffer) and ride the control queue,
 * behind earlier control packets and ahead of credit-stalled messages.
 */
#ifndef COUR_WIRE_FMT_H
#define COUR_WIRE_FMT_H

#include <stddef.h>
#include <stdint.h>

#include "util/cour_crc32c.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "courier's wire format is little-endian and has no byte swapping yet"
#endif

#define COUR_WIRE_VERSION 5

enum cour_pkt_type {
	COUR_PKT_ACK = 1,   /* unsequenced: ack, sack, credits only */
	COUR_PKT_RESET,     /* unsequenced: "your view of my session is stale" */
	COUR_PKT_EAGER,     /* first sequenced type */
	COUR_PKT_RTS,
	COUR_PKT_CTS,
	COUR_PKT_RDATA,
	COUR_PKT_DONE,
	COUR_PKT_WRITE,
	COUR_PKT_READ_REQ,
	COUR_PKT_READ_RESP,
	COUR_PKT_RMA_RESP,
	COUR_PKT_ATOMIC,    /* last sequenced type */
	COUR_PKT_DGRAM,
	COUR_PKT_HELLO,     /* unsequenced: "I am on your host: here is my shared-memory ring" */
	COUR_PKT_CM,        /* unsequenced: connection management of FI_EP_MSG endpoints */
	COUR_PKT_SHORT,     /* unsequenced, rings only: a whole small message (see below) */
	COUR_PKT_TYPE_MAX
};

static inline int cour_pkt_sequenced(unsigned type)
{
	return type >= COUR_PKT_EAGER && type <= COUR_PKT_ATOMIC;
}

/* Does a packet's place among a sender's messages matter? (a same-host ring orders it against
 * the sender's mailbox entries, proto/cour_shm_peer.c) */
static inline uint32_t cour_pkt_ordered(unsigned type)
{
	return cour_pkt_sequenced(type) || type == COUR_PKT_SHORT;
}

/* Messages take a receive buffer at the target, so they need a credit; nothing else does. */
static inline int cour_pkt_needs_credit(unsigned type)
{
	return type == COUR_PKT_EAGER || type == COUR_PKT_RTS;
}

/*
 * Credits are counted in units of what a receiver may have to buffer, so that what a sender
 * is granted bounds bytes, not messages: an eager message of len bytes costs 1 + len / unit
 * (the 1 pays for its record), an RTS costs 1 (its data lands only in a posted buffer).
 */
#define COUR_CREDIT_UNIT     256u       /* small enough that 64 small messages cost 16 KiB */
#define COUR_CREDIT_WIN_MAX  262144u    /* no grant ever runs further ahead of use (64 MiB) */
static inline uint32_t cour_credit_cost(unsigned type, uint64_t total_len)
{
	return type == COUR_PKT_RTS ? 1u : 1u + (uint32_t)(total_len / COUR_CREDIT_UNIT);
}

/* Packets that change memory at the receiver: reads it still serves must not see them. */
static inline int cour_pkt_writes_memory(unsigned type)
{
	return type == COUR_PKT_EAGER || type == COUR_PKT_RDATA || type == COUR_PKT_WRITE ||
	       type == COUR_PKT_ATOMIC;
}

enum {
	COUR_F_TAGGED  = 1 << 0,   /* tagged message: match on tag */
	COUR_F_CQ_DATA = 1 << 1,   /* data carries remote CQ data */
	COUR_F_DC      = 1 << 2,   /* sender wants a DONE once the message is placed */
	COUR_F_PCSUM   = 1 << 3,   /* crc covers the payload too */
	COUR_F_PROBE   = 1 << 4,   /* ACK that asks for an ACK back at once (liveness probe) */
	COUR_F_CMA     = 1 << 5,   /* single copy (proto/cour_cma.c): on RTS, WRITE, READ_REQ
				    * offset is the sender's buffer address; on CTS: "pulled"
				    * (offset 0) or "write [offset, total_len) at raddr
				    * yourself" (split copy); on RDATA: "written" */
	COUR_F_PUSHED  = 1 << 6,   /* on WRITE|CMA: the initiator already wrote total_len bytes
				    * at raddr under key tag through the target's window
				    * (proto/cour_rma_push.c): raise the events, answer nothing */
	COUR_F_WANT    = 1 << 7,   /* on RTS and ACK: the sender ran short of credit units for
				    * what it has to send (an RTS it would have sent eager):
				    * grant more if you can (proto/cour_credit.c) */
	COUR_F_RXCTX   = 1 << 8,   /* on EAGER and RTS: rx_id names the receive context of a
				    * scalable endpoint (fi_rx_addr); without it, context 0 */
	COUR_F_PART    = 1 << 9,   /* on WRITE, READ_REQ and their PUSHED notices: one part of
				    * an operation with several remote iovecs, not its last: it
				    * raises no target events (the last raises them once) */
	COUR_F_MAC     = 1 << 10,  /* the datagram ends with an authentication trailer
				    * (wire/cour_mac.h), which the receiving wire checks and
				    * removes; never on a ring, where it means nothing */
	COUR_F_DUP     = 1 << 11,  /* on ACK: sent because a packet delivered already arrived
				    * again: a resend was needless (the sender's timeout
				    * was spurious, proto/cour_cc.h) */
	COUR_F_HELD    = 1 << 12,  /* on any packet but ACK: the ACK it carries is late, its
				    * sender held the newest packet it acknowledges longer than
				    * FI_COURIER_CC_TARGET (its own sending came first, or it
				    * lost its cpu): the receiver times its retransmit timer by
				    * it, not its congestion window (proto/cour_cc.h). Version 5 */
	COUR_F_NOWAIT  = 1 << 13,  /* on EAGER: nothing at its sender waits for this message's
				    * ACK (an inject that reports no completion and moves no
				    * counter): its last piece is acknowledged as a piece with
				    * more behind it, with the ACK delay or on our next packet,
				    * not at once (proto/cour_peer_rx.c). Version 5 */
	COUR_F_READY   = 1 << 14,  /* on EAGER, RTS and RDATA: a receive of its sender's is
				    * posted that the receiver's answer could match, so its
				    * ACK may ride on the answer without making the answer
				    * unexpected (docs/protocol.md, Reliability) */
	COUR_F_ALL     = (1 << 15) - 1
};

struct cour_base_hdr {
	uint8_t  version;
	uint8_t  type;
	uint16_t flags;
	uint32_t crc;
	uint32_t src_session;
	uint32_t dst_session;
	uint32_t seq;
	uint32_t ack;
	uint32_t sack;
	uint32_t credits;
};

struct cour_msg_hdr {
	uint32_t msg_id;
	uint32_t rx_id;
	uint64_t tag;
	uint64_t data;
	uint64_t total_len;
	uint64_t offset;
	uint64_t raddr;
};

struct cour_pkt_hdr {
	struct cour_base_hdr base;
	struct cour_msg_hdr  msg;
};

_Static_assert(sizeof(struct cour_base_hdr) == 32, "base header is 32 bytes on the wire");
_Static_assert(sizeof(struct cour_msg_hdr) == 48, "operation header is 48 bytes on the wire");
_Static_assert(sizeof(struct cour_pkt_hdr) == 80, "full header is 80 bytes on the wire");
_Static_assert(offsetof(struct cour_pkt_hdr, msg.offset) == 64, "offset field at byte 64");

#define COUR_BASE_HDR_LEN sizeof(struct cour_base_hdr)
#define COUR_PKT_HDR_LEN  sizeof(struct cour_pkt_hdr)
#define COUR_SACK_BITS    32
/* An ACK may carry the receiver's whole window as a SACK bitmap payload (bit i of byte i / 8:
 * packet ack + 1 + i is held), always under the checksum; 4096-packet windows at most. */
#define COUR_SACK_EXT_MAX 512

/* HELLO payload. host: boot id, network and pid namespace inodes: equal means the two
 * endpoints share a kernel, a network namespace and a /proc view, so /proc/<pid>/fd works. */
#define COUR_HELLO_REPLY  1u       /* flags: answer with your HELLO */
#define COUR_HELLO_MAPPED 2u       /* the sender mapped the receiver's ring... */
#define COUR_HELLO_PULLS  4u       /* ...and can single-copy from and to its memory */
struct cour_shm_hello {
	uint8_t  host[32];
	uint32_t pid;
	int32_t  fd;                /* the ring's memfd in that process */
	uint64_t nonce;             /* must match the ring's header */
	uint64_t bytes;             /* size of the ring mapping */
	uint64_t probe;             /* address of 8 bytes holding nonce: a single-copy test */
	uint32_t uid;
	uint32_t flags;
	uint32_t box_gen;           /* the sender's mailbox for the receiver (0: none), its */
	uint32_t box_idx;           /* generation and index in the sender's ring file */
};
_Static_assert(sizeof(struct cour_shm_hello) == 80, "HELLO payload is 80 bytes on the wire");

/*
 * CM payload. conn_id is the connecting endpoint's random name for one connection: every
 * packet of its handshake and shutdown carries it, so a late duplicate of an earlier
 * connection's packet is never taken for this one's.
 *   CONNREQ      connecting endpoint -> passive endpoint: data is fi_connect's param
 *   ACCEPT       accepting endpoint -> connecting endpoint: data is fi_accept's param
 *   REJECT       passive endpoint -> connecting endpoint: data is fi_reject's param
 *   ESTABLISHED  connecting endpoint -> accepting endpoint: the ACCEPT arrived
 *   SHUTDOWN     either -> the other: fi_shutdown or close; SHUTDOWN_ACK answers it
 *   RETRY        passive endpoint -> connecting endpoint, with a key only: a CONNREQ came
 *                without the cookie the passive endpoint now names; send it again with it
 * CONNREQ, ACCEPT and SHUTDOWN are sent again until answered; the answers are sent again for
 * every duplicate. The base header's ack (low half) and sack (high half) of a CONNREQ and a
 * RETRY carry the cookie (0: none): a keyed passive endpoint reports only a CONNREQ that
 * repeats a cookie it gave, for that address and conn_id, in the last minute, so a recorded
 * CONNREQ is never reported again (a DTLS HelloVerifyRequest; docs/protocol.md).
 */
enum cour_cm_op {
	COUR_CM_CONNREQ = 1,
	COUR_CM_ACCEPT,
	COUR_CM_REJECT,
	COUR_CM_ESTABLISHED,
	COUR_CM_SHUTDOWN,
	COUR_CM_SHUTDOWN_ACK,
	COUR_CM_RETRY,
	COUR_CM_OP_MAX
};

struct cour_cm_hdr {
	uint64_t conn_id;
	uint32_t op;
	uint32_t data_len;
};
_Static_assert(sizeof(struct cour_cm_hdr) == 16, "CM header is 16 bytes on the wire");

#define COUR_CM_DATA_MAX  256      /* FI_OPT_CM_DATA_SIZE */
#define COUR_CM_PKT_MAX   (32 + sizeof(struct cour_cm_hdr) + COUR_CM_DATA_MAX)

/* Largest UDP payload courier ever sends or accepts. */
#define COUR_MAX_PKT      65000

/* Wrap-safe comparisons of 32-bit sequence numbers (and credit counters). */
static inline int cour_seq_lt(uint32_t a, uint32_t b) { return (int32_t)(a - b) < 0; }
static inline int cour_seq_le(uint32_t a, uint32_t b) { return (int32_t)(a - b) <= 0; }
static inline int cour_seq_gt(uint32_t a, uint32_t b) { return (int32_t)(a - b) > 0; }
static inline int cour_seq_ge(uint32_t a, uint32_t b) { return (int32_t)(a - b) >= 0; }

#endif
