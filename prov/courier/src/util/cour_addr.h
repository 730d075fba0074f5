/*
 * Endpoint addresses. courier's addr_format is FI_SOCKADDR_IN (or FI_SOCKADDR_IN6): the name of
 * an endpoint is the UDP socket address it listens on, so applications and fi_getinfo's
 * node/service speak the same language. Internally every address is normalised to a fixed
 * 20-byte key (IPv4 as v4-mapped IPv6) that hashes and compares as plain bytes.
 */
#ifndef COUR_ADDR_H
#define COUR_ADDR_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct cour_addr {
	uint8_t  ip[16];      /* IPv6, or IPv4 mapped as ::ffff:a.b.c.d */
	uint16_t port;        /* network byte order */
	uint8_t  is_v4;       /* the application spoke IPv4: answer it in IPv4 */
	uint8_t  pad;         /* always zero, so the struct hashes as bytes */
};
_Static_assert(sizeof(struct cour_addr) == 20, "cour_addr is a hash key");

/* Accepts sockaddr_in and sockaddr_in6 of at least the right length. 0 or -FI_EINVAL. */
int cour_addr_from_sockaddr(struct cour_addr *a, const void *sa, size_t len);
/* Room for any sockaddr courier sends to: 28 bytes where sockaddr_storage takes 128, which
 * every peer record holds. */
union cour_sockaddr {
	struct sockaddr     sa;
	struct sockaddr_in  in;
	struct sockaddr_in6 in6;
};

/* Writes the sockaddr the address came from (in or in6) into ss, which has room for a
 * union cour_sockaddr at least; returns its length. */
size_t cour_addr_to_sockaddr(const struct cour_addr *a, void *ss);
/* fi_getname / fi_getpeer: the sockaddr into buf, *len bytes of room; *len becomes its size.
 * 0, or -FI_ETOOSMALL with as much as fits copied (fi_cm(3)). */
int cour_addr_name_out(const struct cour_addr *a, void *buf, size_t *len);
/* "fi_sockaddr_in://1.2.3.4:5" style text, always NUL-terminated; returns buf. */
char *cour_addr_str(const struct cour_addr *a, char *buf, size_t len);
bool cour_addr_is_loopback(const struct cour_addr *a);
/* 0.0.0.0 or :: : bound to every address of the host, so no one address is its name */
bool cour_addr_is_wildcard(const struct cour_addr *a);
/*
 * FI_COURIER_IFACE_ADDR's interface ("eth0") and subnet ("10.1.0.0/16") forms (util/cour_iface.c):
 * this host's address there, as text in out. 0; 1 when spec is neither form (an address or a
 * host name: resolve it as such); -FI_ENODATA when no address of family (AF_UNSPEC: any, IPv4
 * first) is up there; -FI_EINVAL for a malformed subnet. Logged.
 */
int cour_iface_resolve(const char *spec, int family, char *out, size_t outlen);
static inline bool cour_addr_eq(const struct cour_addr *a, const struct cour_addr *b)
{
	return __builtin_memcmp(a, b, sizeof(*a)) == 0;
}

#endif
