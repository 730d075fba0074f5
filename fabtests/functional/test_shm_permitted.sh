#!/bin/sh
# shm_permitted: FI_OPT_SHARED_MEMORY_PERMITTED false on one side keeps the pair on UDP. Runs
# two-process tests over 127.0.0.1 (same host, so shared memory by default) three ways:
#   neither side sets it   both sides must have mapped the other's ring (shm_peers >= 1) and
#                          moved packets through it (shm_tx_pkts >= 1)
#   server -D, client -D   the endpoint that said no and its peer must both show shm_peers 0
#                          and shm_tx_pkts 0: the refusing side offers no ring, and does not
#                          map the one it is offered
# with stream_verify (1 B .. 4 MiB tagged and untagged, every byte checked) and rma (write,
# read, writedata up to 4 MiB, checked). Every run must pass with its data intact.
# Skips (77) over another provider and with FI_COURIER_SHM=0. Environment as run_pair.sh.
set -u

here=$(cd "$(dirname "$0")" && pwd)
build=${COUR_BUILD:-$PWD}
me=test_shm_permitted.sh
. "$here/shm-common.sh"

shm_begin shm_permitted

# check NAME SIDE WANT(shm|udp)
check() {
	f=$out/$1/$2.out
	grep "^courier stats .*shm_peers" "$f" | sed "s/^/  $2: /"
	peers=$(stat "$f" shm_peers)
	tx=$(stat "$f" shm_tx_pkts)
	udp=$(stat "$f" tx_pkts)
	bad=
	if [ "$3" = shm ]; then
		[ "$peers" -ge 1 ] || bad="$bad shm_peers $peers, want >= 1;"
		[ "$tx" -ge 1 ] || bad="$bad shm_tx_pkts $tx, want >= 1;"
	else
		[ "$peers" = 0 ] || bad="$bad shm_peers $peers, want 0;"
		[ "$tx" = 0 ] || bad="$bad shm_tx_pkts $tx, want 0;"
		[ "$udp" -ge 1 ] || bad="$bad tx_pkts $udp, want >= 1;"
	fi
	if [ -n "$bad" ]; then
		echo "$me: FAIL: $1: $2:$bad"
		fail=1
	fi
}

# run NAME WHO(none|server|client) PROGRAM ARGS...
run() {
	name=$1 who=$2
	shift 2
	sa='' ca='' want=udp
	case $who in
	server) sa=-D ;;
	client) ca=-D ;;
	none) want=shm ;;
	esac
	shm_pair "$name" "$* with shared memory not permitted by: $who" "$@" || return
	check "$name" server $want
	check "$name" client $want
}

for who in none server client; do
	run "stream_$who" $who stream_verify -b 8
	run "rma_$who" $who rma -k basic -S 1,4097,65537,1m,4m
done
shm_end
