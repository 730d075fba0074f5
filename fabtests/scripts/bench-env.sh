# bench-env.sh: sourced by the benchmark scripts; finds the benchmark programs and an
# uninstalled courier build.
#
# cour_find_bin_dir [DIR]    prints the directory holding cour_pingpong: DIR if given and it
#                            holds it, else ./fabtests/bench, else ../bench next to the script,
#                            else $PATH; returns 1 if none
# cour_find_provider_path BINDIR
#                            prints the directory holding libcourier-fi.so of the build BINDIR
#                            belongs to (<builddir>/fabtests/bench -> <builddir>/.libs), or
#                            ./.libs; prints nothing if neither
# cour_log_dir NAME          LOG_DIR made if unset (a fresh cour-NAME.XXXXXX, MADE_LOG_DIR=1, so
#                            cour_bench_failed_or_clean may remove it), or created as given
# cour_bench_failed_or_clean
#                            after the tables: the failed runs, or the log directory removed
# The first two expect SCRIPT_DIR set to the calling script's directory.

cour_find_bin_dir() {
	local d
	for d in "${1:-}" "$PWD/fabtests/bench" "$SCRIPT_DIR/../bench"; do
		if [ -n "$d" ] && [ -x "$d/cour_pingpong" ]; then
			(cd "$d" && pwd)
			return 0
		fi
	done
	d=$(command -v cour_pingpong 2>/dev/null) || return 1
	dirname "$d"
}

cour_find_provider_path() {
	local d
	for d in "$1/../../.libs" "$PWD/.libs"; do
		if [ -e "$d/libcourier-fi.so" ]; then
			(cd "$d" && pwd)
			return 0
		fi
	done
}

# cour_log_dir NAME: the log directory of a benchmark script (LOG_DIR, from -o, or a fresh one)
cour_log_dir() {
	MADE_LOG_DIR=0
	if [ -z "${LOG_DIR:-}" ]; then
		LOG_DIR=$(mktemp -d "${TMPDIR:-/tmp}/cour-$1.XXXXXX") || return 1
		MADE_LOG_DIR=1
	else
		mkdir -p "$LOG_DIR" || return 1
	fi
}

# cour_bench_failed_or_clean: after a benchmark script's table, list its failed runs (FAILED,
# with their logs in LOG_DIR), or, when every run succeeded, remove the log directory it made
# itself (MADE_LOG_DIR=1) unless asked to keep it (KEEP=1).
cour_bench_failed_or_clean() {
	local f

	if [ ${#FAILED[@]} -gt 0 ]; then
		echo
		echo "# failed runs (logs in $LOG_DIR):"
		for f in "${FAILED[@]}"; do
			echo "#   $f"
		done
	elif [ "${KEEP:-0}" = 0 ] && [ "$MADE_LOG_DIR" = 1 ]; then
		rm -rf "$LOG_DIR"
	fi
}
