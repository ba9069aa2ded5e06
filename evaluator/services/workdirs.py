"""Scratch folders of evaluations: one per evaluation under D2K_WORK_DIR, named after
the worker process that made it (`<host>-<pid>-eval<id>-…`), so that a starting
worker, or the reaper taking back an evaluation of a dead worker of its host, can
remove what that worker left behind.

A scratch folder that cannot be written (a full disk or quota, a read-only or
foreign folder) is `ScratchUnwritable`: the worker's fault, which costs the
evaluation no attempt (evaluator.services.backoff)."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import socket
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from django.conf import settings

from evaluator.harness.proctree import pid_alive
from evaluator.models import WorkerState

# The errors of a disk or a quota that is full; any other OSError while writing the
# scratch folder makes it `scratch_unwritable`.
DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


class ScratchUnwritable(Exception):
    """The worker could not prepare an evaluation's scratch folder (before the evaluator
    ran): `state` is the worker's state it puts the worker in, `reason` the sentence."""

    def __init__(self, error: OSError) -> None:
        full = error.errno in DISK_FULL_ERRNOS
        self.state = WorkerState.DISK_FULL if full else WorkerState.SCRATCH_UNWRITABLE
        code = errno.errorcode.get(error.errno or 0, "OSError")
        where = f" ({error.filename})" if error.filename else ""
        self.reason = f"cannot write the scratch folder: [{code}] {error.strerror or error}{where}"
        super().__init__(self.reason)


def work_dir_root() -> Path:
    root = Path(settings.D2K_WORK_DIR)
    root.mkdir(parents=True, exist_ok=True)
    return root


def work_dir_prefix(*, pid: int | None = None) -> str:
    """Scratch folders of one worker process: `<host>-<pid>-…` (removed when it is dead)."""
    return f"{socket.gethostname()}-{pid or os.getpid()}-"


def work_dir_make(*, evaluation_id: int) -> Path:
    """A new scratch folder for one evaluation; ScratchUnwritable when it cannot be made."""
    try:
        return Path(
            tempfile.mkdtemp(prefix=f"{work_dir_prefix()}eval{evaluation_id}-", dir=work_dir_root())
        )
    except OSError as exc:
        raise ScratchUnwritable(exc) from exc


def work_dir_probe() -> None:
    """Write and remove a small file under D2K_WORK_DIR; ScratchUnwritable when it fails."""
    try:
        with tempfile.NamedTemporaryFile(dir=work_dir_root(), prefix=".probe-") as fh:
            fh.write(b"\0" * 4096)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        raise ScratchUnwritable(exc) from exc


def _writable_again(function, path, _exc_info) -> None:
    # A child may leave a folder without write or search permission: give it back to
    # the owner and try once more (root needs no such thing; another uid does).
    parent = os.path.dirname(path)
    for folder in (parent, path):
        try:
            os.chmod(folder, stat.S_IRWXU)
        except OSError:
            pass
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)
    except OSError:
        pass


def work_dir_remove(directory: Path) -> bool:
    """Kill whatever still runs in `directory`, then remove it; True once it is gone."""
    for pid in _processes_inside(directory):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if directory.exists():
        shutil.rmtree(directory, onerror=_writable_again)
    return not directory.exists()


def work_dirs_of(*, worker: str, evaluation_id: int) -> list[Path]:
    """The scratch folders on this host of `worker` (host:pid) for one evaluation."""
    host, _, pid = worker.rpartition(":")
    root = Path(settings.D2K_WORK_DIR)
    if host != socket.gethostname() or not pid.isdigit() or not root.is_dir():
        return []
    return sorted(root.glob(f"{work_dir_prefix(pid=int(pid))}eval{evaluation_id}-*"))


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
        work_dir_remove(directory)
        removed.append(directory)
    return removed
