#!/bin/sh
# shm_hello_lost: two processes of this host find each other through a HELLO, one unsequenced
# UDP datagram each way; a full socket buffer can lose it. Here fault injection
# (FI_COURIER_FAULT=hello=N) drops the first N HELLOs of the client, then of the server, then
# of both, under stream_verify -b 64 (>= 64 MiB, every byte checked). Each run must pass, and by
# the statistics both sides must still have mapped each other's ring (shm_peers >= 1), the
# stream must have gone through it (the client's shm_tx_pkts and the server's shm_rx_pkts
# >= 1), and the faulted side must have dropped its N HELLOs (fault_drop >= N): courier asks
# again when a HELLO goes unanswered. Skips (77) over another provider or with
# FI_COURIER_SHM=0. Environment as run_pair.sh.
set -u

here=$(cd "$(dirname "$0")" && pwd)
me=test_shm_hello_lost.sh
. "$here/shm-common.sh"
shm_begin shm_hello_lost

# check NAME SIDE DROPPED RING_STAT: the statistics of one side
check() {
	f=$out/$1/$2.out
	grep "^courier stats .*shm_peers" "$f" | sed "s/^/  $2: /"
	peers=$(stat "$f" shm_peers)
	ring=$(stat "$f" "$4")
	drops=$(stat "$f" fault_drop)
	bad=
	[ "$peers" -ge 1 ] || bad="$bad shm_peers $peers (it never mapped its peer's ring);"
	[ "$ring" -ge 1 ] || bad="$bad $4 $ring (the stream did not go through shared memory);"
	[ "$drops" -ge "$3" ] || bad="$bad fault_drop $drops, want >= $3 (HELLOs not dropped);"
	if [ -n "$bad" ]; then
		echo "$me: FAIL: $1: $2:$bad"
		fail=1
	fi
}

# run NAME SERVER_DROPS CLIENT_DROPS
run() {
	se='' ce=''
	[ "$2" = 0 ] || se=FI_COURIER_FAULT=hello=$2
	[ "$3" = 0 ] || ce=FI_COURIER_FAULT=hello=$3
	shm_pair "$1" "server drops its first $2 HELLOs, client its first $3" \
		stream_verify -b 64 || return
	check "$1" server "$2" shm_rx_pkts
	check "$1" client "$3" shm_tx_pkts
}

run client_lost 0 2
run server_lost 2 0
run both_lost 3 3
shm_end
