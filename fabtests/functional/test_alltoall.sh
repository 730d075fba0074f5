#!/bin/sh
# alltoall over two processes: see alltoall.c and run_pair.sh
exec "$(dirname "$0")/run_pair.sh" alltoall "$@"
