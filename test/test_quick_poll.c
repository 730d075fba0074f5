/*
 * The quick poll (cour_domain_poll_locked): an fi_cq_read on a domain whose endpoints all have
 * same-host peers looks only at their rings and mailboxes for a few microseconds at a time.
 * What comes another way must still come: here endpoint A has a same-host peer B in its own
 * domain, and a peer C in another domain that may not use shared memory (so it talks to A
 * over UDP on loopback). While the test polls A's CQ in a tight loop, as an MPI rank does:
 *   - C's message to A arrives (A's socket is read);
 *   - C's send completes (A acknowledges it: A's timers run);
 *   - A's send to C completes (C's ACK is read from A's socket);
 * and a message from B still arrives through the mailbox. Real UDP wire, manual progress.
 */
#include "fi/cour_ep.h"
#include "rdma/fi_ext_courier.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define WAIT_US 3000000

struct node {
	struct fid_domain *domain;
	struct fid_av *av;
};

struct end {
	struct fid_ep *ep;
	struct fid_cq *cq;
	char name[64];
	size_t namelen;
};

static struct {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct node d[2];             /* 0: A and B, 1: C */
	struct end a, b, c;
} t;

static struct cour_params saved_params;

static void end_open(struct end *e, struct node *n, bool shm)
{
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE };

	cr_assert_eq(fi_endpoint(n->domain, t.info, &e->ep, NULL), 0);
	if (!shm)
		cr_assert_eq(fi_setopt(&e->ep->fid, FI_OPT_ENDPOINT,
				       FI_COURIER_OPT_SHARED_MEMORY_PERMITTED, &shm, sizeof(shm)), 0);
	cr_assert_eq(fi_cq_open(n->domain, &cq_attr, &e->cq, NULL), 0);
	cr_assert_eq(fi_ep_bind(e->ep, &e->cq->fid, FI_TRANSMIT | FI_RECV), 0);
	cr_assert_eq(fi_ep_bind(e->ep, &n->av->fid, 0), 0);
	cr_assert_eq(fi_enable(e->ep), 0);
	e->namelen = sizeof(e->name);
	cr_assert_eq(fi_getname(&e->ep->fid, e->name, &e->namelen), 0);
}

static fi_addr_t av_of(struct node *n, struct end *e)
{
	fi_addr_t fa;

	cr_assert_eq(fi_av_insert(n->av, e->name, 1, &fa, 0, NULL), 1);
	return fa;
}

static void open_all(void)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };

	saved_params = cour_params;
	cour_params.wire = (char *)"udp";
	cour_params.shm = 1;
	cour_params.manual_thread = 0;      /* the test alone drives progress */
	cr_assert_not_null(hints);
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_TAGGED;
	hints->addr_format = FI_SOCKADDR_IN;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	hints->domain_attr->control_progress = FI_PROGRESS_MANUAL;
	cr_assert_eq(cour_prov.getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &t.info), 0);
	fi_freeinfo(hints);
	cr_assert_eq(cour_prov.fabric(t.info->fabric_attr, &t.fabric, NULL), 0);
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(fi_domain(t.fabric, t.info, &t.d[i].domain, NULL), 0);
		cr_assert_eq(fi_av_open(t.d[i].domain, &av_attr, &t.d[i].av, NULL), 0);
	}
	end_open(&t.a, &t.d[0], true);
	end_open(&t.b, &t.d[0], true);
	end_open(&t.c, &t.d[1], false);
}

static void close_all(void)
{
	struct end *e[] = { &t.a, &t.b, &t.c };

	for (int i = 0; i < 3; i++) {
		cr_assert_eq(fi_close(&e[i]->ep->fid), 0);
		cr_assert_eq(fi_close(&e[i]->cq->fid), 0);
	}
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(fi_close(&t.d[i].av->fid), 0);
		cr_assert_eq(fi_close(&t.d[i].domain->fid), 0);
	}
	cr_assert_eq(fi_close(&t.fabric->fid), 0);
	fi_freeinfo(t.info);
	cour_params = saved_params;
}

/* Completions read while waiting for another: kept, so that a later wait finds them. */
#define SEEN_MAX 16
static struct {
	struct end *e;
	struct fi_cq_tagged_entry ent;
} seen[SEEN_MAX];
static int nseen;

static bool take_seen(struct end *e, void *ctx, struct fi_cq_tagged_entry *out)
{
	for (int i = 0; i < nseen; i++)
		if (seen[i].e == e && seen[i].ent.op_context == ctx) {
			*out = seen[i].ent;
			seen[i] = seen[--nseen];
			return true;
		}
	return false;
}

static void read_one(struct end *e)
{
	struct fi_cq_tagged_entry ent;
	ssize_t n = fi_cq_read(e->cq, &ent, 1);

	cr_assert(n == 1 || n == -FI_EAGAIN, "fi_cq_read: %zd", n);
	if (n != 1)
		return;
	cr_assert_lt(nseen, SEEN_MAX, "more completions than operations");
	seen[nseen].e = e;
	seen[nseen++].ent = ent;
}

/* Poll until e has a completion of context ctx: every CQ once a round (B and C need their
 * own progress), then A's alone a hundred times, as a rank waiting for a message polls (the
 * quick poll's case). false after WAIT_US. */
static bool poll_for(struct end *e, void *ctx, struct fi_cq_tagged_entry *out)
{
	uint64_t t0 = cour_now_us();

	while (cour_now_us() - t0 < WAIT_US) {
		read_one(&t.a);
		read_one(&t.b);
		read_one(&t.c);
		for (int k = 0; k < 100 && nseen < SEEN_MAX; k++)
			read_one(&t.a);
		if (take_seen(e, ctx, out))
			return true;
	}
	return false;
}

Test(quick_poll, socket_and_timers_still_run_beside_rings, .timeout = 60)
{
	struct fi_cq_tagged_entry ent;
	struct fi_context2 rx_ctx[3], tx_ctx[3];
	char sb[3][32], rb[3][32];
	fi_addr_t a_c, b_a, c_a;

	open_all();
	(void)av_of(&t.d[0], &t.b);   /* (A and B share the AV) */
	a_c = av_of(&t.d[0], &t.c);
	b_a = av_of(&t.d[0], &t.a);
	c_a = av_of(&t.d[1], &t.a);
	for (int i = 0; i < 3; i++) {
		snprintf(sb[i], sizeof(sb[i]), "message %d of the quick poll", i);
		memset(rb[i], 0, sizeof(rb[i]));
	}

	/* B to A: after this A has a same-host peer, and its polls may be quick */
	cr_assert_eq(fi_trecv(t.a.ep, rb[0], sizeof(rb[0]), NULL, FI_ADDR_UNSPEC, 10, 0,
			      &rx_ctx[0]), 0);
	cr_assert_eq(fi_tsend(t.b.ep, sb[0], sizeof(sb[0]), NULL, b_a, 10, &tx_ctx[0]), 0);
	cr_assert(poll_for(&t.a, &rx_ctx[0], &ent), "B's message never reached A");
	cr_assert_str_eq(rb[0], sb[0]);
	struct cour_pep *pa = &cour_ep_of(t.a.ep)->pep, *pb = &cour_ep_of(t.b.ep)->pep;
	cr_assert_gt(pa->stats.shm_peers, 0, "A and B found no ring to each other");
	cr_assert_gt(pb->stats.shm_peers, 0, "A and B found no ring to each other");

	/* C to A over UDP, while A is polled as a rank polls */
	cr_assert_eq(fi_trecv(t.a.ep, rb[1], sizeof(rb[1]), NULL, FI_ADDR_UNSPEC, 11, 0,
			      &rx_ctx[1]), 0);
	cr_assert_eq(fi_tsend(t.c.ep, sb[1], sizeof(sb[1]), NULL, c_a, 11, &tx_ctx[1]), 0);
	cr_assert(poll_for(&t.a, &rx_ctx[1], &ent),
		  "C's message over UDP never reached A, polled in a loop beside its rings");
	cr_assert_str_eq(rb[1], sb[1]);
	cr_assert_eq(ent.tag, 11);
	cr_assert(poll_for(&t.c, &tx_ctx[1], &ent),
		  "C's send never completed: A did not acknowledge it");
	cr_assert_eq(cour_ep_of(t.c.ep)->pep.stats.shm_peers, 0, "C may not use a ring");

	/* A to C over UDP: A's send completes once C's ACK is read from A's socket */
	cr_assert_eq(fi_trecv(t.c.ep, rb[2], sizeof(rb[2]), NULL, FI_ADDR_UNSPEC, 12, 0,
			      &rx_ctx[2]), 0);
	cr_assert_eq(fi_tsend(t.a.ep, sb[2], sizeof(sb[2]), NULL, a_c, 12, &tx_ctx[2]), 0);
	cr_assert(poll_for(&t.a, &tx_ctx[2], &ent),
		  "A's send to C never completed: C's ACK was not read");
	cr_assert(poll_for(&t.c, &rx_ctx[2], &ent), "A's message never reached C");
	cr_assert_str_eq(rb[2], sb[2]);
	cr_assert_gt(pa->stats.acks_rcvd, 0);
	close_all();
}

/* A read that ran a pass and handed out everything it found leaves its queue drained: MPI
 * libraries read on until a read comes back empty, and that read runs no pass (a socket read
 * between a message and its answer). Only that one read: a message already in the socket
 * is returned by the read after it. */
Test(quick_poll, a_drained_queue_skips_one_pass_and_only_one, .timeout = 60)
{
	struct fi_cq_tagged_entry ent;
	struct fi_context2 rx_ctx[2], tx_ctx[2];
	char sb[2][32], rb[2][32];
	fi_addr_t a_c;
	ssize_t n;

	open_all();
	a_c = av_of(&t.d[0], &t.c);
	(void)av_of(&t.d[1], &t.a);
	for (int i = 0; i < 2; i++) {
		snprintf(sb[i], sizeof(sb[i]), "drained queue, message %d", i);
		memset(rb[i], 0, sizeof(rb[i]));
		cr_assert_eq(fi_trecv(t.c.ep, rb[i], sizeof(rb[i]), NULL, FI_ADDR_UNSPEC, 20 + i,
				      0, &rx_ctx[i]), 0);
	}
	cr_assert_eq(fi_tsend(t.a.ep, sb[0], sizeof(sb[0]), NULL, a_c, 20, &tx_ctx[0]), 0);
	cr_assert(poll_for(&t.c, &rx_ctx[0], &ent), "A's first message never reached C");
	cr_assert_str_eq(rb[0], sb[0]);
	cr_assert(COUR_CONTAINER_OF(t.c.cq, struct cour_cq, cq_fid)->drained, "the read that found the message drained C's CQ");

	cr_assert_eq(fi_tsend(t.a.ep, sb[1], sizeof(sb[1]), NULL, a_c, 21, &tx_ctx[1]), 0);
	usleep(20000);          /* (in C's socket by now: loopback delivers at once) */
	n = fi_cq_read(t.c.cq, &ent, 1);
	cr_assert_eq(n, -FI_EAGAIN, "the read after a drain runs no pass: %zd", n);
	n = fi_cq_read(t.c.cq, &ent, 1);
	cr_assert_eq(n, 1, "the read after that one must find the message in the socket: %zd", n);
	cr_assert_eq(ent.op_context, &rx_ctx[1]);
	cr_assert_eq(ent.tag, 21);
	cr_assert_str_eq(rb[1], sb[1]);
	cr_assert(poll_for(&t.a, &tx_ctx[0], &ent), "A's first send never completed");
	cr_assert(poll_for(&t.a, &tx_ctx[1], &ent), "A's second send never completed");
	close_all();
}
