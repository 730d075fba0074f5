#!/bin/sh
# sep: a scalable endpoint's transmit and receive contexts in one process (see sep.c), over
# shared memory (the endpoints share a host) and with it off (UDP only).
exec "$(dirname "$0")/run_shm_both.sh" sep
