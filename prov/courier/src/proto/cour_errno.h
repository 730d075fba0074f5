/*
 * Provider error codes (prov_errno in fi_cq_err_entry), each with the string fi_cq_strerror
 * gives. One table, cour_errno.c, generates both.
 */
#ifndef COUR_ERRNO_H
#define COUR_ERRNO_H

#define COUR_ERRNO_TABLE(X) \
	X(COUR_E_OK,          "success") \
	X(COUR_E_TRUNC,       "receive buffer smaller than the message") \
	X(COUR_E_CANCELED,    "operation canceled by fi_cancel") \
	X(COUR_E_UNREACHABLE, "peer unreachable: no acknowledgement within FI_COURIER_PEER_TIMEOUT") \
	X(COUR_E_PEER_RESET,  "peer restarted (new session): operations to the old session are lost") \
	X(COUR_E_NOMSG,       "FI_PEEK found no matching message") \
	X(COUR_E_BAD_ADDR,    "destination fi_addr_t not in the address vector") \
	X(COUR_E_EP_CLOSED,   "endpoint closed with the operation pending") \
	X(COUR_E_SEND,        "the wire refused the packet (see the log)") \
	X(COUR_E_BAD_KEY,     "remote key not registered at the target") \
	X(COUR_E_BOUNDS,      "remote access outside the registered region") \
	X(COUR_E_ACCESS,      "region not registered for this kind of remote access") \
	X(COUR_E_REMOTE,      "target rejected the operation") \
	X(COUR_E_PROTOCOL,    "peer broke the protocol (or a forged packet reached the session): session reset") \
	X(COUR_E_CMA_REFUSED, "single copy refused by the kernel: sent again through shared memory") \
	X(COUR_E_NO_ROUTE,    "peer unreachable: no route from this endpoint's address (bound to loopback? see FI_COURIER_IFACE_ADDR)")

#define COUR_ERRNO_ENUM(name, str) name,
enum cour_errno { COUR_ERRNO_TABLE(COUR_ERRNO_ENUM) COUR_E_MAX };
#undef COUR_ERRNO_ENUM

const char *cour_errno_str(int prov_errno);
/* The positive FI_* err that goes with a prov_errno in an error completion. */
int cour_errno_fi(int prov_errno);

#endif
