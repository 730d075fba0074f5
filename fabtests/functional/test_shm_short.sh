#!/bin/sh
# shm_short over two processes on this host, with shared memory (messages go as SHORT
# through the rings), again with FI_COURIER_SHM_LONE=1 (a lone 16 KiB answer would go by
# single copy: the cell injects of phase 4 must go as SHORT all the same), and without shared
# memory (none may): see shm_short.c and run_pair.sh
here=$(dirname "$0")
FI_COURIER_SHM=1 "$here/run_pair.sh" shm_short "$@" || exit $?
FI_COURIER_SHM=1 FI_COURIER_SHM_LONE=1 "$here/run_pair.sh" shm_short "$@" || exit $?
FI_COURIER_SHM=0 exec "$here/run_pair.sh" shm_short "$@"
