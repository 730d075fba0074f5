#!/usr/bin/env bash
# run-mpi-defaults.sh BUILDDIR: Debian's Open MPI over courier as its users run it: the MPI
# components named and the provider selected (opal_common_ofi_provider_include, FI_PROVIDER),
# no btl_ofi_mode, no btl_ofi_disable_sep, nothing else tuned. btl/ofi then opens a scalable
# endpoint (courier offers max_ep_tx_ctx > 1) and, in Open MPI 4.1, serves one-sided only.
# At 2, 3 and 8 ranks, in a network namespace with only loopback:
#   cm     one host: --mca pml cm --mca mtl ofi --mca btl ofi,self --mca osc rdma; mpi_osc,
#          mpi_p2p and mpi_semantics (two-sided over mtl/ofi, one-sided over btl/ofi)
#   ob1    one host: --mca pml ob1 --mca btl ofi,vader,self --mca osc rdma; mpi_osc (btl/ofi
#          is one-sided only by default in 4.1 and 5.0, so ob1 needs vader (5.0: sm) for
#          messages: with `btl ofi,self` alone it crashes in its first send whatever the
#          provider)
#   nodes  every rank a node of its own (run-mpi-osc.sh says how and why), the cm line: all
#          of mpi_osc, compare-and-swap included, through btl/ofi
# Open MPI 5 (mpi-common.sh): cm runs the two-sided programs only, and there is no nodes run.
# Proof, per rank: courier's fabric opened (libfabric's info log), btl/ofi ran with include
# list "courier" (btl_ofi_verbose), and courier moved traffic on an endpoint of that rank;
# for ob1 every rank's endpoints sent messages, which only btl/ofi's RMA and atomics can be
# (its two-sided mode is off). Shared memory in every rank's stats unless FI_COURIER_SHM=0.
# MODES="cm ob1 nodes" and NPS="2 3 8" pick a subset.
set -euo pipefail
shm=${FI_COURIER_SHM:-1}
build=$(cd "$1" && pwd)
src=$(cd "$(dirname "$0")" && pwd)
. "$src/mpi-common.sh"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for p in mpi_osc mpi_p2p mpi_semantics; do
	"$MPICC" -O2 -o "$out/$p" "$src/$p.c"
done
rank_wrapper "$out"
rsh_agent "$out"


# sum NAME FILES...: a courier statistic summed over the files' "courier stats" lines
sum() {
	local k=$1; shift
	cat "$@" | awk -v k="$k" '/^courier stats / { for (i = 4; i < NF; i++) if ($i == k) s += $(i + 1) }
		END { print s + 0 }'
}

# run MODE PROG NP: 0 when mpirun exits 0, rank 0 says PROG passed and every rank's proof holds
run() {
	local mode=$1 prog=$2 np=$3 rc=0 bad="" r where=() mca=()
	case $mode in
	cm|nodes) mca=(--mca pml cm --mca mtl ofi --mca btl ofi,self --mca osc rdma) ;;
	ob1) mca=(--mca pml ob1 --mca btl "ofi,$OMPI_SM,self" --mca osc rdma) ;;
	esac
	[ "$mode" = nodes ] && where=(--host "$(seq -s, -f "n%g" 1 "$np")" --map-by node
		--mca plm_rsh_agent "$out/rsh" --mca plm_rsh_no_tree_spawn 1
		--mca mpi_yield_when_idle 1)   # one rank per node: ORTE cannot see the sharing
	rm -rf "$out/ranks"
	timeout 180 unshare -n sh -c "ip link set lo up; exec $MPIRUN --allow-run-as-root \
		--oversubscribe --bind-to none -np $np ${where[*]} ${mca[*]} \
		--mca opal_common_ofi_provider_include courier --mca opal_common_ofi_verbose 1 \
		-x FI_PROVIDER=courier -x FI_PROVIDER_PATH=$build/.libs \
		-x FI_LOG_LEVEL=info -x FI_LOG_PROV=core -x FI_COURIER_STATS=1 \
		-x FI_COURIER_SHM=$shm $out/rankout $out/$prog" >"$out/log" 2>&1 || rc=$?
	for r in "$out"/ranks/rank.*; do
		local why=""
		grep -qh "Opened fabric: courier$" "$r"/std* || why="$why no courier fabric;"
		if [ "$mode" != cm ] || [ "$OMPI_MAJOR" -lt 5 ]; then
			grep -qh 'btl:ofi:provider_include = "courier"$' "$r"/std* ||
				why="$why btl/ofi did not run;"
		fi
		[ "$(sum tx_msgs "$r"/std*)" -gt 0 ] || why="$why courier sent nothing;"
		if [ "$shm" != 0 ] && [ "$(sum shm_peers "$r"/std*)" -lt 1 ]; then
			why="$why no shared-memory peer;"
		fi
		[ -n "$why" ] && bad="$bad $(basename "$r"):$why"
	done
	if [ "$rc" != 0 ] || [ -n "$bad" ] ||
	   ! grep -Eq "^$prog: ok \((0 errors, )?$np ranks\)" "$out/ranks/rank.0/stdout"; then
		grep -v "^libfabric:" "$out/log" || true; rank_logs "$out"
		echo "$prog, $mode, $np ranks, defaults: FAILED (mpirun exit $rc)$bad"
		return 1
	fi
	echo "$prog, $mode, $np ranks, defaults: ok (courier sent" \
		"$(sum tx_msgs "$out"/ranks/rank.*/std*) messages)"
	grep -h "left out" "$out/ranks/rank.0/stdout" || true
}

# Open MPI 5: pml cm brings no btl (one-sided is ob1's), and its launcher cannot start nodes
# in a namespace with only loopback (run-mpi-netns.sh runs one-sided across emulated hosts)
modes="cm ob1 nodes" cm_progs="mpi_osc mpi_p2p mpi_semantics"
[ "$OMPI_MAJOR" -ge 5 ] && modes="cm ob1" cm_progs="mpi_p2p mpi_semantics"
fail=0
for np in ${NPS:-2 3 8}; do
	for mode in ${MODES:-$modes}; do
		progs=mpi_osc
		[ "$mode" = cm ] && progs=$cm_progs
		for prog in $progs; do
			run "$mode" "$prog" "$np" || fail=1
		done
	done
done
exit $fail
