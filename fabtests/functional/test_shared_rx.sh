#!/bin/sh
# shared_rx: shared receive and transmit contexts in one process (see shared_rx.c), over
# shared memory (the endpoints share a host) and with it off (UDP only).
exec "$(dirname "$0")/run_shm_both.sh" shared_rx
