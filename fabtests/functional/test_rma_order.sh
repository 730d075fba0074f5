#!/bin/sh
# rma_order over two processes: big RMA followed at once by small writes, reads and a message
# keeps RAW, WAR, WAW and SAW; a big write completes while its initiator sleeps, and a region
# closed under one is never written after fi_close returns; an initiator killed (SIGKILL) in
# the middle of big RMA leaves a target that neither hangs nor waits to close its region;
# see rma_order.c. Four deaths land where chance puts them (how many came while the initiator
# held a lease is printed from the target's info log); in a fifth the initiator holds its
# first lease for 1 s (FI_COURIER_LEASE_HOLD, for tests) and dies holding it, which the
# target must log.
# A big write posted while nothing else is in flight is copied by the initiator alone (through
# the target's window, proto/cour_rma_push.c): order runs with that and without it; lease and
# death are about the shared copy's leases, so pushing is off for them.
d=$(dirname "$0")
"$d/run_pair.sh" rma_order -x order || exit 1
FI_COURIER_SHM_PUSH=0 "$d/run_pair.sh" rma_order -x order || exit 1
FI_COURIER_SHM_PUSH=0; export FI_COURIER_SHM_PUSH
# lease: the initiator's process sleeps, threads and all (no progress thread under manual
# progress, which courier otherwise runs)
COUR_FT_CLIENT_ENV=FI_COURIER_MANUAL_THREAD=0 "$d/run_pair.sh" rma_order -x lease || exit 1
out=$(mktemp -d "${TMPDIR:-/tmp}/rma_death.XXXXXX") || exit 99
trap 'rm -rf "$out"' EXIT
# the initiator passes when SIGKILL ended it (as its own timer arranges)
printf '#!/bin/sh\n"$@"\n[ $? = 137 ]\n' >"$out/killed"
chmod +x "$out/killed"
held=0
for i in 1 2 3 4 5; do
	hold=
	[ $i = 5 ] && hold=FI_COURIER_LEASE_HOLD=1000
	COUR_FT_OUT_DIR=$out COUR_FT_CLIENT_WRAP=$out/killed \
		COUR_FT_CLIENT_ENV="FI_COURIER_MANUAL_THREAD=0 $hold" \
		COUR_FT_SERVER_ENV="FI_LOG_LEVEL=info FI_LOG_PROV=courier" \
		"$d/run_pair.sh" rma_order -x death >"$out/pair" 2>&1 ||
		{ grep -v "^libfabric:" "$out/pair"; echo "test_rma_order.sh: death $i failed"; exit 1; }
	grep "^death:" "$out/server.out"
	if grep -q "exited while copying its half" "$out/server.out"; then held=$((held + 1));
	elif [ -n "$hold" ] && [ "${FI_COURIER_SHM:-1}" != 0 ] &&
	     [ "${COUR_FT_PROVIDER:-courier}" = courier ]; then
		echo "test_rma_order.sh: FAIL: the initiator held its lease when killed, and" \
			"the target did not say it saw that"
		exit 1
	fi
done
echo "test_rma_order.sh: the initiator died holding a lease in $held of 5 runs (one arranged)"
