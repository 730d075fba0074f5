/*
 * fi_getinfo's addresses: which source and destination node, service, flags and hints name
 * (numeric or looked up, FI_SOURCE, an interface or subnet from FI_COURIER_IFACE_ADDR, or the
 * route's own source), and the address an endpoint binds when it is given none.
 */
#include "cour_fi.h"
#include "cour_attr.h"
#include "util/cour_addr.h"

#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- addresses ---- */


int cour_format_family(uint32_t addr_format)
{
	return addr_format == FI_SOCKADDR_IN ? AF_INET :
	       addr_format == FI_SOCKADDR_IN6 ? AF_INET6 : AF_UNSPEC;
}

static size_t cour_sockaddr_len(int family)
{
	return family == AF_INET ? sizeof(struct sockaddr_in) :
	       family == AF_INET6 ? sizeof(struct sockaddr_in6) : 0;
}

static const char *cour_family_name(int family)
{
	return family == AF_INET ? "IPv4" : family == AF_INET6 ? "IPv6" : "unspecified";
}

static void cour_sockaddr_set_port(struct sockaddr_storage *ss, uint16_t port_be)
{
	if (ss->ss_family == AF_INET)
		((struct sockaddr_in *)ss)->sin_port = port_be;
	else
		((struct sockaddr_in6 *)ss)->sin6_port = port_be;
}

/* An application's address: all of a sockaddr_in or sockaddr_in6, of the family chosen so far. */
int cour_attr_take_addr(const char *what, const void *addr, size_t len, int *family,
			struct sockaddr_storage *ss, size_t *ss_len)
{
	sa_family_t fam;
	size_t need;

	if (len < sizeof(fam)) {
		COUR_WARN(FI_LOG_CORE, "%s of %zu bytes is not a socket address\n", what, len);
		return -FI_EINVAL;
	}
	memcpy(&fam, addr, sizeof(fam));
	need = cour_sockaddr_len(fam);
	if (!need || len < need) {
		COUR_WARN(FI_LOG_CORE, "%s: family %d in %zu bytes; courier takes a whole "
			  "sockaddr_in or sockaddr_in6\n", what, (int)fam, len);
		return -FI_EINVAL;
	}
	if (*family != AF_UNSPEC && fam != *family) {
		COUR_INFO(FI_LOG_CORE, "%s is %s where %s is asked\n", what,
			  cour_family_name(fam), cour_family_name(*family));
		return -FI_ENODATA;
	}
	*family = fam;
	memset(ss, 0, sizeof(*ss));
	memcpy(ss, addr, need);
	*ss_len = need;
	return 0;
}

static bool cour_is_number(const char *s)
{
	return *s && strspn(s, "0123456789") == strlen(s);
}

/* getaddrinfo for one UDP address; with no family asked, IPv4 is preferred. */
static int cour_attr_lookup(const char *what, const char *host, const char *service,
			    bool numeric_host, int *family, struct sockaddr_storage *ss,
			    size_t *len)
{
	struct addrinfo hints = {
		.ai_family = *family,
		.ai_socktype = SOCK_DGRAM,
		.ai_protocol = IPPROTO_UDP,
	};
	struct addrinfo *res, *ai, *pick = NULL;
	int ret;

	if (numeric_host)
		hints.ai_flags |= AI_NUMERICHOST;
	if (service && cour_is_number(service)) {
		if (strlen(service) > 5 || atoi(service) > 65535) {
			COUR_WARN(FI_LOG_CORE, "service \"%s\" is not a UDP port\n", service);
			return -FI_ENODATA;
		}
		hints.ai_flags |= AI_NUMERICSERV;
	}
	ret = getaddrinfo(host, service, &hints, &res);
	if (ret) {
		COUR_WARN(FI_LOG_CORE, "cannot resolve %s \"%s\" service \"%s\" (%s): %s\n", what,
			  host ? host : "", service ? service : "", cour_family_name(*family),
			  gai_strerror(ret));
		return ret == EAI_MEMORY ? -FI_ENOMEM : -FI_ENODATA;
	}
	for (ai = res; ai && (!pick || pick->ai_family != AF_INET); ai = ai->ai_next)
		if (ai->ai_family == AF_INET || (ai->ai_family == AF_INET6 && !pick))
			pick = ai;
	if (!pick || pick->ai_addrlen > sizeof(*ss)) {
		COUR_WARN(FI_LOG_CORE, "%s \"%s\" has no IP address\n", what, host ? host : "");
		freeaddrinfo(res);
		return -FI_ENODATA;
	}
	memset(ss, 0, sizeof(*ss));
	memcpy(ss, pick->ai_addr, pick->ai_addrlen);
	*len = pick->ai_addrlen;
	*family = pick->ai_family;
	freeaddrinfo(res);
	return 0;
}

/*
 * The local address the kernel would send from to reach dest: the source to use when the
 * application names a peer but no local address. connect() on UDP sends nothing.
 */
static int cour_attr_route_src(struct cour_attr_addrs *a)
{
	struct sockaddr_storage probe = a->dest;
	socklen_t len = sizeof(a->src);
	int fd, ret = 0;

	/* the port plays no part in the route, and port 0 may be refused */
	cour_sockaddr_set_port(&probe, htons(9));
	fd = socket(a->family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	memset(&a->src, 0, sizeof(a->src));
	if (connect(fd, (struct sockaddr *)&probe, (socklen_t)a->dest_len) ||
	    getsockname(fd, (struct sockaddr *)&a->src, &len))
		ret = -errno;
	close(fd);
	if (ret || len > sizeof(a->src) || a->src.ss_family != a->family)
		return ret ? ret : -FI_EINVAL;
	cour_sockaddr_set_port(&a->src, 0);
	a->src_len = len;
	return 0;
}

static const char *cour_loopback(int family)
{
	return family == AF_INET6 ? "::1" : "127.0.0.1";
}

/* FI_COURIER_IFACE_ADDR with service as the port: an interface or a subnet of this host
 * (util/cour_iface.c), else an address or a host name */
static int cour_attr_iface(const char *service, int *family, struct sockaddr_storage *ss,
			   size_t *len)
{
	char ip[INET6_ADDRSTRLEN];
	int ret;

	ret = cour_iface_resolve(cour_params.iface_addr, *family, ip, sizeof(ip));
	if (ret < 0)
		return ret;
	return cour_attr_lookup("FI_COURIER_IFACE_ADDR", ret ? cour_params.iface_addr : ip,
				service, ret == 0, family, ss, len);
}

/* Source when none was named: FI_COURIER_IFACE_ADDR, else the route to the peer, else
 * loopback. Port 0: the endpoint gets an ephemeral one. */
static int cour_attr_default_src(struct cour_attr_addrs *a)
{
	int ret;

	if (cour_params.iface_addr)
		return cour_attr_iface("0", &a->family, &a->src, &a->src_len);
	if (a->dest_len) {
		ret = cour_attr_route_src(a);
		if (!ret)
			return 0;
		COUR_INFO(FI_LOG_CORE, "no route to the destination (%s), using loopback\n",
			  fi_strerror(-ret));
	}
	return cour_attr_lookup("loopback", cour_loopback(a->family), "0", true, &a->family,
				&a->src, &a->src_len);
}

int cour_attr_default_bind(uint32_t addr_format, struct sockaddr_storage *ss, size_t *len)
{
	struct cour_attr_addrs a = { .family = cour_format_family(addr_format) };
	int ret = cour_attr_default_src(&a);

	if (!ret) {
		*ss = a.src;
		*len = a.src_len;
	}
	return ret;
}

/*
 * Where node/service/flags and the hints' addresses point. fi_getinfo(3): with FI_SOURCE,
 * node/service name the local address and hints->src_addr is ignored; without it they name
 * the peer, and hints->dest_addr only counts when neither is given.
 */
int cour_attr_resolve(const char *node, const char *service, uint64_t flags,
			     const struct fi_info *hints, struct cour_attr_addrs *a)
{
	bool by_name = node || service;
	bool source = (flags & FI_SOURCE) && by_name;
	bool numeric = flags & FI_NUMERICHOST;
	int ret;

	memset(a, 0, sizeof(*a));
	a->family = cour_format_family(hints ? hints->addr_format : FI_FORMAT_UNSPEC);

	if (hints && hints->src_addr && !source) {
		ret = cour_attr_take_addr("hints->src_addr", hints->src_addr, hints->src_addrlen,
					  &a->family, &a->src, &a->src_len);
		if (ret)
			return ret;
	}
	if (hints && hints->dest_addr && (source || !by_name)) {
		ret = cour_attr_take_addr("hints->dest_addr", hints->dest_addr,
					  hints->dest_addrlen, &a->family, &a->dest, &a->dest_len);
		if (ret)
			return ret;
	}

	if (!node && source) {
		/* a local port alone: on the interface we would bind anyway */
		if (cour_params.iface_addr)
			return cour_attr_iface(service, &a->family, &a->src, &a->src_len);
		numeric = true;
		node = cour_loopback(a->family);
	}
	if (by_name) {
		ret = cour_attr_lookup("node", node, service, numeric, &a->family,
				       source ? &a->src : &a->dest,
				       source ? &a->src_len : &a->dest_len);
		if (ret)
			return ret;
	}
	return a->src_len ? 0 : cour_attr_default_src(a);
}

static int cour_attr_copy_addr(void **addr, size_t *addrlen, const void *ss, size_t len)
{
	if (!len)
		return 0;
	*addr = malloc(len);
	if (!*addr) {
		COUR_WARN(FI_LOG_CORE, "out of memory copying an address into an fi_info\n");
		return -FI_ENOMEM;
	}
	memcpy(*addr, ss, len);
	*addrlen = len;
	return 0;
}

int cour_attr_set_addrs(struct fi_info *fi, const struct cour_attr_addrs *a)
{
	fi->addr_format = a->family == AF_INET6 ? FI_SOCKADDR_IN6 : FI_SOCKADDR_IN;
	return cour_attr_copy_addr(&fi->src_addr, &fi->src_addrlen, &a->src, a->src_len) ?:
	       cour_attr_copy_addr(&fi->dest_addr, &fi->dest_addrlen, &a->dest, a->dest_len);
}

int cour_attr_bind_addr(const struct fi_info *info, struct cour_addr *want)
{
	struct sockaddr_storage ss;
	size_t len;
	int ret;

	if (info->src_addr) {
		if (cour_addr_from_sockaddr(want, info->src_addr, info->src_addrlen)) {
			COUR_WARN(FI_LOG_EP_CTRL, "src_addr is not a sockaddr_in/in6\n");
			return -FI_EINVAL;
		}
		return 0;
	}
	ret = cour_attr_default_bind(info->addr_format, &ss, &len);
	if (ret)
		return ret;
	return cour_addr_from_sockaddr(want, &ss, len) ? -FI_EINVAL : 0;
}
