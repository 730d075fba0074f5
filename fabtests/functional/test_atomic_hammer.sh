#!/bin/sh
# atomic hammer: one target and COUR_HAMMER_INITIATORS (default 4) initiator processes, each
# doing COUR_HAMMER_N (default 1000) FI_SUM and as many FI_CSWAP increments of one counter;
# the final value must be exact. See atomic_hammer.c. Environment as run_pair.sh (COUR_BUILD,
# COUR_FT_PROVIDER, COUR_FT_TIMEOUT: default 90 s); extra arguments go to every process
# (e.g. -k scalable).
# Over courier with shared memory on, every other initiator turns it off: the target then
# takes atomics on one counter from the rings and from its socket at once, and its statistics
# must show both (atomic against each other whichever wire brought them).
set -u
build=${COUR_BUILD:-$PWD}
prov=${COUR_FT_PROVIDER:-courier}
tmo=${COUR_FT_TIMEOUT:-90}
ninit=${COUR_HAMMER_INITIATORS:-4}
niter=${COUR_HAMMER_N:-1000}

prog=$build/fabtests/functional/atomic_hammer
[ -x "$prog" ] || prog=$build/atomic_hammer
[ -x "$prog" ] || { echo "test_atomic_hammer.sh: no atomic_hammer program in $build" >&2; exit 99; }
if [ -d "$build/.libs" ] && [ -z "${FI_PROVIDER_PATH:-}" ]; then
	FI_PROVIDER_PATH=$build/.libs; export FI_PROVIDER_PATH
fi
case $prov in
*\;*) ;;
*) FI_PROVIDER=${FI_PROVIDER:-^ofi_rxd,ofi_rxm}; export FI_PROVIDER ;;
esac

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null)
[ -n "$port" ] || port=$((20000 + $$ % 20000))
out=$(mktemp -d "${TMPDIR:-/tmp}/atomic_hammer.XXXXXX") || exit 99
pids=
cleanup() {
	for p in $pids; do kill -9 "$p" 2>/dev/null; done
	rm -rf "$out"
}
trap cleanup EXIT

mixed=0
[ "$prov" = courier ] && [ "${FI_COURIER_SHM:-1}" != 0 ] && [ "$ninit" -ge 2 ] && mixed=1
FI_COURIER_STATS=1 timeout -k 5 "$tmo" "$prog" -p "$prov" -P "$port" -T $((tmo - 5)) \
	-N "$ninit" "$@" >"$out/target" 2>&1 &
tpid=$!
pids=$tpid
i=0
while [ $i -lt "$ninit" ]; do
	shm=${FI_COURIER_SHM:-1}
	[ $mixed = 1 ] && [ $((i % 2)) = 1 ] && shm=0
	FI_COURIER_SHM=$shm timeout -k 5 "$tmo" "$prog" -p "$prov" -P "$port" \
		-T $((tmo - 5)) -n "$niter" "$@" 127.0.0.1 >"$out/init$i" 2>&1 &
	pids="$pids $!"
	eval "ipid$i=$!"
	i=$((i + 1))
done

rc=0
i=0
while [ $i -lt "$ninit" ]; do
	eval "p=\$ipid$i"
	wait "$p" || rc=1
	i=$((i + 1))
done
wait $tpid || rc=1
pids=
for f in target $(i=0; while [ $i -lt "$ninit" ]; do echo init$i; i=$((i + 1)); done); do
	echo "---- $f ----"
	cat "$out/$f"
done
if [ $rc -ne 0 ] && grep -q "fi_getinfo.*failed: -61" "$out/target"; then
	exit 77
fi
if [ $rc -eq 0 ] && [ $mixed = 1 ]; then
	want=$((ninit / 2))
	if ! grep -q "shm_peers $want shm_tx_pkts [1-9][0-9]* shm_rx_pkts [1-9]" "$out/target"; then
		echo "test_atomic_hammer.sh: the target did not hear $want initiators through shared" \
			"memory (the others over UDP)"
		rc=1
	fi
fi
[ $rc -eq 0 ] || echo "test_atomic_hammer.sh: FAIL (provider $prov)"
exit $rc
