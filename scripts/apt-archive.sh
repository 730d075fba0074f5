#!/usr/bin/env bash
# apt-archive.sh: sourced by the scripts that build Debian roots (debian13.sh, package.sh).
# cour_apt_archive prints the Debian archive this machine's apt already uses for its own
# release, read from /etc/apt/sources.list and sources.list.d (one-line and deb822 forms),
# so a root is built from the mirror the machine trusts: a site behind a local mirror needs
# no change. Any release can be fetched from the same archive. It fails with a message when
# the host names none; the callers' override variables name one by hand.

cour_apt_archive() {
	local own uri
	own=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
	[ -n "$own" ] || { echo "apt-archive.sh: no VERSION_CODENAME in /etc/os-release" >&2; return 1; }
	uri=$( { awk -v c="$own" '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i !~ /^\[/) break
						  if ($(i + 1) == c) print $i }' \
		     /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null
		 awk -v c="$own" 'BEGIN { RS = "" } { u = ""; ok = 0
			n = split($0, l, "\n")
			for (j = 1; j <= n; j++) {
				if (l[j] ~ /^URIs:/) { split(l[j], f, " "); u = f[2] }
				if (l[j] ~ /^Suites:/ && (l[j] " ") ~ (" " c " ")) ok = 1
			}
			if (ok && u != "") print u }' /etc/apt/sources.list.d/*.sources 2>/dev/null
	     } | head -n 1)
	if [ -z "$uri" ]; then
		echo "apt-archive.sh: apt's sources name no archive for $own; name one with the" \
		     "script's *_MIRROR variable" >&2
		return 1
	fi
	echo "$uri"
}
