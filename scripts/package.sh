#!/usr/bin/env bash
# package.sh: courier's release tarball and Debian packages, and the check that they install.
#
#   package.sh build [OUT]   make the release tarball with make distcheck (the tarball
#                            configured with --enable-werror in a tree of its own, the whole
#                            of make check run there, installed, uninstalled, cleaned), build
#                            the Debian packages from it (dpkg-buildpackage -b with this
#                            tree's debian/) and run lintian on them: any error or warning
#                            fails. Results in OUT (default ./packages/<codename>), with
#                            distcheck.log. COUR_DISTCHECK=0: make dist only, no tests.
#                            Installs what it needs with apt-get (scripts/install-deps.sh:
#                            the tests' needs too).
#   package.sh check OUT     install OUT's packages into a clean root of the distribution they
#                            were built for (debootstrap --variant=minbase, cached in
#                            /var/cache/courier/clean-<codename>, copied for each check) and
#                            check, with no FI_PROVIDER_PATH: fi_info -p courier and -e, the
#                            man page, Wireshark's list of plugins, cour_pingpong between two
#                            processes; then apt-get purge, and that no file of theirs is
#                            left.
#
# As root (apt-get, debootstrap, chroot). The archive is the host's (its apt sources: apt-archive.sh), or
# COUR_PACKAGE_MIRROR. Debian 13 packages are built inside scripts/debian13.sh's root:
#   bash scripts/debian13.sh run bash scripts/package.sh build packages/trixie
#   bash scripts/package.sh check packages/trixie
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
me=package.sh

die() { echo "$me: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (apt-get, debootstrap, chroot)"

apt_install() {
	local missing=() p
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
			missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		"${missing[@]}" >/dev/null
}

codename() { . /etc/os-release && echo "${VERSION_CODENAME:?no VERSION_CODENAME in /etc/os-release}"; }

# shellcheck source=apt-archive.sh
. "$top/scripts/apt-archive.sh"
host_mirror() {
	if [ -n "${COUR_PACKAGE_MIRROR:-}" ]; then echo "$COUR_PACKAGE_MIRROR"; else cour_apt_archive; fi
}

build() {
	local out=${1:-$top/packages/$(codename)} tmp ver tarball
	bash "$top/scripts/install-deps.sh" >/dev/null || die "installing the build's needs failed"
	apt_install debhelper dpkg-dev fakeroot lintian
	mkdir -p "$out"
	out=$(cd "$out" && pwd)
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/courier-package.XXXXXX")
	trap 'rm -rf "${tmp:-}"' RETURN EXIT   # (EXIT: a die() inside)
	# the release tarball, from a copy of the tree (tracked and untracked, not ignored)
	mkdir "$tmp/src"
	if [ -d "$top/.git" ] && command -v git >/dev/null 2>&1; then
		(cd "$top" && git ls-files -co --exclude-standard -z | tar --null -T - -cf -)
	else   # (a copy without git: debian13.sh's root) everything but what builds make
		(cd "$top" && tar --exclude='./build*' --exclude=./packages --exclude=./autom4te.cache \
			--exclude=./configure --exclude=./Makefile.in --exclude='./config.h.in*' --exclude=./aclocal.m4 -cf - .)
	fi | tar -xf - -C "$tmp/src"
	(cd "$tmp/src" && autoreconf -fi >/dev/null 2>&1 && mkdir b && cd b &&
	 ../configure -q >/dev/null) || die "configure failed"
	if [ "${COUR_DISTCHECK:-1}" = 1 ]; then
		# what every packager starts from: the tarball alone builds warning-free, passes
		# its tests, installs under any prefix and uninstalls clean (the tests run as the
		# caller runs them: as root they include the namespace and loss tests)
		# (-j as scripts/check.sh: two tests at a time, as in test-all's own make check)
		if ! (cd "$tmp/src/b" && make -j"$(nproc)" distcheck \
			DISTCHECK_CONFIGURE_FLAGS=--enable-werror \
			>"$tmp/distcheck.log" 2>&1); then
			find "$tmp/src/b" -name test-suite.log -exec tail -100 {} + 2>/dev/null || true
			tail -40 "$tmp/distcheck.log"
			cp "$tmp/distcheck.log" "$out/" 2>/dev/null || true
			die "make distcheck failed"
		fi
		cp "$tmp/distcheck.log" "$out/"
		echo "$me: make distcheck: $(grep -E '^# (PASS|FAIL|SKIP|ERROR):' "$tmp/distcheck.log" |
			tr -s ' ' | tr '\n' ' ')"
	else
		(cd "$tmp/src/b" && make -s dist >/dev/null) || die "make dist failed"
	fi
	tarball=$(ls "$tmp"/src/b/courier-*.tar.gz)
	ver=$(basename "$tarball" .tar.gz)
	ver=${ver#courier-}
	cp "$tarball" "$out/"
	# the packages, from the tarball as a packager has it, with our debian/
	tar -xzf "$tarball" -C "$tmp"
	cp -a "$top/debian" "$tmp/courier-$ver/"
	grep -q "^courier ($ver-" "$tmp/courier-$ver/debian/changelog" ||
		die "debian/changelog's version is not the tarball's ($ver)"
	grep -q "^## $ver\b" "$tmp/courier-$ver/NEWS.md" || die "NEWS.md names no release $ver"
	(cd "$tmp/courier-$ver" && dpkg-buildpackage -us -uc -b -j"$(nproc)" >"$tmp/build.log" 2>&1) || {
		tail -40 "$tmp/build.log"
		die "dpkg-buildpackage failed"
	}
	rm -f "$out"/*.deb "$out"/*.changes "$out"/*.buildinfo
	cp "$tmp"/*.deb "$tmp"/*.changes "$tmp"/*.buildinfo "$out/"
	# lintian: errors and warnings fail (overrides, each with its reason, in debian/)
	if ! lintian --fail-on error,warning "$out"/*.changes >"$out/lintian.log" 2>&1; then
		cat "$out/lintian.log"
		die "lintian found errors or warnings"
	fi
	codename >"$out/codename"
	echo "$me: courier $ver: $(cd "$out" && ls ./*.deb | tr '\n' ' ')(lintian clean) in $out"
}

check() {
	local out=${1:?usage: package.sh check OUT} code base root mirror debs pkgs
	out=$(cd "$out" && pwd)
	debs=$(ls "$out"/*.deb) || die "no packages in $out"
	code=$(cat "$out/codename" 2>/dev/null) || die "$out/codename missing: not made by build"
	base=/var/cache/courier/clean-$code
	mirror=$(host_mirror)
	if [ ! -x "$base/usr/bin/apt-get" ]; then
		apt_install debootstrap
		rm -rf "$base.tmp"
		mkdir -p "$(dirname "$base")"
		echo "$me: building a clean $code root (debootstrap from $mirror)"
		debootstrap --variant=minbase "$code" "$base.tmp" "$mirror" >"$base.log" 2>&1 ||
			{ tail -20 "$base.log"; die "debootstrap failed"; }
		[ -s "$base.tmp/etc/hosts" ] ||
			printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost\n' >"$base.tmp/etc/hosts"
		mv "$base.tmp" "$base"
	fi
	# a check killed before its cleanup leaves its root with the host's /dev bound in it:
	# take those mounts down first, and never let rm cross into a mounted file system
	local old m
	for old in /var/cache/courier/check-*; do
		[ -d "$old" ] || continue
		for m in dev/shm dev/pts dev proc; do umount -l "$old/$m" 2>/dev/null || true; done
		rm -rf --one-file-system "$old"
	done
	root=$(mktemp -d /var/cache/courier/check-$code.XXXXXX)
	cp -a "$base/." "$root/"
	local mounts=()
	cleanup() {
		local m
		for m in "${mounts[@]}"; do umount -l "$root/$m" 2>/dev/null || true; done
		rm -rf --one-file-system "$root"
	}
	trap cleanup RETURN
	for m in proc dev dev/pts dev/shm; do
		mkdir -p "$root/$m"
		case $m in
		proc) mount -t proc proc "$root/proc" ;;
		dev/shm) mount -t tmpfs tmpfs "$root/dev/shm" ;;
		*) mount --bind "/$m" "$root/$m" ;;
		esac
		mounts=("$m" "${mounts[@]}")
	done
	mkdir -p "$root/tmp/debs"
	cp $debs "$root/tmp/debs/"
	cp "$top/scripts/package-check.sh" "$root/tmp/"
	chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 \
		PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		/bin/bash /tmp/package-check.sh /tmp/debs || die "the installed packages failed (above)"
	echo "$me: $code: installed, checked and purged clean"
}

case ${1:-} in
build) shift; build "$@" ;;
check) shift; check "$@" ;;
*) echo "usage: package.sh build [OUT] | check OUT" >&2; exit 2 ;;
esac
