#!/bin/sh
# run_star.sh PROGRAM NINIT [ARGS...]: one target and NINIT initiator processes on this host.
# The target runs `PROGRAM -N NINIT ARGS`, each initiator `PROGRAM ARGS 127.0.0.1`, all on one
# free out-of-band port and under timeout; exits 0 only if every process does, and prints
# every output (target first).
# Environment as run_pair.sh (COUR_BUILD, COUR_FT_PROVIDER, COUR_FT_TIMEOUT: default 90 s,
# COUR_FT_OUT_DIR: outputs left there as target.out, init0.out...), and:
#   COUR_STAR_TARGET_ENV   extra "VAR=value ..." for the target
#   COUR_STAR_MIXED=1      every other initiator runs with FI_COURIER_SHM=0 (courier only)
set -u
prog=${1:?usage: run_star.sh PROGRAM NINIT [ARGS...]}
ninit=${2:?usage: run_star.sh PROGRAM NINIT [ARGS...]}
shift 2
build=${COUR_BUILD:-$PWD}
prov=${COUR_FT_PROVIDER:-courier}
tmo=${COUR_FT_TIMEOUT:-90}

case $prog in
*/*) ;;
*) if [ -x "$build/fabtests/functional/$prog" ]; then prog=$build/fabtests/functional/$prog
   else prog=$build/$prog; fi ;;
esac
[ -x "$prog" ] || { echo "run_star.sh: no program $prog" >&2; exit 99; }
if [ -d "$build/.libs" ] && [ -z "${FI_PROVIDER_PATH:-}" ]; then
	FI_PROVIDER_PATH=$build/.libs; export FI_PROVIDER_PATH
fi
case $prov in
*\;*) ;;
*) FI_PROVIDER=${FI_PROVIDER:-^ofi_rxd,ofi_rxm}; export FI_PROVIDER ;;
esac

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null)
[ -n "$port" ] || port=$((20000 + $$ % 20000))
out=$(mktemp -d "${TMPDIR:-/tmp}/run_star.XXXXXX") || exit 99
pids=
cleanup() {
	for p in $pids; do kill -9 "$p" 2>/dev/null; done
	rm -rf "$out"
}
trap cleanup EXIT

env ${COUR_STAR_TARGET_ENV:-} timeout -k 5 "$tmo" "$prog" -p "$prov" -P "$port" \
	-T $((tmo - 5)) -N "$ninit" "$@" >"$out/target" 2>&1 &
tpid=$!
pids=$tpid
i=0
while [ $i -lt "$ninit" ]; do
	shm=${FI_COURIER_SHM:-1}
	[ "${COUR_STAR_MIXED:-0}" = 1 ] && [ $((i % 2)) = 1 ] && shm=0
	FI_COURIER_SHM=$shm timeout -k 5 "$tmo" "$prog" -p "$prov" -P "$port" \
		-T $((tmo - 5)) "$@" 127.0.0.1 >"$out/init$i" 2>&1 &
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
names="target $(i=0; while [ $i -lt "$ninit" ]; do echo init$i; i=$((i + 1)); done)"
for f in $names; do
	echo "---- $f ----"
	cat "$out/$f"
	[ -n "${COUR_FT_OUT_DIR:-}" ] && cp "$out/$f" "$COUR_FT_OUT_DIR/$f.out"
done
if [ $rc -ne 0 ] && grep -q "fi_getinfo.*failed: -61" "$out/target"; then
	exit 77
fi
[ $rc -eq 0 ] || echo "run_star.sh: $(basename "$prog") with $ninit initiators: FAIL (provider $prov)"
exit $rc
