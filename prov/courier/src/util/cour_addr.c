#include "util/cour_util.h"
#include "util/cour_addr.h"

#include <arpa/inet.h>
#include <stdio.h>

int cour_addr_from_sockaddr(struct cour_addr *a, const void *sa, size_t len)
{
	const struct sockaddr *s = sa;

	memset(a, 0, sizeof(*a));
	if (!sa || len < sizeof(sa_family_t))
		return -FI_EINVAL;
	if (s->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *in = sa;
		a->ip[10] = 0xff;
		a->ip[11] = 0xff;
		memcpy(&a->ip[12], &in->sin_addr, 4);
		a->port = in->sin_port;
		a->is_v4 = 1;
		return 0;
	}
	if (s->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *in6 = sa;
		memcpy(a->ip, &in6->sin6_addr, 16);
		a->port = in6->sin6_port;
		return 0;
	}
	return -FI_EINVAL;
}

int cour_addr_name_out(const struct cour_addr *a, void *buf, size_t *len)
{
	union cour_sockaddr sa;
	size_t n = cour_addr_to_sockaddr(a, &sa), have = *len;

	*len = n;
	memcpy(buf, &sa, COUR_MIN(have, n));
	return have < n ? -FI_ETOOSMALL : 0;
}

size_t cour_addr_to_sockaddr(const struct cour_addr *a, void *ss)
{
	memset(ss, 0, sizeof(union cour_sockaddr));
	if (a->is_v4) {
		struct sockaddr_in *in = (struct sockaddr_in *)ss;
		in->sin_family = AF_INET;
		in->sin_port = a->port;
		memcpy(&in->sin_addr, &a->ip[12], 4);
		return sizeof(*in);
	}
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
	in6->sin6_family = AF_INET6;
	in6->sin6_port = a->port;
	memcpy(&in6->sin6_addr, a->ip, 16);
	return sizeof(*in6);
}

char *cour_addr_str(const struct cour_addr *a, char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN];

	if (a->is_v4) {
		inet_ntop(AF_INET, &a->ip[12], ip, sizeof(ip));
		snprintf(buf, len, "fi_sockaddr_in://%s:%u", ip, ntohs(a->port));
	} else {
		inet_ntop(AF_INET6, a->ip, ip, sizeof(ip));
		snprintf(buf, len, "fi_sockaddr_in6://[%s]:%u", ip, ntohs(a->port));
	}
	return buf;
}

bool cour_addr_is_wildcard(const struct cour_addr *a)
{
	static const uint8_t any6[16], any4[16] = { [10] = 0xff, [11] = 0xff };

	return memcmp(a->ip, any6, 16) == 0 || memcmp(a->ip, any4, 16) == 0;
}

bool cour_addr_is_loopback(const struct cour_addr *a)
{
	static const uint8_t v6_lo[16] = { [15] = 1 };

	if (a->is_v4)
		return a->ip[12] == 127;
	return memcmp(a->ip, v6_lo, 16) == 0;
}
