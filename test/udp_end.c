/*
 * The recording stand-in for the engine that the UDP wire's tests hand up to (udp_end.h).
 */
#include "udp_end.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <poll.h>
#include <stdlib.h>
#include <unistd.h>

struct fi_provider cour_prov = { .name = "courier" };
struct cour_params cour_params;

struct end ends[3];

/* the payload byte at datagram offset i (header included) of datagram id */
uint8_t pattern(uint32_t id, size_t i)
{
	return (uint8_t)((uint8_t)(id * 7 + 1) + i);
}

static bool in_stream(const struct end *e, uint32_t id)
{
	return e->placing && id >= e->base && id - e->base < e->cap;
}

static void *rec_packet(void *arg, void *buf, size_t len, const struct sockaddr_storage *sa,
			socklen_t sa_len)
{
	struct end *e = arg;
	struct seen *s;
	const uint8_t *p = buf;

	cr_assert_lt(e->nseen, MAX_SEEN);
	/* the engine reads its headers as structs of 8-byte fields */
	cr_assert_eq((uintptr_t)buf % 8, 0, "datagram %zu handed up unaligned", e->nseen);
	s = &e->seen[e->nseen++];
	s->len = len;
	s->borrowed = e->w.rx_borrowed;
	cr_assert_geq(len, HDR_LEN);
	memcpy(e->last, buf, COUR_MIN(len, sizeof(e->last)));
	memcpy(&s->id, p + ID_OFF, sizeof(s->id));
	s->fill = p[FILL_OFF];
	s->intact = true;
	for (size_t i = HDR_LEN; i < len; i++)
		if (p[i] != (uint8_t)(s->fill + i))
			s->intact = false;
	/* what an engine does with the piece it waits for, had it not been placed: copy it */
	if (in_stream(e, s->id) && s->id == e->next) {
		memcpy(e->place + (s->id - e->base) * e->plen, p + HDR_LEN, len - HDR_LEN);
		e->next++;
	}
	e->w.rx_direct = e->placing;
	e->w.rx_direct_more = e->placing && !e->alone;
	return buf;       /* never kept: the wire reads the next one into it */
}

static void *rec_direct(void *arg, const void *hdr, size_t len, size_t seg, size_t *run,
			const struct sockaddr_storage *sa, socklen_t sa_len)
{
	struct end *e = arg;
	size_t first = run ? seg : len;
	uint32_t id;

	memcpy(&id, (const uint8_t *)hdr + ID_OFF, sizeof(id));
	if (!in_stream(e, id) || id != e->next || first - HDR_LEN != e->plen)
		return NULL;
	if (run)
		*run = COUR_MIN((len + seg - 1) / seg, (size_t)(e->cap - (id - e->base)));
	return e->place + (id - e->base) * e->plen;
}

static bool rec_in_run(const void *first, const void *hdr, size_t i, size_t plen)
{
	uint32_t a, b;

	memcpy(&a, (const uint8_t *)first + ID_OFF, sizeof(a));
	memcpy(&b, (const uint8_t *)hdr + ID_OFF, sizeof(b));
	return b == a + i;
}

static void rec_placed(void *arg, void *hdr, const void *payload, size_t len, bool checked,
		       const struct sockaddr_storage *sa, socklen_t sa_len)
{
	struct end *e = arg;
	const uint8_t *h = hdr, *p = payload;
	struct seen *s;

	cr_assert_lt(e->nseen, MAX_SEEN);
	s = &e->seen[e->nseen++];
	s->len = len;
	s->borrowed = e->w.rx_borrowed;
	s->placed = true;
	s->checked = checked;
	memcpy(&s->id, h + ID_OFF, sizeof(s->id));
	s->fill = h[FILL_OFF];
	cr_assert(e->placing && s->id == e->next, "placed %u, waiting for %u", s->id, e->next);
	cr_assert_eq(p, e->place + (s->id - e->base) * e->plen, "%u placed elsewhere", s->id);
	s->intact = true;
	for (size_t i = HDR_LEN; i < len; i++)
		if (p[i - HDR_LEN] != (uint8_t)(s->fill + i))
			s->intact = false;
	e->next++;
	/* an engine that, with this piece in, releases the next one it held out of order
	 * writes that one's bytes into its place at once */
	if (s->id == e->clobber && in_stream(e, e->next)) {
		for (size_t i = 0; i < e->plen; i++)
			e->place[(e->next - e->base) * e->plen + i] =
				pattern(e->next, i + HDR_LEN);
		e->next++;
	}
}

static void rec_refused(void *arg, const struct sockaddr_storage *sa, socklen_t sa_len)
{
}

static bool rec_is_handshake(const void *pkt, size_t len)
{
	return false;
}

const struct cour_wire_rx_ops rec_ops = {
	.packet = rec_packet,
	.direct = rec_direct,
	.in_run = rec_in_run,
	.placed = rec_placed,
	.refused = rec_refused,
	.is_handshake = rec_is_handshake,
	.hdr_len = HDR_LEN,
};

/* set by a test before open_end: the ends it opens authenticate with it */
const char *wire_key;

void open_end(struct end *e, bool gso, bool gro)
{
	open_end_with(e, gso, gro, &rec_ops, -1);
}

void open_end_with(struct end *e, bool gso, bool gro, const struct cour_wire_rx_ops *ops,
		   int bell_epfd)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct cour_addr want;

	memset(e, 0, sizeof(*e));
	cour_params.udp_gso = gso;
	cour_params.udp_gro = gro;
	inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
	cr_assert_eq(cour_addr_from_sockaddr(&want, &sin, sizeof(sin)), 0);
	cour_pool_init(&e->pool, COUR_WIRE_RXBUF_MIN + 64, COUR_WIRE_RX_BATCH, 64);
	cour_wire_init(&e->w, &cour_udp_wire, ops, e, &e->pool, COUR_WIRE_RXBUF_MIN + 64);
	e->w.bell_epfd = bell_epfd;
	if (wire_key)
		cr_assert_eq(cour_wire_auth(&e->w, wire_key, strlen(wire_key), 60), 0);
	cr_assert_eq(e->w.ops->open(&e->w, &want), 0);
	cr_assert_eq(e->w.gso_on, gso, "this kernel has UDP GSO (4.18+)");
	cr_assert_eq(e->w.gro_on, gro, "this kernel has UDP GRO (5.0+)");
}

void udp_end_setup(void)
{
	memset(&cour_params, 0, sizeof(cour_params));
	wire_key = NULL;
	cour_params.sockbuf = 4u << 20;
	cour_params.gso_segs = 64;
	cour_params.udp_pack = 1;       /* (the default: short datagrams are padded into runs) */
}

void udp_end_teardown(void)
{
	for (int i = 0; i < 3; i++) {
		if (ends[i].w.ops) {
			ends[i].w.ops->close(&ends[i].w);
			cour_wire_auth_fini(&ends[i].w);
			cr_expect_eq(ends[i].pool.in_use, 0, "receive buffers not given back");
			cour_pool_fini(&ends[i].pool);
		}
		memset(&ends[i], 0, sizeof(ends[i]));
	}
}

/* Datagram id to `to`: HDR_LEN header bytes (id, fill) and a payload derived from both. */
uint8_t payload[MAX_SEEN][12288];
uint8_t hdrs[MAX_SEEN][HDR_LEN];

void queue(struct end *from, struct end *to, uint32_t id, size_t len)
{
	queue_pack(from, to, id, len, 0);
}

void queue_pack(struct end *from, struct end *to, uint32_t id, size_t len, uint32_t pack)
{
	struct iovec v = { .iov_base = payload[id], .iov_len = len - HDR_LEN };
	uint8_t fill = pattern(id, 0);

	cr_assert_lt(id, MAX_SEEN);
	cr_assert_leq(len - HDR_LEN, sizeof(payload[id]));
	memset(hdrs[id], 0, HDR_LEN);
	hdrs[id][0] = HDR_MARK;
	memcpy(hdrs[id] + ID_OFF, &id, sizeof(id));
	hdrs[id][FILL_OFF] = fill;
	for (size_t i = HDR_LEN; i < len; i++)
		payload[id][i - HDR_LEN] = (uint8_t)(fill + i);
	from->w.ops->queue(&from->w, &to->w.bound_sa, to->w.bound_len, hdrs[id], HDR_LEN, &v, 1,
			   pack);
}

/* Poll e until it has seen n datagrams (2 s at most). */
void receive(struct end *e, size_t n)
{
	uint64_t end = cour_now_us() + 2000000;

	while (e->nseen < n && cour_now_us() < end) {
		struct pollfd p = { .fd = e->w.fd, .events = POLLIN };

		poll(&p, 1, 50);
		e->w.ops->poll(&e->w);
	}
	cr_assert_eq(e->nseen, n, "received %zu of %zu datagrams", e->nseen, n);
}

/* e saw ids first.. in order, each of its length, every byte intact. */
void check_seen(const struct end *e, uint32_t first, const size_t *lens, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct seen *s = &e->seen[i];

		cr_expect_eq(s->id, first + i, "datagram %zu: id %u", i, s->id);
		cr_expect_eq(s->len, lens[i], "datagram %u: %zu bytes, want %zu", s->id, s->len,
			     lens[i]);
		cr_expect(s->intact, "datagram %u: payload corrupted", s->id);
	}
}

/* Wait (1 s at most) until e's socket has something to read. */
void wait_readable(struct end *e)
{
	struct pollfd p = { .fd = e->w.fd, .events = POLLIN };

	cr_assert_eq(poll(&p, 1, 1000), 1, "nothing arrived");
}

