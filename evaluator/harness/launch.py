"""Starting an evaluation's sandboxed children: the plan they are dealt, their job, their run.

The child holds no plan: it asks the parent's Dealer for each step and seed
when due (protocol.py). The job file names the mode, the paths (as the child
sees them) and the timing settings, never a seed or a workload; the task
folder the child may read holds reference.py (and baseline.py), never
task.toml, where the hidden workloads are defined.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from taskformat.spec import Mode, TaskSpec, WorkloadSpec

from . import childlog, isolation, protocol, resultpipe, sandbox, watchdog
from .job import Job, Plan, PlannedWorkload, TimingSettings
from .protocol import Observed

# Untimed audit calls per timed workload, at secret places among its timed
# calls: their inputs are written on the caller's stream after the launch
# cover (Child._audit_call), and every one is checked against the reference.
AUDIT_CALLS = 4


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


def public_package(task: TaskSpec, folder: Path) -> None:
    """What of the task the sandbox may read: reference.py (and baseline.py), never task.toml.

    The hidden workloads are defined in task.toml only; the child is told a
    workload's parameters when it runs it.
    """
    for name in ("reference.py", "baseline.py"):
        source = Path(task.directory) / name
        if source.is_file():
            shutil.copyfile(source, folder / name)
    folder.chmod(0o755)


def run_harness_child(
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
    """Run the harness child of this evaluation (or of its clean run) in the sandbox, to its end."""
    if not clean:
        (workdir / "submission.py").write_text(source)
    task_dir = public_dir.resolve()
    seen = isolation.layout(workdir, task_dir)  # the paths as the child sees them
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
    run = sandbox.run_child(
        python_args=sandbox.child_args(f"{seen.work}/job.json"),
        workdir=workdir,
        task_dir=task_dir,
        env=child_env(seen.work, mode),
        limits=sandbox.Limits(
            timeout_s=timeout_s, memory_bytes=memory_bytes or watchdog.default_memory_limit()
        ),
        gpu=mode is Mode.CUDA,
        answer=dealer.answer,
        log=log,
    )
    return run


def child_env(work: str, mode: Mode) -> dict[str, str]:
    """The child's whole environment: its scratch folder as home, its caches in it."""
    env = {
        "PATH": isolation.child_path(),
        "HOME": work,
        "TMPDIR": work,
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "TRITON_CACHE_DIR": f"{work}/.triton",
        "TORCH_EXTENSIONS_DIR": f"{work}/.torch_extensions",
        "OMP_NUM_THREADS": "1",
    }
    if mode is Mode.INTERPRET:
        env["TRITON_INTERPRET"] = "1"
        env["CUDA_VISIBLE_DEVICES"] = ""
    for key in ("CUDA_VISIBLE_DEVICES", "CUDA_HOME", "LD_LIBRARY_PATH", "TRITON_PTXAS_PATH"):
        if key in os.environ and key not in env:
            env[key] = os.environ[key]
    return env


def collect(run: sandbox.ChildRun, plan: Plan, dealer: protocol.Dealer) -> Observed:
    """What the child reported, read against the plan, with what its channel showed as flags."""
    seen = protocol.collect(run.messages, plan, run.bad_messages)
    seen.flags += [protocol.flag("result_channel", problem) for problem in dealer.problems]
    if run.killed_for == "result_channel":
        seen.flags.append(
            protocol.flag(
                "result_channel",
                f"the child wrote more than {channel_cap()} to the result pipe and was killed "
                "(an honest evaluation writes a few MiB)",
            )
        )
    return seen


def channel_cap() -> str:
    return f"{resultpipe.MAX_CHANNEL_BYTES / 2**20:g} MiB"


def census(pids: set[int], seen: Observed) -> None:
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
