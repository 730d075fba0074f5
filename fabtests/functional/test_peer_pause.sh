#!/bin/sh
# A live peer is never declared dead: stream_verify (every byte checked) while the receiving
# process is stopped with SIGSTOP for COUR_PAUSE_S seconds (default 30: longer than any
# retransmit backoff, shorter than FI_COURIER_PEER_TIMEOUT) and then continued, once over
# shared memory and once over UDP (FI_COURIER_SHM=0): the stream must resume and finish
# intact, and the sender must have warned that the peer went quiet (FI_COURIER_PEER_WARN).
# Environment as run_pair.sh.
set -u
here=$(cd "$(dirname "$0")" && pwd)
pause=${COUR_PAUSE_S:-30}
out=$(mktemp -d "${TMPDIR:-/tmp}/peer_pause.XXXXXX") || exit 99
trap 'rm -rf "$out"' EXIT
printf '#!/bin/sh\necho $$ >"%s/server.pid"\nexec "$@"\n' "$out" >"$out/wrap"
chmod +x "$out/wrap"
prov=${COUR_FT_PROVIDER:-courier}
for shm in 1 0; do
	rm -f "$out/server.pid"
	TMPDIR=$out FI_COURIER_SHM=$shm COUR_FT_TIMEOUT=$((pause + 60)) COUR_FT_OUT_DIR=$out \
		COUR_FT_SERVER_WRAP=$out/wrap COUR_FT_CLIENT_ENV="FI_COURIER_PEER_WARN=5000 FI_COURIER_STATS=1 ${COUR_PAUSE_ENV:-}" \
		"$here/run_pair.sh" stream_verify -b 3072 -T $((pause + 55)) >"$out/pair" 2>&1 &
	pair=$!
	# stop it once the stream runs (the sender says so when it starts sending)
	i=0
	while ! grep -qs "sending over" "$out"/run_pair.*/client && [ $i -lt 200 ]; do
		sleep 0.05; i=$((i + 1))
	done
	sleep 0.2
	spid=$(cat "$out/server.pid" 2>/dev/null)
	if [ -z "$spid" ] || ! kill -STOP "$spid" 2>/dev/null; then
		wait $pair; cat "$out/pair"
		echo "test_peer_pause.sh: could not stop the receiver (shm $shm)"; exit 1
	fi
	sleep "$pause"
	kill -CONT "$spid"
	wait $pair
	rc=$?
	if [ $rc -ne 0 ]; then
		cat "$out/pair"
		echo "test_peer_pause.sh: FAIL: the stream did not survive a ${pause} s SIGSTOP of the" \
			"receiver (shm $shm)"
		exit 1
	fi
	grep -h "MiB\|PASS" "$out/server.out" | tail -2
	# the sender waited on the stopped receiver and said so (counted: warnings may not print)
	if [ "$prov" = courier ] && ! grep -q "peer_silences [1-9]" "$out/client.out"; then
		echo "test_peer_pause.sh: (shm $shm) the sender never counted the receiver quiet"
		exit 1
	fi
	echo "peer pause: shm $shm: the receiver stopped ${pause} s, the stream finished intact"
done
