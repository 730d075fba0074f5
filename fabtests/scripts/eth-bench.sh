#!/usr/bin/env bash
# eth-bench.sh: courier against tcp;ofi_rxm and udp;ofi_rxd over a real (virtual) Ethernet
# link: two network namespaces joined by a veth pair (netns.sh), at one or more MTUs, optionally
# with nftables dropping a share of the packets. Loopback lets courier use shared memory and
# hides per-packet costs; this measures what its wire protocol does against the others'.
#
# usage: eth-bench.sh [-r rounds] [-m "mtus"] [-l loss_pct] [-q] [-k] [-b bindir] [-o logdir]
#   -r ROUNDS  rounds (default 3); a round runs each benchmark once per provider, providers
#              interleaved, so a load change hits all of them; the tables show medians
#   -m MTUS    veth MTUs, space separated (default "1500 9000"); one table each
#   -l PCT     percent of the packets each side receives dropped by nftables, 0..100
#              (default 0); the out-of-band TCP channel is exempt
#   -R RATE    each side sends at most RATE (tc's tbf, e.g. 10gbit: a real NIC's line rate;
#              default: veth's, which is the cpus'), so what a provider costs in cpu shows
#              as what it leaves of the line, not of the cpus
#   -q         quick: a quarter of the messages
#   -k         keep the log directory even when every run succeeded (-o DIR is always kept)
#   -b DIR     directory holding cour_pingpong, cour_bw, cour_msgrate, cour_rma
#              (default: ./fabtests/bench, then next to this script, then $PATH)
#   -o DIR     write logs there (default: a fresh mktemp directory)
# environment:
#   PROVIDERS              space separated (default: courier tcp;ofi_rxm udp;ofi_rxd
#                          udp-ceiling); udp-ceiling is no provider but cour_udp_ceiling: bare
#                          UDP with GSO and GRO, no header, acknowledgement or retransmission,
#                          the most any protocol over UDP sockets could move on this link and
#                          these cpus; it runs the 64 KiB and 1 MiB rows only, and its
#                          courier/udp-ceiling column is courier's share of it; courier-key
#                          is courier with a key (FI_COURIER_AUTH_KEY_FILE, a fresh random
#                          one per run of the script): every datagram authenticated, so
#                          courier/courier-key is what authentication costs
#   COURIER_PROVIDER_PATH  directory holding libcourier-fi.so, FI_PROVIDER_PATH of the courier
#                          runs only (default: the build's .libs, found from the bindir); the
#                          library is copied into the log directory at start, so a rebuild
#                          during the run cannot mix two builds
#   COURIER_ENV            extra VAR=value for the courier runs, e.g. "FI_COURIER_UDP_GSO=0"
#   RUN_TIMEOUT            seconds per run of a server+client pair (default 120)
#   BENCHES                rows to run (default: lat bw64k bw1m rmaw rmar rate agg)
#
# Rows: latency (cour_pingpong -S 8, one way, us); tagged bandwidth at 64 KiB and 1 MiB
# (cour_bw -t, MB/s = 10^6 B/s); RMA write and read at 1 MiB (cour_rma, 256 MiB or 3 s per run);
# message rate at 64 B (cour_msgrate, msg/s); four server+client pairs of the 1 MiB tagged run
# at once, all servers in one namespace and all clients in the other, the sum of their MB/s
# (each measures its own interval, which nearly coincide); and CPU seconds (user+system, all
# threads, from the end of setup to exit) per GB (10^9 B, warmup included) moved in the 1 MiB
# tagged run, for the sender (client) and the receiver (server). udp;ofi_rxd gets a quarter of
# the messages: it is slow. Each side spins on a cpu; on a host with 2 cpus the four-pair row
# runs 8 processes.
# A provider that fails a row in every round shows n/a, one that fails some rounds the median
# of the others, marked "*"; a provider without the capability (fi_getinfo: no data) shows n/a
# and does not count as a failure. A provider other than courier that times out in a row is
# not run in that row again at that MTU (counted as failed): ofi_rxd with four pairs at once
# can crawl at 2 MB/s a pair, and every retry would cost RUN_TIMEOUT. Ratio columns are
# courier/<other>: above 1 is better for courier in MB/s and msg/s, below 1 in us and s/GB.
# The tables are always printed, also when interrupted.
# Needs root, ip (iproute2) and nft (nftables). Exit status: 0 if every courier run succeeded
# and so did the others, 1 if a courier run failed, 2 if only another provider's did, 64 on a
# usage error or missing programs, 77 when the namespaces are unavailable.
set -u

ROUNDS=3
MTUS="1500 9000"
LOSS=0
RATE=""
QUICK=0
KEEP=0
BIN_DIR=""
LOG_DIR=""
usage() {
	echo "usage: $0 [-r rounds] [-m \"mtus\"] [-l loss_pct] [-R rate] [-q] [-k] [-b bindir]" \
		"[-o logdir]" >&2
	exit 64
}
while getopts "r:m:l:R:qkb:o:h" opt; do
	case $opt in
	r) ROUNDS=$OPTARG ;;
	m) MTUS=$OPTARG ;;
	l) LOSS=$OPTARG ;;
	R) RATE=$OPTARG ;;
	q) QUICK=1 ;;
	k) KEEP=1 ;;
	b) BIN_DIR=$OPTARG ;;
	o) LOG_DIR=$OPTARG ;;
	h) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
[ $# -eq 0 ] || usage
case $ROUNDS in ''|*[!0-9]*|0) usage ;; esac
case $LOSS in ''|*[!0-9]*) usage ;; esac
[ "$LOSS" -le 100 ] || usage
for mtu in $MTUS; do
	case $mtu in ''|*[!0-9]*) usage ;; esac
	# IPv4's minimum and veth's maximum
	{ [ "$mtu" -ge 68 ] && [ "$mtu" -le 65535 ]; } || usage
done
[ -n "${MTUS// /}" ] || usage

read -r -a PROV_LIST <<< "${PROVIDERS:-courier tcp;ofi_rxm udp;ofi_rxd udp-ceiling}"
read -r -a COURIER_ENV_LIST <<< "${COURIER_ENV:-}"
read -r -a BENCH_LIST <<< "${BENCHES:-lat bw64k bw1m rmaw rmar rate agg}"
RUN_TIMEOUT=${RUN_TIMEOUT:-120}
case $RUN_TIMEOUT in ''|*[!0-9]*|0) usage ;; esac
for b in "${BENCH_LIST[@]}"; do
	case $b in
	lat|bw64k|bw1m|rmaw|rmar|rate|agg) ;;
	*) echo "eth-bench.sh: BENCHES: no row $b" >&2; usage ;;
	esac
done
[ ${#PROV_LIST[@]} -gt 0 ] || usage

SCRIPT_DIR=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench-env.sh
. "$SCRIPT_DIR/bench-env.sh"
# shellcheck source=netns.sh
. "$SCRIPT_DIR/netns.sh"

if ! netns_available; then
	echo "eth-bench.sh: cannot run: $NETNS_WHY" >&2
	exit 77
fi
BIN_DIR=$(cour_find_bin_dir "$BIN_DIR") || {
	echo "eth-bench.sh: cannot find cour_pingpong; build first or pass -b <dir>" >&2
	exit 64
}
for p in cour_pingpong cour_bw cour_msgrate cour_rma \
	$([[ " ${PROV_LIST[*]} " == *" udp-ceiling "* ]] && echo cour_udp_ceiling); do
	if [ ! -x "$BIN_DIR/$p" ]; then
		echo "eth-bench.sh: $BIN_DIR has no $p" >&2
		exit 64
	fi
done
COURIER_PROVIDER_PATH=${COURIER_PROVIDER_PATH:-$(cour_find_provider_path "$BIN_DIR")}

cour_log_dir eth-bench || exit 1
RESULTS=$LOG_DIR/results.txt	# mtu bench provider_index value|FAIL|NA
: > "$RESULTS"

# A make in the build tree during the run would replace the library between two runs and mix
# two builds in one table: every courier run loads a copy taken now.
COURIER_FROM=${COURIER_PROVIDER_PATH:-the default path}
# courier-key's secret: owner-only, as courier demands
AUTH_KEY=$LOG_DIR/auth.key
(umask 077 && head -c 32 /dev/urandom > "$AUTH_KEY") || exit 1
if [ -n "$COURIER_PROVIDER_PATH" ] && [ -f "$COURIER_PROVIDER_PATH/libcourier-fi.so" ]; then
	COURIER_FROM="$COURIER_PROVIDER_PATH/libcourier-fi.so, built $(date -r \
		"$COURIER_PROVIDER_PATH/libcourier-fi.so" '+%F %T'), copied to $LOG_DIR/courier-lib"
	mkdir -p "$LOG_DIR/courier-lib" &&
		cp "$COURIER_PROVIDER_PATH/libcourier-fi.so" "$LOG_DIR/courier-lib/" || exit 1
	COURIER_PROVIDER_PATH=$LOG_DIR/courier-lib
fi

netns_setup || { echo "eth-bench.sh: cannot set up the namespaces" >&2; exit 1; }
# an older netns.sh has no netns_wait_up: a link's carrier shows within a second
declare -F netns_wait_up > /dev/null || netns_wait_up() { sleep 1; }
# one oob port per pair, cycling through a range exempt from the drops (netns.sh says why)
PORT0=47600
PORT_SPAN=1000
PORTS="$PORT0-$((PORT0 + PORT_SPAN - 1))"
PORT_SEQ=0
netns_loss "$LOSS" "$PORTS" || { echo "eth-bench.sh: cannot set the loss rules" >&2; exit 1; }

# ---- what each row runs ----
# msgs DEFAULT PROV: message count for a run, scaled for -q and for slow providers
msgs() {
	local n=$1
	[ "$QUICK" = 1 ] && n=$((n / 4))
	case $2 in
	*ofi_rxd) n=$((n / 4)) ;;
	esac
	echo $((n > 64 ? n : 64))
}

AGG_PAIRS=4
WARMUP_BW=64	# explicit, so the CPU row knows how many bytes the 1 MiB run moved

# bench_cmd BENCH PROV: sets PROG and OPTS for one pair of that row
bench_cmd() {
	case $1 in
	lat)   PROG=cour_pingpong; OPTS=(-S 8 -n "$(msgs 20000 "$2")" -w 500) ;;
	bw64k) PROG=cour_bw; OPTS=(-t -S 64k -n "$(msgs 8192 "$2")" -w "$WARMUP_BW") ;;
	bw1m)  PROG=cour_bw; OPTS=(-t -S 1m -n "$(msgs 1024 "$2")" -w "$WARMUP_BW") ;;
	# without -n cour_rma stops at 256 MiB or 3 s, whichever first: slow providers end in time
	rmaw)  PROG=cour_rma; OPTS=(-o write -S 1m) ;;
	rmar)  PROG=cour_rma; OPTS=(-o read -S 1m) ;;
	rate)  PROG=cour_msgrate; OPTS=(-S 64 -n "$(msgs 100000 "$2")") ;;
	agg)   PROG=cour_bw; OPTS=(-t -S 1m -n "$(msgs 256 "$2")" -w "$WARMUP_BW") ;;
	esac
	[ "$QUICK" = 1 ] && [ "$PROG" = cour_rma ] && OPTS+=(-n 128)
	if [ "$2" = udp-ceiling ]; then
		# the same stream without a provider: -t means nothing there
		local o kept=()
		for o in "${OPTS[@]}"; do
			[ "$o" = -t ] || kept+=("$o")
		done
		PROG=cour_udp_ceiling
		OPTS=("${kept[@]}")
	fi
	return 0
}

# ceiling_row BENCH: true when udp-ceiling has something to measure in that row
ceiling_row() {
	# not agg: with nothing to pace them, four streams do not share one interval
	case $1 in bw64k|bw1m) return 0 ;; esac
	return 1
}

# set_env PROV: ENV_S and ENV_C, the env(1) commands of the server (namespace a) and client (b)
set_env() {
	# the runs pick their provider with -p; a FI_PROVIDER of the caller would hide it
	ENV_S=(env -u FI_PROVIDER)
	case $1 in
	udp-ceiling)
		ENV_C=("${ENV_S[@]}")
		;;
	courier|courier-key)
		[ -n "$COURIER_PROVIDER_PATH" ] &&
			ENV_S+=("FI_PROVIDER_PATH=$COURIER_PROVIDER_PATH")
		# only courier itself, not courier;ofi_rxd or courier;ofi_rxm; statistics at
		# close go to the logs, for reading a run that looks odd
		ENV_S+=(FI_PROVIDER=courier FI_COURIER_STATS=1 "${COURIER_ENV_LIST[@]}")
		[ "$1" = courier-key ] && ENV_S+=("FI_COURIER_AUTH_KEY_FILE=$AUTH_KEY")
		ENV_C=("${ENV_S[@]}" "FI_COURIER_IFACE_ADDR=$NETNS_ADDR_B")
		ENV_S+=("FI_COURIER_IFACE_ADDR=$NETNS_ADDR_A")
		;;
	*)
		ENV_C=("${ENV_S[@]}")
		;;
	esac
}

# CPU_WRAP CPUFILE LOGFILE PROG ARGS...: runs PROG and writes to CPUFILE its user and system
# seconds, all threads: in total ("times" of the shell that waited for it) and, read from /proc,
# when its header appeared in LOGFILE (setup done: oob connect, fi_getinfo, opening the fabric,
# address exchange). The CPU row takes the difference, the cost of moving the data: setup
# alone costs 0.1-0.2 s, as much as a fast provider's whole transfer.
CPU_WRAP=$LOG_DIR/cpu-wrap.sh
cat > "$CPU_WRAP" <<'EOF'
out=$1 log=$2
shift 2
"$@" &
pid=$!
setup=""
while kill -0 "$pid" 2> /dev/null; do
	if grep -q -E '^# [a-z_-]+ \((server|client)\) ' "$log" 2> /dev/null; then
		# fields 14 and 15: utime and stime of all its threads, in clock ticks
		setup=$(awk -v hz="$(getconf CLK_TCK)" '{ printf "%.3f\n", ($14 + $15) / hz }' \
			"/proc/$pid/stat" 2> /dev/null)
		break
	fi
	sleep 0.02
done
wait "$pid"
rc=$?
# not in a pipeline: a forked subshell starts with no children's times
times > "$out"
echo "setup ${setup:-unknown}" >> "$out"
exit $rc
EOF

# run_pairs PROV BENCH LOG NPAIRS: NPAIRS servers in namespace a, as many clients in b, all
# started at once, each pair on its own oob port; 0 if every process succeeded. Logs:
# LOG.N.server, LOG.N.client, LOG.N.status; LOG.N.cpu.* ("user system" seconds) for bw1m.
run_pairs() {
	local prov=$1 bench=$2 log=$3 npairs=$4 i port rc=0
	local -a spids=() cpids=() wrap_s=() wrap_c=()
	# the programs give up by themselves first; timeout(1) only catches a hung provider
	local t=$((RUN_TIMEOUT > 10 ? RUN_TIMEOUT - 5 : RUN_TIMEOUT))

	bench_cmd "$bench" "$prov"
	set_env "$prov"
	for i in $(seq 0 $((npairs - 1))); do
		port=$((PORT0 + PORT_SEQ % PORT_SPAN))
		PORT_SEQ=$((PORT_SEQ + 1))
		wrap_s=() wrap_c=()
		if [ "$bench" = bw1m ]; then
			wrap_s=(bash "$CPU_WRAP" "$log.$i.cpu.server" "$log.$i.server")
			wrap_c=(bash "$CPU_WRAP" "$log.$i.cpu.client" "$log.$i.client")
		fi
		netns_a "${ENV_S[@]}" timeout -k 2 "$RUN_TIMEOUT" "${wrap_s[@]}" "$BIN_DIR/$PROG" \
			-p "${prov%-key}" -P "$port" -T "$t" "${OPTS[@]}" -B "$NETNS_ADDR_A" \
			> "$log.$i.server" 2>&1 &
		spids+=($!)
		netns_b "${ENV_C[@]}" timeout -k 2 "$RUN_TIMEOUT" "${wrap_c[@]}" "$BIN_DIR/$PROG" \
			-p "${prov%-key}" -P "$port" -T "$t" "${OPTS[@]}" "$NETNS_ADDR_A" \
			> "$log.$i.client" 2>&1 &
		cpids+=($!)
	done
	for i in $(seq 0 $((npairs - 1))); do
		local crc src
		wait "${cpids[$i]}"
		crc=$?
		wait "${spids[$i]}"
		src=$?
		echo "$crc $src" > "$log.$i.status"
		{ [ "$crc" = 0 ] && [ "$src" = 0 ]; } || rc=1
	done
	return $rc
}

# result LOG NAME: the value of the client's "RESULT NAME <size> <value>" line
result() {
	awk -v n="$2" '$1 == "RESULT" && $2 == n { v = $4 } END { if (v != "") print v }' \
		"$1.0.client"
}

# cpu_per_gb LOG SIDE: CPU seconds per 10^9 bytes of the 1 MiB run, from the client's table
# line (messages timed, window) and the explicit warmup, rounded up to whole windows
cpu_per_gb() {
	awk -v warm="$WARMUP_BW" -v cpufile="$1.0.cpu.$2" '
		function secs(s,    m) {	# "1m2.345s"
			m = s; sub(/m.*/, "", m); sub(/^[0-9]+m/, "", s); sub(/s$/, "", s)
			return m * 60 + s
		}
		$1 == "RESULT" && $2 == "bw" { size = $3; msgs = prev[2]; win = prev[3] }
		{ split($0, prev, " ") }
		END {
			# "times": the shell itself, then its children; then our "setup S"
			if (size == "" || win + 0 <= 0 || (getline line < cpufile) <= 0 ||
			    (getline line < cpufile) <= 0 || (getline setup < cpufile) <= 0)
				exit
			split(line, c, " ")
			split(setup, su, " ")
			if (su[2] !~ /^[0-9.]+$/)
				exit
			bytes = (msgs + int((warm + win - 1) / win) * win) * size
			if (bytes > 0)
				printf "%.4f\n", (secs(c[1]) + secs(c[2]) - su[2]) / (bytes / 1e9)
		}' "$1.0.client"
}

# unsupported LOG: the provider lacks what the row asks (fi_getinfo found nothing)
unsupported() {
	grep -q -s 'fi_getinfo(.*failed: -61' "$1".*.server "$1".*.client
}

# ---- run ----
prov_tag() {
	local t=${1//;/_}
	echo "${t//[^A-Za-z0-9_.-]/}"
}

echo "# eth-bench: providers: ${PROV_LIST[*]}; $ROUNDS rounds; MTUs: $MTUS; loss: $LOSS% each" \
	"way (nft $NETNS_LOSS_HOOK hook)${RATE:+; each side shaped to $RATE (tbf)}$([ "$QUICK" = 1 ] && echo "; quick")"
echo "# namespaces $NETNS_A ($NETNS_ADDR_A, servers) and $NETNS_B ($NETNS_ADDR_B, clients), veth"
echo "# programs: $BIN_DIR"
echo "# courier: $COURIER_FROM${COURIER_ENV:+; courier env: $COURIER_ENV}"
echo "# host: $(uname -n), $(nproc) cpus, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# logs: $LOG_DIR"
read -r load1 _ < /proc/loadavg
if awk -v l="$load1" -v n="$(nproc)" 'BEGIN { exit !(l >= n / 2) }'; then
	echo "# warning: the host is busy (load $load1 on $(nproc) cpus); each side spins on a" \
		"cpu, so expect noisy numbers"
fi

FAILED=()
declare -A TIMED_OUT	# "mtu bench provider_index" -> the round another provider hung in
COURIER_FAILED=0
OTHER_FAILED=0

# record MTU BENCH PI VALUE: one line of results; the 1 MiB row also stands for its CPU rows
record() {
	echo "$1 $2 $3 $4" >> "$RESULTS"
	# a 1 MiB run that measured nothing measured no CPU either
	case $2/$4 in
	bw1m/FAIL|bw1m/NA)
		printf '%s cpus %s %s\n%s cpur %s %s\n' "$1" "$3" "$4" "$1" "$3" "$4" \
			>> "$RESULTS"
		;;
	esac
}

# run_row MTU ROUND BENCH PI: one run of a row for one provider, recorded and reported
run_row() {
	local mtu=$1 round=$2 bench=$3 pi=$4 prov=${PROV_LIST[$4]} log
	local key="$1 $3 $4" npairs=1 start=$SECONDS v="" unit="" st extra="" cs cr

	log=$LOG_DIR/m$mtu.r$round.$bench.$(prov_tag "$prov")

	[ "$bench" = agg ] && npairs=$AGG_PAIRS
	if [ "$prov" = udp-ceiling ] && ! ceiling_row "$bench"; then
		record "$mtu" "$bench" "$pi" NA
		return 0
	elif [ -n "${TIMED_OUT[$key]:-}" ]; then
		st="skipped (timed out in round ${TIMED_OUT[$key]})"
		record "$mtu" "$bench" "$pi" FAIL
		FAILED+=("MTU $mtu round $round $bench $prov: $st")
		OTHER_FAILED=1
	elif run_pairs "$prov" "$bench" "$log" "$npairs"; then
		case $bench in
		lat) v=$(result "$log" pingpong); unit=us ;;
		bw64k|bw1m) v=$(result "$log" bw); unit=MB/s ;;
		rmaw) v=$(result "$log" rma_write); unit=MB/s ;;
		rmar) v=$(result "$log" rma_read); unit=MB/s ;;
		rate) v=$(result "$log" rate); unit=msg/s ;;
		agg)
			unit=MB/s
			v=$(cat "$log".*.client | awk -v want="$npairs" '
				$1 == "RESULT" && $2 == "bw" { s += $4; n++ }
				END { if (n == want) print s }')
			extra=" ($(cat "$log".*.client | awk '$1 == "RESULT" {
				printf "%s%s", sep, $4; sep = " + " }'))"
			;;
		esac
		st=ok
		[ -z "$v" ] && st="FAILED (no RESULT)"
	elif unsupported "$log"; then
		st="not supported"
		record "$mtu" "$bench" "$pi" NA
	else
		st="FAILED (exit status client server: $(cat "$log".*.status | tr '\n' ' ' |
			sed 's/ $//'))"
		# Another provider that ran out of time once in a row does so again (ofi_rxd with
		# four pairs at once crawls): later rounds would only burn RUN_TIMEOUT each.
		# Courier, the subject, runs every time.
		if [ "$prov" != courier ] && grep -q -s -E 'timed out|^12[4-9] |^137 ' \
			"$log".*.client "$log".*.server "$log".*.status; then
			TIMED_OUT[$key]=$round
		fi
	fi
	case $st in
	ok)
		record "$mtu" "$bench" "$pi" "$v"
		if [ "$bench" = bw1m ]; then
			cs=$(cpu_per_gb "$log" client)
			cr=$(cpu_per_gb "$log" server)
			record "$mtu" cpus "$pi" "${cs:-FAIL}"
			record "$mtu" cpur "$pi" "${cr:-FAIL}"
			extra=" cpu s/GB sender ${cs:-?} receiver ${cr:-?}"
		fi
		;;
	FAILED*)
		record "$mtu" "$bench" "$pi" FAIL
		FAILED+=("MTU $mtu round $round $bench $prov: $st: $(grep -h -m1 \
			-E 'failed|error|timed out|mismatch' "$log".*.client "$log".*.server \
			2>/dev/null | head -1)")
		if [ "$prov" = courier ]; then COURIER_FAILED=1; else OTHER_FAILED=1; fi
		;;
	esac
	printf '# %s mtu %-5s r%d %-5s %-12s %12s %-5s %s(%ds, load %s)\n' "$(date +%T)" \
		"$mtu" "$round" "$bench" "$prov" "${v:-$st}" "$unit" "${extra:+${extra# } }" \
		$((SECONDS - start)) "$(cut -d' ' -f1 /proc/loadavg)"
}

# A provider libfabric does not load at all would look like one lacking a capability (n/a, no
# failure): a wrong COURIER_PROVIDER_PATH would pass as a clean run. Every part of a layered
# name must be listed.
if command -v fi_info > /dev/null; then
	for prov in "${PROV_LIST[@]}"; do
		[ "$prov" = udp-ceiling ] && continue
		set_env "$prov"
		listed=$("${ENV_S[@]}" fi_info -l 2> /dev/null | sed -n 's/^\([^ ]*\):$/\1/p')
		base=${prov%-key}
		for part in ${base//;/ }; do
			grep -q -x -F "$part" <<< "$listed" && continue
			echo "# warning: libfabric has no provider $part: $prov will fail"
			FAILED+=("$prov: libfabric does not load $part$([ "$prov" = courier ] &&
				echo " (COURIER_PROVIDER_PATH=${COURIER_PROVIDER_PATH:-unset})")")
			if [ "$prov" = courier ]; then COURIER_FAILED=1; else OTHER_FAILED=1; fi
		done
	done
fi

# ---- tables ----
# one table from results.txt; -v mtu, provs (the columns), benches (the rows that ran)
TABLE_AWK='
function median(list,    n, a, i, j, t) {
	n = split(list, a, " ")
	for (i = 1; i <= n; i++)
		for (j = i + 1; j <= n; j++)
			if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
	if (n == 0) return ""
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function fmt(v, unit) {
	if (v == "") return "n/a"
	if (unit == "s/GB") return sprintf("%.3f", v)
	if (unit == "us") return sprintf("%.2f", v)
	if (unit == "msg/s") return sprintf("%.0f", v)
	return sprintf("%.1f", v)
}
BEGIN {
	np = split(provs, prov, " ")
	cour = 0
	for (i = 1; i <= np; i++)
		if (prov[i] == "courier") cour = i
	nb = split(benches, want, " ")
	for (i = 1; i <= nb; i++)
		run[want[i]] = 1
	if (run["bw1m"])
		run["cpus"] = run["cpur"] = 1
	# key:label:unit, in table order
	nall = split("lat:latency 8 B:us,bw64k:tagged bw 64 KiB:MB/s," \
		"bw1m:tagged bw 1 MiB:MB/s,rmaw:RMA write 1 MiB:MB/s," \
		"rmar:RMA read 1 MiB:MB/s,rate:msg rate 64 B:msg/s," \
		"agg:4 pairs bw 1 MiB:MB/s,cpus:CPU sender 1 MiB:s/GB," \
		"cpur:CPU receiver 1 MiB:s/GB", all, ",")
	nrow = 0
	for (i = 1; i <= nall; i++) {
		split(all[i], f, ":")
		if (run[f[1]]) {
			row[++nrow] = f[1]; lab[nrow] = f[2]; un[nrow] = f[3]
		}
	}
}
$1 == mtu {
	k = $2 SUBSEP ($3 + 1)
	if ($4 == "FAIL") nfail[k]++
	else if ($4 != "NA") vals[k] = vals[k] " " $4
}
END {
	printf "%-20s %-6s", "benchmark", "unit"
	for (i = 1; i <= np; i++)
		printf " %14s", prov[i]
	if (cour)
		for (i = 1; i <= np; i++)
			if (i != cour)
				printf " %18s", "courier/" prov[i]
	printf "\n"
	for (r = 1; r <= nrow; r++) {
		printf "%-20s %-6s", lab[r], un[r]
		for (i = 1; i <= np; i++) {
			k = row[r] SUBSEP i
			med[i] = median(vals[k])
			s = fmt(med[i], un[r])
			if (med[i] != "" && nfail[k]) s = s "*"
			printf " %14s", s
		}
		if (cour)
			for (i = 1; i <= np; i++) {
				if (i == cour) continue
				if (med[cour] == "" || med[i] == "" || med[i] + 0 == 0)
					printf " %18s", "n/a"
				else
					printf " %18.2f", med[cour] / med[i]
			}
		printf "\n"
	}
}'

print_tables() {
	local mtu
	# shellcheck disable=SC2034 # read by NETNS_ON_EXIT
	TABLES_DONE=1
	for mtu in $MTUS; do
		echo
		echo "== MTU $mtu, $ROUNDS rounds, loss $LOSS%${RATE:+, line $RATE}: medians (* some rounds failed;" \
			"n/a: none succeeded or not supported)"
		awk -v mtu="$mtu" -v provs="${PROV_LIST[*]}" -v benches="${BENCH_LIST[*]}" \
			"$TABLE_AWK" "$RESULTS"
		if [ "$LOSS" -gt 0 ] && [ -s "$LOG_DIR/m$mtu.nft" ]; then
			sed 's/^/   nft /' "$LOG_DIR/m$mtu.nft"
		fi
	done
}

# interrupted (INT, TERM, HUP, or a failed setup step): still show what was measured
# shellcheck disable=SC2034 # netns.sh evaluates NETNS_ON_EXIT at exit
TABLES_DONE=0 NETNS_ON_EXIT='[ "$TABLES_DONE" = 1 ] || { echo;
	echo "# interrupted: partial results, logs in $LOG_DIR"; print_tables; }'

T0=$SECONDS
for mtu in $MTUS; do
	# a line rate: tbf's bucket holds a 64 KB GSO run, and a millisecond's worth more
	if [ -n "$RATE" ] &&
	   { ! netns_a tc qdisc replace dev "$NETNS_IF" root tbf rate "$RATE" burst 1mb \
		latency 20ms || ! netns_b tc qdisc replace dev "$NETNS_IF" root tbf \
		rate "$RATE" burst 1mb latency 20ms; }; then
		echo "eth-bench.sh: tc cannot shape $NETNS_IF to $RATE" >&2
		exit 1
	fi
	if ! netns_a ip link set "$NETNS_IF" mtu "$mtu" ||
	   ! netns_b ip link set "$NETNS_IF" mtu "$mtu" || ! netns_wait_up; then
		echo "eth-bench.sh: cannot set MTU $mtu on $NETNS_IF" >&2
		FAILED+=("MTU $mtu: cannot set it on $NETNS_IF, or it did not come up")
		COURIER_FAILED=1
		continue
	fi
	# a fresh set of rules per MTU zeroes the counters shown for it
	netns_loss "$LOSS" "$PORTS" || exit 1
	echo "# MTU $mtu: a $(netns_a cat "/sys/class/net/$NETNS_IF/mtu")," \
		"b $(netns_b cat "/sys/class/net/$NETNS_IF/mtu")"
	for round in $(seq 1 "$ROUNDS"); do
		for bench in "${BENCH_LIST[@]}"; do
			for pi in "${!PROV_LIST[@]}"; do
				run_row "$mtu" "$round" "$bench" "$pi"
			done
		done
	done
	netns_counters > "$LOG_DIR/m$mtu.nft"
	sed "s/^/# MTU $mtu nft /" "$LOG_DIR/m$mtu.nft"
done

print_tables
echo
echo "# wall time $((SECONDS - T0)) s; load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"

cour_bench_failed_or_clean

[ "$COURIER_FAILED" = 1 ] && exit 1
[ "$OTHER_FAILED" = 1 ] && exit 2
exit 0
