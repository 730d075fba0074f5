/*
 * FI_EP_MSG connection management (fi_cm(3)): passive endpoints and the handshake that turns an
 * engine endpoint into a connected one. A connected endpoint is an RDM endpoint that talks to
 * one peer: the engine, its reliability and its data path are the same; only who the peer is
 * and the EQ events differ.
 *
 * The handshake (CM packets, cour_wire_fmt.h), all over UDP:
 *   connecting endpoint --CONNREQ--> passive endpoint's socket: FI_CONNREQ on the listener's
 *   EQ, with an fi_info whose handle names the request;
 *   accepting endpoint (opened with that info) --ACCEPT--> connecting endpoint: FI_CONNECTED
 *   at the accepting endpoint at once (as a TCP server is connected when it accepts: its
 *   FI_CONNECTED comes first) and at the connecting one on arrival; it answers ESTABLISHED,
 *   which stops the accepting side sending ACCEPT again (so does any packet of the peer);
 *   or the passive endpoint --REJECT--> connecting endpoint: an FI_ECONNREFUSED error event.
 * Each side sends its packet again until answered (CONNREQ, ACCEPT: every 100 ms doubling to
 * 1 s, for FI_COURIER_PEER_TIMEOUT; then an FI_ETIMEDOUT error event) and answers every
 * duplicate. ICMP port unreachable for a CONNREQ (nothing listens there) refuses at once. fi_shutdown sends SHUTDOWN until a SHUTDOWN_ACK (five tries); the peer reports
 * FI_SHUTDOWN. A peer whose session ends in error (it died, restarted, closed) is reported
 * with FI_SHUTDOWN as well.
 *
 * A passive endpoint has a socket of its own and a thread that sleeps on it while listening;
 * the endpoints' side runs in the engine's progress (up ops cm_rx, cm_tick, peer_lost).
 */
#ifndef COUR_CM_H
#define COUR_CM_H

#include "cour_fi.h"
#include "proto/cour_wire_fmt.h"
#include "util/cour_addr.h"

#include <pthread.h>

struct cour_eq;
struct cour_ep;
struct cour_pep;

enum cour_conn_state {
	COUR_CONN_IDLE = 0,
	COUR_CONN_CONNECTING,   /* fi_connect: CONNREQ out, waiting for ACCEPT or REJECT */
	COUR_CONN_CONNECTED,
	COUR_CONN_SHUTDOWN,     /* by either side, or the peer was lost */
	COUR_CONN_FAILED,       /* refused or timed out */
};

/* The connection of an FI_EP_MSG endpoint (in struct cour_ep); domain lock held */
struct cour_conn {
	struct cour_eq      *eq;
	enum cour_conn_state state;
	struct cour_addr     peer;       /* where data goes, once connected */
	struct cour_addr     target;     /* CONNECTING: the passive endpoint */
	bool                 has_peer;
	bool                 shutdown_sent, shutdown_acked, shutdown_reported;
	bool                 closing;
	bool                 accept_pending; /* accepted: ACCEPT resent until the peer answers */
	uint64_t             conn_id;
	uint64_t             cookie;     /* CONNECTING with a key: the passive endpoint's */
	uint64_t             started_us;
	unsigned             tries;
	uint64_t             gen;        /* the engine's av_gen: changes with the peer */
	size_t               data_len;   /* CONNREQ or ACCEPT data, sent again with it */
	uint8_t              data[COUR_CM_DATA_MAX];
};

/* fi_passive_ep */
int cour_passive_ep(struct fid_fabric *fabric, struct fi_info *info, struct fid_pep **pep,
		    void *context);

/* An endpoint opened with info->handle from an FI_CONNREQ: what fi_accept needs. 0, or
 * -FI_EINVAL when handle is no pending courier connection request. */
int cour_cm_ep_from_request(struct cour_conn *conn, fid_t handle);

/* An endpoint opened with info->handle naming a passive endpoint takes its address: the
 * passive endpoint lets it go (fi_endpoint(3)). 0, -FI_EINVAL (not a courier passive
 * endpoint) or -FI_EBUSY (it listens). */
int cour_cm_pep_give_addr(fid_t handle, struct cour_addr *addr);

/* fi_ops_cm of FI_EP_MSG endpoints */
int cour_cm_connect(struct fid_ep *ep, const void *addr, const void *param, size_t len);
int cour_cm_accept(struct fid_ep *ep, const void *param, size_t len);
int cour_cm_shutdown(struct fid_ep *ep, uint64_t flags);
int cour_cm_getpeer(struct fid_ep *ep, void *addr, size_t *addrlen);

/* The engine's questions about the peer, for an FI_EP_MSG endpoint */
const struct cour_addr *cour_cm_peer(struct cour_conn *conn);
fi_addr_t cour_cm_reverse(struct cour_conn *conn, const struct cour_addr *addr);

/* Up ops of FI_EP_MSG endpoints */
void cour_cm_rx(struct cour_pep *pep, const struct cour_addr *from,
		const struct cour_cm_hdr *cm, uint64_t cookie, const uint8_t *data);
void cour_cm_tick(struct cour_pep *pep, uint64_t now);
void cour_cm_peer_lost(struct cour_pep *pep, const struct cour_addr *addr, int prov_errno);
void cour_cm_refused(struct cour_pep *pep, const struct cour_addr *addr);

/* Closing the endpoint: a connected one tells its peer (once, no retries) */
void cour_cm_ep_close(struct cour_ep *ep);

#endif
