"""Reading the child's result channel, strictly.

The child runs untrusted code, so anything on its result pipe may be forged.
The parent knows the plan (workloads, seeds, order), so it knows exactly
which messages an honest child sends and in what order; any other message,
a duplicate, a wrong seed or file, or anything after the end is flagged as
`result_channel` and never used. A message in its place is parsed once, into
the frozen dataclass of its kind (reports.py), which is all the judge reads.
Host-clock stamps taken by the parent's reader thread give the wall time of
the timing batches.
"""

from __future__ import annotations

import dataclasses
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .job import Plan, PlannedWorkload
from .reports import (
    CHILD_ERROR_KINDS,
    BatchReport,
    ErrorReport,
    OutputReport,
    ProfiledReport,
    TimingReport,
    flag,
    parse_batch,
    parse_error,
    parse_notice,
    parse_output,
    parse_profiled,
    parse_timing,
)

# Sent by the child's own checks: allowed between any two protocol messages.
INFORMATIONAL = {"patched", "threads", "bad_output", "l2_persistence", "escaped", "kernels"}
# The child's requests (Dealer answers them as they come): not part of the sequence.
REQUESTS = {"ask"}


@dataclass
class Observed:
    """What the child reported, each message parsed once (reports.py), and the flags so far."""

    outputs: dict[str, list[OutputReport]] = field(default_factory=dict)
    timings: dict[str, TimingReport] = field(default_factory=dict)
    # A profiling pass's report of each workload's profiled call (counters.py).
    profiled: dict[str, ProfiledReport] = field(default_factory=dict)
    batches: dict[str, BatchReport] = field(default_factory=dict)
    error: ErrorReport | None = None
    flags: list[dict[str, str]] = field(default_factory=list)
    # Back-to-back batches whose host time per call the reported median does
    # not explain; settled against ncu's kernel durations once the counters
    # pass has run (timingchecks.settle_host_clock).
    host_clock: list[dict[str, Any]] = field(default_factory=list)
    started: bool = False
    ready: bool = False
    done: bool = False


# What a seed is for. The child asks for each one as it makes the call
# that needs it (Dealer), so no seed exists, even in the parent, before then.
PURPOSES = frozenset({"check", "model", "warm", "ref", "call", "sample", "audit", "decoy"})
TIMING_PURPOSES = PURPOSES - {"check"}
# A profiled call: its model, one warm-up call (compilation, autotuning), the
# call, and the positions of its outputs that the parent checks.
PROFILE_PURPOSES = frozenset({"model", "warm", "call", "sample"})


def steps_of(
    workloads: Sequence[PlannedWorkload], *, clean: bool = False, profile: bool = False
) -> list[tuple[str, str]]:
    """The evaluation's steps, (kind, workload): "check" (correctness), "time" or "profile".

    Public workloads are checked first, then the timed ones are timed, and
    the hidden workloads come last: nothing of them reaches the child, or
    its log, before all the rest is done. A clean run (the reference timed in
    a process that never imports the submission) only times; a profiling
    pass (counters.py) makes one untimed call of each timed workload.
    """
    if profile:
        return [("profile", w.name) for w in workloads if w.timed]
    timed = [("time", w.name) for w in workloads if w.timed]
    if clean:
        return timed
    public = [("check", w.name) for w in workloads if not w.hidden]
    hidden = [("check", w.name) for w in workloads if w.hidden]
    return [*public, *timed, *hidden]


class Dealer:
    """The parent's side of the child's requests: steps, seeds and audits, each when due.

    The child holds no plan. It asks for its next step (a workload's name and
    parameters), for each call's seed as it makes that call, for the seed of
    a timed call's sampled positions once the call has returned, and after
    every timed call whether an audit follows. Seeds are drawn at the
    request, from `secrets`; `record()` gives the judge what was issued.
    Requests that do not fit the current step are refused and kept in
    `problems` (flagged `result_channel`).
    """

    def __init__(
        self,
        workloads: Sequence[PlannedWorkload],
        *,
        seeds: int,
        audits: dict[str, list[int]] | None = None,
        clean: bool = False,
        profile: bool = False,
        on_hidden: Callable[[], Any] | None = None,
    ):
        self._workloads = {w.name: w for w in workloads}
        self._steps = steps_of(workloads, clean=clean, profile=profile)
        self._clean = clean
        self._position = 0
        self._seeds = seeds
        # Secret: the timed calls after which an audit call is made.
        self._audit_places = {name: sorted(places) for name, places in (audits or {}).items()}
        self._last_call: dict[str, int] = {}
        self._on_hidden = on_hidden
        self.hidden_mark: Any = None
        # A hidden workload was dealt: from here on the child may know its shapes.
        self.hidden_dealt = False
        self.current: tuple[str, str] | None = None
        self.issued: dict[str, dict[str, list[int]]] = {w.name: {} for w in workloads}
        self.problems: list[str] = []
        # (host monotonic clock, seed) of every seed, as it was drawn.
        self.issued_at: list[tuple[float, int]] = []

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        what = request.get("what")
        if what == "step":
            return self._next_step()
        if what == "gpu":
            # The GPU lease, where there is one, answers first (gpulease.GpuLease.child).
            return {"gpu": True}
        if self.current is None or request.get("workload") != self.current[1]:
            return self._refuse(f"a {what!r} request for {request.get('workload')!r} out of step")
        kind, name = self.current
        if what == "seed":
            purpose = str(request.get("purpose"))
            allowed = {"check": {"check"}, "profile": PROFILE_PURPOSES}.get(kind, TIMING_PURPOSES)
            if purpose not in allowed:
                return self._refuse(f"a seed for {purpose!r} during a {kind} step")
            drawn = self.issued[name].setdefault(purpose, [])
            if purpose == "check" and len(drawn) >= self._seeds:
                return self._refuse(f"more than {self._seeds} correctness seeds for {name}")
            drawn.append(secrets.randbits(62))
            self.issued_at.append((time.monotonic(), drawn[-1]))
            return {"seed": drawn[-1]}
        if what == "audit" and kind == "time":
            call = request.get("call")
            if not isinstance(call, int) or call <= self._last_call.get(name, 0):
                return self._refuse(f"an audit question after call {call!r} of {name}")
            self._last_call[name] = call
            places = self._audit_places.get(name, [])
            due = bool(places) and places[0] <= call
            if due:
                places.pop(0)
            return {"audit": due}
        if what == "audits_left" and kind == "time":
            left = len(self._audit_places.get(name, []))
            self._audit_places[name] = []
            return {"count": left}
        return self._refuse(f"an unknown request {what!r}")

    def _next_step(self) -> dict[str, Any]:
        if self._position >= len(self._steps):
            self.current = None
            return {"step": "end"}
        kind, name = self._steps[self._position]
        self._position += 1
        self.current = (kind, name)
        workload = self._workloads[name]
        if workload.hidden and not self.hidden_dealt:
            self.hidden_dealt = True
            if self._on_hidden is not None:
                self.hidden_mark = self._on_hidden()
        return {"step": kind, "workload": {"name": name, "params": workload.params}}

    def _refuse(self, problem: str) -> dict[str, Any]:
        self.problems.append(problem)
        return {"error": problem}

    def record(self) -> Plan:
        """What was issued, per workload in step order, as `collect` and the judge read it."""
        order = list(dict.fromkeys(name for _, name in self._steps))
        workloads = []
        for name in order:
            issued = self.issued[name]
            workloads.append(
                dataclasses.replace(
                    self._workloads[name],
                    seeds=tuple(issued.get("check", [])),
                    model_seed=(issued.get("check") or issued.get("model") or [0])[0],
                    calls=tuple(issued.get("call", [])),
                    samples=tuple(issued.get("sample", [])),
                    audits=tuple(issued.get("audit", [])),
                )
            )
        return Plan(
            workloads=tuple(workloads),
            steps=tuple(self._steps),
            seeds=self._seeds,
            issued_at=tuple(self.issued_at),
            clean=self._clean,
        )


def expected_sequence(plan: Plan) -> list[tuple[str, str, str]]:
    """(event, workload, tag) in the order an honest child sends them."""
    steps: list[tuple[str, str, str]] = [("hello", "", ""), ("ready", "", "")]
    for kind, name in plan.steps:
        if kind == "check":
            for index in range(plan.seeds):
                steps.append(("output", name, str(index)))
                if index == 0:
                    steps.append(("output", name, "0r"))
        elif kind == "profile":
            steps.append(("profiled", name, ""))
        elif plan.clean:
            steps.append(("timing", name, ""))
        else:
            steps += [
                ("batch_begin", name, ""),
                ("batch_calls", name, ""),
                ("batch_taken", name, ""),
                ("batch_end", name, ""),
                ("timing", name, ""),
            ]
    steps.append(("done", "", ""))
    return steps


def collect(messages: list[tuple[float, dict]], plan: Plan, bad_messages: int = 0) -> Observed:
    """The child's messages read against the plan: each in its place parsed, the rest flagged."""
    seen = Observed()
    steps = expected_sequence(plan)
    seeds = {w.name: w.seeds for w in plan.workloads}
    position = 0
    batch_begin: float | None = None
    batch_calls, take_s = 0.0, 0.0
    finished = False
    for stamp, msg in messages:
        event = str(msg.get("event"))
        if finished:
            seen.flags.append(flag("result_channel", f"message {event!r} after the end"))
            break
        if event in REQUESTS:
            continue
        if event in INFORMATIONAL:
            if raised := parse_notice(msg):
                seen.flags.append(raised)
            continue
        if event == "error":
            if not _keep_error(msg, seen):
                break
            finished = True
            continue
        want = steps[position] if position < len(steps) else ("<end>", "", "")
        problem = _mismatch(msg, want, seeds)
        if problem:
            seen.flags.append(flag("result_channel", problem))
            break
        position += 1
        name = want[1]
        if event == "hello":
            seen.started = True
        elif event == "ready":
            seen.ready = True
        elif event == "output":
            seen.outputs.setdefault(name, []).append(parse_output(msg))
        elif event == "batch_begin":
            batch_begin, batch_calls, take_s = stamp, stamp, 0.0
        elif event == "batch_calls":
            batch_calls = stamp
        elif event == "batch_taken":
            take_s = max(stamp - batch_calls, 0.0)
        elif event == "batch_end" and batch_begin is not None:
            host_ms = (stamp - batch_begin - take_s) * 1e3
            seen.batches[name] = parse_batch(msg, host_ms=host_ms, take_ms=take_s * 1e3)
        elif event == "timing":
            seen.timings[name] = parse_timing(msg)
        elif event == "profiled":
            seen.profiled[name] = parse_profiled(msg)
        elif event == "done":
            seen.done = True
            finished = True
    if bad_messages:
        seen.flags.append(
            flag("result_channel", f"{bad_messages} malformed message(s) on the result pipe")
        )
    return seen


def _keep_error(msg: dict, seen: Observed) -> bool:
    """Keep the child's `error` as `seen.error`, or flag it: the child says only that the
    evaluation failed and how (CHILD_ERROR_KINDS); any other word is the submission's,
    written on the pipe to pose as a verdict."""
    error = parse_error(msg)
    if error.kind not in CHILD_ERROR_KINDS:
        # Not quoted: the owner reads the flag, and the word is the submission's.
        detail = "an error message of a kind the harness never sends"
        seen.flags.append(flag("result_channel", detail))
        return False
    seen.error = error
    return True


def timing_windows(messages: list[tuple[float, dict]]) -> dict[str, tuple[float, float]]:
    """Per timed workload, the host-clock span of its warm-up, timed calls, audits and batch.

    The step that timed it: from the child's request for that step to its
    request for the next (or `done`). For diagnostics only: the stamps are
    the parent's, but the child chooses when to write.
    """
    windows: dict[str, tuple[float, float]] = {}
    for workload, began, ended in _timing_steps(messages):
        windows.setdefault(workload, (began, ended))
    return windows


def child_stages(
    messages: list[tuple[float, dict]], started: float, ended: float
) -> dict[str, float]:
    """Wall seconds of the timed child's stages, from the parent's stamps of its messages.

    `start`: process start to `hello` (the sandbox, Python, the harness and
    torch); `setup`: to `ready` (the job, the L2 flush's calibration, the
    submission's import); `timing`: the steps that timed a workload (from the
    child's request for such a step to its request for the next: warm-up,
    timed calls, audits, the batch); `checks`: the rest until `done`
    (correctness on every seed, first calls and their compilation); `exit`:
    to the process's end. A stage whose closing message never came is left
    out. Diagnostics only, as `timing_windows`.
    """
    first: dict[str, float] = {}
    for stamp, msg in messages:
        first.setdefault(str(msg.get("event")), stamp)
    hello, ready, done = first.get("hello"), first.get("ready"), first.get("done")
    stages: dict[str, float] = {}
    if hello is not None:
        stages["start"] = hello - started
        if ready is not None:
            stages["setup"] = ready - hello
            if done is not None:
                timed = _timing_steps_seconds(messages)
                stages["timing"] = timed
                stages["checks"] = done - ready - timed
                stages["exit"] = ended - done
    return {name: round(max(seconds, 0.0), 2) for name, seconds in stages.items()}


def _timing_steps_seconds(messages: list[tuple[float, dict]]) -> float:
    """The seconds between the child's requests for a step, over the steps that sent a batch."""
    return sum(ended - began for _, began, ended in _timing_steps(messages))


def _timing_steps(messages: list[tuple[float, dict]]) -> list[tuple[str, float, float]]:
    """(workload, began, ended) of each step that sent a batch, from step request to the next."""
    steps = []
    step_began: float | None = None
    timed: str | None = None
    for stamp, msg in messages:
        event = msg.get("event")
        if event == "batch_begin":
            timed = str(msg.get("workload"))
        elif (event == "ask" and msg.get("what") == "step") or event == "done":
            if step_began is not None and timed is not None:
                steps.append((timed, step_began, stamp))
            step_began, timed = stamp, None
    return steps


def _mismatch(msg: dict, want: tuple[str, str, str], seeds: dict[str, tuple[int, ...]]) -> str:
    event, name, tag = want
    got = str(msg.get("event"))
    if got != event:
        return f"expected {event!r}{f' for {name}' if name else ''}, got {got!r}"
    if name and msg.get("workload") != name:
        return f"{event!r} for {msg.get('workload')!r}, expected {name!r}"
    if event == "output":
        index = int(tag.rstrip("r"))
        planned = seeds[name][index] if index < len(seeds[name]) else None
        if msg.get("tag") != tag or planned is None or msg.get("seed") != planned:
            return f"output of {name} with tag {msg.get('tag')!r} or seed not the planned one"
        if msg.get("file") != f"{name}.{tag}.out":
            return f"output of {name} names the file {msg.get('file')!r}"
    return ""
