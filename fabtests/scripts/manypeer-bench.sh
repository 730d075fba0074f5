#!/usr/bin/env bash
# manypeer-bench.sh: what a receiver pays per peer as the number of peers N grows, for several
# providers side by side on 127.0.0.1: cour_manypeer once per (provider, N), each run under
# timeout(1), and one markdown table: idle and post-burst server memory per peer (right after
# the burst, and what is kept after another idle period), first-contact
# time, the 8 B message rate to one peer while the N-1 others sit idle (and its ratio to the
# same provider's rate at N=1), and fi_av_insert of AV_COUNT synthetic addresses (bytes per
# entry, ns per insert; independent of N, measured in every run).
#
# usage: manypeer-bench.sh [-n "Ns"] [-r rounds] [-k] [-b bindir] [-o logdir]
#                           [-- <cour_manypeer options>]
#   -n NS      peer counts, space separated (default "1 64 1024 4096")
#   -r ROUNDS  runs of each (provider, N) (default 1), rounds outermost so that a change of load
#              hits every provider; the table shows medians. Rates on a small VM can settle in
#              one of two levels for a whole run, a factor 2 apart: use 3 or more for ratios
#   -k         keep the log directory even when every run succeeded (-o DIR is always kept)
#   -b DIR     directory holding cour_manypeer (default: ./fabtests/bench, then next to this
#              script, then $PATH)
#   -o DIR     write logs there (default: a fresh mktemp directory)
#   options after -- go to every run, e.g. -- -s 500 -W 32
# environment:
#   PROVIDERS              space separated (default: courier tcp udp;ofi_rxd); courier-udp is
#                          courier with FI_COURIER_SHM=0 (same-host peers over UDP, as they
#                          would be between hosts; courier itself uses shared memory here)
#   COURIER_PROVIDER_PATH  directory holding libcourier-fi.so, FI_PROVIDER_PATH of the courier
#                          runs only (default: the build's .libs, found from the bindir); the
#                          library is copied into the log directory at start, so a rebuild
#                          during the run cannot mix two builds
#   COURIER_ENV            extra VAR=value for the courier runs, e.g. "FI_COURIER_WIN_IDLE=100"
#   RUN_TIMEOUT            seconds one run may take before timeout(1) ends it (default 300)
#   PHASE_TIMEOUT          cour_manypeer -T: seconds each phase of a run may take (default 60)
#   AV_COUNT               addresses in the insert test, 0 skips it (default 100000)
#   RATE                   cour_manypeer -R: "2s" for seconds, a number for messages (default 2s)
#
# A run that fails, wholly or in part, does not stop the script: its missing cells show "fail"
# and the row a note [k], with the reason (the program's FAIL line: the phase and the call that
# failed) under the table. Each run is two processes, a server and a forked one with the N client
# endpoints; both poll, so on a 2-cpu host rates and times move with whatever else runs (the
# load average is printed with each run). Memory figures move in pages, so at small N they are
# coarse. Exit status: 0 if every run succeeded, 1 if a courier run failed, 2 if only another
# provider's did, 64 on a usage error or a missing program.
set -u

NS="1 64 1024 4096"
ROUNDS=1
KEEP=0
BIN_DIR=""
LOG_DIR=""
usage() {
	echo "usage: $0 [-n \"Ns\"] [-r rounds] [-k] [-b bindir] [-o logdir]" \
		"[-- <cour_manypeer options>]" >&2
	exit 64
}
while getopts "n:r:kb:o:h" opt; do
	case $opt in
	n) NS=$OPTARG ;;
	r) ROUNDS=$OPTARG ;;
	k) KEEP=1 ;;
	b) BIN_DIR=$OPTARG ;;
	o) LOG_DIR=$OPTARG ;;
	h) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
EXTRA=("$@")
for n in $NS; do
	case $n in ''|*[!0-9]*|0) usage ;; esac
done
[ -n "${NS// /}" ] || usage
case $ROUNDS in ''|*[!0-9]*|0) usage ;; esac

read -r -a PROV_LIST <<< "${PROVIDERS:-courier tcp udp;ofi_rxd}"
read -r -a COURIER_ENV_LIST <<< "${COURIER_ENV:-}"
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
PHASE_TIMEOUT=${PHASE_TIMEOUT:-60}
AV_COUNT=${AV_COUNT:-100000}
RATE=${RATE:-2s}
for v in "$RUN_TIMEOUT" "$PHASE_TIMEOUT"; do
	case $v in ''|*[!0-9]*|0) usage ;; esac
done
case $AV_COUNT in ''|*[!0-9]*) usage ;; esac
[ ${#PROV_LIST[@]} -gt 0 ] || usage

SCRIPT_DIR=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench-env.sh
. "$SCRIPT_DIR/bench-env.sh"

BIN_DIR=$(cour_find_bin_dir "$BIN_DIR") || {
	echo "manypeer-bench.sh: cannot find the benchmarks; build first or pass -b <dir>" >&2
	exit 64
}
PROG=$BIN_DIR/cour_manypeer
if [ ! -x "$PROG" ]; then
	echo "manypeer-bench.sh: $BIN_DIR has no cour_manypeer" >&2
	exit 64
fi
COURIER_PROVIDER_PATH=${COURIER_PROVIDER_PATH:-$(cour_find_provider_path "$BIN_DIR")}

cour_log_dir manypeer || exit 1

# a make in the build tree during the run must not mix two builds in one table
COURIER_FROM=${COURIER_PROVIDER_PATH:-the default path}
if [ -n "$COURIER_PROVIDER_PATH" ] && [ -f "$COURIER_PROVIDER_PATH/libcourier-fi.so" ]; then
	COURIER_FROM="$COURIER_PROVIDER_PATH/libcourier-fi.so, built $(date -r \
		"$COURIER_PROVIDER_PATH/libcourier-fi.so" '+%F %T'), copied to $LOG_DIR/courier-lib"
	mkdir -p "$LOG_DIR/courier-lib" &&
		cp "$COURIER_PROVIDER_PATH/libcourier-fi.so" "$LOG_DIR/courier-lib/" || exit 1
	COURIER_PROVIDER_PATH=$LOG_DIR/courier-lib
fi

# set_run PROV: RUN_ENV (an env(1) command) and RUN_PROV (the -p value) for one provider
set_run() {
	# the runs pick their provider with -p; a FI_PROVIDER of the caller would hide it
	RUN_ENV=(env -u FI_PROVIDER)
	RUN_PROV=$1
	case $1 in
	courier|courier-udp)
		[ -n "$COURIER_PROVIDER_PATH" ] &&
			RUN_ENV+=("FI_PROVIDER_PATH=$COURIER_PROVIDER_PATH")
		RUN_ENV+=(FI_PROVIDER=courier "${COURIER_ENV_LIST[@]}")
		[ "$1" = courier-udp ] && RUN_ENV+=(FI_COURIER_SHM=0)
		RUN_PROV=courier
		;;
	esac
}

prov_tag() {
	local t=${1//;/_}
	echo "${t//[^A-Za-z0-9_.-]/}"
}

FAILED=()
COURIER_FAILED=0
OTHER_FAILED=0
NOTES=()		# footnote texts, [k] is NOTES[k-1]
declare -A V		# "prov|N|name" -> the values of the rounds, space separated
declare -A NOTE		# "prov|N" -> its footnotes, "[k]..."
declare -A SHOWN_N	# "prov|N" -> the N the run used, when RLIMIT_NOFILE capped it

declare -A NOTE_K	# "prov: text" and "prov N: text without its numbers" -> k: one reason
			# at several N, or in several rounds with other figures, is one footnote
NOTE_NS=()		# the N each footnote applies to

# note PROV N TEXT ROUND: a footnote for the row
note() {
	local key=$1:\ $3 loose k
	# shellcheck disable=SC2001 # a pattern replacement would need extglob
	loose="$1 $2: $(sed 's/[0-9][0-9.]*/#/g' <<< "$3")"
	k=${NOTE_K[$key]:-${NOTE_K[$loose]:-}}
	if [ -z "$k" ]; then
		NOTES+=("$3")
		NOTE_NS+=("$1, N=$2")
		k=${#NOTES[@]}
		NOTE_K[$key]=$k
		NOTE_K[$loose]=$k
	elif [[ ", ${NOTE_NS[k - 1]#*N=}, " != *", $2, "* ]]; then
		NOTE_NS[k - 1]+=", $2"
	fi
	[[ "${NOTE[$1|$2]:-}" == *"[$k]"* ]] || NOTE[$1|$2]+="[$k]"
	FAILED+=("$1 N=$2 round $4: $3")
	if [ "$1" = courier ] || [ "$1" = courier-udp ]; then COURIER_FAILED=1; else OTHER_FAILED=1; fi
}

# why LOG RC: the reason a run failed, in one line
why() {
	local log=$1 rc=$2 w
	w=$(sed -n 's/^FAIL //p' "$log" | head -1)
	if [ -z "$w" ]; then
		case $rc in
		124|137) w="no result within RUN_TIMEOUT=$RUN_TIMEOUT s: killed by timeout(1)" ;;
		*) w="exit status $rc" ;;
		esac
		local last
		last=$(grep -E 'cour_manypeer|failed|error' "$log" | tail -1)
		[ -n "$last" ] && w="$w; last message: $last"
	fi
	echo "$w"
}

# run PROV N ROUND: one run, its results recorded
run() {
	local prov=$1 n=$2 round=$3 log rc start=$SECONDS name val used
	log=$LOG_DIR/$(prov_tag "$prov").n$n.r$round.log
	set_run "$prov"
	"${RUN_ENV[@]}" timeout -k 5 "$RUN_TIMEOUT" "$PROG" -p "$RUN_PROV" -n "$n" \
		-T "$PHASE_TIMEOUT" -A "$AV_COUNT" -R "$RATE" "${EXTRA[@]}" > "$log" 2>&1
	rc=$?
	# shellcheck disable=SC2034 # name is read into the key
	while read -r _ name used val; do
		V[$prov|$n|$name]+="${V[$prov|$n|$name]:+ }$val"
		[ "$used" != "$n" ] && SHOWN_N[$prov|$n]="$n→$used"
	done < <(grep '^RESULT ' "$log")
	[ "$rc" = 0 ] || note "$prov" "$n" "$(why "$log" "$rc")" "$round"
	printf '# %s r%d %-12s N=%-5s %s (%ds, load %s)\n' "$(date +%T)" "$round" "$prov" "$n" \
		"$([ "$rc" = 0 ] && echo ok || echo "FAILED: $(why "$log" "$rc")")" \
		$((SECONDS - start)) "$(cut -d' ' -f1 /proc/loadavg)"
}

echo "# manypeer-bench: providers: ${PROV_LIST[*]}; N: $NS; $ROUNDS rounds; AV insert: $AV_COUNT;" \
	"rate: $RATE${EXTRA[*]:+; options: ${EXTRA[*]}}"
echo "# program: $PROG"
echo "# courier: $COURIER_FROM${COURIER_ENV:+; courier env: $COURIER_ENV}"
echo "# host: $(uname -n), $(nproc) cpus, load average: $(cut -d' ' -f1-3 /proc/loadavg)," \
	"RLIMIT_NOFILE hard $(ulimit -Hn)"
echo "# logs: $LOG_DIR"

# A provider libfabric does not load would fail every run the same way: say so once.
if command -v fi_info > /dev/null; then
	for prov in "${PROV_LIST[@]}"; do
		set_run "$prov"
		listed=$("${RUN_ENV[@]}" fi_info -l 2> /dev/null | sed -n 's/^\([^ ]*\):$/\1/p')
		for part in ${RUN_PROV//;/ }; do
			grep -q -x -F "$part" <<< "$listed" ||
				echo "# warning: libfabric has no provider $part: $prov will fail"
		done
	done
fi

T0=$SECONDS
for round in $(seq 1 "$ROUNDS"); do
	for n in $NS; do
		for prov in "${PROV_LIST[@]}"; do
			run "$prov" "$n" "$round"
		done
	done
done

# ---- the table ----
median() {	# median of the space-separated numbers in $1, or nothing
	tr ' ' '\n' <<< "$1" | sort -g | awk '{ v[NR] = $1 }
		END { if (NR) print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

cell() {	# cell KEY FORMAT: the median formatted, or "fail"
	local v
	v=$(median "${V[$1]:-}")
	# shellcheck disable=SC2059 # the format is the caller's
	if [ -z "$v" ]; then echo fail; else printf "$2" "$v"; fi
}
av_cell() {	# the insert test's cells: "-" when it was skipped
	if [ "$AV_COUNT" = 0 ]; then echo -; else cell "$@"; fi
}

echo
echo "| provider | N | idle B/peer | burst B/peer | burst+idle B/peer | first contact ms |" \
	"rate msg/s | rate / rate(N=1) | AV B/entry | AV ns/insert | note |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
for prov in "${PROV_LIST[@]}"; do
	for n in $NS; do
		k=$prov\|$n
		r1=$(median "${V[$prov|1|rate_msgs_per_s]:-}")
		rn=$(median "${V[$k|rate_msgs_per_s]:-}")
		if [ -n "$r1" ] && [ -n "$rn" ]; then
			ratio=$(awk -v a="$rn" -v b="$r1" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')
		elif [ -z "$rn" ]; then
			ratio=fail
		else
			ratio="n/a"
		fi
		printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$prov" \
			"${SHOWN_N[$k]:-$n}" \
			"$(cell "$k|idle_bytes_per_peer" '%.0f')" \
			"$(cell "$k|burst_bytes_per_peer" '%.0f')" \
			"$(cell "$k|burst_idle_bytes_per_peer" '%.0f')" \
			"$(cell "$k|first_contact_ms" '%.1f')" \
			"$(cell "$k|rate_msgs_per_s" '%.0f')" "$ratio" \
			"$(av_cell "$k|av_bytes_per_entry" '%.1f')" \
			"$(av_cell "$k|av_ns_per_insert" '%.0f')" \
			"${NOTE[$k]:-}"
	done
done
if [ ${#NOTES[@]} -gt 0 ]; then
	echo
	for i in "${!NOTES[@]}"; do
		echo "[$((i + 1))] ${NOTE_NS[$i]}: ${NOTES[$i]}"
	done
fi
echo
echo "# idle/burst B/peer: server VmRSS growth per peer from before any contact to after" \
	"8 B each way + idle, and after one 64 KiB message from every client at once (burst+idle:" \
	"the same after another idle period); rate: 8 B client 0 -> server, windows" \
	"acknowledged, N-1 peers idle"
echo "# wall time $((SECONDS - T0)) s; load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"

cour_bench_failed_or_clean

[ "$COURIER_FAILED" = 1 ] && exit 1
[ "$OTHER_FAILED" = 1 ] && exit 2
exit 0
