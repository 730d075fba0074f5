#!/bin/sh
# trigger: triggered operations and endpoint aliases in one process (see trigger.c), over
# shared memory (the endpoints share a host) and with it off (UDP only).
exec "$(dirname "$0")/run_shm_both.sh" trigger
