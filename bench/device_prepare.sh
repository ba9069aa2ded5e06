#!/usr/bin/env bash
# Before a GPU call: gather into .device/ (git-ignored) what the GPU host, which has
# no package index, needs beside its own Python 3.12, torch and Triton:
#   .device/bwrap    this machine's bubblewrap and its libraries (the same sandbox);
#   .device/wheels   the portal's Python dependencies the host's image lacks, at the
#                    versions of this checkout's environment (./dev setup), so that the
#                    web server and the evaluation worker run there
#                    (bench/gpu_run_bundle.py).
# Carry ".device" with the call and start its command with `source bench/device_setup.sh`.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v bwrap >/dev/null || { echo "bubblewrap is not installed here (./dev test installs it)" >&2; exit 2; }
mkdir -p .device/bwrap
cp "$(command -v bwrap)" .device/bwrap/
for lib in $(ldd "$(command -v bwrap)" | awk '/=>/ {print $3}' | grep -E 'libselinux|libcap|libpcre2'); do
  cp -L "$lib" .device/bwrap/
done
ls .device/bwrap

# The host's image already has numpy, PyYAML, Markdown, Pygments, attrs, packaging
# and typing-extensions.
packages=(
  django asgiref sqlparse djangorestframework djangorestframework-api-key
  drf-spectacular drf-spectacular-sidecar inflection uritemplate django-filter
  django-q2 django-picklefield django-environ nh3 plotly narwhals whitenoise
  tomli-w jsonschema jsonschema-specifications referencing rpds-py platformdirs
)
frozen=$("${D2K_VENV:-.venv}/bin/python" -m pip freeze 2>/dev/null | tr '[:upper:]_' '[:lower:]-')
specs=()
for name in "${packages[@]}"; do
  pin=$(grep -E "^$name==" <<<"$frozen" || true)
  specs+=("${pin:-$name}")
done
rm -rf .device/wheels
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform any -d .device/wheels "${specs[@]}" 2>&1 |
  grep -v "is ignored: it is neither a file nor a directory" || true
echo ".device/wheels: $(find .device/wheels -name '*.whl' | wc -l) wheels, $(du -sh .device/wheels | cut -f1)"
