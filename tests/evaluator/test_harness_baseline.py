"""Speedups against a task's baseline.py, and the reference's time checked in a clean process."""

import dataclasses
import shutil

import pytest

from evaluator.harness import cleanreference, launch, timingchecks
from evaluator.harness.job import CleanReference
from evaluator.harness.verdict import Measurement, Status, WorkloadOutcome
from taskformat.package import (
    DEFAULT_CATALOG_DIR,
    load_task,
    measured_content,
    measured_content_hash,
)
from taskformat.spec import WorkloadRole

BASELINE = """import torch


class Model(torch.nn.Module):
    def forward(self, x):
        print("D2K-BASELINE-CALLED", flush=True)
        return torch.softmax(x.float(), -1).to(x.dtype)
"""


def test_a_package_without_baseline_keeps_its_hash_and_one_with_it_gets_a_new_one(tmp_path):
    original = load_task(DEFAULT_CATALOG_DIR / "row_softmax")
    package = tmp_path / "row_softmax"
    shutil.copytree(DEFAULT_CATALOG_DIR / "row_softmax", package)
    copy = load_task(package)
    assert copy.baseline_source == "" and copy.allowed_ops == ()
    assert measured_content_hash(measured_content(copy)) == measured_content_hash(
        measured_content(original)
    )
    (package / "baseline.py").write_text(BASELINE)
    with_baseline = load_task(package)
    assert with_baseline.baseline_source == BASELINE
    assert measured_content_hash(measured_content(with_baseline)) != measured_content_hash(
        measured_content(original)
    )


def test_the_sandbox_gets_reference_and_baseline_but_never_task_toml(tmp_path):
    package = tmp_path / "row_softmax"
    shutil.copytree(DEFAULT_CATALOG_DIR / "row_softmax", package)
    (package / "baseline.py").write_text(BASELINE)
    public = tmp_path / "public"
    public.mkdir()
    launch.public_package(load_task(package), public)
    assert sorted(p.name for p in public.iterdir()) == ["baseline.py", "reference.py"]


def _timed(name: str, ref_median_ms: float, ref_host_bound_calls: int = 0) -> WorkloadOutcome:
    measurement = Measurement(
        median_ms=0.01,
        iqr_ms=0.0,
        min_ms=0.01,
        calls=400,
        ref_median_ms=ref_median_ms,
        ref_iqr_ms=0.0,
        ref_calls=400,
        cold_start_ms=1.0,
        ref_host_bound_calls=ref_host_bound_calls,
    )
    return WorkloadOutcome(
        name=name, role=WorkloadRole.TIMED, hidden=False, status=Status.CORRECT,
        measurement=measurement,
    )  # fmt: skip


def test_a_reference_slower_beside_the_submission_than_in_a_clean_process_is_flagged():
    clean = CleanReference(ref_median_ms={"a": 0.0200, "b": 0.0200, "c": 0.0200})
    results = [_timed("a", 0.0212), _timed("b", 0.0800), _timed("c", 0.0392)]
    flags = cleanreference.reference_tampering(results, clean)
    # 6 % slower is noise, and so is 96 % for a launch-bound reference; four
    # times slower (a patched torch.softmax) is an attempt.
    assert [f["check"] for f in flags] == ["reference_tampering"]
    assert flags[0]["detail"].startswith("b: ")
    assert cleanreference.reference_tampering(results, CleanReference()) == []


def test_a_host_bound_reference_is_not_compared_with_its_clean_run():
    # grouped_gemm_moe's baseline reads the group offsets back to the host in
    # mid-call, so all its calls outlast their launch cover and the events time
    # the host: on the H200 it ran 2.2x slower beside the expert than alone.
    clean = CleanReference(ref_median_ms={"sync": 3.76, "half": 3.76, "gpu": 3.76})
    results = [
        _timed("sync", 8.34, ref_host_bound_calls=400),
        _timed("half", 8.34, ref_host_bound_calls=200),
        _timed("gpu", 8.34, ref_host_bound_calls=1),
    ]
    flags = cleanreference.reference_tampering(results, clean)
    assert [f["detail"].split(":")[0] for f in flags] == ["half", "gpu"]


@pytest.mark.parametrize(
    ("beside_ms", "clean_ms", "speedup"),
    [
        (0.0800, 0.0200, 2.0),  # slowed beside the submission: the clean time counts
        (0.0200, 0.0210, 2.0),  # faster beside it: that time counts, the score is not raised
        (0.0300, None, 3.0),  # no clean run (interpret mode, a failed run): as timed
    ],
)
def test_the_speedup_is_against_the_faster_of_the_two_reference_times(beside_ms, clean_ms, speedup):
    medians = {"a": clean_ms} if clean_ms is not None else {}
    (result,) = cleanreference.with_clean_reference(
        [_timed("a", beside_ms)], CleanReference(ref_median_ms=medians)
    )
    assert result.measurement.speedup == pytest.approx(speedup)
    assert result.to_dict()["ref_median_ms"] == pytest.approx(speedup * 0.01)
    assert result.to_dict()["timing"]["ref_median_ms"] == beside_ms


def _with_kernels(result: WorkloadOutcome, kernel_ms: float | None) -> WorkloadOutcome:
    return dataclasses.replace(result, counters={"kernel_ms": kernel_ms, "kernels": 1})


def test_a_host_bound_call_is_explained_by_its_kernels_durations_under_ncu():
    # fused_adamw's expert on the H200: 0.44 ms a call back to back, 0.07 ms
    # of kernels by the events, and ncu times its kernels at about that.
    pending = [{"workload": "a", "host_ms_per_call": 0.4399, "median_ms": 0.0698}]
    results = [_with_kernels(_timed("a", 0.28), 0.081)]
    flags, explained = timingchecks.settle_host_clock(pending, results)
    assert flags == []
    assert explained == [
        {"workload": "a", "host_ms_per_call": 0.4399, "median_ms": 0.0698, "kernel_ms": 0.081}
    ]


@pytest.mark.parametrize(
    ("kernel_ms", "fragment"),
    [
        (2.5, "its kernels took 2.5000 ms a call under ncu"),  # the reported times were shrunk
        (None, "no counters pass timed its kernels"),  # nothing to explain it with
    ],
)
def test_a_host_clock_the_kernels_do_not_explain_is_timing_inconsistent(kernel_ms, fragment):
    pending = [{"workload": "a", "host_ms_per_call": 2.6, "median_ms": 0.1}]
    flags, explained = timingchecks.settle_host_clock(
        pending, [_with_kernels(_timed("a", 0.28), kernel_ms)]
    )
    assert explained == [] and [f["check"] for f in flags] == ["timing_inconsistent"]
    assert flags[0]["detail"].startswith("a: back-to-back calls took 2.6000 ms each")
    assert fragment in flags[0]["detail"]
