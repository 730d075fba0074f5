/*
 * alltoall_mixed: all-to-all among the endpoints of N processes, some of which share a host
 * (and a network namespace) while others do not: a provider with a shared-memory path must
 * use it for the first kind and the network for the second, inside one endpoint and one AV.
 *
 *   alltoall_mixed -r RANK -N NPROCS -d DIR [-E EPS] [-a ADDR] [-x on|off|any] [-p prov] [-T s]
 *
 * Every process opens EPS endpoints (default 11) bound to ADDR (fi_getinfo with FI_SOURCE),
 * all sharing one AV and one pair of CQs. There is no oob socket: the processes meet in DIR,
 * a directory they all see (test_shm_mixed.sh runs them in different network namespaces,
 * which share the file system). Each writes DIR/rank.RANK (its network namespace's inode and
 * its endpoints' names; written to a temporary name, then renamed, so a reader never sees
 * half a file), waits for all the others and inserts every endpoint in global order (rank 0's
 * first). Barriers are files too (DIR/<what>.RANK), waited for while driving progress.
 *
 * Then, twice, every endpoint sends one tagged message to every other endpoint, in its own
 * process and in the others. The first round is every pair's first contact (a provider may
 * still be finding out which path to take); the second starts once everybody has finished
 * the first, so the paths are settled. The pair (i, j) names the size (1 B .. 256 KiB:
 * inline, fragmented, eager, rendezvous and single copy, on both sides of 32, 64 and
 * 256 KiB), the tag (round and i) and the content (a pattern seeded with round, i and j); each message must arrive
 * exactly once, at its receive, with its length, its bytes, and the 64 guard bytes after it
 * untouched.
 *
 * Finally, over courier, each endpoint's statistics (fi_open_ops FI_COURIER_EP_OPS) must show
 * the paths taken. With -x on (the default), per endpoint:
 *   shm_peers == the other endpoints of its network namespace (its own process's and the
 *                co-located processes'; endpoints in another namespace are never mapped);
 *   shm_rx_pkts >= the second round's messages from its namespace (one ring packet each);
 *   shm_single_copy_bytes >= the bytes of the second round's messages of 256 KiB and more
 *                from its namespace (single copy: the receiver, or both sides, copy them);
 *   rx_pkts - shm_rx_pkts >= the messages from other namespaces (both rounds: one network
 *                packet each, at least).
 * -x off (FI_COURIER_SHM=0): no shared memory at all, and the network packets as above.
 * -x any: no check.
 */
#define _GNU_SOURCE

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ft_func.h"

#define MX_MAX_LOCAL	32
#define MX_MAX_TOTAL	128
#define MX_GUARD	64
#define MX_GUARD_BYTE	0xee
#define MX_ROUNDS	2
#define MX_SEQ(rd, i, j) (((uint64_t)(rd) * MX_MAX_TOTAL + (i)) * MX_MAX_TOTAL + (j))
#define MX_TAG(rd, i)	(((uint64_t)(rd) << 32) | (uint64_t)(i))
#define MX_BIG		262144	/* courier's messages by single copy to same-host peers */
#define MX_HARD_GRACE_S	5

/* Where providers switch paths: ring cells, packets, eager/rendezvous (64 KiB), single copy
 * (256 KiB, and its shared form for a contiguous receive). */
static const size_t mx_sizes[] = {
	1, 8, 100, 1400, 4097, 16384, 32767, 32768, 65537, 131075, 262147,
};
#define MX_SIZE(i, j)	mx_sizes[((size_t)(i) * 3 + (j)) % COUR_FT_ARRAY_SIZE(mx_sizes)]

enum mx_expect { MX_SHM_ON, MX_SHM_OFF, MX_SHM_ANY };

struct mx {
	struct func f;
	int rank, nprocs, nlocal;
	const char *dir, *addr;
	enum mx_expect expect;

	int total, first;			/* endpoints in all, global index of our first */
	int rank_of[MX_MAX_TOTAL];
	uint64_t netns_of[MX_MAX_TOTAL];
	uint64_t netns;
	fi_addr_t fi_addr[MX_MAX_TOTAL];
	struct fid_ep *ep[MX_MAX_LOCAL];

	struct cour_ft_buf buf;
	size_t roff[MX_MAX_LOCAL][MX_MAX_TOTAL], soff[MX_MAX_LOCAL][MX_MAX_TOTAL];
	struct fi_context2 rctx[MX_MAX_LOCAL][MX_MAX_TOTAL], sctx[MX_MAX_LOCAL][MX_MAX_TOTAL];
	bool seen[MX_MAX_LOCAL][MX_MAX_TOTAL];
	/* per local endpoint, what it received: from other network namespaces (both rounds),
	 * from its own namespace in the second round (paths settled), and of those the bytes
	 * of rendezvous-sized messages */
	uint64_t remote_msgs[MX_MAX_LOCAL], settled_msgs[MX_MAX_LOCAL];
	uint64_t settled_big[MX_MAX_LOCAL];
	uint64_t msgs, bytes;
};

static void mx_hard_timeout(int sig)
{
	static const char msg[] = "alltoall_mixed: hard timeout: a call blocked past the deadline\n";
	ssize_t ret;

	(void)sig;
	ret = write(STDERR_FILENO, msg, sizeof(msg) - 1);
	(void)ret;
	_exit(3);
}

static int mx_opt(int opt, const char *arg, void *ctx)
{
	struct mx *m = ctx;
	char *end;
	long v;

	switch (opt) {
	case 'r': case 'N': case 'E':
		v = strtol(arg, &end, 0);
		if (*end || end == arg || v < 0 || v > MX_MAX_LOCAL)
			return 1;
		if (opt == 'r')
			m->rank = (int)v;
		else if (opt == 'N')
			m->nprocs = (int)v;
		else
			m->nlocal = (int)v;
		return 0;
	case 'd':
		m->dir = arg;
		return 0;
	case 'a':
		m->addr = arg;
		return 0;
	case 'x':
		if (!strcmp(arg, "on"))
			m->expect = MX_SHM_ON;
		else if (!strcmp(arg, "off"))
			m->expect = MX_SHM_OFF;
		else if (!strcmp(arg, "any"))
			m->expect = MX_SHM_ANY;
		else
			return 1;
		return 0;
	default:
		return 1;
	}
}

static const char mx_usage[] =
	"alltoall_mixed: one process of an all-to-all among N processes (no server or client;\n"
	"-p and -T of the common options apply):\n"
	"  -r <rank>     this process's rank, 0 .. N-1\n"
	"  -N <count>    processes in the job\n"
	"  -d <dir>      a fresh directory all processes see: names and barriers meet there\n"
	"  -E <count>    endpoints in this process (default 11, at most 32; 128 in all)\n"
	"  -a <addr>     local address the endpoints bind to (default: the provider's)\n"
	"  -x on|off|any courier: require the shared-memory path between endpoints of one\n"
	"                network namespace (default), its absence, or check nothing\n";

static int mx_getinfo(struct mx *m)
{
	struct func *f = &m->f;
	struct cour_ft *ft = &f->ft;
	struct fi_info *list, *pick;
	int ret;

	ft->hints = fi_allocinfo();
	FUNC_ASSERT(f, ft->hints, "fi_allocinfo: out of memory");
	ft->hints->caps = FI_MSG | FI_TAGGED;
	ft->hints->ep_attr->type = FI_EP_RDM;
	ft->hints->mode = FI_CONTEXT | FI_CONTEXT2;
	ft->hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
					  FI_MR_PROV_KEY;
	if (ft->opts.prov_name) {
		ft->hints->fabric_attr->prov_name = strdup(ft->opts.prov_name);
		FUNC_ASSERT(f, ft->hints->fabric_attr->prov_name, "strdup: out of memory");
	}
	ret = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), m->addr, NULL,
			 m->addr ? FI_SOURCE : 0, ft->hints, &list);
	if (ret) {
		fprintf(stderr, "cour_ft: fi_getinfo(provider %s, address %s) failed: %d (%s)\n",
			ft->opts.prov_name ? ft->opts.prov_name : "any",
			m->addr ? m->addr : "default", ret, fi_strerror(-ret));
		return ret;
	}
	/* "-p courier" means courier itself, not a utility provider layered over it */
	for (pick = list; pick; pick = pick->next)
		if (!ft->opts.prov_name ||
		    !strcmp(pick->fabric_attr->prov_name, ft->opts.prov_name))
			break;
	if (!pick) {
		fprintf(stderr, "alltoall_mixed: fi_getinfo offered only layered providers over "
			"%s (set FI_PROVIDER=^ofi_rxd,ofi_rxm)\n", ft->opts.prov_name);
		fi_freeinfo(list);
		return -FI_ENODATA;
	}
	ft->info = fi_dupinfo(pick);
	fi_freeinfo(list);
	FUNC_ASSERT(f, ft->info, "fi_dupinfo: out of memory");
	return 0;
}

static int mx_open(struct mx *m)
{
	struct func *f = &m->f;
	struct cour_ft *ft = &f->ft;
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE, .count = MX_MAX_TOTAL };
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED };
	int l;

	cq_attr.size = (size_t)m->nlocal * MX_MAX_TOTAL;
	FUNC_CALL(f, fi_fabric(ft->info->fabric_attr, &ft->fabric, NULL));
	FUNC_CALL(f, fi_domain(ft->fabric, ft->info, &ft->domain, NULL));
	FUNC_CALL(f, fi_av_open(ft->domain, &av_attr, &ft->av, NULL));
	FUNC_CALL(f, fi_cq_open(ft->domain, &cq_attr, &ft->txcq, NULL));
	FUNC_CALL(f, fi_cq_open(ft->domain, &cq_attr, &ft->rxcq, NULL));
	for (l = 0; l < m->nlocal; l++) {
		FUNC_CALL(f, fi_endpoint(ft->domain, ft->info, &m->ep[l], NULL));
		FUNC_CALL(f, fi_ep_bind(m->ep[l], &ft->av->fid, 0));
		FUNC_CALL(f, fi_ep_bind(m->ep[l], &ft->txcq->fid, FI_TRANSMIT));
		FUNC_CALL(f, fi_ep_bind(m->ep[l], &ft->rxcq->fid, FI_RECV));
		FUNC_CALL(f, fi_enable(m->ep[l]));
	}
	return 0;
}

/* Drive the endpoints without taking a completion: peers may need our ACKs while we wait. */
static void mx_progress(struct mx *m)
{
	struct fi_cq_tagged_entry e;

	(void)fi_cq_read(m->f.ft.txcq, &e, 0);
	(void)fi_cq_read(m->f.ft.rxcq, &e, 0);
}

/* Wait until DIR/<what>.<r> exists for every rank, progressing, bounded by the deadline. */
static int mx_wait_files(struct mx *m, const char *what)
{
	struct timespec nap = { 0, 500000 };
	char path[4096];
	struct stat st;
	int r = 0;

	while (r < m->nprocs) {
		snprintf(path, sizeof(path), "%s/%s.%d", m->dir, what, r);
		if (stat(path, &st) == 0) {
			r++;
			continue;
		}
		FUNC_ASSERT(&m->f, errno == ENOENT, "stat(%s): %s", path, strerror(errno));
		if (m->f.ft.txcq)
			mx_progress(m);
		nanosleep(&nap, NULL);
		FUNC_CALL(&m->f, cour_ft_check_deadline(&m->f.ft, path));
	}
	return 0;
}

static int mx_barrier(struct mx *m, const char *what)
{
	char path[4096];
	FILE *fp;

	snprintf(path, sizeof(path), "%s/%s.%d", m->dir, what, m->rank);
	fp = fopen(path, "w");
	FUNC_ASSERT(&m->f, fp, "fopen(%s): %s", path, strerror(errno));
	fclose(fp);
	return mx_wait_files(m, what);
}

static int mx_publish(struct mx *m)
{
	struct func *f = &m->f;
	char name[COUR_FT_MAX_NAME], tmp[4096], path[4096];
	struct stat st;
	size_t len, k;
	FILE *fp;
	int l;

	FUNC_ASSERT(f, stat("/proc/self/ns/net", &st) == 0, "stat(/proc/self/ns/net): %s",
		    strerror(errno));
	m->netns = (uint64_t)st.st_ino;
	snprintf(tmp, sizeof(tmp), "%s/.rank.%d.tmp", m->dir, m->rank);
	snprintf(path, sizeof(path), "%s/rank.%d", m->dir, m->rank);
	fp = fopen(tmp, "w");
	FUNC_ASSERT(f, fp, "fopen(%s): %s", tmp, strerror(errno));
	fprintf(fp, "netns %llu\ncount %d\n", (unsigned long long)m->netns, m->nlocal);
	for (l = 0; l < m->nlocal; l++) {
		len = sizeof(name);
		FUNC_CALL(f, fi_getname(&m->ep[l]->fid, name, &len));
		fprintf(fp, "name %zu ", len);
		for (k = 0; k < len; k++)
			fprintf(fp, "%02x", (unsigned char)name[k]);
		fputc('\n', fp);
	}
	fprintf(fp, "end\n");
	FUNC_ASSERT(f, fclose(fp) == 0, "writing %s: %s", tmp, strerror(errno));
	FUNC_ASSERT(f, rename(tmp, path) == 0, "rename(%s): %s", path, strerror(errno));
	return 0;
}

/*
 * Read rank r's file and insert its endpoints, which get the next global indices. The file
 * is whole or absent (it was renamed into place), so one pass can insert as it parses.
 */
static int mx_read_rank(struct mx *m, int r)
{
	struct func *f = &m->f;
	char path[4096], name[COUR_FT_MAX_NAME], end[8] = "";
	unsigned long long netns = 0;
	unsigned int byte;
	size_t len, k;
	int count = 0, l, g, ret;
	FILE *fp;

	snprintf(path, sizeof(path), "%s/rank.%d", m->dir, r);
	fp = fopen(path, "r");
	FUNC_ASSERT(f, fp, "fopen(%s): %s", path, strerror(errno));
	ret = fscanf(fp, "netns %llu count %d", &netns, &count) == 2 && count > 0 &&
	      count <= MX_MAX_LOCAL && m->total + count <= MX_MAX_TOTAL ? 0 : -FI_EINVAL;
	for (l = 0; !ret && l < count; l++) {
		ret = fscanf(fp, " name %zu ", &len) == 1 && len <= sizeof(name) ? 0 : -FI_EINVAL;
		for (k = 0; !ret && k < len; k++) {
			ret = fscanf(fp, "%2x", &byte) == 1 ? 0 : -FI_EINVAL;
			name[k] = (char)byte;
		}
		if (ret)
			break;
		g = m->total++;
		m->rank_of[g] = r;
		m->netns_of[g] = netns;
		if (fi_av_insert(f->ft.av, name, 1, &m->fi_addr[g], 0, NULL) != 1)
			ret = -FI_EADDRNOTAVAIL;
	}
	if (!ret)
		ret = fscanf(fp, " %7s", end) == 1 && !strcmp(end, "end") ? 0 : -FI_EINVAL;
	fclose(fp);
	FUNC_ASSERT(f, !ret, "%s: malformed, or fi_av_insert failed (%d)", path, ret);
	return 0;
}

static int mx_exchange(struct mx *m)
{
	int r;

	FUNC_CALL(&m->f, mx_publish(m));
	FUNC_CALL(&m->f, mx_wait_files(m, "rank"));
	for (r = 0; r < m->nprocs; r++) {
		if (r == m->rank)
			m->first = m->total;
		FUNC_CALL(&m->f, mx_read_rank(m, r));
	}
	return 0;
}

/* Lay out one receive slot (size plus guard) and one send slot per pair, then allocate. */
static int mx_alloc(struct mx *m)
{
	size_t off = 0;
	int l, g, i;

	for (l = 0; l < m->nlocal; l++)
		for (g = 0; g < m->total; g++) {
			i = m->first + l;
			m->roff[l][g] = off;
			off += (MX_SIZE(g, i) + MX_GUARD + 63) & ~(size_t)63;
			m->soff[l][g] = off;
			off += (MX_SIZE(i, g) + 63) & ~(size_t)63;
		}
	return cour_ft_buf_alloc(&m->f.ft, off, &m->buf);
}

#define MX_POST(m, expr) func_post_ret(&(m)->f, #expr, ({ \
	ssize_t r_; unsigned int n_ = 0; \
	while ((r_ = (expr)) == -FI_EAGAIN) { \
		mx_progress(m); \
		if ((++n_ & 1023) == 0 && cour_ft_check_deadline(&(m)->f.ft, #expr)) break; \
	} r_; }))

/* One round: every endpoint sends one message to every other endpoint. */
static int mx_run(struct mx *m, int rd)
{
	struct func *f = &m->f;
	struct fi_cq_tagged_entry e;
	char *base = m->buf.base, *p;
	char what[32];
	int l, g, i, j, n = 0, k;
	size_t off, len;

	memset(m->seen, 0, sizeof(m->seen));
	for (l = 0; l < m->nlocal; l++)
		for (g = 0; g < m->total; g++) {
			if (g == m->first + l)
				continue;
			p = base + m->roff[l][g];
			len = MX_SIZE(g, m->first + l);
			memset(p, MX_GUARD_BYTE, len + MX_GUARD);
			FUNC_CALL(f, MX_POST(m, fi_trecv(m->ep[l], p, len + MX_GUARD, m->buf.desc,
							 FI_ADDR_UNSPEC, MX_TAG(rd, g), 0,
							 &m->rctx[l][g])));
		}
	/* the second round starts once everybody has finished the first */
	snprintf(what, sizeof(what), "posted%d", rd);
	FUNC_CALL(f, mx_barrier(m, what));
	for (l = 0; l < m->nlocal; l++)
		for (g = 0; g < m->total; g++) {
			i = m->first + l;
			if (g == i)
				continue;
			p = base + m->soff[l][g];
			cour_ft_fill(p, MX_SIZE(i, g), MX_SEQ(rd, i, g));
			FUNC_CALL(f, MX_POST(m, fi_tsend(m->ep[l], p, MX_SIZE(i, g), m->buf.desc,
							 m->fi_addr[g], MX_TAG(rd, i),
							 &m->sctx[l][g])));
			n++;
		}
	for (k = 0; k < n; k++) {
		FUNC_CALL(f, func_read_one(f, f->ft.txcq, &e, "alltoall_mixed completions"));
		off = (size_t)((struct fi_context2 *)e.op_context - &m->sctx[0][0]);
		FUNC_ASSERT(f, off < MX_MAX_LOCAL * MX_MAX_TOTAL, "send ctx %p", e.op_context);
	}
	for (k = 0; k < n; k++) {
		FUNC_CALL(f, func_read_one(f, f->ft.rxcq, &e, "alltoall_mixed completions"));
		off = (size_t)((struct fi_context2 *)e.op_context - &m->rctx[0][0]);
		FUNC_ASSERT(f, off < MX_MAX_LOCAL * MX_MAX_TOTAL, "receive ctx %p", e.op_context);
		l = (int)(off / MX_MAX_TOTAL);
		g = (int)(off % MX_MAX_TOTAL);	/* the sender this receive was for */
		j = m->first + l;
		FUNC_ASSERT(f, l < m->nlocal && g < m->total && g != j, "receive ctx %p",
			    e.op_context);
		FUNC_ASSERT(f, !m->seen[l][g], "endpoint %d: second message from %d", j, g);
		m->seen[l][g] = true;
		FUNC_ASSERT(f, e.tag == MX_TAG(rd, g), "endpoint %d: tag 0x%llx in the receive "
			    "for %d, round %d", j, (unsigned long long)e.tag, g, rd);
		len = MX_SIZE(g, j);
		FUNC_ASSERT(f, e.len == len, "endpoint %d from %d: %zu bytes, want %zu", j, g,
			    e.len, len);
		p = base + m->roff[l][g];
		FUNC_CALL(f, func_check_data(f, p, len, MX_SEQ(rd, g, j), "alltoall_mixed"));
		for (off = 0; off < MX_GUARD; off++)
			FUNC_ASSERT(f, (uint8_t)p[len + off] == MX_GUARD_BYTE,
				    "endpoint %d from %d: guard byte %zu after %zu bytes written", j,
				    g, off, len);
		if (m->netns_of[g] != m->netns) {
			m->remote_msgs[l]++;
		} else if (rd > 0) {
			m->settled_msgs[l]++;
			m->settled_big[l] += len >= MX_BIG ? len : 0;
		}
		m->msgs++;
		m->bytes += len;
	}
	return 0;
}

/* The paths courier took, from each endpoint's statistics (see the top of the file). */
static int mx_check_stats(struct mx *m)
{
	struct func *f = &m->f;
	struct fi_courier_stats st;
	int l, g, local = 0;
	uint64_t net;

	if (m->expect == MX_SHM_ANY || !func_is_courier(f))
		return 0;
	for (g = 0; g < m->total; g++)
		local += m->netns_of[g] == m->netns;
	for (l = 0; l < m->nlocal; l++) {
		FUNC_CALL(f, func_get_stats(m->ep[l], &st));
		net = st.rx_pkts - st.shm_rx_pkts;
		printf("alltoall_mixed: rank %d endpoint %d: shm_peers %llu (same namespace: %d) "
		       "shm_rx_pkts %llu (settled messages from the namespace: %llu) "
		       "shm_single_copy_bytes %llu (settled rendezvous bytes: %llu) "
		       "network rx_pkts %llu (messages from other namespaces: %llu)\n",
		       m->rank, m->first + l, (unsigned long long)st.shm_peers, local - 1,
		       (unsigned long long)st.shm_rx_pkts, (unsigned long long)m->settled_msgs[l],
		       (unsigned long long)st.shm_single_copy_bytes,
		       (unsigned long long)m->settled_big[l], (unsigned long long)net,
		       (unsigned long long)m->remote_msgs[l]);
		FUNC_ASSERT(f, st.rx_pkts >= st.shm_rx_pkts && net >= m->remote_msgs[l],
			    "endpoint %d: %llu packets off the network for %llu messages",
			    m->first + l, (unsigned long long)net,
			    (unsigned long long)m->remote_msgs[l]);
		if (m->expect == MX_SHM_OFF) {
			FUNC_ASSERT(f, !st.shm_peers && !st.shm_rx_pkts && !st.shm_tx_pkts &&
				    !st.shm_single_copy_bytes, "endpoint %d used shared memory",
				    m->first + l);
			continue;
		}
		FUNC_ASSERT(f, st.shm_peers == (uint64_t)(local - 1),
			    "endpoint %d: shm_peers %llu, want %d (the other endpoints of its "
			    "network namespace)", m->first + l, (unsigned long long)st.shm_peers,
			    local - 1);
		FUNC_ASSERT(f, st.shm_rx_pkts >= m->settled_msgs[l],
			    "endpoint %d: %llu packets through shared memory for %llu messages "
			    "from its namespace once the paths were set up", m->first + l,
			    (unsigned long long)st.shm_rx_pkts,
			    (unsigned long long)m->settled_msgs[l]);
		FUNC_ASSERT(f, st.shm_single_copy_bytes >= m->settled_big[l],
			    "endpoint %d: %llu bytes by single copy, less than the %llu bytes of "
			    "rendezvous messages from its namespace once the paths were set up",
			    m->first + l, (unsigned long long)st.shm_single_copy_bytes,
			    (unsigned long long)m->settled_big[l]);
	}
	return 0;
}

int main(int argc, char **argv)
{
	static struct mx m;
	struct func *f = &m.f;
	struct cour_ft_opts opts;
	int ret, l, rd;

	f->prog = "alltoall_mixed";
	f->ft.listen_fd = f->ft.oob_fd = -1;
	f->ft.next_mr_key = 1;
	m.rank = -1;
	m.nlocal = 11;
	cour_ft_opts_init(&opts);
	opts.test_name = f->prog;
	opts.timeout_s = 30;
	ret = cour_ft_parse_opts(&opts, argc, argv, "r:N:E:d:a:x:", mx_opt, &m, mx_usage);
	if (ret)
		return ret > 0 ? 0 : 2;
	if (opts.dst_host || !m.dir || m.nprocs < 1 || m.rank < 0 || m.rank >= m.nprocs ||
	    m.nlocal < 1) {
		fprintf(stderr, "alltoall_mixed: need -r RANK -N NPROCS -d DIR, no host\n%s",
			mx_usage);
		return 2;
	}
	f->ft.opts = opts;
	f->ft.deadline_ns = cour_ft_now_ns() + (uint64_t)opts.timeout_s * 1000000000ULL;
	signal(SIGALRM, mx_hard_timeout);
	alarm((unsigned)opts.timeout_s + MX_HARD_GRACE_S);

	ret = mx_getinfo(&m);
	if (!ret)
		ret = mx_open(&m);
	if (!ret)
		ret = mx_exchange(&m);
	if (!ret)
		ret = mx_alloc(&m);
	for (rd = 0; !ret && rd < MX_ROUNDS; rd++)
		ret = mx_run(&m, rd);
	if (!ret)
		printf("alltoall_mixed: rank %d: %llu messages received and verified (%llu bytes) "
		       "by endpoints %d..%d of %d, in %d rounds\n", m.rank,
		       (unsigned long long)m.msgs, (unsigned long long)m.bytes, m.first,
		       m.first + m.nlocal - 1, m.total, MX_ROUNDS);
	/* every send completed everywhere before anyone closes: late ACKs still flow */
	if (!ret)
		ret = mx_barrier(&m, "done");
	if (!ret)
		ret = mx_check_stats(&m);
	for (l = 0; l < m.nlocal; l++)
		if (m.ep[l])
			fi_close(&m.ep[l]->fid);
	cour_ft_close_ep(&f->ft);
	cour_ft_buf_free(&m.buf);
	cour_ft_close(&f->ft);
	if (ret || f->failures) {
		fprintf(stderr, "alltoall_mixed: rank %d: FAIL (%d)\n", m.rank, ret);
		return 1;
	}
	printf("alltoall_mixed: rank %d: PASS\n", m.rank);
	return 0;
}
