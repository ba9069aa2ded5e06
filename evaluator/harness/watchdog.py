"""The watchdog: the limits a sandboxed child runs under, and the loop that holds it to them.

The parent samples the child's process tree until it ends: its wall and CPU
time, its host memory (with the files it keeps in memory: its /tmp and
/dev/shm under bubblewrap), its scratch folder and its process count, and
kills the whole tree at the first limit it passes. `ChildRun` is what the run
came to, as the watchdog and the result pipe's reader saw it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import gpulease, proctree
from .resultpipe import Reader

# How often the watchdog adds up the scratch folder, and how many entries it
# reads at most: past that many the folder counts as over its limit.
SCRATCH_EVERY_S = 1.0
MAX_SCRATCH_ENTRIES = 200_000


@dataclass
class ChildRun:
    returncode: int | None
    # "", "timeout", "memory", "scratch", "processes", "result_channel", "gpu_busy"
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
    # What the scratch folder was allowed to hold (scratch_bytes_allowed), and what the
    # limits allow every evaluation (Limits.scratch_bytes): less where the disk had less.
    scratch_limit_bytes: int = 0
    scratch_policy_bytes: int = 0
    log: str = ""
    isolation: str = ""
    # Every process id seen in the evaluation's process tree while it ran.
    pids: set[int] = field(default_factory=set)
    # Whether the killguard filter was loaded (a SIGKILL is then the outside's).
    kill_guarded: bool = False
    # The host's out-of-memory killer ended a process while the child ran.
    host_oom_kills: int = 0
    # Killed for "gpu_busy": why (gpulease).
    gpu_busy: str = ""

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


def watch(
    proc: subprocess.Popen,
    result: ChildRun,
    reader: Reader,
    limits: Limits,
    workdir: Path,
    started: float,
    *,
    lease: gpulease.NoLease | gpulease.GpuLease | None = None,
) -> None:
    """Sample the child's tree until it ends, and kill it at the first limit it passes.
    `lease`: the seconds frozen for another's timed phase are not counted (gpulease)."""
    result.scratch_policy_bytes, scratch_checked, full = limits.scratch_bytes, 0.0, False
    paused_before = (lease := lease or gpulease.NoLease()).paused_seconds()
    scratch_limit = result.scratch_limit_bytes = scratch_bytes_allowed(workdir, limits)
    while proc.poll() is None:
        elapsed = time.monotonic() - started - (lease.paused_seconds() - paused_before)
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
        elif lease.gpu_busy:
            result.killed_for, result.gpu_busy = "gpu_busy", lease.gpu_busy
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
