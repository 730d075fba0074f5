#!/bin/sh
# incast: four courier senders into one receiver through a shared port shaped to 1 Gbit/s with
# a 256 KB queue (bridge.sh: a bridge in a "switch" namespace, one namespace per host, tbf on
# the receiver's switch port). Each sender streams cour_bw -t -v (every byte verified) to its
# own server in the receiver's namespace, all at once, for a few seconds.
# Fails if any client or server fails, if the traffic did not cross the shaped port, or if
# courier's retransmitted / sent packets, summed over the four senders, exceed
# COUR_INCAST_MAX_RETX percent: a sender that keeps the port's queue from overflowing
# resends little; one that does not resends what the port dropped.
# Retransmitted = retrans_timeout + retrans_fast + retrans_probe of the senders' `courier
# stats` lines (FI_COURIER_STATS=1), sent = their tx_pkts, which counts every packet handed to
# the wire, retransmissions (and the few acknowledgements a sender sends) included.
# Skips (77) unless root with ip (iproute2), tc (with tbf) and nft, namespaces allowed, or when
# COUR_FT_PROVIDER names another provider (the figures are courier's counters).
# Environment as run_pair.sh (COUR_BUILD, COUR_FT_TIMEOUT: default 90 s) and:
#   COUR_INCAST_MAX_RETX  bound in percent (default 5)
#   COUR_INCAST_SENDERS   senders (default 4)
#   COUR_INCAST_ARGS      cour_bw options of every pair (default "-S 1m -n 96 -W 16": 100 MiB
#                         per sender, 3.4 s for the four at line rate)
#   COUR_INCAST_RATE, COUR_INCAST_LIMIT  the port (default 1gbit, 256kb; burst 64kb)
set -u

here=$(cd "$(dirname "$0")" && pwd)
build=${COUR_BUILD:-$PWD}
prov=${COUR_FT_PROVIDER:-courier}
tmo=${COUR_FT_TIMEOUT:-90}
max_retx=${COUR_INCAST_MAX_RETX:-5}
n=${COUR_INCAST_SENDERS:-4}
args=${COUR_INCAST_ARGS:--S 1m -n 96 -W 16}
port0=47700	# the namespaces are ours alone: no other run can hold these ports

if [ "$prov" != courier ]; then
	echo "test_incast.sh: skipped: measures courier's own counters, not $prov"
	exit 77
fi
prog=$build/fabtests/bench/cour_bw
[ -x "$prog" ] || prog=$build/cour_bw
[ -x "$prog" ] || { echo "test_incast.sh: no cour_bw program in $build" >&2; exit 99; }
case $max_retx in
''|*[!0-9.]*) echo "test_incast.sh: COUR_INCAST_MAX_RETX=$max_retx" >&2; exit 99 ;;
esac
case $n in ''|*[!0-9]*|0) echo "test_incast.sh: COUR_INCAST_SENDERS=$n" >&2; exit 99 ;; esac

BRIDGE_RATE=${COUR_INCAST_RATE:-1gbit}
BRIDGE_LIMIT=${COUR_INCAST_LIMIT:-256kb}
BRIDGE_BURST=64kb
. "$here/../scripts/bridge.sh"
if ! bridge_available; then
	echo "test_incast.sh: skipped: $BRIDGE_WHY"
	exit 77
fi

if [ -d "$build/.libs" ] && [ -z "${FI_PROVIDER_PATH:-}" ]; then
	FI_PROVIDER_PATH=$build/.libs
	export FI_PROVIDER_PATH
fi
# courier itself (not courier;ofi_rxm), over UDP (the namespaces share a host, so it would
# take shared memory), statistics at close
FI_PROVIDER=courier
FI_COURIER_SHM=0
FI_COURIER_STATS=1
export FI_PROVIDER FI_COURIER_SHM FI_COURIER_STATS

out=$(mktemp -d "${TMPDIR:-/tmp}/incast.XXXXXX") || exit 99
# shellcheck disable=SC2034 # bridge.sh evaluates it at exit
BRIDGE_ON_EXIT='rm -rf "$out"'
bridge_setup "$n" || { echo "test_incast.sh: cannot set up the namespaces"; exit 99; }
rx=$(bridge_addr rx)
echo "test_incast.sh: $n senders (tx1..tx$n) -> receiver $rx through tbf rate $BRIDGE_RATE" \
	"burst $BRIDGE_BURST limit $BRIDGE_LIMIT, MTU $BRIDGE_MTU; cour_bw -t -v $args;" \
	"bound: retransmitted <= $max_retx% of sent"

q0=$(bridge_qdisc)
s0=$(bridge_sent)
start=$(date +%s.%N)
# the programs give up by themselves 10 s before timeout(1) kills them; both bound every wait
i=1
spids=
while [ $i -le "$n" ]; do
	# shellcheck disable=SC2086
	bridge_exec rx env FI_COURIER_IFACE_ADDR="$rx" timeout -k 5 "$tmo" "$prog" -p courier \
		-B "$rx" -P $((port0 + i)) -T $((tmo - 10)) -t -v $args > "$out/server.$i" 2>&1 &
	spids="$spids $!"
	i=$((i + 1))
done
i=1
cpids=
while [ $i -le "$n" ]; do
	# shellcheck disable=SC2086
	bridge_exec "tx$i" env FI_COURIER_IFACE_ADDR="$(bridge_addr "tx$i")" \
		timeout -k 5 "$tmo" "$prog" -p courier -P $((port0 + i)) -T $((tmo - 10)) -t -v \
		$args "$rx" > "$out/client.$i" 2>&1 &
	cpids="$cpids $!"
	i=$((i + 1))
done
fail=0
i=1
for p in $cpids; do
	wait "$p"
	echo $? > "$out/client.$i.rc"
	i=$((i + 1))
done
i=1
for p in $spids; do
	wait "$p"
	echo $? > "$out/server.$i.rc"
	i=$((i + 1))
done
end=$(date +%s.%N)
sleep 0.1	# the port's queue drains (2 ms at 1gbit, 256kb)
q1=$(bridge_qdisc)
s1=$(bridge_sent)

i=1
while [ $i -le "$n" ]; do
	crc=$(cat "$out/client.$i.rc")
	src=$(cat "$out/server.$i.rc")
	if [ "$crc" != 0 ] || [ "$src" != 0 ]; then
		echo "---- server $i (rx) ----"; cat "$out/server.$i"
		echo "---- client $i (tx$i) ----"; cat "$out/client.$i"
		echo "test_incast.sh: FAIL: pair $i: server exit $src, client exit $crc" \
			"$( { [ "$src" = 124 ] || [ "$crc" = 124 ]; } &&
			echo "(killed by timeout after $tmo s)")"
		fail=1
	fi
	i=$((i + 1))
done
if [ $fail = 1 ] && grep -q "fi_getinfo.*failed: -61" "$out"/server.* "$out"/client.*; then
	echo "test_incast.sh: courier is not available: skipped"
	exit 77
fi

# per sender: MB/s, application bytes, tx_pkts, retransmissions (timeout + fast + probe)
i=1
while [ $i -le "$n" ]; do
	awk -v i="$i" '
		$1 == "RESULT" && $2 == "bw" { mb = $4; bytes = $3 * prev[2] }
		$1 == "courier" && $2 == "stats" {
			for (j = 4; j < NF; j++) v[$j] = $(j + 1)
		}
		{ split($0, prev, " ") }	# the table line before RESULT: size msgs window MB/s
		END {
			re = v["retrans_timeout"] + v["retrans_fast"] + v["retrans_probe"]
			printf "%d %.0f %.0f %s %.0f %.0f %.0f %.0f %.0f\n", i, v["tx_pkts"], re,
				(mb == "" ? "-" : mb), bytes, v["retrans_timeout"], v["retrans_fast"],
				v["retrans_probe"], v["srtt_us"]
		}' "$out/client.$i"
	i=$((i + 1))
done > "$out/senders"
awk '{ printf "sender tx%d: %s MB/s, %.0f bytes, tx_pkts %.0f, retransmitted %.0f" \
	" (timeout %.0f, fast %.0f, probe %.0f), srtt %.0f us\n", $1, $4, $5, $2, $3, $6, $7, $8,
	$9 }' "$out/senders"

elapsed=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
awk -v q0="$q0" -v q1="$q1" -v s0="$s0" -v s1="$s1" 'BEGIN {
	split(q0, a, " "); split(q1, b, " "); split(s0, c, " "); split(s1, d, " ")
	sent = d[2] - c[2]; passed = b[2] - a[2]
	printf "port: the senders put %.0f wire packets out, the port sent %.0f (%.1f MB)," \
		" lost %.0f (%.2f%%); tbf dropped %.0f skbs (a GSO run counts once)\n", sent, passed,
		(b[1] - a[1]) / 1e6, sent - passed, (sent > 0 ? 100 * (sent - passed) / sent : 0),
		b[3] - a[3]
}'

# retransmitted / sent, summed over the senders; and the bytes that had to cross the port
# shellcheck disable=SC2046 # four numbers
set -- $(awk '{ tx += $2; re += $3; moved += $5 }
	END { printf "%s %.0f %.0f %.0f\n", (tx > 0 ? sprintf("%.2f", 100 * re / tx) : "-"),
	      re, tx, moved }' "$out/senders")
pct=${1:--} re=${2:-0} tx=${3:-0} moved=${4:-0}
crossed=$(awk -v a="$q0" -v b="$q1" 'BEGIN { split(a, x, " "); split(b, y, " ");
	printf "%.0f\n", y[1] - x[1] }')
if [ $fail = 0 ] && [ "$crossed" -lt "$moved" ]; then
	echo "test_incast.sh: FAIL: only $crossed bytes crossed the shaped port, the clients" \
		"sent $moved (shared memory? FI_COURIER_SHM=0 keeps courier on UDP)"
	fail=1
fi
if [ "$pct" = - ]; then
	echo "test_incast.sh: FAIL: no courier stats from the senders (FI_COURIER_STATS=1)"
	fail=1
else
	echo "test_incast.sh: retransmitted/sent over the $n senders: $re / $tx = $pct%" \
		"(bound: COUR_INCAST_MAX_RETX=$max_retx%)"
	if awk -v p="$pct" -v m="$max_retx" 'BEGIN { exit !(p > m) }'; then
		echo "test_incast.sh: FAIL: courier resent $pct% of its packets, more than" \
			"$max_retx%: it overflows the shared port's queue"
		fail=1
	fi
fi
echo "test_incast.sh: $([ $fail = 0 ] && echo PASS || echo FAIL) in ${elapsed} s" \
	"(from the launch to the last exit)"
exit $fail
