# Sourced by run-mpi.sh, run-mpi-osc.sh and run-mpi-netns.sh.

# Open MPI's own tools, by name: mpicc and mpirun follow Debian's alternatives, and MPICH
# installed beside Open MPI (as on many clusters) takes them over.
MPICC=$(command -v mpicc.openmpi || true)
MPIRUN=$(command -v mpirun.openmpi || true)
if [ -z "$MPICC" ] || [ -z "$MPIRUN" ]; then
	echo "$(basename "$0"): Open MPI is missing (no mpicc.openmpi or mpirun.openmpi: install" \
		"openmpi-bin and libopenmpi-dev)" >&2
	exit 1
fi

# What differs between Open MPI 4.1 (Debian 12) and 5.0 (Debian 13), learned by running both:
# 5.0 renamed the shared-memory btl vader to sm (OMPI_SM), and with pml cm it initializes no
# btl, so osc/rdma has none: one-sided runs use ob1 there.
OMPI_MAJOR=$("$MPIRUN" --version 2>/dev/null | grep -oE "[0-9]+\.[0-9]+\.[0-9]+" | head -1 | cut -d. -f1)
OMPI_MAJOR=${OMPI_MAJOR:-4}
if [ "$OMPI_MAJOR" -ge 5 ]; then OMPI_SM=sm; else OMPI_SM=vader; fi

# rank_wrapper DIR: writes DIR/rankout, which mpirun runs in place of the program. Each rank's
# stdout and stderr go straight into DIR/ranks/rank.N/{stdout,stderr}. Not --output-filename:
# mpirun forwards rank output through its own I/O daemon, and once in a CI run a rank's whole
# stderr (its mtl selection line and its stats) never reached the file.
rank_wrapper() {
	cat >"$1/rankout" <<EOF
#!/bin/sh
d="$1/ranks/rank.\$OMPI_COMM_WORLD_RANK"
mkdir -p "\$d"
exec "\$@" >"\$d/stdout" 2>"\$d/stderr"
EOF
	chmod +x "$1/rankout"
}

# rank_logs DIR: every rank's output, for a failure report (libfabric's info and debug lines
# left out, its warnings kept), then a line per rank with what the checks look at (last, so a
# report cut short keeps it)
rank_logs() {
	for r in "$1"/ranks/rank.*; do
		echo "--- $(basename "$r")"
		cat "$r"/std* | grep -vE "^libfabric:.*<(info|debug|trace)>" || true
	done
	echo "--- summary"
	for r in "$1"/ranks/rank.*; do
		printf '%s: %s; %s; %s courier warnings\n' "$(basename "$r")" \
			"$(cat "$r"/std* | grep -oE "(mtl:ofi:prov(ider)?|Opened fabric): .*" | head -1)" \
			"$(cat "$r"/std* | grep -oE "shm_peers [0-9]+ shm_tx_pkts [0-9]+ shm_rx_pkts [0-9]+" |
			   tr '\n' ' ')" \
			"$(cat "$r"/std* | grep -c "^libfabric:.*:courier:.*<warn>" || true)"
	done
}

# shm_ranks DIR: how many ranks (DIR/rank.*, from rank_wrapper) moved packets through
# courier's shared memory, per their FI_COURIER_STATS lines. A rank may send nothing after the
# HELLO exchange: ring traffic in either direction counts. grep reads the files itself: callers
# run with pipefail, and "cat | grep -q" fails whenever grep quits before cat has written all.
shm_ranks() {
	n=0
	for r in "$1"/rank.*; do
		if grep -qshE "shm_peers [1-9][0-9]* shm_tx_pkts ([1-9]|0 shm_rx_pkts [1-9])" "$r"/std*
		then
			n=$((n + 1))
		fi
	done
	echo "$n"
}

# shm_ranks_wanted NP: all of them, or none when FI_COURIER_SHM=0
shm_ranks_wanted() {
	if [ "${FI_COURIER_SHM:-1}" = 0 ]; then echo 0; else echo "$1"; fi
}

# rsh_agent DIR [NETNS]: writes DIR/rsh, the "remote shell" mpirun starts its orteds with
# (--mca plm_rsh_agent DIR/rsh) to emulate nodes on this host. It runs the orted here, or, for
# nodes whose name starts with b, in network namespace NETNS; each node gets a session
# directory of its own (orteds sharing one race to create it) and a host name of its own (a
# UTS namespace named after the node): Open MPI 5 judges locality by host name, and nodes that
# share one had coll/han hang and osc/rdma stop in its window setup, with any transport.
rsh_agent() {
	cat >"$1/rsh" <<EOF
#!/bin/sh
host=\$1; shift
export TMPDIR="$1/host-\$host"
mkdir -p "\$TMPDIR"
cmd="\$*"
case \$host in
b*) [ -n "${2:-}" ] && exec ip netns exec "${2:-}" unshare -u sh -c "hostname \$host; \$cmd" ;;
esac
exec unshare -u sh -c "hostname \$host; \$cmd"
EOF
	chmod +x "$1/rsh"
}
