#!/bin/sh
# threads: one FI_THREAD_SAFE endpoint per process driven by 4 threads at once (tagged
# messages 0 B .. 1 MiB both ways, fetch-adds on one counter, RMA write and read-back), with
# the provider's progress model and again with manual progress, where the threads' CQ reads
# are all the progress there is; see threads.c and run_pair.sh.
set -u
here=$(dirname "$0")
COUR_FT_TIMEOUT=${COUR_FT_TIMEOUT:-120}; export COUR_FT_TIMEOUT
rc=0
for mode in "" "-M manual"; do
	echo "---- threads -j 4 -n 200 ${mode:-(default progress)}"
	# shellcheck disable=SC2086
	"$here/run_pair.sh" threads -j 4 -n 200 -T 100 $mode
	r=$?
	[ $r = 0 ] || { echo "test_threads.sh: FAIL: threads ${mode:-} (exit $r)"; rc=$r; }
done
exit $rc
