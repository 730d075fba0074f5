#!/usr/bin/env bash
# Installs what courier needs to build and test on Debian 12 or 13 (apt-get; as root, or via
# sudo). Only versionless package names, so that each release brings its own (clang is 14 on
# Debian 12, 19 on Debian 13).
# Installs only what is missing, so a second run costs a few seconds.
set -euo pipefail
pkgs=(build-essential autoconf automake libtool pkg-config libfabric-dev libfabric-bin
      uthash-dev libcriterion-dev nettle-dev openmpi-bin libopenmpi-dev iproute2 nftables procps iperf3
      clang libclang-rt-dev    # these two: the libFuzzer run of the packet parser
      pandoc                   # man/fi_courier.7 from its markdown
      tshark tcpdump python3)  # test_trace.sh: captures read by tshark (through
                               # contrib/wireshark/courier.lua) and tcpdump, trace_craft.py
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
