#!/usr/bin/env bash
# End-to-end check of the d2k client against a real portal: runserver + evaluation_worker
# on a fresh SQLite file (interpret mode), the client from a clean virtual environment.
set -uo pipefail
cd "$(dirname "$0")/.."
D=${D2K_E2E_DIR:-/tmp/d2k-e2e}; rm -rf $D; mkdir -p $D
export DJANGO_SETTINGS_MODULE=d2kportal.settings.dev D2K_DATABASE_URL=sqlite:///$D/db.sqlite3 D2K_EVALUATOR_MODE=interpret D2K_WORK_DIR=$D/work D2K_MEDIA_ROOT=$D/media
PY=.venv/bin/python
$PY manage.py migrate --noinput -v 0 && $PY manage.py load_catalog | tail -1
$PY manage.py shell -c "from accounts.models import User; User.objects.create_user('lab', password='a-long-passphrase-1')"
TOKEN=$($PY manage.py api_token lab --create 2>/dev/null | tail -1)
$PY manage.py runserver --noreload 127.0.0.1:8123 > $D/web.log 2>&1 &
WEB=$!
$PY manage.py evaluation_worker > $D/worker.log 2>&1 &
WORKER=$!
trap 'kill $WEB $WORKER 2>/dev/null; wait $WEB $WORKER 2>/dev/null; true' EXIT
python3 -m venv $D/cl && $D/cl/bin/pip install -q ./client 2>&1 | grep -v WARNING | tail -2
$D/cl/bin/python -c "import django" 2>/dev/null && echo "django present in the client venv (bad)" || echo "client venv has no Django"
$D/cl/bin/python -c "import torch" 2>/dev/null && echo "torch present (bad)" || echo "client venv has no torch"
sleep 5
D2K=$D/cl/bin/d2k
export XDG_CONFIG_HOME=$D/config
$D2K --server http://127.0.0.1:8123 login --token "$TOKEN"; echo "login rc=$?"
$D2K task row_softmax --for-agent --levels L1,L2 | head -5; echo "task rc=$?"
$D2K submit --task row_softmax catalog/row_softmax/expert.py --wait; echo "submit rc=$?"
$PY -c "
import django, os; django.setup()
from runs.examples import example_bundle_build
open('$D/bundle.zip','wb').write(example_bundle_build(name='with_guidance', tasks=['row_softmax','transpose_2d']))
"
$D2K submit-run $D/bundle.zip; echo "submit-run rc=$?"
$D2K runs | head -5
$PY manage.py import_kernelbench tests/data/kernelbench | tail -2
$D2K submit --task $($PY manage.py shell -c "from task_catalog.models import Task; print(Task.objects.filter(slug__startswith='kb-').first().slug)" | tail -1) tests/data/kernelbench_solutions/19_ReLU_triton.py --wait; echo "kb submit rc=$?"
