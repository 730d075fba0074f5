#!/bin/sh
# cour_udp_ceiling (eth-bench.sh's bare-UDP reference) over loopback: both sides exit 0, the
# server reports what arrived and the client a positive rate for it. Lost datagrams are no
# failure there (nothing paces the sender), so only a run where nothing arrives fails.
dir=$(mktemp -d "${TMPDIR:-/tmp}/udp_ceiling.XXXXXX") || exit 99
trap 'rm -rf "$dir"' EXIT
COUR_FT_OUT_DIR=$dir "$(dirname "$0")/run_pair.sh" fabtests/bench/cour_udp_ceiling \
	-S 64k -n 256 -w 16 > /dev/null || exit $?
if ! awk '$1 == "RESULT" && $2 == "bw" && $3 == 65536 && $4 > 0 { ok = 1 }
	  END { exit !ok }' "$dir/client.out"; then
	echo "test_udp_ceiling: the client reported no positive rate"
	cat "$dir/client.out"
	exit 1
fi
if ! grep -q "^# udp_ceiling (server): [1-9][0-9]* of [1-9][0-9]* bytes arrived" \
	"$dir/server.out"; then
	echo "test_udp_ceiling: the server did not report what arrived"
	cat "$dir/server.out"
	exit 1
fi
cat "$dir/client.out"
