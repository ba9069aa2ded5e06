"""The GPU lease: several evaluations share one GPU, and only one of them is ever timed on it.

A worker may run several evaluations of one GPU at once (its concurrency), so that
one starts its processes, compiles, checks and judges while another is timed. What
is timed must still have the GPU to itself. The lease is a reader-writer lock on
two files of a folder per GPU (`flock`, so a dead holder frees it at once):

- every evaluation holds it **shared** while it runs: its sandboxed children and
  the parent's own GPU work (the judge's reference outputs) may use the GPU;
- a timed phase (the child's timed steps, the clean reference's, the counters'
  profiled steps, the ceilings' measurement) holds it **exclusive**. To take it, an
  evaluation first takes the `gate` file; every other evaluation's watcher sees
  the gate taken within `POLL_S`, freezes its sandboxed processes (SIGSTOP of every
  process of its tree but its own monitors: a frozen child launches nothing), waits
  for its own GPU work in the parent to end, and gives up its share. A sandboxed
  child that has not yet asked for the GPU is not frozen: until its first request
  (`gpu`, sent by the harness before it touches CUDA or imports the submission) it
  runs only the harness's own imports, which leave the GPU alone, and its request
  is answered once no timed phase holds the GPU. Once every
  share is given up, the holder waits until the GPU has gone idle (work the frozen
  processes had already queued: `gpuidle.wait_idle`) and times. At the end it goes
  back to shared and frees the gate; the others take their share again and thaw.

Correctness is untouched: a frozen child only waits. Nothing of a submission decides
when it is frozen or timed; the parent does, from the steps it deals. The time an
evaluation spends frozen, or waiting for the exclusive lease, does not count against
its time limit (`paused_seconds`), and the verdict records it (`report`).

Without a lease folder (one evaluation per GPU, the interpret mode, the CLI by hand)
`current()` is a lease that does nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from . import gpuidle, proctree
from .freezer import Freezer
from .leasereport import Answer, LeaseReport, NoLease, timeline

# How often a sharer looks at the gate, and counts the evaluations sharing its GPU.
POLL_S = 0.01
SHARING_EVERY_S = 1.0
# The step kinds dealt under the exclusive lease (protocol.steps_of).
EXCLUSIVE_STEPS = frozenset({"time", "profile"})
# Processes of this one that are the parent's own (the GPU monitors): never frozen.
trusted_pids: set[int] = set()


_current: NoLease | GpuLease = NoLease()


def current() -> NoLease | GpuLease:
    """The lease this process's evaluation holds (`joined`), or one that does nothing."""
    return _current


@contextlib.contextmanager
def joined(folder: Path | None) -> Iterator[NoLease | GpuLease]:
    """Hold a share of the GPU lease in `folder` for the evaluation this process runs."""
    global _current
    if folder is None:
        yield _current
        return
    lease = GpuLease(folder)
    with lease.membership():
        _current = lease
        try:
            yield lease
        finally:
            _current = NoLease()


class GpuLease:
    """This evaluation's side of the lease folder (see the module's docstring)."""

    def __init__(self, folder: Path):
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.report = LeaseReport()
        self._gpu = os.open(folder / "gpu", os.O_RDWR | os.O_CREAT, 0o600)
        self._gate = os.open(folder / "gate", os.O_RDWR | os.O_CREAT, 0o600)
        # A second open file of the gate: the watcher's look never changes the holder's lock.
        self._gate_look = os.open(folder / "gate", os.O_RDWR | os.O_CREAT, 0o600)
        self._member = folder / f"member-{os.getpid()}"
        self._cond = threading.Condition()
        # "shared", "yielded" (frozen, share given up), "acquiring", "exclusive"
        self._state = "out"
        self._parent_busy = 0
        self._freezer = Freezer()
        self._pauses = 0
        self._paused_since = 0.0
        self._paused_total = 0.0
        self._yielded_at = 0.0
        # Whether this evaluation's processes may be on the GPU: false only from a sandboxed
        # child's start to its `gpu` request (`child`), when it runs the harness's imports.
        self._child_on_gpu = True
        self._frozen_now = False
        # Why this evaluation's child is to be ended: its kernels ran on while it was frozen.
        self.gpu_busy = ""
        self._stop = threading.Event()
        self._watcher = threading.Thread(target=self._watch, daemon=True, name="gpu-lease")

    # --- membership -------------------------------------------------------------

    @contextlib.contextmanager
    def membership(self) -> Iterator[None]:
        fcntl.flock(self._gpu, fcntl.LOCK_SH)
        self._member.write_text(str(os.getpid()))
        self._state = "shared"
        self.report.most_sharing = self.others()
        self._watcher.start()
        try:
            yield
        finally:
            self._stop.set()
            self._watcher.join(timeout=5)
            with self._cond:
                self._freezer.thaw()
                self._state = "out"
            self._member.unlink(missing_ok=True)
            for fd in (self._gpu, self._gate, self._gate_look):
                os.close(fd)

    def others(self) -> int:
        """Other evaluations holding a share now (their member files, their processes alive)."""
        pids = (
            int(path.name.removeprefix("member-") or 0) for path in self.folder.glob("member-*")
        )
        return sum(1 for pid in pids if pid and pid != os.getpid() and proctree.pid_alive(pid))

    # --- the watchdog's clock ---------------------------------------------------

    def paused_seconds(self) -> float:
        """Seconds this evaluation has spent frozen or waiting for the exclusive lease."""
        with self._cond:
            ongoing = time.monotonic() - self._paused_since if self._pauses else 0.0
            return self._paused_total + ongoing

    def _pause(self) -> None:
        """One more reason to be paused (frozen, waiting): the clock stops at the first."""
        if self._pauses == 0:
            self._paused_since = time.monotonic()
        self._pauses += 1

    def _resume(self) -> None:
        self._pauses -= 1
        if self._pauses == 0:
            self._paused_total += time.monotonic() - self._paused_since

    # --- exclusive: a timed phase -------------------------------------------------

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """The GPU to this evaluation alone, other evaluations frozen and their work drained.

        Taken again while held (a child's timed steps inside the counters pass, which
        holds it whole), it is the same hold: the inner one gives nothing back.
        """
        with self._cond:
            held = self._state == "exclusive"
        if held:
            yield
            return
        with self._take_exclusive():
            yield

    @contextlib.contextmanager
    def _take_exclusive(self) -> Iterator[None]:
        with self._cond:
            self._pause()
        asked = time.monotonic()
        fcntl.flock(self._gate, fcntl.LOCK_EX)
        with self._cond:
            # The watcher leaves the locks alone from here.
            before, self._state = self._state, "acquiring"
        fcntl.flock(self._gpu, fcntl.LOCK_EX)
        with self._cond:
            if before == "yielded":
                self._unyield()  # its own children, frozen while another evaluation was timed
            self._state = "exclusive"
        try:
            now = drained = time.monotonic()  # `now`: from here if the drain fails
            others = self.others()
            self.report.most_others = max(self.report.most_others, others)
            if others:
                problem = self._drain(drained)
                if problem and not self.report.drain_failed:
                    self.report.drain_failed = problem
            now = time.monotonic()
            self.report.drain_s += now - drained
            self.report.exclusive_wait_s += now - asked
            self.report.exclusive_phases += 1
            with self._cond:
                self._resume()
            timeline(self.folder, "held", others)
            yield
        finally:
            self.report.exclusive_held_s += time.monotonic() - now
            timeline(self.folder, "freed")
            fcntl.flock(self._gpu, fcntl.LOCK_SH)
            with self._cond:
                self._state = "shared"
                self._cond.notify_all()
            fcntl.flock(self._gate, fcntl.LOCK_UN)

    def _drain(self, since: float) -> str:
        """Wait for the frozen evaluations' queued work. Kernels still running after
        BUSY_AFTER_S (one that never ends) are named in the folder by their processes,
        whose own evaluations end them (`gpu_busy`); then the wait goes on."""
        if not gpuidle.wait_idle(since=since, timeout_s=gpuidle.BUSY_AFTER_S):
            return ""
        mine = {os.getpid(), *proctree.descendants_except(os.getpid(), trusted_pids)}
        named = [self.folder / f"busy-{pid}" for pid in gpuidle.busy_pids() - mine]
        for path in named:
            path.write_text(f"{gpuidle.BUSY_AFTER_S:g}")
        try:
            return gpuidle.wait_idle(since=since, timeout_s=gpuidle.IDLE_TIMEOUT_S)
        finally:
            for path in named:
                path.unlink(missing_ok=True)

    # --- shared: the parent's own GPU work ------------------------------------------

    @contextlib.contextmanager
    def parent_work(self) -> Iterator[None]:
        """GPU work of the parent (the judge's reference outputs): never beside a timed phase.

        It waits while another evaluation is timed, and holds off this evaluation's
        freezing until it ends.
        """
        with self._cond:
            while self._timed_elsewhere():
                self._cond.wait(POLL_S)
            self._parent_busy += 1
        try:
            yield
        finally:
            with self._cond:
                self._parent_busy -= 1
                self._cond.notify_all()

    # --- a sandboxed child ------------------------------------------------------------

    @contextlib.contextmanager
    def child(self, answer: Answer | None, *, alone: bool = False) -> Iterator[Answer | None]:
        """The child's request handler, with its timed steps dealt under the exclusive lease.

        The lease is taken before the first timed step is dealt and given back when
        the child asks for a step that is not timed, or ends. With `alone` (a profiling
        pass) it is taken at the child's first request, before it touches the GPU, and
        held to its end.
        """
        if answer is None:
            yield answer
            return
        phase = _TimedPhase(self)
        with self._cond:
            self._child_on_gpu = False

        def steps(request: dict) -> dict:
            # Whatever the child asks first, it is on the GPU from then on.
            if alone:
                phase.enter()
            self._grant_gpu()
            if request.get("what") == "gpu":
                return {"gpu": True}
            reply = answer(request)
            if request.get("what") == "step" and not alone:
                phase.enter() if reply.get("step") in EXCLUSIVE_STEPS else phase.leave()
            return reply

        try:
            yield steps
        finally:
            phase.leave(over=True)
            with self._cond:
                self._child_on_gpu = True

    def _grant_gpu(self) -> None:
        """Mark the child as on the GPU, once no other evaluation's timed phase holds it.

        From here it is frozen with the rest of the evaluation's processes."""
        with self._cond:
            if not self._child_on_gpu and self._timed_elsewhere():
                waited = time.monotonic()
                self._pause()
                while self._timed_elsewhere():
                    self._cond.wait(POLL_S)
                self._resume()
                self.report.gpu_grant_wait_s += time.monotonic() - waited
            self._child_on_gpu = True

    # --- the watcher ------------------------------------------------------------------

    def _watch(self) -> None:
        counted = time.monotonic()
        while not self._stop.wait(POLL_S):
            if time.monotonic() - counted >= SHARING_EVERY_S:
                counted = time.monotonic()
                self.report.most_sharing = max(self.report.most_sharing, self.others())
            with self._cond:
                if self._state == "shared" and self._parent_busy == 0 and self._gate_taken():
                    # A child still starting is left to start: it is not on the GPU.
                    self._frozen_now = self._child_on_gpu
                    if self._frozen_now:
                        self._freezer.freeze(trusted_pids)
                        self._pause()
                    else:
                        self.report.yielded_unfrozen += 1
                    fcntl.flock(self._gpu, fcntl.LOCK_UN)
                    self._state = "yielded"
                    self._yielded_at = time.monotonic()
                elif self._state == "yielded" and not self.gpu_busy:
                    self.gpu_busy = self._freezer.named_busy(self.folder)
                if self._state == "yielded" and not self._gate_taken():
                    try:
                        fcntl.flock(self._gpu, fcntl.LOCK_SH | fcntl.LOCK_NB)
                    except BlockingIOError:
                        continue
                    self._unyield()

    def _unyield(self) -> None:
        """Back from "yielded": thawed, the clock running again (the condition held)."""
        self._freezer.thaw()
        self._state = "shared"
        if self._frozen_now:
            self.report.frozen_s += time.monotonic() - self._yielded_at
            self._resume()
            self._frozen_now = False
        self._cond.notify_all()

    def _timed_elsewhere(self) -> bool:
        """Whether another evaluation is timed, or about to be (the condition held): this
        one may put no new work on the GPU until it is not."""
        return self._state not in ("shared", "exclusive") or (
            self._state == "shared" and self._gate_taken()
        )

    def _gate_taken(self) -> bool:
        try:
            fcntl.flock(self._gate_look, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(self._gate_look, fcntl.LOCK_UN)
        return False

    def summary(self) -> dict[str, Any]:
        """The report, for the verdict's environment (`gpu_lease`)."""
        self.report.frozen_times = self._freezer.times
        self.report.freeze_failed = self._freezer.failed
        data = asdict(self.report)
        data = {k: round(v, 3) if isinstance(v, float) else v for k, v in data.items()}
        return {**data, "drain_method": gpuidle.method()}

    def problem(self) -> str:
        """Why this evaluation's timing cannot be trusted to have had the GPU alone, if so."""
        return self.report.drain_failed or self._freezer.failed


class _TimedPhase:
    """The exclusive lease held from a child's first timed step to its last.

    `enter` runs on the result pipe's reader thread and may wait there; `leave(over=True)`
    at the child's end, from the parent's thread, also gives back a lease that arrives
    after the child is gone.
    """

    def __init__(self, lease: GpuLease):
        self.lease = lease
        self._mu = threading.Lock()
        self._held: contextlib.ExitStack | None = None
        self._over = False

    def enter(self) -> None:
        with self._mu:
            if self._held is not None or self._over:
                return
        stack = contextlib.ExitStack()
        stack.enter_context(self.lease.exclusive())
        with self._mu:
            if not self._over:
                self._held, stack = stack, contextlib.ExitStack()
        stack.close()

    def leave(self, *, over: bool = False) -> None:
        with self._mu:
            held, self._held = self._held, None
            self._over = self._over or over
        if held is not None:
            held.close()
