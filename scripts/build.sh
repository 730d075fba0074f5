#!/usr/bin/env bash
# build.sh DIR [configure args...]: configure and build courier out of tree in DIR, with the
# test programs of make check unless COUR_BUILD_TESTS=0 (a build only for the MPI scripts).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
dir=$1; shift
# (Makefile.in too: a make of an old build directory can leave a configure without it)
[ -x "$top/configure" ] && [ -f "$top/Makefile.in" ] && [ "$top/configure" -nt "$top/configure.ac" ] ||
	(cd "$top" && autoreconf -fi >/dev/null 2>&1)
mkdir -p "$dir"
cd "$dir"
[ -f Makefile ] || "$top/configure" -q "$@"
make -j"$(nproc)" >/dev/null
[ "${COUR_BUILD_TESTS:-1}" = 0 ] ||
	make -j"$(nproc)" check TESTS= >/dev/null    # build the test programs too
