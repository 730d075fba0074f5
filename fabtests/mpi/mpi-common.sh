# Sourced by run-mpi.sh and run-mpi-osc.sh.

# shm_ranks DIR: how many ranks (DIR/rank.*, from --output-filename) moved packets through
# courier's shared memory, per their FI_COURIER_STATS lines. A rank may send nothing after the
# HELLO exchange: ring traffic in either direction counts.
shm_ranks() {
	n=0
	for r in "$1"/rank.*; do
		if cat "$r"/std* | grep -qE "shm_peers [1-9][0-9]* shm_tx_pkts ([1-9]|0 shm_rx_pkts [1-9])"
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
