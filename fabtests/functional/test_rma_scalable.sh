#!/bin/sh
# rma with application keys and offsets (mr_mode 0): see test_rma.sh
exec "$(dirname "$0")/test_rma.sh" scalable
