#!/usr/bin/env bash
# A wheelhouse for hosts without a package index (docs/deploy.md): wheels of the
# portal, its client and every dependency (the evaluator's, PostgreSQL's and Redis's
# extras, PyTorch), plus pip and the build tools an editable install needs.
#
#   deploy/wheelhouse.sh DIR [pip wheel options…]
#
#   D2K_TORCH_SPEC   the PyTorch to include (default torch==2.13.0, the CPU build);
#                    a CUDA build needs its index, e.g. --extra-index-url …/whl/cu130
#   PYTHON           the interpreter whose pip builds the wheels (default python3):
#                    the targets must have the same Python version and platform
#
# Install on the target, from the portal's checkout:
#   python3 -m venv .venv
#   .venv/bin/pip install --no-index --find-links DIR --upgrade pip
#   .venv/bin/pip install --no-index --find-links DIR torch ./client -e '.[evaluator,postgres,redis]'
set -euo pipefail

if [ $# -lt 1 ] || [ "${1#-}" != "$1" ]; then
  echo "usage: deploy/wheelhouse.sh DIR [pip wheel options…]" >&2
  exit 2
fi
out=$1
shift
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
torch=${D2K_TORCH_SPEC:-torch==2.13.0}

mkdir -p "$out"
"$python" -m pip wheel --wheel-dir "$out" "$@" \
  pip "setuptools>=69" wheel "$torch" "$root/client" "$root[evaluator,postgres,redis]"

count=$(find "$out" -maxdepth 1 -name '*.whl' | wc -l)
echo "$out: $count wheels, $(du -sh "$out" | cut -f1)"
echo "install with: pip install --no-index --find-links $out torch ./client -e '.[evaluator,postgres,redis]'"
