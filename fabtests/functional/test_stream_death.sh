#!/bin/sh
# stream_death: kill -9 the receiver of a cour_bw stream (1 MiB messages, over UDP: shared
# memory off) in its middle, with and without a key. The sender must see the error and exit
# cleanly: status 1 and its "failed" line, not a signal. Its close comes after the error
# completions and before it frees its buffers; the provider must not send from a buffer
# whose operation already completed in error, nor linger toward a peer that was reset or
# declared dead. Under the sanitizers (make check in an --enable-sanitizers build) a read of
# freed memory is a failure too.
# Environment as run_pair.sh (COUR_BUILD, COUR_FT_PROVIDER); courier only.
set -u
build=${COUR_BUILD:-$PWD}
prov=${COUR_FT_PROVIDER:-courier}
me=test_stream_death.sh
[ "$prov" = courier ] || { echo "$me: courier only, skipped for $prov"; exit 77; }
prog=$build/fabtests/bench/cour_bw
[ -x "$prog" ] || { echo "$me: no cour_bw in $build" >&2; exit 99; }
if [ -d "$build/.libs" ] && [ -z "${FI_PROVIDER_PATH:-}" ]; then
	FI_PROVIDER_PATH=$build/.libs; export FI_PROVIDER_PATH
fi
FI_PROVIDER=${FI_PROVIDER:-^ofi_rxd,ofi_rxm}; export FI_PROVIDER
FI_COURIER_SHM=0; export FI_COURIER_SHM
out=$(mktemp -d "${TMPDIR:-/tmp}/stream_death.XXXXXX") || exit 99
spid= cpid=
trap 'for p in $spid $cpid; do kill -9 "$p" 2>/dev/null; done; rm -rf "$out"' EXIT
(umask 077 && head -c 32 /dev/urandom >"$out/key") || exit 99

fail() {
	echo "$me: FAIL: $*"
	for f in server client; do
		[ -f "$out/$f" ] && { echo "---- $f ----"; cat "$out/$f"; }
	done
	exit 1
}

# one RUN-NAME [VAR=value...]: a stream killed in its middle
one() {
	name=$1
	shift
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null)
	[ -n "$port" ] || port=$((20000 + $$ % 20000))
	env "$@" timeout -k 5 60 "$prog" -p "$prov" -P "$port" -S 1m -n 100000 -w 0 >"$out/server" 2>&1 &
	spid=$!
	sleep 0.3
	env "$@" timeout -k 5 60 "$prog" -p "$prov" -P "$port" -S 1m -n 100000 -w 0 127.0.0.1 \
		>"$out/client" 2>&1 &
	cpid=$!
	# 100 GiB take tens of seconds even on loopback: 1 s in is the middle
	sleep 1
	kill -0 $cpid 2>/dev/null || fail "$name: the sender ended before the kill"
	# (timeout runs the program as its child)
	kill -9 $(pgrep -P $spid) $spid 2>/dev/null
	wait $spid 2>/dev/null
	spid=
	wait $cpid
	crc=$?
	cpid=
	[ $crc -eq 1 ] || fail "$name: the sender exited $crc (1 expected: the error, then a clean exit)"
	grep -q "failed" "$out/client" || fail "$name: the sender reported no failure"
	grep -qi "sanitizer\|runtime error" "$out/client" && fail "$name: sanitizer report"
	echo "$me: $name: sender: $(grep failed "$out/client" | head -n 1)"
}

one unkeyed
one keyed FI_COURIER_AUTH_KEY_FILE="$out/key"
echo "$me: PASS"
exit 0
