#!/bin/sh
# shm_lone: the copy a same-host message of 16 KiB to 256 KiB takes (proto/cour_cma.c). One
# alone on its way to the peer (a ping-pong's) goes by single copy when the sender's copies
# into rings run slow (across cores' caches): its receiver pulls it, and counts the bytes
# (shm_single_copy_bytes, printed at close with FI_COURIER_STATS=1). In a stream (windows of
# 64 sends) a message posted while a single-copy rendezvous of ours to the peer still waits for
# its CTS goes through the ring, so both processes copy at once: most of the stream's bytes
# must then not be pulled. Below 32 KiB a message must also answer one of the peer's: a 16 KiB
# ping-pong is pulled, a window of 16 KiB sends is not. By default a 16 KiB ping-pong, whose
# messages go to the ring outside the sequence (SHORT) when they go there, must have timed
# them (shm_copy_mbps). FI_COURIER_SHM_LONE=1 takes the
# measured rate's place (this machine's cores may share caches or not); with 0 nothing below
# 256 KiB is pulled; by default either may happen. Every byte is checked in every run (-v).
# Environment as run_pair.sh (COUR_BUILD, COUR_FT_TIMEOUT).
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=${COUR_BUILD:-$PWD}
me=test_shm_lone.sh
bench=$build/fabtests/bench
[ "${COUR_FT_PROVIDER:-courier}" = courier ] || { echo "$me: skipped: courier only"; exit 77; }
if [ "${FI_COURIER_SHM:-1}" = 0 ]; then
	echo "$me: skipped: FI_COURIER_SHM=0 (no shared memory, so no single copy)"
	exit 77
fi
out=$(mktemp -d "${TMPDIR:-/tmp}/shm_lone.XXXXXX") || exit 99
trap 'rm -rf "$out"' EXIT
FI_COURIER_STATS=1
export FI_COURIER_STATS

# pulled DIR: the bytes the server pulled (its shm_single_copy_bytes), or nothing
pulled() {
	grep -o "shm_single_copy_bytes [0-9]*" "$1/server.out" | awk '{ s += $2 } END { print s + 0 }'
}
# run NAME PROGRAM ARGS...: one pair, outputs kept in $out/NAME
run() {
	name=$1; shift
	mkdir -p "$out/$name"
	COUR_FT_OUT_DIR=$out/$name "$here/run_pair.sh" "$@" ||
		{ echo "$me: FAIL: $name did not pass"; exit 1; }
	grep -q "shm_peers 1" "$out/$name/server.out" ||
		{ echo "$me: FAIL: $name: no shared memory"; cat "$out/$name/server.out"; exit 1; }
}

size=65536 n=200
FI_COURIER_SHM_LONE=1
export FI_COURIER_SHM_LONE
run alone "$bench/cour_pingpong" -S 64k -n $n -w 0 -v
if grep -q "shm_copy_fallbacks [1-9]" "$out/alone/server.out" "$out/alone/client.out"; then
	echo "$me: skipped: the kernel refuses single copy here (shm_copy_fallbacks)"
	exit 77
fi
got=$(pulled "$out/alone")
want=$((n * size * 9 / 10))
echo "$me: ping-pong of $n x $size B: the server pulled $got bytes (at least $want)"
[ "$got" -ge "$want" ] || { echo "$me: FAIL: a message alone went through the ring"; exit 1; }

msgs=6400
run stream "$bench/cour_bw" -S 64k -n $msgs -W 64 -w 0 -v
got=$(pulled "$out/stream")
most=$((msgs * size / 2))
echo "$me: stream of $msgs x $size B in windows of 64: the server pulled $got bytes" \
	"(less than $most)"
[ "$got" -lt "$most" ] || { echo "$me: FAIL: a stream went by single copy"; exit 1; }

# below 32 KiB a message must also answer one of the peer's (proto/cour_cma.c): a
# ping-pong's do, a window's (sent back to back) do not
small=16384
run alone16 "$bench/cour_pingpong" -S 16k -n $n -w 0 -v
got=$(pulled "$out/alone16")
want=$((n * small * 9 / 10))
echo "$me: ping-pong of $n x $small B: the server pulled $got bytes (at least $want)"
[ "$got" -ge "$want" ] || { echo "$me: FAIL: an answer of 16 KiB went through the ring"; exit 1; }
run stream16 "$bench/cour_bw" -S 16k -n $msgs -W 64 -w 0 -v
got=$(pulled "$out/stream16")
most=$((msgs * small / 8))
echo "$me: stream of $msgs x $small B in windows of 64: the server pulled $got bytes" \
	"(less than $most)"
[ "$got" -lt "$most" ] || { echo "$me: FAIL: a stream of 16 KiB went by single copy"; exit 1; }

FI_COURIER_SHM_LONE=0
run ring "$bench/cour_pingpong" -S 64k -n $n -w 0 -v
got=$(pulled "$out/ring")
echo "$me: FI_COURIER_SHM_LONE=0: the server pulled $got bytes (at most 64)"
[ "$got" -le 64 ] || { echo "$me: FAIL: a message went by single copy"; exit 1; }

unset FI_COURIER_SHM_LONE
run auto "$bench/cour_pingpong" -S 64k -n $n -w 0 -v
echo "$me: by default: the server pulled $(pulled "$out/auto") bytes"
run auto16 "$bench/cour_pingpong" -S 16k -n $n -w 0 -v
rate=$(grep -o "shm_copy_mbps [0-9]*" "$out/auto16/server.out" | awk '{ print $2 }' | tail -1)
echo "$me: by default, a 16 KiB ping-pong: the server's ring puts copied at ${rate:-?} MB/s," \
	"the server pulled $(pulled "$out/auto16") bytes"
[ "${rate:-0}" -gt 0 ] || { echo "$me: FAIL: the ring's SHORT puts were not timed"; exit 1; }
echo "$me: PASS"
