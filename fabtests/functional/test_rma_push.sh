#!/bin/sh
# rma_push over two processes: same-host writes the initiator copies into the target's region
# itself land, are counted at the target, refuse bad ranges and keys, and stop at once when the
# region closes under them; the same without FI_RMA_EVENT (no notices); then with pushing
# turned off (FI_COURIER_SHM_PUSH=0), which must push nothing. See rma_push.c.
d=$(dirname "$0")
"$d/run_pair.sh" rma_push || exit 1
# nothing counts remote writes: the pushes send the target nothing
"$d/run_pair.sh" rma_push -x quiet || exit 1
FI_COURIER_SHM_PUSH=0 "$d/run_pair.sh" rma_push
