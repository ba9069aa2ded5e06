"""Isolation levels, and the command line that runs a sandboxed child at one.

Strongest first (the verdict's environment says which one ran):

- `bwrap`: bubblewrap with new user, PID, network, IPC, UTS and mount
  namespaces, all capabilities dropped, an unprivileged uid inside, and a
  filesystem made of read-only binds of just the interpreter, the harness (with
  the task format code it imports) and the task package, plus one writable
  scratch folder. No network, no project files, no database, no secrets on disk.
- `process`: a plain child process. Still its own session and process group,
  a scrubbed environment, resource limits and the same watchdog; but it can
  see the host's filesystem and network, so use it only where bubblewrap is
  unavailable (documented in docs/evaluator.md).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

# The folder holding `evaluator/` and `taskformat/`.
HARNESS_ROOT = Path(__file__).resolve().parent.parent.parent
# The packages bound read-only at SANDBOX_ROOT, on the child's PYTHONPATH: the harness and
# the task format its modules import; nothing else of the project.
SANDBOX_PACKAGES = ("evaluator", "taskformat")
SANDBOX_ROOT = "/d2k"
SANDBOX_WORK = f"{SANDBOX_ROOT}/work"
SANDBOX_TASK = f"{SANDBOX_ROOT}/task"
# The wrapper's own folder (a profiler's table): in the outer sandbox, where the wrapper
# runs, and in none of the interpreter's.
SANDBOX_TOOL = f"{SANDBOX_ROOT}/tool"
# Where the outer sandbox keeps the host's /proc, out of sight under an empty memory file
# system: the kernel lets the inner sandbox mount a /proc of its own only where a whole
# one is mounted in the outer's namespace (bubblewrap's own /proc has parts covered).
HIDDEN_PROC = f"{SANDBOX_ROOT}/.proc"
# The interpreter's flags in every sandboxed child: -P keeps the working
# directory (the scratch folder, the child's to write) off sys.path, -s the
# user's site-packages. sys.path is then the read-only harness (PYTHONPATH),
# the standard library and the interpreter's site-packages.
PYTHON_FLAGS = ("-P", "-s")


def child_path() -> str:
    """Every sandboxed child's PATH: the interpreter's own bin folder (where pip puts
    ninja, which load_inline needs), the CUDA toolkit's (nvcc), then the system's."""
    return f"{Path(sys.executable).parent}:/usr/local/cuda/bin:/usr/local/bin:/usr/bin:/bin"


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


def tool_path(folder: Path) -> str:
    """Where the wrapper of `sandbox_command` sees its `tool_folder`, at this host's level."""
    return str(folder) if isolation_level() == "process" else SANDBOX_TOOL


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
    tool_folder: Path | None = None,
    tmp_bytes: int = 0,
    seccomp_fd: int | None = None,
) -> tuple[list[str], dict[str, str], str]:
    """The argv, environment and level for running `python -P -s python_args...` sandboxed.

    `wrapper` is a command that runs the interpreter inside the sandbox (a
    profiler: `ncu ... python ...`); it runs with the child's confinement.
    With `tool_folder`, a host folder the wrapper writes (its table), the
    wrapper runs in the sandbox with that folder at SANDBOX_TOOL and the
    interpreter in a second sandbox inside the first (`_inner_sandbox`): a
    PID namespace of its own, in which the wrapper's processes do not exist,
    and the same filesystem without SANDBOX_TOOL. It shares the wrapper's
    loopback network, System V IPC, /tmp and /dev/shm (a profiler talks to
    the process it profiles through them); none of them reaches the host.

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
    tool = []
    if tool_folder is not None and wrapper:
        tool = ["--bind", str(tool_folder), SANDBOX_TOOL, *_hidden_host_proc()]
        python = [*_inner_sandbox(bwrap, gpu=gpu), *python]
    argv = [
        bwrap,
        *_userns_args(),
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        *_filesystem_args(workdir, task_dir, gpu=gpu, tmp_bytes=tmp_bytes),
        *tool,
        "--clearenv",
        *(["--seccomp", str(seccomp_fd)] if seccomp_fd is not None else []),
    ]
    for key, value in {**env, "PYTHONPATH": SANDBOX_ROOT}.items():
        argv += ["--setenv", key, value]
    argv += ["--", *wrapper, *python]
    return argv, {"PATH": env.get("PATH", "/usr/bin:/bin")}, level


def _hidden_host_proc() -> list[str]:
    """The host's /proc bound under HIDDEN_PROC and covered at once: nothing in the sandbox
    can read it, and the inner sandbox may mount a /proc of its own (`_inner_sandbox`)."""
    return ["--bind", "/proc", f"{HIDDEN_PROC}/proc", "--tmpfs", HIDDEN_PROC]


def _inner_sandbox(bwrap: str, *, gpu: bool) -> list[str]:
    """The second sandbox, started by the wrapper inside the first, for the interpreter.

    New user, PID, UTS and cgroup namespaces: the wrapper's processes are not
    in its /proc, so none of their open files (the table) can be reopened
    through /proc/PID/fd and none can be traced. Its filesystem is the
    outer sandbox's, bound path by path, without SANDBOX_TOOL; /tmp and
    /dev/shm are the outer's (their contents count against the memory limit
    as before). The environment is the wrapper's: a profiler passes its
    injection to the processes it profiles through it.
    """
    return [
        bwrap,
        "--unshare-user-try",
        "--unshare-pid",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        *_filesystem_args(
            Path(SANDBOX_WORK), Path(SANDBOX_TASK), gpu=gpu, tmp_bytes=0, within=True
        ),
        "--",
    ]


def _filesystem_args(
    workdir: Path, task_dir: Path, *, gpu: bool, tmp_bytes: int, within: bool = False
) -> list[str]:
    """What the child's filesystem is made of: read-only system folders, fresh /proc, /dev
    and /tmp, the GPU's nodes, the interpreter, the harness, the task and the scratch folder.

    `within`: for a sandbox inside the sandbox (`_inner_sandbox`), whose
    harness is at SANDBOX_ROOT already and whose /tmp and /dev/shm are the
    outer sandbox's."""
    size = ["--size", str(tmp_bytes)] if tmp_bytes > 0 else []
    memory = (
        ["--bind", "/dev/shm", "/dev/shm", "--bind", "/tmp", "/tmp"]
        if within
        else [*size, "--tmpfs", "/dev/shm", *size, "--tmpfs", "/tmp"]
    )
    return [
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
        *memory,
        *(_device_binds() if gpu else []),
        *_python_binds(),
        *_package_binds(within=within),
        "--ro-bind",
        str(task_dir),
        SANDBOX_TASK,
        "--bind",
        str(workdir),
        SANDBOX_WORK,
        "--chdir",
        SANDBOX_WORK,
    ]


def _package_binds(*, within: bool = False) -> list[str]:
    args: list[str] = []
    for name in SANDBOX_PACKAGES:
        source = f"{SANDBOX_ROOT}/{name}" if within else str(HARNESS_ROOT / name)
        args += ["--ro-bind", source, f"{SANDBOX_ROOT}/{name}"]
    return args


def _symlink_or_bind(path: str) -> list[str]:
    p = Path(path)
    if p.is_symlink():
        return ["--symlink", os.readlink(p), path]
    if p.exists():
        return ["--ro-bind", path, path]
    return []
