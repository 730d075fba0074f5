# Sourced by the tests of courier's single-copy fallbacks (test_shm_nocma.sh,
# test_shm_refuse_late.sh); $me names the test.

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

# shm_end: the verdict line, and the exit status
shm_end() {
	echo "$me: $([ $fail = 0 ] && echo PASS || echo FAIL)"
	exit $fail
}
