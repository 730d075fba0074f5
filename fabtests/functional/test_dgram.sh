#!/bin/sh
# dgram over two processes: see dgram.c and run_pair.sh
exec "$(dirname "$0")/run_pair.sh" dgram "$@"
