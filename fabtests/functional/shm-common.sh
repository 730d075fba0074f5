# Sourced by the tests of courier's shared-memory paths (test_shm_nocma.sh,
# test_shm_refuse_late.sh, test_shm_lone.sh...); test_eager_place.sh, over UDP, takes its
# setup, pair and statistics helpers only. $me names the test.

# shm_only: exit 77 (skip) unless courier with shared memory is under test
shm_only() {
	if [ "${COUR_FT_PROVIDER:-courier}" != courier ]; then
		echo "$me: skipped: tests courier's shared-memory path, not $COUR_FT_PROVIDER"
		exit 77
	fi
	if [ "${FI_COURIER_SHM:-1}" = 0 ]; then
		echo "$me: skipped: FI_COURIER_SHM=0 (no shared memory, so no single copy)"
		exit 77
	fi
}

# shm_setup NAME: $out, a directory removed at exit; statistics on, a per-run timeout; no
# failure yet (fail=0, which run checks set to 1)
shm_setup() {
	fail=0
	out=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX") || exit 99
	trap 'rm -rf "$out"' EXIT
	FI_COURIER_STATS=1
	export FI_COURIER_STATS
	COUR_FT_TIMEOUT=${COUR_FT_TIMEOUT:-60}
	export COUR_FT_TIMEOUT
}

# stat FILE NAME: NAME's value summed over the endpoints' "courier stats" lines in FILE
stat() {
	awk -v k="$2" '/^courier stats / { for (i = 4; i < NF; i++) if ($i == k) s += $(i + 1) }
		END { print s + 0 }' "$1"
}

# shm_begin NAME: shm_only, then shm_setup NAME
shm_begin() {
	shm_only
	shm_setup "$1"
}

# shm_pair NAME WHAT PROGRAM ARGS...: run_pair.sh PROGRAM ARGS, with each side's extra
# environment, wrapper and options taken from $se $ce $sw $cw $sa $ca and its output left in $out/NAME
# (server.out, client.out, pair). Prints "---- NAME: WHAT: exit RC, T s" and, on failure,
# the pair's output and a FAIL line (fail=1). Returns 0 when both sides passed.
shm_pair() {
	_pn=$1 _pw=$2
	shift 2
	mkdir "$out/$_pn" || exit 99
	_t0=$(date +%s)
	COUR_FT_OUT_DIR=$out/$_pn COUR_FT_SERVER_ENV=${se:-} COUR_FT_CLIENT_ENV=${ce:-} \
		COUR_FT_SERVER_WRAP=${sw:-} COUR_FT_CLIENT_WRAP=${cw:-} \
		COUR_FT_SERVER_ARGS=${sa:-} COUR_FT_CLIENT_ARGS=${ca:-} \
		"$here/run_pair.sh" "$@" >"$out/$_pn/pair" 2>&1
	_rc=$?
	echo "---- $_pn: $_pw: exit $_rc, $(( $(date +%s) - _t0 )) s"
	[ $_rc = 0 ] && return 0
	grep -v "^libfabric:" "$out/$_pn/pair"
	echo "$me: FAIL: $_pn exit $_rc"
	fail=1
	return 1
}

# shm_end: the verdict line, and the exit status
shm_end() {
	echo "$me: $([ $fail = 0 ] && echo PASS || echo FAIL)"
	exit $fail
}
