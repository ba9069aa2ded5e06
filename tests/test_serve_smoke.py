"""The deployment path for real: a queued evaluation picked up by a running evaluation worker.

Runs manage.py in subprocesses against a file database, once with django-q2's
ORM broker (the embedded default) and once with Redis (the scale-out path).
"""

import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from d2kportal.processes import redis_up

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow

CREATE = """
from django.contrib.auth import get_user_model
from submissions.services import submission_create
from task_catalog.models import Task
user = get_user_model().objects.create_user("smoke", password="x-long-passphrase")
task = Task.objects.get(slug="row_softmax")
sub = submission_create(owner=user, task=task, source=open("catalog/row_softmax/expert.py").read(),
                        filename="expert.py")
print(sub.pk)
"""
STATUS = """
from evaluator.models import Evaluation
print(Evaluation.objects.get(submission_id={pk}).status)
"""


def manage(env: dict, *args: str, timeout: float = 120) -> str:
    proc = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.strip()


@pytest.mark.parametrize("broker", ["orm", "redis"])
def test_uploaded_kernel_is_evaluated_by_a_running_worker(broker, tmp_path):
    if broker == "redis" and not redis_up():
        pytest.skip("no Redis on 127.0.0.1:6379")
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "d2kportal.settings.dev",
        "D2K_DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "D2K_EVALUATOR_MODE": "interpret",
        # What `./dev serve` keeps in var/hidden-seed: a worker needs one to draw the
        # hidden workloads.
        "D2K_HIDDEN_SEED": f"d2k-smoke-test-{uuid.uuid4().hex}",
    }
    if broker == "redis":
        env["D2K_REDIS_URL"] = f"redis://127.0.0.1:6379/{9 + uuid.uuid4().int % 6}"
    manage(env, "migrate", "--noinput")
    manage(env, "load_catalog")
    worker = subprocess.Popen(
        [sys.executable, "manage.py", "evaluation_worker"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        pk = int(manage(env, "shell", "-c", CREATE).splitlines()[-1])
        deadline = time.monotonic() + 240
        status = "queued"
        while time.monotonic() < deadline and status in ("queued", "running"):
            time.sleep(2)
            status = manage(env, "shell", "-c", STATUS.format(pk=pk)).splitlines()[-1]
        assert status == "correct"
    finally:
        # the worker's graceful stop waits for its pool; the test needs none of that.
        os.killpg(worker.pid, 9)
        worker.wait(timeout=30)


def test_gunicorn_with_the_shipped_config_serves_the_site_and_its_health(tmp_path):
    import json
    import urllib.request

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "d2kportal.settings.dev",
        "D2K_DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "D2K_WEB_BIND": f"127.0.0.1:{port}",
        "D2K_WEB_WORKERS": "2",
    }
    manage(env, "migrate", "--noinput")
    web = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", "d2kportal/gunicorn.conf.py", "d2kportal.wsgi"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline, body = time.monotonic() + 120, None
        while time.monotonic() < deadline and body is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
                    body = json.loads(r.read())
            except OSError:
                time.sleep(0.5)
        assert body is not None, "gunicorn did not answer within 120 s"
        assert (body["database"], body["broker"]) == ("ok", "ok")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as r:
            assert r.status == 200
    finally:
        os.killpg(web.pid, 15)
        web.wait(timeout=60)
