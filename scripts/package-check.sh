#!/usr/bin/env bash
# package-check.sh DIR: run by package.sh check inside a clean root. Installs DIR's packages
# with apt-get (their dependencies from the archive), checks them as a user would, without
# FI_PROVIDER_PATH (fi_info, the man pages, Wireshark's plugins, cour_pingpong, cour_selftest
# and cour_selftest mpi), then purges them and checks that none of their files is left and
# that Open MPI's configuration is as its package left it.
set -euo pipefail
dir=${1:?usage: package-check.sh DIR}
me=package-check.sh
fail() { echo "$me: FAIL: $*" >&2; exit 1; }
unset FI_PROVIDER_PATH FI_PROVIDER
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "$dir"/*.deb libfabric-bin tshark man-db \
	>/tmp/install.log 2>&1 || { tail -30 /tmp/install.log; fail "apt-get install"; }
pkgs="libfabric-courier libfabric-courier-dev courier-tests courier-mpi-tests"
files=$(dpkg -L $pkgs | while read -r f; do [ -f "$f" ] && echo "$f"; done)
echo "$me: installed: $(echo "$files" | wc -l) files"

fi_info -p courier >/tmp/fi_info.out 2>&1 || { cat /tmp/fi_info.out; fail "fi_info -p courier"; }
grep -aq "provider: courier" /tmp/fi_info.out || fail "fi_info lists no courier provider"
echo "$me: fi_info -p courier: $(grep -c 'provider: courier' /tmp/fi_info.out) infos"
# the version the provider reports is the package's (major.minor: fi_info's prov_version)
pver=$(dpkg-query -W -f='${Version}' libfabric-courier)
want=$(echo "$pver" | cut -d- -f1 | cut -d. -f1,2)
got=$(awk '/provider: courier/ { p = 1 } p && /version:/ { print $2; exit }' /tmp/fi_info.out)
[ "$got" = "$want" ] || fail "fi_info reports version $got, the package is $pver"
echo "$me: fi_info's version $got, the package's $pver"
# (into files: grep -q ending a pipe early would fail the writer, and pipefail with it)
fi_info -e -p courier >/tmp/fi_info_e.out 2>/dev/null || true
grep -aq "FI_COURIER_AUTH_KEY_FILE" /tmp/fi_info_e.out ||
	fail "fi_info -e -p courier shows no FI_COURIER_ parameter"
man -w fi_courier >/dev/null 2>&1 || fail "man fi_courier: no page"
MANPAGER=cat MANWIDTH=80 man fi_courier >/tmp/man.out 2>/dev/null || true
grep -aq "courier fabric provider" /tmp/man.out || fail "man fi_courier: not the courier page"
MANPAGER=cat MANWIDTH=80 man cour_pingpong >/tmp/man1.out 2>/dev/null || true
grep -aq "cour_pingpong" /tmp/man1.out || fail "man cour_pingpong: no page"
tshark -G plugins >/tmp/plugins.out 2>/dev/null || true
grep -aq "courier.lua" /tmp/plugins.out || fail "tshark lists no courier.lua"
echo "$me: fi_info -e, man fi_courier, tshark -G plugins: found"

port=$((40000 + RANDOM % 9000))
cour_pingpong -p courier -P "$port" -T 30 >/tmp/pp_server.out 2>&1 &
spid=$!
sleep 0.5
cour_pingpong -p courier -P "$port" -T 30 -S 8,4k -n 1000 127.0.0.1 >/tmp/pp_client.out 2>&1 ||
	{ cat /tmp/pp_client.out /tmp/pp_server.out; fail "cour_pingpong"; }
wait $spid || { cat /tmp/pp_server.out; fail "cour_pingpong server"; }
grep -aq "^RESULT" /tmp/pp_client.out || fail "cour_pingpong printed no result"
echo "$me: cour_pingpong: $(grep '^RESULT' /tmp/pp_client.out | tr '\n' ' ')"

# the functional programs between two processes (shared memory, then UDP), and the README's
# Open MPI recipes (two- and one-sided) running our MPI programs
cour_selftest >/tmp/selftest.out 2>&1 || { cat /tmp/selftest.out; fail "cour_selftest"; }
tail -1 /tmp/selftest.out
cour_selftest mpi >/tmp/selftest_mpi.out 2>&1 || { cat /tmp/selftest_mpi.out; fail "cour_selftest mpi"; }
grep "^ok" /tmp/selftest_mpi.out
mpi_etc=$(md5sum /etc/openmpi/openmpi-mca-params.conf)

apt-get purge -y -qq $pkgs >/dev/null 2>&1 || fail "apt-get purge"
left=$(echo "$files" | while read -r f; do [ -e "$f" ] && echo "$f"; done || true)
[ -z "$left" ] || fail "left after purge: $left"
echo "$me: purged: no file left"
# courier changes no other package's configuration: Open MPI's defaults (mtl = ^ofi) stay
[ "$(md5sum /etc/openmpi/openmpi-mca-params.conf)" = "$mpi_etc" ] &&
	dpkg --verify openmpi-bin >/dev/null 2>&1 ||
	fail "Open MPI's configuration changed"
echo "$me: Open MPI's configuration untouched"
