/*
 * stream_verify: a one-way stream of at least 100 MiB in messages of 1 byte to 4 MiB, tagged
 * and untagged mixed, every byte checked, for runs over lossy links (test_netns_loss.sh runs
 * it between two network namespaces with nftables dropping packets and courier's injector
 * duplicating, reordering and corrupting them). The client sends, the server receives.
 *
 * Sizes: first every size of sv_edge[] once (the boundaries where a provider changes how it
 * carries a message), then a seeded mix until the byte budget is reached: half small
 * (1..256 B), a fifth up to 16 KiB, the rest log-uniform up to 4 MiB or edge sizes again; so
 * most messages are small and most bytes are in large ones. The client picks seed,
 * budget and mode and sends them to the server over the oob channel, so both sides derive the
 * same list.
 *
 * Checks, per message: the completion is a success with the flags of its kind (FI_TAGGED or
 * FI_MSG); the receive's length is the message's (the receive is posted SV_GUARD bytes
 * larger, and those bytes must come back untouched); a tagged receive carries its tag; every
 * byte has the sequence number's pattern. Untagged messages match their receives by order
 * (FI_ORDER_SAS), tagged ones by tag, so a lost, duplicated, reordered or misrouted message
 * fails. With -L (the link is lossy) the courier statistics must show the repair: resends at
 * the sender, out-of-order or duplicate packets at the receiver, and with checksums on and a
 * corrupting injector, dropped corrupt packets.
 */
#define _GNU_SOURCE

#include <endian.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ft_func.h"

#define SV_MAX_MSG	(4UL << 20)
#define SV_GUARD	64
#define SV_GUARD_BYTE	0xa5
#define SV_SLOTS_MAX	64
#define SV_SLOTS_DEF	16
#define SV_MSGS_MAX	(1 << 17)
#define SV_BYTES_DEF	(100ULL << 20)
#define SV_TAG(seq)	(0x5e00000000ULL + (seq))
#define SV_WAIT_MS	60000	/* one completion; a peer may be paused 30 s (test_peer_pause.sh) */

enum sv_mode { SV_MIXED, SV_TAGGED, SV_MSG };
static const char *const sv_mode_name[] = { "mixed", "tagged", "msg" };

/*
 * 1400 and 1472: courier's payload per packet and the UDP payload on a 1500-byte MTU link;
 * 2800: two full packets; 4096: courier's inject size; 9000: a jumbo frame; 64928: courier's
 * payload per packet on loopback; 65536: eager_max before 0.2.0, 262144: courier's
 * eager/rendezvous cutover (eager_max); then the largest sizes.
 */
static const size_t sv_edge[] = {
	1, 2, 3, 7, 8, 63, 64, 65, 255, 1399, 1400, 1401, 1471, 1472, 1473, 2799, 2800, 2801,
	4095, 4096, 4097, 8999, 9000, 64927, 64928, 64929, 65535, 65536, 65537, 131071, 131073,
	262143, 262144, 262145, 1048575, 1048576, 1048577, SV_MAX_MSG - 1, SV_MAX_MSG,
};

struct sv_plan {		/* what the client tells the server */
	uint64_t seed;
	uint64_t bytes;
	uint64_t mode;
};

struct sv {
	struct func f;
	struct sv_plan plan;
	bool expect_loss;
	int slots;
	struct cour_ft_buf buf;
	struct fi_context2 ctx[SV_SLOTS_MAX];
	long slot_msg[SV_SLOTS_MAX];
	size_t size[SV_MSGS_MAX];
	bool tagged[SV_MSGS_MAX];
	long nmsgs;
	uint64_t total;
	long ntagged;
};

static uint64_t sv_rand(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static void sv_make_plan(struct sv *t)
{
	uint64_t x = t->plan.seed, r;
	long i;

	t->total = 0;
	t->ntagged = 0;
	for (i = 0; i < SV_MSGS_MAX && (t->total < t->plan.bytes ||
					i < (long)COUR_FT_ARRAY_SIZE(sv_edge)); i++) {
		r = sv_rand(&x);
		if (i < (long)COUR_FT_ARRAY_SIZE(sv_edge))
			t->size[i] = sv_edge[i];
		else if (r % 20 < 10)
			t->size[i] = 1 + (size_t)((r >> 8) % 256);
		else if (r % 20 < 14)
			t->size[i] = 1 + (size_t)((r >> 8) % 16384);
		else if (r % 20 < 17)	/* 2^(0..22) scale, then uniform below it */
			t->size[i] = 1 + (size_t)((r >> 16) % (1ULL << ((r >> 8) % 23)));
		else
			t->size[i] = sv_edge[(r >> 8) % COUR_FT_ARRAY_SIZE(sv_edge)];
		t->tagged[i] = t->plan.mode == SV_TAGGED ||
			       (t->plan.mode == SV_MIXED && (r >> 62) & 1);
		t->total += t->size[i];
		t->ntagged += t->tagged[i];
	}
	t->nmsgs = i;
}

static int sv_opt(int opt, const char *arg, void *ctx)
{
	struct sv *t = ctx;
	char *end;

	switch (opt) {
	case 's':
		t->plan.seed = strtoull(arg, &end, 0);
		return *end != '\0';
	case 'b':
		t->plan.bytes = strtoull(arg, &end, 0) << 20;
		return *end != '\0' || !t->plan.bytes;
	case 'x':
		for (t->plan.mode = 0; t->plan.mode < COUR_FT_ARRAY_SIZE(sv_mode_name);
		     t->plan.mode++)
			if (!strcasecmp(arg, sv_mode_name[t->plan.mode]))
				return 0;
		return 1;
	case 'L':
		t->expect_loss = true;
		return 0;
	default:
		return 1;
	}
}

static const char sv_usage[] =
	"stream_verify options (the client's -s -b -x apply to both sides):\n"
	"  -s <seed>     size and kind sequence (default 1)\n"
	"  -b <MiB>      bytes to move, at least (default 100)\n"
	"  -x mixed|tagged|msg  message kinds (default mixed)\n"
	"  -L            the link is lossy: require courier's statistics to show repairs\n"
	"  -W <count>    messages in flight (default 16, at most 64)\n";

static int sv_exchange_plan(struct sv *t)
{
	struct func *f = &t->f;
	uint64_t msg[3];

	if (!f->ft.is_server) {
		msg[0] = htobe64(t->plan.seed);
		msg[1] = htobe64(t->plan.bytes);
		msg[2] = htobe64(t->plan.mode);
		FUNC_CALL(f, cour_ft_oob_send(&f->ft, msg, sizeof(msg)));
		return 0;
	}
	FUNC_CALL(f, cour_ft_oob_recv(&f->ft, msg, sizeof(msg)));
	t->plan.seed = be64toh(msg[0]);
	t->plan.bytes = be64toh(msg[1]);
	t->plan.mode = be64toh(msg[2]);
	FUNC_ASSERT(f, t->plan.mode < COUR_FT_ARRAY_SIZE(sv_mode_name) && t->plan.bytes,
		    "bad plan from the client: mode %llu, %llu bytes",
		    (unsigned long long)t->plan.mode, (unsigned long long)t->plan.bytes);
	return 0;
}

static char *sv_slot(struct sv *t, int slot)
{
	return (char *)t->buf.base + (size_t)slot * (SV_MAX_MSG + SV_GUARD);
}

static int sv_post(struct sv *t, int slot, long msg)
{
	struct func *f = &t->f;
	struct fid_ep *ep = f->ft.ep;
	char *p = sv_slot(t, slot);
	size_t len = t->size[msg];
	void *desc = t->buf.desc;

	t->slot_msg[slot] = msg;
	if (f->ft.is_server) {
		memset(p + len, SV_GUARD_BYTE, SV_GUARD);
		if (t->tagged[msg])
			return FUNC_POST(f, fi_trecv(ep, p, len + SV_GUARD, desc, f->ft.peer,
						     SV_TAG((uint64_t)msg), 0, &t->ctx[slot]));
		return FUNC_POST(f, fi_recv(ep, p, len + SV_GUARD, desc, f->ft.peer,
					    &t->ctx[slot]));
	}
	cour_ft_fill(p, len, (uint64_t)msg);
	if (t->tagged[msg])
		return FUNC_POST(f, fi_tsend(ep, p, len, desc, f->ft.peer, SV_TAG((uint64_t)msg),
					     &t->ctx[slot]));
	return FUNC_POST(f, fi_send(ep, p, len, desc, f->ft.peer, &t->ctx[slot]));
}

static int sv_check_rx(struct sv *t, int slot, long msg, const struct func_comp *c)
{
	struct func *f = &t->f;
	const uint8_t *p = (const uint8_t *)sv_slot(t, slot);
	uint64_t kind = t->tagged[msg] ? FI_TAGGED : FI_MSG;
	size_t i;

	FUNC_ASSERT(f, (c->e.flags & (FI_RECV | FI_TAGGED | FI_MSG)) == (FI_RECV | kind),
		    "message %ld: flags 0x%llx, want FI_RECV|%s", msg,
		    (unsigned long long)c->e.flags, t->tagged[msg] ? "FI_TAGGED" : "FI_MSG");
	FUNC_ASSERT(f, c->e.len == t->size[msg], "message %ld (%s): %zu bytes, want %zu "
		    "(lost, duplicated or reordered message?)", msg,
		    t->tagged[msg] ? "tagged" : "untagged", c->e.len, t->size[msg]);
	FUNC_ASSERT(f, !t->tagged[msg] || c->e.tag == SV_TAG((uint64_t)msg),
		    "message %ld: tag 0x%llx, want 0x%llx", msg, (unsigned long long)c->e.tag,
		    (unsigned long long)SV_TAG((uint64_t)msg));
	FUNC_CALL(f, func_check_data(f, p, t->size[msg], (uint64_t)msg, "received"));
	for (i = 0; i < SV_GUARD; i++)
		FUNC_ASSERT(f, p[t->size[msg] + i] == SV_GUARD_BYTE, "message %ld: byte %zu "
			    "past its %zu bytes was written (0x%02x)", msg, i, t->size[msg],
			    p[t->size[msg] + i]);
	return 0;
}

static int sv_run(struct sv *t)
{
	struct func *f = &t->f;
	bool rx = f->ft.is_server;
	struct func_comp c;
	long next = 0, done = 0, msg;
	int slot;

	for (slot = 0; slot < t->slots && next < t->nmsgs; slot++)
		FUNC_CALL(f, sv_post(t, slot, next++));
	while (done < t->nmsgs) {
		FUNC_CALL(f, func_next(f, !rx, &c, SV_WAIT_MS));
		slot = (int)((struct fi_context2 *)c.e.op_context - t->ctx);
		FUNC_ASSERT(f, slot >= 0 && slot < t->slots, "op_context %p", c.e.op_context);
		msg = t->slot_msg[slot];
		FUNC_ASSERT(f, !c.is_err, "message %ld (%zu bytes, %s): error %d (%s), "
			    "prov_errno %d", msg, t->size[msg],
			    t->tagged[msg] ? "tagged" : "untagged", c.err.err,
			    fi_strerror(c.err.err), c.err.prov_errno);
		if (rx)
			FUNC_CALL(f, sv_check_rx(t, slot, msg, &c));
		else
			FUNC_ASSERT(f, c.e.flags & FI_SEND, "message %ld: send completion flags "
				    "0x%llx", msg, (unsigned long long)c.e.flags);
		done++;
		if (next < t->nmsgs)
			FUNC_CALL(f, sv_post(t, slot, next++));
	}
	return 0;
}

/* The fault spec's percentage for key ("corrupt"), 0 when absent. */
static unsigned sv_fault_pct(const char *key)
{
	const char *spec = getenv("FI_COURIER_FAULT"), *p;
	size_t klen = strlen(key);

	for (p = spec; p && (p = strstr(p, key)); p += klen)
		if ((p == spec || p[-1] == ',') && p[klen] == '=')
			return (unsigned)strtoul(p + klen + 1, NULL, 10);
	return 0;
}

static int sv_stats(struct sv *t)
{
	struct func *f = &t->f;
	struct fi_courier_stats st;
	const char *checksum = getenv("FI_COURIER_CHECKSUM");
	int ret;

	ret = func_get_stats(f->ft.ep, &st);
	if (!func_is_courier(f)) {
		printf("stream_verify: %s has no courier statistics, not checked\n",
		       f->ft.info->fabric_attr->prov_name);
		return 0;
	}
	FUNC_CALL(f, ret);
	printf("stream_verify: %s stats: tx_pkts %llu rx_pkts %llu retrans_timeout %llu "
	       "retrans_fast %llu dup_rcvd %llu ooo_rcvd %llu drop_bad_hdr %llu window_stalls "
	       "%llu srtt_us %llu injected: dups %llu reorders %llu corrupts %llu\n",
	       f->ft.is_server ? "receiver" : "sender", (unsigned long long)st.tx_pkts,
	       (unsigned long long)st.rx_pkts, (unsigned long long)st.retrans_timeout,
	       (unsigned long long)st.retrans_fast, (unsigned long long)st.dup_rcvd,
	       (unsigned long long)st.ooo_rcvd, (unsigned long long)st.drop_bad_hdr,
	       (unsigned long long)st.window_stalls, (unsigned long long)st.rtt_srtt_us,
	       (unsigned long long)st.fault_dups, (unsigned long long)st.fault_reorders,
	       (unsigned long long)st.fault_corrupts);
	if (!t->expect_loss)
		return 0;
	if (f->ft.is_server) {
		FUNC_ASSERT(f, st.ooo_rcvd + st.dup_rcvd > 0, "a lossy link, yet no packet "
			    "arrived out of order or twice in %llu", (unsigned long long)st.rx_pkts);
		/* the sender's injector corrupts its packets; only checksums, or a key's tags
		 * (drop_bad_mac), catch payload flips */
		if (sv_fault_pct("corrupt") && checksum && atoi(checksum))
			FUNC_ASSERT(f, st.drop_bad_hdr + st.drop_bad_mac > 0, "the sender corrupts "
				    "%u%% of its packets, yet none was dropped",
				    sv_fault_pct("corrupt"));
	} else {
		FUNC_ASSERT(f, st.retrans_timeout + st.retrans_fast > 0, "a lossy link, yet "
			    "nothing was resent in %llu packets", (unsigned long long)st.tx_pkts);
	}
	return 0;
}

static void sv_report(const struct sv *t, uint64_t ns)
{
	const struct func *f = &t->f;
	double sec = (double)ns / 1e9;
	size_t min = SIZE_MAX, max = 0;
	long i, rdv = 0;

	for (i = 0; i < t->nmsgs; i++) {
		min = t->size[i] < min ? t->size[i] : min;
		max = t->size[i] > max ? t->size[i] : max;
		rdv += t->size[i] > 65536;
	}
	printf("stream_verify: %s: %ld messages (%ld tagged, %ld untagged, %ld above 64 KiB), "
	       "sizes %zu..%zu, %llu bytes (%.1f MB) %s in %.2f s: %.1f MB/s (seed %llu)\n",
	       f->ft.is_server ? "receiver" : "sender", t->nmsgs, t->ntagged,
	       t->nmsgs - t->ntagged, rdv, min, max, (unsigned long long)t->total,
	       (double)t->total / 1e6, f->ft.is_server ? "received and verified" : "sent", sec,
	       (double)t->total / 1e6 / sec, (unsigned long long)t->plan.seed);
}

int main(int argc, char **argv)
{
	static struct sv t = {
		.plan = { .seed = 1, .bytes = SV_BYTES_DEF, .mode = SV_MIXED },
	};
	struct func *f = &t.f;
	uint64_t start = 0;
	int ret;

	ret = func_init(f, argc, argv, "stream_verify", FI_MSG | FI_TAGGED, FI_ORDER_SAS,
			"s:b:x:L", sv_opt, &t, sv_usage);
	t.slots = f->ft.opts.window ? f->ft.opts.window : SV_SLOTS_DEF;
	if (!ret && t.slots > SV_SLOTS_MAX) {
		fprintf(stderr, "stream_verify: -W %d: at most %d\n", t.slots, SV_SLOTS_MAX);
		ret = -FI_EINVAL;
	}
	if (!ret)
		ret = sv_exchange_plan(&t);
	if (!ret) {
		sv_make_plan(&t);
		ret = cour_ft_buf_alloc(&f->ft, (size_t)t.slots * (SV_MAX_MSG + SV_GUARD), &t.buf);
	}
	if (!ret) {
		printf("stream_verify: %s over %s, %s messages, %d in flight\n",
		       f->ft.is_server ? "receiving" : "sending",
		       f->ft.info->fabric_attr->prov_name, sv_mode_name[t.plan.mode], t.slots);
		fflush(stdout);
		start = cour_ft_now_ns();
		ret = sv_run(&t);
	}
	if (!ret)
		ret = func_finish(f);
	if (!ret)
		sv_report(&t, cour_ft_now_ns() - start);
	if (!ret)
		ret = sv_stats(&t);
	cour_ft_close_ep(&f->ft);
	cour_ft_buf_free(&t.buf);
	cour_ft_close(&f->ft);
	if (ret || f->failures) {
		fprintf(stderr, "stream_verify: FAIL (%d)\n", ret);
		return 1;
	}
	printf("stream_verify: PASS (%s)\n", f->ft.is_server ? "server" : "client");
	return 0;
}
