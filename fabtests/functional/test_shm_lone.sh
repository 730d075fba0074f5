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
# 256 KiB is pulled; by default either may happen. Where a pull is dear before its copy (a
# system call costs about 1 us in some VMs; FI_COURIER_PULL_NS=5000 says so here), a lone
# message goes by single copy only from 128 KiB: a 64 KiB ping-pong is not pulled, a 160 KiB
# one is; FI_COURIER_PULL_NS=0 pulls the 64 KiB one. Every byte is checked in every run (-v).
# Environment as run_pair.sh (COUR_BUILD, COUR_FT_TIMEOUT).
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=${COUR_BUILD:-$PWD}
me=test_shm_lone.sh
bench=$build/fabtests/bench
. "$here/shm-common.sh"
shm_begin shm_lone

# run NAME PROGRAM ARGS...: one pair through shared memory, outputs in $out/NAME; the test
# fails at once if it does
run() {
	_rn=$1 _rp=$2
	shift 2
	shm_pair "$_rn" "$_rp $*" "$bench/$_rp" "$@" || shm_end
	[ "$(stat "$out/$_rn/server.out" shm_peers)" -ge 1 ] ||
		{ echo "$me: FAIL: $_rn: no shared memory"; cat "$out/$_rn/server.out"; exit 1; }
}
# pulled NAME: the bytes the server pulled by single copy
pulled() {
	stat "$out/$1/server.out" shm_single_copy_bytes
}
# lone NAME SIZE: a ping-pong of $n messages of SIZE bytes, at least 90% of its bytes pulled
# (skipped where the kernel refuses single copy)
lone() {
	run "$1" cour_pingpong -S "$2" -n $n -w 0 -v
	if grep -q "shm_copy_fallbacks [1-9]" "$out/$1/server.out" "$out/$1/client.out"; then
		echo "$me: skipped: the kernel refuses single copy here (shm_copy_fallbacks)"
		exit 77
	fi
	got=$(pulled "$1") want=$((n * $2 * 9 / 10))
	echo "$me: ping-pong of $n x $2 B: the server pulled $got bytes (at least $want)"
	[ "$got" -ge "$want" ] || { echo "$me: FAIL: a message alone went through the ring"; exit 1; }
}
# stream NAME SIZE DIV: $msgs messages of SIZE bytes in windows of 64, under 1/DIV of their
# bytes pulled
stream() {
	run "$1" cour_bw -S "$2" -n $msgs -W 64 -w 0 -v
	got=$(pulled "$1") most=$((msgs * $2 / $3))
	echo "$me: stream of $msgs x $2 B in windows of 64: the server pulled $got bytes" \
		"(less than $most)"
	[ "$got" -lt "$most" ] || { echo "$me: FAIL: a stream went by single copy"; exit 1; }
}

n=200 msgs=6400
FI_COURIER_SHM_LONE=1
export FI_COURIER_SHM_LONE
lone alone64 65536
stream stream64 65536 2
# below 32 KiB a message must also answer one of the peer's (proto/cour_cma.c): a
# ping-pong's do, a window's (sent back to back) do not
lone alone16 16384
stream stream16 16384 8

# a dear pull: the ring below 128 KiB (the measured cost is logged at info level)
FI_COURIER_PULL_NS=5000
export FI_COURIER_PULL_NS
run dear64 cour_pingpong -S 65536 -n $n -w 0 -v
got=$(pulled dear64)
echo "$me: FI_COURIER_PULL_NS=5000: a 64 KiB ping-pong: the server pulled $got bytes (at most 64)"
[ "$got" -le 64 ] || { echo "$me: FAIL: a pull is dear, yet 64 KiB went by single copy"; exit 1; }
lone dear160 163840
FI_COURIER_PULL_NS=0
lone cheap64 65536
unset FI_COURIER_PULL_NS

FI_COURIER_SHM_LONE=0
run ring cour_pingpong -S 65536 -n $n -w 0 -v
got=$(pulled ring)
echo "$me: FI_COURIER_SHM_LONE=0: the server pulled $got bytes (at most 64)"
[ "$got" -le 64 ] || { echo "$me: FAIL: a message went by single copy"; exit 1; }

unset FI_COURIER_SHM_LONE
run auto cour_pingpong -S 65536 -n $n -w 0 -v
echo "$me: by default: the server pulled $(pulled auto) bytes"
run auto16 cour_pingpong -S 16384 -n $n -w 0 -v
rate=$(stat "$out/auto16/server.out" shm_copy_mbps)
echo "$me: by default, a 16 KiB ping-pong: the server's ring puts copied at $rate MB/s," \
	"the server pulled $(pulled auto16) bytes"
[ "$rate" -gt 0 ] || { echo "$me: FAIL: the ring's SHORT puts were not timed"; exit 1; }
shm_end
