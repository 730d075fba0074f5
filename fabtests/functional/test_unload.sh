#!/bin/sh
# unload: a domain and a passive endpoint left open at exit (see unload.c). The process must
# exit cleanly, and courier must say at warn level that it stopped their two threads. A crash
# here was a race with the unload (an ASan build's slow exit widened it): five runs.
set -u
build=${COUR_BUILD:-$PWD}
bin=$build/fabtests/functional/unload
[ -x "$bin" ] || { echo "unload: no program $bin" >&2; exit 99; }
if [ -d "$build/.libs" ] && [ -z "${FI_PROVIDER_PATH:-}" ]; then
	FI_PROVIDER_PATH=$build/.libs
	export FI_PROVIDER_PATH
fi
export FI_PROVIDER=courier FI_LOG_LEVEL=warn
# what is left open is the test: a sanitizer build must not call it a leak
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
export ASAN_OPTIONS
log=$(mktemp); trap 'rm -f "$log"' EXIT
for i in 1 2 3 4 5; do
	if ! timeout -k 5 60 "$bin" >"$log" 2>&1; then
		echo "unload: run $i failed:"; cat "$log"; exit 1
	fi
	if ! grep -q "2 provider thread(s) still ran at unload" "$log"; then
		echo "unload: run $i: no log line naming the two threads stopped:"; cat "$log"; exit 1
	fi
done
echo "unload: 5 runs exited cleanly, both threads stopped at unload"
