#!/usr/bin/env bash
# incast-bench.sh: several senders into one receiver through a shared, shaped port (incast),
# courier against tcp;ofi_rxm with cubic and with bbr. A Linux bridge in a "switch" namespace
# joins one namespace per host (bridge.sh); the receiver's switch port is a tbf of RATE with a
# LIMIT-byte queue, the only bottleneck. What a congestion controller is for shows there: how
# much of the line the senders keep, how fairly they share it, how much they resend and lose,
# and how long the port's queue grows.
#
# usage: incast-bench.sh [-n "senders"] [-S "sizes"] [-r rounds] [-R rate] [-L limit] [-m mtu]
#                        [-d seconds | -c msgs] [-P "providers"] [-x "parts"] [-k]
#                        [-b bindir] [-o logdir]
#   -n LIST    sender counts, space separated (default "2 4 8")
#   -S LIST    message sizes of cour_bw -S, space separated (default "1m 64k")
#   -r ROUNDS  rounds (default 3); a round runs every provider once per (size, senders),
#              providers interleaved, so a load change hits all of them; tables show medians
#   -R RATE    the port's rate, tc units (default 1gbit)
#   -L LIMIT   the port's queue, tc units (default 256kb); BURST in the environment sets
#              tbf's bucket (default 64kb)
#   -m MTU     MTU of every link (default 1500)
#   -d SEC     seconds a run should last at line rate (default 5): each of N senders sends
#              ceil(RATE * SEC / (N * size)) messages, which cour_bw rounds up to whole
#              windows of 64 (so a 1m run of 4 senders lasts 6.4 s at 1gbit)
#   -c MSGS    messages per sender instead (same for every N and size)
#   -P LIST    providers (default "courier tcp;ofi_rxm@cubic tcp;ofi_rxm@bbr"); PROV@CC runs
#              PROV with TCP congestion control CC as every namespace's default
#   -x PARTS   parts to run (default "incast share lat"), see below
#   -k         keep the log directory even when every run succeeded (-o DIR is always kept)
#   -b DIR     directory holding cour_bw and cour_pingpong (default: ./fabtests/bench, then
#              next to this script, then $PATH)
#   -o DIR     write logs there (default: a fresh mktemp directory)
# environment:
#   COURIER_PROVIDER_PATH  directory holding libcourier-fi.so (default: the build's .libs,
#                          found from the bindir); copied into the log directory at start, so
#                          a rebuild during the run cannot mix two builds
#   COURIER_ENV            extra VAR=value for the courier runs, e.g. "FI_COURIER_WINDOW=64"
#   BURST                  tbf's bucket (default 64kb)
#   RUN_TIMEOUT            seconds any one program may run (default: 60, or 8 * SEC + 20)
#
# Parts:
#  incast  for each size, N and provider: N cour_bw servers in the receiver's namespace (own
#          oob ports), N clients `cour_bw -t -S SIZE -n MSGS -w 0`, one per sender namespace,
#          started together; meanwhile `ping -i 0.005` from a spare namespace to the receiver
#          samples the port's queue. Columns:
#          goodput%  total application bytes of the N clients (their timed messages; -w 0
#                    times them all) over the common wall time, from the earliest start to
#                    the latest end of a client's transfer, as % of RATE in bytes/s (1gbit:
#                    125 MB/s); a client's end is the wall-clock time its RESULT line appeared
#                    (timestamped as it was written), its start that end minus its own
#                    transfer time (messages * size / its MB/s). At MTU 1500 headers alone
#                    keep this below ~95%.
#          MB/s      per sender (10^6 B/s, each over its own transfer time): mean and min-max
#          Jain      Jain's fairness index of those, (sum x)^2 / (N sum x^2): 1 is even, 1/N
#                    is one sender taking all (senders that finish early leave the line to
#                    the others, so this understates how unevenly they shared it)
#          retx%     retransmitted / sent packets of the senders. courier: from the clients'
#                    `courier stats` lines (FI_COURIER_STATS=1), (retrans_timeout +
#                    retrans_fast + retrans_probe) / tx_pkts; tx_pkts counts every packet
#                    handed to the wire, retransmissions and acknowledgements included (a
#                    packed datagram counts each packet in it). tcp: TcpRetransSegs /
#                    TcpOutSegs from nstat in the sender namespaces (segments, GSO split)
#          lost%     wire packets the port dropped: what every host but the receiver sent
#                    (bridge.sh's counting qdiscs, in wire packets) minus what the port's
#                    tbf sent ("Sent pkts"), over what was sent
#          drops     the tbf's own "dropped": skbs, a GSO run counting once, so fewer
#          ping      ICMP round trip across the port, p50 and p99 in ms, from the start of
#                    the clients to the end of the last; and the share of pings lost. The
#                    reply does not cross the shaped port, so this is the port's queueing
#                    delay plus a few tens of us. ping needs a cpu too: on a host with fewer
#                    cpus than spinning processes it may send only while a sender is off its
#                    cpu, which would bias the samples toward shorter queues
#  share   one iperf3 TCP flow (cubic) from its own namespace beside K = 1 and 2 streams of
#          each provider (cour_bw -t -S <first size of -S>, never ending), all into the
#          receiver; tcp;ofi_rxm streams run with the congestion control their @CC names.
#          After 2 s to settle, the receiver's nft counters (IP bytes per source host, after
#          GRO) are read over SEC seconds; each party's share is its bytes over RATE * SEC.
#          Then all are stopped.
#  lat     cour_pingpong -S 8 -n 3000 (courier, half the mean round trip, us) from the spare
#          namespace to the receiver across the port: idle, then beside 2 courier 1m streams
#          (after 2 s to settle), with the share of the line the streams moved meanwhile (an
#          RTO stall leaves the port idle and the latency looks idle too).
#
# Namespaces and processes: each side of cour_bw spins on a cpu; N senders mean 2N spinning
# processes, so on a small host the cpus are shared and the figures are noisy.
# Needs root, ip (iproute2), tc, nft, ping (iputils-ping) and, for the share part, iperf3.
# Exit status: 0 if every run succeeded, 1 if a courier run failed, 2 if only another
# provider's did, 64 on a usage error or missing programs, 77 when the namespaces are
# unavailable.
set -u
export LC_ALL=C

SENDERS="2 4 8"
SIZES="1m 64k"
ROUNDS=3
RATE=1gbit
LIMIT=256kb
BURST=${BURST:-64kb}
MTU=1500
SECS=5
MSGS=""
PROVS="courier tcp;ofi_rxm@cubic tcp;ofi_rxm@bbr"
PARTS="incast share lat"
KEEP=0
BIN_DIR=""
LOG_DIR=""
ARGS=("$@")
usage() {
	echo "usage: $0 [-n \"senders\"] [-S \"sizes\"] [-r rounds] [-R rate] [-L limit] [-m mtu]" \
		"[-d seconds | -c msgs] [-P \"providers\"] [-x \"parts\"] [-k] [-b bindir]" \
		"[-o logdir]" >&2
	exit 64
}
# shellcheck disable=SC2034 # KEEP: read by cour_bench_failed_or_clean
while getopts "n:S:r:R:L:m:d:c:P:x:kb:o:h" opt; do
	case $opt in
	n) SENDERS=$OPTARG ;;
	S) SIZES=$OPTARG ;;
	r) ROUNDS=$OPTARG ;;
	R) RATE=$OPTARG ;;
	L) LIMIT=$OPTARG ;;
	m) MTU=$OPTARG ;;
	d) SECS=$OPTARG ;;
	c) MSGS=$OPTARG ;;
	P) PROVS=$OPTARG ;;
	x) PARTS=$OPTARG ;;
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
case $SECS in ''|*[!0-9]*|0) usage ;; esac
case $MSGS in *[!0-9]*) usage ;; esac
case $MTU in ''|*[!0-9]*) usage ;; esac
{ [ "$MTU" -ge 576 ] && [ "$MTU" -le 65535 ]; } || usage
read -r -a N_LIST <<< "$SENDERS"
read -r -a SIZE_LIST <<< "$SIZES"
read -r -a PROV_LIST <<< "$PROVS"
read -r -a PART_LIST <<< "$PARTS"
read -r -a COURIER_ENV_LIST <<< "${COURIER_ENV:-}"
if [ ${#N_LIST[@]} -eq 0 ] || [ ${#SIZE_LIST[@]} -eq 0 ] || [ ${#PROV_LIST[@]} -eq 0 ]; then
	usage
fi
NMAX=2
for n in "${N_LIST[@]}"; do
	case $n in ''|*[!0-9]*|0) usage ;; esac
	[ "$n" -gt 200 ] && usage
	[ "$n" -gt "$NMAX" ] && NMAX=$n
done
for p in "${PART_LIST[@]}"; do
	case $p in incast|share|lat) ;; *) echo "incast-bench.sh: no part $p" >&2; usage ;; esac
done
has_part() { [[ " ${PART_LIST[*]} " == *" $1 "* ]]; }

# rate_Bps RATE: tc's rate in bytes per second (bit, kbit.. are bits, bps, kbps.. bytes;
# a bare number is bits, as tc takes it)
rate_Bps() {
	awk -v r="$1" 'BEGIN {
		r = tolower(r); n = r + 0; u = r; sub(/^[0-9.]+/, "", u)
		m[""] = 1 / 8; m["bit"] = 1 / 8; m["kbit"] = 1e3 / 8; m["mbit"] = 1e6 / 8
		m["gbit"] = 1e9 / 8; m["tbit"] = 1e12 / 8; m["kibit"] = 1024 / 8
		m["mibit"] = 1048576 / 8; m["gibit"] = 1073741824 / 8
		m["bps"] = 1; m["kbps"] = 1e3; m["mbps"] = 1e6; m["gbps"] = 1e9
		if (!(u in m) || n <= 0) exit 1
		printf "%.0f\n", n * m[u]
	}'
}
# size_bytes SIZE: cour_bw's sizes (k, m, g: powers of 2)
size_bytes() {
	awk -v s="$1" 'BEGIN {
		s = tolower(s); n = s + 0; u = s; sub(/^[0-9]+/, "", u)
		m[""] = 1; m["k"] = 1024; m["m"] = 1048576; m["g"] = 1073741824
		if (!(u in m) || n <= 0) exit 1
		printf "%.0f\n", n * m[u]
	}'
}
LINE_BPS=$(rate_Bps "$RATE") || { echo "incast-bench.sh: -R $RATE: not a tc rate" >&2; usage; }
for s in "${SIZE_LIST[@]}"; do
	size_bytes "$s" > /dev/null || { echo "incast-bench.sh: -S: size $s" >&2; usage; }
done
RUN_TIMEOUT=${RUN_TIMEOUT:-$((8 * SECS + 20 > 60 ? 8 * SECS + 20 : 60))}
case $RUN_TIMEOUT in ''|*[!0-9]*|0) usage ;; esac
SETTLE=2	# share and lat parts: seconds for the streams to settle before measuring
LAT_ITERS=3000	# lat part: round trips of cour_pingpong

SCRIPT_DIR=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench-env.sh
. "$SCRIPT_DIR/bench-env.sh"
# shellcheck source=bridge.sh
. "$SCRIPT_DIR/bridge.sh"

if ! bridge_available; then
	echo "incast-bench.sh: cannot run: $BRIDGE_WHY" >&2
	exit 77
fi
BIN_DIR=$(cour_find_bin_dir "$BIN_DIR") || {
	echo "incast-bench.sh: cannot find cour_pingpong; build first or pass -b <dir>" >&2
	exit 64
}
for p in cour_bw cour_pingpong; do
	if [ ! -x "$BIN_DIR/$p" ]; then
		echo "incast-bench.sh: $BIN_DIR has no $p" >&2
		exit 64
	fi
done
NEED=(ping nstat)
has_part share && NEED+=(iperf3 ss)
for p in "${NEED[@]}"; do
	command -v "$p" > /dev/null || {
		echo "incast-bench.sh: no $p (Debian: iputils-ping, iproute2, iperf3)" >&2
		exit 64
	}
done
COURIER_PROVIDER_PATH=${COURIER_PROVIDER_PATH:-$(cour_find_provider_path "$BIN_DIR")}

cour_log_dir incast-bench || exit 1
RESULTS=$LOG_DIR/results.txt
: > "$RESULTS"

COURIER_FROM=${COURIER_PROVIDER_PATH:-the default path}
if [ -n "$COURIER_PROVIDER_PATH" ] && [ -f "$COURIER_PROVIDER_PATH/libcourier-fi.so" ]; then
	COURIER_FROM="$COURIER_PROVIDER_PATH/libcourier-fi.so, built $(date -r \
		"$COURIER_PROVIDER_PATH/libcourier-fi.so" '+%F %T'), copied to $LOG_DIR/courier-lib"
	mkdir -p "$LOG_DIR/courier-lib" &&
		cp "$COURIER_PROVIDER_PATH/libcourier-fi.so" "$LOG_DIR/courier-lib/" || exit 1
	COURIER_PROVIDER_PATH=$LOG_DIR/courier-lib
fi

# shellcheck disable=SC2034 # read by bridge_setup
BRIDGE_MTU=$MTU BRIDGE_RATE=$RATE BRIDGE_BURST=$BURST BRIDGE_LIMIT=$LIMIT

bridge_setup "$NMAX" tcp ping || {
	echo "incast-bench.sh: cannot set up the namespaces" >&2
	exit 1
}
RX_ADDR=$(bridge_addr rx)
NS_RX=$(bridge_ns rx)
NS_PING=$(bridge_ns ping)
NS_TCP=$(bridge_ns tcp)
PORT0=47600
PORT_SEQ=0
IPERF_PORT=5201

FAILED=()
COURIER_FAILED=0
OTHER_FAILED=0

# ---- helpers ----
prov_name() { echo "${1%@*}"; }
prov_cc() { case $1 in *@*) echo "${1##*@}" ;; esac; }
prov_tag() {
	local t=${1//;/_}
	t=${t//@/-}
	echo "${t//[^A-Za-z0-9_.-]/}"
}
is_courier() { [ "$(prov_name "$1")" = courier ]; }

# use_prov PROV: the TCP congestion control it asks for, in every namespace
use_prov() {
	local cc
	cc=$(prov_cc "$1")
	[ -z "$cc" ] && return 0
	bridge_tcp_cc "$cc" || {
		echo "incast-bench.sh: cannot set TCP congestion control $cc" >&2
		return 1
	}
}

# set_env PROV HOST: ENV, the env(1) command of a process of PROV in HOST's namespace
set_env() {
	# the runs pick their provider with -p; a FI_PROVIDER of the caller would hide it
	ENV=(env -u FI_PROVIDER)
	if is_courier "$1"; then
		[ -n "$COURIER_PROVIDER_PATH" ] && ENV+=("FI_PROVIDER_PATH=$COURIER_PROVIDER_PATH")
		# courier itself, not courier;ofi_rxm; UDP, not shared memory (one host); its own
		# address; statistics at close
		ENV+=(FI_PROVIDER=courier FI_COURIER_SHM=0 "FI_COURIER_IFACE_ADDR=$(bridge_addr "$2")"
		      FI_COURIER_STATS=1 "${COURIER_ENV_LIST[@]}")
	fi
}

# addcmd LABEL COMMAND...: one line of the run's .cmds log, quoted for the shell
addcmd() {
	local label=$1
	shift
	cmds+=("$label: $(printf '%q ' "$@")")
}

next_port() {
	PORT=$((PORT0 + PORT_SEQ % 1000))
	PORT_SEQ=$((PORT_SEQ + 1))
}

# stamp: each line of stdin prefixed with the wall-clock time it arrived (s.us)
stamp() {
	local l
	while IFS= read -r l; do
		printf '%s %s\n' "$EPOCHREALTIME" "$l"
	done
}

# nstat_out HOST...: "TcpOutSegs TcpRetransSegs" summed over those namespaces (absolute)
nstat_out() {
	local h
	for h in "$@"; do
		bridge_exec "$h" nstat -asz TcpOutSegs TcpRetransSegs 2> /dev/null
	done | awk '$1 == "TcpOutSegs" { o += $2 } $1 == "TcpRetransSegs" { r += $2 }
		    END { printf "%.0f %.0f\n", o, r }'
}

# courier_retx LOG...: "tx_pkts retransmitted" summed over the `courier stats` lines
courier_retx() {
	cat "$@" 2> /dev/null | awk '{
		for (i = 1; i < NF; i++)
			if ($i == "courier" && $(i + 1) == "stats") break
		if (i >= NF) next
		for (j = i + 3; j < NF; j++) {
			if ($j == "tx_pkts") tx += $(j + 1)
			if ($j == "retrans_timeout" || $j == "retrans_fast" || $j == "retrans_probe")
				re += $(j + 1)
		}
	} END { printf "%.0f %.0f\n", tx, re }'
}

# ping_stats LOG: "p50 p99 lost%" of a ping's output (ms)
ping_stats() {
	awk '
		/ time=/ { t = $0; sub(/.* time=/, "", t); sub(/ .*/, "", t); v[++n] = t + 0 }
		/packets transmitted/ { tx = $1; rx = $4 }
		END {
			if (n == 0) { print "- - -"; exit }
			for (i = 2; i <= n; i++) {	# insertion sort: a few thousand values
				x = v[i]
				for (j = i - 1; j >= 1 && v[j] > x; j--) v[j + 1] = v[j]
				v[j + 1] = x
			}
			p50 = v[int((n * 50 + 99) / 100)]; p99 = v[int((n * 99 + 99) / 100)]
			printf "%.3f %.3f %s\n", p50, p99, (tx > 0 ? sprintf("%.1f", 100 * (tx - rx) / tx) : "-")
		}' "$1"
}

# kill_wait PID...: TERM to each (timeout(1) passes it on to its program), then wait
kill_wait() {
	local p
	for p in "$@"; do
		kill -TERM "$p" 2> /dev/null
	done
	for p in "$@"; do
		wait "$p" 2> /dev/null
	done
}

# settle: nothing of ours runs in the hosts' namespaces (a killed run's leftovers)
settle() {
	local h pids
	for h in $BRIDGE_HOSTS; do
		pids=$(ip netns pids "$(bridge_ns "$h")" 2> /dev/null)
		[ -n "$pids" ] && kill -9 $pids 2> /dev/null
	done
	sleep 0.3
}

note_fail() {	# PROV TEXT
	FAILED+=("$2")
	if is_courier "$1"; then COURIER_FAILED=1; else OTHER_FAILED=1; fi
}

first_err() {	# LOG...: the first error line of those logs
	grep -h -m1 -E 'failed|error|timed out|mismatch|refused' "$@" 2> /dev/null | head -1 |
		cut -c1-160
}

# ---- part 1: incast ----
# incast_run SIZE N PI ROUND: one run, recorded in RESULTS as
#   incast SIZE N PI ROUND ok goodput% mean min max jain retx% lost% drops p50 p99 pingloss%
incast_run() {
	local size=$1 n=$2 pi=$3 round=$4 prov=${PROV_LIST[$3]} log i bytes msgs t
	local -a spids=() cpids=() cmds=() ports=()
	local q0 q1 s0 s1 ns0 ns1 ppid st=ok start=$SECONDS senders=()

	log=$LOG_DIR/incast.s$size.n$n.r$round.$(prov_tag "$prov")
	bytes=$(size_bytes "$size")
	if [ -n "$MSGS" ]; then
		msgs=$MSGS
	else
		msgs=$(awk -v r="$LINE_BPS" -v d="$SECS" -v n="$n" -v b="$bytes" \
			'BEGIN { m = r * d / (n * b); m = m == int(m) ? m : int(m) + 1;
				 print m < 1 ? 1 : m }')
	fi
	t=$((RUN_TIMEOUT > 10 ? RUN_TIMEOUT - 5 : RUN_TIMEOUT))
	for i in $(seq 1 "$n"); do senders+=("tx$i"); done
	settle
	use_prov "$prov" || { note_fail "$prov" "incast $size N=$n $prov: congestion control"; return 1; }
	local -a opts=(-p "$(prov_name "$prov")" -T "$t" -t -S "$size" -n "$msgs" -w 0)

	q0=$(bridge_qdisc); s0=$(bridge_sent); ns0=$(nstat_out "${senders[@]}")
	for i in $(seq 1 "$n"); do
		next_port
		ports+=("$PORT")
		set_env "$prov" rx
		addcmd "server $i" ip netns exec "$NS_RX" "${ENV[@]}" timeout -k 2 "$RUN_TIMEOUT" \
			"$BIN_DIR/cour_bw" "${opts[@]}" -P "$PORT" -B "$RX_ADDR"
		ip netns exec "$NS_RX" "${ENV[@]}" timeout -k 2 "$RUN_TIMEOUT" "$BIN_DIR/cour_bw" \
			"${opts[@]}" -P "$PORT" -B "$RX_ADDR" > "$log.$i.server" 2>&1 &
		spids+=($!)
		set_env "$prov" "tx$i"
		addcmd "client $i" ip netns exec "$(bridge_ns "tx$i")" "${ENV[@]}" timeout -k 2 \
			"$RUN_TIMEOUT" "$BIN_DIR/cour_bw" "${opts[@]}" -P "$PORT" "$RX_ADDR"
	done
	ip netns exec "$NS_PING" timeout -k 1 -s INT "$RUN_TIMEOUT" ping -n -i 0.005 "$RX_ADDR" \
		> "$log.ping" 2>&1 &
	ppid=$!
	addcmd probe ip netns exec "$NS_PING" ping -n -i 0.005 "$RX_ADDR"
	printf '%s\n' "${cmds[@]}" > "$log.cmds"
	for i in $(seq 1 "$n"); do
		set_env "$prov" "tx$i"
		{ ip netns exec "$(bridge_ns "tx$i")" "${ENV[@]}" timeout -k 2 "$RUN_TIMEOUT" \
			"$BIN_DIR/cour_bw" "${opts[@]}" -P "${ports[$((i - 1))]}" \
			"$RX_ADDR" 2>&1
		  echo "EXIT $?"; } | stamp > "$log.$i.client" &
		cpids+=($!)
	done
	for i in "${cpids[@]}"; do wait "$i"; done
	local src
	for i in $(seq 1 "$n"); do
		wait "${spids[$((i - 1))]}"
		src=$?
		echo "$(awk '$2 == "EXIT" { print $3 }' "$log.$i.client") $src" > "$log.$i.status"
	done
	kill -INT "$ppid" 2> /dev/null
	wait "$ppid" 2> /dev/null
	sleep 0.1	# the port's queue drains in LIMIT / RATE (2 ms at 256kb, 1gbit)
	q1=$(bridge_qdisc); s1=$(bridge_sent); ns1=$(nstat_out "${senders[@]}")
	{ echo "qdisc before: $q0"; echo "qdisc after:  $q1"; echo "sent before: $s0"
	  echo "sent after:  $s1"; echo "nstat before: $ns0"; echo "nstat after:  $ns1"
	  bridge_qdisc_text; } > "$log.counters"

	if grep -q -v '^0 0$' "$log".*.status; then
		st="FAILED (client/server exit: $(cat "$log".*.status | tr '\n' ',' | sed 's/,$//'))"
	fi
	local retx
	if is_courier "$prov"; then
		retx=$(courier_retx "$log".*.client)
	else
		retx=$(awk -v a="$ns0" -v b="$ns1" 'BEGIN { split(a, x, " "); split(b, y, " ");
			printf "%.0f %.0f\n", y[1] - x[1], y[2] - x[2] }')
	fi
	local line
	line=$(cat "$log".*.client | awk -v n="$n" -v bytes="$bytes" -v line="$LINE_BPS" \
		-v q0="$q0" -v q1="$q1" -v s0="$s0" -v s1="$s1" -v retx="$retx" \
		-v ping="$(ping_stats "$log.ping")" '
		$2 == "RESULT" && $3 == "bw" {
			k++; mb[k] = $5; end = $1 + 0
			m = prev[3] + 0		# the table line before: size msgs window MB/s
			moved = m * bytes; tot += moved
			st = end - (mb[k] > 0 ? moved / (mb[k] * 1e6) : 0)
			if (k == 1 || st < t0) t0 = st
			if (k == 1 || end > t1) t1 = end
		}
		{ split($0, prev, " ") }
		END {
			if (k != n || t1 <= t0) { print "FAIL"; exit }
			s = 0; s2 = 0; mn = mb[1]; mx = mb[1]
			for (i = 1; i <= k; i++) {
				s += mb[i]; s2 += mb[i] * mb[i]
				if (mb[i] < mn) mn = mb[i]
				if (mb[i] > mx) mx = mb[i]
			}
			split(q0, qa, " "); split(q1, qb, " "); split(s0, sa, " "); split(s1, sb, " ")
			split(retx, r, " ")
			sent = sb[2] - sa[2]; passed = qb[2] - qa[2]
			printf "%.1f %.1f %.1f %.1f %.3f %s %s %.0f %s\n",
				100 * tot / (t1 - t0) / line, s / k, mn, mx, s * s / (k * s2),
				(r[1] > 0 ? sprintf("%.2f", 100 * r[2] / r[1]) : "-"),
				(sent > 0 ? sprintf("%.2f", 100 * (sent - passed) / sent) : "-"),
				qb[3] - qa[3], ping
		}')
	if [ "$st" = ok ] && [ "$line" = FAIL ]; then
		st="FAILED (not every client printed a RESULT)"
	fi
	if [ "$st" = ok ]; then
		echo "incast $size $n $pi $round ok $line" >> "$RESULTS"
	else
		echo "incast $size $n $pi $round FAIL" >> "$RESULTS"
		note_fail "$prov" "incast $size N=$n round $round $prov: $st: $(first_err \
			"$log".*.client "$log".*.server)"
	fi
	local extra=""
	if is_courier "$prov"; then
		# tx_pkts against the wire packets the senders' counting qdiscs saw (N clients)
		extra="; tx_pkts $(awk '{ print $1 }' <<< "$retx"), sender wire pkts $(awk \
			-v a="$s0" -v b="$s1" 'BEGIN { split(a, x, " "); split(b, y, " ");
			print y[2] - x[2] }')"
	fi
	printf '# %s %-4s N=%-2s r%d %-18s %s%s (%d msgs/sender, %ds, load %s)\n' "$(date +%T)" \
		"$size" "$n" "$round" "$prov" \
		"$([ "$st" = ok ] && awk '{ printf "goodput %s%% MB/s %s jain %s retx %s%% lost %s%%" \
			" drops %s ping %s/%s ms", $1, $2, $5, $6, $7, $8, $9, $10 }' <<< "$line" ||
			echo "$st")" "$extra" "$msgs" \
		$((SECONDS - start)) "$(cut -d' ' -f1 /proc/loadavg)"
}

# ---- part 2: share beside TCP ----
# share_run PI K: one iperf3 cubic flow from host tcp beside K streams of the provider
share_run() {
	local pi=$1 k=$2 prov=${PROV_LIST[$1]} log i size bytes msgs t0 t1 b0 b1 ipid isp
	local -a pids=() opts=() hosts=(tcp) cmds=()
	local st=ok start=$SECONDS tries=0

	size=${SIZE_LIST[0]}
	bytes=$(size_bytes "$size")
	log=$LOG_DIR/share.k$k.$(prov_tag "$prov")
	# never ending before they are stopped: the whole line for longer than they run
	msgs=$(awk -v r="$LINE_BPS" -v d="$((SETTLE + SECS + 10))" -v b="$bytes" \
		'BEGIN { m = int(r * d / b) + 1; print m }')
	settle
	use_prov "$prov" || { note_fail "$prov" "share K=$k $prov: congestion control"; return 1; }
	opts=(-p "$(prov_name "$prov")" -T "$((RUN_TIMEOUT - 5))" -t -S "$size" -n "$msgs" -w 0)
	ip netns exec "$NS_RX" timeout -k 2 "$RUN_TIMEOUT" iperf3 -s -1 -p "$IPERF_PORT" \
		-B "$RX_ADDR" > "$log.iperf3.server" 2>&1 &
	isp=$!
	addcmd "iperf3 server" ip netns exec "$NS_RX" iperf3 -s -1 -p "$IPERF_PORT" -B "$RX_ADDR"
	while ! ip netns exec "$NS_RX" ss -ltn "sport = :$IPERF_PORT" | grep -q LISTEN; do
		tries=$((tries + 1))
		[ $tries -gt 50 ] && break
		sleep 0.1
	done
	for i in $(seq 1 "$k"); do
		next_port
		set_env "$prov" rx
		ip netns exec "$NS_RX" "${ENV[@]}" timeout -k 2 "$RUN_TIMEOUT" "$BIN_DIR/cour_bw" \
			"${opts[@]}" -P "$PORT" -B "$RX_ADDR" > "$log.$i.server" 2>&1 &
		pids+=($!)
		addcmd "server $i" ip netns exec "$NS_RX" "${ENV[@]}" "$BIN_DIR/cour_bw" "${opts[@]}" \
			-P "$PORT" -B "$RX_ADDR"
		set_env "$prov" "tx$i"
		ip netns exec "$(bridge_ns "tx$i")" "${ENV[@]}" timeout -k 2 "$RUN_TIMEOUT" \
			"$BIN_DIR/cour_bw" "${opts[@]}" -P "$PORT" "$RX_ADDR" > "$log.$i.client" 2>&1 &
		pids+=($!)
		addcmd "client $i" ip netns exec "$(bridge_ns "tx$i")" "${ENV[@]}" "$BIN_DIR/cour_bw" \
			"${opts[@]}" -P "$PORT" "$RX_ADDR"
		hosts+=("tx$i")
	done
	ip netns exec "$NS_TCP" timeout -k 2 "$RUN_TIMEOUT" iperf3 -c "$RX_ADDR" -p "$IPERF_PORT" \
		-C cubic -t "$((SETTLE + SECS + 10))" > "$log.iperf3.client" 2>&1 &
	ipid=$!
	addcmd "iperf3 client" ip netns exec "$NS_TCP" iperf3 -c "$RX_ADDR" -p "$IPERF_PORT" \
		-C cubic -t "$((SETTLE + SECS + 10))"
	printf '%s\n' "${cmds[@]}" > "$log.cmds"
	sleep "$SETTLE"
	t0=$EPOCHREALTIME; b0=$(bridge_rx_bytes "${hosts[@]}")
	sleep "$SECS"
	t1=$EPOCHREALTIME; b1=$(bridge_rx_bytes "${hosts[@]}")
	# every party must still have been running: one that failed early shares nothing
	for i in "${pids[@]}" "$ipid"; do
		kill -0 "$i" 2> /dev/null || st="FAILED (a party ended before the window closed)"
	done
	kill -INT "$ipid" 2> /dev/null
	kill_wait "${pids[@]}"
	wait "$ipid" 2> /dev/null
	kill_wait "$isp"
	echo "window $t0 .. $t1; rx bytes from ${hosts[*]}: $b0 -> $b1" > "$log.counters"
	local line
	line=$(awk -v a="$b0" -v b="$b1" -v t0="$t0" -v t1="$t1" -v line="$LINE_BPS" 'BEGIN {
		n = split(a, x, " "); split(b, y, " "); cap = line * (t1 - t0)
		tcp = 100 * (y[1] - x[1]) / cap; tot = tcp; each = ""
		for (i = 2; i <= n; i++) {
			s = 100 * (y[i] - x[i]) / cap; sum += s; tot += s
			each = each (i > 2 ? "," : "") sprintf("%.1f", s)
		}
		printf "%.1f %.1f %s %.1f\n", tcp, sum, each, tot
	}')
	if [ "$st" = ok ]; then
		echo "share $pi $k ok $line" >> "$RESULTS"
	else
		echo "share $pi $k FAIL" >> "$RESULTS"
		note_fail "$prov" "share K=$k $prov: $st: $(first_err "$log".*)"
	fi
	printf '# %s share K=%d %-18s %s (%ds, load %s)\n' "$(date +%T)" "$k" "$prov" \
		"$([ "$st" = ok ] && awk '{ printf "iperf3 %s%% streams %s%% (%s) total %s%%", $1, $2, $3, $4 }' \
		<<< "$line" || echo "$st")" $((SECONDS - start)) "$(cut -d' ' -f1 /proc/loadavg)"
}

# ---- part 3: latency across the port ----
# lat_run MODE: MODE idle or loaded (2 courier 1m streams)
lat_run() {
	local mode=$1 log spid cpid rc src v st=ok start=$SECONDS i t t0 t1 b0 b1 load=""
	local -a pids=() opts=() cmds=()

	log=$LOG_DIR/lat.$mode
	t=$((RUN_TIMEOUT - 5))
	settle
	if [ "$mode" = loaded ]; then
		opts=(-p courier -T "$t" -t -S 1m -n "$(awk -v r="$LINE_BPS" \
			-v d="$((RUN_TIMEOUT + 10))" 'BEGIN { print int(r * d / 1048576) + 1 }')" -w 0)
		for i in 1 2; do
			next_port
			set_env courier rx
			ip netns exec "$NS_RX" "${ENV[@]}" timeout -k 2 "$RUN_TIMEOUT" \
				"$BIN_DIR/cour_bw" "${opts[@]}" -P "$PORT" -B "$RX_ADDR" \
				> "$log.$i.server" 2>&1 &
			pids+=($!)
			set_env courier "tx$i"
			ip netns exec "$(bridge_ns "tx$i")" "${ENV[@]}" timeout -k 2 "$RUN_TIMEOUT" \
				"$BIN_DIR/cour_bw" "${opts[@]}" -P "$PORT" "$RX_ADDR" \
				> "$log.$i.client" 2>&1 &
			pids+=($!)
			addcmd "stream $i (tx$i)" "$BIN_DIR/cour_bw" "${opts[@]}" -P "$PORT" "$RX_ADDR"
		done
		sleep "$SETTLE"
	fi
	next_port
	opts=(-p courier -T "$t" -S 8 -n "$LAT_ITERS" -w 50)
	addcmd "ping-pong (ping; server in rx: -B $RX_ADDR)" "$BIN_DIR/cour_pingpong" "${opts[@]}" \
		-P "$PORT" "$RX_ADDR"
	printf '%s\n' "${cmds[@]}" > "$log.cmds"
	set_env courier rx
	ip netns exec "$NS_RX" "${ENV[@]}" timeout -k 2 "$RUN_TIMEOUT" "$BIN_DIR/cour_pingpong" \
		"${opts[@]}" -P "$PORT" -B "$RX_ADDR" > "$log.server" 2>&1 &
	spid=$!
	set_env courier ping
	ip netns exec "$NS_PING" "${ENV[@]}" timeout -k 2 "$RUN_TIMEOUT" "$BIN_DIR/cour_pingpong" \
		"${opts[@]}" -P "$PORT" "$RX_ADDR" > "$log.client" 2>&1 &
	cpid=$!
	t0=$EPOCHREALTIME; b0=$(bridge_rx_bytes tx1 tx2)
	wait "$cpid"; rc=$?
	t1=$EPOCHREALTIME; b1=$(bridge_rx_bytes tx1 tx2)
	wait "$spid"; src=$?
	# what the streams moved meanwhile (setup of the ping-pong included): a stream in an
	# RTO stall leaves the port idle, and the latency looks idle too
	[ "$mode" = loaded ] && load=$(awk -v a="$b0" -v b="$b1" -v t0="$t0" -v t1="$t1" \
		-v line="$LINE_BPS" 'BEGIN { split(a, x, " "); split(b, y, " ");
		printf "%.1f\n", 100 * (y[1] + y[2] - x[1] - x[2]) / (line * (t1 - t0)) }')
	for i in "${pids[@]}"; do
		kill -0 "$i" 2> /dev/null ||
			st="FAILED (a stream ended before the ping-pong did)"
	done
	kill_wait "${pids[@]}"
	v=$(awk '$1 == "RESULT" && $2 == "pingpong" { print $4 }' "$log.client")
	{ [ "$rc" = 0 ] && [ "$src" = 0 ] && [ -n "$v" ]; } ||
		st="FAILED (client/server exit: $rc,$src)"
	if [ "$st" = ok ]; then
		echo "lat $mode ok $v $load" >> "$RESULTS"
	else
		echo "lat $mode FAIL" >> "$RESULTS"
		note_fail courier "latency $mode: $st: $(first_err "$log".*)"
	fi
	printf '# %s latency %-7s %s (%ds, load %s)\n' "$(date +%T)" "$mode" \
		"$([ "$st" = ok ] && echo "$v us${load:+, streams $load% of the line}" || echo "$st")" \
		$((SECONDS - start)) \
		"$(cut -d' ' -f1 /proc/loadavg)"
}

# ---- tables ----
print_tables() {
	# shellcheck disable=SC2034 # read by BRIDGE_ON_EXIT
	TABLES_DONE=1
	local size
	if has_part incast; then
		for size in "${SIZE_LIST[@]}"; do
			echo
			echo "== incast, $size messages: N senders -> 1 receiver through tbf $RATE" \
				"burst $BURST limit $LIMIT, MTU $MTU; medians of $ROUNDS rounds" \
				"(* some rounds failed, n/a none succeeded)"
			awk -v size="$size" -v provs="${PROV_LIST[*]}" -v ns="${N_LIST[*]}" '
			function median(list,    n, a, i, j, t) {
				n = split(list, a, " ")
				for (i = 1; i <= n; i++)
					for (j = i + 1; j <= n; j++)
						if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
				if (n == 0) return ""
				return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
			}
			function col(k, c, fmt,    v) {
				v = median(vals[k, c])
				return v == "" ? "n/a" : sprintf(fmt, v)
			}
			BEGIN { np = split(provs, prov, " "); nn = split(ns, nl, " ") }
			$1 == "incast" && $2 == size {
				k = $3 SUBSEP $4
				if ($6 != "ok") { nfail[k]++; next }
				for (c = 7; c <= NF; c++)
					if ($c != "-") vals[k, c] = vals[k, c] " " $c
				nok[k]++
			}
			END {
				printf "%-20s %3s %8s %22s %6s %7s %7s %7s %17s %6s\n", "provider", "N",
					"goodput%", "MB/s/sender mean(min-max)", "Jain", "retx%", "lost%",
					"drops", "ping p50/p99 ms", "ping%"
				for (j = 1; j <= nn; j++)
					for (i = 1; i <= np; i++) {
						k = nl[j] SUBSEP (i - 1)
						if (!nok[k] && !nfail[k]) continue
						mark = nfail[k] && nok[k] ? "*" : ""
						printf "%-20s %3s %8s %22s %6s %7s %7s %7s %17s %6s\n",
							prov[i] mark, nl[j], col(k, 7, "%.1f"),
							nok[k] ? sprintf("%.1f (%.1f-%.1f)", median(vals[k, 8]),
							median(vals[k, 9]), median(vals[k, 10])) : "n/a",
							col(k, 11, "%.3f"), col(k, 12, "%.2f"),
							col(k, 13, "%.2f"), col(k, 14, "%.0f"),
							nok[k] ? col(k, 15, "%.2f") "/" col(k, 16, "%.2f") : "n/a",
							col(k, 17, "%.1f")
					}
			}' "$RESULTS"
		done
	fi
	if has_part share; then
		echo
		echo "== share beside TCP: one iperf3 cubic flow + K streams of the provider" \
			"(cour_bw -t -S ${SIZE_LIST[0]}), % of $RATE over $SECS s after $SETTLE s;" \
			"receiver's IP bytes per source (headers after GRO included)"
		awk -v provs="${PROV_LIST[*]}" '
			BEGIN {
				np = split(provs, prov, " ")
				printf "%-20s %2s %8s %9s %14s %7s\n", "provider", "K", "iperf3%",
					"streams%", "(each)", "total%"
			}
			$1 == "share" { r[$2, $3] = $0 }
			END {
				for (i = 1; i <= np; i++)
					for (k = 1; k <= 2; k++) {
						if (!((i - 1, k) in r)) continue
						split(r[i - 1, k], f, " ")
						if (f[4] != "ok")
							printf "%-20s %2d %8s\n", prov[i], k, "FAILED"
						else
							printf "%-20s %2d %8s %9s %14s %7s\n", prov[i], k,
								f[5], f[6], f[7], f[8]
					}
			}' "$RESULTS"
	fi
	if has_part lat; then
		echo
		echo "== courier 8-byte ping-pong across the port (cour_pingpong -S 8 -n $LAT_ITERS," \
			"one way = half the mean round trip, us)"
		awk '$1 == "lat" {
			what = $2 == "idle" ? "idle" : "beside 2 courier 1m streams"
			printf "%-30s %10s %s\n", what, ($3 == "ok" ? $4 : "FAILED"), \
				($3 == "ok" && NF > 4 ? "(streams: " $5 "% of the line meanwhile)" : "")
		}' "$RESULTS"
	fi
}

# interrupted (INT, TERM, HUP, or a failed setup step): still show what was measured
# shellcheck disable=SC2034 # bridge.sh evaluates BRIDGE_ON_EXIT at exit
TABLES_DONE=0 BRIDGE_ON_EXIT='[ "$TABLES_DONE" = 1 ] || { echo;
	echo "# interrupted: partial results, logs in $LOG_DIR"; print_tables; }'

# ---- header ----
rerun="$(printf '%q ' "$0" "${ARGS[@]}")"
echo "# incast-bench: $rerun"
echo "# resolved: -n \"${N_LIST[*]}\" -S \"${SIZE_LIST[*]}\" -r $ROUNDS -R $RATE -L $LIMIT" \
	"-m $MTU $([ -n "$MSGS" ] && echo "-c $MSGS" || echo "-d $SECS") -P \"${PROV_LIST[*]}\"" \
	"-x \"${PART_LIST[*]}\" -b $BIN_DIR; BURST=$BURST RUN_TIMEOUT=$RUN_TIMEOUT" \
	"${COURIER_ENV:+COURIER_ENV=\"$COURIER_ENV\"}"
echo "# switch $BRIDGE_SW: bridge br0; receiver port p-rx: tc qdisc add dev p-rx root tbf" \
	"rate $RATE burst $BURST limit $LIMIT ($LINE_BPS B/s)"
echo "# hosts (namespace $BRIDGE_PFX-<host>, veth0, MTU $MTU): $(for h in $BRIDGE_HOSTS; do
	printf '%s=%s ' "$h" "$(bridge_addr "$h")"; done)"
echo "# incast run: in rx, per sender i: [env] cour_bw -p PROV -T T -t -S SIZE -n MSGS -w 0" \
	"-P PORT_i -B $RX_ADDR; in tx<i>: the same with $RX_ADDR for -B; in ping: ping -n -i" \
	"0.005 $RX_ADDR; every command of a run is in its .cmds log"
echo "# courier env: FI_PROVIDER_PATH=<copy> FI_PROVIDER=courier FI_COURIER_SHM=0" \
	"FI_COURIER_IFACE_ADDR=<own address> FI_COURIER_STATS=1 ${COURIER_ENV:-}"
echo "# courier: $COURIER_FROM"
echo "# programs: $BIN_DIR; host TCP congestion control: $(sysctl -n \
	net.ipv4.tcp_congestion_control) (allowed: $(sysctl -n \
	net.ipv4.tcp_allowed_congestion_control))"
echo "# host: $(uname -n), $(nproc) cpus, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# logs: $LOG_DIR"

# A provider libfabric does not load would fail every run: say so at once
if command -v fi_info > /dev/null; then
	for prov in "${PROV_LIST[@]}"; do
		set_env "$prov" rx
		listed=$("${ENV[@]}" fi_info -l 2> /dev/null | sed -n 's/^\([^ ]*\):$/\1/p')
		base=$(prov_name "$prov")
		for part in ${base//;/ }; do
			grep -q -x -F "$part" <<< "$listed" ||
				echo "# warning: libfabric has no provider $part: $prov will fail"
		done
	done
fi

T0=$SECONDS
if has_part incast; then
	for size in "${SIZE_LIST[@]}"; do
		for n in "${N_LIST[@]}"; do
			for round in $(seq 1 "$ROUNDS"); do
				for pi in "${!PROV_LIST[@]}"; do
					incast_run "$size" "$n" "$pi" "$round"
				done
			done
		done
	done
fi
if has_part share; then
	for k in 1 2; do
		for pi in "${!PROV_LIST[@]}"; do
			share_run "$pi" "$k"
		done
	done
fi
if has_part lat; then
	lat_run idle
	lat_run loaded
fi

print_tables
echo
echo "# wall time $((SECONDS - T0)) s; load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"

cour_bench_failed_or_clean

[ "$COURIER_FAILED" = 1 ] && exit 1
[ "$OTHER_FAILED" = 1 ] && exit 2
exit 0
