/*
 * fault: 20 MB in messages of 1 byte to 1 MiB (log-uniform, the same pseudo-random list on
 * both sides) through courier's fault injector (test_fault.sh sets FI_COURIER_FAULT with drops,
 * duplicates, reordering and corruption, and FI_COURIER_CHECKSUM=1). Every message must arrive
 * once, in order, with every byte right; then the statistics must show that faults happened
 * and were repaired: retransmissions at the sender, corrupt packets dropped at the receiver.
 * The client sends, the server receives, each with FAULT_SLOTS operations in flight.
 */
#define _GNU_SOURCE

#include <stdlib.h>
#include <string.h>

#include "ft_func.h"

#define FAULT_TOTAL (20ULL << 20)
#define FAULT_MAX   (1 << 20)
#define FAULT_SLOTS 16
#define FAULT_MSGS  4096

struct fault {
	struct func f;
	struct cour_ft_buf buf;
	struct fi_context2 ctx[FAULT_SLOTS];
	long slot_msg[FAULT_SLOTS];
	size_t size[FAULT_MSGS];
	long nmsgs;
};

static void fault_sizes(struct fault *t)
{
	uint64_t x = 0x9e3779b97f4a7c15ULL, total = 0;

	for (t->nmsgs = 0; total < FAULT_TOTAL && t->nmsgs < FAULT_MSGS; t->nmsgs++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		/* 2^(0..20) scale, then uniform below it: 1 B .. 1 MiB */
		t->size[t->nmsgs] = 1 + (size_t)((x >> 33) % (1ULL << ((x >> 11) % 21)));
		total += t->size[t->nmsgs];
	}
}

static int fault_post(struct fault *t, int slot, long msg)
{
	struct func *f = &t->f;
	char *p = (char *)t->buf.base + (size_t)slot * FAULT_MAX;

	t->slot_msg[slot] = msg;
	if (f->ft.is_server)
		return FUNC_POST(f, fi_recv(f->ft.ep, p, FAULT_MAX, t->buf.desc, f->ft.peer,
					    &t->ctx[slot]));
	cour_ft_fill(p, t->size[msg], (uint64_t)msg);
	return FUNC_POST(f, fi_send(f->ft.ep, p, t->size[msg], t->buf.desc, f->ft.peer,
				    &t->ctx[slot]));
}

static int fault_run(struct fault *t)
{
	struct func *f = &t->f;
	bool rx = f->ft.is_server;
	struct func_comp c;
	long next = 0, done = 0, msg;
	int slot;

	for (slot = 0; slot < FAULT_SLOTS && next < t->nmsgs; slot++)
		FUNC_CALL(f, fault_post(t, slot, next++));
	while (done < t->nmsgs) {
		FUNC_CALL(f, func_next(f, !rx, &c, 20000));
		slot = (int)((struct fi_context2 *)c.e.op_context - t->ctx);
		FUNC_ASSERT(f, slot >= 0 && slot < FAULT_SLOTS, "op_context %p", c.e.op_context);
		msg = t->slot_msg[slot];
		FUNC_ASSERT(f, !c.is_err, "message %ld (%zu bytes): error %d (%s), prov_errno %d",
			    msg, t->size[msg], c.err.err, fi_strerror(c.err.err),
			    c.err.prov_errno);
		if (rx) {
			FUNC_ASSERT(f, c.e.len == t->size[msg], "receive for message %ld: %zu "
				    "bytes, want %zu (lost, duplicated or reordered message?)",
				    msg, c.e.len, t->size[msg]);
			FUNC_CALL(f, func_check_data(f, (char *)t->buf.base +
						     (size_t)slot * FAULT_MAX, c.e.len,
						     (uint64_t)msg, "received"));
		}
		done++;
		if (next < t->nmsgs)
			FUNC_CALL(f, fault_post(t, slot, next++));
	}
	return 0;
}

static int fault_stats(struct fault *t)
{
	struct func *f = &t->f;
	struct fi_courier_stats st;
	int ret;

	ret = func_get_stats(f->ft.ep, &st);
	if (!func_is_courier(f)) {
		printf("fault: %s has no courier statistics, not checked\n",
		       f->ft.info->fabric_attr->prov_name);
		return 0;
	}
	FUNC_CALL(f, ret);
	printf("fault: %s stats: tx_pkts %llu rx_pkts %llu retrans_timeout %llu retrans_fast "
	       "%llu dup_rcvd %llu ooo_rcvd %llu drop_bad_hdr %llu drop_window %llu "
	       "fault drops %llu dups %llu corrupts %llu reorders %llu\n",
	       f->ft.is_server ? "receiver" : "sender", (unsigned long long)st.tx_pkts,
	       (unsigned long long)st.rx_pkts, (unsigned long long)st.retrans_timeout,
	       (unsigned long long)st.retrans_fast, (unsigned long long)st.dup_rcvd,
	       (unsigned long long)st.ooo_rcvd, (unsigned long long)st.drop_bad_hdr,
	       (unsigned long long)st.drop_window, (unsigned long long)st.fault_drops,
	       (unsigned long long)st.fault_dups, (unsigned long long)st.fault_corrupts,
	       (unsigned long long)st.fault_reorders);
	if (!getenv("FI_COURIER_FAULT"))
		return 0;
	FUNC_ASSERT(f, st.fault_drops + st.fault_dups + st.fault_corrupts + st.fault_reorders > 0,
		    "FI_COURIER_FAULT is set but nothing was injected");
	if (f->ft.is_server) {
		FUNC_ASSERT(f, st.drop_bad_hdr > 0, "no corrupt packet was dropped (the sender "
			    "corrupts 1%% of %llu packets)", (unsigned long long)st.rx_pkts);
		FUNC_ASSERT(f, st.dup_rcvd > 0, "no duplicate was seen");
		FUNC_ASSERT(f, st.ooo_rcvd > 0, "no packet was held for reordering");
	} else {
		FUNC_ASSERT(f, st.retrans_timeout + st.retrans_fast > 0, "nothing was resent "
			    "although %llu packets were dropped", (unsigned long long)st.fault_drops);
		FUNC_ASSERT(f, st.tx_msgs >= (uint64_t)t->nmsgs, "tx_msgs %llu < %ld",
			    (unsigned long long)st.tx_msgs, t->nmsgs);
	}
	return 0;
}

int main(int argc, char **argv)
{
	static struct fault t;
	struct func *f = &t.f;
	int ret;

	fault_sizes(&t);
	ret = func_init(f, argc, argv, "fault", FI_MSG, FI_ORDER_SAS, NULL, NULL, NULL, "");
	if (!ret)
		ret = cour_ft_buf_alloc(&f->ft, (size_t)FAULT_SLOTS * FAULT_MAX, &t.buf);
	if (!ret)
		ret = fault_run(&t);
	if (!ret)
		ret = func_finish(f);
	if (!ret)
		ret = fault_stats(&t);
	cour_ft_close_ep(&f->ft);
	cour_ft_buf_free(&t.buf);
	cour_ft_close(&f->ft);
	if (ret || f->failures) {
		fprintf(stderr, "fault: FAIL (%d)\n", ret);
		return 1;
	}
	printf("fault: PASS (%s, %ld messages verified)\n", f->ft.is_server ? "server" : "client",
	       t.nmsgs);
	return 0;
}
