#!/bin/sh
# shm_halo (shm_halo.c): 256 KiB messages between two processes of one host, one way and both
# ways at once, every byte checked. Over courier with shared memory, from 256 KiB a message
# alone on its way is copied by both processes, a part each (split copy); in a halo exchange
# each receiver pulls its whole message, as the other process is busy with ours meanwhile
# (proto/cour_msg_proto.c), so the server asserts (-x) that every one-way message split and
# fewer than half of the halo's did. Other providers, or shared memory off: the data only.
# Environment as run_pair.sh (COUR_BUILD, COUR_FT_PROVIDER, COUR_FT_TIMEOUT).
set -u
here=$(cd "$(dirname "$0")" && pwd)
me=test_shm_halo.sh
. "$here/shm-common.sh"
shm_setup shm_halo
x=
[ "${COUR_FT_PROVIDER:-courier}" = courier ] && [ "${FI_COURIER_SHM:-1}" != 0 ] && x=-x
shm_pair halo "256 KiB one way and both ways${x:+, split copies asserted}" shm_halo $x &&
	grep "split copies" "$out/halo/server.out"
shm_end
