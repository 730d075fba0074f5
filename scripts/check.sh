#!/usr/bin/env bash
# check.sh BUILDDIR [MAKE ARGS...]: make check in BUILDDIR; prints the summary (and anything but
# passes), or on failure the end of the output and of each failed test's log. Exit: make's.
set -u
dir=$1; shift
if make -C "$dir" -j2 check "$@" >"$dir/check.out" 2>&1; then
	grep -E "^(# |PASS|FAIL|XFAIL|ERROR|SKIP)" "$dir/check.out" | grep -v "^PASS" || true
	grep -E "^# (TOTAL|PASS|FAIL)" "$dir/check.out"
	exit 0
fi
tail -40 "$dir/check.out"
for log in $(grep -l -E "^(FAIL|ERROR)" $(find "$dir" -name "*.log" -path "*test*") 2>/dev/null); do
	echo "--- $log"; tail -30 "$log"
done
exit 1
