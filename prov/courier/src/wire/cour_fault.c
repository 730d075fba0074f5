/*
 * Fault injection for tests (FI_COURIER_FAULT="drop=5,dup=1,reorder=2,corrupt=1,seed=42"):
 * every packet sent through an endpoint may be dropped, sent twice, held back behind the next
 * packet, or sent with one byte flipped. Seeded, so a failing run can be replayed. The
 * corrupted copy is made in a scratch buffer: application memory is never touched.
 * "hello=N" drops the endpoint's first N HELLOs (the same-host handshake, wire/cour_shm.c).
 */
#include "cour_ep.h"

#include <stdio.h>
#include <stdlib.h>

struct cour_fault {
	unsigned drop, dup, reorder, corrupt;   /* percent */
	unsigned hello;                          /* HELLOs still to drop */
	uint64_t rng;
	char     held[COUR_MAX_PKT + 128];       /* a packet held back for reordering */
	size_t   held_len;
	struct sockaddr_storage held_sa;
	socklen_t held_salen;
	char     scratch[COUR_MAX_PKT + 128];
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

struct cour_fault *cour_fault_create(const char *spec)
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

void cour_fault_destroy(struct cour_fault *f)
{
	free(f);
}

bool cour_fault_on_packets(const struct cour_fault *f)
{
	return f->drop || f->dup || f->reorder || f->corrupt;
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

static void cour_fault_raw(struct cour_ep *ep, const void *sa, socklen_t salen, const char *buf,
			   size_t len)
{
	ep->wire->send_raw(ep, sa, salen, buf, len);
}

int cour_fault_sendmsg(struct cour_ep *ep, struct msghdr *m)
{
	struct cour_fault *f = ep->fault;
	size_t len;

	if (cour_fault_hit(f, f->drop) || (f->hello && m->msg_iovlen &&
	    m->msg_iov[0].iov_len >= sizeof(struct cour_base_hdr) &&
	    ((const struct cour_base_hdr *)m->msg_iov[0].iov_base)->type == COUR_PKT_HELLO &&
	    f->hello--)) {
		f->n_drop++;
		return 0;
	}
	len = cour_fault_gather(m, f->scratch);
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
		return 0;
	}
	cour_fault_raw(ep, m->msg_name, m->msg_namelen, f->scratch, len);
	if (cour_fault_hit(f, f->dup)) {
		cour_fault_raw(ep, m->msg_name, m->msg_namelen, f->scratch, len);
		f->n_dup++;
	}
	if (f->held_len) {
		cour_fault_raw(ep, &f->held_sa, f->held_salen, f->held, f->held_len);
		f->held_len = 0;
	}
	return 0;
}

void cour_fault_stats(struct cour_ep *ep, struct fi_courier_stats *s)
{
	if (!ep->fault)
		return;
	s->fault_drops = ep->fault->n_drop;
	s->fault_dups = ep->fault->n_dup;
	s->fault_corrupts = ep->fault->n_corrupt;
	s->fault_reorders = ep->fault->n_reorder;
}
