# netns.sh: two network namespaces joined by a veth pair, with packet loss made by nftables.
# Sourced by test_netns_loss.sh and loss-bench.sh (POSIX sh; works from sh and bash).
#
#   . netns.sh
#   netns_available || exit 77      # why not: in $NETNS_WHY (not root, no ip/nft, no netns)
#   netns_setup || exit 99          # creates both, installs the EXIT/INT/TERM cleanup
#   netns_loss 5 [oob_tcp_ports]    # drop 5% of the packets each side receives (0: none)
#   netns_a cmd args...             # run in the first namespace  (address $NETNS_ADDR_A)
#   netns_b cmd args...             # run in the second namespace (address $NETNS_ADDR_B)
#   netns_counters                  # "a: input: N packets ..., dropped M" per side
#
# Names carry the shell's pid ($$), so parallel runs never collide: cour-<pid>-a and
# cour-<pid>-b. The veth ends are created inside the namespaces (both named veth0), so
# nothing appears in the caller's namespace. Addresses are from 198.18.0.0/15, the benchmarking
# range, and exist only inside the namespaces.
#
# Loss: an nftables table in each namespace drops a random PCT% of the packets that namespace
# receives on veth0 (numgen random: independent per packet, like netem's loss, which this
# kernel lacks), so each direction loses PCT%. Drops are made on the receiving side on purpose:
# a packet dropped by the sender's own output hook fails its send call with EPERM, so the
# sender knows at once; TCP then simply sends it again (no loss recovery, no cwnd cut), and
# courier's sendmmsg loop resends it by accident (sendmmsg reports the datagrams before the
# failed one, the next call starts with the failed one). That is not packet loss, and it made
# both look far better than a real lossy link would. NETNS_LOSS_HOOK=output brings back
# output drops for comparison. Packets to or from the optional TCP ports are never dropped:
# that is the harness's out-of-band channel, whose stalls (a lost SYN costs TCP a second)
# would only add noise. Those ports must be below NETNS_EPHEMERAL_MIN (49152): the namespaces'
# ephemeral ports start there, so no data connection can share the exemption.
# Drops act on whatever the stack hands over: for TCP a GRO/GSO packet of up to 64 KiB (about
# 16 wire packets on veth), for courier a UDP GSO run of up to 64 KB (FI_COURIER_UDP_GSO=0: one
# datagram), for udp;ofi_rxd one datagram. NETNS_ONE_SEG=1 caps
# GSO at one segment (gso_max_segs 1) so TCP loses single wire packets too; on a 2-cpu machine
# that also cuts TCP's loss-free bandwidth several times.
#
# Cleanup: netns_teardown kills what still runs in the two namespaces (processes we started)
# and deletes them, which deletes the veth pair. netns_setup traps EXIT, and turns INT, TERM
# and HUP into an exit so the EXIT trap runs; a caller that needs its own EXIT action puts it
# in NETNS_ON_EXIT (a command string run first). Namespaces of earlier runs that were killed
# with SIGKILL (owner pid gone) are removed by netns_setup, with what still runs inside them.

NETNS_A=cour-$$-a
NETNS_B=cour-$$-b
NETNS_IF=veth0
NETNS_ADDR_A=198.18.0.1
NETNS_ADDR_B=198.18.0.2
NETNS_TABLE=cour_loss
NETNS_LOSS_HOOK=${NETNS_LOSS_HOOK:-input}
NETNS_EPHEMERAL_MIN=49152
NETNS_ON_EXIT=${NETNS_ON_EXIT:-}
NETNS_WHY=
NETNS_UP=0

# 0 if this host can run the namespaces, else 1 with the reason in NETNS_WHY.
netns_available() {
	if [ "$(id -u)" != 0 ]; then
		NETNS_WHY="not root"
		return 1
	fi
	for _nn_t in ip nft timeout; do
		if ! command -v "$_nn_t" >/dev/null 2>&1; then
			NETNS_WHY="no $_nn_t (Debian: iproute2, nftables, coreutils)"
			return 1
		fi
	done
	# a container may allow neither namespaces nor nftables: try both for real
	if ! ip netns add "cour-$$-probe" 2>/dev/null; then
		NETNS_WHY="ip netns add failed (no CAP_SYS_ADMIN?)"
		return 1
	fi
	if ! ip netns exec "cour-$$-probe" nft add table inet "$NETNS_TABLE" 2>/dev/null; then
		ip netns del "cour-$$-probe" 2>/dev/null
		NETNS_WHY="nft cannot add a table (no nf_tables in this kernel?)"
		return 1
	fi
	ip netns del "cour-$$-probe" 2>/dev/null
	return 0
}

netns_a() {
	ip netns exec "$NETNS_A" "$@"
}

netns_b() {
	ip netns exec "$NETNS_B" "$@"
}

# Namespaces named cour-<pid>-* whose pid no longer runs: left by a run killed with SIGKILL.
netns_reap_stale() {
	for _nn_ns in $(ip netns list 2>/dev/null | awk '{ print $1 }'); do
		case $_nn_ns in
		cour-*-a|cour-*-b|cour-*-probe) ;;
		*) continue ;;
		esac
		_nn_pid=${_nn_ns#cour-}
		_nn_pid=${_nn_pid%-*}
		case $_nn_pid in
		''|*[!0-9]*) continue ;;
		esac
		[ "$_nn_pid" = "$$" ] && continue
		kill -0 "$_nn_pid" 2>/dev/null && continue
		# what still runs in there was started by that run and is bounded by its timeout;
		# end it now
		_nn_pids=$(ip netns pids "$_nn_ns" 2>/dev/null)
		[ -n "$_nn_pids" ] && kill $_nn_pids 2>/dev/null
		ip netns del "$_nn_ns" 2>/dev/null
	done
}

netns_teardown() {
	[ "$NETNS_UP" = 1 ] || return 0
	NETNS_UP=0
	for _nn_ns in "$NETNS_A" "$NETNS_B"; do
		_nn_pids=$(ip netns pids "$_nn_ns" 2>/dev/null)
		[ -n "$_nn_pids" ] && kill $_nn_pids 2>/dev/null
	done
	sleep 0.2 2>/dev/null || sleep 1
	for _nn_ns in "$NETNS_A" "$NETNS_B"; do
		_nn_pids=$(ip netns pids "$_nn_ns" 2>/dev/null)
		[ -n "$_nn_pids" ] && kill -9 $_nn_pids 2>/dev/null
		ip netns del "$_nn_ns" 2>/dev/null
	done
}

netns_on_exit() {
	_nn_rc=$?
	if [ -n "$NETNS_ON_EXIT" ]; then
		eval "$NETNS_ON_EXIT"
	fi
	netns_teardown
	exit $_nn_rc
}

netns_setup() {
	netns_reap_stale
	NETNS_UP=1
	trap netns_on_exit EXIT
	trap 'exit 129' HUP
	trap 'exit 130' INT
	trap 'exit 143' TERM
	ip netns add "$NETNS_A" || return 1
	ip netns add "$NETNS_B" || return 1
	ip link add name "$NETNS_IF" netns "$NETNS_A" type veth \
		peer name "$NETNS_IF" netns "$NETNS_B" || return 1
	netns_a ip addr add "$NETNS_ADDR_A/24" dev "$NETNS_IF" || return 1
	netns_b ip addr add "$NETNS_ADDR_B/24" dev "$NETNS_IF" || return 1
	for _nn_ns in "$NETNS_A" "$NETNS_B"; do
		# no IPv6 on veth0: providers would list its link-local address as one more
		# interface, and its duplicate address detection would only add traffic
		ip netns exec "$_nn_ns" sh -c \
			"echo 1 > /proc/sys/net/ipv6/conf/$NETNS_IF/disable_ipv6" 2>/dev/null
		# ephemeral ports (tcp;ofi_rxm's data connections) stay clear of the oob ports
		# exempted from the drops, which must lie below NETNS_EPHEMERAL_MIN
		ip netns exec "$_nn_ns" sh -c "echo $NETNS_EPHEMERAL_MIN 60999 > \
			/proc/sys/net/ipv4/ip_local_port_range" || return 1
		ip -n "$_nn_ns" link set lo up || return 1
		ip -n "$_nn_ns" link set "$NETNS_IF" up || return 1
		if [ "${NETNS_ONE_SEG:-0}" = 1 ]; then
			ip -n "$_nn_ns" link set "$NETNS_IF" gso_max_segs 1 || return 1
		fi
	done
	netns_wait_up || return 1
	netns_loss 0
}

# The kernel reports a new link's carrier (IFF_RUNNING) up to a second after "link set up";
# until then libfabric's tcp and udp providers leave the interface out of fi_getinfo.
netns_wait_up() {
	_nn_tries=0
	while [ $_nn_tries -lt 50 ]; do
		if ip -n "$NETNS_A" -o link show "$NETNS_IF" | grep -q "state UP" &&
		   ip -n "$NETNS_B" -o link show "$NETNS_IF" | grep -q "state UP"; then
			return 0
		fi
		sleep 0.1
		_nn_tries=$((_nn_tries + 1))
	done
	echo "netns.sh: $NETNS_IF did not come up in 5 s" >&2
	return 1
}

# netns_loss PCT [TCP_PORTS]: replace both sides' rules (atomically per side). TCP_PORTS is a
# port or a range (47600-48599) exempt from the drops.
netns_loss() {
	_nn_pct=${1:?netns_loss PCT [tcp_ports]}
	_nn_exempt=
	if [ -n "${2:-}" ]; then
		_nn_exempt="tcp dport $2 accept
		tcp sport $2 accept"
	fi
	_nn_drop=
	if [ "$_nn_pct" -gt 0 ]; then
		_nn_drop="numgen random mod 100 < $_nn_pct counter name dropped drop"
	fi
	case $NETNS_LOSS_HOOK in
	input) _nn_dir=iifname ;;
	output) _nn_dir=oifname ;;
	*) echo "netns.sh: NETNS_LOSS_HOOK=$NETNS_LOSS_HOOK: input or output" >&2; return 1 ;;
	esac
	for _nn_ns in "$NETNS_A" "$NETNS_B"; do
		ip netns exec "$_nn_ns" nft -f - <<EOF || return 1
add table inet $NETNS_TABLE
delete table inet $NETNS_TABLE
table inet $NETNS_TABLE {
	counter seen { }
	counter dropped { }
	chain loss {
		type filter hook $NETNS_LOSS_HOOK priority 0; policy accept;
		$_nn_dir != "$NETNS_IF" accept
		$_nn_exempt
		counter name seen
		$_nn_drop
	}
}
EOF
	done
}

# One line per side: packets that met the drop rule, and how many it dropped:
#   a: input: 1234 packets (1494 bytes avg), dropped 62 (5.02%)
netns_counters() {
	for _nn_side in a b; do
		if [ $_nn_side = a ]; then _nn_ns=$NETNS_A; else _nn_ns=$NETNS_B; fi
		ip netns exec "$_nn_ns" nft list counters table inet "$NETNS_TABLE" 2>/dev/null |
		awk -v side="$_nn_side" -v hook="$NETNS_LOSS_HOOK" '
			$1 == "counter" { name = $2 }
			$1 == "packets" { pk[name] = $2; by[name] = $4 }
			END {
				s = pk["seen"] + 0; d = pk["dropped"] + 0
				printf "%s: %s: %d packets (%.0f bytes avg), dropped %d (%.2f%%)\n",
					side, hook, s, s ? by["seen"] / s : 0, d, s ? 100 * d / s : 0
			}'
	done
}

# netns_courier_env BUILD PROV: what the loss tests run with: the build's courier, libfabric's
# layered providers kept away from a plain provider name, payload checksums (the injector
# corrupts payloads) and statistics at close.
netns_courier_env() {
	if [ -d "$1/.libs" ] && [ -z "${FI_PROVIDER_PATH:-}" ]; then
		FI_PROVIDER_PATH=$1/.libs
		export FI_PROVIDER_PATH
	fi
	case $2 in
	*\;*) ;;
	*) FI_PROVIDER=${FI_PROVIDER:-^ofi_rxd,ofi_rxm}; export FI_PROVIDER ;;
	esac
	FI_COURIER_CHECKSUM=1
	FI_COURIER_STATS=1
	export FI_COURIER_CHECKSUM FI_COURIER_STATS
}
