#!/bin/sh
# netns_loss: stream_verify (>= 100 MiB, 1 B .. 4 MiB, tagged and untagged, every byte checked)
# between two network namespaces joined by veth, with nftables dropping 5% of the packets each
# side receives (so each direction loses 5%; netns.sh says why not on output) and courier's
# injector duplicating, reordering and corrupting more (checksums on).
# Fails on any mismatch, error completion or timeout; also fails if the nft rules dropped
# nothing (the test would prove nothing) or, for courier, if the sender resent nothing.
# Skips (77) unless root with ip (iproute2) and nft (nftables) and namespaces allowed.
# Environment as run_pair.sh (COUR_BUILD, COUR_FT_PROVIDER, COUR_FT_TIMEOUT: default 100 s)
# and:
#   COUR_LOSS_PCT        percent dropped on each side (default 5)
#   COUR_LOSS_FAULT      courier's injector spec (default dup=2,reorder=2,corrupt=1;
#                        empty: injector off); each side gets a seed derived from
#   COUR_LOSS_SEED       (default: the pid; printed, so a failing run can be replayed)
#   COUR_LOSS_ARGS       more stream_verify options, e.g. "-b 200 -x tagged -s 3"
set -u

here=$(cd "$(dirname "$0")" && pwd)
build=${COUR_BUILD:-$PWD}
prov=${COUR_FT_PROVIDER:-courier}
tmo=${COUR_FT_TIMEOUT:-100}
pct=${COUR_LOSS_PCT:-5}
fault=${COUR_LOSS_FAULT-dup=2,reorder=2,corrupt=1}
port=47592	# the namespaces are ours alone: no other run can hold this port

prog=$build/fabtests/functional/stream_verify
[ -x "$prog" ] || prog=$build/stream_verify
[ -x "$prog" ] || { echo "test_netns_loss.sh: no stream_verify program in $build" >&2; exit 99; }
. "$here/../scripts/netns.sh"
if ! netns_available; then
	echo "test_netns_loss.sh: skipped: $NETNS_WHY"
	exit 77
fi

netns_courier_env "$build" "$prov"

out=$(mktemp -d "${TMPDIR:-/tmp}/netns_loss.XXXXXX") || exit 99
NETNS_ON_EXIT='rm -rf "$out"'
netns_setup || { echo "test_netns_loss.sh: cannot set up the namespaces"; exit 99; }
netns_loss "$pct" "$port" || { echo "test_netns_loss.sh: cannot install nft rules"; exit 99; }

seed=${COUR_LOSS_SEED:-$(($$ % 10000))}
fault_a= fault_b=
if [ -n "$fault" ]; then
	fault_a="FI_COURIER_FAULT=$fault,seed=$((seed * 2 + 1))"
	fault_b="FI_COURIER_FAULT=$fault,seed=$((seed * 2 + 2))"
fi
echo "test_netns_loss.sh: $prov between $NETNS_A ($NETNS_ADDR_A, receiver) and" \
	"$NETNS_B ($NETNS_ADDR_B, sender): nft drops $pct% of what each side receives;" \
	"injector: ${fault:-off} (COUR_LOSS_SEED=$seed); checksums on"

start=$(date +%s.%N)
# the program gives up by itself 10 s before timeout(1) kills it; both bound every wait
# shellcheck disable=SC2086
netns_a env FI_COURIER_IFACE_ADDR="$NETNS_ADDR_A" $fault_a \
	timeout -k 5 "$tmo" "$prog" -p "$prov" -B "$NETNS_ADDR_A" -P "$port" \
	-T $((tmo - 10)) -L ${COUR_LOSS_ARGS:-} >"$out/server" 2>&1 &
spid=$!
# shellcheck disable=SC2086
netns_b env FI_COURIER_IFACE_ADDR="$NETNS_ADDR_B" $fault_b \
	timeout -k 5 "$tmo" "$prog" -p "$prov" -P "$port" -T $((tmo - 10)) -L \
	${COUR_LOSS_ARGS:-} "$NETNS_ADDR_A" >"$out/client" 2>&1
crc=$?
wait $spid
src=$?
end=$(date +%s.%N)

echo "---- receiver ($NETNS_A) ----"; cat "$out/server"
echo "---- sender ($NETNS_B) ----"; cat "$out/client"
echo "---- nftables (a: receiver, b: sender) ----"
netns_counters | tee "$out/nft"
elapsed=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')

fail=0
if [ $src -ne 0 ] || [ $crc -ne 0 ]; then
	echo "test_netns_loss.sh: FAIL: receiver exit $src, sender exit $crc" \
		"$( { [ $src = 124 ] || [ $crc = 124 ]; } && echo "(killed by timeout after $tmo s)")"
	fail=1
fi
if [ "$pct" -gt 0 ] && awk '$9 == 0 { bad = 1 } END { exit !bad }' "$out/nft"; then
	echo "test_netns_loss.sh: FAIL: the nft rules dropped nothing on one side"
	fail=1
fi
if [ $fail = 1 ] && grep -q "fi_getinfo.*failed: -61" "$out/server" "$out/client"; then
	echo "test_netns_loss.sh: $prov is not available: skipped"
	exit 77
fi
moved=$(sed -n 's/.*receiver: .* (\([0-9.]* MB\)) received and verified.*/\1/p' "$out/server")
echo "test_netns_loss.sh: $([ $fail = 0 ] && echo PASS || echo FAIL): ${moved:-nothing}" \
	"verified in ${elapsed} s (whole run, setup included)"
exit $fail
