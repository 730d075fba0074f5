#!/bin/sh
# peer_death: kill -9 the receiver in the middle of a stream, check the sender's errors, restart
# the receiver on the same UDP port and check that the same sender endpoint reaches it.
# test_peer_death.sh            restart after the sender failed its sends (FI_EHOSTUNREACH)
# test_peer_death.sh restart-now restart at once, with a peer timeout (3 s) long enough that
#                               the sender's retransmissions meet the new incarnation, which
#                               answers RESET: the sends fail with FI_ECONNRESET
# test_peer_death.sh delivery   the receiver posts no receive and the sends ask for
#                               FI_DELIVERY_COMPLETE: they are acknowledged but never
#                               delivered, so only the peer timeout can end them
#                               (FI_EHOSTUNREACH)
# test_peer_death.sh refused    over UDP (shared memory off) with the default peer timeout
#                               (minutes): the dead receiver's host answers with ICMP port
#                               unreachable, evidence enough to fail the sends at once
#                               (FI_EHOSTUNREACH), long before the timeout would
# Both sides are on this host, so by default they talk through shared memory: the killed
# receiver is seen gone through its process (FI_EHOSTUNREACH) and must leave nothing in
# /dev/shm. restart-now tests the UDP session restart, so it turns shared memory off.
# COUR_PEER_DEATH_KEYED=1: every process with the same fresh key (FI_COURIER_AUTH_KEY_FILE),
# so the restarted receiver must prove its new session (a challenge, docs/protocol.md) and its
# RESETs are authenticated; the failures and the restart must be the same.
# Environment as run_pair.sh (COUR_BUILD, COUR_FT_PROVIDER); courier only (it needs
# FI_COURIER_PEER_TIMEOUT), other providers skip.
set -u
mode=${1:-}
build=${COUR_BUILD:-$PWD}
prov=${COUR_FT_PROVIDER:-courier}
[ "$prov" = courier ] || { echo "peer_death: courier only, skipped for $prov"; exit 77; }
prog=$build/fabtests/functional/peer_death
[ -x "$prog" ] || prog=$build/peer_death
[ -x "$prog" ] || { echo "test_peer_death.sh: no peer_death program" >&2; exit 99; }
if [ -d "$build/.libs" ] && [ -z "${FI_PROVIDER_PATH:-}" ]; then
	FI_PROVIDER_PATH=$build/.libs; export FI_PROVIDER_PATH
fi
FI_PROVIDER=${FI_PROVIDER:-^ofi_rxd,ofi_rxm}; export FI_PROVIDER
if [ "$mode" = restart-now ]; then
	# the restart must beat the evidence of death too (ICMP port unreachable meanwhile)
	FI_COURIER_PEER_TIMEOUT=3000
	FI_COURIER_REFUSED_GRACE=3000; export FI_COURIER_REFUSED_GRACE
	FI_COURIER_SHM=0; export FI_COURIER_SHM
elif [ "$mode" = refused ]; then
	unset FI_COURIER_PEER_TIMEOUT
	FI_COURIER_SHM=0; export FI_COURIER_SHM
else
	FI_COURIER_PEER_TIMEOUT=500
fi
[ -n "${FI_COURIER_PEER_TIMEOUT:-}" ] && export FI_COURIER_PEER_TIMEOUT

port=$(python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null)
[ -n "$port" ] || port=$((20000 + $$ % 20000))
out=$(mktemp -d "${TMPDIR:-/tmp}/peer_death.XXXXXX") || exit 99
if [ -n "${COUR_PEER_DEATH_KEYED:-}" ]; then
	(umask 077 && head -c 32 /dev/urandom >"$out/key") || exit 99
	FI_COURIER_AUTH_KEY_FILE=$out/key; export FI_COURIER_AUTH_KEY_FILE
fi
spid1= cpid= spid2=
cleanup() {
	for p in $spid1 $cpid $spid2; do kill -9 "$p" 2>/dev/null; done
	rm -rf "$out"
}
trap cleanup EXIT

fail() {
	echo "test_peer_death.sh: $*"
	for f in server1 client server2; do
		[ -f "$out/$f" ] && { echo "---- $f ----"; cat "$out/$f"; }
	done
	exit 1
}

# wait_for FILE PATTERN TENTHS
wait_for() {
	n=0
	while ! grep -q "$2" "$1" 2>/dev/null; do
		n=$((n + 1))
		[ $n -gt "$3" ] && return 1
		sleep 0.1
	done
	return 0
}

# (Criterion's bxfi_ objects and named AVs, courier-av-*, belong to tests running beside us)
shm_list() { ls -A /dev/shm 2>/dev/null | grep -v -e '^bxfi_' -e '^courier-av-' | sort; }
shm_before=$(shm_list)
s1opt= copt=
if [ "$mode" = delivery ]; then
	s1opt=-N
	copt="-D -k 0"
fi
"$prog" -s -p "$prov" -A "$port" -T 20 $s1opt >"$out/server1" 2>&1 &
spid1=$!
wait_for "$out/server1" "receiver up" 50 || fail "the first receiver did not start"
timeout -k 5 40 "$prog" -c -p "$prov" -A "$port" -T 30 $copt >"$out/client" 2>&1 &
cpid=$!
if [ "$mode" = delivery ]; then
	wait_for "$out/client" "window posted" 100 || fail "the sender did not start"
	sleep 0.3	# every message acknowledged, none delivered
else
	wait_for "$out/server1" "received 200 " 100 || fail "the stream did not start"
fi
kill -9 $spid1
wait $spid1 2>/dev/null
spid1=
if [ "$mode" != restart-now ]; then
	# long enough for the sender to declare the receiver unreachable (500 ms)
	wait_for "$out/client" "sends ok, then" 80 || fail "the sender saw no failure"
fi
timeout -k 5 30 "$prog" -s -p "$prov" -A "$port" -n 20 -T 20 >"$out/server2" 2>&1 &
spid2=$!
wait $cpid; crc=$?; cpid=
wait $spid2; src=$?; spid2=
[ $crc -eq 0 ] && [ $src -eq 0 ] || fail "sender exit $crc, restarted receiver exit $src"
shm_after=$(shm_list)
[ "$shm_before" = "$shm_after" ] ||
	fail "/dev/shm changed: before [$shm_before] after [$shm_after]"
cat "$out/client" "$out/server2"
case $mode in
restart-now)
	# the new incarnation answers retransmissions and liveness probes alike with RESET
	grep -q "first: Connection reset" "$out/client" ||
		fail "the sender's first failure was not FI_ECONNRESET" ;;
*)
	grep -q "first: No route to host" "$out/client" ||
		fail "the sender's first failure was not FI_EHOSTUNREACH" ;;
esac
exit 0
