#!/bin/sh
# shm_mixed: a job whose peers are partly on this host and partly "remote". Three processes of
# alltoall_mixed with 11 endpoints each (33 in all): ranks 0 and 1 in one network namespace,
# rank 2 in a second one joined by veth (netns.sh). Within a namespace courier must use shared
# memory, across it UDP, inside the same endpoints and AV. Two rounds in which every endpoint
# sends one message (1 B .. 128 KiB, content naming the pair) to each of the 32 others; every
# message must arrive once, intact, at the right endpoint; then each endpoint's statistics
# must show shm_peers equal to the other endpoints of its namespace (21 for ranks 0 and 1, 10
# for rank 2), and, for the second round, a ring packet per message from its namespace,
# single copy for its rendezvous messages and a network packet per message from the other
# namespace (alltoall_mixed.c says exactly what is checked). FI_COURIER_STATS=1 prints each
# endpoint's counters at close as well.
# With FI_COURIER_SHM=0 the same run must pass with no shared memory used at all.
# Skips (77) unless root with ip (iproute2) and nft (nftables) and namespaces allowed.
# Environment as run_pair.sh (COUR_BUILD, COUR_FT_PROVIDER, COUR_FT_TIMEOUT: default 60 s)
# and COUR_MIXED_EPS, endpoints per process (default 11).
set -u

here=$(cd "$(dirname "$0")" && pwd)
build=${COUR_BUILD:-$PWD}
prov=${COUR_FT_PROVIDER:-courier}
tmo=${COUR_FT_TIMEOUT:-60}
eps=${COUR_MIXED_EPS:-11}
me=test_shm_mixed.sh

prog=$build/fabtests/functional/alltoall_mixed
[ -x "$prog" ] || { echo "$me: no program $prog" >&2; exit 99; }
. "$here/../scripts/netns.sh"
if ! netns_available; then
	echo "$me: skipped: $NETNS_WHY"
	exit 77
fi
netns_courier_env "$build" "$prov"

expect=on
[ "${FI_COURIER_SHM:-1}" = 0 ] && expect=off
[ "$prov" = courier ] || expect=any

out=$(mktemp -d "${TMPDIR:-/tmp}/shm_mixed.XXXXXX") || exit 99
NETNS_ON_EXIT='rm -rf "$out"'
netns_setup || { echo "$me: cannot set up the namespaces"; exit 99; }
mkdir "$out/meet" || exit 99

echo "$me: $prov, 3 processes x $eps endpoints: ranks 0, 1 in $NETNS_A ($NETNS_ADDR_A)," \
	"rank 2 in $NETNS_B ($NETNS_ADDR_B); shared memory expected: $expect"
start=$(date +%s)
# the program gives up by itself 10 s before timeout(1) kills it; both bound every wait
# rank NS ADDR RANK
rank() {
	"netns_$1" timeout -k 5 "$tmo" "$prog" -p "$prov" -a "$2" -r "$3" -N 3 -E "$eps" \
		-d "$out/meet" -x "$expect" -T $((tmo - 10)) >"$out/rank$3" 2>&1
}
rank a "$NETNS_ADDR_A" 0 &
p0=$!
rank a "$NETNS_ADDR_A" 1 &
p1=$!
rank b "$NETNS_ADDR_B" 2
rc2=$?
wait $p0
rc0=$?
wait $p1
rc1=$?

fail=0
for r_rc in "0 $rc0" "1 $rc1" "2 $rc2"; do
	# shellcheck disable=SC2086
	set -- $r_rc
	echo "---- rank $1: exit $2 ----"
	cat "$out/rank$1"
	[ "$2" = 0 ] || fail=1
done
if [ $fail = 1 ] && grep -q "fi_getinfo.*failed: -61" "$out/rank0" "$out/rank1" "$out/rank2"
then
	echo "$me: $prov is not available: skipped"
	exit 77
fi
echo "$me: $([ $fail = 0 ] && echo PASS || echo FAIL): exits $rc0 $rc1 $rc2," \
	"$(( $(date +%s) - start )) s"
exit $fail
