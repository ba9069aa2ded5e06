"""Running untrusted code in a child process that cannot hurt the worker.

    run = run_child(python_args=..., workdir=..., task_dir=..., env=..., limits=..., gpu=...)

The child runs at the strongest isolation level this host has (isolation.py:
bubblewrap, else a plain process), under the watchdog (watchdog.py), which
enforces a wall-clock timeout, a host-memory limit (the tree's memory plus the
files it keeps in memory: its /tmp and /dev/shm under bubblewrap), a limit on
its scratch folder and a process-count limit, kills the whole tree on a
violation, and reaps every process the child left behind (it is a child
subreaper). The interpreter starts with no writable folder on `sys.path`
(`-P -s`: not the working directory, not the user's site-packages), and the
child's stdout and stderr reach the parent through a pipe it reads
(`ChildLog`), never through a file the child could rewrite; its messages come
through the result pipe (resultpipe.py). A seccomp filter (killguard) leaves
SIGKILL to the outside, so a SIGKILL death is never the submission's doing.
"""

from __future__ import annotations

import os
import resource
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from . import gpulease, killguard, proctree
from .childlog import ChildLog
from .isolation import isolation_level, sandbox_command
from .resultpipe import Answer, Reader
from .watchdog import ChildRun, Limits, watch

# What every sandboxed child runs: the harness child, from the read-only harness.
CHILD_BOOTSTRAP = "import evaluator.harness.child as c; c.main()"


def child_args(job_path: str) -> list[str]:
    """The interpreter's arguments for the harness child reading its job at `job_path`."""
    return ["-c", CHILD_BOOTSTRAP, job_path, "{fd}", "{reply_fd}"]


def scratch_folder(prefix: str = "d2k-eval-") -> Path:
    """A fresh scratch folder for one sandboxed child: nothing another child wrote is in it."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    folder.chmod(0o777)  # the sandboxed uid writes here
    return folder


def _set_limits(limits: Limits, nproc: int, seccomp: bytes | None = None) -> None:
    # The child dies with the orchestrator (bubblewrap's --die-with-parent does the
    # same inside): a killed worker must not leave a submission running.
    proctree.die_with_parent()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits.max_open_files, limits.max_open_files))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.max_file_bytes, limits.max_file_bytes))
    # RLIMIT_NPROC counts every process of the real uid; the budget is what
    # exists now plus the child's allowance. Root ignores it, but the child
    # runs with its capabilities dropped, where it applies again.
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    if seccomp is not None:  # the `process` level; bubblewrap loads it itself
        killguard.install(seccomp)


def run_child(
    *,
    python_args: Sequence[str],
    workdir: Path,
    task_dir: Path,
    env: dict[str, str],
    limits: Limits,
    gpu: bool,
    answer: Answer | None = None,
    wrapper: Sequence[str] = (),
    tool_folder: Path | None = None,
    log: ChildLog | None = None,
    guard: bool = True,
    gpu_alone: bool = False,
) -> ChildRun:
    """Run the harness child; `python_args` may name the result fd as `{fd}`.

    With `answer`, the child's requests on the result pipe are answered on a second pipe,
    which `python_args` names as `{reply_fd}` (its timed steps under the GPU lease; with
    `gpu_alone`, from its first request to its end). Its output goes to `log` (a ChildLog;
    the caller may have handed its `mark` to the Dealer), `ChildRun.log` is its text.
    With `guard`, under the killguard filter; `wrapper`, `tool_folder`: sandbox_command."""
    proctree.become_subreaper()
    log = log if log is not None else ChildLog()
    (read_fd, write_fd), (child_reply_fd, reply_fd) = os.pipe(), os.pipe()
    log_read_fd, log_write_fd = os.pipe()
    fds = {"{fd}": str(write_fd), "{reply_fd}": str(child_reply_fd)}
    seccomp = killguard.program() if guard else None
    seccomp_fd = killguard.program_fd(seccomp) if seccomp and isolation_level() == "bwrap" else None
    argv, proc_env, level = sandbox_command(
        python_args=[fds.get(a, a) for a in python_args], workdir=workdir, task_dir=task_dir,
        env=env, gpu=gpu, wrapper=wrapper, tool_folder=tool_folder,
        tmp_bytes=limits.memory_bytes, seccomp_fd=seccomp_fd,
    )  # fmt: skip
    in_child_seccomp = seccomp if level == "process" else None  # bubblewrap loads its own
    result = ChildRun(returncode=None, isolation=level, kill_guarded=seccomp is not None)
    with (lease := gpulease.current()).child(answer, alone=gpu_alone) as answer_in_lease:
        reader = Reader(read_fd, result, answer_in_lease, reply_fd)
        oom_kills = proctree.host_oom_kills()
        started = result.started = time.monotonic()
        keep = (write_fd, child_reply_fd, *([seccomp_fd] if seccomp_fd is not None else []))
        proc = _spawn(argv, proc_env, workdir, keep, log_write_fd, limits, in_child_seccomp)
        for fd in (*keep, log_write_fd):
            os.close(fd)
        log.attach(log_read_fd)
        reader.start()
        try:
            watch(proc, result, reader, limits, workdir, started, lease=lease)
        finally:
            if proc.poll() is None:
                proctree.kill_tree(proc)
                proc.wait()
            proctree.reap_orphans(spare=gpulease.trusted_pids)
        _reader_end(reader, result)
    log.close()
    os.close(reply_fd)
    result.returncode, result.wall_seconds = proc.returncode, time.monotonic() - started
    result.host_oom_kills = proctree.host_oom_kills() - oom_kills
    result.log = log.text()
    return result


def _reader_end(reader: Reader, result: ChildRun) -> None:
    """Wait for the reader to drain the pipe. A flood is the child's however the child
    ended: on the pipe the reader closed, or before the reader came to the bytes past the
    limit (the watch then saw the child gone before it saw the flood)."""
    reader.join(timeout=10)
    if reader.flooded.is_set() and not result.killed_for:
        result.killed_for = "result_channel"


def _spawn(
    argv: list[str],
    env: dict[str, str],
    workdir: Path,
    keep: tuple[int, ...],
    output_fd: int,
    limits: Limits,
    seccomp: bytes | None,
) -> subprocess.Popen:
    """The sandbox's outer process: its own session, its output on `output_fd`, limits set.

    RLIMIT_NPROC counts every process of the real uid: the budget is what
    exists now plus the child's allowance.
    """
    nproc = proctree.processes_of_uid(os.getuid()) + limits.max_processes
    return subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=output_fd,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=workdir,
        pass_fds=keep,
        start_new_session=True,
        preexec_fn=lambda: _set_limits(limits, nproc, seccomp),
    )
