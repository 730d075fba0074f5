#!/usr/bin/env bash
# build.sh DIR [configure args...]: configure and build courier out of tree in DIR.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
dir=$1; shift
[ -x "$top/configure" ] && [ "$top/configure" -nt "$top/configure.ac" ] || (cd "$top" && autoreconf -fi >/dev/null 2>&1)
mkdir -p "$dir"
cd "$dir"
[ -f Makefile ] || "$top/configure" -q "$@"
make -j"$(nproc)" >/dev/null
make -j"$(nproc)" check TESTS= >/dev/null    # build the test programs too
