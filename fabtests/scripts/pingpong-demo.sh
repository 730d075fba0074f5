#!/usr/bin/env bash
# pingpong-demo.sh: courier's main job in one command. A server and a client on 127.0.0.1 talk
# over courier; prints one-way latency (8 B, 64 B, 4 KiB) and bandwidth (64 KiB, 1 MiB).
# Exits nonzero if either side fails.
#
# usage: pingpong-demo.sh [-b <bindir>] [-- <extra benchmark options, e.g. -v>]
# environment:
#   PROVIDER               provider to demonstrate (default courier)
#   COURIER_PROVIDER_PATH  directory holding libcourier-fi.so, exported as FI_PROVIDER_PATH
#                          (default: the build directory's .libs when run from a build)
#   DEMO_PORT              out-of-band TCP port (default 47590)
#   DEMO_TIMEOUT           seconds per run (default 30)
set -u

BIN_DIR=""
while getopts "b:h" opt; do
	case $opt in
	b) BIN_DIR=$OPTARG ;;
	h) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "usage: $0 [-b bindir] [-- bench options]" >&2; exit 64 ;;
	esac
done
shift $((OPTIND - 1))
EXTRA_OPTS=("$@")

PROVIDER=${PROVIDER:-courier}
PORT=${DEMO_PORT:-47590}
RUN_TIMEOUT=${DEMO_TIMEOUT:-30}
SCRIPT_DIR=$(cd "$(dirname "$0")" && pwd)

# shellcheck source=bench-env.sh
. "$SCRIPT_DIR/bench-env.sh"
BIN_DIR=$(cour_find_bin_dir "$BIN_DIR") || {
	echo "pingpong-demo: cannot find cour_pingpong; build first or pass -b <dir>" >&2
	exit 64
}

ENV_CMD=(env)
if [ "$PROVIDER" = courier ]; then
	COURIER_PROVIDER_PATH=${COURIER_PROVIDER_PATH:-$(cour_find_provider_path "$BIN_DIR")}
	if [ -n "${COURIER_PROVIDER_PATH:-}" ]; then
		ENV_CMD+=("FI_PROVIDER_PATH=$COURIER_PROVIDER_PATH")
	elif ! fi_info -l 2>/dev/null | grep -q '^courier:'; then
		echo "pingpong-demo: libfabric does not list courier and no build was found;" \
			"set COURIER_PROVIDER_PATH to the directory holding libcourier-fi.so" >&2
	fi
fi

LOG_DIR=$(mktemp -d "${TMPDIR:-/tmp}/cour-demo.XXXXXX") || exit 1

# run <program> <log name> <options...>: server in the background, client in the foreground
run() {
	local name=$1 prog=$BIN_DIR/$1 log=$LOG_DIR/$2 spid crc src
	shift 2
	local -a opts=(-p "$PROVIDER" -P "$PORT" -T "$((RUN_TIMEOUT - 2))" "$@" "${EXTRA_OPTS[@]}")

	PORT=$((PORT + 1))
	"${ENV_CMD[@]}" timeout -k 2 "$RUN_TIMEOUT" "$prog" "${opts[@]}" > "$log.server" 2>&1 &
	spid=$!
	"${ENV_CMD[@]}" timeout -k 2 "$RUN_TIMEOUT" "$prog" "${opts[@]}" 127.0.0.1 \
		> "$log.client" 2>&1
	crc=$?
	wait "$spid"
	src=$?
	if [ "$crc" != 0 ] || [ "$src" != 0 ]; then
		echo "pingpong-demo: $name over $PROVIDER failed (client $crc, server $src):" >&2
		sed 's/^/  client: /' "$log.client" | tail -5 >&2
		sed 's/^/  server: /' "$log.server" | tail -5 >&2
		echo "  logs kept in $LOG_DIR" >&2
		return 1
	fi
}

# value <log name> <bench> <size>: the number from "RESULT <bench> <size> <value>"
value() {
	awk -v b="$2" -v s="$3" '$1 == "RESULT" && $2 == b && $3 == s { print $4 }' \
		"$LOG_DIR/$1.client"
}

run cour_pingpong pingpong -S 8,64,4k || exit 1
run cour_bw bw -S 64k,1m || exit 1

for spec in "pingpong pingpong 8" "pingpong pingpong 64" "pingpong pingpong 4096" \
	    "bw bw 65536" "bw bw 1048576"; do
	# shellcheck disable=SC2086
	if [ -z "$(value $spec)" ]; then
		echo "pingpong-demo: no result for $spec (logs kept in $LOG_DIR)" >&2
		exit 1
	fi
done

prov_line=$(sed -n 's/^# pingpong (client)  provider: \([^ ]*\).*/\1/p' "$LOG_DIR/pingpong.client")
echo "courier ping-pong demo: two processes on 127.0.0.1, provider ${prov_line:-$PROVIDER}"
printf '  latency    8 B    %10s usec (one way)\n' "$(value pingpong pingpong 8)"
printf '  latency   64 B    %10s usec\n' "$(value pingpong pingpong 64)"
printf '  latency    4 KiB  %10s usec\n' "$(value pingpong pingpong 4096)"
printf '  bandwidth 64 KiB  %10s MB/s\n' "$(value bw bw 65536)"
printf '  bandwidth  1 MiB  %10s MB/s\n' "$(value bw bw 1048576)"
rm -rf "$LOG_DIR"
