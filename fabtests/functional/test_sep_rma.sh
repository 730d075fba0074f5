#!/bin/sh
# sep_rma: scalable endpoints opened as Open MPI's btl/ofi opens them (see sep_rma.c), over
# shared memory (the endpoints share a host) and with it off (UDP only).
exec "$(dirname "$0")/run_shm_both.sh" sep_rma
