#!/bin/sh
# auth_keys: two jobs on one host and their keys (auth.c), shared memory on and off:
#   same key   messages both ways arrive intact; each side's statistics say
#              "authenticated 1 drop_bad_mac 0 drop_replay 0";
#   keys A, B  both sides send and post a receive: each send fails with FI_EHOSTUNREACH after
#              FI_COURIER_PEER_TIMEOUT (2 s here), not a hang; nothing is received; no
#              shared-memory ring is mapped (the HELLO fails authentication too); each side
#              counts drop_bad_mac and logs (FI_LOG_LEVEL=warn) that a datagram failed
#              authentication;
#   A, none    the same, with the server keyed and the client not, then the reverse: the
#              keyed side logs the failed authentication, the unkeyed one the authenticated
#              packet it cannot check, and both count drop_bad_mac.
# One process: a key file readable by others (0644) makes fi_domain fail with -FI_EACCES and
# a warning naming the file; an 8-byte auth_key is refused by fi_getinfo and by fi_domain; a
# 32-byte one comes back copied in fi_getinfo's infos (auth.c -x api). FI_EP_MSG connection
# management with a key (msg_cm.c, one process).
# Environment as run_pair.sh (COUR_BUILD, COUR_FT_PROVIDER); courier only.
set -u
build=${COUR_BUILD:-$PWD}
prov=${COUR_FT_PROVIDER:-courier}
here=$(cd "$(dirname "$0")" && pwd)
me=test_auth_keys.sh
[ "$prov" = courier ] || { echo "$me: courier's keys only, skipped for $prov"; exit 77; }
prog=$build/fabtests/functional/auth
[ -x "$prog" ] || prog=$build/auth
[ -x "$prog" ] || { echo "$me: no auth program in $build" >&2; exit 99; }
if [ -d "$build/.libs" ] && [ -z "${FI_PROVIDER_PATH:-}" ]; then
	FI_PROVIDER_PATH=$build/.libs; export FI_PROVIDER_PATH
fi
FI_PROVIDER=${FI_PROVIDER:-^ofi_rxd,ofi_rxm}; export FI_PROVIDER

out=$(mktemp -d "${TMPDIR:-/tmp}/auth_keys.XXXXXX") || exit 99
trap 'rm -rf "$out"' EXIT
(umask 077 && head -c 32 /dev/urandom >"$out/A" && head -c 32 /dev/urandom >"$out/B") ||
	exit 99
cp "$out/A" "$out/A644" && chmod 644 "$out/A644" || exit 99
# a key of the caller's would make the unkeyed side keyed
unset FI_COURIER_AUTH_KEY_FILE
FI_COURIER_PEER_TIMEOUT=2000
FI_COURIER_STATS=1
FI_LOG_LEVEL=warn
FI_LOG_PROV=courier
export FI_COURIER_PEER_TIMEOUT FI_COURIER_STATS FI_LOG_LEVEL FI_LOG_PROV

name=
fail() {
	echo "$me: FAIL: $name: $*"
	[ -f "$out/pair" ] && cat "$out/pair"
	exit 1
}

# pair SHM SERVER_KEY CLIENT_KEY TEST: auth -x TEST as server and client (key "" for none)
pair() {
	rm -f "$out/server.out" "$out/client.out"
	FI_COURIER_SHM=$1 COUR_FT_OUT_DIR=$out \
		COUR_FT_SERVER_ENV="${2:+FI_COURIER_AUTH_KEY_FILE=$2}" \
		COUR_FT_CLIENT_ENV="${3:+FI_COURIER_AUTH_KEY_FILE=$3}" \
		"$here/run_pair.sh" auth -x "$4" >"$out/pair" 2>&1 || fail "auth -x $4 failed"
	grep -h "^auth: " "$out/server.out" "$out/client.out" | sed "s/^/$name: /"
}

# has SIDE PATTERN WHAT: SIDE's output (server or client) has a line matching PATTERN
has() { grep -q "$2" "$out/$1.out" || fail "the $1 $3"; }

# refused SIDE KEYED: SIDE's send failed, it took nothing, and said why
refused() {
	has "$1" "auth: refused: the send failed after .*No route to host" \
		"did not see its send fail with FI_EHOSTUNREACH"
	if [ "$2" = 1 ]; then
		has "$1" "dropped: it fails authentication" \
			"logged no datagram failing authentication"
		has "$1" "courier stats .*: authenticated 1 drop_bad_mac [1-9]" \
			"(keyed) counted nothing in drop_bad_mac"
	else
		has "$1" "dropped: authenticated, and this endpoint has no key" \
			"(no key) logged no authenticated packet dropped"
		has "$1" "courier stats .*: authenticated 0 drop_bad_mac [1-9]" \
			"(no key) counted nothing in drop_bad_mac"
	fi
}

for shm in 1 0; do
	name="same key, shm $shm"
	pair $shm "$out/A" "$out/A" exchange
	for side in server client; do
		has $side "courier stats .*: authenticated 1 drop_bad_mac 0 drop_replay 0$" \
			"statistics do not say authenticated 1 drop_bad_mac 0 drop_replay 0"
	done

	name="keys A and B, shm $shm"
	pair $shm "$out/A" "$out/B" refused
	refused server 1
	refused client 1

	name="server keyed, client not, shm $shm"
	pair $shm "$out/A" "" refused
	refused server 1
	refused client 0

	name="client keyed, server not, shm $shm"
	pair $shm "" "$out/A" refused
	refused server 0
	refused client 1
done

# a key file others may read, one that is not there, a directory: fi_domain fails with
# -FI_EACCES and a warning names the file and says why
for bad in "A644:refused: others than its owner" "missing:No such file" ".:refused: not a regular"; do
	file=$out/${bad%%:*}
	[ "${bad%%:*}" = . ] && file=$out
	name="key file $file"
	FI_COURIER_AUTH_KEY_FILE=$file timeout -k 5 30 "$prog" -p "$prov" -x badfile \
		>"$out/pair" 2>&1 || fail "auth -x badfile failed"
	grep -q "FI_COURIER_AUTH_KEY_FILE $file: ${bad#*:}" "$out/pair" ||
		fail "no warning naming the key file and why"
	grep "^auth: " "$out/pair" | sed "s|^|$name: |"
done

# FI_EP_MSG: connecting, accepting, rejecting through a keyed passive endpoint (msg_cm.c),
# every endpoint, the passive one too, with the key
name="msg_cm with a key"
cm=$build/fabtests/functional/msg_cm
if [ -x "$cm" ]; then
	FI_COURIER_AUTH_KEY_FILE=$out/A FI_COURIER_PEER_TIMEOUT=1500 timeout -k 5 60 "$cm" "$prov" \
		>"$out/cm" 2>&1 || { cat "$out/cm"; fail "msg_cm failed with a key"; }
	grep -q "authenticated 1 drop_bad_mac 0 drop_replay 0$" "$out/cm" ||
		fail "msg_cm's endpoints did not say they authenticated"
	! grep "courier stats .*: authenticated 1 drop_bad_mac [1-9]" "$out/cm" ||
		fail "an endpoint of msg_cm refused a datagram of its own job"
	echo "$name: $(grep -c "authenticated 1 drop_bad_mac 0" "$out/cm") endpoints authenticated"
fi

name="auth_key in hints"
timeout -k 5 30 "$prog" -p "$prov" -x api >"$out/pair" 2>&1 || fail "auth -x api failed"
grep "^auth: " "$out/pair" | sed "s/^/$name: /"
echo "$me: PASS"
exit 0
