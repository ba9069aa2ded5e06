"""Fixtures of the scoring tests: a task with properties, verdicts written as a worker would."""

import pytest
from django.db import transaction

from evaluator.models import WorkloadResult
from evaluator.services.evaluations import evaluation_verdict_write
from evaluator.services.runner import Verdict
from tests.factories import (
    DesignPropertyFactory,
    EvaluationFactory,
    TaskVersionFactory,
    WorkloadFactory,
)

SOURCE_GOOD = "m = tl.max(x, 0)\nLOG2E = 1.4426950408889634\ny = tl.exp2(x * LOG2E)\n"


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
            WorkloadResult(
                name=f"w{i}",
                role="timed",
                status=status,
                median_ms=1.0,
                ref_median_ms=s,
                speedup=s if mode == "cuda" else None,
                sol_fraction=0.5 if mode == "cuda" else None,
                counters=(counters[i] if counters else None),
                position=i,
            )
            for i, s in enumerate(speedups)
        ]
        env = environment if environment is not None else ({"gpu": gpu} if mode == "cuda" else {})
        verdict = Verdict(
            status=status,
            message=f"verdict: {status}",
            flags=[{"check": "cached_output", "detail": "x"}] if status == "flagged" else [],
            workloads=workloads,
            environment=env,
            log="",
            public_log="",
            mode=mode,
            evaluator_version="test",
        )
        with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
            evaluation_verdict_write(evaluation=evaluation, verdict=verdict)
        evaluation.refresh_from_db()
        return evaluation

    return write
