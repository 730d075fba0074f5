#!/bin/sh
# atomic hammer: one target and COUR_HAMMER_INITIATORS (default 4) initiator processes, each
# doing COUR_HAMMER_N (default 1000) FI_SUM and as many FI_CSWAP increments of one counter;
# the final value must be exact. See atomic_hammer.c. Environment as run_star.sh; extra
# arguments go to every process (e.g. -k scalable).
# Over courier with shared memory on, every other initiator turns it off: the target then
# takes atomics on one counter from the rings and from its socket at once, and its statistics
# must show both (atomic against each other whichever wire brought them).
set -u
here=$(cd "$(dirname "$0")" && pwd)
prov=${COUR_FT_PROVIDER:-courier}
ninit=${COUR_HAMMER_INITIATORS:-4}
mixed=0
[ "$prov" = courier ] && [ "${FI_COURIER_SHM:-1}" != 0 ] && [ "$ninit" -ge 2 ] && mixed=1
out=$(mktemp -d "${TMPDIR:-/tmp}/atomic_hammer.XXXXXX") || exit 99
trap 'rm -rf "$out"' EXIT
COUR_FT_OUT_DIR=$out COUR_STAR_MIXED=$mixed COUR_STAR_TARGET_ENV=FI_COURIER_STATS=1 \
	"$here/run_star.sh" atomic_hammer "$ninit" -n "${COUR_HAMMER_N:-1000}" "$@"
rc=$?
[ $rc -eq 0 ] || exit $rc
if [ $mixed = 1 ]; then
	want=$((ninit / 2))
	if ! grep -q "shm_peers $want shm_tx_pkts [1-9][0-9]* shm_rx_pkts [1-9]" "$out/target.out"; then
		echo "test_atomic_hammer.sh: the target did not hear $want initiators through shared" \
			"memory (the others over UDP)"
		exit 1
	fi
fi
exit 0
