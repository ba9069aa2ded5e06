"""What sharing a GPU cost an evaluation (`LeaseReport`), and the lease of an evaluation
that has its GPU to itself (`NoLease`): the parts of gpulease that hold no lock."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Answer = Callable[[dict], dict]

# A lease folder's record of its exclusive phases, one line each time one is held and
# freed ("wall-clock seconds, pid, held|freed, other evaluations sharing the GPU"), kept
# only where the file exists: a measurement makes it (bench/lease_timeline.py).
TIMELINE = "timeline.log"


def timeline(folder: Path, event: str, others: int = 0) -> None:
    """Append `event` to the folder's timeline, if it keeps one."""
    try:
        fd = os.open(folder / TIMELINE, os.O_WRONLY | os.O_APPEND)
    except OSError:
        return
    try:
        os.write(fd, f"{time.time():.3f} {os.getpid()} {event} {others}\n".encode())
    finally:
        os.close(fd)


@dataclass
class LeaseReport:
    """What sharing the GPU cost this evaluation, for the verdict's environment."""

    # The most other evaluations that shared the GPU when this one took it alone.
    most_others: int = 0
    # The most other evaluations seen on the GPU while this one ran (at its start,
    # then about once a second): their memory was not this evaluation's to use.
    most_sharing: int = 0
    exclusive_phases: int = 0
    # Waiting for the exclusive lease (other evaluations' timed phases, then the drain).
    exclusive_wait_s: float = 0.0
    # Of that wait: for work other evaluations had queued before they froze.
    drain_s: float = 0.0
    # Holding it: this evaluation's timed phases, the GPU no other evaluation could use.
    exclusive_held_s: float = 0.0
    # Frozen while another evaluation was timed.
    frozen_s: float = 0.0
    frozen_times: int = 0
    # Shares given up while this evaluation's child had not yet asked for the GPU:
    # it went on starting, unfrozen, beside another evaluation's timed phase.
    yielded_unfrozen: int = 0
    # Waiting for the GPU to be granted to the child (another's timed phase).
    gpu_grant_wait_s: float = 0.0
    # A drain that did not end: the GPU stayed busy with work that is not this evaluation's.
    drain_failed: str = ""
    # A process that could not be frozen (it would have shared another's timed phase).
    freeze_failed: str = ""
    # The judge's GPU work that ran out of memory beside other evaluations, waited for
    # it and ran again (gpumemory): how often, and how long it waited.
    memory_waits: int = 0
    memory_wait_s: float = 0.0


class NoLease:
    """One evaluation on its GPU: nothing to share, nothing to wait for."""

    report = LeaseReport()
    gpu_busy = ""

    def summary(self) -> dict[str, Any] | None:
        return None

    def problem(self) -> str:
        return ""

    def paused_seconds(self) -> float:
        return 0.0

    def others(self) -> int:
        return 0

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        yield

    @contextlib.contextmanager
    def parent_work(self) -> Iterator[None]:
        yield

    @contextlib.contextmanager
    def child(self, answer: Answer | None, *, alone: bool = False) -> Iterator[Answer | None]:
        yield answer
