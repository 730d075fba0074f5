/*
 * The loop wire (FI_COURIER_WIRE=loop): endpoints of one process exchange packets through
 * in-memory queues, no sockets. It exists so that the protocol engine can be tested whole,
 * inside one test program, with the fault injector (FI_COURIER_FAULT) losing, duplicating,
 * reordering and corrupting packets from a seed: a failing run replays exactly, which no
 * real network allows.
 *
 * It behaves like UDP where the engine could tell: names are IP socket addresses (a port of 0
 * gets one from a counter), a packet to a name nobody holds vanishes, a full receive queue
 * drops what arrives, and packets larger than the peer MTU are never sent (the MTU is an
 * Ethernet-like 1472 bytes unless FI_COURIER_MTU says otherwise, so the multi-packet paths
 * run). Each endpoint's fd is an eventfd that is readable while its queue holds packets.
 * With a key, datagrams carry and lose the authentication trailer as on UDP (cour_mac.h), so
 * the engine's keyed paths run here too. Packed datagrams (cour_wire.h) are read as on UDP,
 * so tests and the fuzzer can hand them in, but never made: one packet, one datagram.
 */
#include "util/cour_util.h"
#include "util/cour_params.h"
#include "wire/cour_wire.h"

#include <uthash.h>
#include <utlist.h>

#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define COUR_LOOP_QMAX  4096       /* packets queued per endpoint; beyond, arrivals drop */
#define COUR_LOOP_MTU   1472

struct cour_loop_pkt {
	struct cour_loop_pkt   *next, *prev;
	struct sockaddr_storage from;
	socklen_t               from_len;
	size_t                  len;
	char                    data[];
};

struct cour_loop_port {
	UT_hash_handle          hh;       /* cour_loop_ports, keyed on addr */
	struct cour_addr        addr;
	struct cour_loop_pkt   *queue;    /* DL, oldest first */
	size_t                  queued;
	int                     efd;
};

/* One process-wide switchboard. Lock order: an endpoint's domain lock, then this. */
static pthread_mutex_t cour_loop_mutex = PTHREAD_MUTEX_INITIALIZER;
static struct cour_loop_port *cour_loop_ports;
static uint16_t cour_loop_next_port = 20000;

static void cour_loop_signal(int efd)
{
	uint64_t one = 1;

	if (write(efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		COUR_DBG(FI_LOG_EP_DATA, "loop eventfd: %s\n", strerror(errno));
}

static void cour_loop_deliver(const struct sockaddr_storage *from, socklen_t from_len,
			      const void *to_sa, socklen_t to_len, const struct iovec *v, size_t n)
{
	struct cour_loop_port *port;
	struct cour_loop_pkt *pkt;
	struct cour_addr to;
	size_t len = 0, off = 0;

	if (cour_addr_from_sockaddr(&to, to_sa, to_len))
		return;
	to.is_v4 = 0;
	for (size_t i = 0; i < n; i++)
		len += v[i].iov_len;

	pthread_mutex_lock(&cour_loop_mutex);
	HASH_FIND(hh, cour_loop_ports, &to, sizeof(to), port);
	if (!port || port->queued >= COUR_LOOP_QMAX)
		goto out;         /* nobody there, or the receiver is full: lost, as on UDP */
	pkt = malloc(sizeof(*pkt) + len);
	if (!pkt)
		goto out;
	memcpy(&pkt->from, from, from_len);
	pkt->from_len = from_len;
	pkt->len = len;
	for (size_t i = 0; i < n; i++) {
		memcpy(pkt->data + off, v[i].iov_base, v[i].iov_len);
		off += v[i].iov_len;
	}
	DL_APPEND(port->queue, pkt);
	if (port->queued++ == 0)
		cour_loop_signal(port->efd);
out:
	pthread_mutex_unlock(&cour_loop_mutex);
}

static void cour_loop_send_raw(struct cour_wire *w, const void *sa, socklen_t sa_len,
			       const char *buf, size_t len)
{
	struct iovec v = { .iov_base = (void *)buf, .iov_len = len };

	cour_loop_deliver(&w->bound_sa, w->bound_len, sa, sa_len, &v, 1);
}

/* Header plus payload. */
static void cour_loop_send(struct cour_wire *w, const void *sa, socklen_t sa_len,
			   const void *hdr, size_t hdr_len, const struct iovec *iov, size_t iovcnt)
{
	struct cour_wire_msg msg;

	cour_wire_msghdr(&msg, sa, sa_len, hdr, hdr_len, iov, iovcnt);
	w->stats.tx_pkts++;
	cour_loop_deliver(&w->bound_sa, w->bound_len, sa, sa_len, msg.v,
			  cour_wire_sign(w, sa, sa_len, msg.v, iovcnt + 1, &msg.t));
}

static void cour_loop_close(struct cour_wire *w)
{
	struct cour_loop_port *port = w->priv;
	struct cour_loop_pkt *pkt, *tmp;

	cour_wire_rxbufs_fini(w);
	if (!port)
		return;
	pthread_mutex_lock(&cour_loop_mutex);
	HASH_DEL(cour_loop_ports, port);
	pthread_mutex_unlock(&cour_loop_mutex);
	DL_FOREACH_SAFE(port->queue, pkt, tmp) {
		DL_DELETE(port->queue, pkt);
		free(pkt);
	}
	close(port->efd);
	free(port);
	w->priv = NULL;
	w->fd = -1;
}

static int cour_loop_open(struct cour_wire *w, const struct cour_addr *want)
{
	struct cour_loop_port *port, *other;
	char str[80];
	int ret = 0;

	port = calloc(1, sizeof(*port));
	if (!port)
		return -FI_ENOMEM;
	port->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (port->efd < 0) {
		COUR_WARN(FI_LOG_EP_CTRL, "loop wire: eventfd: %s\n", strerror(errno));
		free(port);
		return -FI_ENOMEM;
	}
	port->addr = *want;
	port->addr.is_v4 = 0;

	pthread_mutex_lock(&cour_loop_mutex);
	for (int tries = 0; !want->port && tries < 65536; tries++) {
		port->addr.port = htons(cour_loop_next_port);
		cour_loop_next_port = cour_loop_next_port == 65535 ? 1024 : cour_loop_next_port + 1;
		HASH_FIND(hh, cour_loop_ports, &port->addr, sizeof(port->addr), other);
		if (!other)
			break;
	}
	HASH_FIND(hh, cour_loop_ports, &port->addr, sizeof(port->addr), other);
	if (other || !port->addr.port)
		ret = -FI_EADDRINUSE;
	else
		HASH_ADD(hh, cour_loop_ports, addr, sizeof(port->addr), port);
	pthread_mutex_unlock(&cour_loop_mutex);
	if (ret) {
		COUR_WARN(FI_LOG_EP_CTRL, "loop wire: %s is taken\n",
			  cour_addr_str(want, str, sizeof(str)));
		close(port->efd);
		free(port);
		return ret;
	}

	w->priv = port;
	w->fd = port->efd;
	w->addr = port->addr;
	w->addr.is_v4 = want->is_v4;
	w->bound_len = (socklen_t)cour_addr_to_sockaddr(&w->addr, &w->bound_sa);
	if (cour_wire_rxbufs_init(w)) {
		cour_loop_close(w);
		return -FI_ENOMEM;
	}
	COUR_INFO(FI_LOG_EP_CTRL, "loop wire: endpoint named %s\n",
		  cour_addr_str(&w->addr, str, sizeof(str)));
	return 0;
}

static void cour_loop_queue(struct cour_wire *w, const void *sa,
			    socklen_t sa_len, const void *hdr, size_t hdr_len,
			    const struct iovec *iov, size_t iovcnt,
			     uint32_t pack)
{
	(void)pack;         /* (one packet a datagram: packing is the UDP wire's) */
	for (size_t k = 0; k < iovcnt; k++)
		w->stats.tx_bytes += iov[k].iov_len;
	cour_loop_send(w, sa, sa_len, hdr, hdr_len, iov, iovcnt);
}

static int cour_loop_flush(struct cour_wire *w)
{
	(void)w;            /* queue delivered at once: the payload may change after it */
	return 0;
}

static int cour_loop_send_now(struct cour_wire *w, const void *sa,
			      socklen_t sa_len, const void *hdr, size_t hdr_len,
			      const struct iovec *iov, size_t iovcnt)
{
	cour_loop_send(w, sa, sa_len, hdr, hdr_len, iov, iovcnt);
	return 0;
}

static int cour_loop_poll(struct cour_wire *w)
{
	struct cour_loop_port *port = w->priv;
	struct cour_loop_pkt *batch = NULL, *pkt, *tmp;
	uint64_t drain;
	int n = 0;

	pthread_mutex_lock(&cour_loop_mutex);
	while (port->queue && n < COUR_WIRE_RX_BATCH) {
		pkt = port->queue;
		DL_DELETE(port->queue, pkt);
		DL_APPEND(batch, pkt);
		port->queued--;
		n++;
	}
	if (n && read(port->efd, &drain, sizeof(drain)) < 0 && errno != EAGAIN)
		COUR_DBG(FI_LOG_EP_DATA, "loop eventfd: %s\n", strerror(errno));
	if (port->queued)
		cour_loop_signal(port->efd);
	pthread_mutex_unlock(&cour_loop_mutex);

	n = 0;
	DL_FOREACH_SAFE(batch, pkt, tmp) {
		DL_DELETE(batch, pkt);
		w->stats.rx_pkts++;
		size_t len = pkt->len;

		if (len > w->rxbuf_size || !w->rx_bufs[n]) {
			cour_wire_drop(w, "larger than any courier packet");
		} else if (cour_wire_rx_auth(w, pkt->data, &len, &pkt->from, pkt->from_len)) {
			memcpy(w->rx_bufs[n], pkt->data, len);
			/* (this wire packs nothing, but reads packs as the UDP wire does) */
			w->rx_bufs[n] = cour_wire_up(w, w->rx_bufs[n], len, &pkt->from,
						     pkt->from_len);
		}
		free(pkt);
		n++;
	}
	return n;
}

static uint32_t cour_loop_peer_mtu(struct cour_wire *w, const struct cour_addr *addr)
{
	(void)addr;
	return (cour_params.mtu ? (uint32_t)cour_params.mtu : COUR_LOOP_MTU) -
	       (w->mac ? COUR_MAC_LEN : 0);
}

const struct cour_wire_ops cour_loop_wire = {
	.name = "loop",
	.open = cour_loop_open,
	.close = cour_loop_close,
	.queue = cour_loop_queue,
	.flush = cour_loop_flush,
	.poll = cour_loop_poll,
	.send_now = cour_loop_send_now,
	.send_raw = cour_loop_send_raw,
	.peer_mtu = cour_loop_peer_mtu,
};
