#!/bin/sh
# trace: FI_COURIER_TRACE's captures, read back through contrib/wireshark/courier.lua by tshark,
# must say what the run did. cour_pingpong sends N pings of 64 bytes (tag 1) and gets N pongs
# (tag 2), two processes on 127.0.0.1, each writing its own capture:
#   1. UDP only (FI_COURIER_SHM=0), the client dropping 5% of what it sends
#      (FI_COURIER_FAULT): in each capture, N first transmissions of each direction with
#      sequence numbers 0..N-1 in the order sent, every field as sent (type, tag, lengths,
#      sessions matching across the two captures), the injected drops recorded with their
#      comment, and at least one retransmission marked by the dissector in the client's.
#   2. shared memory on: the same counts, the HELLO handshake on the UDP interface carrying
#      each side's pid, and the pings and pongs on the "courier-shm" interface.
#   3. with a key (FI_COURIER_AUTH_KEY_FILE), over UDP: every datagram ends with its
#      authentication trailer, decoded (its stream's counter growing, stamped during the run,
#      the client's streams the ones the server received).
#   5. packed datagrams from a message rate run over UDP with a key: as many in the server's
#      capture as its statistics count, each with its trailer, and the EAGERs in the
#      client's capture the ones in the server's, sequence numbers 0..N-1.
#   4. packets crafted by trace_craft.py with known values (an extended SACK, authentication
#      trailers, an atomic, a refused RMA, HELLO, CM, RESET, IPv6, a retransmission, a ring
#      packet with the MAC flag and no trailer, a packed datagram, a padded one of one
#      packet, one that is not courier):
#      every field decodes to what was written.
# Every datagram of all runs must be decoded as courier, with no malformed packet and no Lua
# error, and tcpdump must read every packet of each capture. Skipped (77) without tshark: scripts/install-deps.sh installs it.
# Environment as run_pair.sh (COUR_BUILD: the build directory).
set -u

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
lua=$top/contrib/wireshark/courier.lua
build=${COUR_BUILD:-$PWD}
n=200

command -v tshark >/dev/null 2>&1 || { echo "test_trace: no tshark: skipped"; exit 77; }
[ -f "$lua" ] || { echo "test_trace: no $lua"; exit 99; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test_trace.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0

# Wireshark 4.4 (Debian 13) runs no Lua script given with -X as root: tshark runs as nobody
# then, with a home of its own, on copies it can read (captures are made mode 0600)
asuser=
if [ "$(id -u)" = 0 ]; then
	command -v setpriv >/dev/null 2>&1 || { echo "test_trace: root without setpriv: skipped"; exit 77; }
	asuser="setpriv --reuid=65534 --regid=65534 --clear-groups"
	chmod 755 "$tmp"
fi
mkdir -p "$tmp/home"
cp "$lua" "$tmp/courier.lua" && chmod 644 "$tmp/courier.lua" || exit 99
lua=$tmp/courier.lua

# ts FILE ARGS...: tshark with the dissector, bounded, its banner on stderr kept aside
ts() {
	f=$1
	shift
	HOME=$tmp/home XDG_CONFIG_HOME=$tmp/home timeout 120 $asuser \
		tshark -n -X lua_script:"$lua" -r "$f" "$@" 2>"$tmp/tshark.err"
}

bad() {
	echo "test_trace: FAIL: $*"
	fail=1
}

# expect WHAT GOT WANT
expect() {
	[ "$2" = "$3" ] || bad "$1: got '$2', want '$3'"
}

# count FILE FILTER: frames matching a display filter
count() {
	ts "$1" -Y "$2" -T fields -e frame.number | wc -l | tr -d ' '
}

# run NAME EXTRA_ENV...: one pingpong, captures in $tmp/NAME/{srv,cli}.<pid>.<n>.pcapng
run() {
	name=$1
	shift
	mkdir -p "$tmp/$name"
	COUR_FT_SERVER_ENV="FI_COURIER_TRACE=$tmp/$name/srv $*" \
	COUR_FT_CLIENT_ENV="FI_COURIER_TRACE=$tmp/$name/cli $* ${CLIENT_EXTRA:-}" \
	COUR_FT_TIMEOUT=60 \
		"$here/run_pair.sh" "$build/fabtests/bench/cour_pingpong" -S 64 -n $n -w 0 -v \
		>"$tmp/$name/run.out" 2>&1 || {
		cat "$tmp/$name/run.out"
		bad "$name: the pingpong itself failed"
		return 1
	}
	srv=$(ls "$tmp/$name"/srv.*.pcapng 2>/dev/null)
	cli=$(ls "$tmp/$name"/cli.*.pcapng 2>/dev/null)
	[ "$(echo "$srv" | wc -w)" -eq 1 ] && [ "$(echo "$cli" | wc -w)" -eq 1 ] || {
		ls -l "$tmp/$name"
		bad "$name: want one capture per side"
		return 1
	}
	chmod 644 "$srv" "$cli"
	# the pid in each file's name
	srv_pid=$(basename "$srv" | cut -d. -f2)
	cli_pid=$(basename "$cli" | cut -d. -f2)
}

# clean FILE: every datagram is courier, none malformed, no Lua error
clean() {
	total=$(count "$1" "udp")
	decoded=$(count "$1" "courier")
	if [ "$decoded" != "$total" ]; then
		# (seen once in a Debian 13 root, not reproduced in 8 runs since: say all there is)
		echo "test_trace: $1: tshark's errors:"
		cat "$tmp/tshark.err"
		ts "$1" -V -c 2 | tail -40
		cat "$tmp/tshark.err"
	fi
	expect "$1: datagrams decoded as courier" "$decoded" "$total"
	expect "$1: malformed or not courier" \
		"$(count "$1" "_ws.malformed || _ws.lua.error || courier.bad || (udp && !courier)")" 0
	ts "$1" -V >"$tmp/verbose" || bad "$1: tshark -V failed"
	if grep -q "Malformed\|Lua Error\|Dissector bug" "$tmp/verbose" "$tmp/tshark.err"; then
		grep -m 5 "Malformed\|Lua Error\|Dissector bug" "$tmp/verbose" "$tmp/tshark.err"
		bad "$1: malformed packets or Lua errors"
	fi
	[ "$total" -gt 0 ] || bad "$1: no packets at all"
	# tcpdump (libpcap) reads the file too, every packet of both interfaces
	if command -v tcpdump >/dev/null 2>&1; then
		expect "$1: packets tcpdump reads" \
			"$(timeout 60 tcpdump -nr "$1" 2>/dev/null | wc -l | tr -d ' ')" \
			"$(count "$1" "frame")"
	fi
}

# seqs FILE DIR(0 sent, 1 received) TAG: the first transmissions' sequence numbers, in order
seqs() {
	ts "$1" -Y "frame.p2p_dir == $2 && courier.type == 3 && courier.tag == $3 &&
		    !courier.retransmission" -T fields -e courier.seq
}

# pingpong FILE DIR_PINGS DIR_PONGS: N pings and N pongs, 0..N-1 in order, as sent
pingpong() {
	seqs "$1" "$2" 1 >"$tmp/pings"
	seqs "$1" "$3" 2 >"$tmp/pongs"
	seq 0 $((n - 1)) >"$tmp/want"
	cmp -s "$tmp/pings" "$tmp/want" ||
		bad "$1: pings (dir $2) not seq 0..$((n - 1)) in order: $(tr '\n' ' ' <"$tmp/pings" | cut -c1-200)"
	cmp -s "$tmp/pongs" "$tmp/want" ||
		bad "$1: pongs (dir $3) not seq 0..$((n - 1)) in order: $(tr '\n' ' ' <"$tmp/pongs" | cut -c1-200)"
	# what each ping and pong carried: 64 bytes in one packet, tag 1 or 2, nothing else
	expect "$1: EAGERs that are not 64-byte tagged pings or pongs" \
		"$(count "$1" "courier.type == 3 && !(courier.total_len == 64 && courier.payload_len == 64 && courier.offset == 0 && courier.flags.tagged == 1 && (courier.tag == 1 || courier.tag == 2))")" 0
	# the two sides name one session each: what one sends, the other receives
	ts "$1" -Y "courier.type == 3 && courier.tag == 1" -T fields -e courier.src_session |
		sort -u >"$tmp/$(basename "$1").pingsess"
	expect "$1: sessions of the pings" "$(wc -l <"$tmp/$(basename "$1").pingsess" | tr -d ' ')" 1
}

# shortpong FILE DIR_PINGS DIR_PONGS: over shared memory the first messages are EAGER, in
# sequence, and once the peer's ring is in use the rest go as SHORT (seq 0, outside the
# sequence): N pings and N pongs all the same, message ids consecutive in the order sent,
# each one 64 bytes in one packet, the SHORTs on the courier-shm interface alone
shortpong() {
	local kind
	for kind in "$2 1 pings" "$3 2 pongs"; do
		set -- "$1" $kind
		ts "$1" -Y "frame.p2p_dir == $2 && (courier.type == 3 || courier.type == 16) &&
			    courier.tag == $3" -T fields -e courier.msg_id >"$tmp/ids"
		awk -v n="$n" 'NR == 1 { first = $1 } $1 != first + NR - 1 { bad = 1 }
			       END { exit !(NR == n && !bad) }' "$tmp/ids" ||
			bad "$1: $4 not $n consecutive message ids: $(tr '\n' ' ' <"$tmp/ids" | cut -c1-200)"
	done
	expect "$1: messages that are not 64-byte tagged pings or pongs" \
		"$(count "$1" "(courier.type == 3 || courier.type == 16) && !(courier.total_len == 64 && courier.payload_len == 64 && courier.offset == 0 && courier.flags.tagged == 1 && (courier.tag == 1 || courier.tag == 2))")" 0
	expect "$1: SHORTs off the shm interface" \
		"$(count "$1" 'courier.type == 16 && frame.interface_name != "courier-shm"')" 0
	expect "$1: SHORTs with a sequence number" "$(count "$1" 'courier.type == 16 && courier.seq != 0')" 0
}

# ---- 1. UDP, the client dropping some of what it sends ----
CLIENT_EXTRA="FI_COURIER_FAULT=drop=5,seed=11" run udp FI_COURIER_SHM=0 || exit 1
clean "$srv"
clean "$cli"
pingpong "$cli" 0 1
pingpong "$srv" 1 0
cmp -s "$tmp/$(basename "$cli").pingsess" "$tmp/$(basename "$srv").pingsess" ||
	bad "udp: the client's ping session is not the one the server received"
drops=$(count "$cli" 'frame.comment contains "FI_COURIER_FAULT"')
rtx=$(count "$cli" "courier.retransmission && frame.p2p_dir == 0")
experts=$(ts "$cli" -q -z expert,note | grep -c "Retransmission of frame")
echo "test_trace: udp: $drops packets dropped by the injector, $rtx retransmissions in the" \
     "client's capture ($experts expert notes)"
[ "$drops" -ge 1 ] || bad "udp: no injected drop recorded"
[ "$rtx" -ge 1 ] || bad "udp: no retransmission marked in the client's capture"
[ "$experts" -ge 1 ] || bad "udp: no retransmission expert info"
# a dropped ping never reached the server: it saw each ping once, its retransmission included
expect "udp: shm packets" "$(count "$cli" 'frame.interface_name == "courier-shm"')" 0

# ---- 2. shared memory on ----
CLIENT_EXTRA="" run shm FI_COURIER_SHM=1 || exit 1
clean "$srv"
clean "$cli"
shortpong "$cli" 0 1
shortpong "$srv" 1 0
expect "shm: HELLO pids the client sent" "$(ts "$cli" -Y "courier.type == 14 && frame.p2p_dir == 0" \
	-T fields -e courier.hello.pid | sort -u)" "$cli_pid"
expect "shm: HELLO pids the client received" "$(ts "$cli" -Y "courier.type == 14 && frame.p2p_dir == 1" \
	-T fields -e courier.hello.pid | sort -u)" "$srv_pid"
expect "shm: HELLOs off the UDP interface" \
	"$(count "$cli" 'courier.type == 14 && frame.interface_name != "courier-udp"')" 0
for f in "$cli" "$srv"; do
	ring=$(count "$f" 'frame.interface_name == "courier-shm" && courier.type == 16')
	info=$(ts "$f" -Y 'frame.interface_name == "courier-shm" && courier.type == 16' | grep -c "\[shm\] SHORT")
	echo "test_trace: shm: $(basename "$f"): $ring SHORT messages through the rings"
	# both directions are in each capture; only the first few of each go as EAGER
	[ "$ring" -ge $((2 * n - 40)) ] || bad "shm: $f: only $ring SHORTs on the shm interface"
	expect "shm: $f: [shm] in the Info column" "$info" "$ring"
done

# ---- 3. with a key: every UDP datagram carries its authentication trailer ----
(umask 077 && head -c 32 /dev/urandom >"$tmp/job.key") || exit 99
t0=$(date -u +%s)
CLIENT_EXTRA="" run key FI_COURIER_SHM=0 FI_COURIER_AUTH_KEY_FILE="$tmp/job.key" || exit 1
t1=$(date -u +%s)
clean "$srv"
clean "$cli"
pingpong "$cli" 0 1
pingpong "$srv" 1 0
for f in "$cli" "$srv"; do
	expect "key: $f: UDP datagrams without a trailer" \
		"$(count "$f" 'frame.interface_name == "courier-udp" && !(courier.flags.mac == 1 && courier.mac.stream)')" 0
	expect "key: $f: ring packets with a trailer" \
		"$(count "$f" 'frame.interface_name == "courier-shm" && courier.mac.stream')" 0
	# each stream's counter grows with every datagram its sender sends
	ts "$f" -Y 'frame.p2p_dir == 0 && courier.mac.stream' -T fields -e courier.mac.stream \
		-e courier.mac.counter | awk '{ if (($1 in last) && $2 <= last[$1]) bad++; last[$1] = $2 }
		END { print bad + 0 }' >"$tmp/ctr"
	expect "key: $f: counters that did not grow" "$(cat "$tmp/ctr")" 0
	# stamped with the sender's clock during the run
	from=$(date -u -d "@$((t0 - 2))" +"%Y-%m-%d %H:%M:%SZ")
	to=$(date -u -d "@$((t1 + 2))" +"%Y-%m-%d %H:%M:%SZ")
	expect "key: $f: trailers stamped outside the run" \
		"$(count "$f" "courier.mac.stream && (courier.mac.time < \"$from\" || courier.mac.time > \"$to\")")" 0
done
ts "$cli" -Y 'frame.p2p_dir == 0 && courier.mac.stream' -T fields -e courier.mac.stream | sort -u >"$tmp/s.cli"
ts "$srv" -Y 'frame.p2p_dir == 1 && courier.mac.stream' -T fields -e courier.mac.stream | sort -u >"$tmp/s.srv"
[ -s "$tmp/s.cli" ] && cmp -s "$tmp/s.cli" "$tmp/s.srv" ||
	bad "key: the client's streams are not the ones the server received"
echo "test_trace: key: $(count "$cli" 'courier.mac.stream') datagrams with a trailer in the client's capture"

# ---- 5. packed datagrams from a real run: a message rate over UDP with a key ----
# 4096 messages of 64 bytes in windows of 256: the sends queued behind those in flight leave
# packed (wire/cour_wire.h). Every packed datagram the server's statistics count is in its
# capture, decoded, and the messages the client sent in them are the ones the server got.
mkdir -p "$tmp/pack"
COUR_FT_OUT_DIR=$tmp/pack COUR_FT_TIMEOUT=60 \
COUR_FT_SERVER_ENV="FI_COURIER_TRACE=$tmp/pack/srv FI_COURIER_SHM=0 FI_COURIER_STATS=1 FI_COURIER_AUTH_KEY_FILE=$tmp/job.key" \
COUR_FT_CLIENT_ENV="FI_COURIER_TRACE=$tmp/pack/cli FI_COURIER_SHM=0 FI_COURIER_STATS=1 FI_COURIER_AUTH_KEY_FILE=$tmp/job.key" \
	"$here/run_pair.sh" "$build/fabtests/bench/cour_msgrate" -S 64 -n 4096 -w 256 -v \
	>"$tmp/pack/run.out" 2>&1 || { cat "$tmp/pack/run.out"; bad "pack: the message rate run failed"; }
srv=$(ls "$tmp/pack"/srv.*.pcapng 2>/dev/null)
cli=$(ls "$tmp/pack"/cli.*.pcapng 2>/dev/null)
if [ "$(echo "$srv" | wc -w)" -eq 1 ] && [ "$(echo "$cli" | wc -w)" -eq 1 ]; then
	chmod 644 "$srv" "$cli"
	clean "$srv"
	clean "$cli"
	rcvd=$(sed -n 's/^courier stats .* udp_packs_rcvd \([0-9]*\).*/\1/p' "$tmp/pack/server.out" | tail -1)
	packs=$(count "$srv" 'frame.p2p_dir == 1 && courier.pack.count')
	echo "test_trace: pack: the server received $packs packed datagrams (its statistics: ${rcvd:-none})"
	[ "${packs:-0}" -ge 1 ] || bad "pack: no packed datagram in the server's capture"
	expect "pack: packed datagrams in the server's capture against its statistics" "$packs" "${rcvd:-none}"
	expect "pack: packed datagrams without a trailer" \
		"$(count "$cli" 'courier.pack.count && !courier.mac.stream')" 0
	# every message the client sent (first sending or again) is one the server received
	for f in "$cli 0" "$srv 1"; do
		set -- $f
		ts "$1" -Y "frame.p2p_dir == $2 && courier.type == 3" -T fields -E aggregator=' ' \
			-e courier.seq | tr ' ' '\n' | sort -un >"$tmp/pack/seqs.$2"
	done
	cmp -s "$tmp/pack/seqs.0" "$tmp/pack/seqs.1" ||
		bad "pack: the EAGERs the client sent are not the ones the server received"
	m=$(wc -l <"$tmp/pack/seqs.0" | tr -d ' ')
	expect "pack: EAGER sequence numbers 0..N-1" "$(tail -1 "$tmp/pack/seqs.0")" "$((m - 1))"
	[ "$m" -ge 4096 ] || bad "pack: only $m EAGERs in the client's capture"
else
	ls -l "$tmp/pack"
	bad "pack: want one capture per side"
fi

# ---- 4. packets crafted with known fields (trace_craft.py), one of each kind ----
if command -v python3 >/dev/null 2>&1; then
	craft=$tmp/craft.pcapng
	python3 "$here/trace_craft.py" "$craft" && chmod 644 "$craft" || bad "trace_craft.py failed"
	ts "$craft" -T fields -E separator='|' -E aggregator=' ' \
		-e courier.type -e courier.flags -e courier.seq -e courier.ack -e courier.sack.held \
		-e courier.sack_ext.held -e courier.msg_id -e courier.rx_ctx -e courier.atomic.op \
		-e courier.atomic.datatype -e courier.atomic.kind -e courier.atomic.count \
		-e courier.prov_errno -e courier.tag -e courier.data -e courier.total_len \
		-e courier.raddr -e courier.payload_len -e courier.hello.pid -e courier.hello.fd \
		-e courier.hello.nonce -e courier.hello.uid -e courier.hello.flags \
		-e courier.cm.conn_id -e courier.cm.op -e courier.cm.data -e courier.mac.stream \
		-e courier.mac.counter -e courier.mac.tag -e courier.retransmission \
		-e courier.hello.box_gen -e courier.hello.box_idx >"$tmp/craft.got"
	# what trace_craft.py wrote, field by field (empty: the packet has no such field)
	cat >"$tmp/craft.want" <<'EOF'
1|0x0408||100|101 103|101 103 141|||||||||||||||||||||0x1122334455667788|7|aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa|||
3|0x0107|5|9|||9|3||||||0x00000000feedface|0x0000000000001234|10|0x0000000000000000|10||||||||||||||
12|0x0000|6|9|||10||12|7|2|3||0x0000000000000077|0x0000000000000000|24|0x00007f0000001000|48||||||||||||||
11|0x1000|7|9|||10||||||10|0x0000000000000000|0x0000000000000000|0|0x0000000000000000|0||||||||||||||
14|0x0408|0|0|||||||||||||||4242|7|0x0000000000c0ffee|1000|0x00000003||||0x0000000000000099|8|bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb||5|2
15|0x0008|0|0||||||||||||||||||||0x0000000000abcdef|2|68656c6c6f||||||
2|0x0000|0|0||||||||||||||||||||||||||||
3|0x0107|5|9|||9|3||||||0x00000000feedface|0x0000000000001234|10|0x0000000000000000|10||||||||||||2||
13|0x0000|0|0|||0|||||||0x0000000000000000|0x0000000000000000|4|0x0000000000000000|4||||||||||||||
|||||||||||||||||||||||||||||||
1|0x0400||7||||||||||||||||||||||||||||
16|0x0003|0|11|||42|||||||0x0000000000000005|0x0000000000000066|3|0x0000000000000000|3||||||||||||||
3 3|0x2401 0x0507|8 5|9 9|||11 9|3||||||0x0000000000000099 0x00000000feedface|0x0000000000000000 0x0000000000001234|5 10|0x0000000000000000 0x0000000000000000|5 10|||||||||0x00000000000000cc|9|cccccccccccccccccccccccccccccccc|2||
3|0x0001|12|9|||12|||||||0x0000000000000077|0x0000000000000000|6|0x0000000000000000|6||||||||||||||
EOF
	if ! cmp -s "$tmp/craft.got" "$tmp/craft.want"; then
		diff "$tmp/craft.want" "$tmp/craft.got"
		bad "crafted packets: fields differ from what was written (diff: want, got)"
	fi
	expect "crafted: MAC times" "$(count "$craft" \
		'courier.mac.time == "2023-11-14 22:13:20Z" || courier.mac.time == "2023-11-14 22:13:21Z"')" 2
	expect "crafted: an ACK's hold time" "$(count "$craft" 'courier.hold == 250')" 1
	expect "crafted: IPv6 DGRAM" "$(count "$craft" 'ipv6 && courier.type == 13')" 1
	expect "crafted: the version-2 datagram taken for courier" \
		"$(count "$craft" 'frame.number == 10 && courier')" 0
	expect "crafted: malformed" "$(count "$craft" "_ws.malformed || _ws.lua.error || courier.bad")" 0
	expect "crafted: packed datagrams of 2" "$(count "$craft" 'courier.pack.count == 2')" 1
	expect "crafted: a padded packed datagram of 1" "$(count "$craft" 'courier.pack.count == 1')" 1
	expect "crafted: the pack's Info" "$(ts "$craft" -Y 'courier.pack.count' | grep -c '\[pack of 2\] EAGER seq=8 .*; EAGER seq=5 .*retransmission of #2')" 1
else
	echo "test_trace: no python3: crafted packets not checked"
fi

if [ $fail -ne 0 ]; then
	echo "test_trace: captures and outputs follow"
	cat "$tmp"/*/run.out
	exit 1
fi
echo "test_trace: passed: $n pings and $n pongs in each capture, over UDP with drops and" \
     "through shared memory"
