/*
 * RMA and atomic test helpers over the fabtests harness; see ft_rma.h.
 */
#define _GNU_SOURCE

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ft_rma.h"

#define RMA_HARD_GRACE_S 5
/* scalable mode: application keys, recognisable in logs */
#define RMA_FIRST_KEY 0x5ca1ab1e0000ULL

const char *const rma_cntr_name[RMA_CNTR_COUNT] = {
	"FI_WRITE", "FI_READ", "FI_REMOTE_WRITE", "FI_REMOTE_READ",
};

static const uint64_t rma_cntr_bind[RMA_CNTR_COUNT] = {
	FI_WRITE, FI_READ, FI_REMOTE_WRITE, FI_REMOTE_READ,
};

/* ---- completion queueing (as ft_func.c does for func_start) ---- */

static void rma_hard_timeout(int sig)
{
	static const char msg[] = "ft_rma: hard timeout: a call blocked past the deadline\n";
	ssize_t ret;

	(void)sig;
	ret = write(STDERR_FILENO, msg, sizeof(msg) - 1);
	(void)ret;
	_exit(3);
}

/* ---- options ---- */

struct rma_optctx {
	struct rma *r;
	cour_ft_opt_cb prog_opt;
	void *prog_ctx;
};

static int rma_opt(int opt, const char *arg, void *ctx)
{
	struct rma_optctx *o = ctx;

	if (opt != 'k')
		return o->prog_opt ? o->prog_opt(opt, arg, o->prog_ctx) : -1;
	if (!strcmp(arg, "basic"))
		o->r->keymode = RMA_KEYS_BASIC;
	else if (!strcmp(arg, "scalable"))
		o->r->keymode = RMA_KEYS_SCALABLE;
	else
		return -1;
	return 0;
}

/* ---- oob: a server with several initiators ---- */

static int rma_accept_all(struct rma *r)
{
	struct cour_ft *ft = &r->f.ft;
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE };
	struct addrinfo *res;
	char service[8];
	int lfd, fd, one = 1, n = 0, ret;

	snprintf(service, sizeof(service), "%u", ft->opts.oob_port);
	ret = getaddrinfo(ft->opts.bind_addr, service, &hints, &res);
	if (ret) {
		fprintf(stderr, "%s: cannot resolve %s: %s\n", r->f.prog, ft->opts.bind_addr,
			gai_strerror(ret));
		return -FI_EINVAL;
	}
	lfd = socket(res->ai_family, res->ai_socktype, res->ai_protocol);
	if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(lfd, res->ai_addr, res->ai_addrlen) || listen(lfd, RMA_MAX_PEERS)) {
		fprintf(stderr, "%s: cannot listen on port %u: %s\n", r->f.prog,
			ft->opts.oob_port, strerror(errno));
		ret = -FI_EOTHER;
		goto out;
	}
	while (n < r->npeers) {
		struct pollfd pfd = { .fd = lfd, .events = POLLIN };

		ret = cour_ft_check_deadline(ft, "initiators to connect");
		if (ret)
			goto out;
		if (poll(&pfd, 1, 100) <= 0)
			continue;
		fd = accept(lfd, NULL, NULL);
		if (fd < 0)
			continue;
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)) {
			close(fd);
			ret = -FI_EOTHER;
			goto out;
		}
		r->peer_fd[n++] = fd;
	}
	ft->oob_fd = r->peer_fd[0];
	ret = 0;
out:
	if (lfd >= 0)
		close(lfd);
	freeaddrinfo(res);
	return ret;
}

void rma_peer(struct rma *r, int i)
{
	if (r->f.ft.is_server && r->npeers > 1)
		r->f.ft.oob_fd = r->peer_fd[i];
}

/* ---- fabric ---- */

static bool rma_info_on_ip(const struct fi_info *info, const char *ip)
{
	const struct sockaddr *sa = info->src_addr;
	char buf[INET6_ADDRSTRLEN] = "";

	if (!sa || !ip[0])
		return false;
	if (sa->sa_family == AF_INET && info->src_addrlen >= sizeof(struct sockaddr_in))
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, buf, sizeof(buf));
	else if (sa->sa_family == AF_INET6 && info->src_addrlen >= sizeof(struct sockaddr_in6))
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, buf, sizeof(buf));
	return !strcmp(buf, ip);
}

static int rma_getinfo(struct rma *r)
{
	struct cour_ft *ft = &r->f.ft;
	struct cour_ft_opts *o = &ft->opts;
	struct fi_info *hints, *list, *pick;
	uint64_t need = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	uint64_t mode;
	char ip[64] = "";
	int ret;

	hints = fi_allocinfo();
	if (!hints)
		return -FI_ENOMEM;
	ft->hints = hints;
	hints->caps = o->caps;
	hints->ep_attr->type = FI_EP_RDM;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->domain_attr->mr_mode = r->keymode == RMA_KEYS_BASIC ? (int)need : 0;
	hints->domain_attr->data_progress = o->progress;
	hints->domain_attr->threading = o->threading;
	hints->tx_attr->msg_order = o->msg_order;
	hints->rx_attr->msg_order = o->msg_order;
	if (o->prov_name && !(hints->fabric_attr->prov_name = strdup(o->prov_name)))
		return -FI_ENOMEM;
	ret = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), NULL, NULL, 0, hints,
			 &list);
	if (ret == -FI_ENODATA && (hints->caps & FI_RMA_EVENT) &&
	    !(o->prov_name && !strcmp(o->prov_name, "courier"))) {
		/* courier must offer target counters; other providers are tested without */
		hints->caps &= ~FI_RMA_EVENT;
		ret = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), NULL, NULL, 0,
				 hints, &list);
		if (!ret)
			printf("%s: no FI_RMA_EVENT: no target counters\n", r->f.prog);
	}
	if (ret) {
		/* run_pair.sh reads "fi_getinfo ... failed: -61" as "not supported": skipped */
		fprintf(stderr, "%s: fi_getinfo(provider %s, caps 0x%llx, mr_mode 0x%x, progress "
			"%d) failed: %d (%s)\n", r->f.prog, o->prov_name ? o->prov_name : "any",
			(unsigned long long)hints->caps, hints->domain_attr->mr_mode,
			hints->domain_attr->data_progress, ret, fi_strerror(-ret));
		return ret;
	}
	if (ft->oob_fd >= 0) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);

		if (!getsockname(ft->oob_fd, (struct sockaddr *)&ss, &len))
			getnameinfo((struct sockaddr *)&ss, len, ip, sizeof(ip), NULL, 0,
				    NI_NUMERICHOST);
	}
	/* "-p courier" means courier itself, not a utility provider layered over it */
	for (pick = list; pick; pick = pick->next)
		if (!o->prov_name || !strcmp(pick->fabric_attr->prov_name, o->prov_name))
			if (rma_info_on_ip(pick, ip))
				break;
	if (!pick)
		for (pick = list; pick; pick = pick->next)
			if (!o->prov_name || !strcmp(pick->fabric_attr->prov_name, o->prov_name))
				break;
	if (!pick) {
		fprintf(stderr, "%s: fi_getinfo offered only layered providers over %s "
			"(set FI_PROVIDER=^ofi_rxd,ofi_rxm)\n", r->f.prog, o->prov_name);
		fi_freeinfo(list);
		return -FI_ENODATA;
	}
	ft->info = fi_dupinfo(pick);
	fi_freeinfo(list);
	if (!ft->info)
		return -FI_ENOMEM;

	mode = (uint64_t)ft->info->domain_attr->mr_mode;
	if (r->keymode == RMA_KEYS_BASIC && (mode & need) != need) {
		fprintf(stderr, "%s: basic key mode: asked mr_mode 0x%llx, the provider returned "
			"0x%llx%s\n", r->f.prog, (unsigned long long)need, (unsigned long long)mode,
			strcmp(ft->info->fabric_attr->prov_name, "courier") ? ": testing that" : "");
		if (!strcmp(ft->info->fabric_attr->prov_name, "courier"))
			return -FI_EINVAL;
	}
	if (r->keymode == RMA_KEYS_SCALABLE && mode) {
		fprintf(stderr, "%s: scalable key mode: asked mr_mode 0, the provider returned "
			"0x%llx\n", r->f.prog, (unsigned long long)mode);
		return -FI_EINVAL;
	}
	if ((hints->caps & FI_RMA_EVENT) && !(ft->info->caps & FI_RMA_EVENT)) {
		fprintf(stderr, "%s: FI_RMA_EVENT asked but not granted\n", r->f.prog);
		return -FI_EINVAL;
	}
	if (hints->domain_attr->data_progress &&
	    ft->info->domain_attr->data_progress != hints->domain_attr->data_progress) {
		fprintf(stderr, "%s: asked data progress %d, got %d\n", r->f.prog,
			hints->domain_attr->data_progress, ft->info->domain_attr->data_progress);
		return -FI_EINVAL;
	}
	r->virt_addr = mode & FI_MR_VIRT_ADDR;
	r->prov_key = mode & FI_MR_PROV_KEY;
	r->local_mr = mode & FI_MR_LOCAL;
	r->endpoint_mr = mode & FI_MR_ENDPOINT;
	return 0;
}

static int rma_open(struct rma *r)
{
	struct func *f = &r->f;
	struct cour_ft *ft = &f->ft;
	struct fi_info *info = ft->info;
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE, .count = RMA_MAX_PEERS };
	struct fi_cntr_attr cntr_attr = { .events = FI_CNTR_EVENTS_COMP,
					  .wait_obj = FI_WAIT_NONE };
	int k;

	FUNC_CALL(f, fi_fabric(info->fabric_attr, &ft->fabric, NULL));
	FUNC_CALL(f, fi_domain(ft->fabric, info, &ft->domain, NULL));
	cq_attr.size = info->tx_attr->size > 1024 ? info->tx_attr->size : 1024;
	FUNC_CALL(f, fi_cq_open(ft->domain, &cq_attr, &ft->txcq, NULL));
	cq_attr.size = info->rx_attr->size > 1024 ? info->rx_attr->size : 1024;
	FUNC_CALL(f, fi_cq_open(ft->domain, &cq_attr, &ft->rxcq, NULL));
	FUNC_CALL(f, fi_av_open(ft->domain, &av_attr, &ft->av, NULL));
	FUNC_CALL(f, fi_endpoint(ft->domain, info, &ft->ep, NULL));
	FUNC_CALL(f, fi_ep_bind(ft->ep, &ft->av->fid, 0));
	FUNC_CALL(f, fi_ep_bind(ft->ep, &ft->txcq->fid, FI_TRANSMIT));
	FUNC_CALL(f, fi_ep_bind(ft->ep, &ft->rxcq->fid, FI_RECV));
	for (k = 0; k < RMA_CNTR_COUNT; k++) {
		/* target counters need FI_RMA_EVENT; without it, initiator counters only */
		if (k >= RMA_CNTR_RMT_WRITE && !(info->caps & FI_RMA_EVENT))
			continue;
		FUNC_CALL(f, fi_cntr_open(ft->domain, &cntr_attr, &r->cntr[k], NULL));
		FUNC_CALL(f, fi_ep_bind(ft->ep, &r->cntr[k]->fid, rma_cntr_bind[k]));
	}
	FUNC_CALL(f, cour_ft_ep_setopts(ft, ft->ep));
	FUNC_CALL(f, fi_enable(ft->ep));
	ft->fabric_up = true;
	return 0;
}

static int rma_send_blob(struct cour_ft *ft, const void *blob, size_t len)
{
	uint32_t be = htonl((uint32_t)len);
	int ret = cour_ft_oob_send(ft, &be, sizeof(be));

	return ret ? ret : cour_ft_oob_send(ft, blob, len);
}

static int rma_recv_blob(struct cour_ft *ft, void *blob, size_t max, size_t *len)
{
	uint32_t be;
	int ret = cour_ft_oob_recv(ft, &be, sizeof(be));

	if (ret)
		return ret;
	if (ntohl(be) > max) {
		fprintf(stderr, "ft_rma: the peer sent a %u-byte blob, we take %zu\n", ntohl(be),
			max);
		return -FI_EOTHER;
	}
	*len = ntohl(be);
	return cour_ft_oob_recv(ft, blob, *len);
}

/* Provider names must match; then every side inserts the names it got, in peer order. */
static int rma_exchange_names(struct rma *r)
{
	struct func *f = &r->f;
	struct cour_ft *ft = &f->ft;
	const char *prov = ft->info->fabric_attr->prov_name;
	char name[COUR_FT_MAX_NAME], peer_name[COUR_FT_MAX_NAME], peer_prov[256];
	size_t name_len = sizeof(name), peer_len, prov_len;
	int i, n = ft->is_server ? r->npeers : 1, ret;

	FUNC_CALL(f, fi_getname(&ft->ep->fid, name, &name_len));
	for (i = 0; i < n; i++) {
		rma_peer(r, i);
		FUNC_CALL(f, rma_send_blob(ft, prov, strlen(prov) + 1));
		FUNC_CALL(f, rma_send_blob(ft, name, name_len));
		FUNC_CALL(f, rma_recv_blob(ft, peer_prov, sizeof(peer_prov) - 1, &prov_len));
		FUNC_CALL(f, rma_recv_blob(ft, peer_name, sizeof(peer_name), &peer_len));
		peer_prov[prov_len] = '\0';
		FUNC_ASSERT(f, !strcmp(peer_prov, prov), "we use %s, peer %d uses %s", prov, i,
			    peer_prov);
		ret = fi_av_insert(ft->av, peer_name, 1, &r->peer[i], 0, NULL);
		FUNC_ASSERT(f, ret == 1, "fi_av_insert(peer %d): %d", i, ret);
	}
	rma_peer(r, 0);
	ft->peer = r->peer[0];
	return 0;
}

static int rma_start(struct rma *r, const struct cour_ft_opts *opts)
{
	struct func *f = &r->f;
	struct cour_ft *ft = &f->ft;
	int i, n;

	ft->opts = *opts;
	ft->is_server = opts->dst_host == NULL;
	ft->listen_fd = ft->oob_fd = -1;
	ft->peer = FI_ADDR_UNSPEC;
	ft->deadline_ns = cour_ft_now_ns() + (uint64_t)opts->timeout_s * 1000000000ULL;
	for (i = 0; i < RMA_MAX_PEERS; i++)
		r->peer_fd[i] = -1;
	signal(SIGALRM, rma_hard_timeout);
	alarm((unsigned)opts->timeout_s + RMA_HARD_GRACE_S);
	if (!ft->is_server)
		r->npeers = 1;
	FUNC_ASSERT(f, r->npeers >= 1 && r->npeers <= RMA_MAX_PEERS, "%d initiators",
		    r->npeers);

	if (ft->is_server && r->npeers > 1)
		FUNC_CALL(f, rma_accept_all(r));
	else
		FUNC_CALL(f, cour_ft_oob_connect(ft));
	n = ft->is_server ? r->npeers : 1;
	for (i = 0; i < n; i++) {
		rma_peer(r, i);
		/* the server adopts each initiator's run options: they must all agree */
		FUNC_CALL(f, cour_ft_sync_opts(ft));
	}
	if (ft->opts.finalize)
		ft->opts.finalize(&ft->opts);
	FUNC_CALL(f, rma_getinfo(r));
	FUNC_CALL(f, rma_open(r));
	FUNC_CALL(f, rma_exchange_names(r));
	func_use_queues(f);
	r->next_key = RMA_FIRST_KEY;
	for (i = 0; i < n; i++) {
		rma_peer(r, i);
		FUNC_CALL(f, cour_ft_barrier(ft));
	}
	rma_peer(r, 0);
	return 0;
}

int rma_init(struct rma *r, int argc, char **argv, const char *name, uint64_t caps,
	     void (*finalize)(struct cour_ft_opts *opts), const char *prog_optstr,
	     cour_ft_opt_cb prog_opt, void *ctx, const char *prog_usage)
{
	struct rma_optctx oc = { .r = r, .prog_opt = prog_opt, .prog_ctx = ctx };
	struct cour_ft_opts opts;
	char optstr[64], usage[1024];
	int ret;

	r->f.prog = name;
	if (!r->npeers)
		r->npeers = 1;
	cour_ft_opts_init(&opts);
	opts.test_name = name;
	opts.timeout_s = 30;
	opts.caps = caps;
	opts.finalize = finalize;
	opts.tagged = false;
	snprintf(optstr, sizeof(optstr), "k:%s", prog_optstr ? prog_optstr : "");
	snprintf(usage, sizeof(usage), "  -k basic|scalable  key mode: provider keys and virtual "
		 "addresses (default), or\n                     application keys and offsets\n%s",
		 prog_usage ? prog_usage : "");
	ret = cour_ft_parse_opts(&opts, argc, argv, optstr, rma_opt, &oc, usage);
	if (ret)
		return ret > 0 ? -FI_EINVAL : ret;
	opts.tagged = false;
	return rma_start(r, &opts);
}

int rma_finish(struct rma *r)
{
	struct func *f = &r->f;
	int i;

	if (!f->ft.is_server || r->npeers == 1)
		return func_finish(f);
	for (i = 0; i < r->npeers; i++) {
		rma_peer(r, i);
		FUNC_CALL(f, cour_ft_barrier(&f->ft));
	}
	rma_peer(r, 0);
	return 0;
}

void rma_close(struct rma *r)
{
	struct cour_ft *ft = &r->f.ft;
	int k, i, ret;

	ft->fabric_up = false;
	if (ft->ep) {
		ret = fi_close(&ft->ep->fid);
		if (ret)
			fprintf(stderr, "%s: fi_close(ep): %d\n", r->f.prog, ret);
		ft->ep = NULL;
	}
	for (k = 0; k < RMA_CNTR_COUNT; k++) {
		if (!r->cntr[k])
			continue;
		ret = fi_close(&r->cntr[k]->fid);
		if (ret)
			fprintf(stderr, "%s: fi_close(cntr %s): %d\n", r->f.prog, rma_cntr_name[k],
				ret);
		r->cntr[k] = NULL;
	}
	/* the harness closes the first oob socket, we the others */
	for (i = 0; i < RMA_MAX_PEERS; i++)
		if (r->peer_fd[i] >= 0 && r->peer_fd[i] != ft->oob_fd)
			close(r->peer_fd[i]);
	rma_peer(r, 0);
	cour_ft_close(ft);
}

/* ---- memory ---- */

int rma_mr_reg(struct rma *r, void *buf, size_t len, uint64_t access, struct fid_mr **mr,
	       struct rma_region *reg)
{
	return rma_mr_reg_cntr(r, buf, len, access, NULL, 0, mr, reg);
}

int rma_mr_reg_cntr(struct rma *r, void *buf, size_t len, uint64_t access,
		    struct fid_cntr *cntr, uint64_t cntr_flags, struct fid_mr **mr,
		    struct rma_region *reg)
{
	struct func *f = &r->f;
	struct cour_ft *ft = &f->ft;
	uint64_t key = r->prov_key ? 0 : r->next_key++;
	struct fid_mr *m;

	FUNC_CALL(f, fi_mr_reg(ft->domain, buf, len, access, 0, key, 0, &m, NULL));
	if (cntr)
		FUNC_CALL(f, fi_mr_bind(m, &cntr->fid, cntr_flags));
	if (r->endpoint_mr)
		FUNC_CALL(f, fi_mr_bind(m, &ft->ep->fid, 0));
	if (r->endpoint_mr || (cntr && (ft->info->domain_attr->mr_mode & FI_MR_RMA_EVENT)))
		FUNC_CALL(f, fi_mr_enable(m));
	reg->addr = r->virt_addr ? (uint64_t)(uintptr_t)buf : 0;
	reg->key = fi_mr_key(m);
	reg->len = len;
	FUNC_ASSERT(f, reg->key != FI_KEY_NOTAVAIL, "fi_mr_key gave FI_KEY_NOTAVAIL");
	if (!r->prov_key)
		FUNC_ASSERT(f, reg->key == key, "application key: asked 0x%llx, got 0x%llx",
			    (unsigned long long)key, (unsigned long long)reg->key);
	*mr = m;
	return 0;
}

void rma_mr_close(struct rma *r, struct fid_mr **mr)
{
	int ret;

	if (!*mr)
		return;
	ret = fi_close(&(*mr)->fid);
	if (ret) {
		fprintf(stderr, "%s: fi_close(mr): %d (%s)\n", r->f.prog, ret, fi_strerror(-ret));
		r->f.failures++;
	}
	*mr = NULL;
}

int rma_local_reg(struct rma *r, void *buf, size_t len, struct fid_mr **mr, void **desc)
{
	struct rma_region reg;
	int ret;

	*mr = NULL;
	*desc = NULL;
	if (!r->local_mr)
		return 0;
	ret = rma_mr_reg(r, buf, len, FI_READ | FI_WRITE, mr, &reg);
	if (!ret)
		*desc = fi_mr_desc(*mr);
	return ret;
}

int rma_send_region(struct rma *r, const struct rma_region *reg)
{
	return cour_ft_oob_send(&r->f.ft, reg, sizeof(*reg));
}

int rma_recv_region(struct rma *r, struct rma_region *reg)
{
	return cour_ft_oob_recv(&r->f.ft, reg, sizeof(*reg));
}

/* ---- counters and completions ---- */

void rma_cntr_get(struct rma *r, enum rma_cntr_kind kind, uint64_t *value, uint64_t *err)
{
	*value = r->cntr[kind] ? fi_cntr_read(r->cntr[kind]) : 0;
	*err = r->cntr[kind] ? fi_cntr_readerr(r->cntr[kind]) : 0;
}

int rma_cntr_wait(struct rma *r, enum rma_cntr_kind kind, uint64_t value, uint64_t err, int ms)
{
	struct func *f = &r->f;
	uint64_t end = cour_ft_now_ns() + (uint64_t)ms * 1000000ULL, v, e;

	if (!r->cntr[kind])
		return 0;
	for (;;) {
		rma_cntr_get(r, kind, &v, &e);
		FUNC_ASSERT(f, e == err, "counter %s: %llu errors, want %llu",
			    rma_cntr_name[kind], (unsigned long long)e, (unsigned long long)err);
		FUNC_ASSERT(f, v <= value, "counter %s: %llu, want %llu (too many)",
			    rma_cntr_name[kind], (unsigned long long)v,
			    (unsigned long long)value);
		if (v == value)
			return 0;
		FUNC_CALL(f, cour_ft_progress(&f->ft));
		FUNC_ASSERT(f, cour_ft_now_ns() < end && !cour_ft_check_deadline(&f->ft, "counter"),
			    "counter %s stuck at %llu, want %llu", rma_cntr_name[kind],
			    (unsigned long long)v, (unsigned long long)value);
	}
}

int rma_expect_ok(struct rma *r, bool tx, void *ctx, uint64_t flags, const char *what)
{
	struct func *f = &r->f;
	struct func_comp c;

	FUNC_CALL(f, func_next(f, tx, &c, 20000));
	FUNC_ASSERT(f, !c.is_err, "%s: error completion %d (%s), prov_errno %d", what,
		    c.err.err, fi_strerror(c.err.err), c.err.prov_errno);
	FUNC_ASSERT(f, c.e.op_context == ctx, "%s: op_context %p, want %p", what,
		    c.e.op_context, ctx);
	FUNC_ASSERT(f, (c.e.flags & RMA_CQ_KIND) == flags, "%s: flags 0x%llx, want 0x%llx",
		    what, (unsigned long long)(c.e.flags & RMA_CQ_KIND),
		    (unsigned long long)flags);
	return 0;
}
