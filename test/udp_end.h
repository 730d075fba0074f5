/*
 * The UDP wire's tests (test_udp_wire.c, test_udp_pack.c): ends on 127.0.0.1, each a UDP wire
 * with a recording stand-in for the engine (the wire knows nothing else of it). A stand-in
 * datagram is a 16-byte header (HDR_MARK, its id, the byte its payload is made from) and a
 * payload derived from both, so every byte that arrives can be checked.
 */
#ifndef TEST_UDP_END_H
#define TEST_UDP_END_H

#include "util/cour_util.h"
#include "util/cour_params.h"
#include "wire/cour_wire.h"

#include <stdbool.h>
#include <stdint.h>

#define HDR_LEN   16
#define MAX_SEEN  256

struct seen {
	size_t   len;
	bool     borrowed;
	bool     placed;      /* read into the place the stand-in named (rx->placed) */
	bool     checked;     /* ...as a train's piece, its header the bytes direct accepted */
	uint32_t id;          /* the datagram's number, from its header */
	uint8_t  fill;        /* what its payload should be made of */
	bool     intact;
};

struct end {
	struct cour_wire w;
	struct cour_pool pool;
	struct seen      seen[MAX_SEEN];
	size_t           nseen;
	/* placing: the stand-in plays an engine receiving one stream of pieces, datagram ids
	 * base, base + 1... in order, plen payload bytes each, end to end in place (cap of
	 * them); next is the id it waits for */
	bool             placing;
	/* ...and says the stream goes on past what it saw (rx_direct_more): true unless a
	 * test says otherwise */
	bool             alone;
	uint8_t         *place;
	uint32_t         base, next, cap, clobber;
	size_t           plen;
	uint8_t          last[2048];   /* the first bytes of the last datagram handed up */
};

/* the header's first byte, as the engine's version byte: never COUR_WIRE_PACK_MARK */
#define HDR_MARK  4
#define ID_OFF    4
#define FILL_OFF  8

extern struct end ends[3];
extern const struct cour_wire_rx_ops rec_ops;
/* set by a test before open_end: the ends it opens authenticate with it */
extern const char *wire_key;
extern uint8_t payload[MAX_SEEN][12288];
extern uint8_t hdrs[MAX_SEEN][HDR_LEN];

/* the payload byte at datagram offset i (header included) of datagram id */
uint8_t pattern(uint32_t id, size_t i);
/* a wire on 127.0.0.1 (GSO, GRO on or off) with the stand-in above it */
void open_end(struct end *e, bool gso, bool gro);
/* ...with other engine ops (the stand-in's, changed), and an epoll set for a doorbell */
void open_end_with(struct end *e, bool gso, bool gro, const struct cour_wire_rx_ops *ops,
		   int bell_epfd);
void udp_end_setup(void);
void udp_end_teardown(void);
/* Datagram id of len bytes (header included) from `from` to `to`, alone (queue) or packable
 * into datagrams of at most pack bytes (queue_pack). */
void queue(struct end *from, struct end *to, uint32_t id, size_t len);
void queue_pack(struct end *from, struct end *to, uint32_t id, size_t len, uint32_t pack);
/* Poll e until it has seen n datagrams (2 s at most). */
void receive(struct end *e, size_t n);
/* e saw ids first.. in order, each of its length, every byte intact. */
void check_seen(const struct end *e, uint32_t first, const size_t *lens, size_t n);
/* Wait (1 s at most) until e's socket has something to read. */
void wait_readable(struct end *e);

#endif
