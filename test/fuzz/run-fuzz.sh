#!/bin/sh
# Build test/fuzz/fuzz_rx.c with the provider's sources under libFuzzer, ASan and UBSan, and run
# it for a bounded time from a seed corpus of captured packets.
#
#   test/fuzz/run-fuzz.sh [BUILD_DIR]
#
# BUILD_DIR: a configured build directory whose config.h to use (else a minimal one is made).
# Environment: FUZZ_SECONDS (default 60), then FUZZ_KEY_SECONDS (default half of it; 0: none)
# more with both endpoints keyed (FUZZ_KEY=1), FUZZ_KEEP=1 keeps the work directory, CC (default
# clang), FUZZ_ARGS (more libFuzzer flags), and fuzz_rx.c's own FUZZ_* settings.
# Everything is built and written in a temporary directory, never in the source tree.
# Exit: 0 clean run, 1 crash (input saved, printed as hex), 2 build failure, 77 no clang or no
# libFuzzer runtime.
set -u

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
seconds=${FUZZ_SECONDS:-60}

cc=${CC:-}
if [ -z "$cc" ]; then
	for c in clang clang-14; do
		if command -v "$c" >/dev/null 2>&1; then
			cc=$c
			break
		fi
	done
fi
if [ -z "$cc" ] || ! command -v "$cc" >/dev/null 2>&1; then
	echo "run-fuzz: SKIP: no clang" >&2
	exit 77
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/courier-fuzz.XXXXXX") || exit 2
cleanup() {
	if [ "${FUZZ_KEEP:-0}" = 1 ] || [ "${keep:-0}" = 1 ]; then
		echo "run-fuzz: work directory kept: $work" >&2
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT

# The fuzzer runtime: a one-line target must link.
printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { return 0; }\n' \
	>"$work/probe.c"
if ! "$cc" -fsanitize=fuzzer,address,undefined "$work/probe.c" -o "$work/probe" \
	>"$work/probe.log" 2>&1; then
	echo "run-fuzz: SKIP: $cc cannot link a libFuzzer target:" >&2
	cat "$work/probe.log" >&2
	exit 77
fi

# The provider's sources: every .c of libcourier_core_la_SOURCES in prov/courier/Makefile.inc.
srcs=$(awk '
	/^libcourier_core_la_SOURCES[ \t]*\+?=/ { on = 1 }
	on {
		for (i = 1; i <= NF; i++)
			if ($i ~ /\.c$/)
				print $i
		if ($NF != "\\")
			on = 0
	}' "$top/prov/courier/Makefile.inc" | sort -u)
if [ -z "$srcs" ]; then
	echo "run-fuzz: no sources found in prov/courier/Makefile.inc" >&2
	exit 2
fi
set --  "$@"
inc_cfg=$work
if [ $# -ge 1 ] && [ -f "$1/config.h" ]; then
	inc_cfg=$(cd "$1" && pwd)
else
	cat >"$work/config.h" <<-'EOF'
	/* minimal config.h for the fuzz build (run-fuzz.sh) */
	#ifndef _GNU_SOURCE
	#define _GNU_SOURCE 1
	#endif
	#define PACKAGE "courier"
	#define PACKAGE_VERSION "0.2.0"
	#define COUR_VERSION_MAJOR 0
	#define COUR_VERSION_MINOR 2
	EOF
fi

# Every pool get/put of the provider goes through fuzz_rx.c's hooks, which poison what is given
# back, so that ASan sees a use after cour_pool_put.
cat >"$work/pool_hooks.h" <<-'EOF'
#include <config.h>
#include "util/cour_pool.h"
void *fz_pool_get(struct cour_pool *p);
void fz_pool_put(struct cour_pool *p, void *o);
#define cour_pool_get(p) fz_pool_get(p)
#define cour_pool_put(p, o) fz_pool_put(p, o)
EOF

# clang (14) does not expand the 16-byte __sync builtins inline under target("cx16") as gcc
# does (proto/cour_atomic_ops.c), so the whole build gets -mcx16 on x86-64.
arch_flags=
case $(uname -m) in x86_64) arch_flags=-mcx16 ;; esac

files=
for s in $srcs; do
	files="$files $top/$s"
done
echo "run-fuzz: building with $cc: $(echo "$srcs" | wc -l) provider sources + fuzz_rx.c" >&2
# shellcheck disable=SC2086
if ! "$cc" -std=gnu11 -g -O1 -fno-omit-frame-pointer \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	-Wall -Wno-unused-parameter -Wno-missing-field-initializers \
	$arch_flags -DHAVE_CONFIG_H -include "$work/pool_hooks.h" \
	-I"$inc_cfg" -I"$top/include" -I"$top/prov/courier/src" \
	$files "$here/fuzz_rx.c" -lfabric -lnettle -lpthread -o "$work/fuzz_rx" >"$work/build.log" 2>&1; then
	cat "$work/build.log" >&2
	echo "run-fuzz: build failed" >&2
	keep=1
	exit 2
fi

# Whatever the fuzzer or a library writes into its working directory stays in $work (libfabric
# pulls in libinfinipath, whose crash handler leaves *.btr files behind unless told not to).
cd "$work" || exit 2
export IPATH_NO_BACKTRACE=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# fuzz NAME SECONDS: one run, in $work/NAME (its seeds, corpus, artifacts, logs), with the
# environment the caller set (FUZZ_KEY); 0 clean, 1 failed (reported)
fuzz() {
	d=$work/$1
	mkdir -p "$d/seeds" "$d/corpus" "$d/artifacts"
	if ! FUZZ_WRITE_SEEDS="$d/seeds" "$work/fuzz_rx" >"$d/seeds.log" 2>&1; then
		cat "$d/seeds.log" >&2
		echo "run-fuzz: $1: the fuzzer could not even set up" >&2
		keep=1
		return 1
	fi
	cat "$d/seeds.log" >&2
	echo "run-fuzz: $1: fuzzing for $2 s" >&2
	# shellcheck disable=SC2086
	"$work/fuzz_rx" -max_total_time="$2" -max_len=65000 -timeout=30 -rss_limit_mb=4096 \
		-print_final_stats=1 -artifact_prefix="$d/artifacts/" ${FUZZ_ARGS:-} \
		"$d/corpus" "$d/seeds" >"$d/fuzz.log" 2>&1
	rc=$?
	grep -E '^#[0-9]+' "$d/fuzz.log" | tail -n 3 >&2
	grep -E '^(stat::|fuzz_rx:|Done)' "$d/fuzz.log" >&2
	crashes=$(ls "$d/artifacts" 2>/dev/null)
	if [ "$rc" -ne 0 ] || [ -n "$crashes" ]; then
		keep=1
		echo "run-fuzz: $1: FAILED (libFuzzer exit $rc); log: $d/fuzz.log" >&2
		sed -n '/==ERROR\|runtime error\|fuzz_rx: \|deadly signal\|ALARM\|SUMMARY/,+40p' \
			"$d/fuzz.log" | head -n 120 >&2
		for f in $crashes; do
			echo "run-fuzz: crash input $d/artifacts/$f ($(wc -c <"$d/artifacts/$f") bytes):" >&2
			od -An -tx1 -v "$d/artifacts/$f" | head -n 64 >&2
		done
		return 1
	fi
	return 0
}

# without a key, then (FUZZ_KEY_SECONDS, default half as long; 0: not at all) with one
key_seconds=${FUZZ_KEY_SECONDS:-$((seconds / 2))}
status=0
FUZZ_KEY=0 fuzz plain "$seconds" || status=1
if [ "$key_seconds" -gt 0 ]; then
	FUZZ_KEY=1 fuzz keyed "$key_seconds" || status=1
fi
[ $status -eq 0 ] && echo "run-fuzz: PASS" >&2
exit $status
