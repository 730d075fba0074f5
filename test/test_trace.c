/*
 * Packet capture (FI_COURIER_TRACE): the pcapng writer (util/cour_pcapng.c) and the capture of
 * a wire (wire/cour_trace.c), read back by a small pcapng reader of this file's own: block
 * framing and padding, interfaces, timestamps' resolution, direction flags and comments, the
 * snap length, the file bound (said once), GSO runs and GRO trains cut into datagrams, ring
 * packets on their own interface, and the made-up IPv4 and IPv6 headers' checksums.
 *
 * Linked without libfabric and without the UDP wire: cour_prov, the logging entry points,
 * cour_params and the cour_udp_wire a capture checks for are this file's.
 */
#include "util/cour_util.h"
#include "util/cour_params.h"
#include "util/cour_pcapng.h"
#include "wire/cour_trace.h"

#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif

struct fi_provider cour_prov = { .name = "courier" };
struct cour_params cour_params;
const struct cour_wire_ops cour_udp_wire = { .name = "udp" };
static int warnings;

int fi_log_enabled(const struct fi_provider *prov, enum fi_log_level level,
		   enum fi_log_subsys subsys)
{
	return prov == &cour_prov;
}

void fi_log(const struct fi_provider *prov, enum fi_log_level level, enum fi_log_subsys subsys,
	    const char *func, int line, const char *fmt, ...)
{
	if (level == FI_LOG_WARN)
		warnings++;
}

static char dir[64];

static void setup(void)
{
	strcpy(dir, "/tmp/test_trace.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	warnings = 0;
	memset(&cour_params, 0, sizeof(cour_params));
	cour_params.trace_snap = 256;
	cour_params.trace_max = 16;
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(trace, .init = setup, .fini = teardown, .timeout = 30);

/* ---- a pcapng reader: just what the writer writes ---- */

struct blk {
	uint32_t type, len;
	const uint8_t *body;        /* after type and length */
	size_t body_len;            /* up to the trailing length */
};

struct pkt {
	uint32_t iface, cap, orig, flags;
	uint64_t ts;
	const uint8_t *data;
	char comment[256];
};

struct file {
	uint8_t *buf;
	size_t len;
	unsigned nblk, nifaces, npkts;
	struct blk blk[64];
	uint32_t linktype[4], snaplen[4];
	char ifname[4][32];
	uint8_t tsresol[4];
	struct pkt pkt[64];
};

static uint32_t rd32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint16_t rd16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }

/* Options from p to end: calls fn(code, value, len) for each; asserts the framing. */
static void options(const uint8_t *p, const uint8_t *end,
		    void (*fn)(void *arg, uint16_t code, const uint8_t *v, uint16_t len), void *arg)
{
	for (;;) {
		cr_assert_leq(p + 4, end, "options run past their block");
		uint16_t code = rd16(p), len = rd16(p + 2);

		if (code == 0) {
			cr_assert_eq(len, 0);
			cr_assert_eq(p + 4, end, "bytes after opt_endofopt");
			return;
		}
		cr_assert_leq(p + 4 + ((len + 3u) & ~3u), end);
		fn(arg, code, p + 4, len);
		p += 4 + ((len + 3u) & ~3u);
	}
}

static void idb_opt(void *arg, uint16_t code, const uint8_t *v, uint16_t len)
{
	struct file *f = arg;
	unsigned i = f->nifaces;

	if (code == 2) {
		cr_assert_lt(len, sizeof(f->ifname[i]));
		memcpy(f->ifname[i], v, len);
	} else if (code == 9) {
		cr_assert_eq(len, 1);
		f->tsresol[i] = v[0];
	}
}

static void epb_opt(void *arg, uint16_t code, const uint8_t *v, uint16_t len)
{
	struct pkt *p = arg;

	if (code == 2) {
		cr_assert_eq(len, 4);
		p->flags = rd32(v);
	} else if (code == 1) {
		cr_assert_lt(len, sizeof(p->comment));
		memcpy(p->comment, v, len);
	}
}

static void read_file(const char *path, struct file *f)
{
	FILE *fp = fopen(path, "rb");
	size_t off = 0;

	memset(f, 0, sizeof(*f));
	cr_assert_not_null(fp, "no file %s", path);
	f->buf = malloc(1 << 22);
	f->len = fread(f->buf, 1, 1 << 22, fp);
	fclose(fp);
	while (off < f->len) {
		struct blk *b = &f->blk[f->nblk++];

		cr_assert_lt(f->nblk, 64);
		cr_assert_leq(off + 12, f->len);
		b->type = rd32(f->buf + off);
		b->len = rd32(f->buf + off + 4);
		cr_assert_eq(b->len % 4, 0, "block length %u not a multiple of 4", b->len);
		cr_assert_leq(off + b->len, f->len, "block past the end of the file");
		cr_assert_eq(rd32(f->buf + off + b->len - 4), b->len, "trailing length differs");
		b->body = f->buf + off + 8;
		b->body_len = b->len - 12;
		off += b->len;
		if (b->type == 1) {
			unsigned i = f->nifaces;

			f->linktype[i] = rd16(b->body);
			f->snaplen[i] = rd32(b->body + 4);
			options(b->body + 8, b->body + b->body_len, idb_opt, f);
			f->nifaces++;
		} else if (b->type == 6) {
			struct pkt *p = &f->pkt[f->npkts++];

			p->iface = rd32(b->body);
			p->ts = (uint64_t)rd32(b->body + 4) << 32 | rd32(b->body + 8);
			p->cap = rd32(b->body + 12);
			p->orig = rd32(b->body + 16);
			p->data = b->body + 20;
			cr_assert_leq(p->cap, p->orig);
			options(b->body + 20 + ((p->cap + 3u) & ~3u), b->body + b->body_len,
				epb_opt, p);
		}
	}
	cr_assert_eq(f->nblk > 0 ? f->blk[0].type : 0, 0x0a0d0d0au, "no section header first");
	cr_assert_eq(rd32(f->blk[0].body), 0x1a2b3c4du, "byte-order magic");
	cr_assert_eq(rd16(f->blk[0].body + 4), 1, "major version");
	cr_assert_eq(rd16(f->blk[0].body + 6), 0, "minor version");
}

/* ---- the writer ---- */

Test(trace, writer_blocks_read_back)
{
	struct cour_pcapng p;
	char path[128];
	struct file f;
	uint8_t a[7] = "abcdefg", b[300];
	struct iovec v[2] = { { a, 3 }, { a + 3, 4 } }, w = { b, sizeof(b) };

	for (size_t i = 0; i < sizeof(b); i++)
		b[i] = (uint8_t)i;
	snprintf(path, sizeof(path), "%s/w.pcapng", dir);
	cr_assert_eq(cour_pcapng_open(&p, path, 1 << 20, "test"), 0);
	cr_assert_eq(cour_pcapng_iface(&p, COUR_PCAPNG_LINKTYPE_RAW, 1000, "one", "first"), 0);
	cr_assert_eq(cour_pcapng_iface(&p, COUR_PCAPNG_LINKTYPE_RAW, 64, "two", NULL), 0);
	/* 7 bytes in two iovecs; 300 cut to 64; an empty one with a comment */
	cour_pcapng_packet(&p, 0, 0x123456789abcdef0ull, COUR_PCAPNG_OUT, NULL, v, 2, 7, 7);
	cour_pcapng_packet(&p, 1, 5, COUR_PCAPNG_IN, NULL, &w, 1, 64, 300);
	cour_pcapng_packet(&p, 0, 6, COUR_PCAPNG_OUT, "lost on purpose", NULL, 0, 0, 0);
	cr_assert_eq(p.packets, 3);
	cour_pcapng_close(&p);

	read_file(path, &f);
	cr_assert_eq(f.nifaces, 2);
	cr_assert_eq(f.linktype[0], 101);
	cr_assert_eq(f.snaplen[0], 1000);
	cr_assert_str_eq(f.ifname[0], "one");
	cr_assert_str_eq(f.ifname[1], "two");
	cr_assert_eq(f.tsresol[0], 9, "timestamps in nanoseconds");
	cr_assert_eq(f.npkts, 3);
	cr_assert_eq(f.pkt[0].ts, 0x123456789abcdef0ull);
	cr_assert_eq(f.pkt[0].cap, 7);
	cr_assert_eq(memcmp(f.pkt[0].data, "abcdefg", 7), 0);
	cr_assert_eq(f.pkt[0].flags, COUR_PCAPNG_OUT);
	cr_assert_eq(f.pkt[1].iface, 1);
	cr_assert_eq(f.pkt[1].cap, 64);
	cr_assert_eq(f.pkt[1].orig, 300);
	cr_assert_eq(memcmp(f.pkt[1].data, b, 64), 0);
	cr_assert_eq(f.pkt[1].flags, COUR_PCAPNG_IN);
	cr_assert_eq(f.pkt[2].cap, 0);
	cr_assert_str_eq(f.pkt[2].comment, "lost on purpose");
	cr_assert_eq(warnings, 0);
	free(f.buf);
}

Test(trace, the_bound_stops_the_file_and_says_so_once)
{
	struct cour_pcapng p;
	char path[128];
	struct file f;
	uint8_t b[1000] = { 0 };
	struct iovec w = { b, sizeof(b) };
	struct stat st;

	snprintf(path, sizeof(path), "%s/b.pcapng", dir);
	/* room for the header blocks and three packets of 1000 bytes (1040 a block) */
	cr_assert_eq(cour_pcapng_open(&p, path, 4000, NULL), 0);
	cr_assert_eq(cour_pcapng_iface(&p, COUR_PCAPNG_LINKTYPE_RAW, 2000, "x", NULL), 0);
	for (int i = 0; i < 10; i++)
		cour_pcapng_packet(&p, 0, (uint64_t)i, COUR_PCAPNG_OUT, NULL, &w, 1, 1000, 1000);
	cr_assert_eq(p.packets, 3);
	cr_assert_eq(p.lost, 7);
	cr_assert(p.stopped);
	cr_assert_eq(warnings, 1, "said %d times", warnings);
	cour_pcapng_close(&p);
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_leq(st.st_size, 4000);
	read_file(path, &f);
	cr_assert_eq(f.npkts, 3);
	free(f.buf);
}

Test(trace, buffered_until_full)
{
	struct cour_pcapng p;
	char path[128];
	uint8_t b[1000] = { 0 };
	struct iovec w = { b, sizeof(b) };
	struct stat st;
	int n = 0;

	snprintf(path, sizeof(path), "%s/f.pcapng", dir);
	cr_assert_eq(cour_pcapng_open(&p, path, 1 << 30, NULL), 0);
	cr_assert_eq(cour_pcapng_iface(&p, COUR_PCAPNG_LINKTYPE_RAW, 2000, "x", NULL), 0);
	/* one timestamp for all: only a full buffer writes */
	do {
		cr_assert_eq(stat(path, &st), 0);
		cr_assert_eq(st.st_size, 0, "written after %d packets, before the buffer filled", n);
		cour_pcapng_packet(&p, 0, 1, COUR_PCAPNG_OUT, NULL, &w, 1, 1000, 1000);
		n++;
	} while (p.len + 2 * 1100 < COUR_PCAPNG_BUF);    /* room for one more, and a half */
	/* a second later, the next packet writes what is buffered */
	cour_pcapng_packet(&p, 0, 1 + COUR_PCAPNG_AGE_NS + 1, COUR_PCAPNG_OUT, NULL, &w, 1,
			   1000, 1000);
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq((uint64_t)st.st_size, p.size, "an old buffer is written");
	cour_pcapng_close(&p);
}

Test(trace, an_unwritable_path_is_said_and_refused)
{
	struct cour_pcapng p;

	cr_assert_neq(cour_pcapng_open(&p, "/nonexistent/dir/x.pcapng", 1 << 20, NULL), 0);
	cr_assert_eq(warnings, 1);
}

/* ---- the made-up IP and UDP headers ---- */

static uint16_t csum(const uint8_t *p, size_t len, uint32_t sum)
{
	for (size_t i = 0; i + 1 < len; i += 2)
		sum += (uint32_t)p[i] << 8 | p[i + 1];
	if (len % 2)
		sum += (uint32_t)p[len - 1] << 8;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)sum;
}

static void sin4(struct sockaddr_storage *ss, const char *ip, uint16_t port)
{
	struct sockaddr_in *s = (void *)ss;

	memset(ss, 0, sizeof(*ss));
	s->sin_family = AF_INET;
	s->sin_port = htons(port);
	inet_pton(AF_INET, ip, &s->sin_addr);
}

static void sin6(struct sockaddr_storage *ss, const char *ip, uint16_t port)
{
	struct sockaddr_in6 *s = (void *)ss;

	memset(ss, 0, sizeof(*ss));
	s->sin6_family = AF_INET6;
	s->sin6_port = htons(port);
	inet_pton(AF_INET6, ip, &s->sin6_addr);
}

Test(trace, ipv4_header)
{
	struct sockaddr_storage a, b;
	uint8_t h[COUR_TRACE_IPHDR_MAX], data[33] = "courier";
	struct iovec v = { data, sizeof(data) };

	sin4(&a, "198.18.0.1", 5000);
	sin4(&b, "198.18.0.2", 6000);
	cr_assert_eq(cour_trace_ip_udp(h, false, &a, &b, 7, &v, 1, sizeof(data)), 28);
	cr_assert_eq(h[0], 0x45);
	cr_assert_eq(h[9], IPPROTO_UDP);
	cr_assert_eq(h[2] << 8 | h[3], 28 + 33, "IP total length");
	cr_assert_eq(csum(h, 20, 0), 0xffff, "IPv4 header checksum");
	cr_assert_eq(memcmp(h + 12, "\xc6\x12\x00\x01\xc6\x12\x00\x02", 8), 0);
	cr_assert_eq(h[20] << 8 | h[21], 5000);
	cr_assert_eq(h[22] << 8 | h[23], 6000);
	cr_assert_eq(h[24] << 8 | h[25], 8 + 33, "UDP length");
	/* an IPv4 interface: a mapped address keeps its IPv4 form, another has none */
	sin6(&a, "::ffff:198.18.0.9", 5000);
	sin6(&b, "2001:db8::2", 6000);
	cr_assert_eq(cour_trace_ip_udp(h, false, &a, &b, 8, &v, 1, sizeof(data)), 28);
	cr_assert_eq(memcmp(h + 12, "\xc6\x12\x00\x09\0\0\0\0", 8), 0);
	cr_assert_eq(csum(h, 20, 0), 0xffff);
}

Test(trace, ipv6_header_and_udp_checksum)
{
	struct sockaddr_storage a, b;
	uint8_t h[COUR_TRACE_IPHDR_MAX], data[33], pseudo[40];
	struct iovec v[2] = { { data, 10 }, { data + 10, 23 } };   /* odd split: mid-word */

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 37 + 1);
	sin6(&a, "2001:db8::1", 7000);
	sin4(&b, "198.18.0.2", 7001);         /* mixed: the IPv4 one is mapped */
	cr_assert_eq(cour_trace_ip_udp(h, true, &a, &b, 0, v, 2, sizeof(data)), 48);
	cr_assert_eq(h[0] >> 4, 6);
	cr_assert_eq(h[6], IPPROTO_UDP);
	cr_assert_eq(memcmp(h + 24 + 10, "\xff\xff\xc6\x12\x00\x02", 6), 0, "v4-mapped");
	/* the receiver's check: pseudo-header + UDP header + data sums to 0xffff */
	memcpy(pseudo, h + 8, 32);
	memset(pseudo + 32, 0, 8);
	pseudo[34] = 0;
	pseudo[35] = 8 + 33;
	pseudo[39] = IPPROTO_UDP;
	uint16_t s = csum(pseudo, 40, 0);
	s = csum(h + 40, 8, s);
	s = csum(data, sizeof(data), s);
	cr_assert_eq(s, 0xffff, "IPv6 UDP checksum");
	cr_assert_neq(h[46] << 8 | h[47], 0, "IPv6 has no zero checksum");
}

/* ---- a wire's capture ---- */

static void fake_wire(struct cour_wire *w)
{
	memset(w, 0, sizeof(*w));
	w->base = w->ops = &cour_udp_wire;
	sin4(&w->bound_sa, "127.0.0.1", 4000);
	w->bound_len = sizeof(struct sockaddr_in);
	cr_assert_eq(cour_addr_from_sockaddr(&w->addr, &w->bound_sa, w->bound_len), 0);
}

static void capture_path(char *out, size_t len)
{
	snprintf(out, len, "%s/courier.%ld.", dir, (long)getpid());
}

Test(trace, off_unless_asked)
{
	struct cour_wire w;

	fake_wire(&w);
	cour_trace_open(&w);
	cr_assert_null(w.trace);
}

Test(trace, a_wire_capture_cuts_runs_and_trains)
{
	struct cour_wire w;
	struct sockaddr_storage peer;
	uint8_t run[350], ring[40], hdr[8] = "HEADER!";
	struct iovec v[3] = { { run, 100 }, { run + 100, 150 }, { run + 250, 100 } };
	union { char buf[CMSG_SPACE(sizeof(uint16_t))]; struct cmsghdr c; } ctl;
	struct mmsghdr mm = { 0 };
	struct msghdr *m = &mm.msg_hdr;
	char prefix[128], path[160];
	struct file f;
	uint16_t seg = 120;
	unsigned k;

	for (size_t i = 0; i < sizeof(run); i++)
		run[i] = (uint8_t)i;
	memset(ring, 'r', sizeof(ring));
	cour_params.trace = dir;
	cour_params.trace_snap = 100;
	fake_wire(&w);
	sin4(&peer, "127.0.0.2", 4001);
	cour_trace_open(&w);
	cr_assert_not_null(w.trace);

	/* sent: a GSO run of 350 bytes in segments of 120 (120, 120, 110), iovecs cut across */
	m->msg_name = &peer;
	m->msg_namelen = sizeof(struct sockaddr_in);
	m->msg_iov = v;
	m->msg_iovlen = 3;
	m->msg_control = ctl.buf;
	m->msg_controllen = sizeof(ctl.buf);
	struct cmsghdr *c = CMSG_FIRSTHDR(m);
	c->cmsg_level = IPPROTO_UDP;
	c->cmsg_type = UDP_SEGMENT;
	c->cmsg_len = CMSG_LEN(sizeof(seg));
	memcpy(CMSG_DATA(c), &seg, sizeof(seg));
	cour_trace_udp_sent_mmsg(&w, &mm, 1);
	/* received: the same bytes as a GRO train of 120-byte datagrams */
	m->msg_control = NULL;
	m->msg_controllen = 0;
	cour_trace_udp_rcvd(&w, m, sizeof(run), 120);
	/* a ring packet each way, and a dropped one */
	cour_trace_shm(&w, true, &peer, sizeof(struct sockaddr_in), hdr, sizeof(hdr),
		       &(struct iovec){ ring, sizeof(ring) }, 1);
	cour_trace_shm(&w, false, &peer, 3, ring, sizeof(ring), NULL, 0);  /* bad tag */
	m->msg_iovlen = 1;
	cour_trace_fault_drop(&w, m);
	cour_trace_close(&w);
	cr_assert_null(w.trace);

	capture_path(prefix, sizeof(prefix));
	for (k = 0; k < 100; k++) {
		snprintf(path, sizeof(path), "%s%u.pcapng", prefix, k);
		if (access(path, F_OK) == 0)
			break;
	}
	read_file(path, &f);
	cr_assert_eq(f.nifaces, 2);
	cr_assert_str_eq(f.ifname[0], "courier-udp");
	cr_assert_str_eq(f.ifname[1], "courier-shm");
	cr_assert_eq(f.linktype[0], COUR_PCAPNG_LINKTYPE_IPV4, "an IPv4 socket's interfaces");
	cr_assert_eq(f.linktype[1], COUR_PCAPNG_LINKTYPE_IPV4);
	cr_assert_eq(f.npkts, 3 + 3 + 2 + 1);
	for (int d = 0; d < 2; d++) {            /* sent, then received */
		for (int i = 0; i < 3; i++) {
			struct pkt *p = &f.pkt[d * 3 + i];
			size_t len = i < 2 ? 120 : 110;

			cr_assert_eq(p->iface, 0);
			cr_assert_eq(p->orig, 28 + len, "datagram %d of %s", i, d ? "rx" : "tx");
			cr_assert_eq(p->cap, 28 + COUR_MIN(len, 100u));
			cr_assert_eq(memcmp(p->data + 28, run + 120 * i, p->cap - 28), 0,
				     "datagram %d's bytes", i);
			cr_assert_eq(p->flags, d ? COUR_PCAPNG_IN : COUR_PCAPNG_OUT);
			/* sent from us (127.0.0.1:4000), received from the peer */
			cr_assert_eq(p->data[12 + 3], d ? 2 : 1);
			cr_assert_eq(p->data[20] << 8 | p->data[21], d ? 4001 : 4000);
		}
	}
	cr_assert_eq(f.pkt[6].iface, 1);
	cr_assert_eq(f.pkt[6].orig, 28 + 8 + 40);
	cr_assert_eq(memcmp(f.pkt[6].data + 28, "HEADER!", 8), 0);
	cr_assert_eq(f.pkt[7].iface, 1);
	cr_assert_eq(f.pkt[7].flags, COUR_PCAPNG_IN);
	cr_assert_eq(memcmp(f.pkt[7].data + 12, "\0\0\0\0", 4), 0, "a bad tag: zero source");
	cr_assert_eq(f.pkt[8].orig, 28 + 100);
	cr_assert(strstr(f.pkt[8].comment, "FI_COURIER_FAULT"));
	for (unsigned i = 1; i < f.npkts; i++)
		cr_assert_geq(f.pkt[i].ts, f.pkt[i - 1].ts);
	cr_assert_gt(f.pkt[0].ts, 1600000000ull * 1000000000ull, "wall-clock nanoseconds");
	free(f.buf);
}
