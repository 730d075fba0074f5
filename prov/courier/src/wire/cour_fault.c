/*
 * Fault injection for tests (FI_COURIER_FAULT="drop=5,dup=1,reorder=2,corrupt=1,seed=42"):
 * every packet sent through an endpoint may be dropped, sent twice, held back behind the next
 * packet, or sent with one byte flipped. Seeded, so a failing run can be replayed. The
 * corrupted copy is made in a scratch buffer: application memory is never touched.
 * "hello=N" drops the endpoint's first N HELLOs (the same-host handshake, which the engine's
 * rx->is_handshake recognises).
 *
 * A decorator of any wire (cour_wire.h): it takes the wire's sending ops, gathers each packet
 * into one buffer at once (so a queued payload may change after the call, as on the loop
 * wire), and puts the survivors out with the base wire's send_raw; receiving, names and MTUs
 * are the base wire's.
 */
#include "util/cour_util.h"
#include "wire/cour_wire.h"
#include "wire/cour_trace.h"

#include <stdio.h>
#include <stdlib.h>

struct cour_fault {
	unsigned drop, dup, reorder, corrupt;   /* percent */
	unsigned hello;                          /* HELLOs still to drop */
	uint64_t rng;
	struct cour_wire_ops ops;                /* the base wire's, sending replaced */
	char     held[COUR_WIRE_DGRAM_MAX + 128]; /* a packet held back for reordering */
	size_t   held_len;
	struct sockaddr_storage held_sa;
	socklen_t held_salen;
	char     scratch[COUR_WIRE_DGRAM_MAX + 128];
	uint64_t n_drop, n_dup, n_reorder, n_corrupt;
};

static uint64_t cour_fault_rand(struct cour_fault *f)
{
	/* xorshift64*: fast, and plenty random for choosing packets */
	f->rng ^= f->rng >> 12;
	f->rng ^= f->rng << 25;
	f->rng ^= f->rng >> 27;
	return f->rng * 2685821657736338717ULL;
}

static bool cour_fault_hit(struct cour_fault *f, unsigned pct)
{
	return pct && cour_fault_rand(f) % 100 < pct;
}

static struct cour_fault *cour_fault_create(const char *spec)
{
	struct cour_fault *f = calloc(1, sizeof(*f));
	char *copy, *tok, *save = NULL;
	unsigned long long seed = 1;

	if (!f || !(copy = strdup(spec))) {
		free(f);
		return NULL;
	}
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char key[16];
		unsigned long long v;
		if (sscanf(tok, "%15[a-z]=%llu", key, &v) != 2)
			goto bad;
		if (!strcmp(key, "seed"))
			seed = v;
		else if (!strcmp(key, "hello") && v <= 1000)
			f->hello = (unsigned)v;
		else if (v > 100)
			goto bad;
		else if (!strcmp(key, "drop"))
			f->drop = (unsigned)v;
		else if (!strcmp(key, "dup"))
			f->dup = (unsigned)v;
		else if (!strcmp(key, "reorder"))
			f->reorder = (unsigned)v;
		else if (!strcmp(key, "corrupt"))
			f->corrupt = (unsigned)v;
		else
			goto bad;
	}
	free(copy);
	f->rng = seed ? seed : 1;
	COUR_INFO(FI_LOG_EP_DATA, "fault injection: drop %u%% dup %u%% reorder %u%% corrupt %u%% "
		  "seed %llu, first %u HELLOs dropped\n", f->drop, f->dup, f->reorder, f->corrupt,
		  seed, f->hello);
	return f;
bad:
	COUR_WARN(FI_LOG_EP_DATA, "FI_COURIER_FAULT: cannot parse \"%s\" (want "
		  "drop=P,dup=P,reorder=P,corrupt=P,seed=N,hello=N)\n", tok);
	free(copy);
	free(f);
	return NULL;
}

static size_t cour_fault_gather(struct msghdr *m, char *dst)
{
	size_t len = 0;

	for (size_t i = 0; i < m->msg_iovlen; i++) {
		memcpy(dst + len, m->msg_iov[i].iov_base, m->msg_iov[i].iov_len);
		len += m->msg_iov[i].iov_len;
	}
	return len;
}

static void cour_fault_sendmsg(struct cour_wire *w, struct msghdr *m)
{
	struct cour_fault *f = w->deco;
	size_t len;

	if (cour_fault_hit(f, f->drop) || (f->hello && m->msg_iovlen &&
	    w->rx->is_handshake(m->msg_iov[0].iov_base, m->msg_iov[0].iov_len) && f->hello--)) {
		f->n_drop++;
		if (COUR_UNLIKELY(w->trace))
			cour_trace_fault_drop(w, m);
		return;
	}
	len = cour_fault_gather(m, f->scratch);
	if (w->mac) {
		/* the injector plays the network, which harms what the sender signed: sign
		 * first, and hand the base wire finished datagrams (send_raw sends as is) */
		cour_wire_sign_buf(w, m->msg_name, m->msg_namelen, f->scratch, len);
		len += COUR_MAC_LEN;
	}
	if (cour_fault_hit(f, f->corrupt) && len) {
		f->scratch[cour_fault_rand(f) % len] ^= (char)(1 + cour_fault_rand(f) % 255);
		f->n_corrupt++;
	}
	if (!f->held_len && cour_fault_hit(f, f->reorder)) {
		memcpy(f->held, f->scratch, len);
		f->held_len = len;
		memcpy(&f->held_sa, m->msg_name, m->msg_namelen);
		f->held_salen = m->msg_namelen;
		f->n_reorder++;
		return;
	}
	w->base->send_raw(w, m->msg_name, m->msg_namelen, f->scratch, len);
	if (cour_fault_hit(f, f->dup)) {
		w->base->send_raw(w, m->msg_name, m->msg_namelen, f->scratch, len);
		f->n_dup++;
	}
	if (f->held_len) {
		w->base->send_raw(w, &f->held_sa, f->held_salen, f->held, f->held_len);
		f->held_len = 0;
	}
}

static int cour_fault_send_now(struct cour_wire *w, const void *sa,
			       socklen_t sa_len, const void *hdr, size_t hdr_len,
			       const struct iovec *iov, size_t iovcnt)
{
	struct cour_wire_msg msg;

	cour_wire_msghdr(&msg, sa, sa_len, hdr, hdr_len, iov, iovcnt);
	w->stats.tx_pkts++;
	cour_fault_sendmsg(w, &msg.m);
	return 0;
}

/* Sent (or lost) at once: a payload may change after the call, as on the loop wire. */
static void cour_fault_queue(struct cour_wire *w, const void *sa,
			     socklen_t sa_len, const void *hdr, size_t hdr_len,
			     const struct iovec *iov, size_t iovcnt,
			     uint32_t pack)
{
	(void)pack;         /* (one packet a datagram: packing is the UDP wire's) */
	for (size_t k = 0; k < iovcnt; k++)
		w->stats.tx_bytes += iov[k].iov_len;
	cour_fault_send_now(w, sa, sa_len, hdr, hdr_len, iov, iovcnt);
}

static int cour_fault_flush(struct cour_wire *w)
{
	(void)w;            /* every packet left (or was lost) when queued */
	return 0;
}

int cour_fault_wrap(struct cour_wire *w, const char *spec)
{
	struct cour_fault *f = cour_fault_create(spec);

	if (!f)
		return -FI_EINVAL;
	f->ops = *w->base;
	f->ops.queue = cour_fault_queue;
	f->ops.flush = cour_fault_flush;
	f->ops.send_now = cour_fault_send_now;
	w->deco = f;
	w->ops = &f->ops;
	return 0;
}

void cour_fault_unwrap(struct cour_wire *w)
{
	free(w->deco);
	w->deco = NULL;
	w->ops = w->base;
}

bool cour_fault_on_packets(const struct cour_wire *w)
{
	const struct cour_fault *f = w->deco;

	return f && (f->drop || f->dup || f->reorder || f->corrupt);
}

void cour_fault_counts(const struct cour_wire *w, struct cour_fault_counts *c)
{
	const struct cour_fault *f = w->deco;

	memset(c, 0, sizeof(*c));
	if (!f)
		return;
	c->drops = f->n_drop;
	c->dups = f->n_dup;
	c->corrupts = f->n_corrupt;
	c->reorders = f->n_reorder;
}
