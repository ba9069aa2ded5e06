"""Reads of the task catalog that feed pages and the API.

Hidden workloads (role `hidden`, and check workloads marked hidden) never leave
this module through a public selector: `workload_public_filter` is the one gate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict

from django.db.models import Count, Prefetch, Q, QuerySet

from evaluator.harness.spec import environment_gpu
from evaluator.models import (
    FINISHED_STATUSES,
    Evaluation,
    EvaluationStatus,
    Review,
    WorkloadResult,
)
from evaluator.services.baselines import EXPERT_USERNAME
from moderation.selectors import submission_rankable_q

from .models import DesignProperty, Guidance, Level, Task, Workload

if TYPE_CHECKING:  # django-stubs-ext is a development dependency only.
    from django_stubs_ext import WithAnnotations

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


class _TimedResults(TypedDict):
    """What task_ranking's Prefetch(to_attr=...) adds to each evaluation."""

    timed_results: list[WorkloadResult]


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
            submission_rankable_q("submission__"),
            submission__task_version_id=task.current_version_id,
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
    best: dict[int, tuple[float, WithAnnotations[Evaluation, _TimedResults]]] = {}
    for evaluation in evaluations:
        speedups = [r.speedup for r in evaluation.timed_results]
        known = [s for s in speedups if s is not None]
        if not speedups or len(known) != len(speedups) or any(s <= 0 for s in known):
            continue
        score = geometric_mean(known)
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
            # Every speedup is set: an evaluation with a missing one is not ranked (above).
            workload_speedups={
                r.name: r.speedup for r in evaluation.timed_results if r.speedup is not None
            },
            finished_at=evaluation.finished_at,
        )
        for rank, (score, evaluation) in enumerate(ordered, start=1)
    ]


# --- expert baseline (engineer C) --------------------------------------------------


@dataclass(frozen=True)
class BaselineRow:
    name: str
    ref_us: float | None
    expert_us: float | None
    speedup: float | None
    sol_percent: float | None
    tflops: float | None
    tbps: float | None


@dataclass(frozen=True)
class ExpertBaseline:
    """The expert implementation's latest GPU result on a task version (public workloads only)."""

    owner: str
    submission_id: int
    evaluation_id: int
    status: str
    message: str
    gpu: str
    driver: str
    torch: str
    triton: str
    cuda: str
    evaluator_version: str
    finished_at: object
    rows: list[BaselineRow]
    geomean_speedup: float | None
    geomean_sol_percent: float | None

    @property
    def slower_than_reference(self) -> bool:
        return self.geomean_speedup is not None and self.geomean_speedup < 1

    @property
    def speed_percent(self) -> float | None:
        """The expert's speed as a percentage of the reference's (100 × geomean speedup)."""
        return _scaled(self.geomean_speedup, 100)


def _positive_geomean(values: list[float | None]) -> float | None:
    if not values or any(v is None or v <= 0 for v in values):
        return None
    return geometric_mean([float(v) for v in values if v is not None])


def _scaled(value: float | None, factor: float) -> float | None:
    return None if value is None else value * factor


def task_expert_baseline(*, task: Task) -> ExpertBaseline | None:
    """The newest finished cuda-mode result of the `d2k-experts` user on the task's current
    version, with its public timed workloads (2 queries; none without a current version).

    Speedup is reference time / expert time; below 1 the expert is slower than the
    reference's library call (e.g. a GEMM against cuBLAS).
    """
    if task.current_version_id is None:
        return None
    evaluation = (
        Evaluation.objects.filter(
            submission__task_version_id=task.current_version_id,
            submission__owner__username=EXPERT_USERNAME,
            mode="cuda",
            status__in=sorted(FINISHED_STATUSES),
        )
        .prefetch_related(
            Prefetch(
                "results",
                queryset=WorkloadResult.objects.filter(
                    role=Workload.Role.TIMED, hidden=False
                ).order_by("position"),
                to_attr="public_timed_results",
            )
        )
        .order_by("-finished_at", "-pk")
        .first()
    )
    if evaluation is None:
        return None
    env = evaluation.environment if isinstance(evaluation.environment, dict) else {}
    results = evaluation.public_timed_results
    return ExpertBaseline(
        owner=EXPERT_USERNAME,
        submission_id=evaluation.submission_id,
        evaluation_id=evaluation.pk,
        status=evaluation.status,
        message=evaluation.message,
        gpu=environment_gpu(env),
        driver=str(env.get("driver") or ""),
        torch=str(env.get("torch") or ""),
        triton=str(env.get("triton") or ""),
        cuda=str(env.get("cuda") or ""),
        evaluator_version=evaluation.evaluator_version,
        finished_at=evaluation.finished_at,
        rows=[
            BaselineRow(
                name=r.name,
                ref_us=_scaled(r.ref_median_ms, 1e3),
                expert_us=_scaled(r.median_ms, 1e3),
                speedup=r.speedup,
                sol_percent=_scaled(r.sol_fraction, 100),
                tflops=r.achieved_tflops,
                tbps=r.achieved_tbps,
            )
            for r in results
        ],
        geomean_speedup=_positive_geomean([r.speedup for r in results]),
        geomean_sol_percent=_scaled(_positive_geomean([r.sol_fraction for r in results]), 100),
    )
