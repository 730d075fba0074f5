/*
 * auth: courier's authentication keys as two jobs see them (test_auth_keys.sh sets each
 * side's key, FI_COURIER_AUTH_KEY_FILE, or none). Tests (-x):
 *   exchange (default) both sides send each other messages of 1 B, 4 KiB and 200 KB (eager,
 *           and rendezvous) and check every byte: with the same key this works, and the
 *           endpoint's statistics show nothing refused (drop_bad_mac 0, drop_replay 0).
 *   refused both sides post their receives and send one message; with keys that differ (or
 *           one side without a key) nothing the other sends is accepted, so each send ends
 *           in an error completion FI_EHOSTUNREACH (the peer stays silent past
 *           FI_COURIER_PEER_TIMEOUT), no receive completes, no shared-memory ring is mapped,
 *           and drop_bad_mac counts what was refused.
 * One process, no peer:
 *   api     domain_attr->auth_key: one of 8 bytes makes fi_getinfo find nothing
 *           (-FI_ENODATA), and fi_domain refuses one edited into an info afterwards; a key of
 *           32 bytes comes back in every info fi_getinfo returns, as a copy (the hints' buffer
 *           may change or go), and fi_domain and fi_endpoint take it.
 *   badfile fi_domain fails with -FI_EACCES (the key file FI_COURIER_AUTH_KEY_FILE names is
 *           readable by others than its owner, missing, or a directory; the script checks
 *           the warning naming it).
 * Every wait is bounded. Exit 0 when every check held.
 */
#define _GNU_SOURCE

#include <stdlib.h>
#include <string.h>

#include "ft_func.h"

#define AUTH_NMSG	3
#define AUTH_MAX	200000
#define AUTH_TAG	0xa0e700000000ULL
#define AUTH_WAIT_MS	15000	/* a completion; the peer timeout the script sets is 2 s */
#define AUTH_QUIET_MS	1000	/* after the send failed, still nothing may arrive */

enum auth_test { AT_EXCHANGE, AT_REFUSED, AT_API, AT_BADFILE, AT_N };
static const char *const auth_test_name[AT_N] = { "exchange", "refused", "api", "badfile" };
static const size_t auth_len[AUTH_NMSG] = { 1, 4096, AUTH_MAX };

struct auth {
	struct func f;
	enum auth_test test;
	struct cour_ft_buf buf;		/* AUTH_NMSG receive slots, then AUTH_NMSG send slots */
	struct fi_context2 ctx[2 * AUTH_NMSG];
};

static int auth_opt(int opt, const char *arg, void *ctx)
{
	struct auth *a = ctx;

	if (opt != 'x')
		return 1;
	for (a->test = 0; a->test < AT_N; a->test++)
		if (!strcmp(arg, auth_test_name[a->test]))
			return 0;
	return 1;
}

static char *auth_slot(struct auth *a, int i)
{
	return (char *)a->buf.base + (size_t)i * AUTH_MAX;
}

/* The receives (slots 0..) and the sends (slots AUTH_NMSG..) of the first n messages. The
 * server's messages have seq 100 + i, the client's seq i: each side checks the other's. */
static int auth_post(struct auth *a, int n)
{
	struct func *f = &a->f;
	uint64_t mine = f->ft.is_server ? 100 : 0;

	for (int i = 0; i < n; i++)
		FUNC_CALL(f, FUNC_POST(f, fi_trecv(f->ft.ep, auth_slot(a, i), AUTH_MAX,
						   a->buf.desc, f->ft.peer, AUTH_TAG + i, 0,
						   &a->ctx[i])));
	for (int i = 0; i < n; i++) {
		char *p = auth_slot(a, AUTH_NMSG + i);

		cour_ft_fill(p, auth_len[i], mine + i);
		FUNC_CALL(f, FUNC_POST(f, fi_tsend(f->ft.ep, p, auth_len[i], a->buf.desc,
						   f->ft.peer, AUTH_TAG + i,
						   &a->ctx[AUTH_NMSG + i])));
	}
	return 0;
}

static int auth_exchange(struct auth *a, struct fi_courier_stats *st)
{
	struct func *f = &a->f;
	uint64_t theirs = f->ft.is_server ? 0 : 100;
	struct func_comp c;

	FUNC_CALL(f, auth_post(a, AUTH_NMSG));
	for (int k = 0; k < 2 * AUTH_NMSG; k++) {
		bool tx = k >= AUTH_NMSG;
		int i;

		FUNC_CALL(f, func_next(f, tx, &c, AUTH_WAIT_MS));
		FUNC_ASSERT(f, !c.is_err, "%s: error %d (%s)", tx ? "send" : "receive",
			    c.err.err, fi_strerror(c.err.err));
		i = (int)((struct fi_context2 *)c.e.op_context - a->ctx);
		FUNC_ASSERT(f, i >= 0 && i < 2 * AUTH_NMSG && (i >= AUTH_NMSG) == tx,
			    "op_context %p", c.e.op_context);
		if (tx)
			continue;
		FUNC_ASSERT(f, c.e.len == auth_len[i] && c.e.tag == AUTH_TAG + i,
			    "message %d: %zu bytes, tag 0x%llx", i, c.e.len,
			    (unsigned long long)c.e.tag);
		FUNC_CALL(f, func_check_data(f, auth_slot(a, i), auth_len[i], theirs + i,
					     "received"));
	}
	FUNC_CALL(f, func_get_stats(f->ft.ep, st));
	FUNC_ASSERT(f, st->drop_bad_mac == 0 && st->drop_replay == 0,
		    "same key, yet drop_bad_mac %llu drop_replay %llu",
		    (unsigned long long)st->drop_bad_mac, (unsigned long long)st->drop_replay);
	printf("auth: exchange: %d messages each way verified, drop_bad_mac 0, drop_replay 0\n",
	       AUTH_NMSG);
	return 0;
}

static int auth_refused(struct auth *a, struct fi_courier_stats *st)
{
	struct func *f = &a->f;
	uint64_t start = cour_ft_now_ns();
	struct func_comp c;
	int ret;

	FUNC_CALL(f, auth_post(a, 1));
	ret = func_next(f, true, &c, AUTH_WAIT_MS);
	FUNC_ASSERT(f, ret == 0, "no send completion within %d ms: %d (%s)", AUTH_WAIT_MS, ret,
		    fi_strerror(-ret));
	FUNC_ASSERT(f, c.is_err && c.err.err == FI_EHOSTUNREACH, "the send to a peer with "
		    "another key completed with %s %d (%s), want error FI_EHOSTUNREACH",
		    c.is_err ? "error" : "success", c.err.err, fi_strerror(c.err.err));
	printf("auth: refused: the send failed after %.1f s: %s (prov_errno %d: %s)\n",
	       (double)(cour_ft_now_ns() - start) / 1e9, fi_strerror(c.err.err),
	       c.err.prov_errno, fi_cq_strerror(f->ft.txcq, c.err.prov_errno, NULL, NULL, 0));
	/* the receive was posted from the start: nothing arrived meanwhile, nor now */
	FUNC_CALL(f, func_expect_quiet(f, false, AUTH_QUIET_MS));
	FUNC_CALL(f, fi_cancel(&f->ft.ep->fid, &a->ctx[0]));
	FUNC_CALL(f, func_next(f, false, &c, AUTH_WAIT_MS));
	FUNC_ASSERT(f, c.is_err && c.err.err == FI_ECANCELED, "the cancelled receive completed "
		    "with %s %d", c.is_err ? "error" : "success", c.err.err);
	FUNC_CALL(f, func_get_stats(f->ft.ep, st));
	FUNC_ASSERT(f, st->drop_bad_mac > 0, "nothing counted in drop_bad_mac (rx_pkts %llu)",
		    (unsigned long long)st->rx_pkts);
	FUNC_ASSERT(f, st->shm_peers == 0, "a shared-memory ring was mapped (%llu peers)",
		    (unsigned long long)st->shm_peers);
	printf("auth: refused: nothing received, drop_bad_mac %llu, no ring mapped\n",
	       (unsigned long long)st->drop_bad_mac);
	return 0;
}

/* ---- one process ---- */

static struct fi_info *auth_hints(const char *prov, const void *key, size_t len)
{
	struct fi_info *h = fi_allocinfo();

	if (!h)
		return NULL;
	h->caps = FI_MSG;
	h->ep_attr->type = FI_EP_RDM;
	h->fabric_attr->prov_name = prov ? strdup(prov) : NULL;
	if (len) {
		h->domain_attr->auth_key = malloc(len);
		if (h->domain_attr->auth_key)
			memcpy(h->domain_attr->auth_key, key, len);
		h->domain_attr->auth_key_size = len;
	}
	return h;
}

/* fi_domain with info: its return code (the domain closed again). */
static int auth_domain(struct fi_info *info, bool with_ep)
{
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_ep *ep;
	int ret;

	ret = fi_fabric(info->fabric_attr, &fabric, NULL);
	if (ret)
		return ret;
	ret = fi_domain(fabric, info, &domain, NULL);
	if (!ret) {
		if (with_ep) {
			ret = fi_endpoint(domain, info, &ep, NULL);
			if (!ret)
				fi_close(&ep->fid);
		}
		fi_close(&domain->fid);
	}
	fi_close(&fabric->fid);
	return ret;
}

static int auth_api(struct auth *a)
{
	struct func *f = &a->f;
	const char *prov = f->ft.opts.prov_name;
	uint8_t key[32], short_key[8];
	struct fi_info *hints, *info = NULL, *i, *edit;
	int ret, n = 0;

	for (size_t k = 0; k < sizeof(key); k++)
		key[k] = (uint8_t)(0x35 + 7 * k);
	memset(short_key, 0x11, sizeof(short_key));

	hints = auth_hints(prov, short_key, sizeof(short_key));
	FUNC_ASSERT(f, hints && hints->domain_attr->auth_key, "out of memory");
	ret = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), NULL, NULL, 0, hints,
			 &info);
	fi_freeinfo(hints);
	FUNC_ASSERT(f, ret == -FI_ENODATA, "fi_getinfo with an 8-byte auth_key: %d (%s), want "
		    "-FI_ENODATA", ret, fi_strerror(-ret));

	hints = auth_hints(prov, key, sizeof(key));
	FUNC_ASSERT(f, hints && hints->domain_attr->auth_key, "out of memory");
	ret = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), NULL, NULL, 0, hints,
			 &info);
	FUNC_ASSERT(f, ret == 0, "fi_getinfo with a 32-byte auth_key: %d (%s)", ret,
		    fi_strerror(-ret));
	/* what came back must be the info's own copy: change the hints' bytes, then free them */
	for (i = info; i; i = i->next)
		FUNC_ASSERT(f, i->domain_attr->auth_key != hints->domain_attr->auth_key,
			    "info %d shares the hints' auth_key buffer", n);
	memset(hints->domain_attr->auth_key, 0, sizeof(key));
	fi_freeinfo(hints);
	for (i = info; i; i = i->next, n++) {
		FUNC_ASSERT(f, i->domain_attr->auth_key_size == sizeof(key) &&
			    i->domain_attr->auth_key &&
			    !memcmp(i->domain_attr->auth_key, key, sizeof(key)),
			    "info %d (%s): auth_key of %zu bytes, not the hints' 32", n,
			    i->fabric_attr->prov_name, i->domain_attr->auth_key_size);
	}
	ret = auth_domain(info, true);
	FUNC_ASSERT(f, ret == 0, "fi_domain/fi_endpoint with a 32-byte auth_key: %d (%s)", ret,
		    fi_strerror(-ret));

	edit = fi_dupinfo(info);
	fi_freeinfo(info);
	FUNC_ASSERT(f, edit, "fi_dupinfo: out of memory");
	free(edit->domain_attr->auth_key);
	edit->domain_attr->auth_key = malloc(sizeof(short_key));
	FUNC_ASSERT(f, edit->domain_attr->auth_key, "out of memory");
	memcpy(edit->domain_attr->auth_key, short_key, sizeof(short_key));
	edit->domain_attr->auth_key_size = sizeof(short_key);
	ret = auth_domain(edit, false);
	fi_freeinfo(edit);
	FUNC_ASSERT(f, ret == -FI_EINVAL, "fi_domain with an 8-byte auth_key edited into its "
		    "info: %d (%s), want -FI_EINVAL", ret, fi_strerror(-ret));
	printf("auth: api: an 8-byte key: fi_getinfo -FI_ENODATA, fi_domain -FI_EINVAL; a "
	       "32-byte key copied into %d info(s), taken by fi_domain and fi_endpoint\n", n);
	return 0;
}

static int auth_badfile(struct auth *a)
{
	struct func *f = &a->f;
	struct fi_info *hints = auth_hints(f->ft.opts.prov_name, NULL, 0), *info = NULL;
	const char *file = getenv("FI_COURIER_AUTH_KEY_FILE");
	int ret;

	FUNC_ASSERT(f, file && *file, "FI_COURIER_AUTH_KEY_FILE is not set");
	FUNC_ASSERT(f, hints, "out of memory");
	ret = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), NULL, NULL, 0, hints,
			 &info);
	fi_freeinfo(hints);
	FUNC_ASSERT(f, ret == 0, "fi_getinfo: %d (%s)", ret, fi_strerror(-ret));
	ret = auth_domain(info, false);
	fi_freeinfo(info);
	FUNC_ASSERT(f, ret == -FI_EACCES, "fi_domain with key file %s: %d (%s), want "
		    "-FI_EACCES", file, ret, fi_strerror(-ret));
	printf("auth: badfile: fi_domain refused key file %s: -FI_EACCES\n", file);
	return 0;
}

static const char auth_usage[] =
	"auth options:\n"
	"  -x exchange|refused|api|badfile  the test (default exchange); api and badfile\n"
	"                run in one process, without a peer\n";

int main(int argc, char **argv)
{
	static struct auth a;
	struct func *f = &a.f;
	struct cour_ft_opts opts;
	struct fi_courier_stats st;
	int ret;

	f->prog = "auth";
	cour_ft_opts_init(&opts);
	opts.test_name = "auth";
	opts.timeout_s = 30;
	opts.caps = FI_MSG | FI_TAGGED;
	ret = cour_ft_parse_opts(&opts, argc, argv, "x:", auth_opt, &a, auth_usage);
	if (ret)
		return ret > 0 ? 0 : 1;
	opts.tagged = true;
	if (a.test == AT_API || a.test == AT_BADFILE) {
		f->ft.opts = opts;
		ret = a.test == AT_API ? auth_api(&a) : auth_badfile(&a);
	} else {
		ret = func_start(f, &opts);
		if (!ret)
			ret = cour_ft_buf_alloc(&f->ft, 2 * AUTH_NMSG * (size_t)AUTH_MAX, &a.buf);
		if (!ret)
			ret = a.test == AT_EXCHANGE ? auth_exchange(&a, &st) : auth_refused(&a, &st);
		if (!ret)
			ret = func_finish(f);
		cour_ft_close_ep(&f->ft);
		cour_ft_buf_free(&a.buf);
		cour_ft_close(&f->ft);
	}
	if (ret || f->failures) {
		fprintf(stderr, "auth: %s: FAIL (%d)\n", auth_test_name[a.test], ret);
		return 1;
	}
	printf("auth: %s: PASS (%s)\n", auth_test_name[a.test],
	       a.test >= AT_API ? "one process" : f->ft.is_server ? "server" : "client");
	return 0;
}
