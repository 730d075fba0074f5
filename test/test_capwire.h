/*
 * Test double for the unit tests of the protocol engine (test_rel.c, test_match.c): one
 * endpoint on a "capture wire" that sends nothing and records every packet the engine hands
 * it, plus one remote peer that exists only as the packets a test feeds in with capwire_rx.
 * Completions land in two hand-built CQs whose entries the tests read directly. The clock is
 * the real one; tests that need time to pass hand cour_ep_timers a time of their choosing.
 *
 * Unlike the loop wire (test_engine_loop.c) nothing answers: every ACK, SACK and credit the
 * engine sees is one a test wrote, so each test can ask for one exact reaction.
 */
#ifndef TEST_CAPWIRE_H
#define TEST_CAPWIRE_H

#include "fi/cour_ep.h"

#define CAPWIRE_MAX          256      /* packets recorded; later ones are only counted */
#define CAPWIRE_PAYLOAD_MAX  2048     /* payload bytes kept per packet */
#define CAPWIRE_MTU          1000     /* peer MTU: 928 payload bytes per packet */
#define CAPWIRE_ROOM         (CAPWIRE_MTU - COUR_PKT_HDR_LEN)
#define CAPWIRE_REMOTE_PORT  7001
#define CAPWIRE_REMOTE_SESS  0x5e55105eu

struct capwire_pkt {
	struct cour_pkt_hdr hdr;          /* finished: ack, sack, credits, crc as sent */
	size_t              hdr_len;
	size_t              plen;
	unsigned char       payload[CAPWIRE_PAYLOAD_MAX];
	bool                now;          /* send_now (unsequenced) rather than queue */
	uint32_t            pack;         /* queue's bound for packing it with others */
};

struct capwire {
	struct capwire_pkt pkts[CAPWIRE_MAX];
	size_t             count;          /* packets recorded */
	size_t             lost;           /* packets beyond CAPWIRE_MAX */
	size_t             flushes;
	int                refuse_now;     /* send_now fails with -FI_EAGAIN this many times */
	struct cour_domain dom;
	struct cour_cq     tx_cq, rx_cq;
};

extern struct capwire capwire;

/* Sets cour_params to the tests' defaults (window 16, credits 8, eager_max 4096...). */
void capwire_params(void);
/* A reliable endpoint on the capture wire with both CQs bound; the progress lock is held
 * until capwire_close. Call capwire_params (and adjust cour_params) first. */
struct cour_ep *capwire_open(uint64_t caps);
void capwire_close(struct cour_ep *ep);
/* Forget recorded packets. */
void capwire_clear(void);
/* The remote peer (created on first use). */
struct cour_peer *capwire_peer(struct cour_ep *ep);

/* A header from the remote peer: version, type, sessions (ours as the peer knows it), ack,
 * sack and credits; msg fields zero. */
struct cour_pkt_hdr capwire_hdr(struct cour_peer *peer, uint8_t type, uint32_t seq, uint32_t ack,
				uint32_t sack, uint32_t credits);
/* Hand one packet from the remote peer to cour_ep_rx_packet, crc computed here (over the
 * payload too when cour_params.checksum is on). */
void capwire_rx(struct cour_ep *ep, const struct cour_pkt_hdr *hdr, const void *payload,
		size_t plen);
/* The same, for corrupt or malformed packets: mangle (if given) may change the finished
 * packet, and the engine is told it is len_delta bytes shorter than it is. */
void capwire_rx_mangled(struct cour_ep *ep, const struct cour_pkt_hdr *hdr,
			const void *payload, size_t plen, size_t len_delta,
			void (*mangle)(char *buf, size_t len));
/* A plain ACK from the remote peer; credits is its cumulative grant. */
void capwire_ack(struct cour_ep *ep, uint32_t ack, uint32_t sack, uint32_t credits);

/* A send of len bytes of buf to the remote peer, as cour_msg_send builds it (EAGER, or RTS
 * above eager_max); flags may hold FI_DELIVERY_COMPLETE. */
void capwire_send(struct cour_ep *ep, const void *buf, size_t len, void *context,
		  uint64_t flags);

/* Recorded packets of one type, in order; index i of them, or NULL. */
size_t capwire_count(uint8_t type);
const struct capwire_pkt *capwire_nth(uint8_t type, size_t i);
const struct capwire_pkt *capwire_last(void);

/* CQ contents: successes in order, and the error list. */
size_t capwire_cq_count(const struct cour_cq *cq);
const struct cour_cq_entry *capwire_cq_entry(const struct cour_cq *cq, size_t i);
size_t capwire_cq_err_count(const struct cour_cq *cq);
const struct fi_cq_err_entry *capwire_cq_err(const struct cour_cq *cq, size_t i);

#endif
