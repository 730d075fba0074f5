#!/bin/sh
# rma sleep: the target, in auto progress, sleeps 5 s without a libfabric call while the
# initiator writes, reads and runs atomics on its memory; see rma.c and run_pair.sh.
exec "$(dirname "$0")/run_pair.sh" rma -x sleep
