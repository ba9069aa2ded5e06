"""Scratch folders of evaluations: one per evaluation under D2K_WORK_DIR, named after
the worker process that made it (`<host>-<pid>-eval<id>-…`), so that a starting
worker can remove what dead workers of its host left behind."""

from __future__ import annotations

import os
import shutil
import signal
import socket
from collections.abc import Iterator
from pathlib import Path

from django.conf import settings

from evaluator.services.jobs import pid_alive


def work_dir_root() -> Path:
    root = Path(settings.D2K_WORK_DIR)
    root.mkdir(parents=True, exist_ok=True)
    return root


def work_dir_prefix(*, pid: int | None = None) -> str:
    """Scratch folders of one worker process: `<host>-<pid>-…` (removed when it is dead)."""
    return f"{socket.gethostname()}-{pid or os.getpid()}-"


def _processes_inside(directory: Path) -> Iterator[int]:
    """Processes whose working directory or command line lies in `directory`."""
    target = str(directory)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if cwd.startswith(target) or target in cmdline:
            yield int(entry.name)


def stale_work_dirs_remove() -> list[Path]:
    """Kill what a dead worker of this host left running and remove its scratch folders."""
    removed = []
    host = socket.gethostname()
    for directory in work_dir_root().iterdir():
        name_host, _, rest = directory.name.rpartition("-eval")[0].rpartition("-")
        if not rest.isdigit() or name_host != host or pid_alive(int(rest)):
            continue
        for pid in _processes_inside(directory):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(directory, ignore_errors=True)
        removed.append(directory)
    return removed
