#!/bin/sh
# msg_cm: FI_EP_MSG connection management in one process (see msg_cm.c). The peer timeout is
# shortened so that a connection to nothing ends (FI_ETIMEDOUT) within the test's bounds.
set -u
build=${COUR_BUILD:-$PWD}
prov=${COUR_FT_PROVIDER:-courier}
prog=$build/fabtests/functional/msg_cm
[ -x "$prog" ] || { echo "test_msg_cm.sh: no program $prog" >&2; exit 99; }
if [ -d "$build/.libs" ] && [ -z "${FI_PROVIDER_PATH:-}" ]; then
	FI_PROVIDER_PATH=$build/.libs
	export FI_PROVIDER_PATH
fi
FI_COURIER_PEER_TIMEOUT=${FI_COURIER_PEER_TIMEOUT:-1500} exec timeout -k 5 60 "$prog" "$prov"
