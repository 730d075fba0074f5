/*
 * Garbage on the real UDP wire: while endpoint A streams messages to endpoint B, other sockets
 * flood B's address with packets that must all be dropped and counted, and none may disturb the
 * stream. Everything runs in this one thread with manual progress, so reading the endpoints'
 * engine state between calls (sessions, rx_next) is race-free; that is how the test crafts
 * headers that pass every check but one.
 *
 * Sources of garbage:
 *   G  a plain UDP socket of our own. It also plays a courier peer (it opens a session with a
 *      PROBE) so that its sequenced packets reach the handlers (messages, RMA, atomics), in
 *      order, each invalid there in one way.
 *   S  a raw IP socket that sends as A's address (needs CAP_NET_RAW; skipped, and said so,
 *      without it): packets in A's session that must be dropped without touching A's stream,
 *      and replays of A's real packets captured on lo with a packet socket.
 * B's socket may drop datagrams itself when its buffer is full; those never reach courier, so
 * every expected count is lowered by the kernel's drop count for B's socket (/proc/net/udp).
 */
#include "fi/cour_ep.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define N_MSGS       2000
#define MAX_LEN      (256 * 1024)
#define RX_DEPTH     64
#define TX_DEPTH     32
#define GUARD        64
#define G_PER_MSG    12           /* garbage packets sent before each send */
#define CAP_MAX      32           /* A's packets captured for replay */
#define CAP_MSGS     100          /* ...during the first messages */
#define STREAM_TAG   0x5a17000000000000ULL
#define LIMIT_MS     30000
#define SEED         0x6a7b5eedULL

struct op {
	int        done;
	int        err;
	size_t     len;
	uint64_t   flags, data, tag;
	fi_addr_t  src;
	char      *buf;
	size_t     want_len;
};

static struct {
	struct fi_info    *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av     *av;
	struct fid_cq     *cq_a, *cq_b;
	struct fid_ep     *ep_a, *ep_b;
	fi_addr_t          fa_a, fa_b;
	int                g_fd, raw_fd, cap_fd;
	struct sockaddr_in b_sa, a_sa, g_sa;
	uint32_t           g_session;
	char              *cap[CAP_MAX];      /* A's sequenced packets, as captured on lo */
	size_t             cap_len[CAP_MAX], ncap;
	uint64_t           rng;
	int                extra;         /* completions nobody posted */
} t;

static struct cour_params saved_params;

/* ---- objects ---- */

static void ep_open(struct fid_ep **ep, struct fid_cq **cq)
{
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE };

	cr_assert_eq(fi_cq_open(t.domain, &cq_attr, cq, NULL), 0);
	cr_assert_eq(fi_endpoint(t.domain, t.info, ep, NULL), 0);
	cr_assert_eq(fi_ep_bind(*ep, &(*cq)->fid, FI_TRANSMIT | FI_RECV), 0);
	cr_assert_eq(fi_ep_bind(*ep, &t.av->fid, 0), 0);
	cr_assert_eq(fi_enable(*ep), 0);
}

static fi_addr_t av_add(struct fid_ep *ep, struct sockaddr_in *sa)
{
	size_t len = sizeof(*sa);
	fi_addr_t fa = FI_ADDR_NOTAVAIL;

	cr_assert_eq(fi_getname(&ep->fid, sa, &len), 0);
	cr_assert_eq(len, sizeof(*sa), "not an IPv4 name");
	cr_assert_eq(fi_av_insert(t.av, sa, 1, &fa, 0, NULL), 1);
	return fa;
}

static void setup(void)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	struct sockaddr_in g = { .sin_family = AF_INET };
	socklen_t glen = sizeof(t.g_sa);

	saved_params = cour_params;
	memset(&t, 0, sizeof(t));
	t.g_fd = t.raw_fd = t.cap_fd = -1;
	t.rng = SEED;
	cour_params.wire = NULL;        /* the real UDP wire */
	cour_params.shm = 0;            /* ...between A and B too: the stream must cross it */
	cour_params.unexp_max = 0;      /* credits bound unexpected messages (no early return) */
	cour_params.manual_thread = 0;  /* everything in this thread, as the counts assume */
	cr_assert_not_null(hints);
	hints->ep_attr->type = FI_EP_RDM;
	/* RMA and atomics too: the forged RMA packets must reach their handlers */
	hints->caps = FI_MSG | FI_TAGGED | FI_DIRECTED_RECV | FI_SOURCE | FI_RMA | FI_ATOMIC;
	hints->addr_format = FI_SOCKADDR_IN;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	hints->domain_attr->control_progress = FI_PROGRESS_MANUAL;
	cr_assert_eq(cour_prov.getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &t.info), 0);
	fi_freeinfo(hints);
	cr_assert_eq(cour_prov.fabric(t.info->fabric_attr, &t.fabric, NULL), 0);
	cr_assert_eq(fi_domain(t.fabric, t.info, &t.domain, NULL), 0);
	cr_assert_eq(fi_av_open(t.domain, &av_attr, &t.av, NULL), 0);
	ep_open(&t.ep_a, &t.cq_a);
	ep_open(&t.ep_b, &t.cq_b);
	t.fa_a = av_add(t.ep_a, &t.a_sa);
	t.fa_b = av_add(t.ep_b, &t.b_sa);

	t.g_fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	cr_assert_geq(t.g_fd, 0);
	g.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(bind(t.g_fd, (struct sockaddr *)&g, sizeof(g)), 0);
	cr_assert_eq(getsockname(t.g_fd, (struct sockaddr *)&t.g_sa, &glen), 0);
	t.g_session = 0x6a6b6c6du;
	/* sends as A's address; without CAP_NET_RAW this part is skipped */
	t.raw_fd = socket(AF_INET, SOCK_RAW, IPPROTO_RAW);
}

static void teardown(void)
{
	if (t.g_fd >= 0)
		close(t.g_fd);
	if (t.raw_fd >= 0)
		close(t.raw_fd);
	if (t.cap_fd >= 0)
		close(t.cap_fd);
	for (size_t i = 0; i < t.ncap; i++)
		free(t.cap[i]);
	struct fid *fids[] = {
		t.ep_a ? &t.ep_a->fid : NULL, t.ep_b ? &t.ep_b->fid : NULL,
		t.cq_a ? &t.cq_a->fid : NULL, t.cq_b ? &t.cq_b->fid : NULL,
		t.av ? &t.av->fid : NULL, t.domain ? &t.domain->fid : NULL,
		t.fabric ? &t.fabric->fid : NULL,
	};
	for (size_t i = 0; i < COUR_ARRAY_SIZE(fids); i++)
		if (fids[i])
			cr_assert_eq(fi_close(fids[i]), 0);
	fi_freeinfo(t.info);
	cour_params = saved_params;
}

TestSuite(garbage, .init = setup, .fini = teardown, .timeout = 90);

static struct cour_ep *ep_a(void) { return cour_ep_of(t.ep_a); }
static struct cour_ep *ep_b(void) { return cour_ep_of(t.ep_b); }

/* B's peer for a sockaddr (A's, or G's), as B keys it. */
static struct cour_peer *b_peer(const struct sockaddr_in *sa)
{
	struct cour_ep *b = ep_b();
	struct cour_addr addr;
	struct cour_peer *p;

	cour_addr_from_sockaddr(&addr, sa, sizeof(*sa));
	addr.is_v4 = b->pep.wire.addr.is_v4;
	HASH_FIND(hh, b->pep.peers, &addr, sizeof(addr), p);
	return p;
}

static struct fi_courier_stats stats_of(struct fid_ep *ep)
{
	struct fi_courier_ops_ep *ops = NULL;
	struct fi_courier_stats s;

	cr_assert_eq(fi_open_ops(&ep->fid, FI_COURIER_EP_OPS, 0, (void **)&ops, NULL), 0);
	cr_assert_eq(ops->get_stats(ep, &s, sizeof(s)), 0);
	return s;
}

/* ---- data ---- */

static uint64_t rnd(void)
{
	t.rng ^= t.rng << 13;
	t.rng ^= t.rng >> 7;
	t.rng ^= t.rng << 17;
	return t.rng;
}

static void fill(char *p, size_t len, uint64_t key)
{
	uint64_t x = key * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL;

	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (char)(x >> 24);
	}
}

/* Message k's length: mostly small, some eager-sized, a tenth rendezvous; the edges first. */
static size_t msg_len(size_t k)
{
	/* on loopback one packet carries COUR_MAX_PKT - COUR_PKT_HDR_LEN bytes */
	static const size_t edge[] = { 1, 65536, 65537, MAX_LEN, COUR_MAX_PKT - COUR_PKT_HDR_LEN,
				       COUR_MAX_PKT - COUR_PKT_HDR_LEN + 1 };
	uint64_t x = (k + 1) * 0x2545f4914f6cdd1dULL;
	size_t r = (size_t)(x >> 33);

	if (k < COUR_ARRAY_SIZE(edge))
		return edge[k];
	switch (r % 10) {
	case 0: case 1: case 2: case 3: return 1 + r % 64;
	case 4: case 5: case 6: return 65 + r % 8128;
	case 7: case 8: return 8193 + r % (65536 - 8192);
	default: return 65537 + r % (MAX_LEN - 65536);
	}
}

/* ---- completions ---- */

static void record(struct op *op, const struct fi_cq_tagged_entry *e, fi_addr_t src, int err)
{
	if (!op) {
		t.extra++;
		return;
	}
	cr_assert_eq(op->done, 0, "operation %p completed twice", (void *)op);
	op->done = 1;
	op->err = err;
	op->len = e->len;
	op->flags = e->flags;
	op->data = e->data;
	op->tag = e->tag;
	op->src = src;
}

static void drain(struct fid_cq *cq)
{
	struct fi_cq_tagged_entry e[16];
	fi_addr_t src[16];
	ssize_t n;

	while ((n = fi_cq_readfrom(cq, e, 16, src)) != -FI_EAGAIN) {
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry ee = { 0 };
			struct fi_cq_tagged_entry te;

			cr_assert_eq(fi_cq_readerr(cq, &ee, 0), 1);
			te = (struct fi_cq_tagged_entry){ ee.op_context, ee.flags, ee.len, ee.buf,
							  ee.data, ee.tag };
			record(ee.op_context, &te, FI_ADDR_NOTAVAIL, ee.err);
			continue;
		}
		cr_assert_gt(n, 0, "fi_cq_readfrom: %zd", n);
		for (ssize_t k = 0; k < n; k++)
			record(e[k].op_context, &e[k], src[k], 0);
	}
}

static void pump(void)
{
	drain(t.cq_a);
	drain(t.cq_b);
}

/* ---- the kernel's view of B's socket ---- */

/* Datagrams the kernel dropped on B's socket, and bytes queued on it (/proc/net/udp). */
static void b_sock(uint64_t *drops, uint64_t *queued)
{
	FILE *f = fopen("/proc/net/udp", "r");
	char line[512];
	unsigned port = ntohs(t.b_sa.sin_port);

	*drops = *queued = 0;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		unsigned lport, txq, rxq;
		unsigned long long d;
		char *last;

		if (sscanf(line, " %*d: %*8x:%4x %*8x:%*4x %*2x %8x:%8x", &lport, &txq, &rxq) != 3 ||
		    lport != port)
			continue;
		last = strrchr(line, ' ');
		if (last && sscanf(last, "%llu", &d) == 1)
			*drops = d;
		*queued = rxq;
	}
	fclose(f);
}

/* ---- packets ---- */

static void hdr_crc(struct cour_pkt_hdr *h, size_t len)
{
	h->base.crc = 0;
	h->base.crc = cour_crc32c(0, h, len);
}

/* false when our own socket refused it (full): then it never left, and does not count */
static bool send_g(const void *buf, size_t len)
{
	ssize_t r = sendto(t.g_fd, buf, len, 0, (struct sockaddr *)&t.b_sa, sizeof(t.b_sa));

	cr_assert(r == (ssize_t)len || errno == EAGAIN || errno == ENOBUFS, "sendto: %s",
		  strerror(errno));
	return r == (ssize_t)len;
}

/* One UDP datagram from A's address and port to B's, built by hand. */
static bool send_spoofed(const void *payload, size_t len)
{
	static char pkt[65536];
	struct iphdr *ip = (struct iphdr *)pkt;
	struct udphdr *udp = (struct udphdr *)(ip + 1);
	ssize_t r;

	cr_assert_leq(len, sizeof(pkt) - sizeof(*ip) - sizeof(*udp) - 1);
	memset(pkt, 0, sizeof(*ip) + sizeof(*udp));
	ip->version = 4;
	ip->ihl = 5;
	ip->ttl = 64;
	ip->protocol = IPPROTO_UDP;
	ip->tot_len = htons((uint16_t)(sizeof(*ip) + sizeof(*udp) + len));
	ip->saddr = t.a_sa.sin_addr.s_addr;
	ip->daddr = t.b_sa.sin_addr.s_addr;
	udp->source = t.a_sa.sin_port;
	udp->dest = t.b_sa.sin_port;
	udp->len = htons((uint16_t)(sizeof(*udp) + len));
	udp->check = 0;                 /* none: allowed for UDP over IPv4 */
	memcpy(udp + 1, payload, len);
	len += sizeof(*ip) + sizeof(*udp);
	r = sendto(t.raw_fd, pkt, len, 0, (struct sockaddr *)&t.b_sa, sizeof(t.b_sa));
	cr_assert(r == (ssize_t)len || errno == EAGAIN || errno == ENOBUFS, "raw sendto: %s",
		  strerror(errno));
	return r == (ssize_t)len;
}

/* A sequenced header that B would accept from the peer behind p (sessions, seq = rx_next),
 * with acknowledgement fields that change nothing at B. */
static struct cour_pkt_hdr valid_hdr(const struct cour_peer *p, uint32_t src_session)
{
	struct cour_pkt_hdr h;

	memset(&h, 0, sizeof(h));
	h.base.version = COUR_WIRE_VERSION;
	h.base.type = COUR_PKT_EAGER;
	h.base.src_session = src_session;
	h.base.dst_session = p ? p->local_session : 0;
	h.base.seq = p ? p->rx_next : 0;
	h.base.ack = p ? p->tx_una - 0x40000000u : 0;
	h.base.credits = 0;
	h.msg.msg_id = (uint32_t)rnd();
	h.msg.tag = STREAM_TAG;
	return h;
}


/* Where B counts each kind of garbage. */
enum { CAT_BAD, CAT_STALE, CAT_WINDOW, CAT_DUP, CAT_N };
static const char *const cat_name[CAT_N] = { "drop_bad_hdr", "drop_stale_session", "drop_window",
					     "dup_rcvd" };
static const size_t cat_off[CAT_N] = {
	offsetof(struct fi_courier_stats, drop_bad_hdr),
	offsetof(struct fi_courier_stats, drop_stale_session),
	offsetof(struct fi_courier_stats, drop_window),
	offsetof(struct fi_courier_stats, dup_rcvd),
};
#define CAT_STAT(s, c) (*(const uint64_t *)((const char *)&(s) + cat_off[c]))

/*
 * One packet that fails exactly one of B's checks, from G or (spoof) from A's address, in A's
 * or G's session as B knows it. Returns its category, or -1 when it could not be sent.
 */
static int garbage_one(unsigned kind, bool spoof)
{
	static char buf[COUR_MAX_PKT + 1024];
	struct cour_peer *p = b_peer(spoof ? &t.a_sa : &t.g_sa);
	struct cour_pkt_hdr h;
	size_t len = COUR_PKT_HDR_LEN;
	uint32_t flip = 0;
	int cat = CAT_BAD;

	cr_assert_not_null(p, "B has no session with %s", spoof ? "A" : "G");
	h = valid_hdr(p, spoof ? p->remote_session : t.g_session);
	switch (kind % 12) {
	case 0:         /* random bytes; a leading 1 would be our version, so it is not */
		len = rnd() % 1501;
		for (size_t i = 0; i < len; i++)
			buf[i] = (char)rnd();
		if (len && buf[0] == COUR_WIRE_VERSION)
			buf[0] = (char)0x81;
		goto out;
	case 1:         /* a valid header cut short */
		hdr_crc(&h, COUR_PKT_HDR_LEN);
		len = rnd() % COUR_PKT_HDR_LEN;
		memcpy(buf, &h, len);
		goto out;
	case 2: h.base.version = (uint8_t)(COUR_WIRE_VERSION + 1 + rnd() % 255); break;
	case 3: flip = 1u << (rnd() % 32); break;               /* applied after the crc */
	case 4: h.base.type = (uint8_t)(COUR_PKT_TYPE_MAX + rnd() % (257 - COUR_PKT_TYPE_MAX));
		break;                                          /* 9..255, or 0 */
	case 5:         /* a flag no version defines: any bit from COUR_F_ALL's next to 15 */
		h.base.flags |= (uint16_t)((COUR_F_ALL + 1u) <<
					   (rnd() % (16 - __builtin_ctz(COUR_F_ALL + 1u))));
		break;
	case 6:         /* says the crc covers the payload, but it covers only the header */
		h.base.flags |= COUR_F_PCSUM;
		hdr_crc(&h, COUR_PKT_HDR_LEN);
		memcpy(buf, &h, len);
		memset(buf + len, 0x3c, 100);
		len += 100;
		goto out;
	case 7:         /* larger than any courier packet: the socket truncates it */
		if ((kind / 12) % 16 == 0) {
			h.msg.total_len = 65500;
			hdr_crc(&h, COUR_PKT_HDR_LEN);
			memcpy(buf, &h, len);
			memset(buf + len, 0x7e, 65500 - len);
			len = 65500;
			goto out;
		}
		h.base.version = 0xff;
		break;
	case 8: h.base.dst_session ^= 0x00010001u; cat = CAT_STALE; break; /* another B */
	case 9: h.base.src_session = 0; cat = CAT_STALE; break;
	case 10: h.base.seq = p->rx_next + 0x40000000u; cat = CAT_WINDOW; break; /* far ahead */
	default: h.base.seq = p->rx_next - 0x40000000u; cat = CAT_DUP; break;   /* long had */
	}
	hdr_crc(&h, COUR_PKT_HDR_LEN);
	h.base.crc ^= flip;
	memcpy(buf, &h, len);
out:
	if (!(spoof ? send_spoofed(buf, len) : send_g(buf, len)))
		return -1;
	return cat;
}

/* G's own session with B: a PROBE from a new peer gets a peer struct and an answer. */
static void g_session_open(void)
{
	struct cour_pkt_hdr h;
	uint64_t end = cour_now_us() + 5000000, next = 0;
	struct cour_peer *p;

	memset(&h, 0, sizeof(h));
	h.base.version = COUR_WIRE_VERSION;
	h.base.type = COUR_PKT_ACK;
	h.base.flags = COUR_F_PROBE;
	h.base.src_session = t.g_session;
	hdr_crc(&h, COUR_BASE_HDR_LEN);
	while (!(p = b_peer(&t.g_sa)) || p->remote_session != t.g_session) {
		cr_assert_lt(cour_now_us(), end, "B never took G's session");
		if (cour_now_us() >= next) {
			send_g(&h, COUR_BASE_HDR_LEN);
			next = cour_now_us() + 100000;
		}
		pump();
	}
}

/*
 * G's in-order packets: the next ones in G's sequence, so that B hands them to the message
 * handlers, in order, and each is invalid there. A burst of IO_BURST, and the next burst once B
 * has taken them all (after 200 ms the burst is sent again from B's rx_next: what B already
 * had counts as duplicates then). Every packet B takes from G this way is invalid, so the
 * number dropped by the handlers is exactly how far B's rx_next for G moved.
 */
#define IO_BURST 16

struct inorder {
	bool      started;
	uint32_t  start, until;       /* B's rx_next for G at the start, and when a burst is in */
	uint64_t  sent_us;
	unsigned  kind;
	uint64_t  processed;          /* in-order invalid packets sent (each lands bad or stale) */
	uint64_t  bursts;             /* each can reset G's session once, at its first packet */
	uint32_t  session;            /* B's session with G the last burst was made for */
};

static void g_inorder_one(const struct cour_peer *p, uint32_t seq, unsigned kind)
{
	struct cour_ep *b = ep_b();
	char buf[COUR_PKT_HDR_LEN + 64];
	struct cour_pkt_hdr h;
	size_t plen = 0;

	h = valid_hdr(p, t.g_session);
	h.base.seq = seq;
	switch (kind % 12) {
	case 0:         /* a new message larger than any eager message may be */
		h.msg.total_len = COUR_EAGER_LIMIT + 1 + rnd() % 1000;
		plen = 16;
		break;
	case 1:         /* more payload than the message it starts */
		h.msg.total_len = 10;
		plen = 20;
		break;
	case 2:         /* a middle fragment of no message */
		h.msg.offset = 1 + rnd() % 100000;
		h.msg.total_len = h.msg.offset + 64;
		plen = 64;
		break;
	case 3:         /* rendezvous data for a receive of A's, if B has one waiting */
		h.base.type = COUR_PKT_RDATA;
		h.msg.rx_id = (uint32_t)rnd();
		if (b->pep.rdv_by_id) {
			h.msg.rx_id = b->pep.rdv_by_id->rx_id;
			h.msg.offset = b->pep.rdv_by_id->received;
		}
		plen = 8;
		break;
	case 4:         /* clear to send for a rendezvous B never announced */
		h.base.type = COUR_PKT_CTS;
		h.msg.total_len = 1000;
		break;
	case 5:         /* delivery notice for a send B never made */
		h.base.type = COUR_PKT_DONE;
		break;
	case 6:         /* a write longer than any message */
		h.base.type = COUR_PKT_WRITE;
		h.msg.total_len = COUR_MAX_MSG_SIZE + 1;
		plen = 8;
		break;
	case 7:         /* a later fragment of a write that is not the one arriving */
		h.base.type = COUR_PKT_WRITE;
		h.msg.msg_id = p->rma_rx_id + 1;
		h.msg.offset = 100;
		h.msg.total_len = 200;
		plen = 8;
		break;
	case 8:
		h.base.type = COUR_PKT_READ_REQ;
		h.msg.total_len = COUR_MAX_MSG_SIZE + 1;
		break;
	case 9:         /* read data and an RMA answer for operations B never started */
		h.base.type = COUR_PKT_READ_RESP;
		plen = 8;
		break;
	case 10:
		h.base.type = COUR_PKT_RMA_RESP;
		break;
	default:        /* an atomic with no such operation */
		h.base.type = COUR_PKT_ATOMIC;
		h.msg.rx_id = 0xff | 1u << 18;
		plen = 8;
		break;
	}
	memcpy(buf, &h, sizeof(h));
	memset(buf + sizeof(h), 0x5d, plen);
	hdr_crc((struct cour_pkt_hdr *)buf, COUR_PKT_HDR_LEN);
	send_g(buf, COUR_PKT_HDR_LEN + plen);
}

/* A burst of G's is in B's socket and its first packet, which resets G's session, is not yet
 * read: a packet of G's made for the session B has now will find it gone and be dropped as
 * stale instead of under the check it was made to fail. */
static bool g_burst_pending(const struct inorder *io)
{
	const struct cour_peer *p = b_peer(&t.g_sa);

	return io->started && p->local_session == io->session && cour_seq_lt(p->rx_next, io->until);
}

static void g_inorder(struct inorder *io, bool may_send)
{
	struct cour_peer *p = b_peer(&t.g_sa);
	bool in;

	if (!io->started || p->local_session != io->session) {
		/* first burst, or B reset G's session: its first invalid packet broke it */
		io->started = true;
		io->session = p->local_session;
		io->start = io->until = p->rx_next;
	}
	in = cour_seq_ge(p->rx_next, io->until);
	if (!may_send || (!in && cour_now_us() - io->sent_us < 200000))
		return;
	for (uint32_t i = 0; i < IO_BURST; i++)
		g_inorder_one(p, p->rx_next + i, io->kind++);
	io->processed += IO_BURST;
	io->bursts++;
	io->until = p->rx_next + IO_BURST;
	io->sent_us = cour_now_us();
}

/* Whatever B sent G (ACKs, RESETs) is read and thrown away. */
static void g_drain(void)
{
	char buf[256];

	while (recv(t.g_fd, buf, sizeof(buf), MSG_DONTWAIT) >= 0)
		;
}

/* ---- capture of A's real packets on lo, for replay ---- */

static void cap_open(void)
{
	struct sockaddr_ll sll = {
		.sll_family = AF_PACKET,
		.sll_protocol = htons(ETH_P_IP),
		.sll_ifindex = (int)if_nametoindex("lo"),
	};

	t.cap_fd = socket(AF_PACKET, SOCK_DGRAM | SOCK_NONBLOCK, htons(ETH_P_IP));
	if (t.cap_fd < 0)
		return;
	if (!sll.sll_ifindex || bind(t.cap_fd, (struct sockaddr *)&sll, sizeof(sll)) != 0) {
		close(t.cap_fd);
		t.cap_fd = -1;
	}
}

/* Keep A's sequenced packets to B (one copy each: lo shows them going out and coming in). */
static void cap_poll(void)
{
	static char pkt[70000];
	struct sockaddr_ll from;
	socklen_t fl = sizeof(from);
	ssize_t n;

	while (t.cap_fd >= 0 && t.ncap < CAP_MAX &&
	       (n = recvfrom(t.cap_fd, pkt, sizeof(pkt), 0, (struct sockaddr *)&from, &fl)) > 0) {
		struct iphdr *ip = (struct iphdr *)pkt;
		struct udphdr *udp = (struct udphdr *)(pkt + ip->ihl * 4);
		const struct cour_base_hdr *h = (const void *)(udp + 1);
		size_t len = (size_t)n - ip->ihl * 4u - sizeof(*udp);

		fl = sizeof(from);
		if (from.sll_pkttype == PACKET_OUTGOING || ip->protocol != IPPROTO_UDP ||
		    (size_t)n < ip->ihl * 4u + sizeof(*udp) + COUR_PKT_HDR_LEN ||
		    udp->source != t.a_sa.sin_port || udp->dest != t.b_sa.sin_port ||
		    !cour_pkt_sequenced(h->type))
			continue;
		t.cap[t.ncap] = malloc(len);
		cr_assert_not_null(t.cap[t.ncap]);
		memcpy(t.cap[t.ncap], h, len);
		t.cap_len[t.ncap++] = len;
	}
}

/* ---- the stream ---- */

static struct op txo[N_MSGS], rxo[N_MSGS];

static void check_rx(size_t k)
{
	const struct op *o = &rxo[k];
	char *want;
	size_t len = msg_len(k);

	cr_assert_eq(o->err, 0, "receive %zu: error %d (%s)", k, o->err, fi_strerror(o->err));
	cr_assert_eq(o->flags, FI_RECV | FI_TAGGED | FI_REMOTE_CQ_DATA, "receive %zu: flags %#"
		     PRIx64, k, o->flags);
	cr_assert_eq(o->len, len, "receive %zu: %zu bytes, want %zu", k, o->len, len);
	cr_assert_eq(o->data, (uint64_t)k, "receive %zu holds message %" PRIu64 ": out of order",
		     k, o->data);
	cr_assert_eq(o->tag, STREAM_TAG, "receive %zu: tag %#" PRIx64, k, o->tag);
	cr_assert_eq(o->src, t.fa_a, "receive %zu: source %" PRIu64, k, o->src);
	want = malloc(len);
	cr_assert_not_null(want);
	fill(want, len, k);
	cr_assert(!memcmp(o->buf, want, len), "receive %zu: payload corrupt", k);
	free(want);
	for (size_t i = len; i < len + GUARD; i++)
		cr_assert_eq((unsigned char)o->buf[i], 0xee, "receive %zu: byte %zu past the end "
			     "written", k, i);
}

Test(garbage, flood_during_stream)
{
	struct fi_courier_stats b0, b1, a1;
	uint64_t sent[CAT_N] = { 0 }, kd0, kd1, queued, end, settle;
	uint64_t may_stale[CAT_N] = { 0 }; /* made to fail c, but may land as stale instead */
	uint64_t may_stale_all = 0;
	size_t rx_posted = 0, tx_posted = 0, rx_done = 0, tx_done = 0, replays = 0;
	struct inorder io = { 0 };
	bool spoof = t.raw_fd >= 0;
	unsigned kind = 0;
	int cat;

	if (!spoof)
		cr_log_info("no CAP_NET_RAW: no garbage as A's address and no replays, only from a "
			    "socket of our own\n");
	g_session_open();
	if (spoof)
		cap_open();
	b0 = stats_of(t.ep_b);
	b_sock(&kd0, &queued);

	end = cour_now_us() + LIMIT_MS * 1000ull;
	while (tx_done < N_MSGS || rx_done < N_MSGS) {
		cr_assert_lt(cour_now_us(), end, "%zu of %d sends and %zu receives complete after "
			     "%d ms", tx_done, N_MSGS, rx_done, LIMIT_MS);
		while (rx_posted < N_MSGS && rx_posted - rx_done < RX_DEPTH) {
			struct op *o = &rxo[rx_posted];
			ssize_t r;

			o->want_len = msg_len(rx_posted);
			o->buf = malloc(o->want_len + GUARD);
			cr_assert_not_null(o->buf);
			memset(o->buf, 0xee, o->want_len + GUARD);
			r = fi_trecv(t.ep_b, o->buf, o->want_len, NULL, t.fa_a, STREAM_TAG, 0, o);
			if (r == -FI_EAGAIN) {
				free(o->buf);
				break;
			}
			cr_assert_eq(r, 0, "fi_trecv: %zd", r);
			rx_posted++;
		}
		/* a send only when its receive waits: B must never hold an unexpected message */
		while (tx_posted < rx_posted && tx_posted - tx_done < TX_DEPTH) {
			struct op *o = &txo[tx_posted];
			bool after_cap = tx_posted >= CAP_MSGS;
			ssize_t r;

			for (int j = 0; j < G_PER_MSG; j++) {
				bool as_a = spoof && after_cap && (j & 1);
				bool pending = !as_a && g_burst_pending(&io);

				cat = garbage_one(kind++, as_a);
				if (cat < 0)
					continue;
				if (pending && (cat == CAT_WINDOW || cat == CAT_DUP)) {
					may_stale[cat]++;
					may_stale_all++;
				} else {
					sent[cat]++;
				}
			}
			/* a copy of a packet B has had: one of the two is a duplicate */
			if (spoof && after_cap && t.ncap && tx_posted % 4 == 0 &&
			    send_spoofed(t.cap[replays % t.ncap], t.cap_len[replays % t.ncap])) {
				replays++;
				sent[CAT_DUP]++;
			}
			if (tx_posted == CAP_MSGS && t.cap_fd >= 0) {
				close(t.cap_fd);
				t.cap_fd = -1;
			}
			o->want_len = msg_len(tx_posted);
			o->buf = malloc(o->want_len);
			cr_assert_not_null(o->buf);
			fill(o->buf, o->want_len, tx_posted);
			r = fi_tsenddata(t.ep_a, o->buf, o->want_len, NULL, tx_posted, t.fa_b,
					 STREAM_TAG, o);
			if (r == -FI_EAGAIN) {
				free(o->buf);
				break;
			}
			cr_assert_eq(r, 0, "fi_tsenddata: %zd", r);
			tx_posted++;
		}
		g_inorder(&io, true);
		g_drain();
		cap_poll();
		pump();
		while (tx_done < tx_posted && txo[tx_done].done)
			tx_done++;
		while (rx_done < rx_posted && rxo[rx_done].done)
			rx_done++;
	}

	/* everything queued on B's socket is read and judged before counting (10 s at most: a
	 * loaded machine under ASan took more than 2 and counted 2 datagrams short) */
	settle = cour_now_us() + 10000000;
	do {
		pump();
		g_drain();
		g_inorder(&io, false);
		b_sock(&kd1, &queued);
	} while ((queued || cour_seq_lt(b_peer(&t.g_sa)->rx_next, io.until)) &&
		 cour_now_us() < settle);
	for (int i = 0; i < 100; i++)
		pump();
	b_sock(&kd1, &queued);
	b1 = stats_of(t.ep_b);
	a1 = stats_of(t.ep_a);

	/* completions: exactly one per operation, all successful, nothing else */
	cr_assert_eq(t.extra, 0, "%d completions without a context", t.extra);
	for (size_t k = 0; k < N_MSGS; k++) {
		cr_assert_eq(txo[k].err, 0, "send %zu: error %d (%s)", k, txo[k].err,
			     fi_strerror(txo[k].err));
		cr_assert_eq(txo[k].flags, FI_SEND | FI_TAGGED, "send %zu: flags %#" PRIx64, k,
			     txo[k].flags);
		check_rx(k);
		free(txo[k].buf);
		free(rxo[k].buf);
	}
	cr_assert_eq(b1.rx_msgs - b0.rx_msgs, N_MSGS);
	cr_assert_eq(a1.tx_msgs, N_MSGS);
	cr_assert_eq(b1.unexpected_msgs, 0, "garbage became %" PRIu64 " messages",
		     b1.unexpected_msgs);
	/* A's session with B survives; G's own session is reset by its in-order invalid
	 * packets (they took sequence numbers a genuine sender needed), at most once each */
	cr_assert_eq(a1.peers_reset + a1.peers_unreachable + b1.peers_unreachable, 0,
		     "a session died: resets %" PRIu64 "/%" PRIu64 ", unreachable %" PRIu64 "/%"
		     PRIu64, a1.peers_reset, b1.peers_reset, a1.peers_unreachable,
		     b1.peers_unreachable);
	cr_assert_leq(b1.peers_reset, io.bursts);
	cr_assert_gt(b1.peers_reset, 0, "G's invalid in-order packets reset nothing");
	cr_assert_eq(HASH_COUNT(ep_b()->pep.peers), 2, "B has %u peers, want A and G",
		     HASH_COUNT(ep_b()->pep.peers));
	cr_assert_eq(HASH_COUNT(ep_a()->pep.peers), 1);

	/* every garbage packet that reached B was dropped and counted under its cause; none
	 * counted where it does not belong (duplicates also come from A's own resends) */
	/* G's in-order invalid packets: the first of a session is dropped as bad and resets
	 * it, those still carrying the old session are then dropped as stale */
	cr_log_info("garbage: %" PRIu64 " bad, %" PRIu64 " stale, %" PRIu64 " window, %" PRIu64
		    " dup (%zu replays of %zu captured packets, %" PRIu64 " in-order invalid); "
		    "kernel drops on B's socket %" PRIu64 "; A resent %" PRIu64 "+%" PRIu64 "\n",
		    sent[CAT_BAD], sent[CAT_STALE], sent[CAT_WINDOW], sent[CAT_DUP], replays,
		    t.ncap, io.processed, kd1 - kd0, a1.retrans_timeout, a1.retrans_fast);
	for (int c = 0; c < CAT_N; c++) {
		uint64_t got = CAT_STAT(b1, c) - CAT_STAT(b0, c);
		uint64_t floor = sent[c] > kd1 - kd0 ? sent[c] - (kd1 - kd0) : 0;

		cr_log_info("  %s: %" PRIu64 " sent (+%" PRIu64 " that may be stale), %" PRIu64
			    " counted\n", cat_name[c], sent[c], may_stale[c], got);
		cr_assert_geq(got, floor, "%s grew by %" PRIu64 ", want at least %" PRIu64,
			      cat_name[c], got, floor);
		if (c != CAT_DUP) {
			uint64_t most = sent[c] + may_stale[c] +
					((c == CAT_BAD || c == CAT_STALE) ? io.processed : 0) +
					(c == CAT_STALE ? may_stale_all : 0);
			cr_assert_leq(got, most, "%s grew by %" PRIu64 " for %" PRIu64
				      " packets", cat_name[c], got, most);
		}
	}
	{
		/* those that may have gone stale landed somewhere all the same */
		uint64_t all = 0, want = may_stale_all + io.processed;

		for (int c = 0; c < CAT_N; c++) {
			all += CAT_STAT(b1, c) - CAT_STAT(b0, c);
			want += sent[c];
		}
		want = want > kd1 - kd0 ? want - (kd1 - kd0) : 0;
		cr_assert_geq(all, want, "all drops grew by %" PRIu64 ", want %" PRIu64, all, want);
	}
	{
		uint64_t both = CAT_STAT(b1, CAT_BAD) - CAT_STAT(b0, CAT_BAD) +
				CAT_STAT(b1, CAT_STALE) - CAT_STAT(b0, CAT_STALE);
		uint64_t want = sent[CAT_BAD] + sent[CAT_STALE] + io.processed;

		want = want > kd1 - kd0 ? want - (kd1 - kd0) : 0;
		cr_assert_geq(both, want, "bad + stale grew by %" PRIu64 ", want %" PRIu64, both,
			      want);
	}
	/* the floors mean something only if the kernel delivered nearly everything */
	cr_assert_lt(4 * (kd1 - kd0), sent[CAT_BAD] + sent[CAT_STALE] + sent[CAT_WINDOW] +
		     sent[CAT_DUP], "B's socket dropped %" PRIu64 " datagrams", kd1 - kd0);
	cr_assert_geq(io.processed, 500, "only %" PRIu64 " in-order invalid packets",
		      io.processed);
	if (spoof)
		cr_assert_gt(replays, 0, "nothing captured to replay");
}

/* ---- problems the fuzzer found, kept fixed ---- */

/* One packet into B from A's address, in process, the way the wires hand packets over. */
static void inject_b(const void *pkt, size_t len)
{
	struct cour_ep *b = ep_b();
	struct sockaddr_storage ss;
	void *buf;

	memset(&ss, 0, sizeof(ss));
	memcpy(&ss, &t.a_sa, sizeof(t.a_sa));
	cour_lock_acquire(&b->domain->lock);
	buf = cour_pool_get(&b->pep.rxbuf_pool);
	cr_assert_not_null(buf);
	memcpy(buf, pkt, len);
	buf = cour_ep_rx_packet(&b->pep, buf, len, &ss, sizeof(t.a_sa));
	cour_pool_put(&b->pep.rxbuf_pool, buf);
	cour_lock_release(&b->domain->lock);
}

/* One 2000-byte message A -> B: 0 when it arrived intact, else an error either side saw (-1:
 * nothing within ms). Operations that did not finish keep their memory for ever. */
static int exchange(uint64_t key, int ms)
{
	struct op *o = calloc(2, sizeof(*o));
	uint64_t end = cour_now_us() + (uint64_t)ms * 1000;
	int ret;

	cr_assert_not_null(o);
	o[0].buf = malloc(2000);
	o[1].buf = malloc(2000);
	cr_assert(o[0].buf && o[1].buf);
	fill(o[0].buf, 2000, key);
	cr_assert_eq(fi_trecv(t.ep_b, o[1].buf, 2000, NULL, t.fa_a, STREAM_TAG | key, 0, &o[1]),
		     0);
	cr_assert_eq(fi_tsenddata(t.ep_a, o[0].buf, 2000, NULL, key, t.fa_b, STREAM_TAG | key,
				  &o[0]), 0);
	while (!(o[0].done && (o[1].done || o[0].err)) && cour_now_us() < end)
		pump();
	if (!o[1].done) {
		fi_cancel(&t.ep_b->fid, &o[1]);
		pump();
	}
	ret = o[0].err ? o[0].err : o[1].err ? o[1].err : !o[0].done || !o[1].done ? -1 :
	      memcmp(o[0].buf, o[1].buf, 2000) ? -2 : 0;
	if (o[0].done && o[1].done) {
		free(o[0].buf);
		free(o[1].buf);
		free(o);
	}
	return ret;
}

/*
 * A late copy of the first packet of an earlier session of A (sent before A had heard from B,
 * so with dst_session 0) makes B take it for a restart of A. B starts over with a new session;
 * A, which knows B's current session, sees B's new one and starts over too, with a new session
 * of its own, which B in turn takes for another restart of A... Every exchange after that fails
 * with FI_ECONNRESET, for ever: the pair never converges unless one side forgets the other
 * (dst_session 0 again).
 */
Test(garbage, old_session_packet_does_not_livelock)
{
	struct cour_peer *pa;
	struct cour_pkt_hdr h;
	uint32_t old;
	uint64_t end;
	int i, r = -1;

	cr_assert_eq(exchange(1, 2000), 0);
	/* A loses B (as after peer_timeout) and starts a new session; the pair converges */
	pa = cour_peer_by_addr_locked(&ep_a()->pep, &ep_b()->pep.wire.addr, false);
	cr_assert_not_null(pa);
	old = pa->local_session;
	cour_lock_acquire(&ep_a()->domain->lock);
	cour_peer_reset(pa, COUR_E_UNREACHABLE);
	cour_lock_release(&ep_a()->domain->lock);
	cr_assert_eq(exchange(2, 2000), 0, "no exchange after A's own restart");

	memset(&h, 0, sizeof(h));
	h.base.version = COUR_WIRE_VERSION;
	h.base.type = COUR_PKT_EAGER;
	h.base.src_session = old;
	h.msg.tag = STREAM_TAG;
	hdr_crc(&h, COUR_PKT_HDR_LEN);
	inject_b(&h, COUR_PKT_HDR_LEN);

	end = cour_now_us() + 5000000;
	for (i = 0; i < 50 && cour_now_us() < end; i++)
		if ((r = exchange(10 + (uint64_t)i, 500)) == 0)
			break;
	cr_assert_eq(r, 0, "%d exchanges after one stale packet all failed (last: %d); B saw %"
		     PRIu64 " restarts of A", i, r, stats_of(t.ep_b).peers_reset);
}

/*
 * A sender may have at most `credits` eager messages unconsumed at the receiver; B grants them
 * but does not check them, so a peer that ignores them (or packets forged in its session) makes
 * B keep any number of unexpected messages, each with a buffer of the size it announces (up to
 * COUR_EAGER_LIMIT, 16 MiB, for one 72-byte packet).
 */
Test(garbage, credits_bound_unexpected_messages)
{
	struct cour_ep *b = ep_b();
	struct cour_peer *pb;
	struct cour_rxmsg *m;
	size_t n = cour_params.credits + 16, held = 0;
	uint64_t bytes = 0;

	cr_assert_eq(exchange(1, 2000), 0);
	pb = b_peer(&t.a_sa);
	cr_assert_not_null(pb);
	for (size_t i = 0; i < n; i++) {
		char buf[COUR_PKT_HDR_LEN + 16];
		struct cour_pkt_hdr h = valid_hdr(pb, pb->remote_session);

		h.msg.total_len = 1 << 20;
		memcpy(buf, &h, sizeof(h));
		memset(buf + sizeof(h), 0x11, 16);
		hdr_crc((struct cour_pkt_hdr *)buf, COUR_PKT_HDR_LEN);
		inject_b(buf, sizeof(buf));
	}
	for (int k = 0; k < 2; k++)
		DL_FOREACH(k ? b->pep.rxq->utag : b->pep.rxq->umsg, m)
			if (m->peer == pb) {
				held++;
				bytes += m->total_len;
			}
	cr_assert_leq(held, cour_params.credits, "B holds %zu unexpected messages (%" PRIu64
		      " MiB announced) from a peer it granted %zu credits", held, bytes >> 20,
		      cour_params.credits);
}

/*
 * A train read in place (proto/cour_peer_rx.c, cour_ep_rx_placed_run): G sends one message in
 * two GSO calls of 1,472-byte datagrams; the first train goes through a packet buffer and
 * turns B's reading in place on, the second is read header by header into the receive. In
 * it one piece's header has a bit flipped in a field no other check reads (its CQ data), so
 * only its crc can tell: B must drop it, take the pieces before it, hold those after it, and
 * complete the message whole, with the right CQ data, once G sends that piece again intact.
 */
#define TRAIN_SEG   1472
#define TRAIN_PLEN  (TRAIN_SEG - COUR_PKT_HDR_LEN)
#define TRAIN_A     10            /* pieces in the first train */
#define TRAIN_N     30            /* pieces in the message */
#define TRAIN_BAD   15            /* the piece whose header is damaged in the second */

static void g_piece(char *out, const struct cour_peer *p, uint32_t seq0, uint32_t msg_id,
		    const char *msg, size_t i)
{
	struct cour_pkt_hdr h = valid_hdr(p, t.g_session);

	h.base.seq = seq0 + (uint32_t)i;
	h.base.flags = COUR_F_TAGGED | COUR_F_CQ_DATA;
	h.msg.msg_id = msg_id;
	h.msg.data = 0xd47a;
	h.msg.total_len = (uint64_t)TRAIN_N * TRAIN_PLEN;
	h.msg.offset = (uint64_t)i * TRAIN_PLEN;
	if (cour_params.checksum)
		h.base.flags |= COUR_F_PCSUM;     /* the crc covers the payload too */
	memcpy(out, &h, sizeof(h));
	memcpy(out + sizeof(h), msg + i * TRAIN_PLEN, TRAIN_PLEN);
	hdr_crc((struct cour_pkt_hdr *)out, cour_params.checksum ? TRAIN_SEG : COUR_PKT_HDR_LEN);
}

/* pieces [from, to) of the message in one UDP GSO call from G */
static void g_train(const struct cour_peer *p, uint32_t seq0, uint32_t msg_id, const char *msg,
		    size_t from, size_t to, size_t bad)
{
	static char buf[TRAIN_N * TRAIN_SEG];
	union { char b[CMSG_SPACE(sizeof(uint16_t))]; struct cmsghdr align; } ctl;
	struct iovec v = { buf, (to - from) * TRAIN_SEG };
	struct msghdr m = { .msg_name = &t.b_sa, .msg_namelen = sizeof(t.b_sa), .msg_iov = &v,
			    .msg_iovlen = 1, .msg_control = ctl.b, .msg_controllen = sizeof(ctl.b) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	uint16_t seg = TRAIN_SEG;

	for (size_t i = from; i < to; i++) {
		char *at = buf + (i - from) * TRAIN_SEG;

		g_piece(at, p, seq0, msg_id, msg, i);
		if (i == bad && cour_params.checksum)
			at[COUR_PKT_HDR_LEN + 700] ^= 0x04;     /* its payload, under the crc */
		else if (i == bad)
			((struct cour_pkt_hdr *)at)->msg.data ^= 1u << 20;
	}
	c->cmsg_level = IPPROTO_UDP;
	c->cmsg_type = UDP_SEGMENT;
	c->cmsg_len = CMSG_LEN(sizeof(seg));
	memcpy(CMSG_DATA(c), &seg, sizeof(seg));
	cr_assert_eq(sendmsg(t.g_fd, &m, 0), (ssize_t)v.iov_len, "GSO send: %s", strerror(errno));
}

/* progress until B's rx_next for G reaches seq (or its held count held), bounded */
static void b_wait_seq(const struct cour_peer *p, uint32_t seq, uint32_t held, const char *what)
{
	uint64_t end = cour_now_us() + 5000000;

	while (p->rx_next != seq || p->rx_held != held) {
		if (cour_now_us() >= end) {
			struct fi_courier_stats st = stats_of(t.ep_b);

			cr_log_error("B: drop_bad_hdr %" PRIu64 ", drop_stale_session %" PRIu64
				     ", udp_gro_trains %" PRIu64 ", rx_in_place %" PRIu64
				     ", rx_sock_drops %" PRIu64 "\n", st.drop_bad_hdr,
				     st.drop_stale_session, st.udp_gro_trains, st.rx_in_place,
				     st.rx_sock_drops);
		}
		cr_assert_lt(cour_now_us(), end, "%s: B's rx_next %u (want %u), held %u (want %u)",
			     what, p->rx_next, seq, p->rx_held, held);
		pump();
	}
}

static void damaged_piece_in_a_train(void)
{
	static char msg[TRAIN_N * TRAIN_PLEN], rbuf[TRAIN_N * TRAIN_PLEN + GUARD];
	struct fi_courier_stats s0, s1;
	struct op rx = { 0 };
	struct cour_peer *p;
	uint32_t seq0, id = 0x7a1d;
	char piece[TRAIN_SEG];

	cour_params.credits = 512;      /* B's grant to G when it meets it: the whole message */
	g_session_open();
	p = b_peer(&t.g_sa);
	cr_assert_not_null(p);
	seq0 = p->rx_next;
	fill(msg, sizeof(msg), 77);
	memset(rbuf, 0xee, sizeof(rbuf));
	cr_assert_eq(fi_trecv(t.ep_b, rbuf, sizeof(msg), NULL, FI_ADDR_UNSPEC, STREAM_TAG, 0,
			      &rx), 0);
	s0 = stats_of(t.ep_b);
	g_train(p, seq0, id, msg, 0, TRAIN_A, TRAIN_N);
	b_wait_seq(p, seq0 + TRAIN_A, 0, "first train");
	g_train(p, seq0, id, msg, TRAIN_A, TRAIN_N, TRAIN_BAD);
	b_wait_seq(p, seq0 + TRAIN_BAD, TRAIN_N - TRAIN_BAD - 1, "second train");
	s1 = stats_of(t.ep_b);
	cr_assert_eq(s1.udp_gro_trains - s0.udp_gro_trains, 2, "the pieces came in %" PRIu64
		     " trains, not 2", s1.udp_gro_trains - s0.udp_gro_trains);
	cr_assert_geq(s1.rx_in_place - s0.rx_in_place, TRAIN_BAD - TRAIN_A,
		      "only %" PRIu64 " pieces read in place",  s1.rx_in_place - s0.rx_in_place);
	cr_assert_eq(s1.drop_bad_hdr - s0.drop_bad_hdr, 1, "%" PRIu64 " pieces dropped, not "
		     "the damaged one", s1.drop_bad_hdr - s0.drop_bad_hdr);
	pump();
	cr_assert_eq(rx.done, 0, "the receive completed with a piece missing");

	g_piece(piece, p, seq0, id, msg, TRAIN_BAD);
	send_g(piece, sizeof(piece));
	b_wait_seq(p, seq0 + TRAIN_N, 0, "the piece sent again");
	for (uint64_t end = cour_now_us() + 5000000; !rx.done; pump())
		cr_assert_lt(cour_now_us(), end, "the receive never completed");
	cr_assert_eq(rx.err, 0);
	cr_assert_eq(rx.len, sizeof(msg));
	cr_assert_eq(rx.data, 0xd47a, "CQ data %#" PRIx64, rx.data);
	cr_assert_eq(memcmp(rbuf, msg, sizeof(msg)), 0, "the message arrived damaged");
	for (size_t i = sizeof(msg); i < sizeof(rbuf); i++)
		cr_assert_eq((uint8_t)rbuf[i], 0xee, "byte %zu past the message written", i);
}

Test(garbage, a_piece_damaged_inside_a_train_read_in_place_is_dropped)
{
	damaged_piece_in_a_train();
}

/* The same with FI_COURIER_CHECKSUM: every piece's crc covers its payload, which is checked
 * only once it landed in the receive; piece 15's payload has a bit flipped. */
Test(garbage, a_payload_damaged_inside_a_train_read_in_place_is_dropped)
{
	cour_params.checksum = 1;
	damaged_piece_in_a_train();
}
