"""Fixtures of the scoring tests: a task with properties, verdicts written as a worker would."""

import pytest
from django.db import transaction

from evaluator.harness.verdict import Verdict, verdict_from_dict
from evaluator.services.evaluations import evaluation_verdict_write
from tests.factories import (
    DesignPropertyFactory,
    EvaluationFactory,
    TaskVersionFactory,
    WorkloadFactory,
)

# A kernel the detectors can follow: ModelNew.forward launches a jit function
# that takes a row maximum and exponentiates with exp2 (no running sum).
SOURCE_GOOD = """\
import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634


@triton.jit
def _softmax(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=-float("inf"))
    m = tl.max(x, 0)
    y = tl.exp2((x - m) * LOG2E)
    tl.store(y_ptr + offs, y / tl.sum(y, 0), mask=offs < n)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        _softmax[(1,)](x, y, x.numel(), BLOCK=triton.next_power_of_2(x.numel()))
        return y
"""


def timed_workload(name, *, status="correct", speedup=None, sol_fraction=None, counters=None):
    """One timed workload as the evaluator prints it: a whole timing when it was timed."""
    timing = None
    if speedup is not None:
        timing = {
            "median_ms": 1.0, "iqr_ms": 0.0, "min_ms": 1.0, "calls": 400,
            "ref_median_ms": float(speedup), "ref_iqr_ms": 0.0, "ref_calls": 400,
            "cold_start_ms": 1.0,
        }  # fmt: skip
    return {
        "name": name,
        "role": "timed",
        "hidden": False,
        "status": status,
        "timing": timing,
        "sol_fraction": sol_fraction,
        "counters": counters,
    }


def make_verdict(status, *, workloads, environment, mode="cuda", flags=()) -> Verdict:
    """A verdict as the worker parses it from the evaluator's JSON."""
    return verdict_from_dict(
        {
            "status": status,
            "message": f"verdict: {status}",
            "flags": list(flags),
            "workloads": workloads,
            "environment": environment,
            "log": "",
            "public_log": "",
            "mode": mode,
            "evaluator_version": "test",
        }
    )


@pytest.fixture
def scored_task(db):
    """`softmax`: L1 max (1) ← online (2); L2 single_pass (2, counters rule); L3 exp2 (1)."""
    version = TaskVersionFactory(task__slug="softmax", task__position=0)
    WorkloadFactory(version=version, name="small", role="timed")
    task = version.task
    DesignPropertyFactory(
        task=task,
        key="max",
        level="L1",
        weight=1.0,
        detector={"kind": "regex", "pattern": "tl\\.max"},
    )
    DesignPropertyFactory(
        task=task,
        key="online",
        level="L1",
        weight=2.0,
        depends_on=["max"],
        detector={"kind": "regex", "pattern": "running_sum"},
    )
    DesignPropertyFactory(
        task=task,
        key="single_pass",
        level="L2",
        weight=2.0,
        detector={"kind": "manual"},
        counters={"kind": "traffic", "max_ratio": 1.3},
    )
    DesignPropertyFactory(
        task=task, key="exp2", level="L3", weight=1.0, detector={"kind": "regex", "pattern": "exp2"}
    )
    return task


@pytest.fixture
def finish(django_capture_on_commit_callbacks):
    """Write a verdict for `submission` as the worker does (on-commit hooks run)."""

    def write(
        submission,
        status="correct",
        speedups=(2.0,),
        mode="cuda",
        gpu="NVIDIA H200",
        counters=None,
        environment=None,
    ):
        evaluation = EvaluationFactory(submission=submission, status="running", mode="")
        workloads = [
            timed_workload(
                f"w{i}",
                status=status,
                speedup=s if mode == "cuda" else None,
                sol_fraction=0.5 if mode == "cuda" else None,
                counters=(counters[i] if counters else None),
            )
            for i, s in enumerate(speedups)
        ]
        env = environment if environment is not None else ({"gpu": gpu} if mode == "cuda" else {})
        verdict = make_verdict(
            status,
            workloads=workloads,
            environment=env,
            mode=mode,
            flags=[{"check": "cached_output", "detail": "x"}] if status == "flagged" else [],
        )
        with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
            evaluation_verdict_write(evaluation=evaluation, verdict=verdict)
        evaluation.refresh_from_db()
        return evaluation

    return write
