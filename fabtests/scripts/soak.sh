#!/usr/bin/env bash
# soak.sh BUILDDIR [N]: every functional test (fabtests/functional/test_*.sh) N times in a row
# (default 10), against the build in BUILDDIR (an ASan build soaks under ASan), and a table of
# failures per test. Exits 1 if any run failed; each failing run's output is kept.
# Environment:
#   HOGS=K       K busy processes beside the tests (default 0), as a loaded CI machine
#   SOAK_TESTS   the test scripts to run, by name (default: all)
#   SOAK_TIMEOUT seconds one run may take (default 300)
set -uo pipefail
build=$(cd "${1:?usage: soak.sh BUILDDIR [N]}" && pwd)
n=${2:-10}
here=$(cd "$(dirname "$0")/../functional" && pwd)
hogs=${HOGS:-0}
tmo=${SOAK_TIMEOUT:-300}
keep=$(mktemp -d "${TMPDIR:-/tmp}/soak.XXXXXX")
hog_pids=()
cleanup() { for p in "${hog_pids[@]}"; do kill "$p" 2>/dev/null; done; }
trap cleanup EXIT
for ((h = 0; h < hogs; h++)); do
	( while :; do :; done ) &
	hog_pids+=($!)
done
tests=${SOAK_TESTS:-$(cd "$here" && ls test_*.sh)}
export COUR_BUILD=$build
total_fail=0
printf '%-34s %5s %5s %9s\n' test runs fails "mean s"
for t in $tests; do
	fails=0 secs=0
	for ((i = 1; i <= n; i++)); do
		t0=$SECONDS
		(cd "$build" && timeout -k 10 "$tmo" sh "$here/$t") >"$keep/$t.$i.log" 2>&1
		rc=$?
		secs=$((secs + SECONDS - t0))
		if [ $rc = 77 ]; then
			rm -f "$keep/$t.$i.log"; fails=skip; break
		elif [ $rc != 0 ]; then
			fails=$((fails + 1))
		else
			rm -f "$keep/$t.$i.log"
		fi
	done
	[ "$fails" = skip ] && { printf '%-34s %5s %5s\n' "$t" - skipped; continue; }
	printf '%-34s %5d %5d %9.1f\n' "$t" "$n" "$fails" "$(awk -v s="$secs" -v n="$n" 'BEGIN { print s / n }')"
	total_fail=$((total_fail + fails))
done
echo "soak: $n runs of each test, $hogs hogs: $total_fail failed runs"
if [ $total_fail -gt 0 ]; then
	echo "soak: outputs of the failed runs kept in $keep"; exit 1
fi
rm -rf "$keep"
