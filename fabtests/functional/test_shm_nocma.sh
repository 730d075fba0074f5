#!/bin/sh
# shm_nocma: courier's same-host path when the kernel refuses single copy. Runs two-process
# tests over 127.0.0.1 (so over shared memory) with one side, then the other, then both under
# no_cma, a seccomp filter that makes process_vm_readv/writev fail with EPERM (as ptrace rules
# or a container's profile would):
#   stream_verify -b 128  >= 128 MiB, 1 B .. 4 MiB tagged and untagged, every byte checked
#                         (the client sends: large messages are rendezvous, pulled by the
#                         receiver where it can)
#   rma -S ...            fi_write, fi_read, fi_writedata of 1 B .. 4 MiB, every byte checked
#                         (the server is the target: it pulls writes and pushes reads)
# Each run must pass, and by courier's statistics (FI_COURIER_STATS=1, printed here) every
# denied side must have mapped its peer (shm_peers >= 1), counted the refusal
# (shm_copy_fallbacks >= 1), moved nothing by single copy (shm_single_copy_bytes 0) and logged
# the refusal at info level; when only the client is denied, the server, which may still
# single-copy, must have moved at least 1 MiB that way (the refusal is per direction).
# Skips (77) over another provider, with FI_COURIER_SHM=0, or where no_cma cannot install its
# filter (not x86_64, no seccomp). Environment as run_pair.sh (COUR_BUILD, COUR_FT_TIMEOUT).
set -u

here=$(cd "$(dirname "$0")" && pwd)
build=${COUR_BUILD:-$PWD}
me=test_shm_nocma.sh
. "$here/shm-common.sh"

nocma=$build/fabtests/functional/no_cma
[ -x "$nocma" ] || { echo "$me: no program $nocma" >&2; exit 99; }
shm_only
"$nocma" true
rc=$?
if [ $rc = 77 ]; then
	echo "$me: skipped: no_cma cannot install its seccomp filter here"
	exit 77
elif [ $rc != 0 ]; then
	echo "$me: no_cma does not work (exit $rc)"
	exit 99
fi

shm_setup shm_nocma
log_env="FI_LOG_LEVEL=info FI_LOG_PROV=courier"

# check NAME SIDE DENIED(0/1) PEER_DENIED(0/1): the statistics and log of one side
check() {
	f=$out/$1/$2.out
	what=allowed
	[ "$3" = 1 ] && what=denied
	grep "^courier stats .*shm_peers" "$f" | sed "s/^/  $2 ($what): /"
	peers=$(stat "$f" shm_peers)
	fb=$(stat "$f" shm_copy_fallbacks)
	sc=$(stat "$f" shm_single_copy_bytes)
	bad=
	[ "$peers" -ge 1 ] || bad="$bad shm_peers $peers (the pair did not use shared memory);"
	if [ "$3" = 1 ]; then
		[ "$fb" -ge 1 ] || bad="$bad shm_copy_fallbacks $fb, want >= 1;"
		[ "$sc" = 0 ] || bad="$bad shm_single_copy_bytes $sc, want 0;"
		grep -q "<info>.*single copy.*refused" "$f" ||
			bad="$bad no info-level log of the refusal;"
	elif [ "$2" = server ] && [ "$4" = 1 ]; then
		[ "$sc" -ge 1048576 ] ||
			bad="$bad shm_single_copy_bytes $sc, want >= 1 MiB (single copy still allowed);"
	fi
	if [ -n "$bad" ]; then
		echo "$me: FAIL: $1: $2:$bad"
		fail=1
	fi
}

# run NAME DENIED(server|client|both) PROGRAM ARGS...
run() {
	name=$1 denied=$2
	shift 2
	sw='' cw='' se='' ce='' sd=0 cd=0
	if [ "$denied" != client ]; then sw=$nocma se=$log_env sd=1; fi
	if [ "$denied" != server ]; then cw=$nocma ce=$log_env cd=1; fi
	[ "$denied" = both ] && whom="both sides" || whom="the $denied"
	shm_pair "$name" "$* with single copy denied to $whom" "$@" || return
	check "$name" server $sd $cd
	check "$name" client $cd $sd
}

sizes=1,7,4097,32767,32768,65537,1m,4m,4194305
for who in server client both; do
	run "stream_$who" $who stream_verify -b 128
	run "rma_$who" $who rma -k basic -S $sizes
done
shm_end
