#!/bin/sh
# OpenSHMEM's waits (see shmem_wait.c): a target asleep in fi_cntr_wait on a counter bound to
# its region, woken by fetch-adds, swaps and compare-swaps, and a compare-swap lock, with 1
# and 7 initiators (2 and 8 processes), in both key modes; over courier with shared memory on,
# every other initiator keeps to UDP. Environment as run_star.sh.
set -u
here=$(cd "$(dirname "$0")" && pwd)
mixed=0
[ "${COUR_FT_PROVIDER:-courier}" = courier ] && [ "${FI_COURIER_SHM:-1}" != 0 ] && mixed=1
COUR_STAR_MIXED=$mixed "$here/run_star.sh" shmem_wait 1 -n 200 -k basic || exit $?
COUR_STAR_MIXED=$mixed "$here/run_star.sh" shmem_wait 2 -n 100 -k scalable || exit $?
exec env COUR_STAR_MIXED=$mixed "$here/run_star.sh" shmem_wait 7 -n 30 -k basic
