"""Judging what the child reported: each workload's outputs against the reference's.

    outcomes = judge(task, mode, plan, seen, workdir, env_info, source=...)

Runs in the orchestrator, never in the submission's process: the reference
outputs are computed here (reference.py), from the same secret seeds the
child used. A workload is correct when every correctness call's outputs have
the reference's layout and values, and, where it is timed, its timing report
holds up (timingchecks.py); what ran in each call is checked beside
(kernelchecks.py).
"""

from __future__ import annotations

import contextlib
from functools import partial
from pathlib import Path

import torch

from taskformat.spec import Mode, TaskSpec, WorkloadSpec

from . import gpulease
from .compare import Comparison, compare_tensor, dtype_name, fingerprint_matches
from .gpumemory import MemoryWaits, release_cache
from .job import Plan, PlannedWorkload
from .kernelchecks import judge_glue, judge_kernels, judge_ops, own_kernel_names
from .outputs import OutputChanged, read_raw
from .protocol import Observed, flag
from .reference import ReferenceOutputs
from .reports import OutputLayout, OutputReport, ProfiledReport
from .timingchecks import judge_timing
from .verdict import Measurement, Status, WorkloadOutcome


def judge(
    task: TaskSpec,
    mode: Mode,
    plan: Plan,
    seen: Observed,
    workdir: Path,
    env_info: dict,
    *,
    source: str = "",
    keep_outputs: bool = False,
) -> list[WorkloadOutcome]:
    """One outcome per workload the child reported on, in plan order.

    `plan` is what the parent issued (protocol.Dealer.record); `source` is
    the submission's, whose own kernels are told from a library's by name.
    Each call's output file is deleted once the judge has read it (or found it
    needs no reading), unless `keep_outputs`: the disk it held goes back to the
    evaluations beside this one during the judge, not when the evaluation ends
    (a large task's outputs run to tens of GiB).
    """
    if not seen.outputs:
        return []
    reference = ReferenceOutputs(task, mode)
    by_name = {w.name: w for w in task.workloads}
    own = own_kernel_names(source)
    waits = MemoryWaits()
    outcomes = []
    for entry in plan.workloads:
        if not seen.outputs.get(entry.name):
            continue
        outcomes.append(
            _judge_workload(
                task,
                by_name[entry.name],
                entry,
                seen,
                reference,
                workdir,
                env_info,
                own,
                waits,
                keep_outputs,
            )
        )
        # What the workload's reference outputs took goes back to the GPU, for the
        # evaluations beside this one, not kept in this process's cache until it ends.
        with gpu_work():
            release_cache()
    return outcomes


def gpu_work() -> contextlib.AbstractContextManager[None]:
    """The scope of each piece of the judge's GPU work: on a shared GPU never beside another
    evaluation's timed phase, which waits for it to end (gpulease). Reading the child's
    output files and the checks of what it reported stay outside: a timed phase elsewhere
    waits for one reference output or one comparison, never for a workload's disk reads."""
    return gpulease.current().parent_work()


def _judge_workload(
    task: TaskSpec,
    spec: WorkloadSpec,
    entry: PlannedWorkload,
    seen: Observed,
    reference: ReferenceOutputs,
    workdir: Path,
    env_info: dict,
    own: set[str],
    waits: MemoryWaits,
    keep_outputs: bool,
) -> WorkloadOutcome:
    calls = seen.outputs[spec.name]
    failure, worst_abs, worst_rel = _judge_calls(
        task, spec, calls, seen, reference, workdir, own, waits, keep_outputs
    )
    if failure:
        status = Status.INCORRECT
    elif len(calls) < task.seeds + 1:
        status, failure = Status.RUNTIME_ERROR, "the process ended before every seed was checked"
    else:
        status = Status.CORRECT
        # Glue that made a right answer did the task; a wrong one is judged wrong.
        for call in calls:
            judge_glue(spec, list(call.kernels), own, seen)
    measurement: Measurement | None = None
    extra: dict[str, float] = {}
    if status is Status.CORRECT and entry.timed and spec.name in seen.timings:
        flags, host_clock = len(seen.flags), len(seen.host_clock)

        def undo() -> None:  # what a try that ran out of memory had flagged
            del seen.flags[flags:], seen.host_clock[host_clock:]

        measurement, extra, timing_failure = waits.run(
            lambda: judge_timing(task, spec, entry, seen, reference, own, env_info), undo=undo
        )
        if timing_failure:
            status, failure = Status.INCORRECT, timing_failure
    return WorkloadOutcome(
        name=spec.name,
        role=spec.role,
        hidden=spec.hidden,
        status=status,
        message=failure,
        max_abs_err=worst_abs,
        rel_err=worst_rel,
        measurement=measurement,
        achieved_tflops=extra.get("achieved_tflops"),
        achieved_tbps=extra.get("achieved_tbps"),
        sol_fraction=extra.get("sol_fraction"),
    )


def _judge_calls(
    task: TaskSpec,
    spec: WorkloadSpec,
    calls: list[OutputReport],
    seen: Observed,
    reference: ReferenceOutputs,
    workdir: Path,
    own: set[str],
    waits: MemoryWaits,
    keep_outputs: bool,
) -> tuple[str, float, float]:
    """The first correctness call's failure ("" if none), and the worst errors seen."""
    worst_abs = worst_rel = 0.0
    failure = ""
    expected_by_seed: dict[int, tuple] = {}
    for call in calls:
        judge_ops(task, spec, list(call.ops), seen)
        judge_kernels(spec, list(call.kernels), own, seen)
        if call.mutated_inputs:
            seen.flags.append(
                flag(
                    "input_mutation",
                    f"{spec.name}: inputs {list(call.mutated_inputs)} changed during the call",
                )
            )
        if call.seed not in expected_by_seed:
            expected_by_seed[call.seed] = waits.run(
                partial(reference.outputs, spec.params, call.seed, call.seed)
            )
        expected = expected_by_seed[call.seed]
        path = workdir / "out" / call.file
        misplaced = layout_problem(call.layouts, expected, inplace=task.inplace)
        if misplaced:
            failure = failure or misplaced
            _done_with(path, keep_outputs)
            continue
        try:
            read = _load_outputs(path, torch.device("cpu"), call.sha256)
        except OutputChanged as exc:
            seen.flags.append(flag("harness_tampering", f"{spec.name}, call {call.tag}: {exc}"))
            failure = failure or f"not the output file the harness saved: {exc}"
            continue
        finally:
            _done_with(path, keep_outputs)
        comparison = waits.run(partial(_compare_on, reference.device, read, expected, task))
        del read
        worst_abs = max(worst_abs, comparison.max_abs_err or 0.0)
        worst_rel = max(worst_rel, comparison.rel_err or 0.0)
        if not comparison.ok and not failure:
            again = " (second call on the same inputs)" if call.tag.endswith("r") else ""
            failure = comparison.message + again
    return failure, worst_abs, worst_rel


def _done_with(path: Path, keep: bool) -> None:
    """A call's output file, read or never to be read: gone unless kept. Its name is the
    one the parent planned (`<workload>.<tag>.out`, protocol.collect checked it)."""
    if not keep:
        path.unlink(missing_ok=True)


def _compare_on(device: torch.device, read: tuple, expected: tuple, task: TaskSpec) -> Comparison:
    """The outputs read from a call's file, moved to `device` and compared there."""
    got = tuple(t.to(device) if isinstance(t, torch.Tensor) else t for t in read)
    return _compare_all(got, expected, task)


def _load_outputs(path: Path, device: torch.device, sha256: str) -> tuple:
    """The harness's raw copies of a call's outputs (outputs.write_raw); no unpickling.
    Raises OutputChanged unless the file still has the digest the child sent with it."""
    try:
        return read_raw(path, device, sha256=sha256)
    except (OSError, ValueError) as exc:
        return (f"unreadable output file: {exc}",)


def layout_problem(
    layouts: tuple[OutputLayout | None, ...] | None, expected: tuple, *, inplace: bool
) -> str:
    """Why a call's outputs do not stand as results (empty: they do).

    Each output has the reference's shape and dtype, and the reference's
    strides or the row-major ones (a stride of a dimension of size one is
    free): the harness's copy of it is then the reference's layout or a plain
    copy, never work left for the harness to do (a transposed view of a
    row-major result, an expanded one). Unless the task works in place, it
    lies in memory of its own: a view of an input is no result.
    """
    if layouts is None or len(layouts) != len(expected):
        count = len(layouts) if layouts is not None else 0
        return f"returned {count} outputs, the reference returns {len(expected)}"
    for index, (got, want) in enumerate(zip(layouts, expected, strict=True)):
        prefix = f"output {index}" if len(expected) > 1 else "the output"
        if got is None:
            return f"{prefix}: no layout reported"
        shape = tuple(want.shape)
        if got.shape != shape or got.dtype != str(want.dtype):
            return (
                f"{prefix} is {got.dtype} of shape {got.shape}, "
                f"the reference's {want.dtype} of shape {shape}"
            )
        strides = _free_strides(shape, got.strides)
        if strides not in (
            _free_strides(shape, want.stride()),
            _free_strides(shape, _row_major(shape)),
        ):
            return (
                f"{prefix} has strides {tuple(got.strides or ())}, the reference's "
                f"{tuple(want.stride())}: return a row-major tensor or one in the "
                "reference's layout"
            )
        if got.aliases and not inplace:
            inputs = ", ".join(str(i) for i in got.aliases)
            return (
                f"{prefix} shares memory with input {inputs}: a view of an input is not a "
                "result; write the output into memory of its own"
            )
    return ""


def _row_major(shape: tuple) -> tuple:
    """The strides of a contiguous (row-major) tensor of `shape`."""
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def _free_strides(shape: tuple, strides: tuple | None) -> tuple:
    """Strides with those of dimensions of size one left out: they address nothing."""
    if strides is None or len(strides) != len(shape):
        return ("malformed",)
    return tuple(s if n > 1 else None for n, s in zip(shape, strides, strict=True))


def _compare_all(got: tuple, expected: tuple, task: TaskSpec) -> Comparison:
    """The worst comparison of a call's outputs with the reference's: the first that fails."""
    if len(got) != len(expected):
        return Comparison(
            False, None, None, f"returned {len(got)} outputs, the reference returns {len(expected)}"
        )
    worst = Comparison(True, 0.0, 0.0)
    for index, (g, e) in enumerate(zip(got, expected, strict=True)):
        if not isinstance(g, torch.Tensor):
            return Comparison(False, None, None, f"output {index}: {g}")
        c = compare_tensor(g, e, task.tolerance_for(dtype_name(e.dtype)))
        if not c.ok:
            prefix = f"output {index}: " if len(expected) > 1 else ""
            return Comparison(False, c.max_abs_err, c.rel_err, prefix + c.message)
        worst = Comparison(
            True,
            max(worst.max_abs_err or 0, c.max_abs_err or 0),
            max(worst.rel_err or 0, c.rel_err or 0),
        )
    return worst


def wrong_profiled_calls(
    task: TaskSpec, plan: Plan, profiled: dict[str, ProfiledReport], mode: Mode = Mode.CUDA
) -> list[str]:
    """The workloads whose profiled call (counters.py) did not compute the reference's answer.

    Each call's seed and sample seed must be those the parent issued for it,
    and its sampled outputs the reference's for that seed (computed on the
    GPU, or on the CPU in interpret `mode`).
    """
    reference = ReferenceOutputs(task, mode)
    waits = MemoryWaits()
    wrong = []
    for entry in plan.workloads:
        report = profiled.get(entry.name)
        if report is None or report.seed is None or report.sample_seed is None:
            wrong.append(entry.name)
            continue
        if report.seed not in entry.calls or report.sample_seed not in entry.samples:
            wrong.append(entry.name)
            continue
        expected = waits.run(
            partial(reference.outputs, entry.params, report.seed, entry.model_seed)
        )
        if not waits.run(
            partial(fingerprint_matches, report.fp, expected, report.sample_seed, task)
        ):
            wrong.append(entry.name)
    return wrong
