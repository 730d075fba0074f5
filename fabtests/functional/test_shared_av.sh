#!/bin/sh
# shared_av: a named AV shared by a parent and its child process (see shared_av.c).
set -u
build=${COUR_BUILD:-$PWD}
prov=${COUR_FT_PROVIDER:-courier}
prog=$build/fabtests/functional/shared_av
[ -x "$prog" ] || { echo "test_shared_av.sh: no program $prog" >&2; exit 99; }
if [ -d "$build/.libs" ] && [ -z "${FI_PROVIDER_PATH:-}" ]; then
	FI_PROVIDER_PATH=$build/.libs
	export FI_PROVIDER_PATH
fi
timeout -k 5 90 "$prog" "$prov"
rc=$?
# a run that failed half-way leaves its creator's objects behind (stale, but litter)
rm -f /dev/shm/courier-av-"$(id -u)"-courier-test*
exit $rc
