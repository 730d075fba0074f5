#include "cour_errno.h"

#include <stddef.h>

#define COUR_ERRNO_STR(name, str) [name] = str,
static const char *const cour_errno_strs[COUR_E_MAX] = { COUR_ERRNO_TABLE(COUR_ERRNO_STR) };
#undef COUR_ERRNO_STR

const char *cour_errno_str(int prov_errno)
{
	if (prov_errno < 0 || prov_errno >= COUR_E_MAX)
		return "unknown courier error";
	return cour_errno_strs[prov_errno];
}
