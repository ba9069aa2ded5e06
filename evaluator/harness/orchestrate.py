"""The trusted side of an evaluation: seeds, sandboxed child, reference, verdict.

    evaluate(task=..., source=..., mode=...) -> Verdict

The orchestrator never imports the submission. It draws secret seeds, starts
the sandboxed child (evaluator.harness.child), waits for it under the
sandbox's limits, then computes the reference outputs itself (a different
process from the submission's) and judges everything the child reported.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import secrets
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from taskformat import package
from taskformat.spec import Mode, TaskSpec, WorkloadSpec

from . import childlog, counters, environment, honesty, protocol, redact, sandbox
from .job import CleanReference, Job, Plan, PlannedWorkload, TimingSettings
from .judge import host_clock_bound_ms, judge
from .properties import launched_kernels
from .protocol import Observed
from .spec import Status, Verdict, WorkloadResult

# The production timing settings (job.TimingSettings' defaults), as a dict for the docs and CLI.
TIMING: dict[str, float] = dataclasses.asdict(TimingSettings())
# Untimed audit calls per timed workload, at secret places among its timed
# calls: their inputs are written on the caller's stream after the launch
# cover (Child._audit_call), and every one is checked against the reference.
AUDIT_CALLS = 4


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
    read_counters: bool = True,
) -> Verdict:
    """Evaluate `source` on `task`; `plan_sink`, if given, receives what the parent issued.

    `read_counters`: once a cuda-mode verdict is correct, read each timed
    workload's hardware counters in an untimed pass (counters.profile).
    """
    started = time.monotonic()
    settings = timing_settings(timing)
    env_info = environment.describe(mode)
    try:
        compile(source, "submission.py", "exec")
    except SyntaxError as exc:
        return _verdict(
            task,
            mode,
            Status.COMPILE_ERROR,
            f"SyntaxError at line {exc.lineno}: {exc.msg}",
            [],
            [],
            env_info,
            "",
            started,
        )
    problem = sandbox.unavailable()
    if problem is not None:
        return _verdict(task, mode, Status.WORKER_ERROR, problem, [], [], env_info, "", started)
    workloads = task.workloads_for(mode)
    if mode is Mode.CUDA:
        env_info["ceilings"] = environment.ceilings()
        env_info["compute_dtypes"] = environment.compute_dtypes(workloads)
        env_info["timing_settings"] = dataclasses.asdict(settings)

    workdir = sandbox.scratch_folder()
    public_dir = Path(tempfile.mkdtemp(prefix="d2k-task-"))
    phases = Phases()
    with contextlib.ExitStack() as cleanup:
        # The scratch folder lives until the counters pass has taken its compile caches.
        if not keep_workdir:
            cleanup.callback(shutil.rmtree, workdir, ignore_errors=True)
        cleanup.callback(shutil.rmtree, public_dir, ignore_errors=True)
        _public_package(task, public_dir)
        # The owner's log is what the child wrote before the first hidden workload was dealt.
        child_log = childlog.ChildLog()
        dealer = dealer_for(
            task, planned_workloads(workloads, mode), settings, on_hidden=child_log.mark
        )
        monitor = environment.GpuMonitor()
        with phases("child"), monitor if mode is Mode.CUDA else contextlib.nullcontext():
            run = _run_child(
                task, source, mode, dealer, settings, workdir, public_dir, timeout_s, memory_bytes,
                log=child_log,
            )  # fmt: skip
        env_info["child_stages"] = protocol.child_stages(
            run.messages, run.started, run.started + run.wall_seconds
        )
        plan = dealer.record()
        if plan_sink is not None:
            plan_sink.append(plan)
        seen = _collect(run, plan, dealer)
        env_info["isolation"] = run.isolation
        env_info["peak_rss_mib"] = round(run.peak_rss_bytes / 2**20, 1)
        env_info["peak_tmpfs_mib"] = round(run.peak_tmpfs_bytes / 2**20, 1)
        env_info["peak_scratch_mib"] = round(run.peak_scratch_bytes / 2**20, 1)
        if mode is Mode.CUDA:
            env_info["gpu_state_during"] = monitor.summary(
                windows=protocol.timing_windows(run.messages)
            )
            _census(monitor.gpu_pids() & run.pids, seen)
            # As the child reported it: which launch cover its timed calls had.
            covers = [t.get("cover") for t in seen.timings.values()]
            env_info["launch_cover"] = covers[0] if covers else None
            env_info["gpu_state_after"] = environment.gpu_state()
        log, public_log = run.log, child_log.public()
        with phases("judge"):
            results = judge(task, mode, plan, seen, workdir, env_info, source=source)
        if mode is Mode.CUDA:
            env_info["launched_kernels"] = launched_kernels(seen.outputs, source)
        honest_so_far = not seen.flags and all(r.status is Status.CORRECT for r in results)
        if mode is Mode.CUDA and seen.timings and honest_so_far:
            with phases("clean_reference"):
                clean = _clean_reference_times(
                    task, mode, settings, public_dir, timeout_s, memory_bytes
                )
            env_info["clean_reference"] = dataclasses.asdict(clean)
            seen.flags += reference_tampering(results, clean)
            results = with_clean_reference(results, clean)
        for name in honesty.tampering_names(source):
            seen.flags.append(protocol.flag("harness_tampering", f"the source names {name}"))
        status, message = _decide(run, seen, results, len(workloads), task=task, dealer=dealer)
        with phases("counters"):
            results, env_info["counters"] = counters.profile(
                task=task,
                source=source,
                mode=mode,
                status=status,
                results=results,
                enabled=read_counters,
                timeout_s=min(timeout_s, counters.PROFILE_TIMEOUT_S),
                memory_bytes=memory_bytes,
                # A kept scratch folder keeps its caches too.
                builds=None if keep_workdir else workdir,
            )
        if seen.host_clock:
            inconsistent, env_info["host_overhead"] = settle_host_clock(seen.host_clock, results)
            if inconsistent:
                seen.flags += inconsistent
                status, message = _decide(
                    run, seen, results, len(workloads), task=task, dealer=dealer
                )
    env_info["phase_seconds"] = phases.seconds
    flags = redact.flags(task, seen.flags)
    verdict = _verdict(task, mode, status, message, flags, results, env_info, log, started)
    return dataclasses.replace(verdict, public_log=public_log)


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


def _collect(run: sandbox.ChildRun, plan: Plan, dealer: protocol.Dealer) -> Observed:
    """What the child reported, read against the plan, with what its channel showed as flags."""
    seen = protocol.collect(run.messages, plan, run.bad_messages)
    seen.flags += [protocol.flag("result_channel", problem) for problem in dealer.problems]
    if run.killed_for == "result_channel":
        seen.flags.append(
            protocol.flag(
                "result_channel",
                f"the child wrote more than {_channel_cap()} to the result pipe and was killed "
                "(an honest evaluation writes a few MiB)",
            )
        )
    return seen


def _channel_cap() -> str:
    return f"{sandbox.MAX_CHANNEL_BYTES / 2**20:g} MiB"


def _census(pids: set[int], seen: Observed) -> None:
    """More than one process of the submission held the GPU: work the events could not see.

    The child is one process with one CUDA context. A helper process with a
    context of its own can run work beside the harness's stream, and its
    events, through CUDA IPC.
    """
    if len(pids) > 1:
        seen.flags.append(
            protocol.flag(
                "gpu_process",
                f"{len(pids)} processes of the submission held a CUDA context on the GPU "
                f"(process ids {', '.join(map(str, sorted(pids)))}); only the child may",
            )
        )


def _decide(
    run: sandbox.ChildRun,
    seen: Observed,
    results: list[WorkloadResult],
    expected: int,
    *,
    task: TaskSpec,
    dealer: protocol.Dealer | None = None,
) -> tuple[Status, str]:
    """One status for the evaluation, in order of precedence (docs/evaluator.md).

    Evidence of cheating outranks the way the process ended: a kernel that
    patches the timer and then hangs is held for review as `flagged`, with the
    kill named in the message, not filed away as a plain timeout. A child
    ended from outside (outside_kill) is never the submission's fault.
    """
    killed = _killed(run)
    if seen.flags:
        checks = sorted({f["check"] for f in seen.flags})
        message = "honesty check fired: " + ", ".join(checks)
        return Status.FLAGGED, f"{message} (then {killed[1]})" if killed else message
    if killed:
        return killed
    if outside := outside_kill(run):
        return Status.WORKER_ERROR, outside
    if not seen.started:
        return Status.WORKER_ERROR, f"the sandbox did not start (exit code {run.returncode})"
    if seen.error is not None:
        hidden_dealt = dealer is not None and dealer.hidden_dealt
        return _error_status(seen.error, task, hidden_dealt=hidden_dealt)
    if not seen.done:
        how = f"signal {run.signal}" if run.signal else f"exit code {run.returncode}"
        return Status.RUNTIME_ERROR, f"the submission's process ended early ({how})"
    incorrect = [r for r in results if r.status is not Status.CORRECT]
    if incorrect:
        public = [r for r in incorrect if not r.hidden]
        hidden = len(incorrect) - len(public)
        names = [r.name for r in public]
        if hidden:
            names.append(f"{hidden} hidden workload{'s' if hidden > 1 else ''}")
        # A hidden workload's message names its shapes: staff see it in its row.
        why = public[0].message if public else "its output differs from the reference"
        return Status.INCORRECT, f"incorrect on {', '.join(names)}: {why}"
    if len(results) != expected:
        return Status.WORKER_ERROR, "the evaluation ended without a result for every workload"
    return Status.CORRECT, f"correct on all {len(results)} workloads"


def _killed(run: sandbox.ChildRun) -> tuple[Status, str] | None:
    """The status and message of a child the watchdog killed, or None."""
    if run.killed_for == "timeout":
        waited = run.cpu_wait_seconds
        if run.wall_capped:
            return Status.TIMEOUT, (
                f"killed after {run.wall_seconds:.0f} s of wall time, the most an evaluation may "
                f"take on a busy host ({waited:.0f} s of it waiting for a CPU)"
            )
        if waited < 1:
            return Status.TIMEOUT, f"killed after the {run.wall_seconds:.0f} s time limit"
        return Status.TIMEOUT, (
            f"killed after the time limit: {run.wall_seconds - waited:.0f} s of running, "
            f"{run.wall_seconds:.0f} s of wall time ({waited:.0f} s of it waiting for a CPU, "
            "not counted)"
        )
    if run.killed_for == "memory":
        used = f"killed for using {run.peak_rss_bytes / 2**30:.1f} GiB of host memory"
        if run.peak_tmpfs_bytes >= 2**20:
            used += f" ({run.peak_tmpfs_bytes / 2**30:.1f} GiB of it files in /tmp and /dev/shm)"
        return Status.OUT_OF_MEMORY, used
    if run.killed_for == "scratch":
        return Status.OUT_OF_MEMORY, (
            f"killed for filling its scratch folder ({run.peak_scratch_bytes / 2**30:.1f} GiB; "
            f"the limits are {run.scratch_limit_bytes / 2**30:.1f} GiB and "
            f"{sandbox.MAX_SCRATCH_ENTRIES} files)"
        )
    if run.killed_for == "processes":
        return Status.RUNTIME_ERROR, "killed for starting too many processes"
    if run.killed_for == "result_channel":
        cap = _channel_cap()
        return Status.RUNTIME_ERROR, f"killed for writing more than {cap} to the result pipe"
    return None


def outside_kill(run: sandbox.ChildRun) -> str:
    """Why the child ended from outside the evaluation, or "" if it did not.

    Under the killguard filter no process of the submission can send SIGKILL,
    or end with a status that reads as one: a SIGKILL the watchdog did not
    send came from the host (its out-of-memory killer, or another process).
    """
    if run.killed_for or run.signal != signal.SIGKILL:
        return ""
    if run.host_oom_kills > 0:
        return (
            "the host's out-of-memory killer ended the submission's process (the host ran out "
            f"of memory; the evaluation's processes used at most {run.peak_rss_bytes / 2**30:.1f} "
            "GiB, within their limit): a fault of the worker, not of the submission"
        )
    if run.kill_guarded:
        return (
            "a SIGKILL from outside the evaluation ended the submission's process (the sandbox "
            "lets the submission send none): a fault of the worker, not of the submission"
        )
    return ""


def _error_status(error: dict, task: TaskSpec, *, hidden_dealt: bool) -> tuple[Status, str]:
    """The status and message of the exception the child reported.

    Once a hidden workload was dealt, whatever the child says of where it
    failed, the owner reads the exception's type only, and only a known one
    (redact.error_message).
    """
    kind = str(error.get("kind", "runtime_error"))
    status = Status(kind) if kind in set(Status) else Status.RUNTIME_ERROR
    where = error.get("workload")
    text = str(error.get("message", ""))
    if hidden_dealt or where in redact.hidden_names(task):
        return status, redact.error_message(text)
    return status, f"{text} (workload {where})" if where else text


def planned_workloads(
    workloads: tuple[WorkloadSpec, ...], mode: Mode
) -> tuple[PlannedWorkload, ...]:
    """The plan's workloads before any seed is issued: timed in cuda mode if their role is."""
    return tuple(
        PlannedWorkload(
            name=w.name,
            params=w.params,
            timed=mode is Mode.CUDA and w.role == "timed",
            hidden=w.hidden,
        )
        for w in workloads
    )


def dealer_for(
    task: TaskSpec,
    workloads: tuple[PlannedWorkload, ...],
    settings: TimingSettings,
    *,
    clean: bool = False,
    on_hidden: Callable[[], Any] | None = None,
) -> protocol.Dealer:
    """The evaluation's plan, held by the parent: the child learns each part when it is due."""
    audits: dict[str, list[int]] = {
        w.name: audit_places(settings.max_calls) for w in workloads if w.timed and not clean
    }
    return protocol.Dealer(
        workloads, seeds=task.seeds, audits=audits, clean=clean, on_hidden=on_hidden
    )


def child_job(
    *,
    task: TaskSpec,
    mode: Mode,
    settings: TimingSettings,
    task_dir: str,
    out_dir: str,
    submission: str = "",
    baseline: str = "",
    device: str = "",
) -> Job:
    """The child's job: no seed and no workload (it asks for each when due).

    A clean run's job names no submission. The orchestrator and the protocol
    tests build the child's job here, and only here.
    """
    return Job(
        mode=str(mode),
        reference=f"{task_dir}/reference.py",
        baseline=baseline,
        submission=submission,
        out_dir=out_dir,
        inplace=task.inplace,
        seeds=task.seeds,
        timing=settings,
        device=device,
    )


def audit_places(max_calls: int) -> list[int]:
    """The AUDIT_CALLS secret timed calls after which an audit call is made."""
    calls = max(max_calls, 1)
    return sorted(secrets.SystemRandom().sample(range(1, calls + 1), min(AUDIT_CALLS, calls)))


def _public_package(task: TaskSpec, folder: Path) -> None:
    """What of the task the sandbox may read: reference.py (and baseline.py), never task.toml.

    The hidden workloads are defined in task.toml only; the child is told a
    workload's parameters when it runs it.
    """
    for name in ("reference.py", "baseline.py"):
        source = Path(task.directory) / name
        if source.is_file():
            shutil.copyfile(source, folder / name)
    folder.chmod(0o755)


def _run_child(
    task: TaskSpec,
    source: str,
    mode: Mode,
    dealer: protocol.Dealer,
    settings: TimingSettings,
    workdir: Path,
    public_dir: Path,
    timeout_s: float,
    memory_bytes: int | None,
    *,
    clean: bool = False,
    log: childlog.ChildLog | None = None,
) -> sandbox.ChildRun:
    if not clean:
        (workdir / "submission.py").write_text(source)
    task_dir = public_dir.resolve()
    seen = sandbox.layout(workdir, task_dir)  # the paths as the child sees them
    job = child_job(
        task=task,
        mode=mode,
        settings=settings,
        task_dir=seen.task,
        out_dir=f"{seen.work}/out",
        submission="" if clean else f"{seen.work}/submission.py",
        baseline=f"{seen.task}/baseline.py" if (task_dir / "baseline.py").is_file() else "",
    )
    (workdir / "job.json").write_text(json.dumps(dataclasses.asdict(job)))
    env = {
        # The interpreter's own bin folder holds ninja where pip installed it;
        # load_inline needs it, and nvcc, on the PATH.
        "PATH": f"{Path(sys.executable).parent}:/usr/local/cuda/bin:/usr/local/bin:/usr/bin:/bin",
        "HOME": seen.work,
        "TMPDIR": seen.work,
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "TRITON_CACHE_DIR": f"{seen.work}/.triton",
        "TORCH_EXTENSIONS_DIR": f"{seen.work}/.torch_extensions",
        "OMP_NUM_THREADS": "1",
    }
    if mode is Mode.INTERPRET:
        env["TRITON_INTERPRET"] = "1"
        env["CUDA_VISIBLE_DEVICES"] = ""
    for key in ("CUDA_VISIBLE_DEVICES", "CUDA_HOME", "LD_LIBRARY_PATH", "TRITON_PTXAS_PATH"):
        if key in os.environ and key not in env:
            env[key] = os.environ[key]
    run = sandbox.run_child(
        python_args=sandbox.child_args(f"{seen.work}/job.json"),
        workdir=workdir,
        task_dir=task_dir,
        env=env,
        limits=sandbox.Limits(
            timeout_s=timeout_s, memory_bytes=memory_bytes or sandbox.default_memory_limit()
        ),
        gpu=mode is Mode.CUDA,
        answer=dealer.answer,
        log=log,
    )
    return run


# The in-process baseline may be slower than in a clean process by this much
# before it is flagged: across processes an honest reference's median moves
# by a few percent (allocator placement, the GPU's state; docs/benchmarks.md).
# The speedup never gains from a slowed reference (it takes the clean time
# where that is faster), so the flag is evidence of an attempt, raised only
# for a slowdown beyond what a launch-bound reference's own noise explains
# (an honest launch-bound reference was seen 1.46x slower beside its
# submission on the H200).
TAMPERING_RATIO = 2.0
TAMPERING_MS = 0.002


def _clean_reference_times(
    task: TaskSpec,
    mode: Mode,
    settings: TimingSettings,
    public_dir: Path,
    timeout_s: float,
    memory_bytes: int | None,
) -> CleanReference:
    """The baseline's medians timed in a sandboxed process that never imports the submission.

    Same protocol (flush, covers, phases) with the submission's side left
    out: nothing a submission does at import or in its calls (patching
    torch.softmax, overriding aten::_softmax through torch.library) reaches it.
    """
    timed = planned_workloads(tuple(w for w in task.workloads_for(mode) if w.role == "timed"), mode)
    dealer = dealer_for(task, timed, settings, clean=True)
    # A scratch folder of its own: nothing the submission's child wrote (a module
    # named after one the harness imports) is where this child starts.
    workdir = sandbox.scratch_folder(prefix="d2k-clean-")
    try:
        run = _run_child(
            task, "", mode, dealer, settings, workdir, public_dir, timeout_s, memory_bytes,
            clean=True,
        )  # fmt: skip
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    seen = _collect(run, dealer.record(), dealer)
    medians: dict[str, float] = {}
    for name, msg in seen.timings.items():
        times = msg.get("ref_ms")
        if isinstance(times, list) and times and all(isinstance(t, int | float) for t in times):
            medians[name] = float(sorted(times)[len(times) // 2])
    problem = "" if seen.done and not seen.flags else (
        f"the clean run did not finish: {seen.error or seen.flags or run.returncode}"
    )  # fmt: skip
    return CleanReference(ref_median_ms=medians, problem=problem[:500])


def reference_tampering(results: list[WorkloadResult], clean: CleanReference) -> list[dict]:
    """Flags for workloads whose in-process baseline ran slower than in the clean process.

    Only where the events timed the reference's kernels: a workload on which
    most of the reference's calls were host-bound (the host was still
    queueing them when their launch cover ended, as a reference that reads
    a tensor back to the host in mid-call always is) was timed by the host's
    speed in each process, not by what ran on the device. An honest
    synchronising baseline was seen 2.2x slower beside its submission than
    in a clean process on the H200; the speedup takes the faster time either
    way, so no score depends on that comparison.
    """
    flags = []
    medians = clean.ref_median_ms
    for result in results:
        m = result.measurement
        if m is None or result.name not in medians:
            continue
        if m.reference_host_bound:
            continue
        allowed = medians[result.name] * TAMPERING_RATIO + TAMPERING_MS
        if m.ref_median_ms > allowed:
            flags.append(
                protocol.flag(
                    "reference_tampering",
                    f"{result.name}: the reference took {m.ref_median_ms:.4f} ms beside the "
                    f"submission but {medians[result.name]:.4f} ms in a clean process",
                )
            )
    return flags


def settle_host_clock(
    pending: list[dict[str, Any]], results: list[WorkloadResult]
) -> tuple[list[dict], list[dict]]:
    """The judge's host-clock discrepancies, each a `timing_inconsistent` flag or explained.

    A back-to-back batch took the orchestrator's clock more time per call
    than the reported median explains. Where ncu timed the same call's
    kernels (the counters pass, a process of its own) and they fit the
    median's bound too, the difference is the host's own work between calls,
    which the launch cover keeps out of the events: the call is host-bound,
    and the verdict lists it under `host_overhead`. Otherwise (the kernels
    took longer, or no counters were read) the reported times do not add up.
    Returns (flags, explained).
    """
    by_name = {r.name: r for r in results}
    flags, explained = [], []
    for item in pending:
        name, host_ms, median_ms = item["workload"], item["host_ms_per_call"], item["median_ms"]
        result = by_name.get(name)
        kernel_ms = (result.counters or {}).get("kernel_ms") if result is not None else None
        said = (
            f"{name}: back-to-back calls took {host_ms:.4f} ms each by the orchestrator's "
            f"clock, against a reported median of {median_ms:.4f} ms"
        )
        if kernel_ms is None:
            flags.append(
                protocol.flag(
                    "timing_inconsistent", f"{said}, and no counters pass timed its kernels"
                )
            )
        elif kernel_ms > host_clock_bound_ms(median_ms):
            flags.append(
                protocol.flag(
                    "timing_inconsistent",
                    f"{said}, and its kernels took {kernel_ms:.4f} ms a call under ncu",
                )
            )
        else:
            explained.append(
                {
                    "workload": name,
                    "host_ms_per_call": round(host_ms, 4),
                    "median_ms": round(median_ms, 4),
                    "kernel_ms": kernel_ms,
                }
            )
    return flags, explained


def with_clean_reference(
    results: list[WorkloadResult], clean: CleanReference
) -> list[WorkloadResult]:
    """Each timed result with the clean process's reference median beside its own."""
    medians = clean.ref_median_ms
    out = []
    for result in results:
        m = result.measurement
        if m is not None and result.name in medians:
            m = dataclasses.replace(m, clean_ref_median_ms=medians[result.name])
            result = dataclasses.replace(result, measurement=m)
        out.append(result)
    return out


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
