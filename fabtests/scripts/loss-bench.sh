#!/usr/bin/env bash
# loss-bench.sh: tagged bandwidth with every byte verified (cour_bw -t -v), with and without
# packet loss, for courier, tcp;ofi_rxm and udp;ofi_rxd, between two network namespaces joined
# by veth (netns.sh): first loss-free, then with nftables dropping PCT% of the packets each
# side receives (so PCT% each way), in the same namespaces. Prints per run and provider the
# MB/s of both and the share kept, then a table of medians over the runs. Loss-free figures
# move a lot with the host's load (each side spins on a cpu): compare within one run.
#
# usage: loss-bench.sh [-r runs] [-l pct] [-s size] [-n msgs] [-b bindir] [-o logdir] [-g]
#                      [-- <more cour_bw options>]
#   -r RUNS   repetitions, alternating providers within each (default 3)
#   -l PCT    percent dropped on each side in the lossy runs (default 5)
#   -s SIZE   message size (default 64k)
#   -n MSGS   messages per run (default 2048; udp;ofi_rxd uses a quarter, it is slow)
#   -b DIR    directory holding cour_bw (default: as compare.sh finds it)
#   -o DIR    keep the logs there (default: a temporary directory, removed when all went well)
#   -g        exit 3 unless the goals hold (courier keeps >= 70% and beats tcp;ofi_rxm lossy)
# environment:
#   PROVIDERS     space separated (default: courier tcp;ofi_rxm udp;ofi_rxd)
#   COURIER_ENV   extra VAR=value for the courier runs, e.g. "FI_COURIER_WINDOW=64"
#   RUN_TIMEOUT   seconds per server+client pair (default 120)
#   NETNS_LOSS_HOOK input (default): drop what each side receives, i.e. on the wire;
#                 output: drop in the sender's own stack, which TCP and courier notice at once
#                 (EPERM) and simply resend: the "tcp;ofi_rxm keeps 69%" figure came from that
#   NETNS_ONE_SEG 1: cap GSO at one segment, so nft drops single TCP wire packets; by default a
#                 drop takes a whole GSO packet (~30 wire packets) from TCP (see netns.sh)
# Needs root, ip (iproute2) and nft (nftables); exits 77 without them. Exit status: 0, 1 if a
# courier run failed, 2 if only another provider's did, 3 with -g when a goal was missed.
set -u

RUNS=3
PCT=5
SIZE=64k
MSGS=2048
BIN_DIR=""
LOG_DIR=""
GOALS=0
while getopts "r:l:s:n:b:o:gh" opt; do
	case $opt in
	r) RUNS=$OPTARG ;;
	l) PCT=$OPTARG ;;
	s) SIZE=$OPTARG ;;
	n) MSGS=$OPTARG ;;
	b) BIN_DIR=$OPTARG ;;
	o) LOG_DIR=$OPTARG ;;
	g) GOALS=1 ;;
	h) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "usage: $0 [-r runs] [-l pct] [-s size] [-n msgs] [-b bindir] [-o logdir] [-g]" \
		"[-- cour_bw options]" >&2; exit 64 ;;
	esac
done
shift $((OPTIND - 1))
EXTRA_OPTS=("$@")

read -r -a PROV_LIST <<< "${PROVIDERS:-courier tcp;ofi_rxm udp;ofi_rxd}"
RUN_TIMEOUT=${RUN_TIMEOUT:-120}
read -r -a COURIER_ENV_LIST <<< "${COURIER_ENV:-}"
SCRIPT_DIR=$(cd "$(dirname "$0")" && pwd)
. "$SCRIPT_DIR/bench-env.sh"
. "$SCRIPT_DIR/netns.sh"

if ! netns_available; then
	echo "loss-bench.sh: cannot run: $NETNS_WHY" >&2
	exit 77
fi
BIN_DIR=$(cour_find_bin_dir "$BIN_DIR") || {
	echo "loss-bench.sh: cannot find cour_bw; build first or pass -b <dir>" >&2
	exit 64
}
COURIER_PROVIDER_PATH=${COURIER_PROVIDER_PATH:-$(cour_find_provider_path "$BIN_DIR")}

cour_log_dir loss-bench || exit 1
RESULTS=$LOG_DIR/results.txt
: > "$RESULTS"

netns_setup || { echo "loss-bench.sh: cannot set up the namespaces" >&2; exit 1; }
# every run gets its own oob port; the range is exempt from the drops (netns.sh says why)
PORT0=47600
PORT=$PORT0
PORTS="$PORT0-$((PORT0 + 999))"

# run_pair <provider> <log prefix>: cour_bw server in namespace a, client in b; 0 if both
# succeeded. The client's RESULT line is the measurement.
run_pair() {
	local prov=$1 log=$2 n=$MSGS spid crc src
	local -a env_s=(env) env_c=(env)
	# the programs give up by themselves first; timeout(1) only catches a hung provider
	local t=$((RUN_TIMEOUT > 10 ? RUN_TIMEOUT - 5 : RUN_TIMEOUT))

	case $prov in
	udp\;ofi_rxd) n=$(( (MSGS + 3) / 4 )) ;;
	esac
	case $prov in
	courier)
		[ -n "$COURIER_PROVIDER_PATH" ] && env_s+=("FI_PROVIDER_PATH=$COURIER_PROVIDER_PATH")
		# hide courier;ofi_rxd and courier;ofi_rxm: -p courier means courier itself
		env_s+=("FI_PROVIDER=^ofi_rxd,ofi_rxm" FI_COURIER_STATS=1 "${COURIER_ENV_LIST[@]}")
		env_c=("${env_s[@]}" "FI_COURIER_IFACE_ADDR=$NETNS_ADDR_B")
		env_s+=("FI_COURIER_IFACE_ADDR=$NETNS_ADDR_A")
		;;
	esac
	local -a opts=(-p "${prov%%;*}" -P "$PORT" -T "$t" -S "$SIZE" -n "$n" -t -v
		       "${EXTRA_OPTS[@]}")
	# "-p tcp" picks tcp;ofi_rxm; "-p udp" would pick udp;ofi_rxd too, but say so
	[ "$prov" = "udp;ofi_rxd" ] && opts[1]=$prov
	PORT=$((PORT + 1))
	netns_a "${env_s[@]}" timeout -k 2 "$RUN_TIMEOUT" "$BIN_DIR/cour_bw" "${opts[@]}" \
		-B "$NETNS_ADDR_A" > "$log.server" 2>&1 &
	spid=$!
	netns_b "${env_c[@]}" timeout -k 2 "$RUN_TIMEOUT" "$BIN_DIR/cour_bw" "${opts[@]}" \
		"$NETNS_ADDR_A" > "$log.client" 2>&1
	crc=$?
	wait "$spid"
	src=$?
	echo "$crc $src" > "$log.status"
	[ "$crc" = 0 ] && [ "$src" = 0 ]
}

# courier's sender statistics, short: "rexmit T+F srtt S"
courier_stats() {
	awk '$1 == "courier" && $2 == "stats" {
		for (i = 3; i < NF; i++)
			v[$i] = $(i + 1)
		printf "rexmit %s+%s srtt_us %s\n", v["retrans_timeout"], v["retrans_fast"],
			v["srtt_us"]
		exit
	}' "$1.client"
}

echo "# loss-bench: cour_bw -S $SIZE -t -v, providers: ${PROV_LIST[*]}, $RUNS runs, $PCT% loss" \
	"each way (nft $NETNS_LOSS_HOOK hook)"
echo "# namespaces $NETNS_A ($NETNS_ADDR_A, server) and $NETNS_B ($NETNS_ADDR_B, client)," \
	"veth MTU $(netns_a cat /sys/class/net/$NETNS_IF/mtu)$([ "${NETNS_ONE_SEG:-0}" = 1 ] &&
	echo ", GSO capped at 1 segment")"
echo "# programs: $BIN_DIR; courier from: ${COURIER_PROVIDER_PATH:-the default path}" \
	"${COURIER_ENV:+; courier env: $COURIER_ENV}"
echo "# host: $(uname -n), $(nproc) cpus, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# logs: $LOG_DIR"

FAILED=()
COURIER_FAILED=0
for run in $(seq 1 "$RUNS"); do
	for i in "${!PROV_LIST[@]}"; do
		prov=${PROV_LIST[$i]}
		for phase in free lossy; do
			if [ $phase = free ]; then
				netns_loss 0 "$PORTS" || exit 1
			else
				netns_loss "$PCT" "$PORTS" || exit 1
			fi
			log=$LOG_DIR/run$run.$i.$phase
			start=$SECONDS
			if run_pair "$prov" "$log"; then
				mbps=$(awk '$1 == "RESULT" { print $4 }' "$log.client" | tail -1)
				netns_counters > "$log.nft"
				# a lossy run whose traffic met no drop rule measured nothing
				if [ $phase = lossy ] &&
				   awk '$9 == 0 { bad = 1 } END { exit !bad }' "$log.nft"; then
					FAILED+=("run $run, $prov, lossy: no packet dropped on a side")
					mbps="($mbps)"
				else
					echo "$i $phase $mbps" >> "$RESULTS"
				fi
			else
				mbps=failed
				FAILED+=("run $run, $prov, $phase: $(grep -h -m1 -E \
					'failed|error|timed out' "$log.client" "$log.server" | head -1)")
				[ "$prov" = courier ] && COURIER_FAILED=1
				netns_counters > "$log.nft"
			fi
			printf '# run %d %-12s %-5s %9s MB/s  (%ds; nft: %s)%s\n' "$run" "$prov" \
				"$phase" "$mbps" $((SECONDS - start)) \
				"$(awk '{ printf "%s%s dropped %s of %s", (NR > 1 ? ", " : ""), $1, $9, $3 }' \
				"$log.nft")" \
				"$([ "$prov" = courier ] && echo "; $(courier_stats "$log")")"
		done
	done
done

echo
awk -v provs="${PROV_LIST[*]}" -v pct="$PCT" -v goals="$GOALS" '
function median(list,    n, a, i, j, t) {
	n = split(list, a, " ")
	for (i = 1; i <= n; i++)
		for (j = i + 1; j <= n; j++)
			if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
	if (n == 0) return ""
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
BEGIN { np = split(provs, prov, " ") }
{ vals[$1, $2] = vals[$1, $2] " " $3 }
END {
	printf "%-14s %14s %14s %8s   %s\n", "provider", "loss-free MB/s", "lossy MB/s",
		"kept %", "(medians; every run: loss-free / lossy)"
	for (i = 1; i <= np; i++) {
		f = median(vals[i - 1, "free"]); l = median(vals[i - 1, "lossy"])
		free[prov[i]] = f; lossy[prov[i]] = l
		kept[prov[i]] = (f != "" && l != "" && f > 0) ? 100 * l / f : ""
		printf "%-14s %14s %14s %8s   %s /%s\n", prov[i],
			f == "" ? "n/a" : sprintf("%.1f", f), l == "" ? "n/a" : sprintf("%.1f", l),
			kept[prov[i]] == "" ? "n/a" : sprintf("%.0f", kept[prov[i]]),
			vals[i - 1, "free"], vals[i - 1, "lossy"]
	}
	ok = 1
	if ("courier" in kept && kept["courier"] != "") {
		g1 = kept["courier"] >= 70
		printf "\ncourier keeps %.0f%% of its loss-free bandwidth at %s%% loss " \
			"(goal: 70%%): %s\n", kept["courier"], pct, g1 ? "met" : "NOT met"
		ok = ok && g1
		if ("tcp;ofi_rxm" in lossy && lossy["tcp;ofi_rxm"] != "") {
			g2 = lossy["courier"] > lossy["tcp;ofi_rxm"]
			printf "courier lossy / tcp;ofi_rxm lossy: %.2f (goal: > 1): %s\n",
				lossy["courier"] / lossy["tcp;ofi_rxm"], g2 ? "met" : "NOT met"
			ok = ok && g2
		}
	} else {
		ok = 0
	}
	exit goals && !ok ? 3 : 0
}' "$RESULTS"
GOAL_RC=$?

cour_bench_failed_or_clean

[ "$COURIER_FAILED" = 1 ] && exit 1
[ ${#FAILED[@]} -gt 0 ] && exit 2
exit $GOAL_RC
