/*
 * The wire interface: what the protocol engine needs from a transport, one ops table per kind
 * of wire, chosen when the endpoint opens (FI_COURIER_WIRE), never tested in the data path.
 *
 *   open      bind the endpoint's name (want may have port 0) and set ep->addr and ep->fd,
 *             the fd that becomes readable when packets wait (the progress thread sleeps on it);
 *   close     undo open; packets still queued are lost, as on any wire;
 *   queue     add one packet to the send batch: the header is copied and finished there
 *             (cour_hdr_finish), the payload iov must stay valid until the next flush;
 *   flush     hand the batch over; packets the wire refuses are lost as far as the engine is
 *             concerned (the retransmit timer recovers them) and ep->tx_blocked is set;
 *   poll      read up to COUR_RX_BATCH packets and give each to cour_ep_rx_packet; returns
 *             the count read;
 *   send_now  one finished, unsequenced packet now (ACK, RESET, datagram): 0 or -FI_EAGAIN;
 *   send_raw  one packet already in a single buffer, for the fault injector;
 *   peer_mtu  largest packet (header included) worth sending to that address; 0 when this
 *             endpoint cannot send there at all (the engine then fails the peer's operations
 *             with FI_EHOSTUNREACH instead of retrying into the peer timeout).
 *
 * Every wire here is unreliable and unordered as far as the engine knows; the UDP wire is the
 * real one, the loop wire moves packets between endpoints of one process (component tests).
 *
 * Beside the endpoint's wire, an RDM endpoint on UDP has the shared-memory path
 * (cour_shm.c), chosen per peer once a HELLO proved the peer shares our host. It offers the
 * same operations (cour_shm_send = queue + flush, cour_shm_poll = poll, cour_peer_send_now
 * = send_now) under a stronger contract, which is why it is not one more table here: it is
 * reliable and ordered, and it refuses a packet when the peer's ring is full (-FI_EAGAIN,
 * nothing sent) instead of losing it. The engine relies on both: a packet in the ring counts
 * as acknowledged, and a refused one is resent, in order, before anything after it.
 */
#ifndef COUR_WIRE_H
#define COUR_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

struct cour_ep;
struct cour_peer;
struct cour_addr;
struct cour_pkt_hdr;

struct cour_wire_ops {
	const char *name;
	int      (*open)(struct cour_ep *ep, const struct cour_addr *want);
	void     (*close)(struct cour_ep *ep);
	void     (*queue)(struct cour_ep *ep, struct cour_peer *peer,
			  const struct cour_pkt_hdr *hdr, size_t hdr_len,
			  const struct iovec *iov, size_t iovcnt);
	int      (*flush)(struct cour_ep *ep);
	int      (*poll)(struct cour_ep *ep);
	int      (*send_now)(struct cour_ep *ep, const struct sockaddr_storage *sa, socklen_t sa_len,
			     const void *hdr, size_t hdr_len, const struct iovec *iov, size_t iovcnt);
	void     (*send_raw)(struct cour_ep *ep, const void *sa, socklen_t sa_len, const char *buf,
			     size_t len);
	uint32_t (*peer_mtu)(struct cour_ep *ep, const struct cour_addr *addr);
};

extern const struct cour_wire_ops cour_udp_wire;
extern const struct cour_wire_ops cour_loop_wire;

/* The wire FI_COURIER_WIRE names, or NULL (logged) if it names none. */
const struct cour_wire_ops *cour_wire_lookup(const char *name);

#endif
