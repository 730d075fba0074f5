#!/usr/bin/env bash
# run-mpi-bridge.sh [-b] [options] BUILDDIR: Debian's Open MPI all-to-all across four emulated
# hosts on one switch whose every port is a shaped, shallow-buffered 1 GbE link, so each host's
# receive link is shared by three senders at once (3:1 incast at every port).
#
# The hosts are four network namespaces on a Linux bridge in a fifth, the switch
# (fabtests/scripts/bridge.sh: hosts rx, tx1, tx2, tx3 at 198.18.1.1 .. .4). bridge.sh shapes
# the switch's port towards rx; this script shapes the other three ports the same way, with tc
# in the switch namespace:
#   tc qdisc add dev p-<host> root tbf rate 1gbit burst 64kb limit 256kb
# (BRIDGE_RATE, BRIDGE_BURST, BRIDGE_LIMIT change all four), and gives rx a counting pfifo on
# its veth0 as bridge.sh gives the others, so wire packets lost at the ports can be counted for
# all four hosts (bridge.sh's header explains the counting).
#
# mpirun runs in rx's namespace and starts one orted per emulated node n0..n3 through a "remote
# shell" (--mca plm_rsh_agent, as run-mpi-netns.sh does; here a script of our own, since the
# nodes are four namespaces, not two) that runs it in that node's namespace (n0: rx, n1: tx1,
# n2: tx2, n3: tx3) with a host name of its own and a session directory of its own; --map-by
# node puts rank i on node ni. Open MPI's own TCP (launch, wire-up) crosses the shaped ports
# too and is in the counters.
#
# Test mode (default): courier over pml cm + mtl ofi, chosen with only the provider named
# (opal_common_ofi_provider_include courier, FI_PROVIDER, FI_PROVIDER_PATH to a private copy
# of the build's libcourier-fi.so, FI_COURIER_IFACE_ADDR=198.18.1.0/24), runs
# fabtests/mpi/mpi_alltoall.c at 4 KiB, 64 KiB, 256 KiB and 1 MiB per pair, 3 rounds each, every
# byte checked. Passes when the program says ok and every rank shows mtl:ofi selected courier,
# sent over UDP and moved nothing through shared memory (the hosts are distinct namespaces).
#
# Bench mode (-b, or BENCH=1): the same all-to-all timed (mpi_alltoall -t: mean microseconds
# per MPI_Alltoall, slowest rank's clock, about SECONDS per size after a warm-up, checked before
# and after), courier (pml cm + mtl ofi) against ob1+tcp (--mca pml ob1 --mca btl tcp,self,
# Open MPI's default across nodes), rounds interleaved (round 1 of each path, then round 2 ...).
# Printed: per size the median us of each path (min-max over rounds) and ob1/courier (>1:
# courier faster); then per path and per run (medians over rounds): the shaped ports' "Sent
# pkts" and "dropped" (tc -s qdisc, summed over the four ports; dropped counts skbs, a GSO run
# counts once), the wire packets lost (sent by the four hosts minus sent by the four ports,
# from the counting pfifos: the true loss, give or take flooded ARP), and what the senders
# resent: courier's (retrans_timeout + retrans_fast + retrans_probe) / tx_pkts from
# FI_COURIER_STATS (tx_pkts includes ACKs), TCP's TcpRetransSegs / TcpOutSegs (nstat in the
# four namespaces). Every path has the same mpirun options otherwise, including
# mpi_yield_when_idle 1: four ranks share this host's cpus, while each emulated node believes
# it has its own.
#
# usage: run-mpi-bridge.sh [-b] [-r ROUNDS] [-s SECONDS] [-B BASEDIR] [-o LOGDIR] BUILDDIR
#   -b         bench mode (also BENCH=1)
#   -r ROUNDS  bench rounds (default 3)
#   -s SECONDS timed seconds per size and run (default 2)
#   -B DIR     another courier build (e.g. before a change): a path "base" in the bench,
#              interleaved with the others, its ratio ob1/base beside ob1/courier
#   -p PATHS   bench paths (default "courier ob1tcp", plus base with -B)
#   -I IMB     bench mode with the Intel MPI Benchmarks' IMB-MPI1 at this path (built by you,
#              outside this repository) instead of mpi_alltoall: `IMB-MPI1 Alltoall -npmin 4
#              -msglen FILE -time 4*SECONDS` (FILE: the same four sizes), its t_max (the
#              slowest rank's mean) per size. IMB checks no data; the test mode's runs of
#              mpi_alltoall do
#   -o DIR     keep logs there (default: a temporary directory, kept only on failure)
# Environment: RUN_TIMEOUT (seconds per mpirun; default 90 in test mode, 150 in bench mode),
# BRIDGE_MTU (1500), BRIDGE_RATE, BRIDGE_BURST, BRIDGE_LIMIT (1gbit, 64kb, 256kb).
# Exit status: 0 success; 1 a run failed or counted a data error (in bench mode: a courier or
# base run; ob1's failures are reported, shown n/a); 2 usage; 77 not root, no network
# namespaces/bridge/tbf here, or no Open MPI (mpicc.openmpi, mpirun.openmpi).
set -uo pipefail
bench=${BENCH:-0} rounds=3 secs=2 base='' logdir='' paths='' imb=''
usage() { sed -n '/^# usage:/,/^set -uo/p' "$0" | grep '^#' >&2; exit 2; }
while getopts "br:s:B:p:o:I:h" o; do
	case $o in
	b) bench=1 ;; r) rounds=$OPTARG ;; s) secs=$OPTARG ;; p) paths=$OPTARG ;;
	B) base=$(cd "$OPTARG" && pwd) || exit 2 ;;
	o) logdir=$OPTARG ;;
	I) imb=$(realpath "$OPTARG" 2>/dev/null)
	   if [ ! -x "$imb" ]; then echo "run-mpi-bridge.sh: -I: no program $OPTARG" >&2; exit 2; fi
	   bench=1 ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
[ $# = 1 ] || usage
build=$(cd "$1" && pwd) || exit 2
src=$(cd "$(dirname "$0")" && pwd)
me=$(basename "$0")
case $rounds in ''|*[!0-9]*|0) usage ;; esac

if [ "$(id -u)" != 0 ]; then
	echo "$me: skipped: not root"
	exit 77
fi
if ! command -v mpicc.openmpi >/dev/null || ! command -v mpirun.openmpi >/dev/null; then
	echo "$me: skipped: no Open MPI (mpicc.openmpi, mpirun.openmpi: openmpi-bin," \
		"libopenmpi-dev)"
	exit 77
fi
. "$src/../scripts/bridge.sh"
if ! bridge_available; then
	echo "$me: skipped: $BRIDGE_WHY"
	exit 77
fi
. "$src/mpi-common.sh"
for b in "$build" ${base:+"$base"}; do
	if [ ! -f "$b/.libs/libcourier-fi.so" ]; then
		echo "$me: no $b/.libs/libcourier-fi.so (build courier first)" >&2
		exit 1
	fi
done
if [ "$bench" = 1 ]; then
	timeout_s=${RUN_TIMEOUT:-150}
	[ -n "$paths" ] || paths="courier ob1tcp${base:+ base}"
else
	timeout_s=${RUN_TIMEOUT:-90}
fi

if [ -n "$logdir" ]; then
	mkdir -p "$logdir" && out=$(cd "$logdir" && pwd) || exit 2
	keep=1
else
	out=$(mktemp -d) || exit 1
	keep=0
fi
cleanup() {
	if [ $keep = 0 ]; then rm -rf "$out"; else echo "$me: logs in $out"; fi
}
# shellcheck disable=SC2034 # run by bridge.sh's EXIT trap
BRIDGE_ON_EXIT=cleanup

# private copies of the provider libraries: a rebuild during the run cannot mix two builds
mkdir -p "$out/lib-courier"
cp "$build/.libs/libcourier-fi.so" "$out/lib-courier/" || exit 1
if [ -n "$base" ]; then
	mkdir -p "$out/lib-base"
	cp "$base/.libs/libcourier-fi.so" "$out/lib-base/" || exit 1
fi
"$MPICC" -O2 -o "$out/mpi_alltoall" "$src/mpi_alltoall.c" || exit 1
rank_wrapper "$out"

HOSTS="rx tx1 tx2 tx3"
NET=198.18.1.0/24
bridge_setup 3 || { echo "$me: bridge setup failed" >&2; exit 1; }
SW=$(bridge_ns sw)
# every other port shaped like p-rx; rx counts what it sends as the others do
for h in tx1 tx2 tx3; do
	ip netns exec "$SW" tc qdisc add dev "p-$h" root tbf rate "$BRIDGE_RATE" \
		burst "$BRIDGE_BURST" limit "$BRIDGE_LIMIT" || exit 1
done
bridge_exec rx tc qdisc add dev "$BRIDGE_IF" root pfifo limit 10000 || exit 1

# the remote shell: node ni runs in host i's namespace
{
	echo '#!/bin/sh'
	echo 'host=$1; shift'
	echo 'case $host in'
	i=0
	for h in $HOSTS; do
		echo "n$i) ns=$(bridge_ns "$h") ;;"
		i=$((i + 1))
	done
	echo '*) echo "rsh: no node $host" >&2; exit 1 ;;'
	echo 'esac'
	echo "export TMPDIR=\"$out/host-\$host\""
	echo 'mkdir -p "$TMPDIR"'
	echo 'cmd="$*"'
	echo 'exec ip netns exec "$ns" unshare -u sh -c "hostname $host; $cmd"'
} >"$out/rsh"
chmod +x "$out/rsh"

# ports: "sent_pkts dropped" summed over the four shaped ports (absolute)
ports() {
	local h
	for h in $HOSTS; do
		ip netns exec "$SW" tc -s -j qdisc show dev "p-$h" root
	done | grep -oE '"(packets|drops)":[0-9]+' |
		awk -F: '$1 ~ /packets/ { p += $2 } $1 ~ /drops/ { d += $2 }
			END { printf "%.0f %.0f\n", p, d }'
}

# tcp_segs: "out retrans" TCP segments summed over the four namespaces (absolute)
tcp_segs() {
	local h
	for h in $HOSTS; do
		bridge_exec "$h" nstat -asz TcpOutSegs TcpRetransSegs 2>/dev/null
	done | awk '$1 == "TcpOutSegs" { o += $2 } $1 == "TcpRetransSegs" { r += $2 }
		END { printf "%.0f %.0f\n", o, r }'
}

# cstat NAME FILES...: a courier statistic summed over the files' "courier stats" lines
cstat() {
	local k=$1; shift
	cat "$@" 2>/dev/null | awk -v k="$k" '/^courier stats / {
		for (i = 4; i < NF; i++) if ($i == k) s += $(i + 1) } END { printf "%.0f\n", s }'
}

# path_args PATH: mpirun arguments choosing PATH
path_args() {
	case $1 in
	courier|base)
		echo "--mca pml cm --mca mtl ofi --mca opal_common_ofi_provider_include courier" \
			"--mca mtl_ofi_verbose 1 -x FI_PROVIDER=courier" \
			"-x FI_PROVIDER_PATH=$out/lib-$1 -x FI_COURIER_IFACE_ADDR=$NET" \
			"-x FI_COURIER_STATS=1" ;;
	ob1tcp) echo "--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include $NET" ;;
	*) echo "$me: no path $1" >&2; return 1 ;;
	esac
}

# mpi NAME PATH ARGS...: mpirun of mpi_alltoall ARGS on n0..n3 over PATH; rank output in
# $out/NAME/rank.N, mpirun's in $out/NAME.log; the counters' deltas in $out/NAME.ctr as
# "port_pkts port_drops host_pkts tcp_out tcp_retrans"; returns mpirun's exit status, or 1
# if the program did not say ok
mpi() {
	local name=$1 path=$2 rc=0 p0 p1 h0 h1 t0 t1
	local -a args prog
	shift 2
	prog=("$out/mpi_alltoall" "$@")
	[ -z "$imb" ] || prog=("$imb" Alltoall -npmin 4 -msglen "$out/imb-sizes" -time $((4 * secs)))
	read -r -a args <<<"$(path_args "$path")" || return 1
	rm -rf "${out:?}/ranks" "${out:?}/$name"
	p0=$(ports); h0=$(bridge_sent $HOSTS); t0=$(tcp_segs)
	timeout -k 5 "$timeout_s" ip netns exec "$(bridge_ns rx)" "$MPIRUN" --allow-run-as-root \
		--oversubscribe --bind-to none --host n0,n1,n2,n3 --map-by node -np 4 \
		--mca plm_rsh_agent "$out/rsh" --mca plm_rsh_no_tree_spawn 1 \
		--mca oob_tcp_if_include "$NET" --mca mpi_yield_when_idle 1 "${args[@]}" \
		"$out/rankout" "${prog[@]}" >"$out/$name.log" 2>&1 || rc=$?
	sleep 0.05	# the ports' queues drain (2 ms at 1gbit, 256kb)
	p1=$(ports); h1=$(bridge_sent $HOSTS); t1=$(tcp_segs)
	[ -d "$out/ranks" ] && mv "$out/ranks" "$out/$name"
	echo "$p0 $p1 $h0 $h1 $t0 $t1" | awk '{ print $3 - $1, $4 - $2, $9 - $6, $13 - $11,
		$14 - $12 }' >"$out/$name.ctr"
	if [ $rc = 0 ] && [ -n "$imb" ]; then
		imb_times "$out/$name/rank.0/stdout" | grep -q . || rc=1
	elif [ $rc = 0 ] && ! grep -q "^mpi_alltoall: ok (0 errors, 4 ranks)$" \
			"$out/$name/rank.0/stdout" 2>/dev/null; then
		rc=1
	fi
	return $rc
}

# imb_times FILE: IMB-MPI1's Alltoall table as mpi_alltoall -t prints its times
# ("mpi_alltoall: time BYTES US"), US its t_max
imb_times() {
	awk '/^# Benchmarking Alltoall/ { on = 1; next } /^# Benchmarking/ { on = 0 }
	     on && $1 ~ /^[0-9]+$/ && NF >= 5 && $1 > 0 { print "mpi_alltoall: time", $1, $4 }' "$1"
}

# times_of FILE: a rank's "mpi_alltoall: time BYTES US" lines, from either program
times_of() {
	if [ -n "$imb" ]; then imb_times "$1"; else grep "^mpi_alltoall: time " "$1"; fi
}

# courier_checks NAME: per rank, courier selected by mtl:ofi, UDP used, no shared memory;
# prints what is wrong, returns 1 if anything is
courier_checks() {
	local r why bad=0 tx shm
	for ((i = 0; i < 4; i++)); do
		r=$out/$1/rank.$i
		why=
		grep -qhE "mtl:ofi:prov(ider)?: courier$" "$r"/std* 2>/dev/null ||
			why="$why mtl:ofi did not select courier;"
		tx=$(cstat tx_pkts "$r"/std*); shm=$(cstat shm_tx_pkts "$r"/std*)
		[ "$tx" -gt 0 ] || why="$why no courier stats or nothing sent;"
		[ "$shm" = 0 ] || why="$why $shm packets through shared memory across hosts;"
		if [ -n "$why" ]; then
			echo "$1: rank $i:$why"
			bad=1
		fi
	done
	return $bad
}

# failure_report NAME RC
failure_report() {
	echo "--- $1: mpirun exit $2; its output (libfabric info lines left out):"
	grep -v "^libfabric:.*<info>" "$out/$1.log" | tail -40
	if [ -d "$out/$1" ]; then
		for r in "$out/$1"/rank.*; do
			echo "--- $(basename "$r")"
			cat "$r"/std* | grep -vE "^libfabric:.*<(info|debug|trace)>|^courier (stats|cc) " |
				tail -20
		done
	fi
	keep=1
}

sizes="4096 65536 262144 1048576"
printf '%s\n' $sizes >"$out/imb-sizes"
shape="tbf rate $BRIDGE_RATE burst $BRIDGE_BURST limit $BRIDGE_LIMIT"

if [ "$bench" != 1 ]; then
	rc=0
	mpi test courier $sizes || rc=$?
	if [ $rc != 0 ]; then
		failure_report test $rc
		echo "$me: all-to-all over courier, 4 hosts, every port $shape: FAILED"
		exit 1
	fi
	if ! courier_checks test; then
		keep=1
		echo "$me: all-to-all over courier, 4 hosts, every port $shape: FAILED"
		exit 1
	fi
	read -r pp pd hp to tr <"$out/test.ctr"
	t=("$out"/test/rank.*/std*)
	echo "$me: all-to-all over courier (mtl:ofi), 4 hosts, 4 KiB..1 MiB per pair, every" \
		"byte checked: ok; courier sent $(cstat tx_pkts "${t[@]}") packets, resent" \
		"$(cstat retrans_timeout "${t[@]}") on timeout, $(cstat retrans_fast "${t[@]}") fast," \
		"$(cstat retrans_probe "${t[@]}") by probe; ports ($shape): $pp packets out," \
		"$pd dropped, $((hp - pp)) wire packets lost"
	exit 0
fi

# ---- bench ----
results=$out/results.txt
: >"$results"
status=0
echo "# $me: $rounds rounds of: $paths; ${secs}s per size; every port $shape;" \
	"MTU $BRIDGE_MTU; logs in $out"
for l in "$out"/lib-*/libcourier-fi.so; do
	echo "# $(basename "$(dirname "$l")"): md5 $(md5sum <"$l" | cut -c1-12)," \
		"from $([ "$l" = "$out/lib-base/libcourier-fi.so" ] && echo "$base" || echo "$build")"
done
for ((round = 1; round <= rounds; round++)); do
	for path in $paths; do
		name=$path.$round
		rc=0
		mpi "$name" "$path" -t "$secs" $sizes || rc=$?
		if [ $rc = 0 ] && [ "$path" != ob1tcp ] && ! courier_checks "$name"; then
			rc=1
		fi
		if [ $rc != 0 ]; then
			echo "# $path round $round: FAILED"
			failure_report "$name" $rc
			[ "$path" = ob1tcp ] || status=1
			grep -q "^mpi_alltoall: FAILED" "$out/$name/rank.0/stdout" 2>/dev/null &&
				status=1
			continue
		fi
		times_of "$out/$name/rank.0/stdout" |
			awk -v p="$path" '{ print p, "time", $3, $4 }' >>"$results"
		read -r pp pd hp to tr <"$out/$name.ctr"
		if [ "$path" = ob1tcp ]; then
			sent=$to resent=$tr
		else
			t=("$out/$name"/rank.*/std*)
			sent=$(cstat tx_pkts "${t[@]}")
			resent=$(( $(cstat retrans_timeout "${t[@]}") + $(cstat retrans_fast "${t[@]}") +
				   $(cstat retrans_probe "${t[@]}") ))
		fi
		echo "$path ctr $pp $pd $((hp - pp)) $sent $resent" >>"$results"
		printf '# round %d %-8s %s | ports: %s pkts, %s dropped, %s lost; resent %s/%s\n' \
			"$round" "$path" "$(times_of "$out/$name/rank.0/stdout" |
			awk '{ printf "%s:%sus ", $3, $4 }')" "$pp" "$pd" "$((hp - pp))" "$resent" "$sent"
	done
done

echo
echo "== MPI_Alltoall, 4 hosts x 1 rank, every switch port $shape (MTU $BRIDGE_MTU)"
echo "   us per MPI_Alltoall (slowest rank), median of $rounds rounds [min-max];" \
	"ob1/X > 1: X faster than ob1+tcp"
awk -v paths="$paths" -v sizes="$sizes" '
function sort(a, n,   i, j, t) {
	for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) {
		t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
}
function med(s,   a, n) {
	n = split(s, a, " "); if (!n) return ""
	sort(a, n); return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function rng(s,   a, n) {
	n = split(s, a, " "); if (!n) return "n/a"
	sort(a, n); return sprintf("%.0f-%.0f", a[1], a[n])
}
$2 == "time" { v[$1 SUBSEP $3] = v[$1 SUBSEP $3] " " $4 }
END {
	np = split(paths, p, " "); ns = split(sizes, s, " ")
	printf "%-8s", "size"
	for (i = 1; i <= np; i++) printf " %22s", p[i] " us"
	for (i = 1; i <= np; i++) if (p[i] != "ob1tcp") printf " %12s", "ob1/" p[i]
	printf "\n"
	for (k = 1; k <= ns; k++) {
		printf "%-8s", (s[k] >= 1048576 ? s[k] / 1048576 " MiB" : s[k] / 1024 " KiB")
		for (i = 1; i <= np; i++) {
			m = med(v[p[i] SUBSEP s[k]]); mm[i] = m
			printf " %22s", (m == "" ? "n/a" : sprintf("%.0f [%s]", m, rng(v[p[i] SUBSEP s[k]])))
		}
		ob = med(v["ob1tcp" SUBSEP s[k]])
		for (i = 1; i <= np; i++) if (p[i] != "ob1tcp")
			printf " %12s", (ob == "" || mm[i] == "" || mm[i] == 0 ? "n/a" : sprintf("%.2f", ob / mm[i]))
		printf "\n"
	}
}' "$results"
echo
echo "== switch ports per run (the whole mpirun: launch, checks, warm-up, timed loops), medians"
echo "   of $rounds rounds; sent: the four ports' tbf Sent pkts; dropped: tbf drops (skbs);" \
	"lost: wire packets the hosts sent that no port sent;"
echo "   resent: courier retransmissions / tx_pkts (ACKs included), ob1: TCP" \
	"retransmitted / out segments"
awk -v paths="$paths" '
function med(s,   a, n, i, j, t) {
	n = split(s, a, " "); if (!n) return "n/a"
	for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) {
		t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
$2 == "ctr" { for (i = 3; i <= 7; i++) c[$1 SUBSEP i] = c[$1 SUBSEP i] " " $i
	r[$1] = r[$1] " " ($6 ? 100 * $7 / $6 : 0); l[$1] = l[$1] " " ($3 ? 100 * $5 / ($3 + $5) : 0) }
END {
	np = split(paths, p, " ")
	printf "%-8s %10s %9s %9s %7s %11s %10s %8s\n", "path", "sent", "dropped", "lost",
		"lost%", "resent", "of", "resent%"
	for (i = 1; i <= np; i++)
		printf "%-8s %10s %9s %9s %7s %11s %10s %8s\n", p[i], med(c[p[i] SUBSEP 3]),
			med(c[p[i] SUBSEP 4]), med(c[p[i] SUBSEP 5]),
			(med(l[p[i]]) == "n/a" ? "n/a" : sprintf("%.2f", med(l[p[i]]))),
			med(c[p[i] SUBSEP 7]), med(c[p[i] SUBSEP 6]),
			(med(r[p[i]]) == "n/a" ? "n/a" : sprintf("%.2f", med(r[p[i]])))
}' "$results"
[ $status = 0 ] || keep=1
exit $status
