#!/usr/bin/env bash
# run-mpi.sh BUILDDIR: Debian's Open MPI, two-sided over courier (pml cm, mtl ofi), at 2 and 8
# ranks, in a network namespace with only loopback. Proves courier was selected: every rank's
# mtl_ofi_verbose line must name provider "courier" exactly (Open MPI 4.1 prints
# "mtl:ofi:prov: courier", 5.0 "mtl:ofi:provider: courier"). All ranks share the host, so they
# reach each other through shared memory: every rank's stats must show shm peers, unless
# FI_COURIER_SHM=0 is set (then UDP carries everything, and that is checked instead).
# Then mpi_intercomm (split, intercommunicator create and merge, a message each way, free;
# Open MPI inserts the remote group into the AV again and receives from the new fi_addr_t)
# and mpi_semantics (communicator loops, MPI_Comm_create_group, nonblocking collectives,
# MPI_Mprobe/MPI_Mrecv, cancelled receives, persistent requests) at 2, 3 and 8 ranks.
set -euo pipefail
shm=${FI_COURIER_SHM:-1}
build=$(cd "$1" && pwd)
src=$(cd "$(dirname "$0")" && pwd)
. "$src/mpi-common.sh"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$MPICC" -O2 -o "$out/mpi_p2p" "$src/mpi_p2p.c"
"$MPICC" -O2 -o "$out/mpi_intercomm" "$src/mpi_intercomm.c"
"$MPICC" -O2 -o "$out/mpi_semantics" "$src/mpi_semantics.c"
rank_wrapper "$out"
for np in 2 8; do
	rm -rf "$out/ranks"
	rc=0
	timeout 120 unshare -n sh -c "ip link set lo up; exec $MPIRUN --allow-run-as-root \
		--oversubscribe --bind-to none -np $np --mca pml cm --mca mtl ofi \
		--mca opal_common_ofi_provider_include courier --mca mtl_ofi_verbose 1 \
		-x FI_PROVIDER=courier -x FI_PROVIDER_PATH=$build/.libs \
		-x FI_COURIER_STATS=1 -x FI_COURIER_SHM=$shm $out/rankout $out/mpi_p2p" \
		>"$out/log" 2>&1 || rc=$?
	if [ "$rc" != 0 ]; then
		cat "$out/log"; rank_logs "$out"; echo "mpi_p2p at $np ranks: FAILED (mpirun exit $rc)"
		exit 1
	fi
	# counted per rank (a file each): ranks writing into one stream can tear lines
	sel=0
	for r in "$out"/ranks/rank.*; do
		if grep -qshE "mtl:ofi:prov(ider)?: courier$" "$r"/std*; then sel=$((sel + 1)); fi
	done
	viashm=$(shm_ranks "$out/ranks") want=$(shm_ranks_wanted "$np")
	if [ "$sel" != "$np" ] || [ "$viashm" != "$want" ] ||
	   ! grep -q "mpi_p2p: ok (0 errors, $np ranks)" "$out/ranks/rank.0/stdout"; then
		cat "$out/log"; rank_logs "$out"
		echo "mpi_p2p at $np ranks: courier selected by $sel ranks, shm used by $viashm"
		exit 1
	fi
	echo "mpi_p2p at $np ranks: ok, mtl/ofi chose courier on all $np ranks," \
		"shared memory used by $viashm"
done
# one program at np ranks over courier: mpirun exits 0, every rank selected courier, rank 0
# printed "PROG: ok (NP ranks)"
run_checked() {   # run_checked PROG NP
	local prog=$1 np=$2 rc=0 sel=0 r
	rm -rf "$out/ranks"
	timeout 180 unshare -n sh -c "ip link set lo up; exec $MPIRUN --allow-run-as-root \
		--oversubscribe --bind-to none -np $np --mca pml cm --mca mtl ofi \
		--mca opal_common_ofi_provider_include courier --mca mtl_ofi_verbose 1 \
		-x FI_PROVIDER=courier -x FI_PROVIDER_PATH=$build/.libs \
		-x FI_COURIER_SHM=$shm $out/rankout $out/$prog" >"$out/log" 2>&1 || rc=$?
	for r in "$out"/ranks/rank.*; do
		if grep -qshE "mtl:ofi:prov(ider)?: courier$" "$r"/std*; then sel=$((sel + 1)); fi
	done
	if [ "$rc" != 0 ] || [ "$sel" != "$np" ] ||
	   ! grep -q "$prog: ok ($np ranks)" "$out/ranks/rank.0/stdout"; then
		cat "$out/log"; rank_logs "$out"
		echo "$prog at $np ranks: FAILED (mpirun exit $rc, courier selected by $sel)"
		return 1
	fi
	echo "$prog at $np ranks: ok, over courier on all $np ranks"
}
for prog in mpi_intercomm mpi_semantics; do
	for np in 2 3 8; do
		run_checked $prog $np || exit 1
	done
done
