#!/bin/sh
# auth_forge: a keyed courier job (FI_COURIER_AUTH_KEY_FILE, a fresh random key) over UDP only
# under attack by forger.c, which spoofs the client's address and injects, for the sequenced
# datagrams it sees from client to server, forgeries with the right sessions, sequence numbers
# and checksum but a changed payload, random tag bytes or no trailer at all, and exact replays.
#   1. stream_verify (every byte of >= 256 MiB checked) while the forger hits the stream;
#   2. rma (writes of 1 B .. 64 MiB, the target checks every byte and its guards) while the
#      forger hits the WRITEs.
# Both runs must pass, and the server must have refused exactly what the forger sent: its
# drop_bad_mac equal to the forger's forged count and its drop_replay to its replayed count.
# Only datagrams the kernel dropped before courier read them (the server's rx_sock_drops,
# and lo's backlog drops the forger reports) may loosen that, by their number.
# Runs in a network namespace of its own (unshare -n: only lo, only our traffic), as root;
# skips (77) without root, namespaces or CAP_NET_RAW, and for other providers.
# Environment as run_pair.sh (COUR_BUILD, COUR_FT_PROVIDER); COUR_FORGE_N: forgeries per run
# (default 1200); COUR_FORGE_EVERY: attack every k-th datagram of the flow (default 8).
set -u
build=${COUR_BUILD:-$PWD}
prov=${COUR_FT_PROVIDER:-courier}
here=$(cd "$(dirname "$0")" && pwd)
me=test_auth_forge.sh
[ "$prov" = courier ] || { echo "$me: courier's authentication only, skipped for $prov"; exit 77; }
forger=$build/fabtests/functional/forger
[ -x "$forger" ] || forger=$build/forger
[ -x "$forger" ] || { echo "$me: no forger program in $build" >&2; exit 99; }

if [ -z "${COUR_FORGE_IN_NS:-}" ]; then
	if [ "$(id -u)" != 0 ]; then
		echo "$me: skipped: not root (the forger needs CAP_NET_RAW, its namespace" \
			"CAP_SYS_ADMIN)"
		exit 77
	fi
	for t in unshare ip timeout; do
		command -v $t >/dev/null 2>&1 ||
			{ echo "$me: skipped: no $t (Debian: util-linux, iproute2, coreutils)"; exit 77; }
	done
	unshare -n true 2>/dev/null ||
		{ echo "$me: skipped: unshare -n failed (no CAP_SYS_ADMIN?)"; exit 77; }
	COUR_FORGE_IN_NS=1 COUR_BUILD=$build exec unshare -n sh "$0" "$@"
fi
ip link set lo up || { echo "$me: cannot bring lo up in the namespace"; exit 99; }

limit=${COUR_FORGE_N:-1200}
every=${COUR_FORGE_EVERY:-8}
out=$(mktemp -d "${TMPDIR:-/tmp}/auth_forge.XXXXXX") || exit 99
fpid=
trap '[ -n "$fpid" ] && kill -9 $fpid 2>/dev/null; rm -rf "$out"' EXIT
(umask 077 && head -c 32 /dev/urandom >"$out/key") || exit 99
FI_COURIER_AUTH_KEY_FILE=$out/key
FI_COURIER_SHM=0
FI_COURIER_STATS=1
# one IP packet, one datagram: the forger replays what it captures (forger.c says why)
FI_COURIER_UDP_GSO=0
export FI_COURIER_AUTH_KEY_FILE FI_COURIER_SHM FI_COURIER_STATS FI_COURIER_UDP_GSO

fail() {
	echo "$me: FAIL: $*"
	for f in "$out/$run/forger" "$out/$run/pair"; do
		[ -f "$f" ] && { echo "---- $f ----"; cat "$f"; }
	done
	exit 1
}

# num FILE SED-PATTERN: the number the pattern captures in FILE's first matching line
num() { sed -n "s/$2/\1/p" "$1" | head -n 1; }

# attack NAME PROGRAM ARGS...: run PROGRAM as a pair under the forger, check the counts
attack() {
	run=$1
	shift
	mkdir "$out/$run" || exit 99
	timeout -k 5 120 "$forger" -n "$limit" -e "$every" -t 100 >"$out/$run/forger" 2>&1 &
	fpid=$!
	n=0
	until grep -q "capturing on lo" "$out/$run/forger"; do
		if ! kill -0 $fpid 2>/dev/null; then
			wait $fpid
			frc=$?
			fpid=
			[ $frc = 77 ] && { echo "$me: skipped: $(cat "$out/$run/forger")"; exit 77; }
			fail "the forger did not start (exit $frc)"
		fi
		n=$((n + 1))
		[ $n -gt 100 ] && fail "the forger did not start in 10 s"
		sleep 0.1
	done
	COUR_FT_OUT_DIR=$out/$run "$here/run_pair.sh" "$@" >"$out/$run/pair" 2>&1
	prc=$?
	wait $fpid
	frc=$?
	fpid=
	grep "^forger:" "$out/$run/forger"
	[ $prc = 0 ] || fail "$run: $* failed under attack (data or target memory, see below)"
	[ $frc = 0 ] || fail "$run: the forger stopped before its $limit forgeries (exit $frc)"
	forged=$(num "$out/$run/forger" '^forger: forged \([0-9]*\) .*')
	replayed=$(num "$out/$run/forger" '^forger: forged [0-9]* replayed \([0-9]*\) .*')
	backlog=$(num "$out/$run/forger" '.* \([0-9]*\) backlog_drops$')
	stats=$out/$run/server.out
	bad=$(num "$stats" '^courier stats .*: authenticated 1 drop_bad_mac \([0-9]*\) .*')
	replay=$(num "$stats" '^courier stats .*: authenticated 1 .* drop_replay \([0-9]*\)$')
	sock=$(num "$stats" '^courier stats .* rx_sock_drops \([0-9]*\).*')
	[ -n "$forged" ] && [ -n "$replayed" ] && [ -n "$backlog" ] ||
		fail "$run: no counts from the forger"
	[ -n "$bad" ] && [ -n "$replay" ] && [ -n "$sock" ] ||
		fail "$run: no authentication statistics from the server (FI_COURIER_STATS=1)"
	slack=$((sock + backlog))
	echo "$me: $run: server drop_bad_mac $bad drop_replay $replay rx_sock_drops $sock;" \
		"forger forged $forged replayed $replayed, lo backlog drops $backlog"
	[ "$forged" -gt 0 ] && [ "$replayed" -gt 0 ] || fail "$run: nothing was injected"
	if [ $slack = 0 ]; then
		[ "$bad" = "$forged" ] ||
			fail "$run: the server refused $bad forgeries as such, the forger sent $forged"
		[ "$replay" = "$replayed" ] ||
			fail "$run: the server refused $replay replays, the forger sent $replayed"
	else
		# a dropped forgery is never counted; a dropped original makes its replay the
		# first copy, accepted
		[ "$bad" -le "$forged" ] && [ "$bad" -ge $((forged - slack)) ] ||
			fail "$run: drop_bad_mac $bad, forged $forged ($slack kernel drops)"
		[ "$replay" -le "$replayed" ] && [ "$replay" -ge $((replayed - slack)) ] ||
			fail "$run: drop_replay $replay, replayed $replayed ($slack kernel drops)"
	fi
	grep -h "PASS" "$out/$run/pair"
}

attack stream stream_verify -b 256
COUR_FT_TIMEOUT=90; export COUR_FT_TIMEOUT
attack rma rma -k basic -T 80
echo "$me: PASS: forgeries and replays all refused and counted, every byte intact"
exit 0
