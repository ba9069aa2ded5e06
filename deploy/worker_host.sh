#!/usr/bin/env bash
# Add this host to the portal's evaluation workers: one worker per GPU, as
# systemd units (docs/deploy.md). Run from the portal's checkout, with the
# deployment's .env copied beside manage.py.
#
#   deploy/worker_host.sh [--hardware KIND] [--wheelhouse DIR] [--user USER] [--print]
#       installs .venv if there is none (from DIR with no index, when given), checks
#       the settings, writes d2k-worker@.service and starts d2k-worker@N for every
#       GPU that nvidia-smi lists (d2k-worker@cpu, an interpret worker, where none)
#   deploy/worker_host.sh --run N|cpu [--hardware KIND]
#       what each unit runs: manage.py evaluation_worker --gpu N, in the foreground
#
#   --print      show the unit and the systemctl commands, change nothing
#   D2K_SYSTEMD_DIR   where the unit goes (default /etc/systemd/system)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

hardware="" wheelhouse="" run="" print=0 user=""
while [ $# -gt 0 ]; do
  case "$1" in
    --hardware) hardware=${2:?--hardware needs a GPU kind}; shift 2 ;;
    --wheelhouse) wheelhouse=${2:?--wheelhouse needs a folder}; shift 2 ;;
    --user) user=${2:?--user needs a user name}; shift 2 ;;
    --run) run=${2:?--run needs a GPU index or cpu}; shift 2 ;;
    --print) print=1; shift ;;
    *) echo "usage: deploy/worker_host.sh [--hardware KIND] [--wheelhouse DIR] [--user USER] [--print] | --run N|cpu [--hardware KIND]" >&2
       exit 2 ;;
  esac
done
export DJANGO_SETTINGS_MODULE=${DJANGO_SETTINGS_MODULE:-d2kportal.settings.production}
python=$root/.venv/bin/python

if [ -n "$run" ]; then
  if [ "$run" = cpu ]; then
    # No GPU: correctness only, in Triton's CPU interpreter, for the default pool.
    D2K_EVALUATOR_MODE=interpret exec "$python" manage.py evaluation_worker
  fi
  args=(--gpu "$run")
  [ -n "$hardware" ] && args+=(--hardware "$hardware")
  exec "$python" manage.py evaluation_worker "${args[@]}"
fi

if [ ! -f .env ]; then
  echo "No .env in $root: copy the deployment's .env here first (docs/deploy.md, Configuration)." >&2
  exit 1
fi
if [ ! -x "$python" ] && [ "$print" = 0 ]; then
  echo "Installing the portal into $root/.venv…"
  python3 -m venv .venv
  index=()
  [ -n "$wheelhouse" ] && index=(--no-index --find-links "$wheelhouse")
  "$python" -m pip install -q "${index[@]}" --upgrade pip
  "$python" -m pip install -q "${index[@]}" "${D2K_TORCH_SPEC:-torch}" ./client -e '.[evaluator,postgres,redis]'
fi
if [ "$print" = 0 ]; then
  # Production settings fail fast on a missing or placeholder secret, a missing database.
  "$python" manage.py check --fail-level ERROR >/dev/null
fi

if command -v nvidia-smi >/dev/null 2>&1; then
  mapfile -t units < <(nvidia-smi --query-gpu=index --format=csv,noheader | tr -d ' ')
else
  units=(cpu)
fi
[ ${#units[@]} -gt 0 ] || { echo "nvidia-smi lists no GPU on this host." >&2; exit 1; }

unit_dir=${D2K_SYSTEMD_DIR:-/etc/systemd/system}
hardware_arg=""
[ -n "$hardware" ] && hardware_arg=" --hardware \"$hardware\""
unit="[Unit]
Description=D2K Portal evaluation worker (GPU %i)
After=network-online.target

[Service]
User=${user:-$(stat -c %U "$root")}
WorkingDirectory=$root
Environment=DJANGO_SETTINGS_MODULE=$DJANGO_SETTINGS_MODULE
ExecStart=$root/deploy/worker_host.sh --run %i$hardware_arg
KillMode=mixed
TimeoutStopSec=30
Restart=always

[Install]
WantedBy=multi-user.target"
instances=("${units[@]/#/d2k-worker@}")

if [ "$print" = 1 ]; then
  printf '# %s/d2k-worker@.service\n%s\n\n' "$unit_dir" "$unit"
  echo "systemctl daemon-reload"
  echo "systemctl enable --now ${instances[*]}"
  exit 0
fi
printf '%s\n' "$unit" >"$unit_dir/d2k-worker@.service"
if [ ! -d /run/systemd/system ]; then
  echo "Wrote $unit_dir/d2k-worker@.service, but systemd is not running on this host:" >&2
  echo "start each worker with: deploy/worker_host.sh --run N (${units[*]})" >&2
  exit 1
fi
systemctl daemon-reload
systemctl enable --now "${instances[@]}"
echo "Started ${instances[*]}; /healthz on the web host lists them within ${D2K_REAP_INTERVAL_S:-15} s."
