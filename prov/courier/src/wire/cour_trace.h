/*
 * Packet capture (FI_COURIER_TRACE=PATH): every endpoint writes each datagram it sends and
 * receives, over UDP and through the shared-memory rings, to a pcapng file of its own
 * (PATH.<pid>.<n>.pcapng, or PATH/courier.<pid>.<n>.pcapng when PATH is a directory) that
 * Wireshark and tcpdump read; contrib/wireshark/courier.lua decodes courier in it.
 *
 * What is recorded, and where it is taken:
 *   UDP, sent       each datagram as the kernel took it (sendmmsg, sendmsg, sendto), a GSO run
 *                   cut back into its datagrams: cour_trace_udp_sent*
 *   UDP, received   each datagram as read, before any check, so a bad one shows too; a GRO
 *                   train cut into its datagrams; one read in place (header + the receive
 *                   buffer it was aimed at) from where it landed: cour_trace_udp_rcvd
 *   fault drops     a packet FI_COURIER_FAULT drops is recorded as sent, with a comment: the
 *                   injector plays the network, and a capture on a lossy link sees the lost
 *                   packet leave (a retransmission then shows as one)
 *   shared memory   each packet put into a peer's ring, and each taken from ours before any
 *                   check, on a second interface ("courier-shm"; UDP is "courier-udp")
 *
 * A capture file holds raw IP packets: the IPv4 or IPv6 and UDP headers are made up from the
 * socket's addresses (ours, the peer's), IPv4 or IPv6 as the endpoint's socket is. Ring
 * packets get the two endpoints' UDP addresses too (a ring's tag is the sender's bound
 * address), so one conversation reads the same on both
 * paths and only the interface tells them apart. FI_COURIER_TRACE_SNAP bytes of each packet
 * are kept, FI_COURIER_TRACE_MAX MiB per file at most (cour_pcapng.h: buffering, the bound).
 *
 * When FI_COURIER_TRACE is unset, w->trace is NULL and each hook in the data path is one
 * predicted branch on it. Calls are made under the endpoint's progress lock.
 */
#ifndef COUR_TRACE_H
#define COUR_TRACE_H

#include "wire/cour_wire.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/uio.h>

/* Once the wire is open: w->trace is a capture if FI_COURIER_TRACE asks for one, else NULL
 * (also when the file cannot be made: said at warn level, the endpoint runs without). */
void cour_trace_open(struct cour_wire *w);
void cour_trace_close(struct cour_wire *w);

/* UDP: n messages the kernel took (each a datagram or a UDP_SEGMENT run), or one */
void cour_trace_udp_sent_mmsg(struct cour_wire *w, const struct mmsghdr *mm, unsigned n);
void cour_trace_udp_sent(struct cour_wire *w, const struct msghdr *m);
/* UDP: len bytes read through m's iovecs, from m->msg_name; gso nonzero: a GRO train of
 * datagrams of gso bytes (the last may be shorter) */
void cour_trace_udp_rcvd(struct cour_wire *w, const struct msghdr *m, size_t len, size_t gso);
/* The fault injector lost m on purpose (before a key signed it) */
void cour_trace_fault_drop(struct cour_wire *w, const struct msghdr *m);
/* A ring packet, hdr then the iovecs: out, put into the ring of the peer at sa; in, taken
 * from ours, sa being the tag the sender wrote (untrusted: a bad one gives a zero address) */
void cour_trace_shm(struct cour_wire *w, bool out, const void *sa, size_t sa_len,
		    const void *hdr, size_t hdr_len, const struct iovec *iov, size_t iovcnt);

/* ---- for the unit test: the made-up IP and UDP header ---- */
#define COUR_TRACE_IPHDR_MAX 48        /* IPv6 (40) + UDP (8); IPv4 + UDP is 28 */
/* The header of a datagram of len bytes (the iovecs: IPv6 needs them for its UDP checksum)
 * from src to dst, written to out: IPv6 if v6 (IPv4 addresses mapped), else IPv4 (an address
 * that has no IPv4 form is written 0.0.0.0); returns its length. */
size_t cour_trace_ip_udp(uint8_t *out, bool v6, const struct sockaddr_storage *src,
			 const struct sockaddr_storage *dst, uint16_t ip_id,
			 const struct iovec *iov, size_t iovcnt, size_t len);

#endif /* COUR_TRACE_H */
