/*
 * courier fabtests harness: command-line options, and the run options the client hands to the
 * server over the oob channel so that both sides measure the same thing.
 */
#define _GNU_SOURCE

#include <arpa/inet.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ft_common.h"

#define COUR_FT_COMMON_OPTS	"p:e:B:P:T:M:DS:n:w:W:tmvh"

/* ---- options ---- */

void cour_ft_opts_init(struct cour_ft_opts *opts)
{
	memset(opts, 0, sizeof(*opts));
	opts->test_name = "test";
	opts->ep_type = FI_EP_RDM;
	opts->bind_addr = "127.0.0.1";
	opts->oob_port = COUR_FT_DEFAULT_PORT;
	opts->timeout_s = COUR_FT_DEFAULT_TIMEOUT;
	opts->caps = FI_MSG | FI_TAGGED;
	opts->warmup = -1;
	opts->tagged = true;
}

void cour_ft_usage(FILE *out, const char *prog, const char *prog_usage)
{
	fprintf(out,
		"usage: %s [options]            server\n"
		"       %s [options] <host>     client, connects to the server on <host>\n"
		"common options:\n"
		"  -p <prov>     provider (fi_getinfo prov_name), e.g. courier, tcp, \"udp;ofi_rxd\"\n"
		"  -e rdm|dgram  endpoint type (default rdm)\n"
		"  -B <addr>     server: oob listen address (default 127.0.0.1)\n"
		"  -P <port>     oob TCP port (default %d)\n"
		"  -T <sec>      give up after this many seconds (default %d)\n"
		"  -M auto|manual  ask for this data progress model (default: the provider's)\n"
		"  -D            this side's endpoint may not use shared memory\n"
		"                (FI_OPT_SHARED_MEMORY_PERMITTED false; fails where not supported)\n"
		"  -S <list>     message sizes, e.g. 8 or 1,64,4k,1m\n"
		"  -n <count>    iterations (default: scaled by size)\n"
		"  -w <count>    warmup iterations\n"
		"  -W <count>    window of outstanding operations\n"
		"  -t | -m       tagged (default) or untagged messages\n"
		"  -v            verify every byte received\n"
		"  -h            this help\n"
		"The client's -S -n -w -W -t/-m -v apply to both sides.\n%s",
		prog, prog, COUR_FT_DEFAULT_PORT, COUR_FT_DEFAULT_TIMEOUT,
		prog_usage ? prog_usage : "");
}

static int cour_ft_parse_long(const char *arg, long min, long max, long *out)
{
	char *end;
	long val;

	val = strtol(arg, &end, 0);
	if (end == arg || *end || val < min || val > max)
		return -FI_EINVAL;
	*out = val;
	return 0;
}

int cour_ft_parse_sizes(const char *list, size_t *sizes, int max)
{
	const char *p = list;
	int n = 0;

	while (*p) {
		unsigned long long val;
		char *end;

		if (n == max)
			return -FI_EINVAL;
		val = strtoull(p, &end, 0);
		if (end == p)
			return -FI_EINVAL;
		switch (*end) {
		case 'k': case 'K': val <<= 10; end++; break;
		case 'm': case 'M': val <<= 20; end++; break;
		case 'g': case 'G': val <<= 30; end++; break;
		default: break;
		}
		if (*end == ',')
			end++;
		else if (*end)
			return -FI_EINVAL;
		sizes[n++] = (size_t)val;
		p = end;
	}
	return n ? n : -FI_EINVAL;
}

static int cour_ft_parse_one(struct cour_ft_opts *opts, int opt, const char *arg)
{
	long val;
	int ret;

	switch (opt) {
	case 'p':
		opts->prov_name = arg;
		return 0;
	case 'e':
		if (!strcasecmp(arg, "rdm"))
			opts->ep_type = FI_EP_RDM;
		else if (!strcasecmp(arg, "dgram"))
			opts->ep_type = FI_EP_DGRAM;
		else
			return -FI_EINVAL;
		return 0;
	case 'B':
		opts->bind_addr = arg;
		return 0;
	case 'P':
		ret = cour_ft_parse_long(arg, 1, 65535, &val);
		if (!ret)
			opts->oob_port = (uint16_t)val;
		return ret;
	case 'T':
		ret = cour_ft_parse_long(arg, 1, 24 * 3600, &val);
		if (!ret)
			opts->timeout_s = (int)val;
		return ret;
	case 'M':
		if (!strcasecmp(arg, "auto"))
			opts->progress = FI_PROGRESS_AUTO;
		else if (!strcasecmp(arg, "manual"))
			opts->progress = FI_PROGRESS_MANUAL;
		else
			return -FI_EINVAL;
		return 0;
	case 'D':
		opts->no_shm = true;
		return 0;
	case 'S':
		ret = cour_ft_parse_sizes(arg, opts->sizes, COUR_FT_MAX_SIZES);
		if (ret < 0)
			return ret;
		opts->nsizes = ret;
		return 0;
	case 'n':
		return cour_ft_parse_long(arg, 1, 1L << 40, &opts->iterations);
	case 'w':
		return cour_ft_parse_long(arg, 0, 1L << 40, &opts->warmup);
	case 'W':
		ret = cour_ft_parse_long(arg, 1, 1 << 16, &val);
		if (!ret)
			opts->window = (int)val;
		return ret;
	case 't':
		opts->tagged = true;
		return 0;
	case 'm':
		opts->tagged = false;
		return 0;
	case 'v':
		opts->verify = true;
		return 0;
	default:
		return -FI_EINVAL;
	}
}

int cour_ft_parse_opts(struct cour_ft_opts *opts, int argc, char **argv,
		       const char *prog_optstr, cour_ft_opt_cb prog_opt, void *ctx,
		       const char *prog_usage)
{
	char optstr[128];
	int opt;

	snprintf(optstr, sizeof(optstr), "%s%s", COUR_FT_COMMON_OPTS,
		 prog_optstr ? prog_optstr : "");
	while ((opt = getopt(argc, argv, optstr)) != -1) {
		int ret;

		if (opt == 'h') {
			cour_ft_usage(stdout, argv[0], prog_usage);
			return 1;
		}
		if (opt != '?' && strchr(COUR_FT_COMMON_OPTS, opt))
			ret = cour_ft_parse_one(opts, opt, optarg);
		else if (opt != '?' && prog_opt)
			ret = prog_opt(opt, optarg, ctx) ? -FI_EINVAL : 0;
		else
			ret = -FI_EINVAL;
		if (ret) {
			if (opt != '?')
				fprintf(stderr, "%s: bad value for -%c: %s\n", argv[0], opt,
					optarg ? optarg : "");
			cour_ft_usage(stderr, argv[0], prog_usage);
			return -FI_EINVAL;
		}
	}
	if (optind < argc)
		opts->dst_host = argv[optind++];
	if (optind < argc) {
		fprintf(stderr, "%s: unexpected argument %s\n", argv[0], argv[optind]);
		return -FI_EINVAL;
	}
	return 0;
}

/* ---- run options, client -> server ---- */

#define COUR_FT_SYNC_MAGIC 0x636f75722d667431ULL	/* "cour-ft1" */

enum {
	COUR_FT_SYNC_MAGIC_IDX,
	COUR_FT_SYNC_EP_TYPE,
	COUR_FT_SYNC_NSIZES,
	COUR_FT_SYNC_ITERS,
	COUR_FT_SYNC_WARMUP,
	COUR_FT_SYNC_WINDOW,
	COUR_FT_SYNC_TAGGED,
	COUR_FT_SYNC_VERIFY,
	COUR_FT_SYNC_SIZES,
	COUR_FT_SYNC_COUNT = COUR_FT_SYNC_SIZES + COUR_FT_MAX_SIZES,
};

#define COUR_FT_TEST_NAME_MAX 64

int cour_ft_sync_opts(struct cour_ft *ft)
{
	struct cour_ft_opts *o = &ft->opts;
	uint64_t msg[COUR_FT_SYNC_COUNT];
	char name[COUR_FT_TEST_NAME_MAX];
	int ret, i;

	if (!ft->is_server) {
		memset(msg, 0, sizeof(msg));
		msg[COUR_FT_SYNC_MAGIC_IDX] = COUR_FT_SYNC_MAGIC;
		msg[COUR_FT_SYNC_EP_TYPE] = (uint64_t)o->ep_type;
		msg[COUR_FT_SYNC_NSIZES] = (uint64_t)o->nsizes;
		msg[COUR_FT_SYNC_ITERS] = (uint64_t)o->iterations;
		msg[COUR_FT_SYNC_WARMUP] = (uint64_t)o->warmup;
		msg[COUR_FT_SYNC_WINDOW] = (uint64_t)o->window;
		msg[COUR_FT_SYNC_TAGGED] = o->tagged;
		msg[COUR_FT_SYNC_VERIFY] = o->verify;
		for (i = 0; i < o->nsizes; i++)
			msg[COUR_FT_SYNC_SIZES + i] = o->sizes[i];
		for (i = 0; i < COUR_FT_SYNC_COUNT; i++)
			msg[i] = htobe64(msg[i]);
		memset(name, 0, sizeof(name));
		strncpy(name, o->test_name, sizeof(name) - 1);
		ret = cour_ft_oob_send(ft, msg, sizeof(msg));
		if (!ret)
			ret = cour_ft_oob_send(ft, name, sizeof(name));
		return ret;
	}

	ret = cour_ft_oob_recv(ft, msg, sizeof(msg));
	if (!ret)
		ret = cour_ft_oob_recv(ft, name, sizeof(name));
	if (ret)
		return ret;
	for (i = 0; i < COUR_FT_SYNC_COUNT; i++)
		msg[i] = be64toh(msg[i]);
	name[sizeof(name) - 1] = '\0';
	if (msg[COUR_FT_SYNC_MAGIC_IDX] != COUR_FT_SYNC_MAGIC ||
	    msg[COUR_FT_SYNC_NSIZES] > COUR_FT_MAX_SIZES) {
		COUR_FT_ERR("the client speaks another oob protocol");
		return -FI_EOTHER;
	}
	if (strcmp(name, o->test_name)) {
		COUR_FT_ERR("the client runs %s, this server runs %s", name, o->test_name);
		return -FI_EINVAL;
	}
	if (msg[COUR_FT_SYNC_EP_TYPE] != (uint64_t)o->ep_type) {
		COUR_FT_ERR("the client asks for another endpoint type (-e)");
		return -FI_EINVAL;
	}
	o->nsizes = (int)msg[COUR_FT_SYNC_NSIZES];
	o->iterations = (long)msg[COUR_FT_SYNC_ITERS];
	o->warmup = (long)msg[COUR_FT_SYNC_WARMUP];
	o->window = (int)msg[COUR_FT_SYNC_WINDOW];
	o->tagged = msg[COUR_FT_SYNC_TAGGED] != 0;
	o->verify = msg[COUR_FT_SYNC_VERIFY] != 0;
	for (i = 0; i < o->nsizes; i++)
		o->sizes[i] = (size_t)msg[COUR_FT_SYNC_SIZES + i];
	return 0;
}
