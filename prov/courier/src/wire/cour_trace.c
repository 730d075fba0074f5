/*
 * Packet capture of an endpoint's wire and rings (cour_trace.h says what and where): naming
 * the file, making up the IP and UDP headers, and cutting batches into datagrams. The file
 * format is util/cour_pcapng.c's.
 */
#include "util/cour_util.h"
#include "util/cour_params.h"
#include "util/cour_pcapng.h"
#include "wire/cour_trace.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif

enum { COUR_TRACE_IF_UDP, COUR_TRACE_IF_SHM };

/* the most pieces one datagram is gathered from: header, payload iovecs, and slack for a
 * trailer or a datagram that straddles a train's pieces */
#define COUR_TRACE_IOV_MAX (COUR_WIRE_IOV_MAX + 8)
/* a packed datagram is captured whole, whatever the snap length: at most this (trailer too) */
#define COUR_TRACE_PACK_MAX (COUR_WIRE_PACK_BYTES + COUR_MAC_LEN)

struct cour_trace {
	struct cour_pcapng pc;
	uint32_t snap;           /* bytes of each courier packet kept */
	uint16_t ip_id;          /* the made-up IPv4 identification, counting */
	bool     v6;             /* the socket's family: one per interface (cour_pcapng.h) */
};

static unsigned cour_trace_count;        /* endpoints that opened a capture in this process */

static uint64_t cour_trace_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* PATH.<pid>.<n>.pcapng, or PATH/courier.<pid>.<n>.pcapng for a directory */
static int cour_trace_name(char *out, size_t size, const char *path, unsigned n)
{
	struct stat st;
	size_t len = strlen(path);
	bool dir = (len && path[len - 1] == '/') ||
		   (stat(path, &st) == 0 && S_ISDIR(st.st_mode));
	int ret = snprintf(out, size, "%s%s%ld.%u.pcapng", path,
			   dir ? (path[len - 1] == '/' ? "courier." : "/courier.") : ".",
			   (long)getpid(), n);

	return ret > 0 && (size_t)ret < size ? 0 : -FI_EINVAL;
}

void cour_trace_open(struct cour_wire *w)
{
	unsigned n = __atomic_fetch_add(&cour_trace_count, 1, __ATOMIC_RELAXED);
	struct cour_trace *t;
	char path[4096], desc[256], addr[80], app[64];
	uint32_t snaplen;

	w->trace = NULL;
	if (!cour_params.trace || !*cour_params.trace || w->base != &cour_udp_wire)
		return;
	if (cour_trace_name(path, sizeof(path), cour_params.trace, n)) {
		COUR_WARN(FI_LOG_EP_CTRL, "FI_COURIER_TRACE=%s: name too long, no capture\n",
			  cour_params.trace);
		return;
	}
	t = calloc(1, sizeof(*t));
	if (!t) {
		COUR_WARN(FI_LOG_EP_CTRL, "packet capture: out of memory, no capture\n");
		return;
	}
	t->snap = (uint32_t)cour_params.trace_snap;
	t->v6 = w->bound_sa.ss_family == AF_INET6;
	snaplen = COUR_MAX(t->snap, (uint32_t)COUR_TRACE_PACK_MAX) + COUR_TRACE_IPHDR_MAX;
	snprintf(app, sizeof(app), "courier %s (libfabric provider)", PACKAGE_VERSION);
	if (cour_pcapng_open(&t->pc, path, (uint64_t)cour_params.trace_max << 20, app)) {
		free(t);
		return;
	}
	cour_addr_str(&w->addr, addr, sizeof(addr));
	snprintf(desc, sizeof(desc), "courier endpoint %s (pid %ld, endpoint %u): UDP socket",
		 addr, (long)getpid(), n);
	if (cour_pcapng_iface(&t->pc, t->v6 ? COUR_PCAPNG_LINKTYPE_IPV6 : COUR_PCAPNG_LINKTYPE_IPV4,
			      snaplen, "courier-udp", desc))
		goto err_file;
	snprintf(desc, sizeof(desc), "courier endpoint %s (pid %ld, endpoint %u): shared-memory "
		 "rings (put into peers', taken from ours)", addr, (long)getpid(), n);
	if (cour_pcapng_iface(&t->pc, t->v6 ? COUR_PCAPNG_LINKTYPE_IPV6 : COUR_PCAPNG_LINKTYPE_IPV4,
			      snaplen, "courier-shm", desc))
		goto err_file;
	COUR_INFO(FI_LOG_EP_CTRL, "endpoint %s captures its packets to %s\n", addr, path);
	w->trace = t;
	return;

err_file:
	cour_pcapng_close(&t->pc);
	free(t);
}

void cour_trace_close(struct cour_wire *w)
{
	struct cour_trace *t = w->trace;

	if (!t)
		return;
	w->trace = NULL;
	COUR_INFO(FI_LOG_EP_CTRL, "packet capture %s: %" PRIu64 " packets written, %" PRIu64
		  " not (file bound)\n", t->pc.path, t->pc.packets, t->pc.lost);
	cour_pcapng_close(&t->pc);
	free(t);
}

/* ---- the made-up IP and UDP headers ---- */

static void cour_put16be(uint8_t *at, uint16_t v)
{
	at[0] = (uint8_t)(v >> 8);
	at[1] = (uint8_t)v;
}

/* ones' complement sum of len bytes, big-endian words, continuing sum; odd tells whether an
 * odd byte count came before (so this piece starts mid-word) */
static uint32_t cour_csum_add(uint32_t sum, const uint8_t *p, size_t len, bool *odd)
{
	for (size_t i = 0; i < len; i++, *odd = !*odd)
		sum += *odd ? p[i] : (uint32_t)p[i] << 8;
	return sum;
}

static uint16_t cour_csum_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/* An address as IPv6 (an IPv4 one mapped) and its port (zeros for anything else); v4: it has
 * an IPv4 form (in a6[12..15]). */
static void cour_trace_addr(const struct sockaddr_storage *ss, uint8_t a6[16], uint16_t *port,
			    bool *v4)
{
	static const uint8_t mapped[12] = { [10] = 0xff, [11] = 0xff };

	memset(a6, 0, 16);
	*port = 0;
	*v4 = true;
	if (ss && ss->ss_family == AF_INET) {
		const struct sockaddr_in *s = (const void *)ss;

		a6[10] = a6[11] = 0xff;
		memcpy(a6 + 12, &s->sin_addr, 4);
		*port = ntohs(s->sin_port);
	} else if (ss && ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const void *)ss;

		memcpy(a6, &s->sin6_addr, 16);
		*port = ntohs(s->sin6_port);
		*v4 = memcmp(a6, mapped, sizeof(mapped)) == 0;
	}
}

size_t cour_trace_ip_udp(uint8_t *out, bool v6, const struct sockaddr_storage *src,
			 const struct sockaddr_storage *dst, uint16_t ip_id,
			 const struct iovec *iov, size_t iovcnt, size_t len)
{
	uint8_t s6[16], d6[16];
	uint16_t sport, dport, udp_len = (uint16_t)COUR_MIN(len + 8, (size_t)UINT16_MAX);
	bool s4, d4, odd = false;
	uint32_t sum;
	uint8_t *udp;

	cour_trace_addr(src, s6, &sport, &s4);
	cour_trace_addr(dst, d6, &dport, &d4);
	if (!v6) {
		if (!s4)
			memset(s6 + 12, 0, 4);
		if (!d4)
			memset(d6 + 12, 0, 4);
		out[0] = 0x45;                  /* version 4, 5 words of header */
		out[1] = 0;
		cour_put16be(out + 2, (uint16_t)COUR_MIN(len + 28, (size_t)UINT16_MAX));
		cour_put16be(out + 4, ip_id);
		cour_put16be(out + 6, 0x4000);  /* don't fragment */
		out[8] = 64;                    /* ttl */
		out[9] = IPPROTO_UDP;
		cour_put16be(out + 10, 0);
		memcpy(out + 12, s6 + 12, 4);
		memcpy(out + 16, d6 + 12, 4);
		cour_put16be(out + 10, cour_csum_fold(cour_csum_add(0, out, 20, &odd)));
		udp = out + 20;
	} else {
		out[0] = 0x60;                  /* version 6, no traffic class or flow label */
		out[1] = out[2] = out[3] = 0;
		cour_put16be(out + 4, udp_len);
		out[6] = IPPROTO_UDP;
		out[7] = 64;                    /* hop limit */
		memcpy(out + 8, s6, 16);
		memcpy(out + 24, d6, 16);
		udp = out + 40;
	}
	cour_put16be(udp, sport);
	cour_put16be(udp + 2, dport);
	cour_put16be(udp + 4, udp_len);
	cour_put16be(udp + 6, 0);
	if (udp == out + 20)
		return 28;                      /* IPv4: a zero UDP checksum means none */
	/* IPv6 has no "none": pseudo-header (addresses, length, next header), header, data */
	sum = cour_csum_add(0, out + 8, 32, &odd);
	sum += udp_len + IPPROTO_UDP;
	sum = cour_csum_add(sum, udp, 8, &odd);
	for (size_t i = 0; i < iovcnt && len; i++) {
		size_t n = COUR_MIN(len, iov[i].iov_len);

		sum = cour_csum_add(sum, iov[i].iov_base, n, &odd);
		len -= n;
	}
	sum = cour_csum_fold(sum);
	cour_put16be(udp + 6, sum ? (uint16_t)sum : 0xffff);
	return 48;
}

/* ---- recording ---- */

/* The datagram of len bytes from src to dst, in the iovecs, on interface iface. */
static void cour_trace_rec(struct cour_trace *t, uint32_t iface, bool out, uint64_t ts,
			   const struct sockaddr_storage *src, const struct sockaddr_storage *dst,
			   const struct iovec *iov, size_t iovcnt, size_t len, const char *comment)
{
	uint8_t ip[COUR_TRACE_IPHDR_MAX];
	struct iovec v[COUR_TRACE_IOV_MAX + 1];
	size_t hl, cap = COUR_MIN(len, (size_t)t->snap), got = 0;

	/* a packed datagram is kept whole: every one of its packets' headers is in it */
	if (iovcnt && iov[0].iov_len && *(const uint8_t *)iov[0].iov_base == COUR_WIRE_PACK_MARK)
		cap = COUR_MIN(len, (size_t)COUR_TRACE_PACK_MAX);

	hl = cour_trace_ip_udp(ip, t->v6, src, dst, t->ip_id++, iov, iovcnt, len);
	v[0].iov_base = ip;
	v[0].iov_len = hl;
	for (size_t i = 0; i < iovcnt && i < COUR_TRACE_IOV_MAX; i++) {
		v[i + 1] = iov[i];
		got += iov[i].iov_len;
	}
	cap = COUR_MIN(cap, got);               /* (only if iovecs were left out) */
	cour_pcapng_packet(&t->pc, iface, ts, out ? COUR_PCAPNG_OUT : COUR_PCAPNG_IN, comment, v,
			   COUR_MIN(iovcnt, (size_t)COUR_TRACE_IOV_MAX) + 1, (uint32_t)(hl + cap),
			   (uint32_t)(hl + len));
}

/* The iovecs of bytes [off, off + len) of in[0..cnt) into out (at most max); their count. */
static size_t cour_iov_slice(const struct iovec *in, size_t cnt, size_t off, size_t len,
			     struct iovec *out, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < cnt && len && n < max; i++) {
		size_t l = in[i].iov_len;

		if (off >= l) {
			off -= l;
			continue;
		}
		out[n].iov_base = (char *)in[i].iov_base + off;
		out[n].iov_len = COUR_MIN(l - off, len);
		len -= out[n++].iov_len;
		off = 0;
	}
	return n;
}

static size_t cour_iov_len(const struct iovec *iov, size_t cnt)
{
	size_t len = 0;

	for (size_t i = 0; i < cnt; i++)
		len += iov[i].iov_len;
	return len;
}

/* The datagrams of seg bytes (0: one) in the message's len bytes. */
static void cour_trace_msg(struct cour_trace *t, bool out, uint64_t ts,
			   const struct sockaddr_storage *src, const struct sockaddr_storage *dst,
			   const struct msghdr *m, size_t len, size_t seg, const char *comment)
{
	struct iovec v[COUR_TRACE_IOV_MAX];

	size_t off = 0;

	if (!seg || seg >= len)
		seg = len;
	do {                                    /* (once for an empty datagram) */
		size_t dl = COUR_MIN(seg, len - off);
		size_t n = cour_iov_slice(m->msg_iov, m->msg_iovlen, off, dl, v, COUR_ARRAY_SIZE(v));

		cour_trace_rec(t, COUR_TRACE_IF_UDP, out, ts, src, dst, v, n, dl, comment);
		off += seg;
	} while (off < len);
}

/* The peer's address of a message (a connected socket may name none: zeros) */
static const struct sockaddr_storage *cour_trace_peer(const void *sa, size_t sa_len,
						      struct sockaddr_storage *copy)
{
	memset(copy, 0, sizeof(*copy));
	if (sa && sa_len <= sizeof(*copy))
		memcpy(copy, sa, sa_len);
	return copy;
}

/* The UDP_SEGMENT size a message was sent with, 0 if none. */
static size_t cour_trace_gso(const struct msghdr *m)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR((struct msghdr *)m, c)) {
		if (c->cmsg_level == IPPROTO_UDP && c->cmsg_type == UDP_SEGMENT) {
			uint16_t seg;

			memcpy(&seg, CMSG_DATA(c), sizeof(seg));
			return seg;
		}
	}
	return 0;
}

static void cour_trace_sent_one(struct cour_wire *w, uint64_t ts, const struct msghdr *m,
				const char *comment)
{
	struct sockaddr_storage peer;

	cour_trace_peer(m->msg_name, m->msg_namelen, &peer);
	cour_trace_msg(w->trace, true, ts, &w->bound_sa, &peer, m,
		       cour_iov_len(m->msg_iov, m->msg_iovlen),
		       m->msg_controllen ? cour_trace_gso(m) : 0, comment);
}

void cour_trace_udp_sent_mmsg(struct cour_wire *w, const struct mmsghdr *mm, unsigned n)
{
	uint64_t ts = cour_trace_now_ns();

	for (unsigned i = 0; i < n; i++)
		cour_trace_sent_one(w, ts, &mm[i].msg_hdr, NULL);
}

void cour_trace_udp_sent(struct cour_wire *w, const struct msghdr *m)
{
	cour_trace_sent_one(w, cour_trace_now_ns(), m, NULL);
}

/* With a key the injector drops before it signs (a signature consumes a counter): the
 * datagram is recorded with a trailer of zeros, so its length and its MAC flag agree. */
void cour_trace_fault_drop(struct cour_wire *w, const struct msghdr *m)
{
	static const uint8_t unsigned_trl[COUR_MAC_LEN];
	struct iovec v[COUR_TRACE_IOV_MAX];
	struct msghdr copy = *m;
	size_t n = COUR_MIN((size_t)m->msg_iovlen, COUR_ARRAY_SIZE(v) - 1);

	if (w->mac) {
		memcpy(v, m->msg_iov, n * sizeof(*v));
		v[n].iov_base = (void *)unsigned_trl;
		v[n].iov_len = sizeof(unsigned_trl);
		copy.msg_iov = v;
		copy.msg_iovlen = n + 1;
	}
	cour_trace_sent_one(w, cour_trace_now_ns(), &copy, w->mac ?
			    "dropped by FI_COURIER_FAULT: never signed nor sent (trailer zeros)" :
			    "dropped by FI_COURIER_FAULT: never reached the socket");
}

void cour_trace_udp_rcvd(struct cour_wire *w, const struct msghdr *m, size_t len, size_t gso)
{
	struct sockaddr_storage peer;

	cour_trace_peer(m->msg_name, m->msg_namelen, &peer);
	cour_trace_msg(w->trace, false, cour_trace_now_ns(), &peer, &w->bound_sa, m, len, gso,
		       NULL);
}

void cour_trace_shm(struct cour_wire *w, bool out, const void *sa, size_t sa_len,
		    const void *hdr, size_t hdr_len, const struct iovec *iov, size_t iovcnt)
{
	struct sockaddr_storage peer;
	struct iovec v[COUR_TRACE_IOV_MAX];
	size_t n = 1, len = hdr_len;

	cour_trace_peer(sa, sa_len, &peer);
	v[0].iov_base = (void *)hdr;
	v[0].iov_len = hdr_len;
	for (size_t i = 0; i < iovcnt && n < COUR_ARRAY_SIZE(v); i++) {
		v[n++] = iov[i];
		len += iov[i].iov_len;
	}
	cour_trace_rec(w->trace, COUR_TRACE_IF_SHM, out, cour_trace_now_ns(),
		       out ? &w->bound_sa : &peer, out ? &peer : &w->bound_sa, v, n, len, NULL);
}
