#!/bin/sh
# shm_short over two processes on this host, with shared memory (messages go as SHORT
# through the rings), its cell injects alone after the warm-up with FI_COURIER_SHM_LONE=1 (a
# lone 16 KiB answer would go by single copy: they must go as SHORT all the same, and the
# first, short of credit, must ask for more), and without shared memory (none may go as
# SHORT): see shm_short.c and run_pair.sh
here=$(dirname "$0")
FI_COURIER_SHM=1 "$here/run_pair.sh" shm_short "$@" || exit $?
FI_COURIER_SHM=1 FI_COURIER_SHM_LONE=1 COUR_SHM_SHORT_CELLS=1 "$here/run_pair.sh" shm_short "$@" ||
	exit $?
FI_COURIER_SHM=0 exec "$here/run_pair.sh" shm_short "$@"
