#!/bin/sh
# rma_iov: RMA and atomics with several remote iovecs in one process (see rma_iov.c), over
# shared memory (the endpoints share a host) and with it off (UDP only).
exec "$(dirname "$0")/run_shm_both.sh" rma_iov
