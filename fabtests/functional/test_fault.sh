#!/bin/sh
# fault: 20 MB through courier's fault injector on both sides, checksums on; see fault.c.
FI_COURIER_FAULT=${FI_COURIER_FAULT:-drop=5,dup=2,reorder=2,corrupt=1,seed=7}
FI_COURIER_CHECKSUM=1
export FI_COURIER_FAULT FI_COURIER_CHECKSUM
exec "$(dirname "$0")/run_pair.sh" fault "$@"
