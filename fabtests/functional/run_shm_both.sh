#!/bin/sh
# run_shm_both.sh PROG: run a standalone functional test (one process, or a parent and its
# child; it exits 0 when every check held) over shared memory and with it off (UDP only),
# 60 s at most each. The test_*.sh wrappers of those programs call this.
set -u
prog_name=$1
build=${COUR_BUILD:-$PWD}
prov=${COUR_FT_PROVIDER:-courier}
prog=$build/fabtests/functional/$prog_name
[ -x "$prog" ] || { echo "run_shm_both.sh: no program $prog" >&2; exit 99; }
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
