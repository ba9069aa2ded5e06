"""The process tree of a sandboxed run: finding, measuring, killing and reaping it.

Linux only (it reads /proc). The orchestrator makes itself a child subreaper,
so processes the submission double-forks or detaches are re-parented to it
and can still be found and killed.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Collection, Sequence
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36
PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """SIGKILL this process when its parent dies (call it between fork and exec)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def become_subreaper() -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def processes_of_uid(uid: int) -> int:
    count = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    count += 1
            except OSError:
                continue
    return count


def descendants(root_pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                stat = fh.read().decode(errors="replace")
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    found, stack = [], [root_pid]
    while stack:
        pid = stack.pop()
        for child in children.get(pid, []):
            found.append(child)
            stack.append(child)
    return found


def descendants_except(root_pid: int, kept: set[int]) -> list[int]:
    """Every process below `root_pid` but those of `kept` and what they started."""
    skip = set(kept)
    for pid in kept:
        skip.update(descendants(pid))
    return [pid for pid in descendants(root_pid) if pid not in skip]


def pid_alive(pid: int) -> bool:
    """Whether process `pid` of this host still runs (a zombie, killed but not yet
    reaped by its new parent, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


def memory_bytes(pids: Sequence[int]) -> int:
    """Proportional set size of the tree: shared pages (a fork's) are not counted twice."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup", "rb") as fh:
                for line in fh:
                    if line.startswith(b"Pss:"):
                        total += int(line.split()[1]) * 1024
                        break
        except (OSError, IndexError, ValueError):
            continue
    return total


def tmpfs_bytes(pids: Sequence[int], *, size: int) -> int:
    """What the sandbox keeps in its /tmp and /dev/shm, as seen through a process inside it.

    Both are memory file systems of `size` bytes each (sandbox_command); one
    of another size is not the sandbox's (a process that has not entered its
    mount namespace yet sees the host's), and counts nothing.
    """
    pages = -(-size // os.sysconf("SC_PAGE_SIZE")) * os.sysconf("SC_PAGE_SIZE")
    for pid in pids:
        used, seen = 0, 0
        for folder in ("tmp", "dev/shm"):
            try:
                stat = os.statvfs(f"/proc/{pid}/root/{folder}")
            except OSError:
                continue
            if stat.f_blocks * stat.f_frsize == pages:
                used += (stat.f_blocks - stat.f_bfree) * stat.f_frsize
                seen += 1
        if seen:
            return used
    return 0


def folder_bytes(folder: Path, max_entries: int) -> tuple[int, int]:
    """(bytes on disk, entries) under `folder`, links not followed; stops past `max_entries`."""
    used, entries, stack = 0, 0, [folder]
    while stack and entries <= max_entries:
        try:
            with os.scandir(stack.pop()) as listing:
                for entry in listing:
                    entries += 1
                    try:
                        used += entry.stat(follow_symlinks=False).st_blocks * 512
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(Path(entry.path))
                    except OSError:  # gone since it was listed
                        continue
        except OSError:
            continue
    return used, entries


def longest_cpu_wait(pids: Sequence[int]) -> float:
    """Seconds the most-delayed thread of `pids` has spent runnable but waiting for a CPU."""
    longest = 0
    for pid in pids:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as fh:
                    longest = max(longest, int(fh.read().split()[1]))
            except (OSError, IndexError, ValueError):
                continue
    return longest / 1e9


def host_oom_kills() -> int:
    """How many processes the host's out-of-memory killer has ended since boot."""
    try:
        with open("/proc/vmstat", "rb") as fh:
            for line in fh:
                if line.startswith(b"oom_kill "):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def kill_tree(proc: subprocess.Popen, extra: Sequence[int] = ()) -> None:
    pids = [proc.pid, *descendants(proc.pid), *extra]
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def reap_orphans(spare: Collection[int] = ()) -> None:
    """Kill and reap whatever the child left behind (we are its subreaper), but the
    processes of `spare` (the parent's own, its GPU monitors).

    Only the strays are reaped, by pid: a spared process that died stays a zombie
    until its owner waits for it, so its pid cannot pass to a new process while it
    is still spared."""
    for _ in range(50):
        strays = [p for p in descendants(os.getpid()) if p != os.getpid() and p not in spare]
        if not strays:
            return
        for pid in strays:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.05)
        for pid in strays:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass  # not a child of ours: its own parent reaps it
