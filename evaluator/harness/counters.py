"""Hardware counters of a correct submission: the DRAM bytes it moves and its tensor-core share.

    results, note = profile(task=..., source=..., mode=..., status=..., results=...)

Some design properties ("one pass over HBM", "the products run on the
tensor cores") cannot be decided from the source. Once an evaluation in
`cuda` mode is `correct`, a separate, untimed pass reads them from the GPU's
performance counters: a sandboxed child (the harness's own, in its
`profile` role) makes one call of each timed workload under Nsight Compute
(`ncu`), between `cudaProfilerStart` and `cudaProfilerStop`, so only the
submission's call is profiled: not the input generation, not the warm-up
call that compiles and autotunes. The counters are summed over the call's
kernels and attached to the workload's result; `note` is the sentence the
verdict's `environment["counters"]` records: which tool read them, or why
none could be read. The pass never changes the verdict.

The child asks for its seeds as in any evaluation (protocol.Dealer, the
purposes `model`, `warm` and `call`) and sees the timed workloads only,
whose parameters it was given already. ncu runs inside the sandbox, as the
parent of the child's interpreter, and writes its CSV into a folder of its
own; the interpreter runs in a second sandbox inside the first
(isolation.sandbox_command's `tool_folder`), where that folder and ncu's
processes do not exist: the table the parent reads is the one ncu wrote.
The counters are evidence for the design-property assessment and the host
clock's cross-check, never a verdict of their own.

The pass holds the GPU lease exclusive from the child's first request, which it
makes before it touches CUDA, to its end (gpulease): ncu and the child's imports
start beside other evaluations' timed phases, and the session is never frozen. A
profiling session frozen by another evaluation's timed phase, between its
workloads or before its first, did not finish on the H200 (each such pass ran
until its limit, holding the GPU). The limit is PROFILE_TIMEOUT_S.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from taskformat.counter_rules import NOT_PROFILED
from taskformat.spec import Mode, TaskSpec, WorkloadRole

from . import isolation, judge, protocol, redact, sandbox, watchdog
from .job import Job, PlannedWorkload, TimingSettings
from .ncu_report import (
    METRICS,
    PERMISSION_CODE,
    CountersError,
    failure_note,
    parse_ncu_csv,
    split_by_mark,
    summarise,
)
from .verdict import Status, WorkloadOutcome

# Where Nsight Compute installs its versions, each with an `ncu` of its own.
NCU_ROOT = Path("/opt/nvidia/nsight-compute")
# The pass's limit: its profiled steps hold the GPU alone, so a slow pass stops every
# other evaluation of the GPU. The experts' passes take 8-18 s on the H200.
PROFILE_TIMEOUT_S = 120.0
# The profiled call's kernel time over the timed median that still counts as the same
# work: the 26 experts' 85 timed workloads run 0.78-1.17 on the H200 (each kernel from a
# flushed cache under ncu, the whole call from a flushed cache when timed).
SAME_WORK_RATIO = (0.5, 3.0)
CSV_LIMIT_BYTES = 8 * 1024 * 1024
NCU_OPTIONS = (
    "--profile-from-start",
    "off",
    "--target-processes",
    "all",
    "--replay-mode",
    "kernel",
    "--cache-control",
    "all",
    "--clock-control",
    "none",
    "--csv",
    "--page",
    "raw",
    "--print-units",
    "base",
)


# The child's compile caches (Triton's, load_inline's build folders), as named
# in its environment: the counters pass of the same source starts with them,
# so it runs what the timed child compiled instead of compiling it again.
BUILD_FOLDERS = (".triton", ".torch_extensions")


def take_builds(source: Path | None, workdir: Path) -> None:
    """Move the compile caches of the scratch folder `source` into `workdir`.

    Renamed, never copied or followed: a link the submission left in
    `source` stays there.
    """
    if source is None:
        return
    for name in BUILD_FOLDERS:
        folder = source / name
        if folder.is_dir() and not folder.is_symlink():
            with contextlib.suppress(OSError):
                os.rename(folder, workdir / name)


def find_ncu(path: str) -> str | None:
    """ncu on the child's PATH, or where Nsight Compute installs it; None if nowhere."""
    found = shutil.which("ncu", path=path)
    if found:
        return found
    for candidate in sorted(NCU_ROOT.glob("*/ncu"), reverse=True):
        if os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def ncu_version(ncu: str) -> str:
    """ "ncu 2025.3.1.0" from `ncu --version`, or "ncu" where it says nothing readable."""
    try:
        out = subprocess.run(
            [ncu, "--version"], capture_output=True, text=True, timeout=60, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return "ncu"
    match = re.search(r"Version\s+([0-9][\w.]*)", out)
    return f"ncu {match.group(1)}" if match else "ncu"


def ncu_command(ncu: str, csv_path: str, metrics: Sequence[str] = tuple(METRICS)) -> list[str]:
    """The wrapper the child's interpreter runs under: ncu, reading `metrics` (keys of
    METRICS) and writing its table to `csv_path`."""
    names = ",".join(METRICS[key] for key in metrics)
    return [ncu, *NCU_OPTIONS, "--metrics", names, "--log-file", csv_path]


def profile(
    *,
    task: TaskSpec,
    source: str,
    mode: Mode,
    status: Status,
    results: list[WorkloadOutcome],
    enabled: bool = True,
    timeout_s: float = PROFILE_TIMEOUT_S,
    memory_bytes: int | None = None,
    csv_sink: list[str] | None = None,
    builds: Path | None = None,
    only: Sequence[str] | None = None,
    metrics: Sequence[str] = tuple(METRICS),
) -> tuple[list[WorkloadOutcome], str]:
    """`results` with each timed workload's counters attached, and the note for the verdict.

    Counters are read only in cuda mode, for a correct verdict, when enabled
    and ncu is there; otherwise the results come back as they were and the
    note says why. A failure of the pass is only a note. `csv_sink`, if
    given, receives what ncu wrote (its table) and the child's log, as they
    were, whether or not they could be read (bench/counters_table.py).
    `builds`, if given, is the timed child's scratch folder: the pass takes
    its compile caches over (take_builds). `only` (timed workloads' names)
    and `metrics` (METRICS' keys) narrow the pass: one that settles a host
    clock reads DURATION_ONLY of the workloads that need it."""
    if mode is not Mode.CUDA:
        return results, NOT_PROFILED["interpret"]
    if not enabled:
        return results, NOT_PROFILED["off"]
    if status is not Status.CORRECT:
        return results, NOT_PROFILED["incorrect"]
    timed = [w for w in task.workloads_for(mode) if w.role is WorkloadRole.TIMED]
    timed = [w for w in timed if only is None or w.name in only]
    if not timed:
        return results, NOT_PROFILED["untimed"]
    ncu = find_ncu(isolation.child_path())
    if ncu is None:
        return results, NOT_PROFILED["no_ncu"]
    tool = ncu_version(ncu)
    try:
        names = [w.name for w in timed]
        text = _profiling_pass(
            task, source, names, ncu, metrics, timeout_s, memory_bytes, csv_sink, builds
        )
        per_workload = split_by_mark(parse_ncu_csv(text), names)
    except CountersError as exc:
        return results, str(exc) if str(exc).startswith("not read") else f"not read: {exc}"
    minimum = {w.name: w.bytes for w in timed}
    counted = [
        dataclasses.replace(
            r, counters=summarise(per_workload[r.name], min_bytes=minimum[r.name], tool=tool)
        )
        if r.name in per_workload
        else r
        for r in results
    ]
    if problem := other_work(counted):
        return results, problem
    return counted, read_note(tool, None if only is None else names, metrics)


def read_note(tool: str, names: Sequence[str] | None, metrics: Sequence[str]) -> str:
    """The verdict's note of a pass that read its counters: of every timed workload, or
    of `names` alone (the workloads whose host clock needed settling)."""
    which = "each timed workload"
    if names is not None:
        which = f"{', '.join(names)}, whose host clock needed settling"
    return (
        f"read by {tool} in a sandboxed, untimed pass: one call of {which}, "
        f"kernel replay, caches flushed before each kernel, clocks left alone; "
        + ", ".join(METRICS[key] for key in metrics)
    )


def other_work(results: list[WorkloadOutcome]) -> str:
    """Why the profiled calls cannot stand for the timed ones, if so: a call whose kernels
    took far longer under ncu than the timed median, or far shorter where the events
    timed the device (not host-bound calls), did other work than the calls that were
    timed (a submission that tells ncu's process apart)."""
    low, high = SAME_WORK_RATIO
    for r in results:
        m, kernel_ms = r.measurement, (r.counters or {}).get("kernel_ms")
        if m is None or kernel_ms is None or m.median_ms <= 0:
            continue
        ratio = kernel_ms / m.median_ms
        host_bound = 2 * m.host_bound_calls > m.calls
        if ratio > high or (ratio < low and not host_bound):
            return (
                f"not read: the profiled call of {r.name} ran {kernel_ms:.4f} ms of kernels "
                f"against a timed median of {m.median_ms:.4f} ms: not the work that was timed"
            )
    return ""


def _profiling_pass(
    task: TaskSpec,
    source: str,
    names: list[str],
    ncu: str,
    metrics: Sequence[str],
    timeout_s: float,
    memory_bytes: int | None,
    sink: list[str] | None = None,
    builds: Path | None = None,
) -> str:
    """Run the child under ncu in the sandbox; ncu's CSV, or CountersError with the note."""
    entries = [
        PlannedWorkload(name=w.name, params=w.params, timed=True, hidden=False)
        for w in task.workloads
        if w.name in names
    ]
    dealer = protocol.Dealer(entries, seeds=task.seeds, profile=True)
    workdir = sandbox.scratch_folder(prefix="d2k-counters-")
    take_builds(builds, workdir)
    public_dir = Path(tempfile.mkdtemp(prefix="d2k-counters-task-"))
    # ncu's own folder, for its table: out of the submission's reach (sandbox_command).
    tool_dir = Path(tempfile.mkdtemp(prefix="d2k-counters-ncu-"))
    try:
        reference = Path(task.directory) / "reference.py"
        shutil.copyfile(reference, public_dir / "reference.py")
        public_dir.chmod(0o755)
        (workdir / "submission.py").write_text(source)
        seen = isolation.layout(workdir, public_dir.resolve())
        (workdir / "job.json").write_text(json.dumps(dataclasses.asdict(_job(task, seen))))
        memory = memory_bytes or watchdog.default_memory_limit()
        limits = sandbox.Limits(timeout_s=timeout_s, memory_bytes=memory)
        # The pass holds the GPU alone from the child's first request (made before it
        # touches CUDA) to its end: one Nsight Compute session on a GPU at a time, never
        # frozen mid-session by another evaluation's timed phase.
        run = sandbox.run_child(
            python_args=sandbox.child_args(f"{seen.work}/job.json"),
            workdir=workdir,
            task_dir=public_dir.resolve(),
            env=_child_env(seen.work),
            limits=limits,
            gpu=True,
            answer=dealer.answer,
            wrapper=ncu_command(ncu, f"{isolation.tool_path(tool_dir)}/ncu.csv", metrics),
            tool_folder=tool_dir,
            # ncu manages the processes it profiles; no verdict depends on how this one ends.
            guard=False,
            gpu_alone=True,
        )
        text = _read(tool_dir / "ncu.csv")
        if sink is not None:
            sink += [text, run.log]
    finally:
        for folder in (workdir, public_dir, tool_dir):
            shutil.rmtree(folder, ignore_errors=True)
    _check_pass(task, run, dealer, text)
    return text


def _job(task: TaskSpec, seen: isolation.Layout) -> Job:
    """The profiling child's job, its paths as the child sees them."""
    return Job(
        mode=str(Mode.CUDA),
        reference=f"{seen.task}/reference.py",
        submission=f"{seen.work}/submission.py",
        profile=True,
        out_dir=f"{seen.work}/out",
        inplace=task.inplace,
        seeds=task.seeds,
        timing=TimingSettings(),
    )


def _check_pass(task: TaskSpec, run: sandbox.ChildRun, dealer: protocol.Dealer, text: str) -> None:
    """CountersError with the note, unless the pass ran as planned and ncu printed its table.

    Every profiled call must have computed the reference's answer: the
    counters are of the work the timed child was judged on.
    """
    log = run.log
    observed = protocol.collect(run.messages, dealer.record())
    table = True
    try:
        parse_ncu_csv(text)
    except CountersError:
        table = False
    if run.killed_for:
        raise CountersError(f"not read: the profiling pass was killed ({run.killed_for})")
    if not table and PERMISSION_CODE in f"{text}\n{log}":
        raise CountersError(failure_note(f"{text}\n{log}"))
    if observed.error is not None:
        # The pass runs after the hidden workloads, with the timed child's compile caches:
        # the owner reads the exception's type only (redact.exception_type).
        kind = redact.exception_type(observed.error.message)
        raise CountersError(f"not read: the profiled call failed ({kind})")
    if not table:
        raise CountersError(failure_note(text) or "not read: ncu printed no table of kernels")
    if not observed.done or observed.flags or dealer.problems:
        checks = "; ".join(sorted({f["check"] for f in observed.flags}))
        raise CountersError(
            "not read: the profiling pass did not finish as planned "
            f"(exit code {run.returncode}{'; ' + checks if checks else ''})"
        )
    if wrong := judge.wrong_profiled_calls(task, dealer.record(), observed.profiled):
        raise CountersError(
            f"not read: the profiled call of {', '.join(wrong)} did not compute the reference's "
            "answer"
        )


def _child_env(work: str) -> dict[str, str]:
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
    for key in ("CUDA_VISIBLE_DEVICES", "CUDA_HOME", "LD_LIBRARY_PATH", "TRITON_PTXAS_PATH"):
        if key in os.environ:
            env[key] = os.environ[key]
    return env


def _read(path: Path) -> str:
    try:
        with open(path, "rb") as handle:
            return handle.read(CSV_LIMIT_BYTES).decode(errors="replace")
    except OSError:
        return ""
