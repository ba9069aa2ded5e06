#!/usr/bin/env bash
# Before a GPU call: gather this machine's bubblewrap and its libraries into
# .device/bwrap (git-ignored), so the GPU host (no package index) gets the same
# sandbox. Carry ".device" with the call and start its command with
# `source bench/device_setup.sh`.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v bwrap >/dev/null || { echo "bubblewrap is not installed here (./dev test installs it)" >&2; exit 2; }
mkdir -p .device/bwrap
cp "$(command -v bwrap)" .device/bwrap/
for lib in $(ldd "$(command -v bwrap)" | awk '/=>/ {print $3}' | grep -E 'libselinux|libcap|libpcre2'); do
  cp -L "$lib" .device/bwrap/
done
ls .device/bwrap
