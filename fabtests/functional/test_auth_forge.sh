#!/bin/sh
# auth_forge: a keyed courier job (FI_COURIER_AUTH_KEY_FILE, a fresh random key) over UDP only
# under attack by forger.c, which spoofs the client's address and injects, for the sequenced
# datagrams it sees from client to server, forgeries with the right sessions, sequence numbers
# and checksum but a changed payload, random tag bytes or no trailer at all, and exact replays;
# and, spoofing the server, sends the client its own datagrams back (reflections) and RESETs
# of the live sessions with a trailer no key made.
#   1. stream_verify (every byte of >= 256 MiB checked) while the forger hits the stream;
#   2. rma (writes of 1 B .. 64 MiB, the target checks every byte and its guards) while the
#      forger hits the WRITEs;
#   3. stream_verify with lo at MTU 1500, then at MTU 9000, where big RDATA datagrams are read
#      in place before their tag is checked (rx_in_place must count them), forged ones among
#      them;
#   4. an earlier run's opening packets: a short stream between two fixed ports is recorded
#      (forger -R), then the same ports carry a new stream, attacked as in 1, into which the
#      forger sends the recorded datagrams (authentic, seconds old, new to the new endpoints)
#      twice each (forger -r);
#   5. the same again, the endpoints' skew 2 s (FI_COURIER_AUTH_SKEW) and the recording older:
#      every copy of the earlier run's datagrams is refused as stale (drop_replay).
# Every run must pass with no session reset on either side (peer_resets 0). The server must
# have refused exactly what the forger sent it: drop_bad_mac equal to the forger's forged
# count, drop_replay to its replayed count plus the earlier run's second copies; the client
# likewise its reflections and RESETs (drop_bad_mac) and its second copies (drop_replay). The
# earlier run's first copies pass the tag and are refused as sessions not proven fresh: the
# two sides' drop_unproven together count their packets at least. Only datagrams the kernel
# dropped before courier read them (a side's rx_sock_drops, and lo's backlog drops the forger
# reports) may loosen the counts, by their number.
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

# field FILE NAME: the number after NAME in FILE's first courier stats line that has it
field() { sed -n "s/^courier stats .* $2 \([0-9]*\).*/\1/p" "$1" | head -n 1; }

# exact SIDE GOT WANT SLACK: a side's refusals match what was sent, within the kernel's drops
exact() {
	[ -n "$2" ] || fail "$run: no count for the $1"
	if [ "$4" = 0 ]; then
		[ "$2" = "$3" ] || fail "$run: the $1 counted $2, the forger sent $3"
	else
		# a dropped forgery is never counted; a dropped original makes its replay the
		# first copy, accepted
		[ "$2" -le "$3" ] && [ "$2" -ge $(($3 - $4)) ] ||
			fail "$run: the $1 counted $2, the forger sent $3 ($4 kernel drops)"
	fi
}

# attack NAME FORGER-OPTIONS PROGRAM ARGS...: run PROGRAM as a pair under the forger, check
# the counts. SERVER_PORT/CLIENT_PORT, when set, fix the endpoints' UDP ports.
attack() {
	run=$1
	fopts=$2
	shift 2
	mkdir "$out/$run" || exit 99
	timeout -k 5 120 "$forger" -n "$limit" -e "$every" -t 100 $fopts >"$out/$run/forger" 2>&1 &
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
	COUR_FT_SERVER_ENV=${SERVER_PORT:+COUR_FT_EP_PORT=$SERVER_PORT} \
	COUR_FT_CLIENT_ENV=${CLIENT_PORT:+COUR_FT_EP_PORT=$CLIENT_PORT} \
		COUR_FT_OUT_DIR=$out/$run "$here/run_pair.sh" "$@" >"$out/$run/pair" 2>&1
	prc=$?
	wait $fpid
	frc=$?
	fpid=
	grep "^forger:" "$out/$run/forger"
	[ $prc = 0 ] || fail "$run: $* failed under attack (data or target memory, see below)"
	srv=$out/$run/server.out
	cli=$out/$run/client.out
	for side in server client; do
		f=$out/$run/$side.out
		r=$(field "$f" peer_resets)
		[ "$r" = 0 ] || fail "$run: the $side saw its peer restart $r time(s): a session" \
			"was reset"
	done
	case $fopts in
	*-R*)
		[ $frc = 0 ] || fail "$run: the forger recorded nothing (exit $frc)"
		grep -h "PASS" "$out/$run/pair"
		return ;;
	esac
	[ $frc = 0 ] || fail "$run: the forger stopped before its $limit forgeries (exit $frc)"
	forged=$(num "$out/$run/forger" '^forger: forged \([0-9]*\) .*')
	replayed=$(num "$out/$run/forger" '^forger: forged [0-9]* replayed \([0-9]*\) .*')
	reflected=$(num "$out/$run/forger" '^forger: to the client: reflected \([0-9]*\) .*')
	resets=$(num "$out/$run/forger" '^forger: to the client: .* resets \([0-9]*\)$')
	backlog=$(num "$out/$run/forger" '.* \([0-9]*\) backlog_drops$')
	[ -n "$forged" ] && [ -n "$replayed" ] && [ -n "$backlog" ] && [ -n "$reflected" ] &&
		[ -n "$resets" ] || fail "$run: no counts from the forger"
	[ "$forged" -gt 0 ] && [ "$replayed" -gt 0 ] && [ "$reflected" -gt 0 ] &&
		[ "$resets" -gt 0 ] || fail "$run: nothing was injected"
	# the earlier run's datagrams, by the port they went to
	sport=$(sed -n 's/^courier stats [^ ]*:\([0-9]*\): .*/\1/p' "$srv" | head -n 1)
	cport=$(sed -n 's/^courier stats [^ ]*:\([0-9]*\): .*/\1/p' "$cli" | head -n 1)
	old_s=$(num "$out/$run/forger" "^forger: earlier run: port $sport packets \([0-9]*\) .*")
	old_sc=$(num "$out/$run/forger" "^forger: earlier run: port $sport packets [0-9]* copies \([0-9]*\)$")
	old_c=$(num "$out/$run/forger" "^forger: earlier run: port $cport packets \([0-9]*\) .*")
	old_cc=$(num "$out/$run/forger" "^forger: earlier run: port $cport packets [0-9]* copies \([0-9]*\)$")
	case $fopts in
	*-r*)	[ $((${old_s:-0} + ${old_c:-0})) -gt 0 ] ||
			fail "$run: the earlier run's datagrams were not sent" ;;
	esac
	for side in server client; do
		f=$out/$run/$side.out
		grep -q "^courier stats .*: authenticated 1 " "$f" ||
			fail "$run: no authentication statistics from the $side (FI_COURIER_STATS=1)"
	done
	s_bad=$(num "$srv" '^courier stats .*: authenticated 1 drop_bad_mac \([0-9]*\) .*')
	s_rep=$(num "$srv" '^courier stats .*: authenticated 1 .* drop_replay \([0-9]*\)$')
	c_bad=$(num "$cli" '^courier stats .*: authenticated 1 drop_bad_mac \([0-9]*\) .*')
	c_rep=$(num "$cli" '^courier stats .*: authenticated 1 .* drop_replay \([0-9]*\)$')
	s_unp=$(field "$srv" drop_unproven)
	c_unp=$(field "$cli" drop_unproven)
	s_slack=$(($(field "$srv" rx_sock_drops) + backlog))
	c_slack=$(($(field "$cli" rx_sock_drops) + backlog))
	echo "$me: $run: server drop_bad_mac $s_bad drop_replay $s_rep drop_unproven $s_unp;" \
		"client drop_bad_mac $c_bad drop_replay $c_rep drop_unproven $c_unp;" \
		"kernel drops $s_slack/$c_slack"
	exact "server's drop_bad_mac" "$s_bad" "$forged" "$s_slack"
	exact "client's drop_bad_mac" "$c_bad" $((reflected + resets)) "$c_slack"
	if [ -n "${STALE:-}" ]; then
		# stamped beyond the skew: both copies of each refused before anything else
		exact "server's drop_replay" "$s_rep" $((replayed + 2 * ${old_sc:-0})) "$s_slack"
		exact "client's drop_replay" "$c_rep" $((2 * ${old_cc:-0})) "$c_slack"
	else
		exact "server's drop_replay" "$s_rep" $((replayed + ${old_sc:-0})) "$s_slack"
		exact "client's drop_replay" "$c_rep" "${old_cc:-0}" "$c_slack"
		old=$((${old_s:-0} + ${old_c:-0}))
		[ $((s_unp + c_unp)) -ge $((old - s_slack - c_slack)) ] ||
			fail "$run: $old packets of the earlier run, only $((s_unp + c_unp))" \
				"refused as unproven"
	fi
	grep -h "PASS" "$out/$run/pair"
}

# a free UDP port
udp_port() {
	python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

attack stream "" stream_verify -b 256
COUR_FT_TIMEOUT=90; export COUR_FT_TIMEOUT
attack rma "" rma -k basic -T 80
ip link set lo mtu 1500 || fail "cannot set lo's MTU to 1500"
attack stream1500 "" stream_verify -b 1024
ip link set lo mtu 9000 || fail "cannot set lo's MTU to 9000"
attack stream9000 "" stream_verify -b 1024
inplace=$(field "$out/stream9000/server.out" rx_in_place)
[ "${inplace:-0}" -gt 0 ] || fail "stream9000: no datagram was read in place"
echo "$me: stream9000: $inplace datagrams read in place, forgeries among them refused"
ip link set lo mtu 65536
SERVER_PORT=$(udp_port) CLIENT_PORT=$(udp_port)
[ -n "$SERVER_PORT" ] && [ -n "$CLIENT_PORT" ] || fail "no free UDP ports"
export SERVER_PORT CLIENT_PORT
attack record "-R $out/earlier.rec" stream_verify -b 8
attack earlier "-r $out/earlier.rec" stream_verify -b 256
sleep 2
STALE=1 FI_COURIER_AUTH_SKEW=2
export STALE FI_COURIER_AUTH_SKEW
attack stale "-r $out/earlier.rec" stream_verify -b 256
echo "$me: PASS: forgeries, replays, reflections, RESETs and an earlier run's packets (fresh" \
	"and stale) all refused and counted, no session reset, every byte intact"
exit 0
