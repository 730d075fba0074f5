/*
 * forger: an attacker on the path of a keyed courier stream, for test_auth_forge.sh. It
 * watches lo with a packet socket, locks onto the first authenticated flow that carries data
 * (EAGER, RDATA or WRITE: the client-to-server direction of a stream or of RMA writes), and
 * for each sequenced datagram of that flow it sees it sends, with a raw socket that spoofs
 * the client's address and port, datagrams the server must all refuse:
 *
 *   payload  one payload byte changed, the original trailer kept (the tag no longer fits)
 *   tag      the datagram with random tag bytes
 *   bare     the trailer cut off and COUR_F_MAC cleared: an unauthenticated datagram
 *   replay   the datagram itself, unchanged (an authentic copy: a replay, not a forgery)
 *
 * The first three are sent twice: with the captured sequence number, and with the next one,
 * which the receiver would take in order were it not for the tag. Each carries the captured
 * sessions and a crc32c recomputed as cour_hdr_finish does (crc field zeroed; the header, and
 * the payload too under COUR_F_PCSUM), so only the authentication can refuse it.
 *
 * Toward the client, spoofing the server, for each datagram it attacks:
 *
 *   reflect  the datagram itself, sent back to its sender (authentic bytes, wrong direction)
 *   reset    a RESET with the flow's sessions (the server's as source, the client's as
 *            destination), flag MAC, and a random trailer: "your session is stale"
 *
 * An earlier run's first packets (the same key, the same addresses, seconds old): -R FILE
 * records, without attacking, every authenticated datagram whose first packet has
 * dst_session 0 (a session's opening packets, either direction; 64 at most); -r FILE, in a
 * later run, sends each recorded datagram twice, from and to the addresses it had, once the
 * flow it attacks has carried 64 datagrams: the first copy is authentic and new to the new
 * endpoints (their replay memory never saw it) and must be refused as a session not proven
 * fresh, the second is a replay. Their packets are counted per destination port.
 *
 * With -e k it attacks only every k-th datagram of the flow: a lighter attack, so that the
 * server's socket overflows less (what the kernel drops there loosens the test's counts).
 * It stops after -n forgeries (default 1200), or -t seconds (default 30), or when the flow
 * has been quiet for 3 s, and prints exactly what it sent:
 *   forger: forged F replayed R (payload A, tag B, bare C) ...
 *   forger: to the client: reflected X resets Y
 *   forger: earlier run: port P packets N copies M     (one line per destination port)
 * Exit 0 when it sent all -n forgeries (with -R: recorded one datagram at least), 2 when the
 * flow ended or time ran out first, 77 without CAP_NET_RAW, 1 on another error.
 *
 * Each IP packet captured is taken as one datagram, so the sender must not batch with UDP
 * GSO (FI_COURIER_UDP_GSO=0): lo carries a GSO run as one packet, which a replay would send
 * as one datagram, a forgery rather than a copy. Our own packets carry a mark (IP id and
 * TTL) so that the capture skips them.
 */
#define _GNU_SOURCE

#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "proto/cour_wire_fmt.h"
#include "wire/cour_mac.h"	/* the trailer's layout only */

#define FORGER_IP_ID	0xf09e
#define FORGER_TTL	7
#define FORGER_IDLE_MS	3000
#define FORGER_PKT_MAX	(COUR_MAX_PKT + COUR_MAC_LEN + 64)
#define FORGER_IPUDP	(sizeof(struct iphdr) + sizeof(struct udphdr))
#define FORGER_RECS	64
#define FORGER_OLD_AFTER 64		/* flow datagrams seen before the earlier run's go */
#define FORGER_PACK_MARK 0xc5		/* wire/cour_wire.h: a packed datagram's first byte */

/* a datagram of an earlier run, as recorded (-R) and sent again (-r) */
struct forger_rec {
	uint32_t saddr, daddr;		/* network order, as in the IP header */
	uint16_t sport, dport;
	uint16_t len, npkts;
	uint8_t  d[FORGER_PKT_MAX];
};

enum forger_kind { FK_PAYLOAD, FK_TAG, FK_BARE, FK_N };
static const char *const forger_kind_name[FK_N] = { "payload", "tag", "bare" };

struct forger {
	int cap_fd, raw_fd;
	bool locked;
	struct sockaddr_in from, to;	/* the flow: client -> server */
	uint64_t limit, every;
	uint64_t forged, kind[FK_N], replayed, seen, refused;
	uint64_t reflected, resets;
	/* an earlier run's datagrams: recording (rec_out) or to send (nrecs loaded) */
	FILE *rec_out;
	struct forger_rec *recs;
	unsigned nrecs;
	bool old_sent;
	uint64_t rng;
	/* an IP packet as captured, and one being built (8-aligned: headers are cast) */
	uint8_t cap[FORGER_PKT_MAX] __attribute__((aligned(8)));
	uint8_t out[FORGER_PKT_MAX] __attribute__((aligned(8)));
};

static uint64_t forger_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t forger_rand(struct forger *fg)
{
	fg->rng ^= fg->rng << 13;
	fg->rng ^= fg->rng >> 7;
	fg->rng ^= fg->rng << 17;
	return fg->rng;
}

/* Datagrams the kernel dropped before any socket saw them (lo's backlog queues, all CPUs):
 * a forgery dropped there never reaches the server, which must then count one fewer. */
static uint64_t forger_backlog_drops(void)
{
	FILE *f = fopen("/proc/net/softnet_stat", "r");
	unsigned long processed, dropped;
	uint64_t sum = 0;
	char line[512];

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx %lx", &processed, &dropped) == 2)
			sum += dropped;
	fclose(f);
	return sum;
}

static int forger_open(struct forger *fg)
{
	struct sockaddr_ll sll = {
		.sll_family = AF_PACKET,
		.sll_protocol = htons(ETH_P_IP),
		.sll_ifindex = (int)if_nametoindex("lo"),
	};
	int big = 8 << 20;

	fg->cap_fd = socket(AF_PACKET, SOCK_DGRAM | SOCK_NONBLOCK, htons(ETH_P_IP));
	fg->raw_fd = fg->cap_fd < 0 ? -1 : socket(AF_INET, SOCK_RAW, IPPROTO_RAW);
	if (fg->cap_fd < 0 || fg->raw_fd < 0) {
		int e = errno;

		fprintf(stderr, "forger: %s socket: %s%s\n", fg->cap_fd < 0 ? "packet" : "raw",
			strerror(e), e == EPERM ? " (needs CAP_NET_RAW)" : "");
		return e == EPERM ? 77 : 1;
	}
	if (!sll.sll_ifindex || bind(fg->cap_fd, (struct sockaddr *)&sll, sizeof(sll))) {
		fprintf(stderr, "forger: cannot capture on lo: %s\n", strerror(errno));
		return 1;
	}
	/* a capture that overflows only forges less; a bigger buffer just loses less of it */
	if (setsockopt(fg->cap_fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big)))
		(void)setsockopt(fg->cap_fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	return 0;
}

/* The UDP payload of a captured IP packet that is not one of ours, and its addresses. */
static const uint8_t *forger_udp(struct forger *fg, size_t n, size_t *len,
				 const struct iphdr **ipp, const struct udphdr **udpp)
{
	const struct iphdr *ip = (const void *)fg->cap;
	const struct udphdr *udp;
	size_t ihl;

	if (n < FORGER_IPUDP || ip->version != 4 || ip->protocol != IPPROTO_UDP ||
	    (ntohs(ip->frag_off) & (IP_MF | IP_OFFMASK)) ||
	    (ip->id == htons(FORGER_IP_ID) && ip->ttl == FORGER_TTL))
		return NULL;
	ihl = ip->ihl * 4u;
	udp = (const void *)(fg->cap + ihl);
	if (n < ihl + sizeof(*udp) || ntohs(udp->len) < sizeof(*udp) ||
	    n < ihl + ntohs(udp->len))
		return NULL;
	*len = ntohs(udp->len) - sizeof(*udp);
	*ipp = ip;
	*udpp = udp;
	return (const uint8_t *)(udp + 1);
}

/* The packets a datagram holds (a packed one several) and the header of its first. */
static unsigned forger_first(const uint8_t *d, size_t len, struct cour_base_hdr *h)
{
	uint16_t n = 1;
	size_t off = 0;

	if (len >= 8 && d[0] == FORGER_PACK_MARK) {
		memcpy(&n, d + 2, 2);
		off = 8;
	}
	if (len < off + sizeof(*h) + COUR_MAC_LEN)
		return 0;
	memcpy(h, d + off, sizeof(*h));
	return n;
}

/* -R: keep an authenticated datagram that opens a session (its first packet names no
 * session of its receiver yet). */
static void forger_record(struct forger *fg, size_t n)
{
	const struct iphdr *ip;
	const struct udphdr *udp;
	struct cour_base_hdr h;
	struct forger_rec r;
	const uint8_t *d;
	size_t len;

	if (fg->nrecs >= FORGER_RECS || !(d = forger_udp(fg, n, &len, &ip, &udp)) ||
	    len > COUR_MAX_PKT + COUR_MAC_LEN || !(r.npkts = (uint16_t)forger_first(d, len, &h)) ||
	    h.version != COUR_WIRE_VERSION || !(h.flags & COUR_F_MAC) || h.dst_session ||
	    !h.src_session || h.type == COUR_PKT_CM)
		return;
	r.saddr = ip->saddr;
	r.daddr = ip->daddr;
	r.sport = udp->source;
	r.dport = udp->dest;
	r.len = (uint16_t)len;
	memcpy(r.d, d, len);
	if (fwrite(&r, offsetof(struct forger_rec, d) + len, 1, fg->rec_out) == 1)
		fg->nrecs++;
}

static int forger_load(struct forger *fg, const char *path)
{
	FILE *f = fopen(path, "rb");
	struct forger_rec *r;

	if (!f || !(fg->recs = calloc(FORGER_RECS, sizeof(*fg->recs)))) {
		fprintf(stderr, "forger: %s: %s\n", path, strerror(errno));
		return 1;
	}
	for (r = fg->recs; fg->nrecs < FORGER_RECS; r++, fg->nrecs++)
		if (fread(r, offsetof(struct forger_rec, d), 1, f) != 1 ||
		    r->len > sizeof(r->d) || fread(r->d, r->len, 1, f) != 1)
			break;
	fclose(f);
	if (!fg->nrecs) {
		fprintf(stderr, "forger: %s holds no datagram\n", path);
		return 1;
	}
	return 0;
}

/* Send len bytes at fg->out + FORGER_IPUDP from (saddr, sport) to (daddr, dport). */
static bool forger_send_as(struct forger *fg, size_t len, uint32_t saddr, uint16_t sport,
			   uint32_t daddr, uint16_t dport);

/* -r: each datagram of the earlier run twice, counted per destination port; printed. */
static void forger_send_old(struct forger *fg)
{
	struct { uint16_t port; uint64_t pkts, copies; } to[4] = { { 0 } };
	unsigned nto = 0;

	fg->old_sent = true;
	for (int pass = 0; pass < 2; pass++) {
		for (unsigned i = 0; i < fg->nrecs; i++) {
			const struct forger_rec *r = &fg->recs[i];
			unsigned k;

			for (k = 0; k < nto && to[k].port != r->dport; k++)
				;
			if (k == nto && nto < 4)
				to[nto++].port = r->dport;
			memcpy(fg->out + FORGER_IPUDP, r->d, r->len);
			if (k < nto && forger_send_as(fg, r->len, r->saddr, r->sport, r->daddr,
						      r->dport)) {
				if (pass)
					to[k].copies++;
				else
					to[k].pkts += r->npkts;
			}
		}
	}
	for (unsigned k = 0; k < nto; k++)
		printf("forger: earlier run: port %u packets %llu copies %llu\n",
		       ntohs(to[k].port), (unsigned long long)to[k].pkts,
		       (unsigned long long)to[k].copies);
	fflush(stdout);
}

/* The courier datagram in a captured IP packet, if it is one of the flow's sequenced and
 * authenticated datagrams (locking onto the flow at its first data packet); else NULL. */
static const uint8_t *forger_pick(struct forger *fg, size_t n, size_t *len)
{
	const struct iphdr *ip;
	const struct udphdr *udp;
	struct cour_base_hdr h;

	if (!forger_udp(fg, n, len, &ip, &udp))
		return NULL;
	if (*len < COUR_PKT_HDR_LEN + COUR_MAC_LEN || *len > COUR_MAX_PKT)
		return NULL;
	memcpy(&h, udp + 1, sizeof(h));
	if (h.version != COUR_WIRE_VERSION || !(h.flags & COUR_F_MAC) ||
	    !cour_pkt_sequenced(h.type))
		return NULL;
	if (!fg->locked) {
		if (h.type != COUR_PKT_EAGER && h.type != COUR_PKT_RDATA && h.type != COUR_PKT_WRITE)
			return NULL;
		fg->from = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = udp->source,
						 .sin_addr.s_addr = ip->saddr };
		fg->to = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = udp->dest,
					       .sin_addr.s_addr = ip->daddr };
		fg->locked = true;
		printf("forger: locked onto %s:%u -> ", inet_ntoa(fg->from.sin_addr),
		       ntohs(udp->source));
		printf("%s:%u\n", inet_ntoa(fg->to.sin_addr), ntohs(udp->dest));
		fflush(stdout);
	}
	if (ip->saddr != fg->from.sin_addr.s_addr || udp->source != fg->from.sin_port ||
	    ip->daddr != fg->to.sin_addr.s_addr || udp->dest != fg->to.sin_port)
		return NULL;
	return (const uint8_t *)(udp + 1);
}

static bool forger_send_as(struct forger *fg, size_t len, uint32_t saddr, uint16_t sport,
			   uint32_t daddr, uint16_t dport)
{
	struct iphdr *ip = (struct iphdr *)fg->out;
	struct udphdr *udp = (struct udphdr *)(ip + 1);
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = dport,
				  .sin_addr.s_addr = daddr };
	size_t total = FORGER_IPUDP + len;

	memset(fg->out, 0, FORGER_IPUDP);
	ip->version = 4;
	ip->ihl = 5;
	ip->ttl = FORGER_TTL;
	ip->id = htons(FORGER_IP_ID);
	ip->protocol = IPPROTO_UDP;
	ip->tot_len = htons((uint16_t)total);
	ip->saddr = saddr;
	ip->daddr = daddr;
	udp->source = sport;
	udp->dest = dport;
	udp->len = htons((uint16_t)(sizeof(*udp) + len));
	udp->check = 0;			/* none: allowed for UDP over IPv4 */
	if (sendto(fg->raw_fd, fg->out, total, 0, (struct sockaddr *)&to, sizeof(to)) ==
	    (ssize_t)total)
		return true;
	fg->refused++;			/* never left: the receiver cannot count it */
	return false;
}

/* Send the len bytes of courier datagram at fg->out + FORGER_IPUDP as the client, to the
 * server; or as the server, to the client. */
static bool forger_send(struct forger *fg, size_t len)
{
	return forger_send_as(fg, len, fg->from.sin_addr.s_addr, fg->from.sin_port,
			      fg->to.sin_addr.s_addr, fg->to.sin_port);
}

static bool forger_send_back(struct forger *fg, size_t len)
{
	return forger_send_as(fg, len, fg->to.sin_addr.s_addr, fg->to.sin_port,
			      fg->from.sin_addr.s_addr, fg->from.sin_port);
}

/* Build forgery `kind` of datagram d (len bytes, trailer included) with sequence number
 * seq in fg->out; returns its length. */
static size_t forger_make(struct forger *fg, const uint8_t *d, size_t len, int kind,
			  uint32_t seq)
{
	uint8_t *p = fg->out + FORGER_IPUDP;
	struct cour_base_hdr *h = (struct cour_base_hdr *)p;
	size_t body = len - COUR_MAC_LEN;	/* what the tag covers, but its own fields */

	memcpy(p, d, len);
	h->seq = seq;
	switch (kind) {
	case FK_PAYLOAD:
		/* a payload byte; a packet without payload loses its last header byte instead
		 * (raddr's top byte): either way a change the sender never signed */
		p[body > COUR_PKT_HDR_LEN ? COUR_PKT_HDR_LEN + (body - COUR_PKT_HDR_LEN) / 2 :
					    COUR_PKT_HDR_LEN - 1] ^= 0x5a;
		break;
	case FK_TAG:
		for (size_t i = 0; i < COUR_MAC_TAG_LEN; i++)
			p[len - COUR_MAC_TAG_LEN + i] = (uint8_t)forger_rand(fg);
		break;
	case FK_BARE:
		h->flags &= (uint16_t)~COUR_F_MAC;
		len = body;
		break;
	}
	h->crc = 0;
	h->crc = cour_crc32c(0, p, (h->flags & COUR_F_PCSUM) ? body : COUR_PKT_HDR_LEN);
	return len;
}

/* The replay and the forgeries of one captured datagram, up to the limit. */
static void forger_attack(struct forger *fg, const uint8_t *d, size_t len)
{
	struct cour_base_hdr h;

	memcpy(&h, d, sizeof(h));
	memcpy(fg->out + FORGER_IPUDP, d, len);
	if (forger_send(fg, len))
		fg->replayed++;
	if (forger_send_back(fg, len))
		fg->reflected++;
	/* a RESET of the server's session to the client's, with a trailer no key made */
	struct cour_base_hdr *r = (struct cour_base_hdr *)(fg->out + FORGER_IPUDP);
	memset(r, 0, sizeof(*r));
	r->version = COUR_WIRE_VERSION;
	r->type = COUR_PKT_RESET;
	r->flags = COUR_F_MAC;
	r->src_session = h.dst_session;
	r->dst_session = h.src_session;
	for (size_t i = 0; i < COUR_MAC_LEN; i++)
		((uint8_t *)(r + 1))[i] = (uint8_t)forger_rand(fg);
	if (forger_send_back(fg, sizeof(*r) + COUR_MAC_LEN))
		fg->resets++;
	for (int kind = 0; kind < FK_N; kind++)
		for (uint32_t next = 0; next < 2 && fg->forged < fg->limit; next++)
			if (forger_send(fg, forger_make(fg, d, len, kind, h.seq + next))) {
				fg->forged++;
				fg->kind[kind]++;
			}
}

static int forger_run(struct forger *fg, int seconds)
{
	uint64_t start = forger_ms(), quiet_since = start;
	struct pollfd pfd = { .fd = fg->cap_fd, .events = POLLIN };

	while (fg->forged < fg->limit && forger_ms() - start < (uint64_t)seconds * 1000) {
		struct sockaddr_ll from;
		socklen_t fl = sizeof(from);
		const uint8_t *d;
		size_t len;
		ssize_t n;

		if (fg->locked && forger_ms() - quiet_since > FORGER_IDLE_MS)
			return 2;
		n = recvfrom(fg->cap_fd, fg->cap, sizeof(fg->cap), 0, (struct sockaddr *)&from,
			     &fl);
		if (n < 0) {
			if (errno != EAGAIN && errno != EINTR) {
				fprintf(stderr, "forger: capture: %s\n", strerror(errno));
				return 1;
			}
			(void)poll(&pfd, 1, 100);
			continue;
		}
		/* lo shows every packet twice, leaving and arriving: take arrivals */
		if (from.sll_pkttype == PACKET_OUTGOING)
			continue;
		if (fg->rec_out) {
			forger_record(fg, (size_t)n);
			if (fg->locked || forger_pick(fg, (size_t)n, &len))
				quiet_since = forger_ms();
			continue;
		}
		if (!(d = forger_pick(fg, (size_t)n, &len)))
			continue;
		quiet_since = forger_ms();
		if (fg->nrecs && !fg->old_sent && fg->seen >= FORGER_OLD_AFTER)
			forger_send_old(fg);
		if (fg->seen++ % fg->every == 0)
			forger_attack(fg, d, len);
	}
	return fg->forged < fg->limit ? 2 : 0;
}

int main(int argc, char **argv)
{
	static struct forger fg = { .limit = 1200, .every = 1, .cap_fd = -1, .raw_fd = -1 };
	uint64_t drops0;
	int opt, seconds = 30, ret;

	const char *rec_path = NULL, *old_path = NULL;

	while ((opt = getopt(argc, argv, "n:t:e:R:r:")) != -1) {
		if (opt == 'R')
			rec_path = optarg;
		else if (opt == 'r')
			old_path = optarg;
		else if (opt == 'n')
			fg.limit = strtoull(optarg, NULL, 0);
		else if (opt == 'e' && atoi(optarg) > 0)
			fg.every = (uint64_t)atoi(optarg);
		else if (opt == 't')
			seconds = atoi(optarg);
		else {
			fprintf(stderr, "usage: forger [-n forgeries] [-t seconds] [-e every] "
				"[-R record-file | -r earlier-run-file]\n");
			return 1;
		}
	}
	if (rec_path && !(fg.rec_out = fopen(rec_path, "wb"))) {
		fprintf(stderr, "forger: %s: %s\n", rec_path, strerror(errno));
		return 1;
	}
	if (old_path && forger_load(&fg, old_path))
		return 1;
	fg.rng = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ULL | 1;
	ret = forger_open(&fg);
	if (!ret) {
		drops0 = forger_backlog_drops();
		printf("forger: capturing on lo (at most %llu forgeries, %d s)\n",
		       (unsigned long long)fg.limit, seconds);
		fflush(stdout);
		ret = forger_run(&fg, seconds);
		if (fg.rec_out) {
			printf("forger: recorded %u datagrams that open a session\n", fg.nrecs);
			ret = fg.nrecs ? 0 : 2;
		}
		printf("forger: to the client: reflected %llu resets %llu\n",
		       (unsigned long long)fg.reflected, (unsigned long long)fg.resets);
		if (fg.nrecs && !fg.rec_out && !fg.old_sent)
			printf("forger: the earlier run's datagrams were never sent\n");
		printf("forger: forged %llu replayed %llu (%s %llu, %s %llu, %s %llu); %llu "
		       "datagrams of the flow seen, %llu sends refused by our socket, %llu "
		       "backlog_drops\n", (unsigned long long)fg.forged,
		       (unsigned long long)fg.replayed, forger_kind_name[FK_PAYLOAD],
		       (unsigned long long)fg.kind[FK_PAYLOAD], forger_kind_name[FK_TAG],
		       (unsigned long long)fg.kind[FK_TAG], forger_kind_name[FK_BARE],
		       (unsigned long long)fg.kind[FK_BARE], (unsigned long long)fg.seen,
		       (unsigned long long)fg.refused,
		       (unsigned long long)(forger_backlog_drops() - drops0));
		if (ret == 2)
			printf("forger: stopped before the limit: %s\n",
			       fg.locked ? "the flow ended or time ran out" :
					   "no authenticated data flow seen");
	}
	if (fg.rec_out)
		fclose(fg.rec_out);
	free(fg.recs);
	if (fg.cap_fd >= 0)
		close(fg.cap_fd);
	if (fg.raw_fd >= 0)
		close(fg.raw_fd);
	return ret;
}
