#!/bin/sh
# rma sleep: the target sleeps 5 s without a libfabric call while the initiator writes, reads
# and runs atomics on its memory; see rma.c and run_pair.sh. Once in auto progress, and once
# in manual progress, where courier's progress thread still serves the target (MPICH asks
# for manual progress, and its atomics waited for the target to poll).
d=$(dirname "$0")
"$d/run_pair.sh" rma -x sleep || exit $?
exec "$d/run_pair.sh" rma -x sleep -M manual
