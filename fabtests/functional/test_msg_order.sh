#!/bin/sh
# msg_order: messages of one size from one sender complete in the order sent (msg_order.c),
# whichever way each travels. The receiver posts its receives in bursts with pauses, so some
# messages find their receive and others arrive first; with the default 64 units (16 KiB) of
# credit, most messages of 64 KiB and more go as requests for lack of credit (RTS|WANT), which
# the receiver adopts into buffers of its own when it can afford them and leaves as requests
# when it cannot; from 128 KiB a message by single copy may be split (the receiver pulls one
# half, the sender writes the other), and completes only when the sender's half is in, so
# those behind it must not overtake it. Sizes 16 KiB, 64 KiB, 200 KiB, 512 KiB (the default
# eager limit) and 1 MiB, untagged (-m) and tagged (-t):
#   1. over UDP (FI_COURIER_SHM=0);
#   2. through shared memory, as configured (courier only: as the provider decides);
#   3. through shared memory with single copy for every lone message (FI_COURIER_SHM_LONE=1),
#      so requests by single copy, plain ones and adopted ones mix;
#   4. courier only: msg_order -F, a 16 KiB and a 20 KiB message sent as a plain request (RTS)
#      and the next one of the size, which would go eagerly (at 16 KiB outside the sequence),
#      behind it (with credit enough that it could): the second must go as a request too
#      (counted in rts_in_order) and complete second.
# Other providers run the first two (FI_COURIER_* mean nothing to them).
# Environment as run_pair.sh (COUR_BUILD, COUR_FT_PROVIDER, COUR_FT_TIMEOUT).
set -u
here=$(cd "$(dirname "$0")" && pwd)
me=test_msg_order.sh
. "$here/shm-common.sh"         # (its setup, pair and statistics helpers)
shm_setup msg_order
sizes=16k,64k,200k,512k,1m

# run NAME ENV: both kinds of receive, with ENV on both sides
run() {
	se=$2 ce=$2
	shm_pair "$1-untagged" "${2:-defaults}, untagged" msg_order -m -S $sizes
	shm_pair "$1-tagged" "${2:-defaults}, tagged" msg_order -t -S $sizes
}

run udp FI_COURIER_SHM=0
if [ "${FI_COURIER_SHM:-1}" != 0 ]; then
	run shm ""
	if [ "${COUR_FT_PROVIDER:-courier}" = courier ]; then
		run lone FI_COURIER_SHM_LONE=1
		se="FI_COURIER_SHM_LONE=1 FI_COURIER_CREDITS=512" ce=$se
		if shm_pair flip "a size changing its way" msg_order -F; then
			n=$(stat "$out/flip/client.out" rts_in_order)
			echo "flip: rts_in_order $n"
			[ "$n" -ge 2 ] || { echo "$me: FAIL: $n eager messages went as RTS, not 2"; fail=1; }
		fi
	fi
fi
shm_end
