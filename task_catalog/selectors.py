"""Reads of the task catalog that feed pages and the API.

Hidden workloads (role `hidden`, and check workloads marked hidden) never leave
this module through a public selector: `workload_public_filter` is the one gate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from django.db.models import Count, Prefetch, Q, QuerySet

from evaluator.models import Evaluation, EvaluationStatus, Review, WorkloadResult

from .models import DesignProperty, Guidance, Level, Task, Workload

PUBLIC_WORKLOADS = Q(hidden=False) & ~Q(role=Workload.Role.HIDDEN)


def workload_public_filter(queryset: QuerySet[Workload]) -> QuerySet[Workload]:
    return queryset.filter(PUBLIC_WORKLOADS)


def task_list() -> QuerySet[Task]:
    """Catalog rows in one query: current version, timed workload and per-level property counts."""
    counts = {
        "timed_workloads": Count(
            "current_version__workloads",
            filter=Q(current_version__workloads__role=Workload.Role.TIMED),
            distinct=True,
        ),
        "property_count": Count("properties", distinct=True),
    }
    for level in Level.values:
        counts[f"properties_{level}"] = Count(
            "properties", filter=Q(properties__level=level), distinct=True
        )
    return (
        Task.objects.filter(current_version__isnull=False)
        .select_related("current_version")
        .annotate(**counts)
        .order_by("position", "slug")
    )


def task_get_public(*, slug: str) -> Task | None:
    """One task with its current version, public workloads, guidance and properties (4 queries).

    The public workloads are on `task.public_workloads`; the version's full
    workload list is deliberately not prefetched.
    """
    return (
        Task.objects.filter(slug=slug, current_version__isnull=False)
        .select_related("current_version")
        .prefetch_related(
            Prefetch(
                "current_version__workloads",
                queryset=workload_public_filter(Workload.objects.order_by("position")),
                to_attr="public_workloads",
            ),
            Prefetch("guidance", queryset=Guidance.objects.order_by("level")),
            Prefetch("properties", queryset=DesignProperty.objects.order_by("level", "position")),
        )
        .first()
    )


def task_public_workloads(task: Task) -> list[Workload]:
    return list(getattr(task.current_version, "public_workloads", []))


@dataclass(frozen=True)
class RankingRow:
    rank: int
    owner: str
    submission_id: int
    evaluation_id: int
    speedup: float
    workload_speedups: dict[str, float] = field(default_factory=dict)
    finished_at: object = None


def geometric_mean(values: list[float]) -> float:
    if not values or any(v <= 0 for v in values):
        raise ValueError("a geometric mean needs at least one positive value")
    return math.exp(sum(math.log(v) for v in values) / len(values))


def task_ranking(*, task: Task, limit: int | None = None) -> list[RankingRow]:
    """The best ranked evaluation per owner on the task's current version (2 queries).

    Only correct cuda-mode results of public submissions, not confirmed as hacks,
    rank; task speedup = geometric mean of the timed workloads' speedups.
    Interpret-mode timings are not comparable and never rank.
    """
    if task.current_version_id is None:
        return []
    evaluations = (
        Evaluation.objects.filter(
            submission__task_version_id=task.current_version_id,
            submission__is_public=True,
            status=EvaluationStatus.CORRECT,
            mode="cuda",
        )
        .exclude(review=Review.HACKED)
        .select_related("submission__owner")
        .prefetch_related(
            Prefetch(
                "results",
                queryset=WorkloadResult.objects.filter(role=Workload.Role.TIMED).order_by(
                    "position"
                ),
                to_attr="timed_results",
            )
        )
        .order_by("finished_at", "pk")
    )
    best: dict[int, tuple[float, Evaluation]] = {}
    for evaluation in evaluations:
        speedups = [r.speedup for r in evaluation.timed_results]
        if not speedups or any(s is None or s <= 0 for s in speedups):
            continue
        score = geometric_mean(speedups)
        owner_id = evaluation.submission.owner_id
        # Earlier results win ties: the list is ordered by finish time.
        if owner_id not in best or score > best[owner_id][0]:
            best[owner_id] = (score, evaluation)
    ordered = sorted(best.values(), key=lambda item: (-item[0], item[1].pk))
    if limit is not None:
        ordered = ordered[:limit]
    return [
        RankingRow(
            rank=rank,
            owner=evaluation.submission.owner.get_username(),
            submission_id=evaluation.submission_id,
            evaluation_id=evaluation.pk,
            speedup=score,
            workload_speedups={r.name: r.speedup for r in evaluation.timed_results},
            finished_at=evaluation.finished_at,
        )
        for rank, (score, evaluation) in enumerate(ordered, start=1)
    ]
