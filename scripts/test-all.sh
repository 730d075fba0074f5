#!/usr/bin/env bash
# README's second command (and CI's): install, build, and run every test:
#   0. the layers: no file includes a header of a layer above its own, no include cycle
#      (scripts/check-layers.sh, and its own test on planted violations)
#   1. warnings-as-errors build, Criterion unit tests and fabtests functional tests (make check),
#      and `make install` checked to stay under the prefix
#   2. Debian's Open MPI, two-sided and one-sided over courier, at 2 and 8 ranks on one host,
#      and at 4 ranks on two emulated hosts (network namespaces) with packet loss between them,
#      there also with a job key (every datagram authenticated), and an all-to-all across
#      four emulated hosts on one switch whose ports are shaped to 1 Gbit/s with 256 KB queues;
#      and as users run it, with only the provider selected, at 2, 3 and 8 ranks; one big
#      host at 64 and 128 ranks (oversubscribed: every byte of an all-to-all, a ring and
#      one-sided puts, gets and fetch-and-adds checked, and nothing left in /dev/shm after
#      the job or after kill -9 of its ranks)
#   3. 1 and 2 again with shared memory off (FI_COURIER_SHM=0): same-host peers over UDP (as
#      root, make check's run with shared memory off is make distcheck's, in 7); the loss tests between two namespaces (5% dropped each way, courier's injector off so that
#      runs leave as UDP GSO calls) with GSO and GRO each on and off
#   4. the packet path fuzzed, then unit and functional tests again under AddressSanitizer +
#      UndefinedBehaviorSanitizer
#   5. the multi-threaded functional tests under ThreadSanitizer
#   6. on Debian 12, as root: in a Debian 13 root (scripts/debian13.sh) the -Werror build and
#      Open MPI 5 (two-sided, its defaults, two emulated hosts)
#   7. as root, the release and the Debian packages (scripts/package.sh), on this host and in
#      the Debian 13 root: make distcheck (the tarball built with -Werror in a tree of its own,
#      the whole of make check there: here with shared memory off, in Debian 13 with it on),
#      the packages built from that tarball (lintian clean), installed into a clean root of
#      their release and checked there without FI_PROVIDER_PATH (cour_selftest, cour_selftest
#      mpi), purged
# Prints "N passed, N failed" at the end; exits non-zero on any failure.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bash "$top/scripts/install-deps.sh" || exit 1
pass=0; fail=0; failed=()
stage() {   # stage NAME COMMAND...
	local name=$1; shift
	local t0=$SECONDS
	echo "=== $name"
	if "$@"; then pass=$((pass + 1)); echo "=== $name: ok ($((SECONDS - t0)) s)"
	else fail=$((fail + 1)); failed+=("$name"); echo "=== $name: FAILED ($((SECONDS - t0)) s)"; fi
}
check() {   # check BUILDDIR [MAKE ARGS]: make check, with the logs of failures (scripts/check.sh)
	bash "$top/scripts/check.sh" "$@"
}
stage "layers (util < wire < proto < objects, no include cycle)" \
	bash -c "bash '$top/scripts/check-layers.sh' '$top' && bash '$top/scripts/test-check-layers.sh'"
stage "build (-Werror)" bash "$top/scripts/build.sh" "$top/build-ci" --enable-werror
stage "make check" check "$top/build-ci"
stage "make install under the prefix" bash "$top/scripts/check-install.sh" "$top/build-ci"
stage "Open MPI over courier (2 and 8 ranks)" bash "$top/fabtests/mpi/run-mpi.sh" "$top/build-ci"
stage "Open MPI with its defaults, only the provider selected (2, 3 and 8 ranks)" \
	bash "$top/fabtests/mpi/run-mpi-defaults.sh" "$top/build-ci"
stage "Open MPI one-sided over courier, btl/ofi two-sided too (2 and 8 ranks)" \
	bash "$top/fabtests/mpi/run-mpi-osc.sh" "$top/build-ci"
stage "Open MPI on one big host: 64 and 128 ranks, two- and one-sided, only the provider selected (nothing left after the job or kill -9)" \
	bash "$top/fabtests/scripts/bighost-bench.sh" -n "64 128" -p courier -1 "$top/build-ci"
stage "Open MPI between two emulated hosts (netns, 2% UDP loss)" \
	bash "$top/fabtests/mpi/run-mpi-netns.sh" "$top/build-ci"
stage "Open MPI between two emulated hosts with a job key (authenticated, 2% loss)" \
	env AUTH_KEY=1 bash "$top/fabtests/mpi/run-mpi-netns.sh" "$top/build-ci"
stage "Open MPI all-to-all across four emulated hosts, every switch port shaped (1 Gbit/s, 256 KB)" \
	bash "$top/fabtests/mpi/run-mpi-bridge.sh" "$top/build-ci"
# (as root, make distcheck runs it, in the package stage below)
[ "$(id -u)" = 0 ] ||
	stage "make check, shared memory off" env FI_COURIER_SHM=0 bash "$top/scripts/check.sh" "$top/build-ci"
loss_tests="fabtests/functional/test_netns_loss.sh fabtests/functional/test_netns_loss_rma.sh"
for gso in 1 0; do
	for gro in 1 0; do
		stage "loss tests, UDP GSO $gso GRO $gro" env COUR_LOSS_FAULT= FI_COURIER_UDP_GSO=$gso \
			FI_COURIER_UDP_GRO=$gro bash "$top/scripts/check.sh" "$top/build-ci" "TESTS=$loss_tests"
	done
done
# with a job key: every datagram authenticated, big data read in place and checked there
keyfile=$(mktemp) && chmod 600 "$keyfile" && head -c 32 /dev/urandom >"$keyfile"
stage "loss tests with a key (UDP GSO and GRO, read in place)" env COUR_LOSS_FAULT= \
	FI_COURIER_AUTH_KEY_FILE="$keyfile" bash "$top/scripts/check.sh" "$top/build-ci" \
	"TESTS=$loss_tests"
stage "Open MPI two- and one-sided, shared memory off" env FI_COURIER_SHM=0 bash -c \
	"bash $top/fabtests/mpi/run-mpi.sh $top/build-ci && bash $top/fabtests/mpi/run-mpi-osc.sh $top/build-ci &&
	 bash $top/fabtests/mpi/run-mpi-defaults.sh $top/build-ci"
# the harness forges packets with valid sessions, sequence numbers and crc, which can derail a
# session or replace its data (crc32c is no authenticator): those are counted and recovered;
# crashes, sanitizer reports and livelocks fail. Then 30 s with both endpoints keyed: raw
# bytes unsigned (the MAC check) and signed (the parser behind it, as a key holder's)
stage "fuzz the packet path (60 s, then 30 s keyed; libFuzzer+ASan+UBSan)" env FUZZ_STALL=recover FUZZ_SECONDS=60 \
	sh "$top/test/fuzz/run-fuzz.sh" "$top/build-ci"
stage "build (ASan+UBSan)" bash "$top/scripts/build.sh" "$top/build-asan" --enable-werror --enable-sanitizers
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
stage "make check (ASan+UBSan)" check "$top/build-asan"
# FI_THREAD_SAFE and the progress thread: the functional tests whose processes run several
# threads in the provider at once (Criterion's runner itself does not run under TSan)
tsan_tests="test_threads.sh test_msg_basic.sh test_msg_errors.sh test_rma.sh test_atomic_hammer.sh
	test_peer_death.sh test_rma_order.sh test_shm_stream.sh"
stage "build (ThreadSanitizer)" bash "$top/scripts/build.sh" "$top/build-tsan" --enable-werror --enable-tsan
export TSAN_OPTIONS=halt_on_error=0:exitcode=66:second_deadlock_stack=1
# sanitized transfers are slow (test_rma.sh's 64 MiB took 20 s each under TSan on a busy
# machine): more time for each pair
export COUR_FT_TIMEOUT=240
stage "threads and progress threads (ThreadSanitizer)" check "$top/build-tsan" \
	TESTS="$(for t in $tsan_tests; do printf 'fabtests/functional/%s ' "$t"; done)"
# Debian 13 (libfabric 2.1, Open MPI 5.0, gcc 14) in a debootstrap root on this host (cached
# by scripts/debian13.sh); not when this already is Debian 13
if [ "$(cut -d. -f1 /etc/debian_version 2>/dev/null)" = 12 ] && [ "$(id -u)" = 0 ]; then
	d13="bash $top/scripts/debian13.sh run"
	stage "Debian 13: root and dependencies (debootstrap, cached)" bash "$top/scripts/debian13.sh" setup
	# (for the Open MPI runs: make check runs in the Debian 13 distcheck, below)
	stage "Debian 13: build (-Werror, gcc 14, libfabric 2.1)" \
		$d13 env COUR_BUILD_TESTS=0 bash scripts/build.sh build-ci --enable-werror
	stage "Debian 13: Open MPI 5 two-sided (2 and 8 ranks)" \
		$d13 bash fabtests/mpi/run-mpi.sh build-ci
	stage "Debian 13: Open MPI 5 with its defaults (2, 3 and 8 ranks)" \
		$d13 bash fabtests/mpi/run-mpi-defaults.sh build-ci
	stage "Debian 13: Open MPI 5 between two emulated hosts (netns, 2% UDP loss)" \
		$d13 bash fabtests/mpi/run-mpi-netns.sh build-ci
fi
# the release tarball through make distcheck, and the Debian packages built from it, lintian
# clean, installed into a clean root of their release and checked there without
# FI_PROVIDER_PATH (scripts/package.sh)
if [ "$(id -u)" = 0 ]; then
	stage "make distcheck, shared memory off (make check from the tarball); Debian packages built from it (lintian)" \
		env FI_COURIER_SHM=0 bash "$top/scripts/package.sh" build "$top/packages/host"
	stage "Debian packages: installed in a clean root, checked, purged" \
		bash "$top/scripts/package.sh" check "$top/packages/host"
	if [ "$(cut -d. -f1 /etc/debian_version 2>/dev/null)" = 12 ]; then
		stage "Debian 13: make distcheck (make check from the tarball); packages built from it (lintian)" \
			$d13 bash scripts/package.sh build packages/trixie
		stage "Debian 13: packages installed in a clean root, checked, purged" \
			bash "$top/scripts/package.sh" check \
			"${COUR_DEBIAN13_ROOT:-/var/cache/courier/debian13}/work/courier/packages/trixie"
	fi
fi
rm -f "$keyfile"
echo
[ $fail -eq 0 ] || echo "failed stages: ${failed[*]}"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
