"""Running untrusted code in a child process that cannot hurt the worker.

Isolation levels, strongest first (the verdict's environment says which one ran):

- `bwrap`: bubblewrap with new user, PID, network, IPC, UTS and mount
  namespaces, all capabilities dropped, an unprivileged uid inside, and a
  filesystem made of read-only binds of just the interpreter, the harness (with
  the task format code it imports) and the task package, plus one writable
  scratch folder. No network, no project files, no database, no secrets on disk.
- `process`: a plain child process. Still its own session and process group,
  a scrubbed environment, resource limits and the same watchdog; but it can
  see the host's filesystem and network, so use it only where bubblewrap is
  unavailable (documented in docs/evaluator.md).

At both levels the parent enforces a wall-clock timeout, a host-memory limit
(the tree's memory plus the files it keeps in memory: its /tmp and /dev/shm
under bubblewrap), a limit on its scratch folder and a process-count limit,
kills the whole tree on a violation, and reaps every process the child left
behind (it is a child subreaper). The interpreter starts with no writable
folder on `sys.path` (`-P -s`: not the working directory, not the user's
site-packages), and the child's stdout and stderr reach the parent through a
pipe it reads (`ChildLog`), never through a file the child could rewrite. A
seccomp filter (killguard) leaves SIGKILL to the outside, so a SIGKILL death
is never the submission's doing.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from . import killguard, proctree
from .childlog import ChildLog

# The folder holding `evaluator/` and `taskformat/`.
HARNESS_ROOT = Path(__file__).resolve().parent.parent.parent
# The packages bound read-only at SANDBOX_ROOT, on the child's PYTHONPATH: the harness and
# the task format its modules import (counters.py in a profiling child); nothing else of the
# project.
SANDBOX_PACKAGES = ("evaluator", "taskformat")
SANDBOX_ROOT = "/d2k"
SANDBOX_WORK = f"{SANDBOX_ROOT}/work"
SANDBOX_TASK = f"{SANDBOX_ROOT}/task"
# The result pipe's caps. An honest child's longest line is a timed workload's
# report: a fingerprint of about 1 KB for each of up to 400 timed and 200
# batch calls and four audit fingerprints of about 25 KB, under 1 MB. All it
# writes for one timed workload (that report, about four requests of 100
# bytes per timed call, the batch's requests) is about 1 MB, so even the
# catalog's 85 timed workloads in one evaluation would come to under 100 MB.
# A longer line is one malformed message, skipped; past the total the child
# is killed at once (`result_channel`), before it can make the parent read
# on, or leave a request unanswered until the time limit.
MAX_LINE_BYTES = 16 * 2**20
MAX_CHANNEL_BYTES = 256 * 2**20
# The interpreter's flags in every sandboxed child: -P keeps the working
# directory (the scratch folder, the child's to write) off sys.path, -s the
# user's site-packages. sys.path is then the read-only harness (PYTHONPATH),
# the standard library and the interpreter's site-packages.
PYTHON_FLAGS = ("-P", "-s")
# What every sandboxed child runs: the harness child, from the read-only harness.
CHILD_BOOTSTRAP = "import evaluator.harness.child as c; c.main()"
# How often the watchdog adds up the scratch folder, and how many entries it
# reads at most: past that many the folder counts as over its limit.
SCRATCH_EVERY_S = 1.0
MAX_SCRATCH_ENTRIES = 200_000


@dataclass
class ChildRun:
    returncode: int | None
    # "", "timeout", "memory", "scratch", "processes", "result_channel"
    killed_for: str = ""
    # The process's start and run time on the monotonic clock its messages are stamped with.
    started: float = 0.0
    wall_seconds: float = 0.0
    messages: list[tuple[float, dict]] = field(default_factory=list)
    bad_messages: int = 0
    # Every byte the child wrote to the result pipe, as read.
    channel_bytes: int = 0
    peak_rss_bytes: int = 0
    # Seconds the tree's most-delayed thread waited for a CPU (not counted in its time).
    cpu_wait_seconds: float = 0.0
    # Killed for "timeout" by the wall-time cap (max_wall_factor times the limit) on a host
    # so busy that the child had not yet run for its limit.
    wall_capped: bool = False
    # Of the peak: what the tree kept in files in memory (its /tmp and /dev/shm).
    peak_tmpfs_bytes: int = 0
    peak_scratch_bytes: int = 0
    # What the scratch folder was allowed to hold (scratch_bytes_allowed).
    scratch_limit_bytes: int = 0
    log: str = ""
    isolation: str = ""
    # Every process id seen in the evaluation's process tree while it ran.
    pids: set[int] = field(default_factory=set)
    # Whether the killguard filter was loaded (a SIGKILL is then the outside's).
    kill_guarded: bool = False
    # The host's out-of-memory killer ended a process while the child ran.
    host_oom_kills: int = 0

    @property
    def signal(self) -> int | None:
        """The signal that ended the child's interpreter, if one did."""
        return _signal_of(self.returncode, self.isolation)


def default_memory_limit() -> int:
    """32 GiB, or half of the machine's memory where that is less."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        total = 64 * 1024**3
    return min(32 * 1024**3, total // 2)


@dataclass(frozen=True)
class Limits:
    # The time the child's processes could run: the wall time less what its most-delayed
    # thread spent waiting for a CPU, so that a busy host does not shorten it; and at
    # most `max_wall_factor` times as much wall time.
    timeout_s: float = 600.0
    max_wall_factor: float = 2.0
    memory_bytes: int = field(default_factory=default_memory_limit)
    max_processes: int = 256
    max_file_bytes: int = 16 * 1024**3
    max_open_files: int = 4096
    # What the scratch folder may hold: compile caches, builds, and the outputs of every
    # correctness call (the largest catalog tasks write a few GiB of them).
    scratch_bytes: int = 64 * 1024**3


@cache
def _bwrap_works() -> bool:
    bwrap = shutil.which("bwrap")
    if not bwrap:
        return False
    try:
        probe = subprocess.run(
            [bwrap, *_userns_args(), "--ro-bind", "/", "/", "--unshare-all", "--", "/bin/true"],
            capture_output=True,
            # Generous: a busy host starts a process slowly, and bubblewrap is not slow.
            timeout=120,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return False
    return probe.returncode == 0


def isolation_level() -> str:
    forced = os.environ.get("D2K_SANDBOX", "auto")
    if forced in ("bwrap", "process"):
        return forced
    return "bwrap" if _bwrap_works() else "process"


def unavailable() -> str | None:
    """Why the sandbox this worker is told to use cannot run here (our fault), or None."""
    if os.environ.get("D2K_SANDBOX", "auto") == "bwrap" and not _bwrap_works():
        found = "does not work" if shutil.which("bwrap") else "is not installed"
        return f"D2K_SANDBOX=bwrap, but bubblewrap {found} on this worker"
    return None


@dataclass(frozen=True)
class Layout:
    """Where the child sees its scratch folder and the task package."""

    work: str
    task: str


def layout(workdir: Path, task_dir: Path) -> Layout:
    """The paths to write into the child's job and environment, for this host's level.

    Inside bubblewrap they are the fixed mount points; at the `process` level
    the child sees the host's filesystem, so they are the real folders.
    """
    if isolation_level() == "process":
        return Layout(work=str(workdir), task=str(task_dir))
    return Layout(work=SANDBOX_WORK, task=SANDBOX_TASK)


def _userns_args() -> list[str]:
    # As root, bubblewrap would keep root inside; ask for a user namespace with
    # an unprivileged uid and no capabilities instead.
    if os.geteuid() == 0:
        return ["--unshare-user", "--uid", "65534", "--gid", "65534", "--cap-drop", "ALL"]
    return []


def _python_binds() -> list[str]:
    """Folders the interpreter and its packages live in, to bind read-only."""
    roots = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve()}
    roots.add(Path(sys.executable).resolve().parent.parent)
    for entry in sys.path:
        if entry and "-packages" in entry:
            roots.add(Path(entry).resolve())
    chosen: list[Path] = []
    for root in sorted(roots, key=lambda p: len(p.parts)):
        already = any(root == c or c in root.parents for c in chosen)
        if not already and root.parts[:2] != ("/", "usr"):
            chosen.append(root)
    binds: list[str] = []
    for root in chosen:
        binds += ["--ro-bind", str(root), str(root)]
    return binds


def _device_binds() -> list[str]:
    args: list[str] = []
    for node in sorted(Path("/dev").glob("nvidia*")):
        if node.is_char_device():
            args += ["--dev-bind", str(node), str(node)]
    # /usr (with the driver and toolkit under /usr/local) is bound already.
    for path in ("/sys", "/run/nvidia-persistenced", "/opt"):
        if Path(path).exists():
            args += ["--ro-bind", path, path]
    return args


def _etc_binds() -> list[str]:
    wanted = (
        "ld.so.cache",
        "ld.so.conf",
        "ld.so.conf.d",
        "passwd",
        "group",
        "nsswitch.conf",
        "localtime",
        "alternatives",
    )
    args: list[str] = []
    for name in wanted:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    return args


def sandbox_command(
    *,
    python_args: Sequence[str],
    workdir: Path,
    task_dir: Path,
    env: dict[str, str],
    gpu: bool,
    wrapper: Sequence[str] = (),
    tmp_bytes: int = 0,
    seccomp_fd: int | None = None,
) -> tuple[list[str], dict[str, str], str]:
    """The argv, environment and level for running `python -P -s python_args...` sandboxed.

    `wrapper` is a command that runs the interpreter inside the sandbox (a
    profiler: `ncu ... python ...`); it runs with the child's confinement.

    Inside bubblewrap the harness and the task format are at /d2k (PYTHONPATH),
    the task package at /d2k/task and the scratch folder at /d2k/work; /tmp and
    /dev/shm are memory file systems of `tmp_bytes` each (where given); the
    seccomp filter on `seccomp_fd` is loaded into the interpreter. At the
    `process` level the child runs on the real paths (`layout` gives the caller
    the right ones for its arguments and environment) and `run_child` loads
    the filter itself.
    """
    level = isolation_level()
    python = [sys.executable, *PYTHON_FLAGS, *python_args]
    if level == "process":
        return [*wrapper, *python], {**env, "PYTHONPATH": str(HARNESS_ROOT)}, level

    bwrap = shutil.which("bwrap") or "bwrap"
    size = ["--size", str(tmp_bytes)] if tmp_bytes > 0 else []
    argv = [
        bwrap,
        *_userns_args(),
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--ro-bind",
        "/usr",
        "/usr",
        *_symlink_or_bind("/bin"),
        *_symlink_or_bind("/lib"),
        *_symlink_or_bind("/lib64"),
        *_symlink_or_bind("/sbin"),
        *_etc_binds(),
        # Fresh /proc, /dev and /tmp first: a later bind into them (a GPU node,
        # an interpreter installed under /tmp) would otherwise be hidden.
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        *size,
        "--tmpfs",
        "/dev/shm",
        *size,
        "--tmpfs",
        "/tmp",
        *(_device_binds() if gpu else []),
        *_python_binds(),
        *_package_binds(),
        "--ro-bind",
        str(task_dir),
        SANDBOX_TASK,
        "--bind",
        str(workdir),
        SANDBOX_WORK,
        "--chdir",
        SANDBOX_WORK,
        "--clearenv",
        *(["--seccomp", str(seccomp_fd)] if seccomp_fd is not None else []),
    ]
    for key, value in {**env, "PYTHONPATH": SANDBOX_ROOT}.items():
        argv += ["--setenv", key, value]
    argv += ["--", *wrapper, *python]
    return argv, {"PATH": env.get("PATH", "/usr/bin:/bin")}, level


def _package_binds() -> list[str]:
    args: list[str] = []
    for name in SANDBOX_PACKAGES:
        args += ["--ro-bind", str(HARNESS_ROOT / name), f"{SANDBOX_ROOT}/{name}"]
    return args


def _symlink_or_bind(path: str) -> list[str]:
    p = Path(path)
    if p.is_symlink():
        return ["--symlink", os.readlink(p), path]
    if p.exists():
        return ["--ro-bind", path, path]
    return []


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


Answer = Callable[[dict], dict]


class _Reader(threading.Thread):
    """Reads JSON lines from the result pipe, stamping each with the host clock.

    A request (`{"event": "ask", ...}`) is answered at once on the reply pipe
    by `answer` (the orchestrator's Dealer), in the order the requests came.
    A line longer than MAX_LINE_BYTES is one malformed message, skipped to
    its end. Past MAX_CHANNEL_BYTES in all, the reader stops and sets
    `flooded`: run_child kills the child at once.
    """

    def __init__(
        self, fd: int, sink: ChildRun, answer: Answer | None = None, reply_fd: int | None = None
    ):
        super().__init__(daemon=True)
        self.fd, self.sink = fd, sink
        self.answer, self.reply_fd = answer, reply_fd
        self.flooded = threading.Event()
        # Set between the child's `batch_begin` and `batch_end`: the back-to-back batch
        # is timed by this thread's stamps, so the watch makes no long scan meanwhile.
        self.in_batch = threading.Event()
        self._line = bytearray()
        self._skipping = False  # inside a line past MAX_LINE_BYTES

    def _reply(self, message: dict) -> None:
        if self.answer is None or self.reply_fd is None:
            return
        try:
            answer = self.answer(message)
        except Exception as exc:  # a request the Dealer cannot read: refused, never left hanging
            self.sink.bad_messages += 1
            answer = {"error": f"an unreadable request ({type(exc).__name__})"}
        data = (json.dumps(answer) + "\n").encode()
        try:
            while data:
                data = data[os.write(self.reply_fd, data) :]
        except OSError:
            pass  # the child is gone

    def run(self) -> None:
        with os.fdopen(self.fd, "rb", buffering=0) as stream:
            while chunk := stream.read(65536):
                self.sink.channel_bytes += len(chunk)
                if self.sink.channel_bytes > MAX_CHANNEL_BYTES:
                    self.flooded.set()
                    return
                self._take(chunk)

    def _take(self, chunk: bytes) -> None:
        """Add `chunk` to the line being read, and handle each line it completes."""
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end == -1 else chunk[start:end]
            if not self._skipping:
                if len(self._line) + len(piece) > MAX_LINE_BYTES:
                    self.sink.bad_messages += 1
                    self._skipping = True
                    self._line.clear()
                else:
                    self._line += piece
            if end == -1:
                return
            if not self._skipping:
                self._handle(bytes(self._line))
            self._line.clear()
            self._skipping = False
            start = end + 1

    def _handle(self, line: bytes) -> None:
        stamp = time.monotonic()
        try:
            message = json.loads(line)
            if not isinstance(message, dict):
                raise ValueError("not an object")
        except (ValueError, RecursionError):  # RecursionError: nested past the parser's depth
            self.sink.bad_messages += 1
            return
        self.sink.messages.append((stamp, message))
        if message.get("event") == "batch_begin":
            self.in_batch.set()
        elif message.get("event") == "batch_end":
            self.in_batch.clear()
        if message.get("event") == "ask":
            self._reply(message)


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
    log: ChildLog | None = None,
    guard: bool = True,
) -> ChildRun:
    """Run the harness child; `python_args` may name the result fd as `{fd}`.

    With `answer`, the child's requests on the result pipe are answered on a
    second pipe, which `python_args` names as `{reply_fd}`. Its stdout and
    stderr go to `log` (a ChildLog; the caller may have handed its `mark` to
    the Dealer), and `ChildRun.log` is their text. With `guard`, the child
    runs under the killguard filter.
    """
    proctree.become_subreaper()
    log = log if log is not None else ChildLog()
    read_fd, write_fd = os.pipe()
    child_reply_fd, reply_fd = os.pipe()
    log_read_fd, log_write_fd = os.pipe()
    args = [
        a.replace("{fd}", str(write_fd)).replace("{reply_fd}", str(child_reply_fd))
        for a in python_args
    ]
    level = isolation_level()
    seccomp = killguard.program() if guard else None
    seccomp_fd = killguard.program_fd(seccomp) if seccomp and level == "bwrap" else None
    argv, proc_env, level = sandbox_command(
        python_args=args, workdir=workdir, task_dir=task_dir, env=env, gpu=gpu, wrapper=wrapper,
        tmp_bytes=limits.memory_bytes, seccomp_fd=seccomp_fd,
    )  # fmt: skip
    nproc = proctree.processes_of_uid(os.getuid()) + limits.max_processes
    result = ChildRun(returncode=None, isolation=level, kill_guarded=seccomp is not None)
    reader = _Reader(read_fd, result, answer, reply_fd)
    oom_kills = proctree.host_oom_kills()
    started = result.started = time.monotonic()
    keep = (write_fd, child_reply_fd, *([seccomp_fd] if seccomp_fd is not None else []))
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=log_write_fd,
        stderr=subprocess.STDOUT,
        env=proc_env,
        cwd=workdir,
        pass_fds=keep,
        start_new_session=True,
        preexec_fn=lambda: _set_limits(limits, nproc, seccomp if level == "process" else None),
    )
    for fd in (*keep, log_write_fd):
        os.close(fd)
    log.attach(log_read_fd)
    reader.start()
    try:
        _watch(proc, result, reader, limits, workdir, started)
    finally:
        if proc.poll() is None:
            proctree.kill_tree(proc)
            proc.wait()
        proctree.reap_orphans()
    reader.join(timeout=10)
    log.close()
    os.close(reply_fd)
    result.returncode = proc.returncode
    result.host_oom_kills = proctree.host_oom_kills() - oom_kills
    result.wall_seconds = time.monotonic() - started
    result.log = log.text()
    return result


def scratch_bytes_allowed(workdir: Path, limits: Limits) -> int:
    """The scratch folder's limit: `limits.scratch_bytes`, or half the disk's free space if less.

    A disk the evaluation fills stops every evaluation after it on the host
    (seen on a GPU host of 64 GiB, where one kernel filled it).
    """
    try:
        free = shutil.disk_usage(workdir).free
    except OSError:
        return limits.scratch_bytes
    return min(limits.scratch_bytes, free // 2)


def _watch(
    proc: subprocess.Popen,
    result: ChildRun,
    reader: _Reader,
    limits: Limits,
    workdir: Path,
    started: float,
) -> None:
    """Sample the child's tree until it ends, and kill it at the first limit it passes."""
    scratch_checked, full = 0.0, False
    scratch_limit = result.scratch_limit_bytes = scratch_bytes_allowed(workdir, limits)
    while proc.poll() is None:
        elapsed = time.monotonic() - started
        tree = [proc.pid, *proctree.descendants(proc.pid)]
        result.pids.update(tree)
        # The outer bubblewrap sees the host's filesystem; its descendants see the sandbox's.
        inside = tree[1:] if result.isolation == "bwrap" else []
        tmpfs = proctree.tmpfs_bytes(inside, size=limits.memory_bytes)
        rss = proctree.memory_bytes(tree) + tmpfs
        if rss > result.peak_rss_bytes:
            result.peak_rss_bytes, result.peak_tmpfs_bytes = rss, tmpfs
        # A walk of the scratch folder holds the interpreter for a while (thousands of
        # compiled files): never while a back-to-back batch is being timed by the
        # reader's stamps (on the H200 one delayed them by ~20 ms: escaped_work on an
        # honest kernel).
        if elapsed - scratch_checked >= SCRATCH_EVERY_S and not reader.in_batch.is_set():
            scratch_checked = elapsed
            used, entries = proctree.folder_bytes(workdir, MAX_SCRATCH_ENTRIES)
            result.peak_scratch_bytes = max(result.peak_scratch_bytes, used)
            full = used > scratch_limit or entries > MAX_SCRATCH_ENTRIES
            waited = proctree.longest_cpu_wait(tree)
            result.cpu_wait_seconds = max(result.cpu_wait_seconds, min(waited, elapsed))
        if reader.flooded.is_set():
            result.killed_for = "result_channel"
        elif elapsed - result.cpu_wait_seconds > limits.timeout_s:
            result.killed_for = "timeout"
        elif elapsed > limits.timeout_s * limits.max_wall_factor:
            result.killed_for, result.wall_capped = "timeout", True
        elif rss > limits.memory_bytes:
            result.killed_for = "memory"
        elif full:
            result.killed_for = "scratch"
        elif len(tree) > limits.max_processes + 8:
            result.killed_for = "processes"
        if result.killed_for:
            proctree.kill_tree(proc, tree)
            break
        # A flood on the result pipe wakes the watch at once.
        reader.flooded.wait(0.05 if elapsed < 2 else 0.2)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proctree.kill_tree(proc)
        proc.wait()


def _signal_of(code: int | None, level: str) -> int | None:
    """The signal that ended the child's interpreter, from the exit status.

    bubblewrap reports a child killed by signal N as exit code 128 + N; the
    killguard filter turns the child's own exit with such a status into SIGSYS.
    """
    if code is None:
        return None
    if code < 0:
        return -code
    if level == "bwrap" and 128 < code < 128 + signal.NSIG:
        return code - 128
    return None
