# shellcheck shell=sh
# bridge.sh: a shared link for congestion tests: network namespaces joined by a Linux bridge in
# a "switch" namespace, the receiver's switch port shaped by tbf (a slow port with a shallow
# buffer, where several senders meet). Sourced by incast-bench.sh and test_incast.sh (POSIX sh;
# works from sh and bash).
#
#   . bridge.sh
#   bridge_available || exit 77     # why not: in $BRIDGE_WHY (not root, no ip/tc/nft, ...)
#   bridge_setup 4 tcp ping || exit 99
#                                   # receiver rx, senders tx1..tx4, extra hosts tcp and ping;
#                                   # installs the EXIT/INT/TERM cleanup
#   bridge_exec tx2 cmd args...     # run in a host's namespace (rx, tx<i>, an extra, or a
#                                   # number: 0 is rx, i is tx<i>); "sw" is the switch
#   bridge_addr tx2                 # its address (bridge_ns: its namespace's name)
#   bridge_qdisc                    # the shaped port's counters, one line of numbers:
#                                   #   sent_bytes sent_pkts dropped overlimits backlog_bytes
#                                   #   backlog_pkts
#   bridge_sent [HOST...]           # "bytes pkts dropped": what those hosts put on the wire
#                                   # (default: every host but rx), in wire packets
#   bridge_rx_bytes HOST            # IP bytes the receiver took in from HOST (nft counter)
#   bridge_tcp_cc cubic             # that TCP congestion control in every host namespace
#   bridge_shape RATE BURST LIMIT   # reshape the port (new tbf: its counters start at 0)
#
# Settings (read by bridge_setup): BRIDGE_MTU (default 1500), BRIDGE_RATE (1gbit),
# BRIDGE_BURST (64kb), BRIDGE_LIMIT (256kb): the receiver's port is shaped with
#   tc qdisc add dev PORT root tbf rate RATE burst BURST limit LIMIT
# (a 1 GbE port with 256 KB of buffer, 2 ms at that rate). Only traffic towards the receiver
# meets it; the way back (acknowledgements) is not shaped.
#
# Names carry the shell's pid ($$), so parallel runs never collide: namespaces cour-<pid>-b-sw
# (the switch, bridge br0), cour-<pid>-b-rx, cour-<pid>-b-tx1 ... and cour-<pid>-b-<extra>.
# Each host has one interface, veth0, whose peer is the switch's port p-<host> (p-rx is the
# shaped one); nothing appears in the caller's namespace. Addresses are 198.18.1.<k+1>/24 in
# the order of the hosts (rx .1, tx1 .2, ..., then the extras): the benchmarking range
# 198.18.0.0/15, which exists only inside the namespaces. No IPv6 anywhere (its link-local
# chatter would reach the shaped port too).
#
# Counting wire packets: tbf's "Sent pkts" counts wire packets (a GSO skb counts as its
# segments) but its "dropped" counts skbs, so one drop may be a 64 KB GSO run of 40+ packets.
# So each host but the receiver gets a plain pfifo (limit 10000, never full in practice) as
# the root qdisc of its veth0, there only for its counters, which count segments the same
# way: bridge_sent summed over the sending hosts minus the shaped port's Sent pkts is what the
# port lost, in wire packets (ARP requests, broadcast to every port, are in both). Take both
# after the port's queue drained (backlog 0: ~2 ms after the last send at 1gbit, 256kb).
#
# TCP congestion control: a new namespace takes the host's default (bbr here), and may only
# switch to one listed in the host's net.ipv4.tcp_allowed_congestion_control (a global
# setting): bridge_tcp_cc adds it there when missing and the cleanup restores the old list.
#
# Cleanup: bridge_teardown kills what still runs in our namespaces (processes we started) and
# deletes them, which deletes the veth pairs and the bridge. bridge_setup traps EXIT, and turns
# INT, TERM and HUP into an exit so the EXIT trap runs; a caller that needs its own EXIT action
# puts it in BRIDGE_ON_EXIT (a command string run first). Namespaces of earlier runs killed
# with SIGKILL (owner pid gone) are removed by bridge_setup, with what still runs inside them.

BRIDGE_PFX=cour-$$-b
BRIDGE_SW=$BRIDGE_PFX-sw
BRIDGE_IF=veth0
BRIDGE_NET=198.18.1
BRIDGE_MTU=${BRIDGE_MTU:-1500}
BRIDGE_RATE=${BRIDGE_RATE:-1gbit}
BRIDGE_BURST=${BRIDGE_BURST:-64kb}
BRIDGE_LIMIT=${BRIDGE_LIMIT:-256kb}
BRIDGE_TABLE=cour_bridge
BRIDGE_ON_EXIT=${BRIDGE_ON_EXIT:-}
BRIDGE_HOSTS=
BRIDGE_SENDERS=0
BRIDGE_CC_SAVED=
BRIDGE_WHY=
BRIDGE_UP=0

# 0 if this host can build the switch, else 1 with the reason in BRIDGE_WHY.
bridge_available() {
	if [ "$(id -u)" != 0 ]; then
		BRIDGE_WHY="not root"
		return 1
	fi
	for _br_t in ip tc nft timeout; do
		if ! command -v "$_br_t" >/dev/null 2>&1; then
			BRIDGE_WHY="no $_br_t (Debian: iproute2, nftables, coreutils)"
			return 1
		fi
	done
	# a container may allow no namespaces, bridges or qdiscs: try each for real
	_br_p=$BRIDGE_PFX-probe
	if ! ip netns add "$_br_p" 2>/dev/null; then
		BRIDGE_WHY="ip netns add failed (no CAP_SYS_ADMIN?)"
		return 1
	fi
	BRIDGE_WHY=
	if ! ip -n "$_br_p" link add br0 type bridge 2>/dev/null; then
		BRIDGE_WHY="cannot add a bridge (no CONFIG_BRIDGE?)"
	elif ! ip -n "$_br_p" link add v0 type veth peer name v1 2>/dev/null; then
		BRIDGE_WHY="cannot add a veth pair (no CONFIG_VETH?)"
	elif ! ip netns exec "$_br_p" tc qdisc add dev v0 root tbf rate 1gbit burst 64kb \
		limit 256kb 2>/dev/null; then
		BRIDGE_WHY="tc cannot add a tbf qdisc (no CONFIG_NET_SCH_TBF?)"
	elif ! ip netns exec "$_br_p" tc qdisc add dev v1 root pfifo limit 10000 2>/dev/null; then
		BRIDGE_WHY="tc cannot add a pfifo qdisc"
	elif ! ip netns exec "$_br_p" nft add table inet "$BRIDGE_TABLE" 2>/dev/null; then
		BRIDGE_WHY="nft cannot add a table (no nf_tables in this kernel?)"
	fi
	ip netns del "$_br_p" 2>/dev/null
	[ -z "$BRIDGE_WHY" ]
}

# bridge_name HOST: the host's name (a number n is tx<n>, 0 is rx)
bridge_name() {
	case $1 in
	0) echo rx ;;
	*[!0-9]*) echo "$1" ;;
	*) echo "tx$1" ;;
	esac
}

bridge_ns() {
	case $1 in
	sw) echo "$BRIDGE_SW" ;;
	*) echo "$BRIDGE_PFX-$(bridge_name "$1")" ;;
	esac
}

bridge_exec() {
	_br_ns=$(bridge_ns "$1")
	shift
	ip netns exec "$_br_ns" "$@"
}

# bridge_addr HOST: 198.18.1.<position in BRIDGE_HOSTS, from 1>
bridge_addr() {
	_br_name=$(bridge_name "$1")
	_br_k=0
	for _br_h in $BRIDGE_HOSTS; do
		_br_k=$((_br_k + 1))
		if [ "$_br_h" = "$_br_name" ]; then
			echo "$BRIDGE_NET.$_br_k"
			return 0
		fi
	done
	echo "bridge.sh: no host $1" >&2
	return 1
}

# the switch's port towards HOST
bridge_port() {
	echo "p-$(bridge_name "$1")"
}

# Namespaces named cour-<pid>-b-* whose pid no longer runs: left by a run killed with SIGKILL.
bridge_reap_stale() {
	for _br_ns in $(ip netns list 2>/dev/null | awk '{ print $1 }'); do
		case $_br_ns in
		cour-*-b-*) ;;
		*) continue ;;
		esac
		_br_pid=${_br_ns#cour-}
		_br_pid=${_br_pid%%-*}
		case $_br_pid in
		''|*[!0-9]*) continue ;;
		esac
		[ "$_br_pid" = "$$" ] && continue
		kill -0 "$_br_pid" 2>/dev/null && continue
		# what still runs in there was started by that run and is bounded by its timeout;
		# end it now
		_br_pids=$(ip netns pids "$_br_ns" 2>/dev/null)
		[ -n "$_br_pids" ] && kill $_br_pids 2>/dev/null
		ip netns del "$_br_ns" 2>/dev/null
	done
}

bridge_all_ns() {
	for _br_h in $BRIDGE_HOSTS; do
		echo "$BRIDGE_PFX-$_br_h"
	done
	echo "$BRIDGE_SW"
}

bridge_teardown() {
	[ "$BRIDGE_UP" = 1 ] || return 0
	BRIDGE_UP=0
	_br_list=$(bridge_all_ns)
	for _br_ns in $_br_list; do
		_br_pids=$(ip netns pids "$_br_ns" 2>/dev/null)
		[ -n "$_br_pids" ] && kill $_br_pids 2>/dev/null
	done
	sleep 0.2 2>/dev/null || sleep 1
	for _br_ns in $_br_list; do
		_br_pids=$(ip netns pids "$_br_ns" 2>/dev/null)
		[ -n "$_br_pids" ] && kill -9 $_br_pids 2>/dev/null
		ip netns del "$_br_ns" 2>/dev/null
	done
	if [ -n "$BRIDGE_CC_SAVED" ]; then
		sysctl -q -w net.ipv4.tcp_allowed_congestion_control="$BRIDGE_CC_SAVED" \
			>/dev/null 2>&1 ||
			echo "bridge.sh: could not restore net.ipv4.tcp_allowed_congestion_control" \
				"to \"$BRIDGE_CC_SAVED\"" >&2
		BRIDGE_CC_SAVED=
	fi
}

bridge_on_exit() {
	_br_rc=$?
	if [ -n "$BRIDGE_ON_EXIT" ]; then
		eval "$BRIDGE_ON_EXIT"
	fi
	bridge_teardown
	exit $_br_rc
}

# _bridge_no_ipv6 NS: before any interface exists there, so the new ones inherit it
_bridge_no_ipv6() {
	ip netns exec "$1" sh -c 'for f in /proc/sys/net/ipv6/conf/all/disable_ipv6 \
		/proc/sys/net/ipv6/conf/default/disable_ipv6; do echo 1 > $f; done' 2>/dev/null
	return 0
}

# bridge_setup NSENDERS [EXTRA_HOST...]: the switch, the receiver rx, senders tx1..txN and
# the extra hosts (names of letters and digits, not starting with a digit nor "tx"), all up.
bridge_setup() {
	BRIDGE_SENDERS=${1:?bridge_setup NSENDERS [extra hosts]}
	shift
	case $BRIDGE_SENDERS in
	''|*[!0-9]*|0) echo "bridge.sh: bridge_setup: senders: $BRIDGE_SENDERS" >&2; return 1 ;;
	esac
	BRIDGE_HOSTS=rx
	_br_i=1
	while [ $_br_i -le "$BRIDGE_SENDERS" ]; do
		BRIDGE_HOSTS="$BRIDGE_HOSTS tx$_br_i"
		_br_i=$((_br_i + 1))
	done
	for _br_h in "$@"; do
		case $_br_h in
		''|[0-9]*|tx*|rx|sw|*[!A-Za-z0-9]*)
			echo "bridge.sh: bridge_setup: bad host name \"$_br_h\"" >&2
			return 1 ;;
		esac
		BRIDGE_HOSTS="$BRIDGE_HOSTS $_br_h"
	done
	set -- $BRIDGE_HOSTS
	if [ $# -gt 250 ]; then
		echo "bridge.sh: at most 250 hosts" >&2
		return 1
	fi
	bridge_reap_stale
	BRIDGE_UP=1
	trap bridge_on_exit EXIT
	trap 'exit 129' HUP
	trap 'exit 130' INT
	trap 'exit 143' TERM

	ip netns add "$BRIDGE_SW" || return 1
	_bridge_no_ipv6 "$BRIDGE_SW"
	ip -n "$BRIDGE_SW" link set lo up || return 1
	# no STP (the default): ports forward as soon as they are up
	ip -n "$BRIDGE_SW" link add br0 type bridge || return 1
	for _br_h in $BRIDGE_HOSTS; do
		_br_ns=$BRIDGE_PFX-$_br_h
		_br_p=p-$_br_h
		ip netns add "$_br_ns" || return 1
		_bridge_no_ipv6 "$_br_ns"
		ip link add name "$BRIDGE_IF" netns "$_br_ns" mtu "$BRIDGE_MTU" type veth \
			peer name "$_br_p" netns "$BRIDGE_SW" mtu "$BRIDGE_MTU" || return 1
		ip -n "$BRIDGE_SW" link set "$_br_p" master br0 || return 1
		ip -n "$BRIDGE_SW" link set "$_br_p" up || return 1
		ip -n "$_br_ns" addr add "$(bridge_addr "$_br_h")/24" dev "$BRIDGE_IF" || return 1
		ip -n "$_br_ns" link set lo up || return 1
		ip -n "$_br_ns" link set "$BRIDGE_IF" up || return 1
		if [ "$_br_h" != rx ]; then
			ip netns exec "$_br_ns" tc qdisc add dev "$BRIDGE_IF" root pfifo limit 10000 ||
				return 1
		fi
	done
	ip -n "$BRIDGE_SW" link set br0 mtu "$BRIDGE_MTU" 2>/dev/null
	ip -n "$BRIDGE_SW" link set br0 up || return 1
	bridge_shape "$BRIDGE_RATE" "$BRIDGE_BURST" "$BRIDGE_LIMIT" || return 1
	bridge_count_rx || return 1
	bridge_wait_up
}

# The kernel reports a new link's carrier (IFF_RUNNING) up to a second after "link set up";
# until then libfabric's tcp provider leaves the interface out of fi_getinfo.
bridge_wait_up() {
	_br_tries=0
	while [ $_br_tries -lt 50 ]; do
		_br_down=0
		for _br_h in $BRIDGE_HOSTS; do
			ip -n "$BRIDGE_PFX-$_br_h" -o link show "$BRIDGE_IF" | grep -q "state UP" ||
				_br_down=1
		done
		[ $_br_down = 0 ] && return 0
		sleep 0.1
		_br_tries=$((_br_tries + 1))
	done
	echo "bridge.sh: the hosts' $BRIDGE_IF did not come up in 5 s" >&2
	return 1
}

# bridge_shape [RATE [BURST [LIMIT]]]: a fresh tbf on the receiver's port (counters from 0)
bridge_shape() {
	BRIDGE_RATE=${1:-$BRIDGE_RATE}
	BRIDGE_BURST=${2:-$BRIDGE_BURST}
	BRIDGE_LIMIT=${3:-$BRIDGE_LIMIT}
	ip netns exec "$BRIDGE_SW" tc qdisc del dev p-rx root 2>/dev/null
	ip netns exec "$BRIDGE_SW" tc qdisc add dev p-rx root tbf rate "$BRIDGE_RATE" \
		burst "$BRIDGE_BURST" limit "$BRIDGE_LIMIT"
}

# _bridge_qstats NS DEV: "bytes packets drops overlimits backlog qlen" of DEV's root qdisc
_bridge_qstats() {
	ip netns exec "$1" tc -s -j qdisc show dev "$2" root 2>/dev/null |
	awk '{
		n = split("bytes packets drops overlimits backlog qlen", k, " ")
		for (i = 1; i <= n; i++) {
			v = 0
			if (match($0, "\"" k[i] "\":[0-9]+")) {
				s = substr($0, RSTART, RLENGTH); sub(/.*:/, "", s); v = s
			}
			printf "%s%s", v, i < n ? " " : "\n"
		}
	}'
}

# bridge_qdisc: the shaped port, "sent_bytes sent_pkts dropped overlimits backlog_bytes
# backlog_pkts" (absolute; take differences)
bridge_qdisc() {
	_bridge_qstats "$BRIDGE_SW" p-rx
}

# bridge_qdisc_text: the same as tc prints it
bridge_qdisc_text() {
	ip netns exec "$BRIDGE_SW" tc -s qdisc show dev p-rx
}

# bridge_sent [HOST...]: "bytes pkts dropped" summed over those hosts' counting qdiscs
# (default: every host but rx): wire packets and their bytes (absolute; take differences)
bridge_sent() {
	if [ $# -eq 0 ]; then
		set -- $BRIDGE_HOSTS
		shift
	fi
	for _br_h in "$@"; do
		_bridge_qstats "$(bridge_ns "$_br_h")" "$BRIDGE_IF"
	done | awk '{ b += $1; p += $2; d += $3 } END { printf "%.0f %.0f %.0f\n", b, p, d }'
}

# bridge_count_rx: nft counters in the receiver's namespace, one per host, of the IP bytes it
# receives from that host (input hook: after GRO, so a merged train counts its headers once)
bridge_count_rx() {
	_br_rules=
	for _br_h in $BRIDGE_HOSTS; do
		[ "$_br_h" = rx ] && continue
		_br_rules="$_br_rules
		ip saddr $(bridge_addr "$_br_h") counter name from_$_br_h"
	done
	_br_ctrs=
	for _br_h in $BRIDGE_HOSTS; do
		[ "$_br_h" = rx ] && continue
		_br_ctrs="$_br_ctrs
	counter from_$_br_h { }"
	done
	ip netns exec "$(bridge_ns rx)" nft -f - <<EOF
add table inet $BRIDGE_TABLE
delete table inet $BRIDGE_TABLE
table inet $BRIDGE_TABLE {
	$_br_ctrs
	chain in {
		type filter hook input priority 0; policy accept;
		iifname != "$BRIDGE_IF" accept
		$_br_rules
	}
}
EOF
}

# bridge_rx_bytes HOST...: one line, the receiver's byte counters from those hosts (absolute)
bridge_rx_bytes() {
	_br_want=
	for _br_h in "$@"; do
		_br_want="$_br_want from_$(bridge_name "$_br_h")"
	done
	ip netns exec "$(bridge_ns rx)" nft list counters table inet "$BRIDGE_TABLE" 2>/dev/null |
	awk -v want="$_br_want" '
		$1 == "counter" { name = $2 }
		$1 == "packets" { by[name] = $4 }
		END {
			n = split(want, w, " ")
			for (i = 1; i <= n; i++)
				printf "%.0f%s", by[w[i]], i < n ? " " : "\n"
		}'
}

# bridge_tcp_cc CC: every host's default TCP congestion control (sysctl in each namespace),
# after adding CC to the host's allowed list if it is not there (restored at teardown)
bridge_tcp_cc() {
	_br_cc=${1:?bridge_tcp_cc CC}
	_br_allowed=$(sysctl -n net.ipv4.tcp_allowed_congestion_control 2>/dev/null)
	case " $_br_allowed " in
	*" $_br_cc "*) ;;
	*)
		[ -z "$BRIDGE_CC_SAVED" ] && BRIDGE_CC_SAVED=$_br_allowed
		sysctl -q -w net.ipv4.tcp_allowed_congestion_control="$_br_allowed $_br_cc" \
			>/dev/null || return 1
		;;
	esac
	for _br_h in $BRIDGE_HOSTS; do
		ip netns exec "$BRIDGE_PFX-$_br_h" sysctl -q -w \
			net.ipv4.tcp_congestion_control="$_br_cc" >/dev/null || return 1
	done
}
