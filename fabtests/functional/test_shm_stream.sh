#!/bin/sh
# shm_stream: stream_verify (>= 64 MiB, 1 B .. 4 MiB, every byte checked) between two processes
# of this host, so through courier's shared memory: single copy and split copy (both
# processes copying one message at once) under a sender that refills each buffer the moment
# its send completes. A send that completes while the receiver still reads its buffer fails
# here. Environment as run_pair.sh.
exec "$(dirname "$0")/run_pair.sh" stream_verify -b 64 "$@"
