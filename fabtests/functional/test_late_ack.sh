#!/bin/sh
# late_ack over UDP between two processes on this host (late_ack.c): a send to a peer that
# computes completes while it computes, by a probe to its doorbell; and with probes off
# (FI_COURIER_NUDGE=0) none is sent and none rings, the send completing when the peer's
# progress thread ends its nap. Environment as run_pair.sh.
here=$(dirname "$0")
FI_COURIER_SHM=0 "$here/run_pair.sh" late_ack "$@" || exit $?
FI_COURIER_SHM=0 FI_COURIER_NUDGE=0 exec "$here/run_pair.sh" late_ack "$@"
