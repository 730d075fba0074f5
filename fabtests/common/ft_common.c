/*
 * courier fabtests harness: fabric setup, posting, the completion loop and the data pattern.
 * See ft_common.h for the model (roles, oob channel, bounds).
 */
#define _GNU_SOURCE

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ft_common.h"

#define COUR_FT_CQ_BATCH	16
#define COUR_FT_PEER_CHECK_NS	(100 * 1000 * 1000ULL)
/* How long after the deadline the alarm ends a process stuck inside a provider call. */
#define COUR_FT_HARD_GRACE_S	5

/* The mr_mode bits this harness knows how to honour; providers keep those they need. */
#define COUR_FT_MR_MODE (FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | \
			 FI_MR_ENDPOINT)

uint64_t cour_ft_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

int cour_ft_check_deadline(const struct cour_ft *ft, const char *what)
{
	if (cour_ft_now_ns() < ft->deadline_ns)
		return 0;
	fprintf(stderr, "cour_ft: timed out after %d s waiting for %s "
		"(tx %llu/%llu, rx %llu/%llu completed)\n", ft->opts.timeout_s, what,
		(unsigned long long)ft->tx_done, (unsigned long long)ft->tx_posted,
		(unsigned long long)ft->rx_done, (unsigned long long)ft->rx_posted);
	return -FI_ETIMEDOUT;
}

static void cour_ft_hard_timeout(int sig)
{
	static const char msg[] = "cour_ft: hard timeout: a call blocked past the deadline\n";
	ssize_t ret;

	(void)sig;
	ret = write(STDERR_FILENO, msg, sizeof(msg) - 1);
	(void)ret;
	_exit(3);
}

/* ---- fabric setup ---- */

/*
 * Prefer the fabric interface that carries the oob connection (a provider lists every
 * interface, and the first is seldom loopback), when the address format tells us its IP.
 */
static bool cour_ft_info_on_oob_ip(const struct cour_ft *ft, const struct fi_info *info)
{
	const struct sockaddr *sa = info->src_addr;
	char ip[INET6_ADDRSTRLEN];

	if (!sa || (info->addr_format != FI_SOCKADDR && info->addr_format != FI_SOCKADDR_IN &&
		    info->addr_format != FI_SOCKADDR_IN6))
		return false;
	if (sa->sa_family == AF_INET && info->src_addrlen >= sizeof(struct sockaddr_in))
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, ip, sizeof(ip));
	else if (sa->sa_family == AF_INET6 && info->src_addrlen >= sizeof(struct sockaddr_in6))
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, ip, sizeof(ip));
	else
		return false;
	return !strcmp(ip, ft->oob_local);
}

static int cour_ft_getinfo(struct cour_ft *ft)
{
	struct cour_ft_opts *o = &ft->opts;
	struct fi_info *hints, *list, *pick;
	int ret;

	hints = fi_allocinfo();
	if (!hints) {
		COUR_FT_ERR("fi_allocinfo: out of memory");
		return -FI_ENOMEM;
	}
	ft->hints = hints;
	hints->caps = o->caps;
	if (o->ep_type == FI_EP_DGRAM)
		o->tagged = false;
	if (!o->tagged)
		hints->caps &= ~FI_TAGGED;
	hints->ep_attr->type = o->ep_type;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->domain_attr->mr_mode = COUR_FT_MR_MODE;
	hints->domain_attr->data_progress = o->progress;
	hints->domain_attr->threading = o->threading;
	hints->tx_attr->msg_order = o->msg_order;
	hints->rx_attr->msg_order = o->msg_order;
	if (o->prov_name) {
		hints->fabric_attr->prov_name = strdup(o->prov_name);
		if (!hints->fabric_attr->prov_name)
			return -FI_ENOMEM;
	}

	/* COUR_FT_EP_PORT: this side's endpoint binds that port (a test that needs the same
	 * addresses across runs: test_auth_forge.sh's replays of an earlier run) */
	const char *port = getenv("COUR_FT_EP_PORT");

	ret = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), NULL,
			 port && *port ? port : NULL, port && *port ? FI_SOURCE : 0, hints, &list);
	if (ret) {
		fprintf(stderr, "cour_ft: fi_getinfo(provider %s, ep %s, caps %s) failed: %d (%s)\n",
			o->prov_name ? o->prov_name : "any",
			o->ep_type == FI_EP_DGRAM ? "dgram" : "rdm",
			(hints->caps & FI_TAGGED) ? "msg|tagged" : "msg", ret, fi_strerror(-ret));
		return ret;
	}
	/* "-p courier" means courier itself: libfabric may also offer utility providers layered
	 * over it ("courier;ofi_rxd"), and may list them first */
	for (pick = list; pick; pick = pick->next)
		if (cour_ft_info_on_oob_ip(ft, pick) &&
		    (!o->prov_name || !strcmp(pick->fabric_attr->prov_name, o->prov_name)))
			break;
	if (!pick)
		for (pick = list; pick; pick = pick->next)
			if (cour_ft_info_on_oob_ip(ft, pick))
				break;
	if (!pick)
		pick = list;
	ft->info = fi_dupinfo(pick);
	fi_freeinfo(list);
	if (!ft->info) {
		COUR_FT_ERR("fi_dupinfo: out of memory");
		return -FI_ENOMEM;
	}
	return 0;
}

static int cour_ft_open_fabric(struct cour_ft *ft)
{
	struct fi_info *info = ft->info;
	struct fi_cq_attr cq_attr = {
		.format = FI_CQ_FORMAT_TAGGED,
		.wait_obj = FI_WAIT_NONE,
	};
	struct fi_av_attr av_attr = {
		.type = FI_AV_TABLE,
		.count = 16,
	};
	int ret;

	ret = fi_fabric(info->fabric_attr, &ft->fabric, NULL);
	if (ret) {
		COUR_FT_FIERR("fi_fabric", ret);
		return ret;
	}
	ret = fi_domain(ft->fabric, info, &ft->domain, NULL);
	if (ret) {
		COUR_FT_FIERR("fi_domain", ret);
		return ret;
	}
	/* Outstanding operations never exceed the queue depths, so these sizes cannot overrun. */
	cq_attr.size = info->tx_attr->size > 256 ? info->tx_attr->size : 256;
	ret = fi_cq_open(ft->domain, &cq_attr, &ft->txcq, NULL);
	if (ret) {
		COUR_FT_FIERR("fi_cq_open(tx)", ret);
		return ret;
	}
	cq_attr.size = info->rx_attr->size > 256 ? info->rx_attr->size : 256;
	ret = fi_cq_open(ft->domain, &cq_attr, &ft->rxcq, NULL);
	if (ret) {
		COUR_FT_FIERR("fi_cq_open(rx)", ret);
		return ret;
	}
	ret = fi_av_open(ft->domain, &av_attr, &ft->av, NULL);
	if (ret) {
		COUR_FT_FIERR("fi_av_open", ret);
		return ret;
	}
	ret = fi_endpoint(ft->domain, info, &ft->ep, NULL);
	if (ret) {
		COUR_FT_FIERR("fi_endpoint", ret);
		return ret;
	}
	ret = fi_ep_bind(ft->ep, &ft->av->fid, 0);
	if (ret) {
		COUR_FT_FIERR("fi_ep_bind(av)", ret);
		return ret;
	}
	ret = fi_ep_bind(ft->ep, &ft->txcq->fid, FI_TRANSMIT);
	if (ret) {
		COUR_FT_FIERR("fi_ep_bind(tx cq)", ret);
		return ret;
	}
	ret = fi_ep_bind(ft->ep, &ft->rxcq->fid, FI_RECV);
	if (ret) {
		COUR_FT_FIERR("fi_ep_bind(rx cq)", ret);
		return ret;
	}
	ret = cour_ft_ep_setopts(ft, ft->ep);
	if (ret)
		return ret;
	ret = fi_enable(ft->ep);
	if (ret) {
		COUR_FT_FIERR("fi_enable", ret);
		return ret;
	}
	ft->fabric_up = true;
	return 0;
}

int cour_ft_ep_setopts(struct cour_ft *ft, struct fid_ep *ep)
{
	bool permitted = false;
	int ret;

	if (!ft->opts.no_shm)
		return 0;
	ret = fi_setopt(&ep->fid, FI_OPT_ENDPOINT, FI_COURIER_OPT_SHARED_MEMORY_PERMITTED,
			&permitted, sizeof(permitted));
	if (ret)
		COUR_FT_FIERR("fi_setopt(FI_OPT_SHARED_MEMORY_PERMITTED, false)", ret);
	return ret;
}

static int cour_ft_send_blob(struct cour_ft *ft, const void *blob, size_t len)
{
	uint32_t be_len = htonl((uint32_t)len);
	int ret;

	ret = cour_ft_oob_send(ft, &be_len, sizeof(be_len));
	return ret ? ret : cour_ft_oob_send(ft, blob, len);
}

static int cour_ft_recv_blob(struct cour_ft *ft, void *blob, size_t max, size_t *len)
{
	uint32_t be_len;
	int ret;

	ret = cour_ft_oob_recv(ft, &be_len, sizeof(be_len));
	if (ret)
		return ret;
	if (ntohl(be_len) > max) {
		COUR_FT_ERR("the peer sent a %u-byte blob, we take at most %zu", ntohl(be_len), max);
		return -FI_EOTHER;
	}
	*len = ntohl(be_len);
	return cour_ft_oob_recv(ft, blob, *len);
}

/* Swap provider names (both must have picked the same) and endpoint names, then insert. */
static int cour_ft_exchange_names(struct cour_ft *ft)
{
	char name[COUR_FT_MAX_NAME], peer_name[COUR_FT_MAX_NAME];
	char peer_prov[256];
	const char *prov = ft->info->fabric_attr->prov_name;
	size_t name_len = sizeof(name), peer_len, prov_len;
	int ret;

	ret = fi_getname(&ft->ep->fid, name, &name_len);
	if (ret) {
		COUR_FT_FIERR("fi_getname", ret);
		return ret;
	}
	ret = cour_ft_send_blob(ft, prov, strlen(prov) + 1);
	if (!ret)
		ret = cour_ft_send_blob(ft, name, name_len);
	if (!ret)
		ret = cour_ft_recv_blob(ft, peer_prov, sizeof(peer_prov), &prov_len);
	if (!ret)
		ret = cour_ft_recv_blob(ft, peer_name, sizeof(peer_name), &peer_len);
	if (ret)
		return ret;
	if (!prov_len || peer_prov[prov_len - 1] != '\0' || strcmp(peer_prov, prov)) {
		COUR_FT_ERR("provider mismatch: we use %s, the peer uses %.*s", prov,
			    (int)prov_len, peer_prov);
		return -FI_EINVAL;
	}
	ret = fi_av_insert(ft->av, peer_name, 1, &ft->peer, 0, NULL);
	if (ret != 1) {
		COUR_FT_FIERR("fi_av_insert", ret < 0 ? ret : -FI_EINVAL);
		return ret < 0 ? ret : -FI_EINVAL;
	}
	return 0;
}

int cour_ft_start(struct cour_ft *ft, const struct cour_ft_opts *opts)
{
	int ret;

	memset(ft, 0, sizeof(*ft));
	ft->opts = *opts;
	ft->is_server = opts->dst_host == NULL;
	ft->listen_fd = -1;
	ft->oob_fd = -1;
	ft->peer = FI_ADDR_UNSPEC;
	ft->next_mr_key = 1;
	ft->deadline_ns = cour_ft_now_ns() + (uint64_t)opts->timeout_s * 1000000000ULL;
	signal(SIGALRM, cour_ft_hard_timeout);
	alarm((unsigned)opts->timeout_s + COUR_FT_HARD_GRACE_S);

	ret = cour_ft_oob_connect(ft);
	if (!ret)
		ret = cour_ft_sync_opts(ft);
	if (!ret && ft->opts.finalize)
		ft->opts.finalize(&ft->opts);
	if (!ret)
		ret = cour_ft_getinfo(ft);
	if (!ret)
		ret = cour_ft_open_fabric(ft);
	if (!ret)
		ret = cour_ft_exchange_names(ft);
	if (!ret)
		ret = cour_ft_barrier(ft);
	return ret;
}

int cour_ft_finish(struct cour_ft *ft)
{
	int ret;

	ret = cour_ft_wait_all(ft);
	return ret ? ret : cour_ft_barrier(ft);
}

static void cour_ft_close_fid(struct fid *fid, const char *what)
{
	int ret;

	if (!fid)
		return;
	ret = fi_close(fid);
	if (ret)
		fprintf(stderr, "cour_ft: fi_close(%s) failed: %d (%s)\n", what, ret,
			fi_strerror(-ret));
}

void cour_ft_close_ep(struct cour_ft *ft)
{
	/* an FI_MR_ENDPOINT region still bound keeps it open (-FI_EBUSY): cour_ft_close then */
	if (ft->ep && fi_close(&ft->ep->fid) == 0)
		ft->ep = NULL;
}

void cour_ft_close(struct cour_ft *ft)
{
	ft->fabric_up = false;
	cour_ft_close_fid(ft->ep ? &ft->ep->fid : NULL, "ep");
	cour_ft_close_fid(ft->av ? &ft->av->fid : NULL, "av");
	cour_ft_close_fid(ft->rxcq ? &ft->rxcq->fid : NULL, "rx cq");
	cour_ft_close_fid(ft->txcq ? &ft->txcq->fid : NULL, "tx cq");
	cour_ft_close_fid(ft->domain ? &ft->domain->fid : NULL, "domain");
	cour_ft_close_fid(ft->fabric ? &ft->fabric->fid : NULL, "fabric");
	ft->ep = NULL;
	ft->av = NULL;
	ft->rxcq = ft->txcq = NULL;
	ft->domain = NULL;
	ft->fabric = NULL;
	if (ft->info)
		fi_freeinfo(ft->info);
	if (ft->hints)
		fi_freeinfo(ft->hints);
	ft->info = ft->hints = NULL;
	cour_ft_oob_close(ft);
	alarm(0);
}

void cour_ft_print_header(const struct cour_ft *ft, const char *bench)
{
	const struct fi_info *info = ft->info;

	printf("# %s (%s)  provider: %s  ep_type: %s  fabric: %s  domain: %s\n", bench,
	       ft->is_server ? "server" : "client", info->fabric_attr->prov_name,
	       info->ep_attr->type == FI_EP_DGRAM ? "dgram" : "rdm", info->fabric_attr->name,
	       info->domain_attr->name);
	printf("# %s  mr_mode: 0x%x  progress: %s  max_msg_size: %zu  inject_size: %zu\n",
	       ft->opts.tagged ? "tagged" : "msg", info->domain_attr->mr_mode,
	       info->domain_attr->data_progress == FI_PROGRESS_AUTO ? "auto" : "manual",
	       info->ep_attr->max_msg_size, info->tx_attr->inject_size);
	fflush(stdout);
}

/* ---- buffers ---- */

int cour_ft_buf_alloc(struct cour_ft *ft, size_t len, struct cour_ft_buf *buf)
{
	uint64_t mr_mode = ft->info->domain_attr->mr_mode;
	size_t alloc = len ? len : 1;
	struct fid_mr *mr = NULL;
	void *base;
	int ret;

	ret = posix_memalign(&base, COUR_FT_ALIGN, alloc);
	if (ret) {
		COUR_FT_ERR("posix_memalign(%zu): out of memory", alloc);
		return -FI_ENOMEM;
	}
	memset(base, 0, alloc);
	if (mr_mode & FI_MR_LOCAL) {
		ret = fi_mr_reg(ft->domain, base, alloc, FI_SEND | FI_RECV, 0,
				ft->next_mr_key++, 0, &mr, NULL);
		if (ret) {
			COUR_FT_FIERR("fi_mr_reg", ret);
			goto free_mem;
		}
		if (mr_mode & FI_MR_ENDPOINT) {
			ret = fi_mr_bind(mr, &ft->ep->fid, 0);
			if (ret) {
				COUR_FT_FIERR("fi_mr_bind", ret);
				goto close_mr;
			}
			ret = fi_mr_enable(mr);
			if (ret) {
				COUR_FT_FIERR("fi_mr_enable", ret);
				goto close_mr;
			}
		}
	}
	buf->base = base;
	buf->len = len;
	buf->mr = mr;
	buf->desc = mr ? fi_mr_desc(mr) : NULL;
	return 0;

close_mr:
	fi_close(&mr->fid);
free_mem:
	free(base);
	return ret;
}

void cour_ft_buf_free(struct cour_ft_buf *buf)
{
	if (buf->mr)
		cour_ft_close_fid(&buf->mr->fid, "mr");
	free(buf->base);
	memset(buf, 0, sizeof(*buf));
}

/* ---- completions ---- */

static int cour_ft_read_err(struct cour_ft *ft, struct fid_cq *cq, const char *which)
{
	struct fi_cq_err_entry err = { 0 };
	char pbuf[256];
	const char *pstr;
	ssize_t ret;

	ret = fi_cq_readerr(cq, &err, 0);
	if (ret < 0) {
		COUR_FT_FIERR("fi_cq_readerr", ret);
		return (int)ret;
	}
	if (ret == 0)
		return 0;
	if (ft->err_cb) {
		ret = ft->err_cb(ft, cq, &err);
		if (ret == 0) {
			if (cq == ft->txcq)
				ft->tx_done++;
			else
				ft->rx_done++;
			return 0;
		}
	}
	pstr = fi_cq_strerror(cq, err.prov_errno, err.err_data, pbuf, sizeof(pbuf));
	fprintf(stderr, "cour_ft: %s completion error: %d (%s), provider: %d (%s), "
		"len %zu, olen %zu, tag 0x%llx\n", which, err.err, fi_strerror(err.err),
		err.prov_errno, pstr ? pstr : "?", err.len, err.olen,
		(unsigned long long)err.tag);
	return err.err ? -err.err : -FI_EOTHER;
}

static int cour_ft_read_cq(struct cour_ft *ft, struct fid_cq *cq, uint64_t *done,
			   cour_ft_comp_cb cb, const char *which)
{
	struct fi_cq_tagged_entry comp[COUR_FT_CQ_BATCH];
	ssize_t ret;
	ssize_t i;

	ret = fi_cq_read(cq, comp, COUR_FT_CQ_BATCH);
	if (ret > 0) {
		*done += (uint64_t)ret;
		if (cb)
			for (i = 0; i < ret; i++)
				cb(ft, &comp[i]);
		return 0;
	}
	if (ret == -FI_EAGAIN || ret == 0)
		return 0;
	if (ret == -FI_EAVAIL)
		return cour_ft_read_err(ft, cq, which);
	fprintf(stderr, "cour_ft: fi_cq_read(%s) failed: %zd (%s)\n", which, ret,
		fi_strerror((int)-ret));
	return (int)ret;
}

int cour_ft_progress(struct cour_ft *ft)
{
	int ret;

	ret = cour_ft_read_cq(ft, ft->txcq, &ft->tx_done, ft->tx_cb, "tx");
	if (!ret)
		ret = cour_ft_read_cq(ft, ft->rxcq, &ft->rx_done, ft->rx_cb, "rx");
	return ret;
}

/* Between spins: the deadline, and every 100 ms whether the peer is still there. */
static int cour_ft_spin_check(struct cour_ft *ft, const char *what)
{
	uint64_t now = cour_ft_now_ns();
	int ret;

	if (now < ft->next_peer_check_ns)
		return 0;
	ft->next_peer_check_ns = now + COUR_FT_PEER_CHECK_NS;
	ret = cour_ft_check_deadline(ft, what);
	if (!ret && ft->oob_fd >= 0)
		ret = cour_ft_oob_check_peer(ft);
	return ret;
}

static int cour_ft_wait(struct cour_ft *ft, const uint64_t *done, uint64_t target,
			const char *what)
{
	unsigned int spins = 0;
	int ret;

	while (*done < target) {
		ret = cour_ft_progress(ft);
		if (ret)
			return ret;
		/* reading the clock every spin would cost more than an empty fi_cq_read */
		if ((++spins & 63) == 0) {
			ret = cour_ft_spin_check(ft, what);
			if (ret)
				return ret;
		}
	}
	return 0;
}

int cour_ft_wait_tx(struct cour_ft *ft, uint64_t target)
{
	return cour_ft_wait(ft, &ft->tx_done, target, "send completions");
}

int cour_ft_wait_rx(struct cour_ft *ft, uint64_t target)
{
	return cour_ft_wait(ft, &ft->rx_done, target, "receive completions");
}

int cour_ft_wait_all(struct cour_ft *ft)
{
	int ret;

	ret = cour_ft_wait_tx(ft, ft->tx_posted);
	return ret ? ret : cour_ft_wait_rx(ft, ft->rx_posted);
}

/* ---- posting ---- */

int cour_ft_post_send(struct cour_ft *ft, const void *buf, size_t len, void *desc,
		      uint64_t tag, struct fi_context2 *ctx)
{
	unsigned int spins = 0;
	ssize_t ret;

	for (;;) {
		if (ft->opts.tagged)
			ret = fi_tsend(ft->ep, buf, len, desc, ft->peer, tag, ctx);
		else
			ret = fi_send(ft->ep, buf, len, desc, ft->peer, ctx);
		if (ret == 0) {
			ft->tx_posted++;
			return 0;
		}
		if (ret != -FI_EAGAIN) {
			COUR_FT_FIERR(ft->opts.tagged ? "fi_tsend" : "fi_send", ret);
			return (int)ret;
		}
		ret = cour_ft_progress(ft);
		if (!ret && (++spins & 63) == 0)
			ret = cour_ft_spin_check(ft, "room to send");
		if (ret)
			return (int)ret;
	}
}

int cour_ft_post_recv(struct cour_ft *ft, void *buf, size_t len, void *desc,
		      uint64_t tag, struct fi_context2 *ctx)
{
	unsigned int spins = 0;
	ssize_t ret;

	for (;;) {
		if (ft->opts.tagged)
			ret = fi_trecv(ft->ep, buf, len, desc, ft->peer, tag, 0, ctx);
		else
			ret = fi_recv(ft->ep, buf, len, desc, ft->peer, ctx);
		if (ret == 0) {
			ft->rx_posted++;
			return 0;
		}
		if (ret != -FI_EAGAIN) {
			COUR_FT_FIERR(ft->opts.tagged ? "fi_trecv" : "fi_recv", ret);
			return (int)ret;
		}
		ret = cour_ft_progress(ft);
		if (!ret && (++spins & 63) == 0)
			ret = cour_ft_spin_check(ft, "room to post a receive");
		if (ret)
			return (int)ret;
	}
}

/* ---- data pattern ---- */

static inline uint32_t cour_ft_pattern_word(uint64_t seq, size_t word)
{
	uint64_t x = (seq + 1) * 0x9e3779b97f4a7c15ULL ^ (uint64_t)word * 0xbf58476d1ce4e5b9ULL;

	x ^= x >> 31;
	x *= 0x94d049bb133111ebULL;
	return (uint32_t)(x >> 29);
}

uint8_t cour_ft_pattern_byte(uint64_t seq, size_t off)
{
	return (uint8_t)(cour_ft_pattern_word(seq, off / 4) >> (8 * (off % 4)));
}

void cour_ft_fill(void *buf, size_t len, uint64_t seq)
{
	uint8_t *p = buf;
	size_t off;

	for (off = 0; off + 4 <= len; off += 4) {
		uint32_t w = cour_ft_pattern_word(seq, off / 4);

		p[off] = (uint8_t)w;
		p[off + 1] = (uint8_t)(w >> 8);
		p[off + 2] = (uint8_t)(w >> 16);
		p[off + 3] = (uint8_t)(w >> 24);
	}
	for (; off < len; off++)
		p[off] = cour_ft_pattern_byte(seq, off);
}

int cour_ft_check(const void *buf, size_t len, uint64_t seq, size_t *bad_off)
{
	const uint8_t *p = buf;
	size_t off;

	for (off = 0; off < len; off++) {
		if ((off % 4) == 0 && off + 4 <= len) {
			uint32_t w = cour_ft_pattern_word(seq, off / 4);

			if (p[off] == (uint8_t)w && p[off + 1] == (uint8_t)(w >> 8) &&
			    p[off + 2] == (uint8_t)(w >> 16) && p[off + 3] == (uint8_t)(w >> 24)) {
				off += 3;
				continue;
			}
		}
		if (p[off] != cour_ft_pattern_byte(seq, off)) {
			*bad_off = off;
			return -FI_EIO;
		}
	}
	return 0;
}

const char *cour_ft_size_str(size_t size, char *out, size_t outlen)
{
	if (size >= (1 << 20) && size % (1 << 20) == 0)
		snprintf(out, outlen, "%zum", size >> 20);
	else if (size >= (1 << 10) && size % (1 << 10) == 0)
		snprintf(out, outlen, "%zuk", size >> 10);
	else
		snprintf(out, outlen, "%zu", size);
	return out;
}
