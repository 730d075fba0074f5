#!/bin/sh
# shm_halo (shm_halo.c): 256 KiB messages between two processes of one host, one way and both
# ways at once, every byte checked. Over courier with shared memory, from 256 KiB a message
# alone on its way is copied by both processes, a part each (split copy); in a halo exchange
# each receiver pulls its whole message, as the other process is busy with ours meanwhile
# (proto/cour_msg_proto.c).
#   1. defaults: the data, and the split copies counted (a progress thread may take the peer's
#      answer to a send before the receive beside it is posted: then that message splits);
#   2. courier with shared memory: without a progress thread (-M manual,
#      FI_COURIER_MANUAL_THREAD=0), where the server asserts (-x) that every one-way message
#      split and no halo message did.
# Environment as run_pair.sh (COUR_BUILD, COUR_FT_PROVIDER, COUR_FT_TIMEOUT).
set -u
here=$(cd "$(dirname "$0")" && pwd)
me=test_shm_halo.sh
. "$here/shm-common.sh"
shm_setup shm_halo
shm_pair halo "256 KiB one way and both ways" shm_halo &&
	grep "split copies" "$out/halo/server.out"
if [ "${COUR_FT_PROVIDER:-courier}" = courier ] && [ "${FI_COURIER_SHM:-1}" != 0 ]; then
	se=FI_COURIER_MANUAL_THREAD=0 ce=$se
	shm_pair exact "no progress thread, split copies asserted" shm_halo -x -M manual &&
		grep "split copies" "$out/exact/server.out"
fi
shm_end
