"""The clean reference: the baseline timed again in a process that never imports the submission.

Nothing a submission does at import or in its calls (patching torch.softmax,
overriding aten::_softmax through torch.library) reaches that process. Each
timed workload's speedup is taken against the faster of the two reference
medians, and a baseline far slower beside the submission than alone is
flagged `reference_tampering`.

Under a shared GPU lease (a worker running several evaluations of one GPU) a
clean measurement is kept in the lease folder and reused by the evaluations of
the same task on that GPU for REUSE_S: the baseline is the same code on inputs
of the same shapes, and only the GPU's state drifts (by a few percent over
minutes). The verdict records the measurement's age (`age_s`). Evaluations that need
the same measurement at once take turns: the first measures, the others reuse it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

from taskformat.package import measured_content, measured_content_hash
from taskformat.spec import Mode, TaskSpec

from . import gpulease, protocol, sandbox
from .job import CleanReference, TimingSettings
from .launch import collect, dealer_for, planned_workloads, run_harness_child
from .verdict import EVALUATOR_VERSION, WorkloadOutcome

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
# How long a clean measurement is reused on its GPU (seconds).
REUSE_S = 600.0


def clean_reference_times(
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
        run = run_harness_child(
            task, "", mode, dealer, settings, workdir, public_dir, timeout_s, memory_bytes,
            clean=True,
        )  # fmt: skip
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    seen = collect(run, dealer.record(), dealer)
    medians: dict[str, float] = {}
    for name, report in seen.timings.items():
        if times := report.ref_ms:
            medians[name] = float(sorted(times)[len(times) // 2])
    error = seen.error.as_sent() if seen.error is not None else None
    problem = "" if seen.done and not seen.flags else (
        f"the clean run did not finish: {error or seen.flags or run.returncode}"
    )  # fmt: skip
    return CleanReference(ref_median_ms=medians, problem=problem[:500])


def reusable_clean_reference(
    task: TaskSpec,
    mode: Mode,
    settings: TimingSettings,
    public_dir: Path,
    timeout_s: float,
    memory_bytes: int | None,
    gpu: str,
) -> CleanReference:
    """The baseline's clean medians on GPU `gpu`: a measurement made under this GPU's
    lease within REUSE_S, or a new one (kept there for the evaluations after it).

    One evaluation at a time measures a key: another that needs the same measurement
    meanwhile (the two kernels of a paired campaign's task, evaluated side by side)
    waits for it and reuses it. It waits holding its share of the lease, which its
    watcher gives up whenever another evaluation is timed (the measuring one
    included), as for any evaluation between its steps.
    """
    lease = gpulease.current()
    if not isinstance(lease, gpulease.GpuLease) or not gpu:
        return clean_reference_times(task, mode, settings, public_dir, timeout_s, memory_bytes)
    key = json.dumps(
        [EVALUATOR_VERSION, measured_content_hash(measured_content(task)), str(mode),
         dataclasses.asdict(settings), gpu],
        sort_keys=True,
    )  # fmt: skip
    folder = lease.folder / "clean-reference"
    folder.mkdir(mode=0o700, exist_ok=True)
    store = folder / f"{hashlib.sha256(key.encode()).hexdigest()}.json"
    with _measuring(store):
        if (kept := _kept(store)) is not None:
            return kept
        clean = clean_reference_times(task, mode, settings, public_dir, timeout_s, memory_bytes)
        if clean.ref_median_ms and not clean.problem:
            fresh = store.with_suffix(f".{os.getpid()}")
            fresh.write_text(json.dumps({"at": time.time(), "ref_median_ms": clean.ref_median_ms}))
            fresh.replace(store)
    return clean


@contextlib.contextmanager
def _measuring(store: Path) -> Iterator[None]:
    """The key's measurement to this evaluation alone (`flock`: a dead holder frees it)."""
    fd = os.open(store.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _kept(store: Path) -> CleanReference | None:
    """The measurement in `store`, if there is one younger than REUSE_S."""
    try:
        kept = json.loads(store.read_text())
        age = time.time() - float(kept["at"])
        medians = {str(k): float(v) for k, v in kept["ref_median_ms"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if not 0 <= age <= REUSE_S or not medians:
        return None
    return CleanReference(ref_median_ms=medians, age_s=round(age, 1), reused=True)


def reference_tampering(results: list[WorkloadOutcome], clean: CleanReference) -> list[dict]:
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


def with_clean_reference(
    results: list[WorkloadOutcome], clean: CleanReference
) -> list[WorkloadOutcome]:
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
