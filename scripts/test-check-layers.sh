#!/usr/bin/env bash
# test-check-layers.sh: self-test for scripts/check-layers.sh.
# Each case plants one change in a private copy of a tree known to pass and
# checks the verdict, so a checker that silently accepts everything (or rejects
# everything) cannot go unnoticed.  The provider's own tree is only used as that
# baseline when it already passes: it may be mid-refactor, and the self-test must
# not turn red because of the code rather than the checker.
# Usage: scripts/test-check-layers.sh; exits non-zero if any case fails.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
check=$here/check-layers.sh
src=prov/courier/src

tmp=$(mktemp -d "${TMPDIR:-/tmp}/check-layers-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

passed=0
failed=0
out=
rc=0

# Run the checker on a root, keeping its combined output and exit status;
# "bash" rather than ./ so a lost executable bit does not mask logic results.
run_check() {
	rc=0
	out=$(bash "$check" "$1" 2>&1) || rc=$?
}

pass() {
	passed=$((passed + 1))
	echo "ok   - $1"
}

# Show what the checker said, since that is what one needs to debug a failure.
fail() {
	failed=$((failed + 1))
	echo "FAIL - $1"
	printf '%s\n' "$out" | sed 's/^/       | /'
}

# expect NAME RC [NEEDLE...]: the last run must exit RC and mention every NEEDLE.
expect() {
	local name=$1 want_rc=$2 needle
	shift 2
	if [ "$rc" -ne "$want_rc" ]; then
		fail "$name (exit $rc, want $want_rc)"
		return
	fi
	for needle in "$@"; do
		if ! grep -qF -- "$needle" <<<"$out"; then
			fail "$name (missing: $needle)"
			return
		fi
	done
	pass "$name"
}

# Fresh copy of the baseline per case, so cases cannot leak into each other.
copy_baseline() {
	local dest=$tmp/$1
	mkdir -p "$dest/prov/courier"
	cp -R "$base/$src" "$dest/$src"
	echo "$dest"
}

# Smallest tree that exercises every layer, both resolution paths (own
# directory and src/), and the includes the checker must ignore.
make_synthetic() {
	local s=$1/$src
	mkdir -p "$s/util" "$s/wire" "$s/proto" "$s/fi"
	printf '#pragma once\n#include <stdint.h>\n' >"$s/util/u.h"
	printf '#include "util/u.h"\n' >"$s/util/u.c"
	printf '#pragma once\n#include "util/u.h"\n' >"$s/wire/w.h"
	printf '#include "w.h"\n#include "util/u.h"\n' >"$s/wire/w.c"
	printf '#pragma once\n#include "wire/w.h"\n' >"$s/proto/p.h"
	printf '#include "p.h"\n#include "../util/u.h"\n' >"$s/proto/p.c"
	printf '#pragma once\n#include <rdma/fabric.h>\n#include "proto/p.h"\n' >"$s/fi/o.h"
	printf '#include "config.h"\n#include "o.h"\n#include "wire/w.h"\n' >"$s/fi/o.c"
}

# First file matching a pattern in one directory of a tree, for planting
# includes of headers that really exist whatever the baseline is.
first_file() {
	find "$1" -maxdepth 1 -type f -name "$2" | LC_ALL=C sort | head -n 1
}

# --- a. the real tree, untouched --------------------------------------------
mkdir -p "$tmp/real/prov/courier"
cp -R "$repo/$src" "$tmp/real/$src"
run_check "$tmp/real"
if [ "$rc" -eq 0 ]; then
	echo "real tree: passes ($out)"
	base=$tmp/real
else
	echo "real tree: fails (exit $rc, $(grep -c "^$src/" <<<"$out" || true) finding(s)); using a synthetic baseline"
	base=$tmp/synthetic
	make_synthetic "$base"
fi

run_check "$base"
expect "clean baseline passes" 0 "layers util < wire < proto < fi respected, no include cycle"
summary_re='^check-layers: [0-9]+ files, [0-9]+ includes, layers util < wire < proto < fi respected, no include cycle$'
if ! [[ $out =~ $summary_re ]]; then
	fail "clean baseline prints exactly one summary line"
else
	pass "clean baseline prints exactly one summary line"
fi

# --- b. upward includes ------------------------------------------------------
root=$(copy_baseline util-proto)
proto_h=$(first_file "$root/$src/proto" '*.h')
proto_h=${proto_h#"$root/$src/"}
printf '/* planted */\n\n#include "%s"\n' "$proto_h" >"$root/$src/util/zz_planted.c"
run_check "$root"
expect "util including proto is rejected" 1 \
	"$src/util/zz_planted.c:3: includes \"$proto_h\": layer util may not include layer proto"

# Appended to an existing file: the reported line must be the real one; "../" is
# resolved from the includer's directory.
root=$(copy_baseline wire-fi)
fi_h=$(first_file "$root/$src/fi" '*.h')
fi_h=fi/${fi_h##*/}
wire_c=$(first_file "$root/$src/wire" '*.c')
line=$(($(wc -l <"$wire_c") + 1))
printf '#include "../%s"\n' "$fi_h" >>"$wire_c"
run_check "$root"
expect "wire including fi is rejected" 1 \
	"${wire_c#"$root/"}:$line: includes \"../$fi_h\": layer wire may not include layer fi"

# A name not found next to the includer must fall back to src/, as the compiler's -I does.
root=$(copy_baseline src-fallback)
printf '#include "%s"\n' "$fi_h" >"$root/$src/proto/zz_fallback.c"
run_check "$root"
expect "include falls back to src/" 1 \
	"$src/proto/zz_fallback.c:1: includes \"$fi_h\": layer proto may not include layer fi"

# A source directly in src/ belongs to no layer.
root=$(copy_baseline loose)
printf '#include "%s"\n' "$fi_h" >"$root/$src/zz_loose.c"
run_check "$root"
expect "a file outside the layer folders is rejected" 1 "$src/zz_loose.c:1: not in a layer"

# --- c. include cycle ----------------------------------------------------------
root=$(copy_baseline cycle)
printf '#pragma once\n#include "util/zz_cyc_b.h"\n' >"$root/$src/util/zz_cyc_a.h"
printf '#pragma once\n#include "zz_cyc_a.h"\n' >"$root/$src/util/zz_cyc_b.h"
run_check "$root"
expect "include cycle is rejected" 1 "include cycle" \
	"$src/util/zz_cyc_a.h -> $src/util/zz_cyc_b.h -> $src/util/zz_cyc_a.h"
if grep -q 'may not include' <<<"$out"; then
	fail "cycle inside one layer is not a layer violation"
else
	pass "cycle inside one layer is not a layer violation"
fi

# --- d. downward includes ------------------------------------------------------
root=$(copy_baseline downward)
util_h=$(first_file "$root/$src/util" '*.h')
util_h=${util_h#"$root/$src/"}
wire_h=$(first_file "$root/$src/wire" '*.h')
wire_h=${wire_h#"$root/$src/"}
printf '#include "%s"\n#include "%s"\n#include "%s"\n' "$util_h" "$wire_h" "$proto_h" \
	>"$root/$src/fi/zz_down.c"
printf '#include "%s"\n#include "%s"\n' "$util_h" "$wire_h" >"$root/$src/proto/zz_down.c"
printf '#include "%s"\n' "$util_h" >"$root/$src/wire/zz_down.c"
run_check "$root"
expect "lower layers included from higher ones pass" 0 "respected, no include cycle"

# Angle-bracket and unresolvable quoted includes name nothing in the provider.
root=$(copy_baseline ignored)
printf '#include <%s>\n#include "config.h"\n#include "no/such/header.h"\n' "$proto_h" \
	>"$root/$src/util/zz_ignored.c"
run_check "$root"
expect "angle-bracket and unresolved includes are ignored" 0 "respected, no include cycle"

# --- misuse ----------------------------------------------------------------------
run_check "$tmp/does-not-exist"
expect "missing root is an error, not a pass" 2

echo "check-layers self-test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
