"""A real portal in processes: a fresh database, the web server and evaluation workers.

For scenarios that need the whole deployment: the worker-death and multi-worker
tests, the browser tests, and the lab's scripts in bench/ (durability, GPU runs,
screenshots). Everything
runs as `manage.py` subprocesses against a database of its own (a SQLite file, or a
fresh PostgreSQL database dropped afterwards), talks HTTP to the web server and
reads the database through `manage.py shell`, exactly as a deployment would.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PG_ADMIN_URL = "postgres://postgres@127.0.0.1:5432/postgres"

TOKEN = """
from django.contrib.auth import get_user_model
from accounts.services import token_issue
user = get_user_model().objects.create_user("lab-bot", password="x-long-passphrase")
print(token_issue(user=user, name="bench").key)
"""
STATES = """
import json
from evaluator.models import Evaluation
rows = Evaluation.objects.values(
    "pk", "submission_id", "status", "attempts", "worker", "started_at", "results__name"
)
out = {}
for r in rows:
    e = out.setdefault(r["pk"], {**r, "results": []})
    if r["results__name"]:
        e["results"].append(r["results__name"])
print(json.dumps([{k: str(v) if k == "started_at" else v for k, v in e.items()}
                  for e in out.values()]))
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def redis_up() -> bool:
    try:
        socket.create_connection(("127.0.0.1", 6379), timeout=1).close()
    except OSError:
        return False
    return True


def postgres_up() -> bool:
    try:
        socket.create_connection(("127.0.0.1", 5432), timeout=1).close()
    except OSError:
        return False
    return True


def _psql(sql: str) -> None:
    subprocess.run(
        ["psql", PG_ADMIN_URL, "-q", "-c", sql], check=True, capture_output=True, timeout=60
    )


def pids_alive(pids: set[int]) -> set[int]:
    alive = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] != "Z":
                    alive.add(pid)
        except OSError:
            continue
    return alive


def ancestors() -> set[int]:
    """This process and every process above it."""
    found, pid = set(), os.getpid()
    while pid > 0 and pid not in found:
        found.add(pid)
        try:
            with open(f"/proc/{pid}/stat") as fh:
                pid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return found


def process_tree(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, stack = {root}, [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found.add(child)
            stack.append(child)
    return found


class Portal:
    """One portal on a fresh database; `close()` stops every process it started."""

    def __init__(self, directory: Path, *, database: str, **settings: str) -> None:
        self.directory = directory
        self.marker = uuid.uuid4().hex
        self.pg_name = ""
        if database == "postgres":
            self.pg_name = f"d2k_scenario_{self.marker[:12]}"
            _psql(f"CREATE DATABASE {self.pg_name}")
            url = f"postgres://postgres@127.0.0.1:5432/{self.pg_name}"
        else:
            url = f"sqlite:///{directory / 'db.sqlite3'}"
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "d2kportal.settings.dev",
            "D2K_DEBUG": "false",
            "D2K_DATABASE_URL": url,
            "D2K_EVALUATOR_MODE": "interpret",
            "D2K_WORK_DIR": str(directory / "work"),
            # Not a setting: what leftovers() finds again in /proc/<pid>/environ.
            "PORTAL_PROCESSES_MARKER": self.marker,
            # The portal's own deployment secret: its evaluations draw hidden workloads.
            "D2K_HIDDEN_SEED": f"d2k-scenario-secret-{self.marker}",
            "PYTHONUNBUFFERED": "1",
            **settings,
        }
        self.processes: list[subprocess.Popen] = []
        self.token = ""

    # --- processes ----------------------------------------------------------------

    def manage(self, *args: str, timeout: float = 300) -> str:
        proc = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"manage.py {args[0]} failed: {proc.stderr[-3000:]}")
        return proc.stdout.strip()

    def setup(self) -> None:
        self.manage("migrate", "--noinput")
        self.manage("load_catalog")
        self.token = self.manage("shell", "-c", TOKEN).splitlines()[-1]

    def _start(self, name: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
        log = open(self.directory / f"{name}.log", "ab")  # noqa: SIM115 (closed with the process)
        proc = subprocess.Popen(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env={**self.env, **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        self.processes.append(proc)
        return proc

    def start_web(self) -> subprocess.Popen:
        proc = self._start("web", "runserver", "--noreload", f"127.0.0.1:{self.port}")
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"{self.base_url}/api/tasks/", timeout=5).close()
                return proc
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.5)
        raise RuntimeError("the web server did not answer within 120 s")

    def start_worker(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
        """An evaluation worker: `args` for `evaluation_worker` (`--gpu 0`), `env` over
        the portal's environment for this worker only (a PATH with its nvidia-smi)."""
        return self._start("worker", "evaluation_worker", *args, env=env)

    def log(self, name: str) -> str:
        path = self.directory / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def leftovers(self) -> set[int]:
        """Processes of this portal still alive: by marker, or working inside its folder.

        Its folder in a process's environment also finds the processes an earlier
        Portal object on the same folder started (bench/gpu_run_bundle.py's kept
        workers). This process and its ancestors (the shell that named the folder)
        are never among them.
        """
        found = set()
        folder = str(self.directory)
        ours = ancestors()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) in ours:
                continue
            try:
                environ = (entry / "environ").read_bytes()
                cwd = os.readlink(entry / "cwd")
                cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            mine = self.marker.encode() in environ or folder.encode() in environ
            if mine or cwd.startswith(folder) or folder in cmdline:
                found.add(int(entry.name))
        return pids_alive(found)

    def close(self) -> None:
        for proc in self.processes:
            if proc.poll() is None:
                # The main process only, as a service manager stops a worker: a SIGTERM
                # to the whole group also reaches django-q2's sentinel, and the cluster
                # then waits for it (docs/deploy.md).
                proc.terminate()
        # One 30-second grace for all of them, not 30 seconds each.
        deadline = time.monotonic() + 30
        for proc in self.processes:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        for pid in self.leftovers():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.pg_name:
            _psql(f"DROP DATABASE IF EXISTS {self.pg_name} WITH (FORCE)")

    # --- HTTP and the database ------------------------------------------------------

    def upload(self, *, task: str, source: str) -> tuple[int, dict[str, Any]]:
        request = urllib.request.Request(
            f"{self.base_url}/api/submissions/",
            data=json.dumps(
                {"task": task, "source": source, "filename": "k.py", "is_public": True}
            ).encode(),
            headers={"Authorization": f"Token {self.token}", "Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, {"body": exc.read().decode(errors="replace")[:2000]}

    def get(self, path: str) -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(f"{self.base_url}{path}", timeout=60) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def evaluations(self) -> list[dict[str, Any]]:
        return json.loads(self.manage("shell", "-c", STATES).splitlines()[-1])
