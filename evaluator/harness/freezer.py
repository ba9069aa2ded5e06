"""The processes of one evaluation, frozen while another evaluation on its GPU is timed.

Every process below the evaluation's parent is stopped (SIGSTOP), sandboxed or not,
orphans included (the parent is their subreaper), but the parent's own monitors.
A frozen process launches nothing; its kernels already on the GPU run on, and one
that never ends is named by the evaluation that waits for the GPU (gpulease): the
frozen evaluation then ends its child (`gpu_busy`).
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

from . import gpuidle, proctree


class Freezer:
    def __init__(self) -> None:
        self.frozen: set[int] = set()
        self.times = 0
        # A process that could not be stopped (it would have shared another's timed phase).
        self.failed = ""

    def freeze(self, trusted: set[int]) -> None:
        """SIGSTOP every process below this one but `trusted`, until none is left running."""
        for _ in range(20):
            below = proctree.descendants_except(os.getpid(), trusted)
            fresh = [pid for pid in below if pid not in self.frozen]
            if not fresh:
                break
            for pid in fresh:
                try:
                    os.kill(pid, signal.SIGSTOP)
                except ProcessLookupError:
                    pass
                except PermissionError as exc:
                    self.failed = f"process {pid} could not be stopped: {exc}"
                self.frozen.add(pid)
        if self.frozen:
            self.times += 1

    def thaw(self) -> None:
        for pid in self.frozen:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGCONT)
        self.frozen.clear()

    def named_busy(self, folder: Path) -> str:
        """Why this evaluation's child is to be ended, if a frozen process of it was named
        busy on the GPU in the lease folder (`busy-<pid>`), else ""."""
        for path in folder.glob("busy-*"):
            pid = int(path.name.removeprefix("busy-") or 0)
            if pid in self.frozen:
                return (
                    f"its process {pid} kept the GPU busy for {gpuidle.BUSY_AFTER_S:g} s while "
                    "it was paused for another evaluation's timed phase (a kernel that never "
                    "ends)"
                )
        return ""
