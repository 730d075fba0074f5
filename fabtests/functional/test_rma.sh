#!/bin/sh
# rma over two processes: every size 1 B .. 64 MiB, write, read and writedata, data, remote CQ
# data and counters checked; see rma.c and run_pair.sh.
# test_rma.sh [basic|scalable]: provider keys and virtual addresses (default), or application
# keys and offsets (mr_mode 0).
mode=${1:-basic}
# (64 MiB under ThreadSanitizer takes 20 s a transfer: the sanitizer stages give more time)
COUR_FT_TIMEOUT=${COUR_FT_TIMEOUT:-90}; export COUR_FT_TIMEOUT
exec "$(dirname "$0")/run_pair.sh" rma -k "$mode" -T $((COUR_FT_TIMEOUT - 10))
