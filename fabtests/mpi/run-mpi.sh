#!/usr/bin/env bash
# run-mpi.sh BUILDDIR: Debian's Open MPI, two-sided over courier (pml cm, mtl ofi), at 2 and 8
# ranks, in a network namespace with only loopback. Proves courier was selected: every rank's
# mtl_ofi_verbose line must name provider "courier" exactly.
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
mpicc -O2 -o "$out/mpi_p2p" "$src/mpi_p2p.c"
for np in 2 8; do
	rm -rf "$out/ranks"
	timeout 120 unshare -n sh -c "ip link set lo up; exec mpirun --allow-run-as-root \
		--oversubscribe --bind-to none -np $np --mca pml cm --mca mtl ofi \
		--mca opal_common_ofi_provider_include courier --mca mtl_ofi_verbose 1 \
		--output-filename $out/ranks \
		-x FI_PROVIDER=courier -x FI_PROVIDER_PATH=$build/.libs $out/mpi_p2p" \
		>"$out/log" 2>&1 || { cat "$out/log"; echo "mpi_p2p at $np ranks: FAILED"; exit 1; }
	# counted per rank (--output-filename): ranks writing into one stream can tear lines
	sel=0
	for r in "$out"/ranks/1/rank.*; do
		if cat "$r"/std* | grep -q "mtl:ofi:prov: courier$"; then sel=$((sel + 1)); fi
	done
	if [ "$sel" != "$np" ] || ! grep -q "mpi_p2p: ok (0 errors, $np ranks)" "$out/log"; then
		cat "$out/log"; echo "mpi_p2p at $np ranks: courier selected by $sel ranks"; exit 1
	fi
	echo "mpi_p2p at $np ranks: ok, mtl:ofi:prov: courier on all $np ranks"
done
