#!/usr/bin/env bash
# mpi-compare.sh BUILDDIR: Open MPI's paths side by side, with one MPI program
# (fabtests/mpi/mpi_bench.c): latency 8 B, bandwidth 64 KiB and 1 MiB, message rate 8 B with one
# pair and with two, a halo exchange (both ways at once, Waitall) of 8 B and 16 KiB, the same
# with a load imbalance that moves (imbal 8 B and 64 KiB: the ranks take turns computing
# MPI_BENCH_WORK_US, 1 ms, between posting and waiting), random
# updates (64 B buckets of 8-byte words to random ranks, any-source receives, progress by
# MPI_Test only) with two ranks and with four. Every path runs with its defaults, only the
# path named:
#   one host     ob1+vader (5.0: sm), pml ucx, cm+mtl/ofi over courier, over tcp;ofi_rxm
#   two hosts    ob1+tcp, pml ucx, cm+mtl/ofi over courier, over tcp;ofi_rxm; one rank per
#                emulated host (network namespaces over veth, netns.sh), per MTU
# Rounds are interleaved (round 1 of every path, then round 2...), so a slow minute of the
# machine hits all paths alike; the table gives medians and courier's ratio to each other
# path, oriented so that >= 1 means courier is as good or better (latency, halo and imbal:
# theirs/ours; bandwidth, rate and updates: ours/theirs).
#
# usage: mpi-compare.sh [-r rounds] [-s seconds] [-w "where"] [-m "mtus"] [-H hogs] [-b BASEDIR]
#                       [-p "paths"] [-x sweep] [-S "sizes"] [-o logdir] BUILDDIR
#   -r N      rounds (default 5)
#   -s S      seconds each test runs per round (MPI_BENCH_SECONDS, default 1)
#   -w LIST   "host" (one host), "hosts" (two emulated hosts), or both (default "host hosts")
#   -m MTUS   veth MTUs for the two-host runs (default "1500 9000")
#   -H K      K busy processes beside the runs (default 0): a loaded node
#   -b DIR    another courier build (say, before a change): a column "base" beside courier
#   -p PATHS  only these paths (default: all of the place's, and base with -b)
#   -o DIR    keep logs and results there (default: a temporary directory, removed)
#   -x sweep  latency, bandwidth and halo at every power of two from 1 B to 4 MiB (-S: others),
#             two ranks, instead of the five rows above: where each path's protocols switch
#   -S SIZES  the sweep's sizes in bytes, space separated
# Two cores: the two-pair rate and the four-rank updates run four ranks on two cores, so they
# measure how each path shares a CPU more than its wire; they are there because users
# oversubscribe too.
# pml ucx is told to take any transport (pml_ucx_tls, pml_ucx_devices: any): Open MPI 4.1
# selects it by default only where InfiniBand or RoCE is. A path that is not installed shows n/a. Exit status 1 if a courier
# run failed or any run counted a data error.
set -uo pipefail
rounds=5 secs=1 where="host hosts" mtus="1500 9000" hogs=0 logdir= base= only= mode=rows sizes=
for ((z = 1; z <= 4194304; z *= 2)); do sizes+="$z "; done
while getopts "r:s:w:m:H:o:b:p:x:S:" o; do
	case $o in
	r) rounds=$OPTARG ;; s) secs=$OPTARG ;; w) where=$OPTARG ;; m) mtus=$OPTARG ;;
	H) hogs=$OPTARG ;; o) logdir=$OPTARG ;; b) base=$(cd "$OPTARG" && pwd) ;; p) only=$OPTARG ;;
	x) mode=$OPTARG ;; S) sizes=$OPTARG ;;
	*) sed -n '2,34p' "$0"; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
case $mode in rows|sweep) ;; *) echo "mpi-compare.sh: -x: rows or sweep" >&2; exit 2 ;; esac
build=$(cd "${1:?usage: mpi-compare.sh [options] BUILDDIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
mpisrc=$here/../mpi
. "$mpisrc/mpi-common.sh"
. "$here/netns.sh"
if [ -n "$logdir" ]; then mkdir -p "$logdir"; out=$(cd "$logdir" && pwd); keep=1
else out=$(mktemp -d); keep=0; fi
hog_pids=()
cleanup() {
	for p in "${hog_pids[@]}"; do kill "$p" 2>/dev/null; done
	[ $keep = 1 ] || rm -rf "$out"
}
NETNS_ON_EXIT=cleanup
trap cleanup EXIT
"$MPICC" -O2 -o "$out/mpi_bench" "$mpisrc/mpi_bench.c" || exit 1
rsh_agent "$out" "$NETNS_B"
results=$out/results.txt
: >"$results"
have_ucx=0
ompi_info 2>/dev/null | grep -q "MCA pml: ucx" && have_ucx=1
for ((h = 0; h < hogs; h++)); do ( while :; do :; done ) & hog_pids+=($!); done
status=0

# path_args WHERE PATH: the mpirun arguments that choose PATH
path_args() {
	local ofi="--mca pml cm --mca mtl ofi --mca opal_common_ofi_provider_include"
	case $2 in
	vader) echo "--mca pml ob1 --mca btl $OMPI_SM,self" ;;
	ob1tcp) echo "--mca pml ob1 --mca btl tcp,self" ;;
	# 4.1's pml ucx declines a node without InfiniBand or RoCE unless told any will do
	ucx) echo "--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any" ;;
	courier) echo "$ofi courier -x FI_PROVIDER=courier -x FI_PROVIDER_PATH=$build/.libs" ;;
	base) echo "$ofi courier -x FI_PROVIDER=courier -x FI_PROVIDER_PATH=$base/.libs" ;;
	rxm) echo "$ofi tcp;ofi_rxm -x FI_PROVIDER=tcp;ofi_rxm" ;;
	esac
}

# run SETTING PATH NP TESTS...: one mpirun; its results appended as "SETTING PATH test size value"
run() {
	local setting=$1 path=$2 np=$3; shift 3
	local log=$out/$setting.$path.np$np.$round.log rc=0 hosts ns=()
	local -a args
	read -r -a args <<<"$(path_args "$setting" "$path")"
	if [ "$path" = ucx ] && [ $have_ucx = 0 ]; then return; fi
	if [ "$setting" = host ]; then
		# as users run: mpirun's own binding, unless there are more ranks than cpus
		hosts=()
		[ "$np" -gt "$(nproc)" ] && hosts=(--oversubscribe)
	else
		# ranks alternate between the namespaces: a1 b1 a2 b2, so pair i is (ai, bi)
		ns=(ip netns exec "$NETNS_A")
		if [ "$np" = 2 ]; then hosts=(--host a1,b1); else hosts=(--host a1,a2,b1,b2); fi
		# (each emulated node would bind its rank to cpu 0: the nodes share this host's cpus)
		hosts+=(--map-by node --bind-to none --mca plm_rsh_agent "$out/rsh"
			--mca plm_rsh_no_tree_spawn 1 --mca oob_tcp_if_include 198.18.0.0/24
			--mca btl_tcp_if_include 198.18.0.0/24
			-x FI_COURIER_IFACE_ADDR=198.18.0.0/24 -x FI_TCP_IFACE=veth0
			-x UCX_NET_DEVICES=veth0)
	fi
	timeout 300 "${ns[@]}" "$MPIRUN" --allow-run-as-root -np "$np" "${hosts[@]}" "${args[@]}" \
		-x MPI_BENCH_SECONDS="$secs" "$out/mpi_bench" "$@" >"$log" 2>&1 || rc=$?
	if [ $rc != 0 ] || ! grep -q "^mpi_bench: errors 0$" "$log"; then
		echo "# $setting $path np $np round $round: FAILED (exit $rc), log $log"
		grep -q "^mpi_bench: errors [1-9]" "$log" && status=1
		[ "$path" = courier ] && status=1
		keep=1
		return
	fi
	awk -v s="$setting" -v p="$path" -v np="$np" '/^mpi_bench: (lat|bw|rate|halo|imbal|updates) / {
		t = $2; if (t == "rate") t = "rate" np / 2 "p"; if (t == "updates") t = "updates" np "r"
		print s, p, t, $3, $4 }' "$log" >>"$results"
}

# the paths of a place: its own, then base with -b; -p picks among them
paths_of() {
	local p
	for p in "$@" ${base:+base}; do
		[ -z "$only" ] || [[ " $only " == *" $p "* ]] && echo "$p"
	done
}

# one round of every path in SETTING
round_of() {
	local setting=$1 z; shift
	local sweep=()
	for z in $sizes; do sweep+=(lat "$z"); done
	for z in $sizes; do sweep+=(bw "$z"); done
	for z in $sizes; do sweep+=(halo "$z"); done
	for path in "$@"; do
		if [ "$mode" = sweep ]; then
			run "$setting" "$path" 2 "${sweep[@]}"
			continue
		fi
		run "$setting" "$path" 2 lat 8 bw 65536 bw 1048576 rate 8 halo 8 halo 16384 imbal 8 \
			imbal 65536 updates 64
		run "$setting" "$path" 4 rate 8 updates 64
	done
}

# table SETTING PATHS...: medians and courier's ratios
table() {
	local setting=$1; shift
	echo "== $setting: medians of $rounds rounds, ${secs}s each test; ratio >= 1: courier as good or better"
	awk -v s="$setting" -v paths="$*" '
	function median(key,   n, i, j, t, a) {
		n = split(vals[key], a, " ")
		for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) {
			t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
		if (n == 0) return ""
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	$1 == s { k = $3 " " $4; vals[k SUBSEP $2] = vals[k SUBSEP $2] " " $5
		if (!(k in seen)) { seen[k] = 1; rows[++nr] = k } }
	END {
		np = split(paths, p, " ")
		printf "%-14s", "test"
		for (i = 1; i <= np; i++) printf " %12s", p[i]
		for (i = 1; i <= np; i++) if (p[i] != "courier") printf " %11s", "c/" p[i]
		printf "\n"
		for (r = 1; r <= nr; r++) {
			split(rows[r], rs, " "); lower = rs[1] == "lat" || rs[1] == "halo" || rs[1] == "imbal"
			unit = lower ? " us" : rs[1] == "bw" ? " MB/s" : rs[1] ~ /^updates/ ? " Mupd/s" : " msg/s"
			printf "%-14s", rows[r]
			for (i = 1; i <= np; i++) {
				m[i] = median(rows[r] SUBSEP p[i]); if (p[i] == "courier") c = m[i]
				printf " %12s", m[i] == "" ? "n/a" : m[i] }
			for (i = 1; i <= np; i++) {
				if (p[i] == "courier") continue
				if (m[i] == "" || c == "" || c + 0 == 0 || m[i] + 0 == 0) { printf " %11s", "n/a"; continue }
				printf " %11.2f", lower ? m[i] / c : c / m[i] }
			printf "%s\n", unit
		}
	}' "$results"
}

for w in $where; do
	case $w in
	host)
		mapfile -t ps < <(paths_of vader ucx courier rxm)
		for ((round = 1; round <= rounds; round++)); do
			round_of host "${ps[@]}"
		done
		table host "${ps[@]}" ;;
	hosts)
		if ! netns_available; then echo "# two hosts: no network namespaces here: $NETNS_WHY"; continue; fi
		netns_setup
		for mtu in $mtus; do
			netns_a ip link set "$NETNS_IF" mtu "$mtu" && netns_b ip link set "$NETNS_IF" mtu "$mtu" ||
				{ echo "# MTU $mtu: cannot set"; status=1; continue; }
			mapfile -t ps < <(paths_of ob1tcp ucx courier rxm)
			for ((round = 1; round <= rounds; round++)); do
				round_of "mtu$mtu" "${ps[@]}"
			done
			table "mtu$mtu" "${ps[@]}"
		done ;;
	*) echo "mpi-compare.sh: unknown place $w"; exit 2 ;;
	esac
done
[ $keep = 1 ] && echo "# logs and results.txt in $out"
exit $status
