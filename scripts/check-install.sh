#!/usr/bin/env bash
# check-install.sh BUILDDIR: `make install` goes where the user says. Installs the build into a
# temporary DESTDIR and checks that every file landed under the configured prefix (nothing in
# the system libfabric's directory unless --with-provider-dir asked for it), and that libfabric
# loads the installed provider from there (fi_info -p courier with FI_PROVIDER_PATH), and that
# the Wireshark dissector landed in its plugin directory under the prefix.
set -euo pipefail
build=$(cd "$1" && pwd)
dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT
prefix=$(sed -n 's/^prefix = //p' "$build/Makefile")
provdir=$(make -s -C "$build" --no-print-directory -f Makefile -f - print-provdir <<'MK'
print-provdir:
	@echo $(provdir)
MK
)
wsdir=$(make -s -C "$build" --no-print-directory -f Makefile -f - print-wsdir <<'MK'
print-wsdir:
	@echo $(wiresharkplugindir)
MK
)
make -s -C "$build" install DESTDIR="$dest" >"$dest.log" 2>&1 ||
	{ cat "$dest.log"; rm -f "$dest.log"; echo "check-install: make install failed"; exit 1; }
rm -f "$dest.log"
outside=$(cd "$dest" && find . -type f | sed 's|^\.||' | grep -v "^$prefix/" || true)
if [ -n "$outside" ]; then
	echo "check-install: files installed outside the prefix $prefix:"; echo "$outside"; exit 1
fi
so="$dest$provdir/libcourier-fi.so"
[ -f "$so" ] || { echo "check-install: no $so (provdir $provdir)"; exit 1; }
case $provdir in
"$prefix"/*) ;;
*) echo "check-install: provdir $provdir is not under the prefix $prefix"; exit 1 ;;
esac
# the dissector goes where Wireshark looks for Lua plugins, under the prefix too
case $wsdir in
"$prefix"/*) ;;
*) echo "check-install: wiresharkplugindir $wsdir is not under the prefix $prefix"; exit 1 ;;
esac
[ -f "$dest$wsdir/courier.lua" ] || { echo "check-install: no $wsdir/courier.lua"; exit 1; }
for f in include/rdma/fi_ext_courier.h; do
	[ -f "$dest$prefix/$f" ] || { echo "check-install: $prefix/$f missing"; exit 1; }
done
if ! FI_PROVIDER_PATH="$dest$provdir" FI_PROVIDER=courier fi_info -p courier -l 2>&1 |
	grep -q "^courier:"; then
	echo "check-install: libfabric does not load the installed provider from $provdir"
	FI_PROVIDER_PATH="$dest$provdir" fi_info -p courier -l || true
	exit 1
fi
echo "check-install: prefix $prefix, provider in $provdir, loaded from there by fi_info;" \
	"$(cd "$dest" && find . -type f | wc -l) files, none outside the prefix"
