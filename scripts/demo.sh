#!/usr/bin/env bash
# README's first command: install, build, and run courier's main job: two processes on
# 127.0.0.1 exchanging messages over courier, printing latency and bandwidth.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bash "$top/scripts/install-deps.sh"
bash "$top/scripts/build.sh" "$top/build"
cd "$top/build"
export COURIER_PROVIDER_PATH="$top/build/.libs"
exec bash "$top/fabtests/scripts/pingpong-demo.sh"
