#!/bin/sh
# msg_errors over two processes: see msg_errors.c and run_pair.sh
exec "$(dirname "$0")/run_pair.sh" msg_errors "$@"
