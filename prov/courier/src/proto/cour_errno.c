#include "proto/cour_errno.h"

#include <stddef.h>
#include <rdma/fi_errno.h>

#define COUR_ERRNO_STR(name, str) [name] = str,
static const char *const cour_errno_strs[COUR_E_MAX] = { COUR_ERRNO_TABLE(COUR_ERRNO_STR) };
#undef COUR_ERRNO_STR

const char *cour_errno_str(int prov_errno)
{
	if (prov_errno < 0 || prov_errno >= COUR_E_MAX)
		return "unknown courier error";
	return cour_errno_strs[prov_errno];
}

int cour_errno_fi(int prov_errno)
{
	switch (prov_errno) {
	case COUR_E_OK:          return 0;
	case COUR_E_TRUNC:       return FI_ETRUNC;
	case COUR_E_CANCELED:    return FI_ECANCELED;
	case COUR_E_UNREACHABLE: return FI_EHOSTUNREACH;
	case COUR_E_NO_ROUTE:    return FI_EHOSTUNREACH;
	case COUR_E_PEER_RESET:  return FI_ECONNRESET;
	case COUR_E_NOMSG:       return FI_ENOMSG;
	case COUR_E_BAD_ADDR:    return FI_EINVAL;
	case COUR_E_EP_CLOSED:   return FI_ECANCELED;
	case COUR_E_BAD_KEY:     return FI_EACCES;   /* no such key: not ours to touch */
	case COUR_E_ACCESS:      return FI_EACCES;
	case COUR_E_BOUNDS:      return FI_EINVAL;   /* a key we know, an address outside it */
	default:                 return FI_EIO;
	}
}
