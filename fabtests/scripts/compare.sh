#!/usr/bin/env bash
# compare.sh: run courier's benchmarks (cour_pingpong, cour_bw, cour_msgrate, and cour_rma's
# rma_write, rma_read and fadd) over several providers on 127.0.0.1, one server+client pair per
# (benchmark, provider), and print one table: rows (benchmark, size), a column per provider, and
# courier/<other> ratio columns.
#
# usage: compare.sh [-q] [-k] [-b <bindir>] [-o <logdir>] [-- <options for every benchmark>]
#   -q        quick mode: fewer sizes and iterations
#   -k        keep the log directory even when every run succeeded (-o DIR is always kept)
#   -b DIR    directory holding cour_pingpong, cour_bw, cour_msgrate, cour_rma
#             (default: ./fabtests/bench, then next to this script, then $PATH)
#   -o DIR    write logs there (default: a fresh mktemp directory)
# environment:
#   PROVIDERS              providers to compare, space separated (default: courier
#                          courier-udp shm tcp "udp;ofi_rxd" sockets). courier-udp is courier
#                          with FI_COURIER_SHM=0: same-host peers over UDP, which is what
#                          the UDP providers do on loopback; courier itself uses shared memory
#                          here, so its anchor is shm.
#   COURIER_PROVIDER_PATH  directory holding libcourier-fi.so, exported as FI_PROVIDER_PATH for
#                          the courier runs only (default: the build directory's .libs)
#   RUN_TIMEOUT            seconds allowed per server+client pair (default 30)
#   BASE_PORT              first out-of-band TCP port; each run takes the next (default 47600)
#
# A provider that is missing or fails shows "n/a", as does a run skipped for a known provider
# bug (listed under the table); the table is always printed. Exit status: 0 if every run
# succeeded, 1 if a courier run failed, 2 if only other providers failed.
# Latency (pingpong: half a round trip; fadd: one fetch-add, a whole round trip) is
# lower-is-better (ratio < 1: courier faster); MB/s and msg/s higher-is-better.
set -u

QUICK=0
KEEP=0
BIN_DIR=""
LOG_DIR=""
while getopts "qkb:o:h" opt; do
	case $opt in
	q) QUICK=1 ;;
	k) KEEP=1 ;;
	b) BIN_DIR=$OPTARG ;;
	o) LOG_DIR=$OPTARG ;;
	h) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "usage: $0 [-q] [-k] [-b bindir] [-o logdir] [-- bench options]" >&2; exit 64 ;;
	esac
done
shift $((OPTIND - 1))
EXTRA_OPTS=("$@")

read -r -a PROV_LIST <<< "${PROVIDERS:-courier courier-udp shm tcp udp;ofi_rxd sockets}"
RUN_TIMEOUT=${RUN_TIMEOUT:-30}
PORT=${BASE_PORT:-47600}
SCRIPT_DIR=$(cd "$(dirname "$0")" && pwd)

# ---- where the programs and courier are ----
# shellcheck source=bench-env.sh
. "$SCRIPT_DIR/bench-env.sh"
BIN_DIR=$(cour_find_bin_dir "$BIN_DIR") || {
	echo "compare.sh: cannot find cour_pingpong; build first or pass -b <dir>" >&2
	exit 64
}
# an uninstalled build: <builddir>/fabtests/bench holds the programs, <builddir>/.libs courier
COURIER_PROVIDER_PATH=${COURIER_PROVIDER_PATH:-$(cour_find_provider_path "$BIN_DIR")}

cour_log_dir compare || exit 1
RESULTS=$LOG_DIR/results.txt
: > "$RESULTS"

# ---- what to run ----
BENCHES=(pingpong bw rate rma_write rma_read fadd)
declare -A PROG=([pingpong]=cour_pingpong [bw]=cour_bw [rate]=cour_msgrate
	[rma_write]=cour_rma [rma_read]=cour_rma [fadd]=cour_rma)
declare -A BENCH_OPTS
if [ "$QUICK" = 1 ]; then
	BENCH_OPTS=([pingpong]="-S 8,4k,1m -n 200" [bw]="-S 64k,1m -n 256" [rate]="-n 20480"
		[rma_write]="-o write -n 256" [rma_read]="-o read -n 256" [fadd]="-o fadd -n 2000")
else
	BENCH_OPTS=([pingpong]="" [bw]="" [rate]=""
		[rma_write]="-o write" [rma_read]="-o read" [fadd]="-o fadd")
fi

# Provider quirks, each one a workaround for a provider bug, not a tuning.
prov_opts() {
	case $1 in
	# libfabric 1.17 sockets: with its auto-progress thread a ping-pong stalls after a few
	# hundred round trips (fi_pingpong -e rdm too); manual progress works.
	sockets) echo "-M manual" ;;
	*) echo "" ;;
	esac
}

# Runs not made at all, each for a provider bug that would crash or hang them: prints the reason.
prov_skip() {
	case "$1/$2" in
	# libfabric 1.17 ofi_rxd: the first fi_fetch_atomic completes without its result, and
	# the next fi_cq_read jumps through a bad pointer (ofiwg/libfabric#11814, still open)
	"udp;ofi_rxd/fadd") echo "ofi_rxd fetch atomics crash in fi_cq_read (ofiwg/libfabric#11814)" ;;
	*) return 1 ;;
	esac
}

# run_pair <bench> <provider> <log prefix>: 0 if both sides succeeded
run_pair() {
	local bench=$1 prov=$2 log=$3 prog=$BIN_DIR/${PROG[$1]}
	local -a opts env_cmd=(env)
	local spid crc src
	# the programs give up by themselves first; timeout(1) only catches a hung provider
	local t=$((RUN_TIMEOUT > 4 ? RUN_TIMEOUT - 2 : RUN_TIMEOUT))

	read -r -a opts <<< "${BENCH_OPTS[$bench]} $(prov_opts "$prov")"
	# the oob ports sit in the ephemeral range, where any connection may hold one: skip those
	while command -v ss >/dev/null && [ -n "$(ss -Htan "( sport = :$PORT )" 2>/dev/null)" ]; do
		PORT=$((PORT + 1))
	done
	opts+=(-p "${prov%-udp}" -P "$PORT" -T "$t" "${EXTRA_OPTS[@]}")
	PORT=$((PORT + 1))
	case $prov in
	courier|courier-udp)
		[ -n "$COURIER_PROVIDER_PATH" ] &&
			env_cmd+=("FI_PROVIDER_PATH=$COURIER_PROVIDER_PATH")
		[ "$prov" = courier-udp ] && env_cmd+=(FI_COURIER_SHM=0)
		;;
	esac
	"${env_cmd[@]}" timeout -k 2 "$RUN_TIMEOUT" "$prog" "${opts[@]}" \
		> "$log.server" 2>&1 &
	spid=$!
	"${env_cmd[@]}" timeout -k 2 "$RUN_TIMEOUT" "$prog" "${opts[@]}" 127.0.0.1 \
		> "$log.client" 2>&1
	crc=$?
	wait "$spid"
	src=$?
	echo "$crc $src" > "$log.status"
	[ "$crc" = 0 ] && [ "$src" = 0 ]
}

echo "# courier compare: providers: ${PROV_LIST[*]}"
echo "# programs: $BIN_DIR"
[ -n "$COURIER_PROVIDER_PATH" ] && echo "# courier from: $COURIER_PROVIDER_PATH"
echo "# host: $(uname -n), $(nproc) cpus, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# logs: $LOG_DIR"
read -r load1 _ < /proc/loadavg
if awk -v l="$load1" -v n="$(nproc)" 'BEGIN { exit !(l >= n / 2) }'; then
	echo "# warning: the host is busy (load $load1 on $(nproc) cpus); each side spins on a cpu," \
		"so expect noisy numbers"
fi

FAILED=()
SKIPPED=()
COURIER_FAILED=0
i=0
for prov in "${PROV_LIST[@]}"; do
	for bench in "${BENCHES[@]}"; do
		log=$LOG_DIR/$bench.$i
		printf '# running %-9s over %-14s ... ' "$bench" "$prov" >&2
		if why=$(prov_skip "$prov" "$bench"); then
			echo "skipped" >&2
			SKIPPED+=("$bench over $prov: $why")
			continue
		fi
		start=$SECONDS
		if run_pair "$bench" "$prov" "$log"; then
			echo "ok ($((SECONDS - start)) s)" >&2
		else
			echo "FAILED ($((SECONDS - start)) s, see $log.*)" >&2
			FAILED+=("$bench over $prov: $(grep -h -m1 -E 'failed|error|timed out' \
				"$log.client" "$log.server" 2>/dev/null | head -1)")
			case $prov in courier*) COURIER_FAILED=1 ;; esac
		fi
		# keep the sizes a failed run did measure
		awk -v p="$i" '$1 == "RESULT" { print p, $2, $3, $4 }' "$log.client" >> "$RESULTS"
	done
	i=$((i + 1))
done

echo
awk -v provs="${PROV_LIST[*]}" '
BEGIN {
	np = split(provs, prov, " ")
	# ratio columns: each courier variant against each other provider
	nc = 0
	for (i = 1; i <= np; i++)
		if (prov[i] ~ /^courier/) {
			cv[++nc] = i
			tag[i] = prov[i] == "courier" ? "cour/" : "cudp/"
		}
	order["pingpong"] = 1; order["bw"] = 2; order["rate"] = 3
	order["rma_write"] = 4; order["rma_read"] = 5; order["fadd"] = 6
	unit["pingpong"] = "usec"; unit["bw"] = "MB/s"; unit["rate"] = "msg/s"
	unit["rma_write"] = "MB/s"; unit["rma_read"] = "MB/s"; unit["fadd"] = "usec"
}
{
	key = $2 SUBSEP $3
	val[$1 + 1, key] = $4
	if (!(key in seen)) {
		seen[key] = 1
		rows[++nr] = key
	}
}
function sizestr(s) {
	if (s >= 1048576 && s % 1048576 == 0) return (s / 1048576) "m"
	if (s >= 1024 && s % 1024 == 0) return (s / 1024) "k"
	return s
}
function fmt(v) {
	if (v == "") return "n/a"
	if (v >= 10000) return sprintf("%.0f", v)
	return sprintf("%.2f", v)
}
END {
	# rows by benchmark, then by size
	for (a = 1; a <= nr; a++)
		for (b = a + 1; b <= nr; b++) {
			split(rows[a], ka, SUBSEP); split(rows[b], kb, SUBSEP)
			if (order[kb[1]] < order[ka[1]] ||
			    (kb[1] == ka[1] && kb[2] + 0 < ka[2] + 0)) {
				t = rows[a]; rows[a] = rows[b]; rows[b] = t
			}
		}
	printf "%-9s %6s %6s", "bench", "size", "unit"
	for (i = 1; i <= np; i++)
		printf " %14s", prov[i]
	for (c = 1; c <= nc; c++)
		for (i = 1; i <= np; i++)
			if (prov[i] !~ /^courier/)
				printf " %14s", tag[cv[c]] prov[i]
	printf "\n"
	if (nr == 0)
		print "(no results)"
	for (r = 1; r <= nr; r++) {
		split(rows[r], k, SUBSEP)
		printf "%-9s %6s %6s", k[1], sizestr(k[2]), unit[k[1]]
		for (i = 1; i <= np; i++)
			printf " %14s", fmt(val[i, rows[r]])
		for (c = 1; c <= nc; c++)
			for (i = 1; i <= np; i++) {
				if (prov[i] ~ /^courier/)
					continue
				cval = val[cv[c], rows[r]]; o = val[i, rows[r]]
				if (cval == "" || o == "" || o + 0 == 0)
					printf " %14s", "n/a"
				else
					printf " %14.2f", cval / o
			}
		printf "\n"
	}
}' "$RESULTS"

if [ ${#SKIPPED[@]} -gt 0 ]; then
	echo
	echo "# skipped runs (known provider bugs):"
	for f in "${SKIPPED[@]}"; do
		echo "#   $f"
	done
fi
cour_bench_failed_or_clean

[ "$COURIER_FAILED" = 1 ] && exit 1
[ ${#FAILED[@]} -gt 0 ] && exit 2
exit 0
