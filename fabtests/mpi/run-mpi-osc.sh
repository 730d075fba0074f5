#!/usr/bin/env bash
# run-mpi-osc.sh BUILDDIR: Debian's Open MPI, one-sided over courier (osc rdma over btl ofi, pml
# ob1 with btl ofi,self), at 2 and 8 ranks, in a network namespace with only loopback.
# btl_ofi_mode 2 is a tuning knob kept for what it tests: btl/ofi carrying ob1's messages
# besides RMA (Open MPI 4.1's btl/ofi is one-sided only by default). How users run it, with no
# knob, is run-mpi-defaults.sh.
#
# Every rank gets a node of its own: mpirun is given hosts n1..nN and a remote shell that runs the
# orted right here (in its own session directory). Ranks on one node would reach each other's
# MPI_Win_allocate memory through shared memory, not through btl/ofi, and there Open MPI 4.1.4's
# osc/rdma crashes in MPI_Compare_and_swap (see mpi_osc.c). Apart from loopback this is the
# multi-node path: data, atomics and window locks all go through btl/ofi.
#
# Proof that btl/ofi chose courier: Debian's Open MPI is not a debug build, so btl/ofi never
# names the provider it picked (its "initializing dev:%s provider:%s" is BTL_VERBOSE, compiled
# out). Instead, for every rank (process id P) the log must hold both
#   [host:P] .../btl_ofi_component.c:NNN: btl:ofi:provider_include = "courier"   (btl/ofi ran)
#   libfabric:P:...::core:core:fi_fabric_():NNN<info> Opened fabric: courier    (libfabric)
# and no other fabric may be opened. With pml ob1, btl/ofi is the only libfabric user in the
# process; FI_PROVIDER=courier also hides every other provider from it.
# The emulated nodes all share this host, so courier itself carries btl/ofi's traffic over its
# shared-memory path: every rank's stats must show shm peers (unless FI_COURIER_SHM=0).
set -euo pipefail
shm=${FI_COURIER_SHM:-1}
build=$(cd "$1" && pwd)
src=$(cd "$(dirname "$0")" && pwd)
. "$src/mpi-common.sh"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$MPICC" -O2 -o "$out/mpi_osc" "$src/mpi_osc.c"
rank_wrapper "$out"

# every node's orted runs here
rsh_agent "$out"

for np in 2 8; do
	rm -rf "$out/ranks"
	# Open MPI 5: its launcher cannot start nodes in a namespace with only loopback, and its
	# osc/rdma no longer crashes in compare-and-swap between ranks of one node: one host
	where="--host $(seq -s, -f "n%g" 1 "$np") --map-by node --mca plm_rsh_agent $out/rsh \
		--mca plm_rsh_no_tree_spawn 1"
	[ "$OMPI_MAJOR" -ge 5 ] && where=""
	# mpi_yield_when_idle: eight busy-polling ranks on a small machine starve each other; ORTE
	# sets it only when it sees a node oversubscribed, and each of ours holds one rank.
	rc=0
	timeout 120 unshare -n sh -c "ip link set lo up; exec $MPIRUN --allow-run-as-root \
		--oversubscribe --bind-to none $where -np $np \
		--mca pml ob1 --mca btl ofi,self --mca btl_ofi_mode 2 --mca osc rdma \
		--mca btl_ofi_provider_include courier --mca btl_ofi_verbose 1 \
		--mca mpi_yield_when_idle 1 \
		-x FI_PROVIDER=courier -x FI_PROVIDER_PATH=$build/.libs \
		-x FI_LOG_LEVEL=info -x FI_LOG_PROV=core -x FI_COURIER_STATS=1 \
		-x FI_COURIER_SHM=$shm $out/rankout $out/mpi_osc" \
		>"$out/log" 2>&1 || rc=$?
	if [ "$rc" != 0 ]; then
		grep -v "^libfabric:" "$out/log" || true; rank_logs "$out"
		echo "mpi_osc at $np ranks: FAILED (mpirun exit $rc)"; exit 1
	fi
	# a file per rank: eight ranks writing into one stream interleave their lines, and a torn
	# log line would hide the proof
	sel=0 other=0
	for r in "$out"/ranks/rank.*; do
		if grep -qh 'btl:ofi:provider_include = "courier"$' "$r"/std* &&
		   grep -qh "Opened fabric: courier$" "$r"/std*; then sel=$((sel + 1)); fi
		n=$(cat "$r"/std* | grep "Opened fabric: " | grep -vc "Opened fabric: courier$" || true)
		other=$((other + n))
	done
	viashm=$(shm_ranks "$out/ranks") want=$(shm_ranks_wanted "$np")
	if [ "$sel" != "$np" ] || [ "$other" != 0 ] || [ "$viashm" != "$want" ] ||
	   ! grep -q "mpi_osc: ok (0 errors, $np ranks)" "$out/ranks/rank.0/stdout"; then
		grep -v "^libfabric:" "$out/log" || true; rank_logs "$out"
		echo "mpi_osc at $np ranks: btl/ofi opened courier in $sel ranks, other fabrics" \
			"$other, shm used by $viashm"
		exit 1
	fi
	grep "^mpi_osc: " "$out/ranks/rank.0/stdout"
	# packet payload plus what single copy moved (shared memory)
	mb=$(cat "$out"/ranks/rank.*/std* | grep -oE "(tx_bytes|shm_single_copy_bytes) [0-9]*" |
	     awk '{ s += $2 } END { printf "%.1f", s / 1e6 }' || true)
	echo "mpi_osc at $np ranks: ok, btl/ofi opened fabric courier on all $np ranks," \
		"courier sent $mb MB, shared memory used by $viashm"
done
