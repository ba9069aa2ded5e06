"""Generated example data for the leaderboard's load benchmark: paired runs over the
catalog's tasks with per-workload results, traces' turn counts and assessments.

Every run is marked `is_example=True` and its notes say it is generated; nothing here is
an agent's output. Deterministic for a given seed.
"""

from __future__ import annotations

import random

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from evaluator.models import Evaluation, WorkloadResult
from runs.models import Run, RunState
from scoring.models import Assessment, AssessmentKind, AssessmentSource
from scoring.services.scores import scores_refresh
from submissions.models import Submission
from task_catalog.models import DesignProperty, Task, Workload
from taskformat.spec import Mode, WorkloadRole

GENERATED_NOTE = "Generated example data for the leaderboard benchmark, not an agent's output."
OWNER = "example-generator"
MODELS = ("model-a", "model-b", "model-c", "model-d", "model-e")
AGENTS = ("agent-x", "agent-y")
STATUSES = ("correct",) * 17 + ("incorrect", "runtime_error", "compile_error", "timeout")


def leaderboard_example_generate(*, runs: int, seed: int = 7, hardware: str = "NVIDIA H200") -> int:
    """Create `runs` generated public runs (paired, half without guidance) over every task
    with a current version, then their scores. Returns the number of runs created."""
    rnd = random.Random(seed)
    owner, _ = get_user_model().objects.get_or_create(username=OWNER, defaults={"is_active": False})
    tasks = list(
        Task.objects.filter(current_version__isnull=False).select_related("current_version")
    )
    timed = {
        t.pk: list(Workload.objects.filter(version=t.current_version_id, role=WorkloadRole.TIMED))
        for t in tasks
    }
    properties = {t.pk: list(DesignProperty.objects.filter(task=t)) for t in tasks}
    now = timezone.now()
    created: list[int] = []
    for index in range(runs // 2):
        with transaction.atomic():
            twins = []
            for guided in (False, True):
                run = Run.objects.create(
                    owner=owner,
                    model=MODELS[index % len(MODELS)],
                    agent=AGENTS[index % len(AGENTS)],
                    levels=["L1", "L2", "L3"] if guided else [],
                    condition="L1+L2+L3" if guided else "none",
                    hardware=hardware,
                    catalog_version="generated",
                    notes=GENERATED_NOTE,
                    is_example=True,
                    is_public=True,
                    state=RunState.COMPLETE,
                    finished_at=now,
                )
                twins.append(run)
                _kernels(rnd, run, tasks, timed, properties, guided, hardware, now)
            twins[0].pair, twins[1].pair = twins[1], twins[0]
            Run.objects.bulk_update(twins, ["pair"])
            created += [r.pk for r in twins]
    submission_ids = Submission.objects.filter(run_id__in=created).values_list("pk", flat=True)
    scores_refresh(submission_ids=list(submission_ids), machine=False)
    return len(created)


def _kernels(rnd, run, tasks, timed, properties, guided, hardware, now) -> None:
    submissions = Submission.objects.bulk_create(
        [
            Submission(
                owner=run.owner,
                task=t,
                task_version=t.current_version,
                source="# generated example kernel\n",
                sha256=Submission.digest(f"{run.pk}:{t.pk}"),
                run=run,
                is_public=True,
            )
            for t in tasks
        ]
    )
    evaluations = Evaluation.objects.bulk_create(
        [
            Evaluation(
                submission=s,
                status=rnd.choice(STATUSES[:-2] if guided else STATUSES),
                mode=Mode.CUDA,
                hardware=hardware,
                evaluator_version="generated",
                finished_at=now,
            )
            for s in submissions
        ]
    )
    results, assessments = [], []
    for submission, evaluation in zip(submissions, evaluations, strict=True):
        base = rnd.lognormvariate(0.6 if guided else 0.4, 0.5)
        for position, workload in enumerate(timed[submission.task_id]):
            speedup = base * rnd.uniform(0.8, 1.2)
            results.append(
                WorkloadResult(
                    evaluation=evaluation,
                    name=workload.name,
                    role=WorkloadRole.TIMED,
                    status=evaluation.status,
                    median_ms=1.0 / speedup,
                    ref_median_ms=1.0,
                    speedup=speedup if evaluation.status == "correct" else None,
                    sol_fraction=min(1.0, 0.2 * speedup),
                    position=position,
                )
            )
        for prop in properties[submission.task_id]:
            assessments.append(
                Assessment(
                    kind=AssessmentKind.IMPLEMENTED,
                    source=AssessmentSource.DETECTOR,
                    property=prop,
                    task_id=submission.task_id,
                    submission=submission,
                    value=rnd.random() < (0.7 if guided else 0.55),
                    rationale=GENERATED_NOTE,
                )
            )
    WorkloadResult.objects.bulk_create(results)
    Assessment.objects.bulk_create(assessments)
