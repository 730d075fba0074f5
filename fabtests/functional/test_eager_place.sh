#!/bin/sh
# eager_place: eager messages over UDP read straight into their receive (proto/cour_msg_place.c).
# Between hosts a message up to FI_COURIER_EAGER_MAX goes in EAGER packets; the wire reads a
# big datagram, or a GRO train of them, into the place the engine names: the posted receive
# for a message's first packet, the receive it matched or its unexpected copy for the rest.
# Counted in rx_in_place (FI_COURIER_STATS=1). Over lo with packets the size of an MTU of 1500
# (GRO trains), of 9000 and of lo's own 64 KiB (FI_COURIER_MTU):
#   1. a stream of 16 KiB, 64 KiB and 200 KiB messages (all eager), every byte checked (-v):
#      at least 80% of the server's datagrams must have been read in place (with 64 KiB
#      packets, some: a short run there sends many messages as RTS, short of credit; with
#      1472 B packets 60%, and the client must have padded datagrams (udp_pads): a GSO run
#      goes on past a message's end, and the next message's pieces in that train come
#      through a packet buffer);
#   2. msg_basic (every send and receive form, receives of 3 iovecs, 100 messages sent
#      before their receives), msg_errors (truncated and discarded receives) and stream_verify (receives posted larger, their spare bytes
#      checked untouched; sizes across every protocol edge) must pass.
# Environment as run_pair.sh (COUR_BUILD, COUR_FT_TIMEOUT).
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=${COUR_BUILD:-$PWD}
me=test_eager_place.sh
bench=$build/fabtests/bench
[ "${COUR_FT_PROVIDER:-courier}" = courier ] || { echo "$me: skipped: courier only"; exit 77; }
. "$here/shm-common.sh"       # (its setup, pair and statistics helpers: no shared memory here)
shm_setup eager_place
FI_COURIER_SHM=0
export FI_COURIER_SHM

# run NAME PROGRAM ARGS...: one pair, outputs in $out/NAME; the test fails at once if it does
run() {
	_rn=$1
	shift
	shm_pair "$_rn" "packets of $mtu B" "$@" || shm_end
}

# UDP payload per packet: for an MTU of 1500, of 9000, and lo's default (0: 65000)
for mtu in 1472 8972 0; do
	FI_COURIER_MTU=$mtu
	export FI_COURIER_MTU
	run "stream$mtu" "$bench/cour_bw" -S 16k,64k,200k -n 1024 -w 0 -v
	placed=$(stat "$out/stream$mtu/server.out" rx_in_place)
	pkts=$(stat "$out/stream$mtu/server.out" rx_pkts)
	echo "$me: packets of $mtu B (0: 65000): $placed of the server's $pkts datagrams read in place"
	want=$((pkts * 8 / 10))
	[ "$mtu" = 0 ] && want=1
	if [ "$mtu" = 1472 ]; then
		# a message's last datagram is padded and the GSO run goes on into the next
		# message, whose pieces in that train come through a packet buffer
		pads=$(stat "$out/stream$mtu/client.out" udp_pads)
		echo "$me: packets of $mtu B: the client padded $pads datagrams into GSO runs"
		[ "${pads:-0}" -gt 0 ] || { echo "$me: FAIL: no datagram padded"; exit 1; }
		want=$((pkts * 6 / 10))
	fi
	[ "$pkts" -gt 0 ] && [ "$placed" -ge "$want" ] ||
		{ echo "$me: FAIL: eager data went through packet buffers"; exit 1; }
	run "basic$mtu" msg_basic
	run "errors$mtu" msg_errors
	run "verify$mtu" stream_verify -b 64
done
shm_end
