#!/usr/bin/env bash
# debian13.sh setup | run COMMAND...: courier on Debian 13 ("trixie": libfabric 2.1, Open MPI
# 5.0, gcc 14) from a Debian 12 host, in a root built with debootstrap from Debian's archive
# and entered with chroot (same kernel). As root.
#
#   setup   builds the root once (debootstrap --variant=minbase, about a minute and 220 MB;
#           kept in $COUR_DEBIAN13_ROOT, default /var/cache/courier/debian13, and reused by
#           every later run), copies this tree's files (tracked and untracked, not ignored:
#           no build directory; build directories made inside stay) to /work/courier inside
#           it, and runs scripts/install-deps.sh
#           there, as a new user of Debian 13 would (a few minutes the first time).
#   run     runs COMMAND in /work/courier inside the root, with /proc, /sys, /dev, /dev/shm and
#           /run mounted for it (shared memory, network namespaces) and unmounted after.
#
# A half-built root is never reused: debootstrap writes into a temporary directory that is
# renamed when it succeeded. The archive is the one the host's apt uses (apt-archive.sh);
# COUR_DEBIAN13_MIRROR names another.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
root=${COUR_DEBIAN13_ROOT:-/var/cache/courier/debian13}
# shellcheck source=apt-archive.sh
. "$top/scripts/apt-archive.sh"

if [ "$(id -u)" != 0 ]; then
	echo "debian13.sh: needs root (debootstrap, chroot, mounts)" >&2
	exit 1
fi

make_root() {
	[ -x "$root/usr/bin/apt-get" ] && return 0
	command -v debootstrap >/dev/null 2>&1 ||
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
	local t0=$SECONDS tmp="$root.tmp" mirror
	mirror=${COUR_DEBIAN13_MIRROR:-$(cour_apt_archive)} || return 1
	rm -rf --one-file-system "$tmp"    # (a killed debootstrap leaves /proc mounted there)
	mkdir -p "$(dirname "$root")"
	echo "debian13.sh: building the Debian 13 root in $root (debootstrap from $mirror)"
	if ! debootstrap --variant=minbase trixie "$tmp" "$mirror" >"$tmp.log" 2>&1; then
		tail -20 "$tmp.log"
		echo "debian13.sh: debootstrap failed (log: $tmp.log)" >&2
		return 1
	fi
	rm -f "$tmp.log"
	# what an installed system has and debootstrap does not write: localhost resolves
	[ -s "$tmp/etc/hosts" ] || printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >"$tmp/etc/hosts"
	mv "$tmp" "$root"
	echo "debian13.sh: root built in $((SECONDS - t0)) s"
}

mounted=()
mount_all() {
	local m
	# the root a mount point of its own: `ip netns add` remounts / inside it
	if ! mountpoint -q "$root"; then
		mount --bind "$root" "$root"
		mounted=(.)
	fi
	for m in proc sys dev dev/pts dev/shm run; do
		mkdir -p "$root/$m"
		mountpoint -q "$root/$m" && continue
		case $m in
		proc) mount -t proc proc "$root/proc" ;;
		sys) mount -t sysfs sys "$root/sys" ;;
		dev/shm|run) mount -t tmpfs tmpfs "$root/$m" ;;
		*) mount --bind "/$m" "$root/$m" ;;
		esac
		mounted=("$m" "${mounted[@]}")
	done
}
umount_all() {
	local m
	for m in "${mounted[@]}"; do
		umount -l "$root/$m" 2>/dev/null || true
	done
	mounted=()
}
trap umount_all EXIT

in_root() {   # in_root COMMAND...: in /work/courier, with a plain environment
	mount_all
	chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
		PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		${CI:+CI=$CI} ${FI_COURIER_SHM:+FI_COURIER_SHM=$FI_COURIER_SHM} \
		/bin/bash -c 'cd /work/courier && exec "$@"' bash "$@"
}

case ${1:-} in
setup)
	make_root
	mkdir -p "$root/work/courier"
	# a fresh copy of the tree; build directories stay (their make redoes what changed)
	find "$root/work/courier" -mindepth 1 -maxdepth 1 ! -name 'build*' -exec rm -rf {} +
	(cd "$top" && git ls-files -co --exclude-standard -z | tar --null -T - -cf - ) |
		tar -xf - -C "$root/work/courier"
	t0=$SECONDS
	in_root bash scripts/install-deps.sh
	echo "debian13.sh: $(chroot "$root" cat /etc/debian_version), dependencies ready" \
		"($((SECONDS - t0)) s); libfabric $(chroot "$root" dpkg-query -W -f '${Version}' \
		libfabric1 2>/dev/null || true), Open MPI $(chroot "$root" dpkg-query -W \
		-f '${Version}' openmpi-bin 2>/dev/null || true)"
	;;
run)
	shift
	[ -d "$root/work/courier" ] || { echo "debian13.sh: run setup first" >&2; exit 1; }
	in_root "$@"
	;;
*)
	echo "usage: debian13.sh setup | run COMMAND..." >&2
	exit 2
	;;
esac
