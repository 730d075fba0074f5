#!/bin/sh
# run_pair.sh PROGRAM [ARGS...]: run one two-process functional test on this host.
# Starts PROGRAM as the server and PROGRAM 127.0.0.1 as the client on a free out-of-band port,
# both under timeout, and exits 0 only if both do; on failure prints both outputs.
# Environment:
#   COUR_FT_PROVIDER  provider to test (default courier), passed as -p
#   COUR_BUILD        build directory holding .libs/libcourier-fi.so and the programs
#                     (default: the current directory, as under `make check`)
#   COUR_FT_TIMEOUT   seconds before timeout kills a side (default 40)
#   COUR_FT_SERVER_ENV / COUR_FT_CLIENT_ENV  extra "VAR=value ..." for one side only
#   COUR_FT_SERVER_ARGS / COUR_FT_CLIENT_ARGS  extra options for one side only (e.g. -D)
#   COUR_FT_SERVER_WRAP / COUR_FT_CLIENT_WRAP  a command that execs one side's program, e.g.
#                     "$COUR_BUILD/fabtests/functional/no_cma" (under timeout, so still bounded)
#   COUR_FT_OUT_DIR   if set, each side's output is also left there as server.out and client.out
set -u

prog=${1:?usage: run_pair.sh PROGRAM [ARGS...]}
shift
build=${COUR_BUILD:-$PWD}
prov=${COUR_FT_PROVIDER:-courier}
tmo=${COUR_FT_TIMEOUT:-40}

case $prog in
*/*) ;;
*) if [ -x "$build/fabtests/functional/$prog" ]; then
	prog=$build/fabtests/functional/$prog
   else
	prog=$build/$prog
   fi ;;
esac
[ -x "$prog" ] || { echo "run_pair.sh: no program $prog" >&2; exit 99; }

if [ -d "$build/.libs" ] && [ -z "${FI_PROVIDER_PATH:-}" ]; then
	FI_PROVIDER_PATH=$build/.libs
	export FI_PROVIDER_PATH
fi
# fi_getinfo lists courier;ofi_rxd before courier: hide the utility providers unless the
# provider under test is layered itself
case $prov in
*\;*) ;;
*) FI_PROVIDER=${FI_PROVIDER:-^ofi_rxd,ofi_rxm}; export FI_PROVIDER ;;
esac

# a free TCP port: ask the kernel, fall back to a pid-derived one
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null)
[ -n "$port" ] || port=$((20000 + $$ % 20000))

out=$(mktemp -d "${TMPDIR:-/tmp}/run_pair.XXXXXX") || exit 99
trap 'rm -rf "$out"' EXIT

env ${COUR_FT_SERVER_ENV:-} timeout -k 5 "$tmo" ${COUR_FT_SERVER_WRAP:-} \
	"$prog" -p "$prov" -P "$port" ${COUR_FT_SERVER_ARGS:-} "$@" >"$out/server" 2>&1 &
spid=$!
env ${COUR_FT_CLIENT_ENV:-} timeout -k 5 "$tmo" ${COUR_FT_CLIENT_WRAP:-} \
	"$prog" -p "$prov" -P "$port" ${COUR_FT_CLIENT_ARGS:-} "$@" 127.0.0.1 >"$out/client" 2>&1 &
cpid=$!
wait $cpid
crc=$?
wait $spid
src=$?
if [ -n "${COUR_FT_OUT_DIR:-}" ]; then
	cp "$out/server" "$COUR_FT_OUT_DIR/server.out"
	cp "$out/client" "$COUR_FT_OUT_DIR/client.out"
fi

if [ $src -eq 0 ] && [ $crc -eq 0 ]; then
	cat "$out/server" "$out/client"
	exit 0
fi
echo "run_pair.sh: $(basename "$prog") $*: server exit $src, client exit $crc (provider $prov)"
echo "---- server ----"; cat "$out/server"
echo "---- client ----"; cat "$out/client"
# a test the provider cannot run at all (fi_getinfo found nothing) is skipped
if grep -q "fi_getinfo.*failed: -61" "$out/server" "$out/client"; then
	exit 77
fi
exit 1
