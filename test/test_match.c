/*
 * Matching (proto/cour_msg_post.c, cour_msg_proto.c): which posted receive a message takes
 * (tag and ignore bits, posting order, directed receive), unexpected messages in arrival
 * order, FI_PEEK/FI_CLAIM, cancel, and the argument checks of cour_msg_recv. Messages arrive
 * as packets from the capture wire's remote peer (test_capwire.h), so everything up to the
 * completion entry is the engine's own path.
 */
#include "test_capwire.h"
#include "proto/cour_msg_int.h"

#include <criterion/criterion.h>

static struct cour_ep *ep;
static struct cour_peer *peer;
static uint32_t next_seq;

static void open_with(uint64_t caps)
{
	capwire_params();
	ep = capwire_open(caps);
	peer = capwire_peer(ep);
	next_seq = 0;
}

static void setup(void)
{
	open_with(FI_MSG | FI_TAGGED);
}

static void teardown(void)
{
	capwire_close(ep);
}

TestSuite(match, .init = setup, .fini = teardown, .timeout = 20);

static int post(bool tagged, uint64_t tag, uint64_t ignore, fi_addr_t src, void *buf,
		size_t len, void *ctx, uint64_t flags)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len };

	return cour_msg_recv(&ep->pep, &iov, 1, src, tag, ignore, ctx, flags, tagged);
}

#define POST_T(tag, ignore, ctx) \
	cr_assert_eq(post(true, tag, ignore, FI_ADDR_UNSPEC, NULL, 0, ctx, 0), 0)

/* A one-packet message from the remote peer, next in sequence. */
static void arrive(bool tagged, uint64_t tag, const char *payload, size_t len, uint16_t flags,
		   uint64_t data)
{
	struct cour_pkt_hdr h = capwire_hdr(peer, COUR_PKT_EAGER, next_seq, 0, 0, 8);

	h.base.flags = flags | (tagged ? COUR_F_TAGGED : 0);
	h.msg.msg_id = next_seq;
	h.msg.tag = tag;
	h.msg.data = data;
	h.msg.total_len = len;
	capwire_rx(ep, &h, payload, len);
	cr_assert_eq(peer->rx_next, ++next_seq, "the packet was not accepted");
}

static void *ctx_of(struct cour_rxe *rxe)
{
	return rxe ? rxe->context : NULL;
}

/* ---- which posted receive ---- */

Test(match, tag_and_ignore_bits)
{
	POST_T(0x1234, 0, (void *)1);
	POST_T(0x1200, 0xff, (void *)2);
	POST_T(0, ~0ull, (void *)3);
	cr_assert_eq(ctx_of(cour_msg_find_rxe(&ep->pep, true, 0x1234, 0)), (void *)1);
	cr_assert_eq(ctx_of(cour_msg_find_rxe(&ep->pep, true, 0x12ff, 0)), (void *)2);
	cr_assert_eq(ctx_of(cour_msg_find_rxe(&ep->pep, true, 0x1200, 0)), (void *)2);
	cr_assert_eq(ctx_of(cour_msg_find_rxe(&ep->pep, true, 0x1300, 0)), (void *)3);
	cr_assert_eq(ctx_of(cour_msg_find_rxe(&ep->pep, true, 0x1234 | 1ull << 63, 0)), (void *)3);
	cr_assert_null(cour_msg_find_rxe(&ep->pep, false, 0x1234, 0), "tagged receives only");
}

Test(match, without_a_wildcard_nothing_else_matches)
{
	POST_T(0xf0f0, 0x0f0f, (void *)1);
	for (int bit = 0; bit < 64; bit++) {
		uint64_t t = 0xf0f0 ^ (1ull << bit);
		bool ignored = (0x0f0full >> bit) & 1;

		cr_assert_eq(ctx_of(cour_msg_find_rxe(&ep->pep, true, t, 0)), ignored ? (void *)1 : NULL,
			     "tag bit %d", bit);
	}
}

Test(match, the_first_posted_receive_wins)
{
	POST_T(7, 0, (void *)1);
	POST_T(7, 0, (void *)2);
	POST_T(7, 0, (void *)3);
	cr_assert_eq(ctx_of(cour_msg_find_rxe(&ep->pep, true, 7, 0)), (void *)1);
	cr_assert_eq(cour_msg_cancel(&ep->pep, (void *)1), 0);
	cr_assert_eq(ctx_of(cour_msg_find_rxe(&ep->pep, true, 7, 0)), (void *)2);
}

Test(match, untagged_receives_ignore_tags)
{
	cr_assert_eq(post(false, 0x55, ~0ull, FI_ADDR_UNSPEC, NULL, 0, (void *)9, 0), 0);
	cr_assert_eq(ep->pep.rxq->msg->ignore, 0, "ignore is meaningless without FI_TAGGED");
	cr_assert_eq(ctx_of(cour_msg_find_rxe(&ep->pep, false, 0x1234, 0)), (void *)9);
	cr_assert_null(cour_msg_find_rxe(&ep->pep, true, 0x55, 0));
}

Test(match, the_source_counts_only_with_directed_receive)
{
	POST_T(1, 0, (void *)1);
	cr_assert_eq(post(true, 1, 0, 3, NULL, 0, (void *)2, 0), 0);
	cr_assert_eq(ep->pep.rxq->tag->next->src, FI_ADDR_UNSPEC, "no FI_DIRECTED_RECV: any source");
	cr_assert_eq(cour_msg_cancel(&ep->pep, (void *)1), 0);
	cr_assert_eq(ctx_of(cour_msg_find_rxe(&ep->pep, true, 1, 4)), (void *)2);
}

Test(match, directed_receive_by_capability)
{
	capwire_close(ep);
	open_with(FI_MSG | FI_TAGGED | FI_DIRECTED_RECV);
	cr_assert_eq(post(true, 1, 0, 3, NULL, 0, (void *)1, 0), 0);
	POST_T(1, 0, (void *)2);
	cr_assert_eq(ctx_of(cour_msg_find_rxe(&ep->pep, true, 1, 3)), (void *)1);
	cr_assert_eq(ctx_of(cour_msg_find_rxe(&ep->pep, true, 1, 4)), (void *)2);
	cr_assert_eq(cour_msg_cancel(&ep->pep, (void *)2), 0);
	cr_assert_null(cour_msg_find_rxe(&ep->pep, true, 1, 4));
	/* a peer outside the AV (no AV here) has no fi_addr: a directed receive waits */
	arrive(true, 1, "x", 1, 0, 0);
	cr_assert_eq(capwire_cq_count(&capwire.rx_cq), 0);
	cr_assert_not_null(ep->pep.rxq->utag);
}

Test(match, directed_receive_by_op_flag)
{
	ep->pep.rx_op_flags = FI_DIRECTED_RECV;
	cr_assert_eq(post(true, 1, 0, 3, NULL, 0, (void *)1, 0), 0);
	cr_assert_eq(ep->pep.rxq->tag->src, 3);
}

/* ---- arrivals ---- */

Test(match, a_message_completes_the_receive_it_matches)
{
	char a[16] = { 0 }, b[16] = { 0 };
	const struct cour_cq_entry *e;

	cr_assert_eq(post(true, 1, 0, FI_ADDR_UNSPEC, a, sizeof(a), (void *)1, 0), 0);
	cr_assert_eq(post(true, 2, 0, FI_ADDR_UNSPEC, b, sizeof(b), (void *)2, 0), 0);
	arrive(true, 2, "second", 6, 0, 0);
	cr_assert_eq(capwire_cq_count(&capwire.rx_cq), 1);
	e = capwire_cq_entry(&capwire.rx_cq, 0);
	cr_assert_eq(e->op_context, (void *)2);
	cr_assert_eq(e->flags, FI_RECV | FI_TAGGED);
	cr_assert_eq(e->len, 6);
	cr_assert_eq(e->tag, 2);
	cr_assert_eq(e->buf, b);
	cr_assert_eq(e->src, FI_ADDR_NOTAVAIL);
	cr_assert_arr_eq(b, "second", 6);
	cr_assert_eq(a[0], 0);
	cr_assert_eq(ctx_of(ep->pep.rxq->tag), (void *)1, "the other receive is still posted");
	cr_assert_null(ep->pep.rxq->tag->next);
	cr_assert_eq(ep->pep.rxq->rxe_pool.in_use, 1);
}

Test(match, tagged_and_untagged_never_meet)
{
	char b[8];

	cr_assert_eq(post(false, 0, 0, FI_ADDR_UNSPEC, b, sizeof(b), (void *)1, 0), 0);
	arrive(true, 0, "t", 1, 0, 0);
	cr_assert_eq(capwire_cq_count(&capwire.rx_cq), 0);
	cr_assert_not_null(ep->pep.rxq->utag);
	arrive(false, 0, "m", 1, 0, 0);
	cr_assert_eq(capwire_cq_count(&capwire.rx_cq), 1);
	cr_assert_eq(capwire_cq_entry(&capwire.rx_cq, 0)->flags, FI_RECV | FI_MSG);
	cr_assert_eq(b[0], 'm');
}

Test(match, unexpected_messages_are_taken_in_arrival_order)
{
	char b[8] = { 0 };

	arrive(true, 5, "first", 5, 0, 0);
	arrive(true, 5, "later", 5, 0, 0);
	arrive(true, 6, "other", 5, 0, 0);
	cr_assert_eq(ep->pep.stats.unexpected_msgs, 3);
	cr_assert_eq(post(true, 7, 0, FI_ADDR_UNSPEC, b, sizeof(b), (void *)7, 0), 0);
	cr_assert_eq(capwire_cq_count(&capwire.rx_cq), 0, "tag 7 matches none");
	cr_assert_eq(post(true, 5, 0, FI_ADDR_UNSPEC, b, sizeof(b), (void *)5, 0), 0);
	cr_assert_eq(capwire_cq_count(&capwire.rx_cq), 1);
	cr_assert_arr_eq(b, "first", 5);
	cr_assert_eq(post(true, 4, 3, FI_ADDR_UNSPEC, b, sizeof(b), (void *)4, 0), 0);
	cr_assert_eq(capwire_cq_count(&capwire.rx_cq), 2, "4 ignoring bits 0-1 takes 5 or 6");
	cr_assert_arr_eq(b, "later", 5);
	cr_assert_eq(capwire_cq_entry(&capwire.rx_cq, 1)->tag, 5, "the message's own tag");
	cr_assert_eq(ctx_of(ep->pep.rxq->tag), (void *)7);
}

Test(match, a_short_buffer_truncates)
{
	char b[4];
	const struct fi_cq_err_entry *err;

	cr_assert_eq(post(true, 1, 0, FI_ADDR_UNSPEC, b, sizeof(b), (void *)1, 0), 0);
	arrive(true, 1, "0123456789", 10, 0, 0);
	cr_assert_eq(capwire_cq_count(&capwire.rx_cq), 0);
	cr_assert_eq(capwire_cq_err_count(&capwire.rx_cq), 1);
	err = capwire_cq_err(&capwire.rx_cq, 0);
	cr_assert_eq(err->err, FI_ETRUNC);
	cr_assert_eq(err->len, 4);
	cr_assert_eq(err->olen, 6);
	cr_assert_eq(err->op_context, (void *)1);
	cr_assert_arr_eq(b, "0123", 4);
}

Test(match, remote_cq_data_is_reported)
{
	char b[4];
	const struct cour_cq_entry *e;

	cr_assert_eq(post(false, 0, 0, FI_ADDR_UNSPEC, b, sizeof(b), NULL, 0), 0);
	arrive(false, 0, "d", 1, COUR_F_CQ_DATA, 0xdada);
	e = capwire_cq_entry(&capwire.rx_cq, 0);
	cr_assert_not_null(e);
	cr_assert_eq(e->flags, FI_RECV | FI_MSG | FI_REMOTE_CQ_DATA);
	cr_assert_eq(e->data, 0xdada);
}

/* ---- FI_PEEK, FI_CLAIM ---- */

Test(match, peek_finds_nothing_then_something_and_leaves_it)
{
	const struct fi_cq_err_entry *err;
	const struct cour_cq_entry *e;

	cr_assert_eq(post(true, 3, 0, FI_ADDR_UNSPEC, NULL, 0, (void *)1, FI_PEEK), 0);
	cr_assert_eq(capwire_cq_err_count(&capwire.rx_cq), 1);
	err = capwire_cq_err(&capwire.rx_cq, 0);
	cr_assert_eq(err->err, FI_ENOMSG);
	cr_assert_eq(err->prov_errno, COUR_E_NOMSG);
	cr_assert_eq(err->op_context, (void *)1);

	arrive(true, 3, "peekaboo", 8, 0, 0);
	cr_assert_eq(post(true, 3, 0, FI_ADDR_UNSPEC, NULL, 0, (void *)2, FI_PEEK), 0);
	cr_assert_eq(capwire_cq_count(&capwire.rx_cq), 1);
	e = capwire_cq_entry(&capwire.rx_cq, 0);
	cr_assert_eq(e->op_context, (void *)2);
	cr_assert_eq(e->len, 8);
	cr_assert_eq(e->tag, 3);
	cr_assert_not_null(ep->pep.rxq->utag, "a peek receives nothing");
	cr_assert_null(ep->pep.rxq->tag, "nor stays posted");
	cr_assert_eq(ep->pep.rxq->rxe_pool.in_use, 0);
}

Test(match, a_claimed_message_waits_for_its_claim)
{
	char b[8] = { 0 };

	arrive(true, 3, "mine", 4, 0, 0);
	cr_assert_eq(post(true, 3, 0, FI_ADDR_UNSPEC, NULL, 0, (void *)0xc1, FI_PEEK | FI_CLAIM),
		     0);
	cr_assert_eq(capwire_cq_count(&capwire.rx_cq), 1);
	cr_assert_eq(post(true, 3, 0, FI_ADDR_UNSPEC, b, sizeof(b), (void *)0xa, 0), 0);
	cr_assert_eq(capwire_cq_count(&capwire.rx_cq), 1, "an ordinary receive may not take it");
	cr_assert_eq(post(true, 0, 0, FI_ADDR_UNSPEC, NULL, 0, (void *)0xc2, FI_CLAIM),
		     -FI_EINVAL, "nothing claimed by that context");
	cr_assert_eq(post(true, 0, 0, FI_ADDR_UNSPEC, b, sizeof(b), (void *)0xc1, FI_CLAIM), 0);
	cr_assert_eq(capwire_cq_count(&capwire.rx_cq), 2);
	cr_assert_eq(capwire_cq_entry(&capwire.rx_cq, 1)->op_context, (void *)0xc1);
	cr_assert_arr_eq(b, "mine", 4);
	cr_assert_null(ep->pep.rxq->utag);
}

/* ---- cancel and arguments ---- */

Test(match, a_canceled_multi_recv_buffer_says_it_is_released)
{
	static char b[4096];
	const struct fi_cq_err_entry *err;

	cr_assert_eq(post(false, 0, 0, FI_ADDR_UNSPEC, b, sizeof(b), (void *)0x9, FI_MULTI_RECV),
		     0);
	cr_assert_eq(cour_msg_cancel(&ep->pep, (void *)0x9), 0);
	cr_assert_eq(capwire_cq_err_count(&capwire.rx_cq), 1);
	err = capwire_cq_err(&capwire.rx_cq, 0);
	cr_assert_eq(err->err, FI_ECANCELED);
	cr_assert_eq(err->flags, FI_RECV | FI_MSG | FI_MULTI_RECV);
}

Test(match, cancel_reports_and_forgets)
{
	const struct fi_cq_err_entry *err;

	POST_T(0x77, 0, (void *)1);
	cr_assert_eq(post(false, 0, 0, FI_ADDR_UNSPEC, NULL, 0, (void *)2, 0), 0);
	cr_assert_eq(cour_msg_cancel(&ep->pep, (void *)3), -FI_ENOENT);
	cr_assert_eq(cour_msg_cancel(&ep->pep, (void *)1), 0);
	cr_assert_eq(cour_msg_cancel(&ep->pep, (void *)1), -FI_ENOENT, "only once");
	cr_assert_eq(cour_msg_cancel(&ep->pep, (void *)2), 0);
	cr_assert_eq(capwire_cq_err_count(&capwire.rx_cq), 2);
	err = capwire_cq_err(&capwire.rx_cq, 0);
	cr_assert_eq(err->op_context, (void *)1);
	cr_assert_eq(err->err, FI_ECANCELED);
	cr_assert_eq(err->prov_errno, COUR_E_CANCELED);
	cr_assert_eq(err->flags, FI_RECV | FI_TAGGED);
	cr_assert_eq(err->tag, 0x77);
	cr_assert_eq(capwire_cq_err(&capwire.rx_cq, 1)->flags, FI_RECV | FI_MSG);
	cr_assert_null(ep->pep.rxq->tag);
	cr_assert_null(ep->pep.rxq->msg);
	cr_assert_eq(ep->pep.rxq->rxe_pool.in_use, 0);
}

Test(match, bad_arguments_are_refused_and_posting_is_not_capped)
{
	struct iovec iov[COUR_IOV_MAX + 1];

	memset(iov, 0, sizeof(iov));
	cr_assert_eq(cour_msg_recv(&ep->pep, iov, COUR_IOV_MAX + 1, FI_ADDR_UNSPEC, 0, 0, NULL, 0,
				   false), -FI_EINVAL);
	cr_assert_eq(cour_msg_recv(&ep->pep, iov, 2, FI_ADDR_UNSPEC, 0, 0, NULL, FI_MULTI_RECV, false),
		     -FI_EINVAL);
	cr_assert_eq(cour_msg_recv(&ep->pep, iov, COUR_IOV_MAX, FI_ADDR_UNSPEC, 0, 0, NULL, 0, false), 0);
	/* rx_attr->size is a floor, not a wall: MPI posts thousands (MPICH's threads deadlocked
	 * on a cap while unexpected messages held the sender's credits) */
	for (size_t i = 1; i < 4 * cour_params.rx_size; i++)
		cr_assert_eq(post(false, 0, 0, FI_ADDR_UNSPEC, NULL, 0, NULL, 0), 0, "receive %zu",
			     i);
	cr_assert_eq(ep->pep.rxq->rxe_pool.in_use, 4 * cour_params.rx_size);
}

/*
 * The whole 64-bit tag space against a model. Tags are built the way MPI libraries build them
 * (Open MPI's mtl/ofi: protocol bits at the top, a communicator id, then the MPI tag, whose
 * negative values are its internal traffic; the source rank in the tag or in CQ data) and also
 * drawn at random; receives take exact tags, MPI_ANY_TAG masks that still refuse negative
 * tags, ANY_SOURCE masks, random masks, and directed or wildcard sources. Messages arrive,
 * receives are posted and peeks made in random order; the model says which receive each
 * message completes (the first posted that matches, else the oldest unexpected message for a
 * new receive), and every completion is checked against it.
 */
struct mdl_rx { uint64_t tag, ignore; fi_addr_t src; int id; };
struct mdl_msg { uint64_t tag; fi_addr_t src; int id; };

static bool mdl_match(const struct mdl_rx *r, uint64_t tag, fi_addr_t src)
{
	return !((r->tag ^ tag) & ~r->ignore) && (r->src == FI_ADDR_UNSPEC || r->src == src);
}

static uint64_t rng_next(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* a tag as MPI builds one: [proto 2][cid 14][source 16][mpi tag 32], or anything at all */
static uint64_t mpi_tag(uint64_t *x, int cid, int srcrank)
{
	uint64_t r = rng_next(x);
	int32_t mtag = (r & 3) == 0 ? -(int32_t)(r >> 8 & 0xff) - 1 : (int32_t)(r >> 8 & 7);

	if ((r >> 20 & 7) == 0)
		return rng_next(x);                    /* the rest of the space */
	return (r >> 40 & 3) << 62 | (uint64_t)(cid & 0x3fff) << 48 |
	       (uint64_t)(srcrank & 0xffff) << 32 | (uint32_t)mtag;
}

Test(match, the_whole_tag_space_against_a_model)
{
	enum { NRX = 64, NMSG = 64, STEPS = 4000 };
	struct mdl_rx rx[NRX];
	struct mdl_msg un[NMSG];
	int nrx = 0, nun = 0, next_id = 1, done = 0, peeks = 0;
	uint64_t x = 0x9e3779b97f4a7c15ULL;
	fi_addr_t me = cour_peer_fi_addr(peer);
	size_t seen = 0, seen_err = 0;
	static char sink[8];            /* every message is one byte: none truncates */

	capwire_close(ep);
	open_with(FI_MSG | FI_TAGGED | FI_DIRECTED_RECV);
	cour_params.unexp_max = 1 << 20;        /* buffered messages give their credits back */
	me = cour_peer_fi_addr(peer);
	for (int step = 0; step < STEPS; step++) {
		uint64_t r = rng_next(&x);
		int cid = (int)(r >> 8 & 3), src = (int)(r >> 12 & 3);
		uint64_t tag = mpi_tag(&x, cid, src);

		/* half the time aim at what is queued on the other side, so matches happen */
		if ((r >> 30 & 1) && (r & 3) == 0 && nrx)
			tag = rx[(r >> 32) % nrx].tag | (rng_next(&x) & rx[(r >> 32) % nrx].ignore);
		else if ((r >> 30 & 1) && nun)
			tag = un[(r >> 32) % nun].tag;

		if ((r & 3) == 0 && nun < NMSG) {
			/* a message arrives: the first matching posted receive takes it */
			int k;

			for (k = 0; k < nrx && !mdl_match(&rx[k], tag, me); k++)
				;
			arrive(true, tag, "m", 1, COUR_F_CQ_DATA, (uint64_t)next_id);
			if (k < nrx) {
				cr_assert_eq(capwire_cq_count(&capwire.rx_cq), seen + 1,
					     "step %d: tag %#" PRIx64 " should complete receive %d "
					     "(tag %#" PRIx64 " ignore %#" PRIx64 " src %#" PRIx64 ")",
					     step, tag, rx[k].id, rx[k].tag, rx[k].ignore,
					     (uint64_t)rx[k].src);
				const struct cour_cq_entry *e = capwire_cq_entry(&capwire.rx_cq,
										 seen++);
				cr_assert_eq(e->op_context, (void *)(uintptr_t)rx[k].id,
					     "step %d: tag %#" PRIx64 " completed receive %p, want %d",
					     step, tag, e->op_context, rx[k].id);
				cr_assert_eq(e->data, (uint64_t)next_id);
				cr_assert_eq(e->tag, tag);
				memmove(&rx[k], &rx[k + 1], (size_t)(nrx - k - 1) * sizeof(*rx));
				nrx--;
				done++;
			} else {
				cr_assert_eq(capwire_cq_count(&capwire.rx_cq), seen,
					     "step %d: tag %#" PRIx64 " matched no receive", step, tag);
				un[nun++] = (struct mdl_msg){ tag, me, next_id };
			}
			next_id++;
			continue;
		}
		/* a receive: exact, MPI_ANY_TAG (low 31 bits: negative tags stay out),
		 * ANY_SOURCE (the source bits too), or a random mask; directed or not */
		uint64_t ignore = (r >> 16 & 3) == 0 ? 0 : (r >> 16 & 3) == 1 ? 0x7fffffffULL :
				  (r >> 16 & 3) == 2 ? 0x0000ffff7fffffffULL : rng_next(&x);
		fi_addr_t want_src = (r >> 24 & 1) ? FI_ADDR_UNSPEC :
				     (r >> 25 & 1) ? me : me + 1;
		bool peek = (r >> 26 & 7) == 0;
		struct mdl_rx m = { tag & ~ignore, ignore, want_src, next_id++ };
		int k;

		if (ignore == 0x7fffffffULL && (r >> 27 & 1))
			m.tag = tag & ~0xffffffffULL;          /* ANY_TAG from a real receive */
		for (k = 0; k < nun && !mdl_match(&m, un[k].tag, un[k].src); k++)
			;
		cr_assert_eq(post(true, m.tag, m.ignore, m.src, sink, sizeof(sink),
				  (void *)(uintptr_t)m.id, peek ? FI_PEEK : 0), 0);
		if (peek) {
			peeks++;
			if (k < nun) {
				const struct cour_cq_entry *e;

				cr_assert_eq(capwire_cq_count(&capwire.rx_cq), seen + 1);
				e = capwire_cq_entry(&capwire.rx_cq, seen++);
				cr_assert_eq(e->data, (uint64_t)un[k].id, "step %d: peek found "
					     "message %" PRIu64 ", want %d", step, e->data, un[k].id);
			} else {
				cr_assert_eq(capwire_cq_err_count(&capwire.rx_cq), seen_err + 1,
					     "step %d: a peek that finds nothing says FI_ENOMSG", step);
				cr_assert_eq(capwire_cq_err(&capwire.rx_cq, seen_err++)->err,
					     FI_ENOMSG);
			}
			continue;
		}
		if (k < nun) {
			const struct cour_cq_entry *e;

			cr_assert_eq(capwire_cq_count(&capwire.rx_cq), seen + 1,
				     "step %d: receive %d should take message %d", step, m.id,
				     un[k].id);
			e = capwire_cq_entry(&capwire.rx_cq, seen++);
			cr_assert_eq(e->op_context, (void *)(uintptr_t)m.id);
			cr_assert_eq(e->data, (uint64_t)un[k].id, "step %d: receive %d took message "
				     "%" PRIu64 ", want %d (the oldest that matches)", step, m.id,
				     e->data, un[k].id);
			memmove(&un[k], &un[k + 1], (size_t)(nun - k - 1) * sizeof(*un));
			nun--;
			done++;
		} else if (nrx < NRX) {
			rx[nrx++] = m;
		} else {
			cr_assert_eq(cour_msg_cancel(&ep->pep, (void *)(uintptr_t)m.id), 0);
			cr_assert_eq(capwire_cq_err_count(&capwire.rx_cq), seen_err + 1);
			cr_assert_eq(capwire_cq_err(&capwire.rx_cq, seen_err++)->err, FI_ECANCELED);
		}
	}
	cr_assert_eq(capwire_cq_err_count(&capwire.rx_cq), seen_err, "unexplained errors");
	cr_log_info("%d matches, %d peeks, %d receives and %d messages left\n", done, peeks, nrx,
		    nun);
	cr_assert_gt(done, STEPS / 8, "the model hardly matched anything: a weak test");
}

Test(match, multi_receive_slices_one_buffer)
{
	char b[200];
	char m[50];
	const struct cour_cq_entry *e;

	memset(m, 'q', sizeof(m));
	cr_assert_eq(post(false, 0, 0, FI_ADDR_UNSPEC, b, sizeof(b), (void *)0x3, FI_MULTI_RECV),
		     0);
	for (int i = 0; i < 3; i++) {
		m[0] = (char)('a' + i);
		arrive(false, 0, m, sizeof(m), 0, 0);
	}
	/* 200 - 150 = 50 left is below min_multi_recv (64): the buffer retires with the third */
	cr_assert_eq(capwire_cq_count(&capwire.rx_cq), 3);
	for (size_t i = 0; i < 3; i++) {
		e = capwire_cq_entry(&capwire.rx_cq, i);
		cr_assert_eq(e->buf, b + 50 * i);
		cr_assert_eq(e->len, 50);
		cr_assert_eq(e->flags, FI_RECV | FI_MSG | (i == 2 ? FI_MULTI_RECV : 0));
		cr_assert_eq(b[50 * i], 'a' + (char)i);
	}
	cr_assert_null(ep->pep.rxq->msg);
	cr_assert_eq(ep->pep.rxq->rxe_pool.in_use, 0);
}
