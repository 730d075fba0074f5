/*
 * The capture wire and the hand-built endpoint of test_capwire.h.
 */
#include "test_capwire.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <stdlib.h>

struct capwire capwire;

static void capwire_record(const void *hdr, size_t hdr_len, const struct iovec *iov,
			   size_t iovcnt, bool now)
{
	struct capwire_pkt *p;
	size_t off = 0;

	if (capwire.count == CAPWIRE_MAX) {
		capwire.lost++;
		return;
	}
	p = &capwire.pkts[capwire.count++];
	memset(&p->hdr, 0, sizeof(p->hdr));
	memcpy(&p->hdr, hdr, hdr_len);
	p->hdr_len = hdr_len;
	p->now = now;
	for (size_t i = 0; i < iovcnt; i++) {
		size_t take = iov[i].iov_len;
		if (take > CAPWIRE_PAYLOAD_MAX - off)
			take = CAPWIRE_PAYLOAD_MAX - off;
		memcpy(p->payload + off, iov[i].iov_base, take);
		off += take;
	}
	p->plen = off;
}

static int capwire_wire_open(struct cour_wire *w, const struct cour_addr *want)
{
	return 0;
}

static void capwire_wire_close(struct cour_wire *w)
{
}

static void capwire_wire_queue(struct cour_wire *w, const void *sa,
			       socklen_t sa_len, const void *hdr, size_t hdr_len,
			       const struct iovec *iov, size_t iovcnt, uint32_t pack)
{
	capwire_record(hdr, hdr_len, iov, iovcnt, false);
	if (capwire.count <= CAPWIRE_MAX && !capwire.lost)
		capwire.pkts[capwire.count - 1].pack = pack;
}

static int capwire_wire_flush(struct cour_wire *w)
{
	capwire.flushes++;
	return 0;
}

static int capwire_wire_poll(struct cour_wire *w)
{
	return 0;
}

static int capwire_wire_send_now(struct cour_wire *w, const void *sa,
				 socklen_t sa_len, const void *hdr, size_t hdr_len,
				 const struct iovec *iov, size_t iovcnt)
{
	if (capwire.refuse_now > 0) {
		capwire.refuse_now--;
		return -FI_EAGAIN;
	}
	capwire_record(hdr, hdr_len, iov, iovcnt, true);
	return 0;
}

static void capwire_wire_send_raw(struct cour_wire *w, const void *sa, socklen_t sa_len,
				  const char *buf, size_t len)
{
	cr_assert_fail("the capture wire has no fault injector");
}

static uint32_t capwire_wire_peer_mtu(struct cour_wire *w, const struct cour_addr *addr)
{
	return CAPWIRE_MTU;
}

void capwire_params(void)
{
	cour_params.mtu = 0;
	cour_params.window = 16;
	cour_params.win_idle_ms = 200;
	cour_params.credits = 8;
	cour_params.credits_max = 8;     /* no loans unless a test asks (test_credit.c) */
	cour_params.eager_max = 4096;
	cour_params.inject_size = 64;
	cour_params.tx_size = 64;
	cour_params.rx_size = 64;
	/* credits held by unexpected messages until received: these tests watch the credit
	 * protocol itself (the early return past it is flood.c's and test_match's) */
	cour_params.unexp_max = 0;
	cour_params.ack_delay_us = 20;
	cour_params.nudge_us = 0;        /* no probes for late ACKs unless a test asks */
	cour_params.rto_min_us = 1000;
	cour_params.rto_max_us = 64000;
	cour_params.peer_timeout_ms = 10000;
	cour_params.peer_warn_ms = 10000;
	cour_params.checksum = 0;
	cour_params.udp_pack = 1;
	cour_params.sockbuf = 8u << 20;
	cour_params.fault = NULL;
}

static void capwire_cq_init(struct cour_cq *cq)
{
	memset(cq, 0, sizeof(*cq));
	cq->domain = &capwire.dom;
	cq->format = FI_CQ_FORMAT_TAGGED;
	cq->ring_cap = 16;
	cq->ring = calloc(cq->ring_cap, sizeof(*cq->ring));
	cr_assert_not_null(cq->ring);
	cq->signal_fd = -1;
}

static void capwire_cq_fini(struct cour_cq *cq)
{
	struct cour_cq_err *e, *n;

	for (e = cq->errs; e; e = n) {
		n = e->next;
		free(e);
	}
	free(cq->ring);
}

struct cour_ep *capwire_open(uint64_t caps)
{
	static const struct cour_wire_ops capwire_ops = {
		.name = "capture",
		.open = capwire_wire_open,
		.close = capwire_wire_close,
		.queue = capwire_wire_queue,
		.flush = capwire_wire_flush,
		.poll = capwire_wire_poll,
		.send_now = capwire_wire_send_now,
		.send_raw = capwire_wire_send_raw,
		.peer_mtu = capwire_wire_peer_mtu,
	};
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(7000) };
	struct cour_ep *ep;

	memset(&capwire, 0, sizeof(capwire));
	cour_lock_init(&capwire.dom.lock, COUR_LOCK_NONE);
	cour_lock_acquire(&capwire.dom.lock);
	capwire_cq_init(&capwire.tx_cq);
	capwire_cq_init(&capwire.rx_cq);

	ep = calloc(1, sizeof(*ep));
	cr_assert_not_null(ep);
	ep->info = fi_allocinfo();
	cr_assert_not_null(ep->info);
	ep->info->caps = caps;
	ep->domain = &capwire.dom;
	capwire.dom.pdom.lock = &capwire.dom.lock;
	ep->pep.pdom = &capwire.dom.pdom;
	ep->pep.lock = &capwire.dom.lock;
	ep->pep.up = &cour_ep_up;
	ep->pep.caps = caps;
	ep->pep.type = FI_EP_RDM;
	ep->b.tx_cq = &capwire.tx_cq;
	ep->b.rx_cq = &capwire.rx_cq;
	ep->pep.min_multi_recv = 64;
	ep->pep.rxbuf_size = 4096;
	cour_wire_init(&ep->pep.wire, &capwire_ops, &cour_ep_wire_rx, &ep->pep, &ep->pep.rxbuf_pool,
		       ep->pep.rxbuf_size);
	inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
	cr_assert_eq(cour_addr_from_sockaddr(&ep->pep.wire.addr, &sin, sizeof(sin)), 0);
	cour_pool_init(&ep->pep.txe_pool, sizeof(struct cour_txe), 64, 0);
	ep->pep.rxq = &ep->pep.own_rxq;
	cour_pool_init(&ep->pep.rxq->rxe_pool, sizeof(struct cour_rxe), 64, 0);  /* as cour_ep_open */
	cour_pool_init(&ep->pep.rxmsg_pool, sizeof(struct cour_rxmsg), 64, 0);
	cour_pool_init(&ep->pep.inject_pool, cour_params.inject_size, 64, cour_params.tx_size);
	cour_pool_init(&ep->pep.rxbuf_pool, ep->pep.rxbuf_size, COUR_RX_BATCH, 256);
	return ep;
}

void capwire_close(struct cour_ep *ep)
{
	cour_peer_free_all(&ep->pep);
	cour_msg_ep_close(&ep->pep);
	cr_expect_eq(ep->pep.rxbuf_pool.in_use, 0, "receive buffers leaked: %zu",
		     ep->pep.rxbuf_pool.in_use);
	cour_pool_fini(&ep->pep.txe_pool);
	cour_pool_fini(&ep->pep.rxq->rxe_pool);
	cour_pool_fini(&ep->pep.rxmsg_pool);
	cour_pool_fini(&ep->pep.inject_pool);
	cour_pool_fini(&ep->pep.rxbuf_pool);
	fi_freeinfo(ep->info);
	free(ep);
	capwire_cq_fini(&capwire.tx_cq);
	capwire_cq_fini(&capwire.rx_cq);
	cour_lock_release(&capwire.dom.lock);
	cour_lock_destroy(&capwire.dom.lock);
}

void capwire_clear(void)
{
	capwire.count = 0;
	capwire.lost = 0;
}

static void capwire_remote_sa(struct sockaddr_in *sin)
{
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_port = htons(CAPWIRE_REMOTE_PORT);
	inet_pton(AF_INET, "127.0.0.1", &sin->sin_addr);
}

struct cour_peer *capwire_peer(struct cour_ep *ep)
{
	struct sockaddr_in sin;
	struct cour_addr a;
	struct cour_peer *peer;

	capwire_remote_sa(&sin);
	cr_assert_eq(cour_addr_from_sockaddr(&a, &sin, sizeof(sin)), 0);
	a.is_v4 = ep->pep.wire.addr.is_v4;
	peer = cour_peer_by_addr_locked(&ep->pep, &a, true);
	cr_assert_not_null(peer);
	return peer;
}

struct cour_pkt_hdr capwire_hdr(struct cour_peer *peer, uint8_t type, uint32_t seq, uint32_t ack,
				uint32_t sack, uint32_t credits)
{
	struct cour_pkt_hdr h;

	memset(&h, 0, sizeof(h));
	h.base.version = COUR_WIRE_VERSION;
	h.base.type = type;
	h.base.src_session = CAPWIRE_REMOTE_SESS;
	h.base.dst_session = peer->local_session;
	h.base.seq = seq;
	h.base.ack = ack;
	h.base.sack = sack;
	h.base.credits = credits;
	return h;
}

void capwire_rx_mangled(struct cour_ep *ep, const struct cour_pkt_hdr *hdr,
			const void *payload, size_t plen, size_t len_delta,
			void (*mangle)(char *buf, size_t len))
{
	size_t hlen = (hdr->base.type == COUR_PKT_ACK || hdr->base.type == COUR_PKT_RESET ||
		       hdr->base.type == COUR_PKT_HELLO) ? COUR_BASE_HDR_LEN : COUR_PKT_HDR_LEN;
	size_t len = hlen + plen;
	struct cour_base_hdr *h;
	struct sockaddr_in sin;
	char *buf;
	void *back;

	cr_assert_leq(len, ep->pep.rxbuf_size);
	buf = cour_pool_get(&ep->pep.rxbuf_pool);
	cr_assert_not_null(buf, "receive buffer pool exhausted");
	memcpy(buf, hdr, hlen);
	if (plen)
		memcpy(buf + hlen, payload, plen);
	h = (struct cour_base_hdr *)buf;
	if (cour_params.checksum && hlen == COUR_PKT_HDR_LEN)
		h->flags |= COUR_F_PCSUM;
	h->crc = 0;
	h->crc = cour_crc32c(0, buf, (h->flags & COUR_F_PCSUM) ? len : hlen);
	if (mangle)
		mangle(buf, len);
	cr_assert_leq(len_delta, len);
	capwire_remote_sa(&sin);
	back = cour_ep_rx_packet(&ep->pep, buf, len - len_delta, (struct sockaddr_storage *)&sin,
				 sizeof(sin));
	cr_assert_not_null(back, "cour_ep_rx_packet must hand a buffer back");
	cour_pool_put(&ep->pep.rxbuf_pool, back);
}

void capwire_rx(struct cour_ep *ep, const struct cour_pkt_hdr *hdr, const void *payload,
		size_t plen)
{
	capwire_rx_mangled(ep, hdr, payload, plen, 0, NULL);
}

void capwire_ack(struct cour_ep *ep, uint32_t ack, uint32_t sack, uint32_t credits)
{
	struct cour_pkt_hdr h = capwire_hdr(capwire_peer(ep), COUR_PKT_ACK, 0, ack, sack, credits);

	capwire_rx(ep, &h, NULL, 0);
}

void capwire_send(struct cour_ep *ep, const void *buf, size_t len, void *context,
		  uint64_t flags)
{
	struct cour_peer *peer = capwire_peer(ep);
	struct cour_txe *txe = cour_pool_get(&ep->pep.txe_pool);

	cr_assert_not_null(txe);
	memset(txe, 0, sizeof(*txe));
	ep->pep.tx_outstanding++;
	txe->context = context;
	txe->op_flags = flags | FI_COMPLETION;
	txe->cq_flags = FI_SEND | FI_MSG;
	txe->msg_len = len;
	txe->msg_id = peer->next_msg_id++;
	txe->iov[0].iov_base = (void *)buf;
	txe->iov[0].iov_len = len;
	txe->iov_count = 1;
	if (len > cour_params.eager_max) {
		txe->op_type = COUR_PKT_RTS;
	} else {
		txe->op_type = COUR_PKT_EAGER;
		txe->total_len = len;
		if (flags & FI_DELIVERY_COMPLETE)
			txe->hdr_flags |= COUR_F_DC;
	}
	cour_peer_enqueue(peer, txe);
}

size_t capwire_count(uint8_t type)
{
	size_t n = 0;

	for (size_t i = 0; i < capwire.count; i++)
		n += capwire.pkts[i].hdr.base.type == type;
	return n;
}

const struct capwire_pkt *capwire_nth(uint8_t type, size_t nth)
{
	for (size_t i = 0; i < capwire.count; i++)
		if (capwire.pkts[i].hdr.base.type == type && nth-- == 0)
			return &capwire.pkts[i];
	return NULL;
}

const struct capwire_pkt *capwire_last(void)
{
	return capwire.count ? &capwire.pkts[capwire.count - 1] : NULL;
}

size_t capwire_cq_count(const struct cour_cq *cq)
{
	return cq->count;
}

const struct cour_cq_entry *capwire_cq_entry(const struct cour_cq *cq, size_t i)
{
	if (i >= cq->count)
		return NULL;
	return &cq->ring[(cq->head + i) & (cq->ring_cap - 1)];
}

size_t capwire_cq_err_count(const struct cour_cq *cq)
{
	return cq->err_count;
}

const struct fi_cq_err_entry *capwire_cq_err(const struct cour_cq *cq, size_t i)
{
	const struct cour_cq_err *e = cq->errs;

	while (e && i--)
		e = e->next;
	return e ? &e->e : NULL;
}
