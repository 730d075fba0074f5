/*
 * Shared by the UDP wire's files: its setup and ops table (cour_udp.c), its send batching
 * (cour_udp_tx.c) and its receive path (cour_udp_rx.c). The contract is in cour_wire.h.
 */
#ifndef COUR_UDP_INT_H
#define COUR_UDP_INT_H

#include "wire/cour_wire.h"

#include <errno.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <netinet/udp.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif
#ifndef SO_RXQ_OVFL
#define SO_RXQ_OVFL 40
#endif

/* Entries of the ops table (cour_udp.c) that live with the path they serve. */
void cour_udp_queue(struct cour_wire *w, const void *sa, socklen_t sa_len,
		    const void *hdr, size_t hdr_len, const struct iovec *iov, size_t iovcnt,
		    uint32_t pack);
int cour_udp_flush(struct cour_wire *w);
int cour_udp_send_now(struct cour_wire *w, const void *sa,
		      socklen_t sa_len, const void *hdr, size_t hdr_len,
		      const struct iovec *iov, size_t iovcnt);
void cour_udp_send_raw(struct cour_wire *w, const void *sa, socklen_t sa_len,
		       const char *buf, size_t len);
int cour_udp_poll(struct cour_wire *w);
int cour_udp_bell_poll(struct cour_wire *w);

/* Drain the socket's error queue (cour_udp.c): ICMP port unreachable goes to rx->refused. */
void cour_udp_read_errors(struct cour_wire *w);

/* A send or receive failed with err: read the error queue unless the socket was only full or
 * empty. True for ECONNREFUSED, an ICMP answer to an earlier packet: nothing to warn about,
 * the engine weighs it (other errors are handled as they were before IP_RECVERR). Inline:
 * every empty poll ends here with EAGAIN, and that answer should cost no call. */
static inline bool cour_udp_sock_error(struct cour_wire *w, int err)
{
	if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR)
		return false;
	cour_udp_read_errors(w);
	return err == ECONNREFUSED;
}

#endif
