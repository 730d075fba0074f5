#!/bin/sh
# rma_iov: RMA and atomics with several remote iovecs in one process (see rma_iov.c), over
# shared memory (the endpoints share a host) and with it off (UDP only).
set -u
build=${COUR_BUILD:-$PWD}
prov=${COUR_FT_PROVIDER:-courier}
prog=$build/fabtests/functional/rma_iov
[ -x "$prog" ] || { echo "test_rma_iov.sh: no program $prog" >&2; exit 99; }
if [ -d "$build/.libs" ] && [ -z "${FI_PROVIDER_PATH:-}" ]; then
	FI_PROVIDER_PATH=$build/.libs
	export FI_PROVIDER_PATH
fi
rc=0
for shm in 1 0; do
	echo "FI_COURIER_SHM=$shm"
	FI_COURIER_SHM=$shm timeout -k 5 60 "$prog" "$prov" || rc=1
done
exit $rc
