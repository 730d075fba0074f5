#!/bin/sh
# msg_basic over two processes: see msg_basic.c and run_pair.sh
exec "$(dirname "$0")/run_pair.sh" msg_basic "$@"
