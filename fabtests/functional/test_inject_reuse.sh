#!/bin/sh
# inject_reuse between two processes on this host (inject_reuse.c): with shared memory (an
# inject above a ring cell goes into the peer's ring from the caller's buffer, or is copied
# when the ring does not take it whole), again with manual progress and no progress thread
# and credit for the whole flood (the ring fills while the server computes), and over UDP
# (always copied). Environment as run_pair.sh.
here=$(dirname "$0")
FI_COURIER_SHM=1 "$here/run_pair.sh" inject_reuse "$@" || exit $?
FI_COURIER_SHM=1 FI_COURIER_MANUAL_THREAD=0 FI_COURIER_CREDITS=16384 \
	FI_COURIER_CREDITS_MAX=16384 "$here/run_pair.sh" inject_reuse -M manual "$@" || exit $?
FI_COURIER_SHM=0 exec "$here/run_pair.sh" inject_reuse "$@"
