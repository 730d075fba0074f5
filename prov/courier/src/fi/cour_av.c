/*
 * Address vectors (fi_av(3), libfabric 1.17). See cour_av.h for the representation.
 *
 * Choices where the man page leaves room, each visible to applications:
 * - FI_AV_UNSPEC becomes FI_AV_TABLE (written back to attr->type): both types are the same
 *   index table here, so TABLE promises nothing we do not already deliver, and it is the type
 *   that lets an application compute fi_addr_t values instead of storing them.
 * - Duplicates are not detected: each insertion gets a new fi_addr_t, so FI_AV_TABLE indices stay
 *   equal to insertion order even when an application inserts an address twice (fi_av(3)
 *   NOTES make duplicates the application's problem). The reverse map answers the newest one.
 * - FI_SYNC_ERR entries and FI_EVENT error entries carry a positive FI_* errno; a failed address
 *   gets FI_ADDR_NOTAVAIL; the return value counts successes only.
 * - Names that cannot be resolved by fi_av_insertsvc/insertsym are failed addresses (return 0
 *   inserted, FI_EINVAL in the per-address error), like any other bad address; malformed
 *   arguments (no service, a name without numeric suffix for nodecnt > 1, overflowing ranges)
 *   fail the whole call with -FI_EINVAL.
 * - fi_av_remove removes every valid fi_addr_t of the array and returns -FI_EINVAL if any entry
 *   was invalid (out of range or already removed).
 * - rx_ctx_bits (fi_rx_addr) takes 0 to 32 bits: an fi_addr_t is a 32-bit index. FI_AV_USER_ID
 *   does not exist here: -FI_EBADFLAGS. Named AVs are shared between the processes of a host (cour_av_shared.c);
 *   inserting into or removing from one opened FI_READ is -FI_EACCES.
 */
#include "cour_av.h"
#include "cour_cq.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <inttypes.h>
#include <limits.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COUR_AV_STRADDR_MAX 96           /* "fi_sockaddr_in6://[<46>]:65535" and a NUL */

static struct fi_ops_av cour_av_ops;
static struct fi_ops cour_av_fi_ops;

static inline struct cour_av *cour_av_of(struct fid_av *av_fid)
{
	return COUR_CONTAINER_OF(av_fid, struct cour_av, av_fid);
}

/* Size of one address as the application hands it to fi_av_insert. */
static size_t cour_av_addrlen(const struct cour_av *av)
{
	return av->addr_format == FI_SOCKADDR_IN6 ? sizeof(struct sockaddr_in6) :
						    sizeof(struct sockaddr_in);
}

static int cour_av_family(const struct cour_av *av)
{
	return av->addr_format == FI_SOCKADDR_IN6 ? AF_INET6 : AF_INET;
}

/* ---- the table and the reverse map (lock held) ---- */

const struct cour_addr *cour_av_lookup_locked(struct cour_av *av, fi_addr_t fi_addr)
{
	cour_lock_assert_held(&av->domain->lock);
	if (COUR_UNLIKELY(av->shm))
		cour_av_shared_sync_locked(av);
	return cour_at_get(&av->tab, fi_addr);
}

fi_addr_t cour_av_reverse_locked(struct cour_av *av, const struct cour_addr *addr)
{
	uint32_t i;

	cour_lock_assert_held(&av->domain->lock);
	if (COUR_UNLIKELY(av->shm))
		cour_av_shared_sync_locked(av);
	i = cour_at_find(&av->tab, addr);
	return i == COUR_AT_NONE ? FI_ADDR_NOTAVAIL : (fi_addr_t)i;
}

bool cour_av_same_locked(struct cour_av *av, fi_addr_t a, fi_addr_t b)
{
	const struct cour_addr *x, *y;

	if (a == b)
		return true;
	x = cour_av_lookup_locked(av, a);
	y = cour_av_lookup_locked(av, b);
	return x && y && !memcmp(x, y, COUR_AV_KEYLEN);
}

/* Appends addr; returns 0 or a positive FI_* errno. */
static int cour_av_add_locked(struct cour_av *av, const struct cour_addr *addr, fi_addr_t *fa)
{
	uint32_t i;
	int ret;

	if (av->shm) {
		ret = cour_av_shared_add_locked(av, addr, &i);
		if (!ret)
			*fa = i;
		return ret;
	}
	ret = cour_at_append(&av->tab, addr, &i);
	if (ret) {
		COUR_WARN(FI_LOG_AV, "cannot grow the AV past %zu entries: %s\n", av->tab.count,
			  fi_strerror(-ret));
		return -ret;
	}
	*fa = i;
	return 0;
}

static int cour_av_remove_one_locked(struct cour_av *av, fi_addr_t fi_addr)
{
	int ret;

	if (av->shm)
		return cour_av_shared_remove_locked(av, fi_addr) ? -FI_EINVAL : 0;
	ret = cour_at_remove(&av->tab, fi_addr);

	if (!ret)
		av->generation++;
	return ret;
}

/* ---- the insertion core shared by insert, insertsvc and insertsym ---- */

/* Produces the i-th address to insert, or a positive FI_* errno for a bad one. Must not block:
 * it runs under the progress lock, so names are resolved before. */
typedef int (*cour_av_src_fn)(struct cour_av *av, void *arg, size_t i, struct cour_addr *out);

struct cour_av_fail {
	size_t index;
	int    err;
};

static int cour_av_insert_common(struct cour_av *av, size_t count, cour_av_src_fn src, void *arg,
				 fi_addr_t *fi_addr, uint64_t flags, void *context)
{
	struct cour_domain *dom = av->domain;
	bool async = av->flags & FI_EVENT;
	int *sync_err = NULL;
	struct cour_av_fail *fails = NULL;
	size_t i, nfail = 0;
	int inserted = 0;

	if (cour_av_shared_readonly(av)) {
		COUR_WARN(FI_LOG_AV, "insert into a named AV opened FI_READ (read-only)\n");
		return -FI_EACCES;
	}
	if (flags & ~(FI_MORE | FI_SYNC_ERR)) {
		COUR_WARN(FI_LOG_AV, "unsupported insert flags 0x%" PRIx64 "\n",
			  (uint64_t)(flags & ~(FI_MORE | FI_SYNC_ERR)));
		return -FI_EBADFLAGS;
	}
	if (async && !av->eq) {
		COUR_WARN(FI_LOG_AV, "AV opened with FI_EVENT but no EQ bound\n");
		return -FI_ENOEQ;
	}
	if (flags & FI_SYNC_ERR) {
		if (async) {
			COUR_WARN(FI_LOG_AV, "FI_SYNC_ERR on an FI_EVENT (asynchronous) AV\n");
			return -FI_EINVAL;
		}
		if (!context && count) {
			COUR_WARN(FI_LOG_AV, "FI_SYNC_ERR without an error array in context\n");
			return -FI_EINVAL;
		}
		sync_err = context;
	}
	if (count > INT_MAX) {
		COUR_WARN(FI_LOG_AV, "insert of %zu addresses: the count cannot be returned\n", count);
		return -FI_EINVAL;
	}
	if (async && count) {
		fails = calloc(count, sizeof(*fails));
		if (!fails) {
			COUR_WARN(FI_LOG_AV, "out of memory for %zu insert results\n", count);
			return -FI_ENOMEM;
		}
	}

	cour_lock_acquire(&dom->lock);
	for (i = 0; i < count; i++) {
		struct cour_addr a;
		fi_addr_t fa = FI_ADDR_NOTAVAIL;
		int err = src(av, arg, i, &a);

		if (!err)
			err = cour_av_add_locked(av, &a, &fa);
		if (err) {
			if (fails)
				fails[nfail++] = (struct cour_av_fail){ .index = i, .err = err };
		} else {
			inserted++;
		}
		if (fi_addr)
			fi_addr[i] = fa;
		if (sync_err)
			sync_err[i] = err;
	}
	cour_lock_release(&dom->lock);

	if (!async)
		return inserted;

	/* Outside the progress lock: the EQ has its own mutex, which must never nest inside ours. */
	for (i = 0; i < nfail; i++) {
		struct fi_eq_err_entry ee = {
			.fid = &av->av_fid.fid,
			.context = context,
			.data = fails[i].index,
			.err = fails[i].err,
		};
		ssize_t rc = cour_eq_write_err(av->eq, &ee);

		if (rc < 0)
			COUR_WARN(FI_LOG_AV, "EQ refused the error entry of address %zu: %s\n",
				  fails[i].index, fi_strerror((int)-rc));
	}
	free(fails);

	struct fi_eq_entry done = {
		.fid = &av->av_fid.fid,
		.context = context,
		.data = (uint64_t)inserted,
	};
	ssize_t rc = fi_eq_write(av->eq, FI_AV_COMPLETE, &done, sizeof(done), 0);
	if (rc < 0) {
		COUR_WARN(FI_LOG_AV, "EQ refused the FI_AV_COMPLETE event: %s\n",
			  fi_strerror((int)-rc));
		return (int)rc;
	}
	return 0;
}

/* ---- fi_av_insert ---- */

static int cour_av_sockaddr_src(struct cour_av *av, void *arg, size_t i, struct cour_addr *out)
{
	size_t len = cour_av_addrlen(av);
	const struct sockaddr *sa = (const void *)((const char *)arg + i * len);

	if (sa->sa_family != cour_av_family(av) || cour_addr_from_sockaddr(out, sa, len)) {
		COUR_WARN(FI_LOG_AV, "address %zu: family %d, this AV takes %s\n", i,
			  (int)sa->sa_family, av->addr_format == FI_SOCKADDR_IN6 ?
			  "FI_SOCKADDR_IN6 (AF_INET6)" : "FI_SOCKADDR_IN (AF_INET)");
		return FI_EINVAL;
	}
	return 0;
}

static int cour_av_insert(struct fid_av *av_fid, const void *addr, size_t count,
			  fi_addr_t *fi_addr, uint64_t flags, void *context)
{
	struct cour_av *av = cour_av_of(av_fid);

	if (!addr && count) {
		COUR_WARN(FI_LOG_AV, "insert of %zu addresses from NULL\n", count);
		return -FI_EINVAL;
	}
	return cour_av_insert_common(av, count, cour_av_sockaddr_src, (void *)addr, fi_addr,
				     flags, context);
}

/* ---- name resolution for insertsvc and insertsym (never under the lock) ---- */

/* host:service to an address of the AV's family; 0 or a positive FI_* errno. */
static int cour_av_resolve(struct cour_av *av, const char *host, const char *service,
			   struct cour_addr *out)
{
	struct addrinfo hints = {
		.ai_family = cour_av_family(av),
		.ai_socktype = SOCK_DGRAM,
		.ai_flags = av->addr_format == FI_SOCKADDR_IN6 ? AI_V4MAPPED : 0,
	};
	struct addrinfo *res = NULL;
	int rc = getaddrinfo(host, service, &hints, &res);

	if (rc) {
		COUR_WARN(FI_LOG_AV, "cannot resolve %s:%s: %s\n", host ? host : "(null)",
			  service ? service : "(null)", gai_strerror(rc));
		return FI_EINVAL;
	}
	rc = cour_addr_from_sockaddr(out, res->ai_addr, res->ai_addrlen);
	freeaddrinfo(res);
	if (rc) {
		COUR_WARN(FI_LOG_AV, "%s:%s resolved to an unusable address\n", host, service);
		return FI_EINVAL;
	}
	return 0;
}

/* FI_ADDR_STR node ("fi_sockaddr_in://1.2.3.4:5", "fi_sockaddr_in6://[::1]:5"). 0 or -FI_EINVAL. */
static int cour_av_parse_str(struct cour_av *av, const char *str, struct cour_addr *out)
{
	bool v6 = av->addr_format == FI_SOCKADDR_IN6;
	const char *prefix = v6 ? "fi_sockaddr_in6://" : "fi_sockaddr_in://";
	struct sockaddr_in6 sin6 = { .sin6_family = AF_INET6 };
	struct sockaddr_in sin = { .sin_family = AF_INET };
	char host[INET6_ADDRSTRLEN + 2];
	const char *h = str + strlen(prefix), *colon, *port;
	size_t hlen;
	char *end;
	unsigned long p;

	if (strncmp(str, prefix, strlen(prefix)))
		goto bad;
	colon = strrchr(h, ':');
	if (!colon)
		goto bad;
	port = colon + 1;
	hlen = (size_t)(colon - h);
	if (v6) {
		if (hlen < 2 || h[0] != '[' || h[hlen - 1] != ']')
			goto bad;
		h++;
		hlen -= 2;
	}
	if (hlen == 0 || hlen >= sizeof(host))
		goto bad;
	memcpy(host, h, hlen);
	host[hlen] = '\0';
	errno = 0;
	p = strtoul(port, &end, 10);
	if (!isdigit((unsigned char)*port) || *end || errno || p > 65535)
		goto bad;

	if (v6) {
		sin6.sin6_port = htons((uint16_t)p);
		if (inet_pton(AF_INET6, host, &sin6.sin6_addr) != 1)
			goto bad;
		return cour_addr_from_sockaddr(out, &sin6, sizeof(sin6));
	}
	sin.sin_port = htons((uint16_t)p);
	if (inet_pton(AF_INET, host, &sin.sin_addr) != 1)
		goto bad;
	return cour_addr_from_sockaddr(out, &sin, sizeof(sin));
bad:
	COUR_WARN(FI_LOG_AV, "\"%s\" is not an address of this AV's format (%s...)\n", str, prefix);
	return -FI_EINVAL;
}

/* Adds k to the IP: within the low 32 bits for IPv4 (and v4-mapped), else as a 128-bit number.
 * False when it leaves the address space. */
static bool cour_av_ip_add(struct cour_addr *a, uint64_t k)
{
	static const uint8_t v4_prefix[12] = { [10] = 0xff, [11] = 0xff };
	int i;

	if (memcmp(a->ip, v4_prefix, sizeof(v4_prefix)) == 0) {
		uint32_t v;

		memcpy(&v, &a->ip[12], 4);
		v = ntohl(v);
		if (k > UINT32_MAX - v)
			return false;
		v = htonl(v + (uint32_t)k);
		memcpy(&a->ip[12], &v, 4);
		return true;
	}
	for (i = 15; i >= 0 && k; i--) {
		uint64_t sum = a->ip[i] + (k & 0xff);

		a->ip[i] = (uint8_t)sum;
		k = (k >> 8) + (sum >> 8);
	}
	return k == 0;
}

struct cour_av_sym {
	struct cour_addr *nodes;   /* each node's first address (service's port) */
	int              *errs;    /* per node: 0 or a positive FI_* errno */
	size_t            svccnt;
};

static int cour_av_sym_src(struct cour_av *av, void *arg, size_t i, struct cour_addr *out)
{
	struct cour_av_sym *s = arg;
	size_t n = i / s->svccnt;

	if (s->errs[n])
		return s->errs[n];
	*out = s->nodes[n];
	out->port = htons((uint16_t)(ntohs(out->port) + i % s->svccnt));
	return 0;
}

/* Splits "host10" into "host" and 10 with its width (2), for nodecnt > 1 of a hostname. */
static int cour_av_split_suffix(const char *node, size_t *plen, unsigned long long *num, int *w)
{
	size_t len = strlen(node), d = len;

	while (d > 0 && isdigit((unsigned char)node[d - 1]))
		d--;
	if (d == len || len - d > 18)
		return -FI_EINVAL;
	*plen = d;
	*w = (int)(len - d);
	*num = strtoull(node + d, NULL, 10);
	return 0;
}

static int cour_av_insertsym(struct fid_av *av_fid, const char *node, size_t nodecnt,
			     const char *service, size_t svccnt, fi_addr_t *fi_addr,
			     uint64_t flags, void *context)
{
	struct cour_av *av = cour_av_of(av_fid);
	struct cour_av_sym s = { .svccnt = svccnt };
	struct cour_addr base;
	struct in6_addr probe;
	unsigned long port = 0;
	bool numeric;
	size_t n;
	int ret;

	if (!nodecnt || !svccnt)
		return cour_av_insert_common(av, 0, cour_av_sym_src, &s, fi_addr, flags, context);
	if (!node || nodecnt > SIZE_MAX / svccnt) {
		COUR_WARN(FI_LOG_AV, "insertsym: %s\n", node ? "nodecnt x svccnt overflows" :
			  "no node");
		return -FI_EINVAL;
	}
	if (!service && strncmp(node, "fi_sockaddr_in", 14)) {
		COUR_WARN(FI_LOG_AV, "insert of \"%s\" without a service (port)\n", node);
		return -FI_EINVAL;
	}
	if (service && svccnt > 1) {
		char *end;

		errno = 0;
		port = strtoul(service, &end, 10);
		if (!isdigit((unsigned char)*service) || *end || errno || port > 65535 ||
		    svccnt - 1 > 65535 - port) {
			COUR_WARN(FI_LOG_AV, "service \"%s\" + %zu is not a range of ports\n",
				  service, svccnt - 1);
			return -FI_EINVAL;
		}
	}

	s.nodes = calloc(nodecnt, sizeof(*s.nodes));
	s.errs = calloc(nodecnt, sizeof(*s.errs));
	if (!s.nodes || !s.errs) {
		COUR_WARN(FI_LOG_AV, "out of memory for %zu nodes\n", nodecnt);
		ret = -FI_ENOMEM;
		goto free_nodes;
	}

	numeric = !service || inet_pton(AF_INET, node, &probe) == 1 ||
		  inet_pton(AF_INET6, node, &probe) == 1;

	if (numeric) {
		/* One address; the others are arithmetic on it. */
		if (!service) {
			ret = cour_av_parse_str(av, node, &base);
			if (ret)
				goto free_nodes;
			if (svccnt - 1 > 65535u - ntohs(base.port)) {
				COUR_WARN(FI_LOG_AV, "%s + %zu ports leaves the port space\n",
					  node, svccnt - 1);
				ret = -FI_EINVAL;
				goto free_nodes;
			}
		} else {
			int err = cour_av_resolve(av, node, service, &base);

			for (n = 0; err && n < nodecnt; n++)
				s.errs[n] = err;
		}
		for (n = 0; !s.errs[0] && n < nodecnt; n++) {
			s.nodes[n] = base;
			if (!cour_av_ip_add(&s.nodes[n], n)) {
				COUR_WARN(FI_LOG_AV, "%s + %zu leaves the address space\n", node,
					  nodecnt - 1);
				ret = -FI_EINVAL;
				goto free_nodes;
			}
		}
	} else if (nodecnt == 1) {
		s.errs[0] = cour_av_resolve(av, node, service, &s.nodes[0]);
	} else {
		unsigned long long num;
		size_t plen;
		int width;
		char name[NI_MAXHOST];

		if (cour_av_split_suffix(node, &plen, &num, &width) || plen >= sizeof(name) - 24 ||
		    nodecnt - 1 > ULLONG_MAX / 2 - num) {
			COUR_WARN(FI_LOG_AV, "host name \"%s\" has no numeric suffix to count %zu "
				  "nodes from\n", node, nodecnt);
			ret = -FI_EINVAL;
			goto free_nodes;
		}
		for (n = 0; n < nodecnt; n++) {
			snprintf(name, sizeof(name), "%.*s%0*llu", (int)plen, node, width,
				 num + n);
			s.errs[n] = cour_av_resolve(av, name, service, &s.nodes[n]);
		}
	}
	ret = cour_av_insert_common(av, nodecnt * svccnt, cour_av_sym_src, &s, fi_addr, flags,
				    context);
free_nodes:
	free(s.errs);
	free(s.nodes);
	return ret;
}

static int cour_av_insertsvc(struct fid_av *av_fid, const char *node, const char *service,
			     fi_addr_t *fi_addr, uint64_t flags, void *context)
{
	return cour_av_insertsym(av_fid, node, 1, service, 1, fi_addr, flags, context);
}

/* ---- remove, lookup, straddr ---- */

static int cour_av_remove(struct fid_av *av_fid, fi_addr_t *fi_addr, size_t count,
			  uint64_t flags)
{
	struct cour_av *av = cour_av_of(av_fid);
	int ret = 0;
	size_t i;

	if (flags) {
		COUR_WARN(FI_LOG_AV, "fi_av_remove flags must be 0, got 0x%" PRIx64 "\n", flags);
		return -FI_EBADFLAGS;
	}
	if (!fi_addr && count) {
		COUR_WARN(FI_LOG_AV, "remove of %zu addresses from NULL\n", count);
		return -FI_EINVAL;
	}
	if (cour_av_shared_readonly(av)) {
		COUR_WARN(FI_LOG_AV, "remove from a named AV opened FI_READ (read-only)\n");
		return -FI_EACCES;
	}
	cour_lock_acquire(&av->domain->lock);
	for (i = 0; i < count; i++) {
		if (cour_av_remove_one_locked(av, fi_addr[i])) {
			COUR_WARN(FI_LOG_AV, "remove: fi_addr %" PRIu64 " (entry %zu) is not in "
				  "the AV\n", fi_addr[i], i);
			ret = -FI_EINVAL;
		}
	}
	cour_lock_release(&av->domain->lock);
	return ret;
}

static int cour_av_lookup(struct fid_av *av_fid, fi_addr_t fi_addr, void *addr,
			  size_t *addrlen)
{
	struct cour_av *av = cour_av_of(av_fid);
	const struct cour_addr *a;
	struct sockaddr_storage ss;
	size_t len = 0;

	if (!addrlen || (!addr && *addrlen)) {
		COUR_WARN(FI_LOG_AV, "lookup without a buffer\n");
		return -FI_EINVAL;
	}
	cour_lock_acquire(&av->domain->lock);
	a = cour_av_lookup_locked(av, fi_addr);
	if (a)
		len = cour_addr_to_sockaddr(a, &ss);
	cour_lock_release(&av->domain->lock);
	if (!a) {
		COUR_WARN(FI_LOG_AV, "lookup: fi_addr %" PRIu64 " is not in the AV\n", fi_addr);
		return -FI_EINVAL;
	}
	/* fi_av(3): truncate to the buffer and report the full size; not an error. */
	if (*addrlen)
		memcpy(addr, &ss, COUR_MIN(len, *addrlen));
	*addrlen = len;
	return 0;
}

static const char *cour_av_straddr(struct fid_av *av_fid, const void *addr, char *buf,
				   size_t *len)
{
	struct cour_av *av = cour_av_of(av_fid);
	struct cour_addr a;
	char full[COUR_AV_STRADDR_MAX];
	size_t need;

	if (!addr || !len || (!buf && *len)) {
		COUR_WARN(FI_LOG_AV, "straddr without an address or a buffer\n");
		return NULL;
	}
	if (((const struct sockaddr *)addr)->sa_family != cour_av_family(av) ||
	    cour_addr_from_sockaddr(&a, addr, cour_av_addrlen(av))) {
		COUR_WARN(FI_LOG_AV, "straddr: address of family %d is not of this AV's format\n",
			  (int)((const struct sockaddr *)addr)->sa_family);
		return NULL;
	}
	cour_addr_str(&a, full, sizeof(full));
	need = strlen(full) + 1;
	if (*len) {
		size_t n = COUR_MIN(need, *len) - 1;

		memcpy(buf, full, n);
		buf[n] = '\0';
	}
	*len = need;
	return buf;
}

static int cour_av_set(struct fid_av *av, struct fi_av_set_attr *attr,
		       struct fid_av_set **av_set, void *context)
{
	return -FI_ENOSYS;
}

/* ---- fid ---- */

static int cour_av_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct cour_av *av = COUR_CONTAINER_OF(fid, struct cour_av, av_fid.fid);

	if (!bfid || bfid->fclass != FI_CLASS_EQ) {
		COUR_WARN(FI_LOG_AV, "an AV binds only to an EQ (fclass %zu given)\n",
			  bfid ? bfid->fclass : 0);
		return -FI_EINVAL;
	}
	if (flags) {
		COUR_WARN(FI_LOG_AV, "fi_av_bind flags must be 0, got 0x%" PRIx64 "\n", flags);
		return -FI_EBADFLAGS;
	}
	cour_lock_acquire(&av->domain->lock);
	if (av->eq) {
		cour_lock_release(&av->domain->lock);
		COUR_WARN(FI_LOG_AV, "the AV is already bound to an EQ\n");
		return -FI_EINVAL;
	}
	av->eq = COUR_CONTAINER_OF(bfid, struct fid_eq, fid);
	cour_ref_inc(&COUR_CONTAINER_OF(av->eq, struct cour_eq, eq_fid)->refcnt);
	cour_lock_release(&av->domain->lock);
	return 0;
}

static void cour_av_free(struct cour_av *av)
{
	cour_av_shared_close(av);
	cour_at_fini(&av->tab);
	free(av);
}

static int cour_av_close(struct fid *fid)
{
	struct cour_av *av = COUR_CONTAINER_OF(fid, struct cour_av, av_fid.fid);
	struct cour_domain *dom = av->domain;

	if (cour_ref_get(&av->refcnt) > 0) {
		COUR_WARN(FI_LOG_AV, "AV still bound to %d endpoint(s)\n",
			  cour_ref_get(&av->refcnt));
		return -FI_EBUSY;
	}
	if (av->eq)
		cour_ref_dec(&COUR_CONTAINER_OF(av->eq, struct cour_eq, eq_fid)->refcnt);
	cour_av_free(av);
	cour_ref_dec(&dom->refcnt);
	return 0;
}

int cour_av_open(struct fid_domain *domain, struct fi_av_attr *attr, struct fid_av **av_fid,
		 void *context)
{
	struct cour_domain *dom = COUR_CONTAINER_OF(domain, struct cour_domain, domain_fid);
	const uint64_t known = FI_EVENT | FI_SYMMETRIC | FI_READ;
	struct cour_av *av;
	int format;

	if (!attr || !av_fid) {
		COUR_WARN(FI_LOG_AV, "fi_av_open without attributes or result pointer\n");
		return -FI_EINVAL;
	}
	if (attr->type != FI_AV_UNSPEC && attr->type != FI_AV_MAP && attr->type != FI_AV_TABLE) {
		COUR_WARN(FI_LOG_AV, "unknown AV type %d\n", (int)attr->type);
		return -FI_EINVAL;
	}
	if (attr->rx_ctx_bits < 0 || attr->rx_ctx_bits > 32) {
		/* fi_addr_t values are 32-bit indices: the top 32 bits are free to name one */
		COUR_WARN(FI_LOG_AV, "rx_ctx_bits %d: 0 to 32\n", attr->rx_ctx_bits);
		return -FI_EINVAL;
	}
	if ((attr->flags & FI_READ) && !attr->name) {
		COUR_WARN(FI_LOG_AV, "FI_READ opens a named AV: no name given\n");
		return -FI_EINVAL;
	}
	if (attr->flags & ~known) {
		COUR_WARN(FI_LOG_AV, "unsupported AV flags 0x%" PRIx64 "\n", (uint64_t)(attr->flags & ~known));
		return -FI_EBADFLAGS;
	}
	format = dom->info ? (int)dom->info->addr_format : FI_FORMAT_UNSPEC;
	if (format != FI_SOCKADDR_IN && format != FI_SOCKADDR_IN6) {
		COUR_WARN(FI_LOG_AV, "domain address format %d is neither FI_SOCKADDR_IN nor "
			  "FI_SOCKADDR_IN6\n", format);
		return -FI_EINVAL;
	}

	av = calloc(1, sizeof(*av));
	if (!av) {
		COUR_WARN(FI_LOG_AV, "out of memory for the AV\n");
		return -FI_ENOMEM;
	}
	/* attr->count is only a hint: the table grows as addresses come */
	cour_at_init(&av->tab);
	if (attr->type == FI_AV_UNSPEC)
		attr->type = FI_AV_TABLE;
	av->type = attr->type;
	av->flags = attr->flags;
	av->addr_format = format;
	av->domain = dom;
	av->gen = &av->generation;
	av->rx_ctx_bits = attr->rx_ctx_bits;
	if (attr->name) {
		int ret = cour_av_shared_open(av, attr);

		if (ret) {
			cour_av_free(av);
			return ret;
		}
	}
	av->av_fid.fid.fclass = FI_CLASS_AV;
	av->av_fid.fid.context = context;
	av->av_fid.fid.ops = &cour_av_fi_ops;
	av->av_fid.ops = &cour_av_ops;
	cour_ref_inc(&dom->refcnt);
	*av_fid = &av->av_fid;
	return 0;
}

static struct fi_ops cour_av_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = cour_av_close,
	.bind = cour_av_bind,
	.control = cour_no_control,
	.ops_open = cour_no_ops_open,
	.tostr = cour_no_tostr,
	.ops_set = cour_no_ops_set,
};

static struct fi_ops_av cour_av_ops = {
	.size = sizeof(struct fi_ops_av),
	.insert = cour_av_insert,
	.insertsvc = cour_av_insertsvc,
	.insertsym = cour_av_insertsym,
	.remove = cour_av_remove,
	.lookup = cour_av_lookup,
	.straddr = cour_av_straddr,
	.av_set = cour_av_set,
};
