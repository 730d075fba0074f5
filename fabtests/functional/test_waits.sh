#!/bin/sh
# Sleepers woken by every event source (see waits.c): with automatic progress (the progress
# thread raises the events), and with manual progress and no progress thread (the sleeping
# call's own progress raises them). Environment as run_pair.sh.
here=$(dirname "$0")
"$here/run_pair.sh" waits || exit $?
COUR_FT_SERVER_ENV="FI_COURIER_MANUAL_THREAD=0 ${COUR_FT_SERVER_ENV:-}" \
	exec "$here/run_pair.sh" waits -M manual
