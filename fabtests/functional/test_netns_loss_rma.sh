#!/bin/sh
# The loss test of test_netns_loss.sh with one-sided traffic: between two network namespaces
# whose nftables rules drop COUR_LOSS_PCT% (default 5) of what each side receives, with
# courier's injector adding duplicates, reordering and corruption (checksums on), run
#   rma -x sizes   every RMA size 1 B .. 64 MiB, write, read, writedata, both key modes,
#                  every byte, CQ data and counter checked (rma.c)
#   atomic         every atomic op x datatype, base, fetch and compare forms, verified
# and fail on any mismatch, error, timeout, or nft rules that dropped nothing.
# Needs root, ip and nft; skips (77) without them. Environment as test_netns_loss.sh.
set -u

here=$(cd "$(dirname "$0")" && pwd)
build=${COUR_BUILD:-$PWD}
prov=${COUR_FT_PROVIDER:-courier}
tmo=${COUR_FT_TIMEOUT:-150}
pct=${COUR_LOSS_PCT:-5}
fault=${COUR_LOSS_FAULT-dup=2,reorder=2,corrupt=1}
port=47592	# the namespaces are ours alone

. "$here/../scripts/netns.sh"
if ! netns_available; then
	echo "test_netns_loss_rma.sh: skipped: $NETNS_WHY"
	exit 77
fi
netns_courier_env "$build" "$prov"

out=$(mktemp -d "${TMPDIR:-/tmp}/netns_loss_rma.XXXXXX") || exit 99
NETNS_ON_EXIT='rm -rf "$out"'
netns_setup || { echo "test_netns_loss_rma.sh: cannot set up the namespaces"; exit 99; }
netns_loss "$pct" "$port" || { echo "test_netns_loss_rma.sh: cannot install nft rules"; exit 99; }
seed=${COUR_LOSS_SEED:-$(($$ % 10000))}
echo "test_netns_loss_rma.sh: $prov between $NETNS_A and $NETNS_B, nft drops $pct% of what" \
	"each side receives; injector: ${fault:-off} (COUR_LOSS_SEED=$seed); checksums on"

fail=0
# run NAME PROGRAM ARGS...: target in A, initiator in B
run() {
	name=$1 prog=$build/fabtests/functional/$2
	shift 2
	[ -x "$prog" ] || { echo "test_netns_loss_rma.sh: no $prog" >&2; exit 99; }
	fa= fb=
	if [ -n "$fault" ]; then
		fa="FI_COURIER_FAULT=$fault,seed=$((seed * 2 + 1))"
		fb="FI_COURIER_FAULT=$fault,seed=$((seed * 2 + 2))"
	fi
	t0=$(date +%s)
	netns_a env FI_COURIER_IFACE_ADDR="$NETNS_ADDR_A" $fa timeout -k 5 "$tmo" "$prog" \
		-p "$prov" -B "$NETNS_ADDR_A" -P "$port" -T $((tmo - 10)) "$@" \
		>"$out/$name.target" 2>&1 &
	spid=$!
	netns_b env FI_COURIER_IFACE_ADDR="$NETNS_ADDR_B" $fb timeout -k 5 "$tmo" "$prog" \
		-p "$prov" -P "$port" -T $((tmo - 10)) "$@" "$NETNS_ADDR_A" \
		>"$out/$name.initiator" 2>&1
	crc=$?
	wait $spid
	src=$?
	echo "---- $name: target exit $src, initiator exit $crc, $(( $(date +%s) - t0 )) s"
	if [ $src -ne 0 ] || [ $crc -ne 0 ]; then
		cat "$out/$name.target" "$out/$name.initiator"
		fail=1
	else
		grep -h "courier stats" "$out/$name.target" "$out/$name.initiator" | head -2
	fi
}
run rma_basic rma -x sizes -k basic
run rma_scalable rma -x sizes -k scalable
run atomic atomic -k basic
echo "---- nftables (a: target, b: initiator) ----"
netns_counters | tee "$out/nft"
if [ "$pct" -gt 0 ] && awk '$9 == 0 { bad = 1 } END { exit !bad }' "$out/nft"; then
	echo "test_netns_loss_rma.sh: FAIL: the nft rules dropped nothing on one side"
	fail=1
fi
[ $fail = 0 ] && echo "test_netns_loss_rma.sh: ok"
exit $fail
