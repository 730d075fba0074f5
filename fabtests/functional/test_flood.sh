#!/bin/sh
# Receive limits and close (see flood.c): 4 x 1024 tagged messages against receives posted
# first (beyond rx_attr->size), and injected first by a sender that closes at once, before any
# receive is posted. Environment as run_pair.sh.
here=$(dirname "$0")
"$here/run_pair.sh" flood -o recv-first || exit $?
exec "$here/run_pair.sh" flood -o send-first
