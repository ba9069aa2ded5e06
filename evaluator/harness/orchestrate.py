"""The trusted side of an evaluation: seeds, sandboxed child, reference, verdict.

    evaluate(task=..., source=..., mode=...) -> Verdict

The orchestrator never imports the submission. An evaluation is a series of
named stages (the first four timed in the verdict's `phase_seconds`):

1. **child**: the sandboxed child (evaluator.harness.child) checks and times
   the submission, dealt its plan step by step (launch.py, protocol.py);
2. **judge**: the reference's outputs, computed here, against everything the
   child reported (judge.py);
3. **clean_reference**: in cuda mode, the baseline timed again in a process
   that never imports the submission (cleanreference.py);
4. **counters**: for a correct cuda-mode verdict, hardware counters read in an
   untimed pass (counters.py);
5. **settle**: back-to-back batches the host clock found slow, held against
   the counters' kernel durations (timingchecks.settle_host_clock).

One status comes of it, in order of precedence (decision.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from taskformat import package
from taskformat.counter_rules import NOT_PROFILED
from taskformat.spec import Mode, TaskSpec

from . import (
    ceilings,
    childlog,
    counters,
    environment,
    gpulease,
    honesty,
    isolation,
    launch,
    protocol,
    redact,
    sandbox,
)
from .cleanreference import reference_tampering, reusable_clean_reference, with_clean_reference
from .decision import decide
from .job import Plan, TimingSettings
from .judge import judge
from .ncu_report import DURATION_ONLY
from .properties import launched_kernels
from .protocol import Observed
from .timingchecks import settle_host_clock
from .verdict import Status, Verdict, WorkloadOutcome

# The production timing settings (job.TimingSettings' defaults), as a dict for the docs and CLI.
TIMING: dict[str, float] = dataclasses.asdict(TimingSettings())


def timing_settings(overrides: dict[str, float] | None = None) -> TimingSettings:
    """The timing protocol's settings, with `overrides` (for experiments) checked and applied.

    Raises ValueError naming the problem (TimingSettings.with_overrides).
    """
    return TimingSettings().with_overrides(overrides)


def evaluate(
    *,
    task: TaskSpec,
    source: str,
    mode: Mode,
    timeout_s: float = 600.0,
    memory_bytes: int | None = None,
    keep_workdir: bool = False,
    timing: dict[str, float] | None = None,
    plan_sink: list[Plan] | None = None,
    read_counters: str = "all",
    gpu_lease: Path | None = None,
) -> Verdict:
    """Evaluate `source` on `task`; `plan_sink`, if given, receives what the parent issued.

    `read_counters`: once a cuda-mode verdict is correct, read each timed
    workload's hardware counters in an untimed pass (counters.profile): "all",
    "needed" (where a property's counter rule or the timing check uses them), "off".
    `gpu_lease`: the lease folder of a GPU that other evaluations share
    (gpulease): its timed phases then have the GPU to themselves.
    """
    started = time.monotonic()
    refusal = _refusal(source)
    if refusal is not None:
        env_info = environment.describe(mode)
        return _verdict(task, mode, *refusal, [], [], env_info, "", started)
    with gpulease.joined(gpu_lease if mode is Mode.CUDA else None) as lease:
        verdict = _evaluate(task, source, mode, timeout_s, memory_bytes, keep_workdir, timing,
                            plan_sink, read_counters, started)  # fmt: skip
    if (summary := lease.summary()) is not None:
        verdict.environment["gpu_lease"] = summary
    if lease.problem():
        message = f"the GPU was not this evaluation's alone while it was timed: {lease.problem()}"
        return dataclasses.replace(
            verdict, status=Status.WORKER_ERROR, message=message, flags=(), workloads=()
        )
    return verdict


def _evaluate(
    task: TaskSpec,
    source: str,
    mode: Mode,
    timeout_s: float,
    memory_bytes: int | None,
    keep_workdir: bool,
    timing: dict[str, float] | None,
    plan_sink: list[Plan] | None,
    read_counters: str,
    started: float,
) -> Verdict:
    """`evaluate`'s stages, inside the evaluation's share of the GPU lease."""
    settings = timing_settings(timing)
    env_info = environment.describe(mode)
    workloads = task.workloads_for(mode)
    if mode is Mode.CUDA:
        env_info["ceilings"] = ceilings.ceilings(measure_guard=gpulease.current().exclusive)
        env_info["compute_dtypes"] = environment.compute_dtypes(workloads)
        env_info["timing_settings"] = dataclasses.asdict(settings)
    stages = _Stages(task, source, mode, settings, env_info, timeout_s, memory_bytes)
    with contextlib.ExitStack() as cleanup:
        stages.prepare(cleanup, keep_workdir=keep_workdir)
        child = stages.child()
        if plan_sink is not None:
            plan_sink.append(child.plan)
        seen = child.seen
        with stages.phases("judge"):
            results = judge(task, mode, child.plan, seen, stages.workdir, env_info,
                            source=source, keep_outputs=keep_workdir)  # fmt: skip
        if mode is Mode.CUDA:
            env_info["launched_kernels"] = launched_kernels(seen.outputs, source)
        results = stages.clean_reference(seen, results)
        for name in honesty.tampering_names(source):
            seen.flags.append(protocol.flag("harness_tampering", f"the source names {name}"))
        status, message = child.decide(results, task)
        with stages.phases("counters"):
            results, env_info["counters"] = stages.counters(
                status, results, read_counters, [item["workload"] for item in seen.host_clock]
            )
        if seen.host_clock:
            inconsistent, env_info["host_overhead"] = settle_host_clock(seen.host_clock, results)
            if inconsistent:
                seen.flags += inconsistent
                status, message = child.decide(results, task)
    env_info["phase_seconds"] = stages.phases.seconds
    flags = redact.flags(task, seen.flags)
    verdict = _verdict(task, mode, status, message, flags, results, env_info, child.log, started)
    return dataclasses.replace(verdict, public_log=child.public_log)


def _refusal(source: str) -> tuple[Status, str] | None:
    """Why the evaluation ends before any child starts: a syntax error, or no sandbox here."""
    try:
        compile(source, "submission.py", "exec")
    except SyntaxError as exc:
        return Status.COMPILE_ERROR, f"SyntaxError at line {exc.lineno}: {exc.msg}"
    problem = isolation.unavailable()
    if problem is not None:
        return Status.WORKER_ERROR, problem
    return None


@dataclass(frozen=True)
class _Child:
    """The checked and timed child's run, what it was dealt, and what it reported."""

    run: sandbox.ChildRun
    dealer: protocol.Dealer
    plan: Plan
    seen: Observed
    log: str
    public_log: str
    workloads: int

    def decide(self, results: list[WorkloadOutcome], task: TaskSpec) -> tuple[Status, str]:
        return decide(self.run, self.seen, results, self.workloads, task=task, dealer=self.dealer)


class _Stages:
    """The stages of one evaluation, with what they share: its folders, limits and environment."""

    def __init__(
        self,
        task: TaskSpec,
        source: str,
        mode: Mode,
        settings: TimingSettings,
        env_info: dict,
        timeout_s: float,
        memory_bytes: int | None,
    ):
        self.task, self.source, self.mode, self.settings = task, source, mode, settings
        self.env_info = env_info
        self.timeout_s, self.memory_bytes = timeout_s, memory_bytes
        self.keep_workdir = False
        self.workdir = sandbox.scratch_folder()
        self.public_dir = Path(tempfile.mkdtemp(prefix="d2k-task-"))
        self.phases = Phases()

    def prepare(self, cleanup: contextlib.ExitStack, *, keep_workdir: bool) -> None:
        # The scratch folder lives until the counters pass has taken its compile caches.
        self.keep_workdir = keep_workdir
        if not keep_workdir:
            cleanup.callback(shutil.rmtree, self.workdir, ignore_errors=True)
        cleanup.callback(shutil.rmtree, self.public_dir, ignore_errors=True)
        launch.public_package(self.task, self.public_dir)

    def child(self) -> _Child:
        """Check and time the submission in one sandboxed child, and read what it reported."""
        task, mode, env_info = self.task, self.mode, self.env_info
        workloads = task.workloads_for(mode)
        # The owner's log is what the child wrote before the first hidden workload was dealt.
        child_log = childlog.ChildLog()
        planned = launch.planned_workloads(workloads, mode)
        dealer = launch.dealer_for(task, planned, self.settings, on_hidden=child_log.mark)
        monitor = environment.GpuMonitor()
        with self.phases("child"), monitor if mode is Mode.CUDA else contextlib.nullcontext():
            run = launch.run_harness_child(
                task, self.source, mode, dealer, self.settings, self.workdir, self.public_dir,
                self.timeout_s, self.memory_bytes, log=child_log,
            )  # fmt: skip
        env_info["child_stages"] = protocol.child_stages(
            run.messages, run.started, run.started + run.wall_seconds
        )
        plan = dealer.record()
        seen = launch.collect(run, plan, dealer)
        env_info["isolation"] = run.isolation
        env_info["peak_rss_mib"] = round(run.peak_rss_bytes / 2**20, 1)
        env_info["peak_tmpfs_mib"] = round(run.peak_tmpfs_bytes / 2**20, 1)
        env_info["peak_scratch_mib"] = round(run.peak_scratch_bytes / 2**20, 1)
        if mode is Mode.CUDA:
            env_info["gpu_state_during"] = monitor.summary(
                windows=protocol.timing_windows(run.messages)
            )
            launch.census(monitor.gpu_pids() & run.pids, seen)
            # As the child reported it: which launch cover its timed calls had.
            covers = [t.cover for t in seen.timings.values()]
            env_info["launch_cover"] = covers[0] if covers else None
            env_info["gpu_state_after"] = environment.gpu_state()
        public_log = child_log.public()
        return _Child(run, dealer, plan, seen, run.log, public_log, len(workloads))

    def clean_reference(
        self, seen: Observed, results: list[WorkloadOutcome]
    ) -> list[WorkloadOutcome]:
        """In cuda mode, for an honest-so-far run: the baseline timed in a clean process."""
        honest_so_far = not seen.flags and all(r.status is Status.CORRECT for r in results)
        if self.mode is not Mode.CUDA or not seen.timings or not honest_so_far:
            return results
        with self.phases("clean_reference"):
            gpu = (self.env_info.get("gpu_state_before") or {}).get("uuid", "")
            clean = reusable_clean_reference(
                self.task, self.mode, self.settings, self.public_dir, self.timeout_s,
                self.memory_bytes, str(gpu),
            )  # fmt: skip
        self.env_info["clean_reference"] = dataclasses.asdict(clean)
        seen.flags += reference_tampering(results, clean)
        return with_clean_reference(results, clean)

    def counters(
        self, status: Status, results: list[WorkloadOutcome], when: str, host_clock: list[str]
    ) -> tuple[list[WorkloadOutcome], str]:
        """For a correct cuda-mode verdict, each timed workload's counters (counters.profile);
        with `when` "needed", only where a property's counter rule or a host-clock excess
        (timingchecks.settle_host_clock, `host_clock` the workloads that had one) uses them:
        without a counter rule, only those workloads' kernel times."""
        ruled = any(p.counters for p in self.task.properties)
        scope: dict[str, Any] = {}
        if when == "needed" and self.mode is Mode.CUDA and status is Status.CORRECT and not ruled:
            if not host_clock:
                return results, NOT_PROFILED["unneeded"]
            scope = {"only": host_clock, "metrics": DURATION_ONLY}
        return counters.profile(
            task=self.task,
            source=self.source,
            mode=self.mode,
            status=status,
            results=results,
            enabled=when != "off",
            timeout_s=min(self.timeout_s, counters.PROFILE_TIMEOUT_S),
            memory_bytes=self.memory_bytes,
            # A kept scratch folder keeps its caches too.
            builds=None if self.keep_workdir else self.workdir,
            **scope,
        )


class Phases:
    """Wall seconds of an evaluation's parts: its three sandboxed processes (the child, the
    clean reference, the counters) and the judge (the reference's outputs, the comparisons)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            self.seconds[name] = round(time.monotonic() - started, 2)


def _verdict(task, mode, status, message, flags, results, env_info, log, started) -> Verdict:
    return Verdict(
        status=status,
        message=message,
        flags=tuple(flags),
        workloads=tuple(results),
        environment=env_info,
        log=log,
        task=task.slug,
        mode=str(mode),
        wall_seconds=round(time.monotonic() - started, 3),
        task_hash=package.measured_content_hash(package.measured_content(task)),
    )
