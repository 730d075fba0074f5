/*
 * FI_COURIER_IFACE_ADDR names the local address endpoints bind when the application names none.
 * A job passes one environment to every host (mpirun -x), so besides an address it may name
 * what each host finds its own address by: an interface ("eth0") or a subnet ("10.1.0.0/16",
 * "fd00::/64"). This file turns those two forms into this host's address; anything else is an
 * address or a host name, left to the caller's resolver.
 */
#include "util/cour_util.h"
#include "util/cour_addr.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>

struct cour_subnet {
	int family;
	uint8_t ip[16];
	unsigned bits;
};

/* "a.b.c.d/n" or "x:y::/n": 0, or -FI_EINVAL for a spec with a slash that is no subnet */
static int cour_subnet_parse(const char *spec, struct cour_subnet *s)
{
	char host[INET6_ADDRSTRLEN + 1];
	const char *slash = strchr(spec, '/');
	char *end;
	unsigned long bits;
	size_t hl = (size_t)(slash - spec);

	if (hl == 0 || hl >= sizeof(host))
		return -FI_EINVAL;
	memcpy(host, spec, hl);
	host[hl] = '\0';
	bits = strtoul(slash + 1, &end, 10);
	if (end == slash + 1 || *end)
		return -FI_EINVAL;
	if (inet_pton(AF_INET, host, s->ip) == 1)
		s->family = AF_INET;
	else if (inet_pton(AF_INET6, host, s->ip) == 1)
		s->family = AF_INET6;
	else
		return -FI_EINVAL;
	if (bits > (s->family == AF_INET ? 32u : 128u))
		return -FI_EINVAL;
	s->bits = (unsigned)bits;
	return 0;
}

static bool cour_prefix_eq(const uint8_t *a, const uint8_t *b, unsigned bits)
{
	unsigned whole = bits / 8, rest = bits % 8;

	if (memcmp(a, b, whole))
		return false;
	return !rest || ((a[whole] ^ b[whole]) & (uint8_t)(0xff << (8 - rest))) == 0;
}

static const uint8_t *cour_ifa_ip(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return (const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr;
	return (const uint8_t *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
}

/* IPv6 link-local addresses need a scope that endpoint names do not carry */
static bool cour_ifa_usable(const struct ifaddrs *ifa, int family)
{
	const struct sockaddr *sa = ifa->ifa_addr;

	if (!sa || !(ifa->ifa_flags & IFF_UP))
		return false;
	if (sa->sa_family != AF_INET && sa->sa_family != AF_INET6)
		return false;
	if (family != AF_UNSPEC && sa->sa_family != family)
		return false;
	if (sa->sa_family == AF_INET6) {
		const uint8_t *ip = cour_ifa_ip(sa);
		if (ip[0] == 0xfe && (ip[1] & 0xc0) == 0x80)
			return false;
	}
	return true;
}

int cour_iface_resolve(const char *spec, int family, char *out, size_t outlen)
{
	struct cour_subnet sub = { 0 };
	struct ifaddrs *list, *ifa;
	const struct ifaddrs *pick = NULL;
	bool by_subnet = strchr(spec, '/') != NULL;

	if (by_subnet) {
		if (cour_subnet_parse(spec, &sub)) {
			COUR_WARN(FI_LOG_CORE, "FI_COURIER_IFACE_ADDR \"%s\": not a subnet (such as "
				  "10.1.0.0/16)\n", spec);
			return -FI_EINVAL;
		}
		if (family != AF_UNSPEC && family != sub.family) {
			COUR_WARN(FI_LOG_CORE, "FI_COURIER_IFACE_ADDR \"%s\": not of the address "
				  "family asked for\n", spec);
			return -FI_ENODATA;
		}
	} else if (!if_nametoindex(spec)) {
		return 1;       /* no interface of that name: an address or a host name */
	}
	if (getifaddrs(&list)) {
		COUR_WARN(FI_LOG_CORE, "getifaddrs: %s\n", strerror(errno));
		return -FI_ENODATA;
	}
	for (ifa = list; ifa; ifa = ifa->ifa_next) {
		if (!cour_ifa_usable(ifa, by_subnet ? sub.family : family))
			continue;
		if (by_subnet ? !cour_prefix_eq(cour_ifa_ip(ifa->ifa_addr), sub.ip, sub.bits)
			      : strcmp(ifa->ifa_name, spec))
			continue;
		/* an interface's IPv4 address before its IPv6 ones, as getaddrinfo's answers are
		 * taken elsewhere */
		if (!pick || (pick->ifa_addr->sa_family != AF_INET &&
			      ifa->ifa_addr->sa_family == AF_INET))
			pick = ifa;
	}
	if (pick)
		inet_ntop(pick->ifa_addr->sa_family, cour_ifa_ip(pick->ifa_addr), out,
			  (socklen_t)outlen);
	freeifaddrs(list);
	if (!pick) {
		COUR_WARN(FI_LOG_CORE, "FI_COURIER_IFACE_ADDR \"%s\": no %s address of this host "
			  "is up there\n", spec, family == AF_INET6 ? "IPv6" :
			  family == AF_INET ? "IPv4" : "IP");
		return -FI_ENODATA;
	}
	return 0;
}
