"""Reads for the home and scoring pages."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Q, QuerySet

from evaluator.models import FINISHED_STATUSES, Evaluation
from moderation.selectors import submission_rankable_q
from task_catalog.models import Task, Workload


@dataclass(frozen=True)
class CatalogSize:
    tasks: int
    timed_workloads: int


def catalog_size() -> CatalogSize:
    """Tasks with a current version and their timed workloads, in one query."""
    totals = Task.objects.filter(current_version__isnull=False).aggregate(
        tasks=Count("pk", distinct=True),
        timed=Count(
            "current_version__workloads",
            filter=Q(current_version__workloads__role=Workload.Role.TIMED),
        ),
    )
    return CatalogSize(tasks=totals["tasks"], timed_workloads=totals["timed"])


def evaluation_latest_public(*, limit: int = 10) -> QuerySet[Evaluation]:
    """The latest finished evaluations of public submissions, newest first (one query)."""
    return (
        Evaluation.objects.filter(
            submission_rankable_q("submission__"), status__in=FINISHED_STATUSES
        )
        .select_related("submission__owner", "submission__task", "submission__task_version")
        .order_by("-finished_at", "-pk")[:limit]
    )
