/*
 * What courier offers through fi_getinfo, and the checks that keep later calls inside it.
 *
 * The offer is a static template per endpoint type in cour_attr.c (RDM first, then DGRAM);
 * sizes that come from FI_COURIER_* parameters are filled in when an offer is made. Hints
 * narrow an offer: a non-zero hint we cannot meet drops that endpoint type, and a hint we can
 * meet is reflected in the result (threading, progress, av_type, sizes, op_flags, tag format,
 * the mr_mode bits the application supports and we honour).
 *
 * Fields newer than 1.17 are read only when the headers have them and the caller's version
 * says it set them: max_ep_auth_key (1.20) and max_group_id (2.0) must be 0, since courier has
 * neither keys per peer address (FI_AV_AUTH_KEY) nor peer groups; a 2.x caller
 * gets control_progress equal to progress (data_progress), the one field 2.x has left, and its
 * mem_tag_format is read as 2.x defines it (COUR_TAG_MAX_FORMAT below).
 *
 * Capabilities follow fi_getinfo(3): primary capabilities (FI_MSG, FI_TAGGED, FI_DIRECTED_RECV
 * ...) only when selected, all of them when none is; the direction modifiers (FI_SEND, FI_RECV)
 * limit them, all relevant ones when none is given; secondary capabilities (FI_MULTI_RECV,
 * FI_SOURCE) only when requested, except FI_LOCAL_COMM | FI_REMOTE_COMM which cost us nothing
 * and are reported when the application names neither. hints->caps == 0 gets everything.
 *
 * mr_mode: courier needs no registration mode. The bits of COUR_MR_MODE_SUPPORTED that the
 * application says it supports are returned as they came (VIRT_ADDR, PROV_KEY, ALLOCATED,
 * RMA_EVENT select how keys and addresses work); FI_MR_ENDPOINT too when the info grants
 * remote access (cour_attr_pick_mr_mode); others are cleared. The legacy
 * values are returned as legacy values, as fi_mr(3) requires (FI_MR_BASIC is never cleared,
 * and applications of API < 1.5 compare the field against FI_MR_BASIC / FI_MR_SCALABLE);
 * cour_attr_mr_mode() turns any of them into plain mode bits for the domain.
 */
#ifndef COUR_ATTR_H
#define COUR_ATTR_H

/* transmit and receive contexts of one scalable endpoint (cour_sep.c) */
#define COUR_SEP_MAX_CTX 16
/* remote iovecs of one RMA or atomic (cour_rma.c) */
#define COUR_RMA_IOV_MAX 4

#include "cour_fi.h"
#include "util/cour_addr.h"
#include "wire/cour_mac.h"

/* auth_key (fi_domain(3), fi_endpoint(3)): one shared secret per endpoint, which
 * authenticates every datagram (cour_auth.c, wire/cour_mac.h) */
#define COUR_AUTH_KEY_MIN COUR_MAC_KEY_MIN
#define COUR_AUTH_KEY_MAX COUR_MAC_KEY_MAX
#include <sys/socket.h>

/* cour_ep.h carries the same two limits under #ifndef; either header may come first. */
#ifndef COUR_MAX_MSG_SIZE
#define COUR_MAX_MSG_SIZE   ((1ULL << 32) - 1)
#endif
#ifndef COUR_DGRAM_MAX_MSG
#define COUR_DGRAM_MAX_MSG  64920	/* 65000-byte UDP payload less the 80-byte packet header */
#endif
#define COUR_IOV_LIMIT      8
#define COUR_PROTO_VERSION  1
#define COUR_MR_KEY_SIZE    8
#define COUR_CQ_DATA_SIZE   8
/* Alternating bits: one unstructured 64-bit tag, any mask (fi_endpoint(3), mem_tag_format). */
#define COUR_TAG_FORMAT     0xAAAAAAAAAAAAAAAAULL
/*
 * libfabric 2.0 gave mem_tag_format named values below COUR_TAG_MAX_FORMAT (0 FI_TAG_BITS, 1
 * FI_TAG_MPI, 2 FI_TAG_CCL) and left bit fields at and above it. MPI's fields and CCL's single
 * exact-match identifier both fit one 64-bit tag matched under any mask, so courier echoes
 * them; the other values below the bound mean nothing yet and are refused for 2.x callers.
 * 1.x callers never meant a named format: any value of theirs is a bit field. The values are
 * ABI; 1.x headers do not name them.
 */
#define COUR_TAG_MPI        1ULL
#define COUR_TAG_CCL        2ULL
#define COUR_TAG_MAX_FORMAT (1ULL << 16)
#if FI_MAJOR_VERSION >= 2
_Static_assert(FI_TAG_MPI == COUR_TAG_MPI && FI_TAG_CCL == COUR_TAG_CCL &&
	       FI_TAG_MAX_FORMAT == COUR_TAG_MAX_FORMAT, "2.x mem_tag_format values");
#endif
/*
 * FI_SOCKADDR_IP (libfabric 2.3): "an IPv4 or IPv6 address", which is all courier speaks.
 * Accepted wherever FI_SOCKADDR is; an answer always names the concrete FI_SOCKADDR_IN or
 * FI_SOCKADDR_IN6 of its addresses. Older headers do not name it; the value is ABI (a 1.x
 * caller never sends it, so it is taken whatever the caller's version).
 */
#define COUR_SOCKADDR_IP    17
#if FI_VERSION_GE(COUR_FI_VERSION, FI_VERSION(2, 3))
_Static_assert(FI_SOCKADDR_IP == COUR_SOCKADDR_IP, "FI_SOCKADDR_IP");
#endif

/* Returned when the application offers them: they choose how keys and addresses work.
 * FI_MR_LOCAL is never returned: courier needs no local registration, and returning it would
 * force that work on the application (fi_mr(3): the provider clears the bits it does not
 * need). FI_MR_ENDPOINT is kept, outside this mask, when offered with remote access: an
 * application that offers it means to bind its regions, and gets them guarded per endpoint. */
#define COUR_MR_MODE_SUPPORTED (FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | \
				FI_MR_RMA_EVENT)
/* libfabric marks with this flag the queries its utility providers (ofi_rxd, ofi_rxm) make for
 * a core provider to layer over. courier implements reliability itself, so a layered
 * "courier;ofi_rxd" would only shadow courier's own RDM endpoint (it is listed first). */
#define COUR_UTIL_CORE_QUERY   (1ULL << 59)
#define COUR_TX_OP_FLAGS (FI_INJECT | FI_COMPLETION | FI_INJECT_COMPLETE | \
			  FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE)
#define COUR_RX_OP_FLAGS (FI_COMPLETION | FI_MULTI_RECV)

/*
 * The templates, NULL-terminated, best first. Parameter-dependent sizes (tx/rx size,
 * inject_size) are 0 here: use cour_attr_offer() for the values an endpoint really gets.
 */
extern const struct fi_info *const cour_info_templates[];

/* A fresh fi_info (fi_freeinfo it) with what we offer for this endpoint type, parameters
 * applied, no addresses; NULL for a type we do not offer or out of memory. */
struct fi_info *cour_attr_offer(enum fi_ep_type type);

/* Largest inject_size of any endpoint type (FI_COURIER_INJECT_SIZE). */
size_t cour_attr_max_inject(void);

/* mr_mode of an info we returned as plain FI_MR_* bits: FI_MR_BASIC becomes
 * VIRT_ADDR | ALLOCATED | PROV_KEY, FI_MR_SCALABLE becomes 0. */
uint64_t cour_attr_mr_mode(const struct fi_info *info);

/*
 * For fi_domain and fi_endpoint: 0 if info is something cour_getinfo could have returned
 * (attributes within our limits, a concrete endpoint type, well-formed addresses), otherwise
 * -FI_EINVAL with the offending field logged.
 */
int cour_info_check(const struct fi_info *info);

/*
 * Whether a domain's progress lock must be a real mutex, from its threading level and whether
 * a progress thread runs. Progress is domain-wide (cour_domain_progress_locked runs every
 * endpoint of the domain, and any CQ, counter or EQ read runs it), so the levels that let two
 * application threads use different endpoints or CQs of one domain at once (FI_THREAD_SAFE,
 * FI_THREAD_FID, FI_THREAD_ENDPOINT, FI_THREAD_COMPLETION) would run the engine from both
 * together. Only under FI_THREAD_DOMAIN does the application serialise every call into the
 * domain, and then only a progress thread can race it. cour_domain_open takes its answer.
 */
static inline bool cour_attr_lock_needed(enum fi_threading threading, bool progress_thread)
{
	return threading != FI_THREAD_DOMAIN || progress_thread;
}

/* ...and its kind (util/cour_util.h): under FI_THREAD_DOMAIN the progress thread is the only
 * other party, and a spin lock serves; every other level may have many threads waiting. */
static inline enum cour_lock_kind cour_attr_lock_kind(enum fi_threading threading,
						      bool progress_thread)
{
	if (!cour_attr_lock_needed(threading, progress_thread))
		return COUR_LOCK_NONE;
	return threading == FI_THREAD_DOMAIN ? COUR_LOCK_SPIN : COUR_LOCK_MUTEX;
}

/*
 * Where an endpoint opened from an info without src_addr binds: what fi_getinfo picks when no
 * node is named (FI_COURIER_IFACE_ADDR, else loopback) in addr_format's family, port 0.
 */
int cour_attr_default_bind(uint32_t addr_format, struct sockaddr_storage *ss, size_t *len);
/* Where an endpoint (active or passive) opened from info binds: its src_addr, else the
 * default above. 0 or -FI_EINVAL (logged). */
int cour_attr_bind_addr(const struct fi_info *info, struct cour_addr *want);

/* The source and destination addresses fi_getinfo's node, service, flags and hints name
 * (cour_attr_addr.c). */
struct cour_attr_addrs {
	int                     family;		/* AF_INET or AF_INET6 once resolved */
	struct sockaddr_storage src, dest;
	size_t                  src_len, dest_len;	/* 0: no such address */
};
/* Resolve them: 0, or -FI_ENODATA / -FI_EINVAL (logged). */
int cour_attr_resolve(const char *node, const char *service, uint64_t flags,
		      const struct fi_info *hints, struct cour_attr_addrs *a);
/* The socket family of an addr_format (AF_UNSPEC when it names none). */
int cour_format_family(uint32_t addr_format);
/* One application-given address into ss, checked against (or setting) *family: 0 or
 * -FI_EINVAL. */
int cour_attr_take_addr(const char *what, const void *addr, size_t len, int *family,
			struct sockaddr_storage *ss, size_t *ss_len);
/* Put them in fi (src_addr, dest_addr and their lengths): 0 or -FI_ENOMEM. */
int cour_attr_set_addrs(struct fi_info *fi, const struct cour_attr_addrs *a);

#endif /* COUR_ATTR_H */
