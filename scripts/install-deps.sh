#!/usr/bin/env bash
# Installs what courier needs to build and test on Debian 12 (apt-get; as root, or via sudo).
# Installs only what is missing, so a second run costs a few seconds.
set -euo pipefail
pkgs=(build-essential autoconf automake libtool pkg-config libfabric-dev libfabric-bin
      uthash-dev libcriterion-dev openmpi-bin libopenmpi-dev iproute2 nftables procps
      clang-14 libclang-rt-14-dev)   # the last two: the libFuzzer run of the packet parser
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
echo "installing: ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
