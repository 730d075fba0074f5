#!/usr/bin/env bash
# peer-mem.sh BUILDDIR: what a rank keeps per peer under Debian's Open MPI (pml cm, mtl ofi,
# btl self only, so no other transport maps per-peer memory of its own), measured as a user
# sees it: fabtests/mpi/mpi_peer_mem.c (an all-to-all of LEN bytes and a ring to every peer,
# verified) reports every rank's peak resident memory; the per-peer figure is
#   (average peak at np HI - average peak at np LO) / (HI - LO)
# for courier over UDP (FI_COURIER_SHM=0), courier over its shared memory, and tcp;ofi_rxm,
# side by side in one run. Then 64 ranks across two emulated hosts (two network namespaces
# joined by veth, fabtests/scripts/netns.sh; 32 ranks on each) over courier: must pass, with
# its per-rank peak. Environment: LO (4), HI (32), LENS ("8 65536"), WIDE (64: ranks across
# the two hosts, 0 skips), REPS (3: runs per point, the median is kept: a rank's peak moves by
# a few hundred kB from run to run). Prints a markdown table; exits 1 if any run fails.
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$(dirname "$0")" && pwd)
lo=${LO:-4} hi=${HI:-32} lens=${LENS:-8 65536} wide=${WIDE:-64} reps=${REPS:-3}
. "$src/mpi-common.sh"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$MPICC" -O2 -o "$out/mpi_peer_mem" "$src/mpi_peer_mem.c"

# peak1 NP LEN PROV SHM: the average peak (kB) of the ranks in one run, or "fail"
peak1() {
	local np=$1 len=$2 prov=$3 shm=$4 log="$out/log.$1.$2.$3.$4" env
	env="-x FI_PROVIDER=$prov"
	[ "$prov" = courier ] && env="$env -x FI_PROVIDER_PATH=$build/.libs -x FI_COURIER_SHM=$shm"
	if timeout 600 unshare -n sh -c "ip link set lo up; exec $MPIRUN --allow-run-as-root \
		--oversubscribe --bind-to none -np $np --mca pml cm --mca mtl ofi --mca btl self \
		--mca opal_common_ofi_provider_include $prov $env $out/mpi_peer_mem $len" \
		>"$log" 2>&1 && grep -q "mpi_peer_mem: ok ($np ranks)" "$log"; then
		awk '/^RESULT/ { for (i = 1; i < NF; i++) if ($i == "hwm_kb_avg") print $(i + 1) }' "$log"
	else
		echo fail
		tail -5 "$log" >&2
	fi
}

# peak NP LEN PROV SHM: the median over REPS runs of peak1, or "fail" if any failed
peak() {
	local v all=""
	for _ in $(seq "$reps"); do
		v=$(peak1 "$@")
		[ "$v" = fail ] && { echo fail; return; }
		all="$all $v"
	done
	echo $all | tr ' ' '\n' | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}

fail=0
echo "| path | bytes per peer | peak per rank at np $lo | at np $hi |"
echo "|---|---|---|---|"
for len in $lens; do
	for path in "courier UDP:courier:0" "courier shm:courier:1" "tcp;ofi_rxm:tcp:1"; do
		IFS=: read -r name prov shm <<<"$path"
		a=$(peak "$lo" "$len" "$prov" "$shm") b=$(peak "$hi" "$len" "$prov" "$shm")
		if [ "$a" = fail ] || [ "$b" = fail ]; then
			echo "| $name, $len B | fail | $a | $b |"
			fail=1
			continue
		fi
		echo "| $name, $len B | $(( (b - a) * 1024 / (hi - lo) )) | ${a} kB | ${b} kB |"
	done
done

if [ "$wide" -gt 0 ]; then
	. "$src/../scripts/netns.sh"
	if ! netns_available; then
		echo "peer-mem.sh: no network namespaces here ($NETNS_WHY): $wide ranks across two hosts skipped"
		exit $fail
	fi
	NETNS_ON_EXIT='rm -rf "$out"'
	netns_setup
	rsh_agent "$out" "$NETNS_B"
	half=$((wide / 2))
	for len in $lens; do
		log="$out/wide.$len"
		if timeout 900 ip netns exec "$NETNS_A" "$MPIRUN" --allow-run-as-root --oversubscribe \
			--bind-to none --host "a1:$half,b1:$half" -np "$wide" \
			--mca plm_rsh_agent "$out/rsh" --mca plm_rsh_no_tree_spawn 1 \
			--mca oob_tcp_if_include 198.18.0.0/24 --mca pml cm --mca mtl ofi --mca btl self \
			--mca opal_common_ofi_provider_include courier \
			-x FI_PROVIDER=courier -x FI_PROVIDER_PATH="$build/.libs" \
			-x FI_COURIER_IFACE_ADDR=198.18.0.0/24 "$out/mpi_peer_mem" "$len" \
			>"$log" 2>&1 && grep -q "mpi_peer_mem: ok ($wide ranks)" "$log"; then
			echo "$wide ranks across two emulated hosts, $len B per peer: ok;" \
				"$(grep -o 'hwm_kb_avg [0-9]*' "$log") kB peak per rank," \
				"$(grep -o 'hwm_kb_max [0-9]*' "$log")"
		else
			tail -20 "$log"
			echo "$wide ranks across two emulated hosts, $len B per peer: FAILED"
			fail=1
		fi
	done
fi
exit $fail
