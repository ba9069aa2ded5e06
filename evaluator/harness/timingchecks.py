"""The judge's checks of a timed workload: its report, its checked calls, its clocks.

    measurement, extra, failure = judge_timing(task, spec, entry, seen, reference, own, env_info)

In order: the report must be whole (every time finite, every fingerprint of
a seed the parent issued, once; the audits the parent placed, in order), or
it is refused as `result_channel`; every timed and back-to-back call's
fingerprint must match the reference's, and every audit call's; the
back-to-back batch must agree with the parent's own clock (`escaped_work`,
`timing_inconsistent`, or a host-clock excess that the counters pass
settles); and no median may beat the GPU's speed of light
(`faster_than_light`).
"""

from __future__ import annotations

import secrets
import time
from typing import Any

from taskformat.spec import TaskSpec, WorkloadSpec

from .compare import fingerprint_matches
from .fingerprints import AUDIT_SAMPLES
from .job import PlannedWorkload
from .kernelchecks import judge_glue, judge_kernels, judge_ops
from .protocol import Observed, flag
from .reference import ReferenceOutputs
from .reports import BatchReport, CallPrint, OutputReport, TimingReport
from .timing import summarize
from .verdict import Measurement, WorkloadOutcome

# Every timed and back-to-back call's fingerprint is checked against the
# reference, in a random order, until the reference outputs this needs have
# taken this long for the workload; past it (a slow reference), the calls
# checked are a random sample of at least MIN_CHECKED_CALLS.
TIMED_CHECK_BUDGET_S = 20.0
MIN_CHECKED_CALLS = 64
# The host clock may exceed the device events of a back-to-back batch by launch
# and message overhead; far more than that means work escaped the events.
BATCH_SLACK_RATIO = 1.3
BATCH_SLACK_MS = 15.0
# Pipe and message latency around a batch, and Python launch overhead per call
# (a forward with several launches and allocations; measured on the H200, see
# docs/evaluator.md).
BATCH_MESSAGE_MS = 5.0
LAUNCH_ALLOWANCE_MS = 0.25
# A time under this fraction of the workload's speed-of-light floor is
# impossible. The floor uses the measured ceilings, which sit below the
# datasheet's (H200: 4.3-4.7 of 4.8 TB/s, about 800 of 989 dense bf16 TFLOP/s
# and a similar share of the 1979 fp8 ones), so the margin leaves room for a
# kernel that beats the measured peak honestly.
SOL_FLOOR_MARGIN = 0.75


def host_clock_bound_ms(median_ms: float) -> float:
    """The most time a call may take back to back, for a median of `median_ms`."""
    return 2.0 * median_ms + LAUNCH_ALLOWANCE_MS


AUDIT_FAILURE = (
    "the output of an audit call differs from the reference: its inputs were written on the "
    "caller's stream just before the call, so work that did not wait for that stream (a side "
    "stream started ahead of the call) read stale inputs"
)
TIMED_FAILURE = (
    "the output of a timed call differs from the reference (outputs must be "
    "computed on every call from that call's inputs)"
)
MALFORMED_FAILURE = "the child's timing report for this workload is malformed"


def judge_timing(
    task: TaskSpec,
    spec: WorkloadSpec,
    entry: PlannedWorkload,
    seen: Observed,
    reference: ReferenceOutputs,
    own: set[str],
    env_info: dict,
) -> tuple[Measurement | None, dict[str, float], str]:
    """The workload's measurement, its speed-of-light figures, and why it is incorrect ("")."""
    report, batch = seen.timings[spec.name], seen.batches.get(spec.name)
    malformed = malformed_fields(report, batch, seen.outputs.get(spec.name), entry)
    if malformed or report.sub_ms is None or report.ref_ms is None:
        detail = f"{spec.name}: malformed timing report ({', '.join(malformed)})"
        seen.flags.append(flag("result_channel", detail))
        return None, {}, MALFORMED_FAILURE
    measurement = _measurement(report, report.sub_ms, report.ref_ms, batch, seen.outputs[spec.name])
    # The ops of every other call of the workload's: timed, back-to-back, warm-up.
    judge_ops(task, spec, list(report.ops), seen)
    if not _timed_calls_match(task, spec, entry, report, reference):
        return measurement, {}, TIMED_FAILURE
    if failure := _judge_audits(task, spec, entry, report, reference, own, seen):
        return measurement, {}, failure
    if batch is not None:
        _judge_batch(spec, batch, measurement.median_ms, seen)
    return measurement, _speed_of_light(spec, measurement.median_ms, env_info, seen), ""


def malformed_fields(
    report: TimingReport,
    batch: BatchReport | None,
    outputs: list[OutputReport] | None,
    entry: PlannedWorkload,
) -> list[str]:
    """The parts of a workload's report the judge cannot read, in the order the flag names them.

    Every time is finite; every sampled call names a seed the parent issued
    for a timed call, once, and a sample seed it issued; the audit calls are
    the parent's: one report each, with the issued seeds in order.
    """
    bad = [key for key in ("ref_ms", "sub_ms") if getattr(report, key) is None]
    issued = set(entry.samples)

    def sampled(prints: tuple[CallPrint, ...] | None) -> bool:
        return prints is not None and all(p.sample_seed in issued for p in prints)

    extras = [key for key in ("prints", "batch_prints") if not sampled(getattr(report, key))]
    if not extras:
        # Each sampled call's seed is one the parent issued for a timed call, once.
        called = [p.seed for p in (*(report.prints or ()), *(report.batch_prints or ()))]
        if len(set(called)) != len(called) or not set(called) <= set(entry.calls):
            extras.append("seeds")
    audited = report.audit_prints
    if not sampled(audited) or [a.seed for a in audited or ()] != list(entry.audits):
        extras.append("audit_prints")
    extras += [key for key in ("cover_us", "host_bound") if key in report.malformed]
    if batch is not None and not batch.well_formed:
        extras.append("batch")
    if outputs and outputs[0].host_ms is None:
        extras.append("host_ms")
    return bad + extras


def _measurement(
    report: TimingReport,
    sub_ms: tuple[float, ...],
    ref_ms: tuple[float, ...],
    batch: BatchReport | None,
    outputs: list[OutputReport],
) -> Measurement:
    med, iqr, low = summarize(sub_ms)
    ref_med, ref_iqr, _ = summarize(ref_ms)
    covers: dict = {}
    if cover := report.cover_us:
        covers |= {"cover_us": float(cover.sub), "ref_cover_us": float(cover.ref)}
    if bound := report.host_bound:
        covers |= {"host_bound_calls": int(bound.sub), "ref_host_bound_calls": int(bound.ref)}
    return Measurement(
        median_ms=med,
        iqr_ms=iqr,
        min_ms=low,
        calls=len(sub_ms),
        ref_median_ms=ref_med,
        ref_iqr_ms=ref_iqr,
        ref_calls=len(ref_ms),
        # Host time of the workload's first call: compilation, autotuning, first launch.
        cold_start_ms=(outputs[0].host_ms or 0.0) if outputs else 0.0,
        sub_deciles=tuple(_deciles(sub_ms)),
        ref_deciles=tuple(_deciles(ref_ms)),
        back_to_back_ms=_per_call_ms(batch) if batch is not None else None,
        **covers,
    )


def _per_call_ms(batch: BatchReport) -> float:
    return (batch.event_ms or 0.0) / int(batch.calls or 1)


def _sample_seed(item: CallPrint) -> int:
    # malformed_fields refused any sample seed the parent did not issue.
    assert item.sample_seed is not None
    return int(item.sample_seed)


def _timed_calls_match(
    task: TaskSpec,
    spec: WorkloadSpec,
    entry: PlannedWorkload,
    report: TimingReport,
    reference: ReferenceOutputs,
) -> bool:
    """Every timed and back-to-back call's fingerprint against the reference, in random order.

    The child cannot tell which calls are checked: all of them are, unless
    the reference is so slow that TIMED_CHECK_BUDGET_S runs out first, and
    then the ones checked are a random sample of at least MIN_CHECKED_CALLS.
    """
    calls = [*(report.prints or ()), *(report.batch_prints or ())]
    secrets.SystemRandom().shuffle(calls)
    started = time.monotonic()
    for checked, item in enumerate(calls):
        over = time.monotonic() - started > TIMED_CHECK_BUDGET_S
        if over and checked >= MIN_CHECKED_CALLS:
            break
        expected = reference.outputs(spec.params, int(item.seed), entry.model_seed)
        if not fingerprint_matches(item.fp, expected, _sample_seed(item), task):
            return False
    return True


def _judge_audits(
    task: TaskSpec,
    spec: WorkloadSpec,
    entry: PlannedWorkload,
    report: TimingReport,
    reference: ReferenceOutputs,
    own: set[str],
    seen: Observed,
) -> str:
    """Every audit call is checked: one wrong answer is the finding (AUDIT_FAILURE)."""
    audits = report.audit_prints or ()
    for item in audits:
        judge_ops(task, spec, list(item.ops), seen)
        judge_kernels(spec, list(item.kernels), own, seen)
        expected = reference.outputs(spec.params, int(item.seed), entry.model_seed)
        if not fingerprint_matches(item.fp, expected, _sample_seed(item), task, AUDIT_SAMPLES):
            return AUDIT_FAILURE
    for item in audits:
        judge_glue(spec, list(item.kernels), own, seen)
    return ""


def _judge_batch(spec: WorkloadSpec, batch: BatchReport, med: float, seen: Observed) -> None:
    """The back-to-back batch against the parent's clock, which the child cannot touch."""
    host, device = batch.host_ms, batch.event_ms or 0.0
    calls = float(batch.calls or 1)
    if host > device * BATCH_SLACK_RATIO + BATCH_SLACK_MS:
        seen.flags.append(
            flag(
                "escaped_work",
                f"{spec.name}: {batch.calls} back-to-back calls took {host:.2f} ms by the "
                f"host clock but {device:.2f} ms by CUDA events",
            )
        )
    # Two-sided, anchored on the parent's clock: per call, the host saw far
    # more time than the reported median (beyond launch overhead). Either the
    # reported times were shrunk, or the calls are host-bound: the launch
    # cover hides the host's queueing from the events, not from a
    # back-to-back batch (fused_adamw's expert builds its pointer tables on
    # the host: 0.44 ms a call on the H200, for 0.07 ms of kernels). Which
    # one, ncu's kernel durations say (settle_host_clock).
    host_per_call = max(host - BATCH_MESSAGE_MS, 0.0) / calls
    if host_per_call > host_clock_bound_ms(med):
        seen.host_clock.append(
            {"workload": spec.name, "host_ms_per_call": host_per_call, "median_ms": med}
        )
    expected_batch = med * calls
    if device < 0.5 * expected_batch:
        seen.flags.append(
            flag(
                "timing_inconsistent",
                f"{spec.name}: a batch of {batch.calls} calls took {device:.3f} ms, "
                f"under half of {batch.calls} x the median call ({med:.4f} ms)",
            )
        )


def _speed_of_light(
    spec: WorkloadSpec, med: float, env_info: dict, seen: Observed
) -> dict[str, float]:
    """Achieved rates and the share of the speed of light; below its floor is impossible."""
    ceilings = env_info.get("ceilings")
    if not ceilings or med <= 0:
        return {}
    seconds = med * 1e-3
    compute_s, memory_s = speed_of_light_terms(spec, ceilings)
    floor_s = max(compute_s or 0.0, memory_s)
    extra = {
        "achieved_tflops": spec.flops / seconds / 1e12,
        "achieved_tbps": spec.bytes / seconds / 1e12,
    }
    if compute_s is not None or not spec.flops:
        extra["sol_fraction"] = floor_s / seconds
    if seconds < SOL_FLOOR_MARGIN * floor_s:
        seen.flags.append(
            flag(
                "faster_than_light",
                f"{spec.name}: median {med * 1e3:.2f} us is below the speed-of-light floor "
                f"{floor_s * 1e6:.2f} us",
            )
        )
    return extra


def speed_of_light_terms(spec: WorkloadSpec, ceilings: dict) -> tuple[float | None, float]:
    """Seconds of the workload's FLOPs and of its bytes at this GPU's measured ceilings.

    The FLOPs run at the matrix rate of the unit that does the work
    (`peak_tflops_<compute_dtype>`: an fp8 GEMM at the fp8 rate, not the bf16
    one); the longer term is its speed-of-light time. The compute term is None
    where that unit's rate was not measured (no fp8 matrix instructions on this
    GPU): the bytes term alone is then a lower bound, not a speed of light.
    """
    memory_s = spec.bytes / (float(ceilings["peak_tbps"]) * 1e12)
    if not spec.flops:
        return 0.0, memory_s
    tflops = ceilings.get(f"peak_tflops_{spec.compute_dtype}")
    if not isinstance(tflops, int | float) or tflops <= 0:
        return None, memory_s
    return spec.flops / (float(tflops) * 1e12), memory_s


def _deciles(times: tuple[float, ...]) -> list[float]:
    ordered = sorted(times)
    return [ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1) / 10))] for q in range(11)]


def settle_host_clock(
    pending: list[dict[str, Any]], results: list[WorkloadOutcome]
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
                flag("timing_inconsistent", f"{said}, and no counters pass timed its kernels")
            )
        elif kernel_ms > host_clock_bound_ms(median_ms):
            flags.append(
                flag(
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
