#!/bin/sh
# shm_refuse_late: single copy refused in the middle of a run (as when a process becomes
# undumpable, or a policy changes, after its peers mapped it). FI_COURIER_CMA_REFUSE_AFTER=N
# makes every single copy of one process after its first N fail as the kernel's EPERM would,
# so refusals land inside operations already under way: a big message whose receiver pulls
# one half and whose sender writes the other, a big RMA whose target copies one half and whose
# initiator the other (each under way when its side is refused), plain pulls and pushes.
#   stream_verify -b 128  1 B .. 4 MiB tagged and untagged messages, every byte checked
#   rma -S ...            fi_write, fi_read, fi_writedata of 1 B .. 4 MiB, every byte checked
# with the server refused (early and late), then the client, then both. Each run must pass,
# and the refused side's statistics must show single copies before the refusal and the
# fallback counted after it.
# Skips (77) over another provider and with FI_COURIER_SHM=0. Environment as run_pair.sh.
set -u

here=$(cd "$(dirname "$0")" && pwd)
me=test_shm_refuse_late.sh
. "$here/shm-common.sh"
shm_begin shm_refuse

# run NAME SIDE N PROGRAM ARGS...: SIDE's single copies after its first N are refused
run() {
	name=$1 side=$2 n=$3
	shift 3
	se='' ce=''
	env="FI_COURIER_CMA_REFUSE_AFTER=$n FI_LOG_LEVEL=info FI_LOG_PROV=courier"
	if [ "$side" = server ]; then se=$env; else ce=$env; fi
	shm_pair "$name" "$* with the $side's single copies refused after $n" "$@" || return
	f=$out/$name/$side.out
	sc=$(stat "$f" shm_single_copy_bytes)
	fb=$(stat "$f" shm_copy_fallbacks)
	echo "  $side: single copy $sc bytes, fallbacks $fb"
	bad=
	# (more than the 8 bytes of the HELLO's probe: a page at least)
	[ "$sc" -ge 4096 ] || bad="$bad no single copy before the refusal ($sc bytes);"
	[ "$fb" -ge 1 ] || bad="$bad no fallback counted;"
	grep -q "<info>.*single copy.*refused" "$f" || bad="$bad no info-level log of the refusal;"
	if [ -n "$bad" ]; then
		echo "$me: FAIL: $name:$bad"
		fail=1
	fi
}

# run_late NAME SIDE "N..." PROGRAM ARGS...: as run, with the first N of the list whose refusal
# lands inside the run (a fallback is counted); the last one is judged as run judges. How many
# single copies a side makes in a whole run depends on timing (which messages meet posted
# receives, which go as plain rendezvous behind a request still waiting; since messages below
# 256 KiB go through the ring, 25 to 40 in a plain build of 128 MB: the probe, then a first
# page and the rest of the receiver's half for each big message; fewer under load or ASan),
# so any fixed point can fall past the end: every run is judged by what
# happened in it, and a run whose refused side made no more than N single copies (it passed,
# nothing fell back) is tried again with the refusal earlier
run_late() {
	rl_name=$1 rl_side=$2 rl_ns=$3
	shift 3
	for rl_n in $rl_ns; do
		rl_last=$rl_n
	done
	for rl_n in $rl_ns; do
		if [ "$rl_n" = "$rl_last" ]; then
			run "$rl_name" "$rl_side" "$rl_n" "$@"
			return
		fi
		rl_save=$fail
		rl_log=$out/$rl_name.try$rl_n.log
		run "$rl_name.try$rl_n" "$rl_side" "$rl_n" "$@" >"$rl_log" 2>&1
		rl_fb=$(stat "$out/$rl_name.try$rl_n/$rl_side.out" shm_copy_fallbacks 2>/dev/null)
		# a program that failed, or a refusal that landed: judged as it is
		if ! grep -q ": exit 0," "$rl_log" || [ "${rl_fb:-0}" -ge 1 ] 2>/dev/null; then
			cat "$rl_log"
			return
		fi
		fail=$rl_save
		echo "  ($rl_name: the $rl_side made fewer than $rl_n single copies; the refusal" \
		     "moves earlier)"
	done
}

# N picks where the refusal lands: early (small pulls), or among the big operations copied by
# both sides (a client copies nothing but its halves of those)
sizes=1,4097,32768,65537,262144,1m,4m,4194305
run_late stream_server_early server "6 3 2" stream_verify -b 128
run_late stream_server_late server "30 18 12 6" stream_verify -b 128
run_late stream_client client "2 1" stream_verify -b 128
# scan CLIENT_N: every point among the server's first 24 single copies (25 to 40 in a run):
# some land between a receiver's first page and the rest of its half, which the sender must
# then write too; and with the client (the sender) refused after CLIENT_N copies, it cannot,
# and sends that part in packets
scan() {
	n=1
	ce=
	[ -z "$1" ] || ce="FI_COURIER_CMA_REFUSE_AFTER=$1"
	while [ $n -le 24 ]; do
		se="FI_COURIER_CMA_REFUSE_AFTER=$n"
		shm_pair "scan_$1_$n" "stream_verify with the server refused after $n copies${1:+ \
and the client after $1}" stream_verify -b 128
		n=$((n + 1))
	done
}
scan ""
scan 1
run_late rma_server_early server "6 3 1" rma -k basic -S $sizes
run_late rma_server_split server "20 12 6" rma -k basic -S $sizes    # the first shared RMA's own half
run_late rma_server_late server "35 24 12 6" rma -k basic -S $sizes
run_late rma_client client "2 1" rma -k basic -S $sizes
shm_end
