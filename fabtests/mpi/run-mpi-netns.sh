#!/usr/bin/env bash
# run-mpi-netns.sh BUILDDIR: Debian's Open MPI over courier between two emulated hosts, two-sided
# (mpi_p2p over mtl/ofi) and one-sided (mpi_osc over osc/rdma and btl/ofi, with btl/ofi's
# defaults and again in its two-sided mode), 4 ranks; then
# mpi_intercomm and mpi_semantics over mtl/ofi (run-mpi.sh says what they do).
#
# The hosts are two network namespaces joined by a veth pair (fabtests/scripts/netns.sh,
# 198.18.0.1 and .2), losing LOSS% (default 2) of the UDP packets each one receives; TCP is
# exempt, so Open MPI's own launch and wire-up are not what is tested. mpirun runs in the
# first namespace and starts one orted per emulated node through a "remote shell" that runs it
# in that node's namespace: nodes a1 and a2 in the first, b1 and b2 in the second, one rank
# each (a node per rank: see run-mpi-osc.sh for why one-sided needs it), ranks 0..3 on a1, b1,
# b2, a2. So rank 0's big messages to rank 1 cross the lossy link, and in the ring of mpi_p2p
# and the all-to-all of mpi_osc every rank has a peer on its host (shared memory) and one on
# the other (UDP).
#
# Each emulated node has a host name of its own (rsh_agent in mpi-common.sh): Open MPI 5 judges
# locality by host name.
#
# Every rank gets the same environment, FI_COURIER_IFACE_ADDR=198.18.0.0/24: a subnet, in
# which each rank finds its own host's address. Checked per rank: courier selected, shared
# memory used, UDP used with packets resent (loss was met and repaired); for the run, the
# namespaces' drop counters and the program's own verdict. LOSS=0 runs without loss;
# LOGPROV=core,courier adds courier's log to the ranks' (FI_LOG_LEVEL=info). AUTH_KEY=1 gives
# the job a secret (FI_COURIER_AUTH_KEY_FILE, a fresh owner-only file): every rank must then
# say it authenticated, and no rank may have refused a datagram of the job.
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$(dirname "$0")" && pwd)
loss=${LOSS:-2}
. "$src/mpi-common.sh"
. "$src/../scripts/netns.sh"
if ! netns_available; then
	echo "run-mpi-netns.sh: cannot make network namespaces here: $NETNS_WHY"
	exit 1
fi
out=$(mktemp -d)
NETNS_ON_EXIT='rm -rf "$out"'
netns_setup
netns_loss "$loss" 1-65535
"$MPICC" -O2 -o "$out/mpi_p2p" "$src/mpi_p2p.c"
"$MPICC" -O2 -o "$out/mpi_osc" "$src/mpi_osc.c"
"$MPICC" -O2 -o "$out/mpi_intercomm" "$src/mpi_intercomm.c"
"$MPICC" -O2 -o "$out/mpi_semantics" "$src/mpi_semantics.c"
rank_wrapper "$out"
auth=()
if [ "${AUTH_KEY:-0}" = 1 ]; then
	(umask 077 && head -c 32 /dev/urandom >"$out/job.key")
	auth=(-x FI_COURIER_AUTH_KEY_FILE="$out/job.key")
fi

# nodes a* run their orted in the first namespace (mpirun's own), b* in the second
rsh_agent "$out" "$NETNS_B"

# sum NAME FILES...: a courier statistic summed over the files' "courier stats" lines
sum() {
	local k=$1; shift
	cat "$@" | awk -v k="$k" '/^courier stats / { for (i = 4; i < NF; i++) if ($i == k) s += $(i + 1) }
		END { print s + 0 }'
}

# run NAME MCA...: mpirun NAME on a1,b1,b2,a2; per-rank checks; 0 or 1
run() {
	local name=$1; shift
	local rc=0 bad=0 r
	rm -rf "$out/ranks"
	timeout 240 ip netns exec "$NETNS_A" "$MPIRUN" --allow-run-as-root --oversubscribe \
		--bind-to none --host a1,b1,b2,a2 --map-by node -np 4 \
		--mca plm_rsh_agent "$out/rsh" --mca plm_rsh_no_tree_spawn 1 \
		--mca oob_tcp_if_include 198.18.0.0/24 --mca mpi_yield_when_idle 1 "$@" \
		-x FI_PROVIDER=courier -x FI_PROVIDER_PATH="$build/.libs" \
		-x FI_COURIER_IFACE_ADDR=198.18.0.0/24 -x FI_COURIER_STATS=1 \
		-x FI_COURIER_SHM=1 -x FI_LOG_LEVEL=info -x FI_LOG_PROV=${LOGPROV:-core} \
		"${auth[@]}" "$out/rankout" "$out/$name" >"$out/log" 2>&1 || rc=$?
	if [ "$rc" != 0 ]; then
		grep -v "^libfabric:" "$out/log" || true; rank_logs "$out"
		echo "$name between two hosts: FAILED (mpirun exit $rc)"
		return 1
	fi
	for r in "$out"/ranks/rank.*; do
		local why=""
		grep -qh "Opened fabric: courier$" "$r"/std* || why="$why no courier fabric;"
		[ "$(sum shm_peers "$r"/std*)" -ge 1 ] || [ "${NEED_SHM:-1}" = 0 ] ||
			why="$why no shared-memory peer;"
		[ "$(sum tx_pkts "$r"/std*)" -gt "$(sum shm_tx_pkts "$r"/std*)" ] ||
			why="$why nothing sent over UDP;"
		grep -qh "fi_sockaddr_in://198\.18\.0\.[12]:" "$r"/std* ||
			why="$why no endpoint on the namespaces' subnet;"
		if [ ${#auth[@]} -gt 0 ]; then
			grep -qh "authenticated 1 " "$r"/std* || why="$why not authenticated;"
			[ "$(sum drop_bad_mac "$r"/std*)" = 0 ] ||
				why="$why refused $(sum drop_bad_mac "$r"/std*) datagrams of its own job;"
		fi
		if [ -n "$why" ]; then
			echo "$name: $(basename "$r"):$why"
			bad=1
		fi
	done
	local resent=$(( $(sum retrans_timeout "$out"/ranks/rank.*/std*) +
			 $(sum retrans_fast "$out"/ranks/rank.*/std*) ))
	# (small programs may finish before the loss meets them, or talk only across hosts:
	# NEED_RESEND=0, NEED_SHM=0)
	if [ "$loss" -gt 0 ] && [ "$resent" = 0 ] && [ "${NEED_RESEND:-1}" = 1 ]; then
		echo "$name: no packet was resent: the loss never met courier's traffic"
		bad=1
	fi
	if [ $bad = 1 ] ||
	   ! grep -Eq "^$name: ok \((0 errors, )?4 ranks\)" "$out/ranks/rank.0/stdout"; then
		grep -v "^libfabric:" "$out/log" || true; rank_logs "$out"
		echo "$name between two hosts: FAILED"
		return 1
	fi
	echo "$name between two hosts ($loss% UDP loss each way${auth:+, authenticated}): ok, 4 ranks;" \
		"resent $(sum retrans_timeout "$out"/ranks/rank.*/std*) on timeout," \
		"$(sum retrans_fast "$out"/ranks/rank.*/std*) fast;" \
		"$(sum shm_tx_pkts "$out"/ranks/rank.*/std*) packets through shared memory"
}

fail=0
run mpi_p2p --mca pml cm --mca mtl ofi --mca opal_common_ofi_provider_include courier || fail=1
# one-sided as users run it (btl/ofi's defaults: a scalable endpoint, one-sided only; messages
# over mtl/ofi, or in Open MPI 5, whose pml cm brings no btl, over ob1 and btl/tcp), then with
# btl/ofi carrying messages too (btl_ofi_mode 2, ob1)
if [ "$OMPI_MAJOR" -ge 5 ]; then
	run mpi_osc --mca pml ob1 --mca btl ofi,tcp,self --mca osc rdma \
		--mca opal_common_ofi_provider_include courier || fail=1
else
	run mpi_osc --mca pml cm --mca mtl ofi --mca btl ofi,self --mca osc rdma \
		--mca opal_common_ofi_provider_include courier || fail=1
fi
run mpi_osc --mca pml ob1 --mca btl ofi,self --mca btl_ofi_mode 2 --mca osc rdma \
	--mca btl_ofi_provider_include courier || fail=1
for prog in mpi_intercomm mpi_semantics; do
	NEED_RESEND=0 NEED_SHM=0 run $prog --mca pml cm --mca mtl ofi \
		--mca opal_common_ofi_provider_include courier || fail=1
done
netns_counters
exit $fail
