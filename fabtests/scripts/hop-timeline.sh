#!/usr/bin/env bash
# hop-timeline.sh: where a ping-pong's time goes, call by call. cour_pingpong runs between two
# network namespaces over veth (netns.sh) with every socket call of both processes logged by
# cour_syslog (fabtests/bench/cour_syslog.c, built here with cc); the two logs, on one clock,
# are cut into hops (a message's way from its first data send to the first data send of its
# answer) and each hop into:
#   sends     the sender's calls that carry the message (GSO runs), and their count
#   gaps      the sender's time between those calls (building the next packets)
#   tail      from the sender's last call to the answer's first, which is the receiver's:
#     reads     its reads of data (peeks included) in the tail
#     acks      its sends of 256 bytes or less (ACKs) in the tail
#     rest      the tail's remainder: handling the packets, the completion, the application
#               posting its answer and the first packets of the answer being built
# Medians over the hops after the first tenth (warm-up), in microseconds.
#
# usage: hop-timeline.sh [-m mtu] [-S size] [-n iterations] [-a "pingpong args"] [-k dir] BUILDDIR
#   -m MTU    veth MTU (default 1500)
#   -S SIZE   message size, as cour_pingpong's -S (default 32k)
#   -n N      round trips (default 2000)
#   -a ARGS   more cour_pingpong arguments (say -M manual, or -t)
#   -k DIR    keep the logs there
# BUILDDIR holds .libs/libcourier-fi.so and fabtests/bench/cour_pingpong. Needs root (netns).
set -uo pipefail
mtu=1500 size=32k iters=2000 extra= keep=
while getopts "m:S:n:a:k:" o; do
	case $o in
	m) mtu=$OPTARG ;; S) size=$OPTARG ;; n) iters=$OPTARG ;; a) extra=$OPTARG ;;
	k) keep=$OPTARG ;;
	*) sed -n '2,22p' "$0"; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
build=$(cd "${1:?usage: hop-timeline.sh [options] BUILDDIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/netns.sh"
netns_available || { echo "hop-timeline.sh: $NETNS_WHY" >&2; exit 77; }
tmp=$(mktemp -d)
NETNS_ON_EXIT="rm -rf $tmp"
netns_setup || exit 1
cc -O2 -shared -fPIC -o "$tmp/cour_syslog.so" "$here/../bench/cour_syslog.c" -ldl || exit 1
for ns in "$NETNS_A" "$NETNS_B"; do ip netns exec "$ns" ip link set "$NETNS_IF" mtu "$mtu"; done
pp=$build/fabtests/bench/cour_pingpong
run_env=(env FI_PROVIDER=courier FI_PROVIDER_PATH="$build/.libs" COUR_SYSLOG_DIR="$tmp"
	 LD_PRELOAD="$tmp/cour_syslog.so")
# shellcheck disable=SC2086
netns_a "${run_env[@]}" FI_COURIER_IFACE_ADDR=$NETNS_ADDR_A timeout 120 "$pp" -p courier \
	-B "$NETNS_ADDR_A" -S "$size" -n "$iters" $extra >"$tmp/server.out" 2>&1 &
sleep 0.5
# shellcheck disable=SC2086
netns_b "${run_env[@]}" FI_COURIER_IFACE_ADDR=$NETNS_ADDR_B timeout 120 "$pp" -p courier \
	-S "$size" -n "$iters" $extra "$NETNS_ADDR_A" >"$tmp/client.out" 2>&1
wait
grep '^RESULT' "$tmp/client.out" || { cat "$tmp/client.out" "$tmp/server.out"; exit 1; }
logs=("$tmp"/syslog.*)
[ ${#logs[@]} = 2 ] || { echo "hop-timeline.sh: expected two logs, got ${#logs[@]}" >&2; exit 1; }
[ -n "$keep" ] && mkdir -p "$keep" && cp "$tmp"/syslog.* "$tmp"/*.out "$keep/"
for f in "${logs[@]}"; do grep -v '^#' "$f" | sed "s|\$| ${f##*.}|"; done | sort -n |
awk -v size="$size" -v mtu="$mtu" '
# fields: t0 t1 kind bytes flags vlen pid
function data_send() { return ($3 == 1 || $3 == 2) && $4 > 256 }
function med(a, n,   i, j, t) {
	for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
	return n ? a[int((n + 1) / 2)] : 0
}
{
	if (data_send()) {
		if ($7 != cur) {                   # a new hop: the other side answers
			if (cur != "") close_hop($1)
			cur = $7; h_start = $1; sends = 0; nsend = 0; first = $1
		}
		sends += $2 - $1; nsend++; last_end = $2
		reads = 0; acks = 0; nack = 0
		next
	}
	if (cur != "" && $7 != cur && $2 > last_end) {    # the receiver, after the last send
		d = $2 - ($1 > last_end ? $1 : last_end)  # (a read may start before it returns)
		if ($3 == 3 || $3 == 4) reads += d
		else if ($4 <= 256) { acks += d; nack++ }
	}
}
function close_hop(now) {
	n++
	H[n] = now - h_start; S[n] = sends; N[n] = nsend; G[n] = last_end - first - sends
	T[n] = now - last_end; R[n] = reads; A[n] = acks; K[n] = nack
	X[n] = T[n] - reads - acks
}
END {
	skip = int(n / 10); m = 0
	for (i = skip + 1; i <= n; i++) {
		m++; h[m] = H[i]; s[m] = S[i]; c[m] = N[i]; g[m] = G[i]; t[m] = T[i]
		r[m] = R[i]; a[m] = A[i]; k[m] = K[i]; x[m] = X[i]
	}
	printf "hops %d (first %d skipped), size %s, MTU %s; medians, us\n", m, skip, size, mtu
	printf "  hop %.1f = sends %.1f (%d calls) + gaps %.1f + tail %.1f\n", med(h, m), med(s, m), med(c, m), med(g, m), med(t, m)
	printf "  tail: reads %.1f, acks %.1f (%d), rest %.1f\n", med(r, m), med(a, m), med(k, m), med(x, m)
}'
