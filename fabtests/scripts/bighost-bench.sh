#!/usr/bin/env bash
# bighost-bench.sh BUILDDIR: one big host, many ranks: what each rank and the node pay in
# memory, and how long start-up takes, over courier and over Open MPI's own shared memory,
# side by side. Each run is fabtests/mpi/mpi_peer_mem.c (an all-to-all of LEN bytes and a
# ring to every peer, every byte checked) under Open MPI on this host, oversubscribed when
# there are more ranks than cpus (memory and start-up, not speed):
#   courier   pml cm, mtl ofi, btl self, only the provider named (FI_PROVIDER=courier)
#   vader     pml ob1, btl vader (5.0: sm) and self: Open MPI's default on one host
# Printed per path and np: the ranks' average peak resident memory (VmHWM), the host's shared
# memory while the job holds it (/proc/meminfo Shmem, against before the job: courier's rings
# are memfds, vader's segments files in /dev/shm; both count there), the slowest rank's time
# from MPI_Init to its first all-to-all done, and what the job left: in /dev/shm and in Shmem
# after it ended, and after a run whose ranks were all killed with SIGKILL.
#
# usage: bighost-bench.sh [-n "nps"] [-l LEN] [-p "paths"] [-k] [-1] BUILDDIR
#   -n NPS    rank counts, space separated (default "16 64 128")
#   -l LEN    bytes per peer in the all-to-all (default 8)
#   -p PATHS  courier and/or vader (default both)
#   -k        skip the SIGKILL runs
#   -1        one-sided too: a round of puts, gets and fetch-and-adds, every rank to every rank,
#             before the measurement (MPI_PEER_MEM_OSC=1); courier then runs as users run
#             Open MPI one-sided, btl ofi and osc rdma added (the defaults recipe), vader
#             with Open MPI's own choice (Open MPI 4.1: in 5.0 pml cm brings no btl)
# Runs in a network namespace of its own (unshare -n). Exit status 1 if a run failed, its
# data was wrong, or a courier job left anything behind.
set -uo pipefail
nps="16 64 128" len=8 paths="courier vader" kill9=1 osc=0
while getopts "n:l:p:k1" o; do
	case $o in
	n) nps=$OPTARG ;; l) len=$OPTARG ;; p) paths=$OPTARG ;; k) kill9=0 ;; 1) osc=1 ;;
	*) sed -n '2,26p' "$0"; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
build=$(cd "${1:?usage: bighost-bench.sh [options] BUILDDIR}" && pwd)
mpisrc=$(cd "$(dirname "$0")/../mpi" && pwd)
. "$mpisrc/mpi-common.sh"
out=$(mktemp -d)
trap 'pkill -9 -f "$out/mpi_peer_mem" 2>/dev/null; rm -rf "$out"' EXIT
"$MPICC" -O2 -o "$out/mpi_peer_mem" "$mpisrc/mpi_peer_mem.c" || exit 1
status=0

shmem_kb() { awk '/^Shmem:/ { print $2 }' /proc/meminfo; }
shm_list() { ls -A /dev/shm 2>/dev/null | sort; }

# args PATH: the mpirun arguments of that path
args() {
	case $1 in
	courier) echo "--mca pml cm --mca mtl ofi" \
		"$([ $osc = 1 ] && echo --mca btl ofi,self --mca osc rdma || echo --mca btl self)" \
		"--mca opal_common_ofi_provider_include courier -x FI_PROVIDER=courier" \
		"-x FI_PROVIDER_PATH=$build/.libs" ;;
	vader) echo "--mca pml ob1 --mca btl $OMPI_SM,self" ;;
	esac
}

# launch PATH NP LOG [HOLD]: mpirun in its own network namespace, in the background
launch() {
	local hold=${4:-}
	timeout 900 unshare -n sh -c "ip link set lo up; exec $MPIRUN --allow-run-as-root \
		--oversubscribe --bind-to none -np $2 $(args "$1") \
		${hold:+-x MPI_PEER_MEM_HOLD=$hold} -x MPI_PEER_MEM_OSC=$osc \
		$out/mpi_peer_mem $len" >"$3" 2>&1 &
	pid=$!
}

# left BEFORE_LIST BEFORE_SHMEM: what a job left, "nothing" or a description
left() {
	local files shm
	files=$(comm -13 <(echo "$1") <(shm_list) | tr '\n' ' ')
	sleep 1                                 # (the kernel frees a dead process's pages late)
	shm=$(( $(shmem_kb) - $2 ))
	if [ -z "$files" ] && [ "$shm" -lt 1024 ]; then
		echo "nothing"
	else
		echo "/dev/shm: ${files:-none}; Shmem +${shm} kB"
	fi
}

echo "| path | np | peak RSS per rank | node shared memory | start-up | left after the job | after kill -9 |"
echo "|---|---|---|---|---|---|---|"
for np in $nps; do
	for path in $paths; do
		log=$out/$path.$np.log
		before=$(shm_list) base=$(shmem_kb)
		launch "$path" "$np" "$log"
		wait "$pid"
		rc=$?
		res=$(grep "^RESULT" "$log")
		if [ $rc != 0 ] || ! grep -q "mpi_peer_mem: ok ($np ranks)" "$log"; then
			echo "| $path | $np | FAILED (exit $rc) | | | | |"
			tail -5 "$log" >&2
			status=1
			continue
		fi
		hwm=$(awk '{ for (i = 1; i < NF; i++) if ($i == "hwm_kb_avg") print $(i + 1) }' <<<"$res")
		st=$(awk '{ for (i = 1; i < NF; i++) if ($i == "startup_ms_max") print $(i + 1) }' <<<"$res")
		shm=$(awk '{ for (i = 1; i < NF; i++) if ($i == "shmem_kb") print $(i + 1) }' <<<"$res")
		after=$(left "$before" "$base")
		# (what Open MPI's own path leaves is reported, not ours to fail on)
		[ "$after" = nothing ] || [ "$path" != courier ] || status=1
		killed=skipped
		if [ $kill9 = 1 ]; then
			before=$(shm_list) base=$(shmem_kb)
			launch "$path" "$np" "$log.kill" 120
			for ((t = 0; t < 600; t++)); do
				grep -q "mpi_peer_mem: ok" "$log.kill" 2>/dev/null && break
				sleep 1
			done
			pkill -9 -f "^$out/mpi_peer_mem"     # the ranks, not mpirun
			{ wait "$pid"; } 2>/dev/null
			killed=$(left "$before" "$base")
			[ "$killed" = nothing ] || [ "$path" != courier ] || status=1
			# (so that the next run starts from a clean /dev/shm)
			comm -13 <(echo "$before") <(shm_list) | sed 's|^|/dev/shm/|' | xargs -r rm -f
		fi
		echo "| $path | $np | $hwm kB | $(( shm - base )) kB | $st ms | $after | $killed |"
	done
done
exit $status
