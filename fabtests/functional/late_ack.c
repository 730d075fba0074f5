/*
 * late_ack: a send to a peer that computes. courier completes a send when the peer
 * acknowledges it; a peer whose application computes between calls acknowledges from its
 * progress thread, which stands back (napping up to 16 ms) while the application polls. A
 * sender whose ACK is late asks for it with a probe, which the kernel hands to a doorbell
 * socket the thread always sleeps on (docs/protocol.md, "Late ACKs").
 *
 * ROUNDS rounds; in each, the client sends one message while the server polls (its quick
 * ACK gives the sender the path's round trip), the server posts a receive, polls its CQ for
 * 100 ms (so its thread naps its longest), meets the client at a barrier and then computes
 * for COMPUTE_MS without a libfabric call. The client sends 8 bytes right after the barrier and waits for the send's
 * completion: it must come while the server still computes (COMPUTE_MS / 2), every byte then
 * checked by the server. With courier the statistics must show the mechanism: the client
 * sent probes (nudges), the server's doorbell took them (bell_rcvd); with FI_COURIER_NUDGE=0
 * neither happens, and the send still completes (the thread's nap ends) within the bound.
 * Prints each round's completion time.
 * `late_ack [-p prov]` is the server, `late_ack [-p prov] 127.0.0.1` the client.
 */
#define _GNU_SOURCE

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ft_func.h"

#define ROUNDS      8
#define COMPUTE_MS  400
#define POLL_MS     100
#define TAG         0x1a7e

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Read the CQs for ms without expecting anything: the progress thread sees a busy caller. */
static void poll_for(struct func *f, int ms)
{
	double end = now_ms() + ms;

	while (now_ms() < end)
		cour_ft_progress(&f->ft);
}

/* Computing: no libfabric call for ms. */
static void compute(int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0)
		;
}

static int server_round(struct func *f, struct cour_ft_buf *b, int r)
{
	char *buf = b->base;
	struct func_comp c;

	/* a message while both poll: its quick ACK tells the sender the path's round trip */
	FUNC_CALL(f, FUNC_POST(f, fi_trecv(f->ft.ep, buf, 64, b->desc, f->ft.peer, TAG, 0,
					   NULL)));
	FUNC_CALL(f, func_next(f, false, &c, 10000));
	FUNC_ASSERT(f, !c.is_err && c.e.len == 8, "round %d: first receive", r);
	memset(buf, 0, 64);
	FUNC_CALL(f, FUNC_POST(f, fi_trecv(f->ft.ep, buf, 64, b->desc, f->ft.peer, TAG, 0,
					   NULL)));
	poll_for(f, POLL_MS);
	FUNC_CALL(f, cour_ft_barrier(&f->ft));
	compute(COMPUTE_MS);
	FUNC_CALL(f, func_next(f, false, &c, 10000));
	FUNC_ASSERT(f, !c.is_err && c.e.len == 8, "round %d: receive error %d, len %zu", r,
		    c.is_err ? c.err.err : 0, c.e.len);
	FUNC_CALL(f, func_check_data(f, buf, 8, 100 + r, "message"));
	return cour_ft_barrier(&f->ft);
}

static int client_round(struct func *f, struct cour_ft_buf *b, int r, double *ms)
{
	char *buf = b->base;
	struct func_comp c;
	double t0;

	cour_ft_fill(buf, 8, 100 + r);
	FUNC_CALL(f, FUNC_POST(f, fi_tsend(f->ft.ep, buf, 8, b->desc, f->ft.peer, TAG, NULL)));
	FUNC_CALL(f, func_next(f, true, &c, 10000));
	FUNC_ASSERT(f, !c.is_err, "round %d: first send error %d", r, c.is_err ? c.err.err : 0);
	FUNC_CALL(f, cour_ft_barrier(&f->ft));
	t0 = now_ms();
	FUNC_CALL(f, FUNC_POST(f, fi_tsend(f->ft.ep, buf, 8, b->desc, f->ft.peer, TAG, NULL)));
	FUNC_CALL(f, func_next(f, true, &c, 10000));
	*ms = now_ms() - t0;
	FUNC_ASSERT(f, !c.is_err, "round %d: send error %d", r, c.is_err ? c.err.err : 0);
	printf("late_ack: round %d: send completed after %.2f ms of the peer's %d ms of work\n",
	       r, *ms, COMPUTE_MS);
	FUNC_ASSERT(f, *ms < COMPUTE_MS / 2, "round %d: the send completed after %.1f ms: it "
		    "waited for the computing peer's next call", r, *ms);
	return cour_ft_barrier(&f->ft);
}

int main(int argc, char **argv)
{
	static struct func fs;
	struct func *f = &fs;
	const char *nudge = getenv("FI_COURIER_NUDGE");
	bool nudge_on = !nudge || atoi(nudge) != 0;
	struct fi_courier_stats st;
	struct cour_ft_buf buf = { 0 };
	double ms[ROUNDS];
	int ret;

	ret = func_init(f, argc, argv, "late_ack", FI_MSG | FI_TAGGED, 0, NULL, NULL, NULL, "");
	if (!ret)
		ret = cour_ft_buf_alloc(&f->ft, 64, &buf);
	for (int r = 0; !ret && r < ROUNDS; r++)
		ret = f->ft.is_server ? server_round(f, &buf, r) :
					client_round(f, &buf, r, &ms[r]);
	if (!ret && func_is_courier(f) && func_get_stats(f->ft.ep, &st) == 0) {
		printf("late_ack: %s: nudges %llu bell_rcvd %llu\n",
		       f->ft.is_server ? "server" : "client", (unsigned long long)st.nudges,
		       (unsigned long long)st.bell_rcvd);
		if (!nudge_on) {
			if (st.nudges || st.bell_rcvd)
				ret = -FI_EIO;
			FUNC_ASSERT(f, !ret, "FI_COURIER_NUDGE=0: %llu probes sent, %llu rang",
				    (unsigned long long)st.nudges,
				    (unsigned long long)st.bell_rcvd);
		} else if (f->ft.is_server) {
			FUNC_ASSERT(f, st.bell_rcvd >= 1, "no probe reached the doorbell in %d "
				    "rounds", ROUNDS);
		} else {
			FUNC_ASSERT(f, st.nudges >= 1, "no probe sent in %d rounds", ROUNDS);
		}
	}
	if (!ret)
		ret = func_finish(f);
	cour_ft_close_ep(&f->ft);
	cour_ft_buf_free(&buf);
	cour_ft_close(&f->ft);
	if (ret || f->failures) {
		fprintf(stderr, "late_ack: FAIL (%d)\n", ret);
		return 1;
	}
	printf("late_ack: %s passed\n", f->ft.is_server ? "server" : "client");
	return 0;
}
