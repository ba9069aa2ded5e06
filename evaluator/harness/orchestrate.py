"""The trusted side of an evaluation: seeds, sandboxed child, reference, verdict.

    evaluate(task=..., source=..., mode=...) -> Verdict

The orchestrator never imports the submission. It draws secret seeds, starts
the sandboxed child (evaluator.harness.child), waits for it under the
sandbox's limits, then computes the reference outputs itself (a different
process from the submission's) and judges everything the child reported.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from . import environment, honesty, package, protocol, sandbox
from .judge import judge
from .protocol import Observed
from .spec import (
    Mode,
    Status,
    TaskSpec,
    Verdict,
    WorkloadResult,
    WorkloadSpec,
)

LOG_LIMIT = 32_000
TIMING = {
    "warmup_calls": 3,
    "warmup_s": 0.1,
    # Every phase, unless the time budget runs out first (checked at the end
    # of each phase, whatever the count).
    "min_calls": 400,
    "max_calls": 400,
    "budget_s": 1.5,
    "target_median_ci": 0.0025,
    "batch_ms": 60.0,
    "batch_memory_bytes": 8 * 1024**3,
    # 1: the flush reads its buffer (leaves clean L2 lines), 0: it writes it.
    "flush_reads": 0,
    # 1: a call's time is its stamped window (from the cover's release to a
    # stamp after the call), not its CUDA events; 0: the events.
    "window_stamps": 0,
    # Timing phases a workload's calls are split into (up to max_calls /
    # phases calls each), each with new models and a warm-up of its own:
    # a phase draws a state that moves a short call by about 1 µs, so the
    # figure pools forty of them (docs/benchmarks.md, series 8 and 9).
    "phases": 40,
}
# Untimed audit calls per timed workload, at secret places among its timed
# calls: their inputs are written on the caller's stream after the launch
# cover (Child._audit_call), and every one is checked against the reference.
AUDIT_CALLS = 4


def timing_settings(overrides: dict[str, float] | None = None) -> dict[str, float]:
    """The timing protocol's settings, with `overrides` (for experiments) checked and applied.

    Raises ValueError naming the problem: an unknown key, a value that is not
    a finite number >= 0, a switch that is not 0 or 1, no phase, or fewer
    calls allowed than required.
    """
    settings = dict(TIMING)
    for key, value in (overrides or {}).items():
        if key not in TIMING:
            raise ValueError(f"unknown timing setting {key!r}; known: {', '.join(TIMING)}")
        if not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            raise ValueError(f"timing setting {key} must be a finite number >= 0, not {value!r}")
        settings[key] = type(TIMING[key])(value)
    for switch in ("flush_reads", "window_stamps"):
        if settings[switch] not in (0, 1):
            raise ValueError(f"timing setting {switch} must be 0 or 1")
    if settings["phases"] < 1:
        raise ValueError("timing setting phases must be at least 1")
    if settings["min_calls"] > settings["max_calls"]:
        raise ValueError("timing setting min_calls is above max_calls")
    return settings


def evaluate(
    *,
    task: TaskSpec,
    source: str,
    mode: Mode,
    timeout_s: float = 600.0,
    memory_bytes: int | None = None,
    keep_workdir: bool = False,
    timing: dict[str, float] | None = None,
) -> Verdict:
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
        env_info["timing_settings"] = settings

    workdir = Path(tempfile.mkdtemp(prefix="d2k-eval-"))
    workdir.chmod(0o777)  # the sandboxed uid writes its outputs here
    try:
        plan = _plan(task, workloads, mode, settings)
        monitor = environment.GpuMonitor()
        with monitor if mode is Mode.CUDA else contextlib.nullcontext():
            run = _run_child(task, source, mode, plan, settings, workdir, timeout_s, memory_bytes)
        seen = protocol.collect(run.messages, plan, run.bad_messages)
        env_info["isolation"] = run.isolation
        env_info["peak_rss_mib"] = round(run.peak_rss_bytes / 2**20, 1)
        if mode is Mode.CUDA:
            env_info["gpu_state_during"] = monitor.summary(
                windows=protocol.timing_windows(run.messages)
            )
            _census(monitor.gpu_pids() & run.pids, seen)
            # As the child reported it: which launch cover its timed calls had.
            covers = [t.get("cover") for t in seen.timings.values()]
            env_info["launch_cover"] = covers[0] if covers else None
            env_info["gpu_state_after"] = environment.gpu_state()
        log = _read_log(workdir / "child.log")
        results = judge(task, mode, plan, seen, workdir, env_info)
    finally:
        if not keep_workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    for name in honesty.tampering_names(source):
        seen.flags.append(protocol.flag("harness_tampering", f"the source names {name}"))
    status, message = _decide(run, seen, results, len(workloads))
    return _verdict(task, mode, status, message, seen.flags, results, env_info, log, started)


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
    run: sandbox.ChildRun, seen: Observed, results: list[WorkloadResult], expected: int
) -> tuple[Status, str]:
    """One status for the evaluation, in order of precedence (docs/evaluator.md).

    Evidence of cheating outranks the way the process ended: a kernel that
    patches the timer and then hangs is held for review as `flagged`, with the
    kill named in the message, not filed away as a plain timeout.
    """
    killed: tuple[Status, str] | None = None
    if run.killed_for == "timeout":
        killed = Status.TIMEOUT, f"killed after the {run.wall_seconds:.0f} s time limit"
    elif run.killed_for == "memory":
        gib = run.peak_rss_bytes / 2**30
        killed = Status.OUT_OF_MEMORY, f"killed for using {gib:.1f} GiB of host memory"
    elif run.killed_for == "processes":
        killed = Status.RUNTIME_ERROR, "killed for starting too many processes"
    if seen.flags:
        checks = sorted({f["check"] for f in seen.flags})
        message = "honesty check fired: " + ", ".join(checks)
        return Status.FLAGGED, f"{message} (then {killed[1]})" if killed else message
    if killed:
        return killed
    if not seen.started:
        return Status.WORKER_ERROR, f"the sandbox did not start (exit code {run.returncode})"
    if seen.error is not None:
        kind = str(seen.error.get("kind", "runtime_error"))
        status = Status(kind) if kind in set(Status) else Status.RUNTIME_ERROR
        where = seen.error.get("workload")
        text = str(seen.error.get("message", ""))
        return status, f"{text} (workload {where})" if where else text
    if not seen.done:
        code = run.returncode
        # bubblewrap reports a child killed by signal N as exit code 128 + N.
        signal_number = -code if code is not None and code < 0 else None
        if run.isolation == "bwrap" and code is not None and 128 < code < 160:
            signal_number = code - 128
        how = f"signal {signal_number}" if signal_number else f"exit code {code}"
        return Status.RUNTIME_ERROR, f"the submission's process ended early ({how})"
    incorrect = [r for r in results if r.status is not Status.CORRECT]
    if incorrect:
        names = ", ".join(r.name for r in incorrect)
        return Status.INCORRECT, f"incorrect on {names}: {incorrect[0].message}"
    if len(results) != expected:
        return Status.WORKER_ERROR, "the evaluation ended without a result for every workload"
    return Status.CORRECT, f"correct on all {len(results)} workloads"


def _plan(
    task: TaskSpec, workloads: tuple[WorkloadSpec, ...], mode: Mode, settings: dict
) -> dict[str, Any]:
    def seed() -> int:
        return secrets.randbits(62)

    def entry(w: WorkloadSpec) -> dict[str, Any]:
        timed = mode is Mode.CUDA and w.role == "timed"
        return {
            "name": w.name,
            "params": w.params,
            "seeds": [seed() for _ in range(task.seeds)],
            "timed": timed,
            "timing_seed": seed(),
            "ref_timing_seed": seed(),
            "audits": audit_plan(int(settings["max_calls"])) if timed else [],
        }

    return {"fingerprint_seed": seed(), "workloads": [entry(w) for w in workloads]}


def audit_plan(max_calls: int) -> list[dict[str, int]]:
    """AUDIT_CALLS audit calls, each after a secret timed call, with secret seeds of their own."""
    calls = max(max_calls, 1)
    places = secrets.SystemRandom().sample(range(1, calls + 1), min(AUDIT_CALLS, calls))
    return [
        {"after_call": place, "seed": secrets.randbits(62), "decoy_seed": secrets.randbits(62)}
        for place in sorted(places)
    ]


def _run_child(task, source, mode, plan, settings, workdir, timeout_s, memory_bytes):
    (workdir / "submission.py").write_text(source)
    task_dir = Path(task.directory).resolve()
    seen = sandbox.layout(workdir, task_dir)  # the paths as the child sees them
    job = {
        "mode": str(mode),
        "reference": f"{seen.task}/reference.py",
        "submission": f"{seen.work}/submission.py",
        "out_dir": f"{seen.work}/out",
        "inplace": task.inplace,
        "timing": settings,
        **plan,
    }
    (workdir / "job.json").write_text(json.dumps(job))
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
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
    bootstrap = "import evaluator.harness.child as c; c.main()"
    run = sandbox.run_child(
        python_args=["-s", "-c", bootstrap, f"{seen.work}/job.json", "{fd}"],
        workdir=workdir,
        task_dir=task_dir,
        env=env,
        limits=sandbox.Limits(
            timeout_s=timeout_s, memory_bytes=memory_bytes or sandbox.default_memory_limit()
        ),
        log_path=workdir / "child.log",
        gpu=mode is Mode.CUDA,
    )
    return run


def _read_log(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    text = data.decode(errors="replace")
    if len(text) <= LOG_LIMIT:
        return text
    half = LOG_LIMIT // 2
    return f"{text[:half]}\n… [{len(text) - LOG_LIMIT} characters cut] …\n{text[-half:]}"


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
