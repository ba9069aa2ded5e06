"""The catalog's expert implementations as yardsticks: the expert baseline of a task page,
and any timed result's fraction of the expert on the same GPU."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import (
    OuterRef,
    Prefetch,
    QuerySet,
    Subquery,
)

from evaluator.models import EXPERT_USERNAME, FINISHED_STATUSES, Evaluation, WorkloadResult
from evaluator.selectors import BaselinePending as BaselinePending
from evaluator.selectors import baselines_pending as baselines_pending
from evaluator.selectors import evaluation_gpu, workload_result_host_bound_calls
from leaderboard.catalog_bar import (
    BarWorkload,
    CatalogBar,
    catalog_bar,
    ceilings_from_environment,
)
from scoring.formulas import geomean, task_speedup
from submissions.models import Submission
from task_catalog.models import Task, Workload
from taskformat.spec import Mode


def _expert_evaluations(*, task_version_id: int) -> QuerySet[Evaluation]:
    """The expert's finished GPU (cuda-mode) evaluations on one task version."""
    return Evaluation.objects.filter(
        submission__task_version_id=task_version_id,
        submission__owner__username=EXPERT_USERNAME,
        mode=Mode.CUDA,
        status__in=sorted(FINISHED_STATUSES),
    )


# --- fraction of the expert ------------------------------------------------------------


@dataclass(frozen=True)
class ExpertTiming:
    """The expert's newest GPU result on one task version and one GPU (public timed
    workloads only)."""

    hardware: str
    evaluation_id: int
    medians_ms: dict[str, float]
    task_speedup: float | None

    def workload_fraction(self, *, name: str, median_ms: float | None) -> float | None:
        """A workload's fraction of the expert: expert median / this median."""
        return _fraction(self.medians_ms.get(name), median_ms)

    def task_fraction(self, *, speedup: float | None) -> float | None:
        """A task's fraction of the expert: this task speedup / the expert's."""
        return _fraction(speedup, self.task_speedup)


def _fraction(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or denominator is None or numerator <= 0 or denominator <= 0:
        return None
    return numerator / denominator


def expert_timings(*, task_version_id: int, hardware: str | None = None) -> dict[str, ExpertTiming]:
    """The expert's newest finished GPU result per GPU name on a task version, with its
    public timed workloads (one query); GPUs where the expert has no timed result are
    absent. `hardware` keeps one GPU."""
    newest = (
        _expert_evaluations(task_version_id=task_version_id)
        .filter(hardware=OuterRef("evaluation__hardware"))
        .order_by("-finished_at", "-pk")
        .values("pk")[:1]
    )
    results = WorkloadResult.objects.filter(
        evaluation_id=Subquery(newest), role=Workload.Role.TIMED, hidden=False
    ).exclude(evaluation__hardware="")
    if hardware is not None:
        results = results.filter(evaluation__hardware=hardware)
    rows: dict[str, list[tuple[int, str, float | None, float | None]]] = {}
    for gpu, evaluation_id, name, median, speedup in results.order_by("position").values_list(
        "evaluation__hardware", "evaluation_id", "name", "median_ms", "speedup"
    ):
        rows.setdefault(gpu, []).append((evaluation_id, name, median, speedup))
    return {
        gpu: ExpertTiming(
            hardware=gpu,
            evaluation_id=items[0][0],
            medians_ms={name: median for _, name, median, _ in items if median is not None},
            task_speedup=task_speedup(workload_speedups=[speedup for *_, speedup in items]),
        )
        for gpu, items in rows.items()
    }


def evaluation_expert_fractions(
    *, submission: Submission, evaluation: Evaluation
) -> dict[str, float]:
    """Each public timed workload's fraction of the expert (expert median / this median),
    by workload name, against the expert's result on the same GPU and task version.

    Absent where there is no expert result on that GPU or no time to compare; empty, and
    no query, for an evaluation not timed on a named GPU. The results are read from
    `evaluation.results` (prefetch them).
    """
    if evaluation.mode != "cuda" or not evaluation.hardware:
        return {}
    timed = [
        r
        for r in evaluation.results.all()
        if r.role == Workload.Role.TIMED and not r.hidden and r.median_ms is not None
    ]
    if not timed:
        return {}
    expert = expert_timings(
        task_version_id=submission.task_version_id, hardware=evaluation.hardware
    ).get(evaluation.hardware)
    if expert is None:
        return {}
    fractions = {
        r.name: expert.workload_fraction(name=r.name, median_ms=r.median_ms) for r in timed
    }
    return {name: fraction for name, fraction in fractions.items() if fraction is not None}


# --- expert baseline ---------------------------------------------------------------


@dataclass(frozen=True)
class BaselineRow:
    name: str
    ref_us: float | None
    expert_us: float | None
    speedup: float | None
    sol_percent: float | None
    tflops: float | None
    tbps: float | None
    # (host-bound calls, calls) where most of the baseline's timed calls outlasted their
    # launch cover: its time, and the speedup, depend on the host's CPU too.
    ref_host_bound_calls: tuple[int, int] | None = None

    @property
    def ref_host_bound(self) -> bool:
        return self.ref_host_bound_calls is not None


@dataclass(frozen=True)
class ExpertBaseline:
    """The expert implementation's latest GPU result on a task version (public workloads
    only), with what it was timed against and the catalog's bar."""

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
    finished_at: datetime | None
    timed_against: str
    rows: list[BaselineRow]
    geomean_speedup: float | None
    geomean_sol_percent: float | None
    catalog_bar: CatalogBar

    @property
    def host_bound_rows(self) -> list[BaselineRow]:
        return [row for row in self.rows if row.ref_host_bound]


def _scaled(value: float | None, factor: float) -> float | None:
    return None if value is None else value * factor


def task_expert_baseline(*, task: Task) -> ExpertBaseline | None:
    """The newest finished cuda-mode result of the `d2k-experts` user on the task's current
    version, with its public timed workloads (2 queries; none without a current version).

    Speedup is the time of what it was timed against (`timed_against`: the version's
    baseline.py where it has one, else reference.py) / the expert's time.
    """
    if task.current_version_id is None:
        return None
    evaluation = (
        _expert_evaluations(task_version_id=task.current_version_id)
        .select_related("submission__task_version")
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
    against = evaluation.submission.task_version.timed_against
    return ExpertBaseline(
        owner=EXPERT_USERNAME,
        submission_id=evaluation.submission_id,
        evaluation_id=evaluation.pk,
        status=evaluation.status,
        message=evaluation.message,
        gpu=evaluation_gpu(evaluation=evaluation),
        driver=str(env.get("driver") or ""),
        torch=str(env.get("torch") or ""),
        triton=str(env.get("triton") or ""),
        cuda=str(env.get("cuda") or ""),
        evaluator_version=evaluation.evaluator_version,
        finished_at=evaluation.finished_at,
        timed_against=against,
        rows=[
            BaselineRow(
                name=r.name,
                ref_us=_scaled(r.ref_median_ms, 1e3),
                expert_us=_scaled(r.median_ms, 1e3),
                speedup=r.speedup,
                sol_percent=_scaled(r.sol_fraction, 100),
                tflops=r.achieved_tflops,
                tbps=r.achieved_tbps,
                ref_host_bound_calls=workload_result_host_bound_calls(result=r),
            )
            for r in results
        ],
        geomean_speedup=task_speedup(workload_speedups=[r.speedup for r in results]),
        geomean_sol_percent=_scaled(geomean(r.sol_fraction for r in results), 100),
        catalog_bar=catalog_bar(
            status=evaluation.status,
            workloads=[
                BarWorkload(
                    name=r.name,
                    speedup=r.speedup,
                    median_ms=r.median_ms,
                    sol_fraction=r.sol_fraction,
                    achieved_tflops=r.achieved_tflops,
                    achieved_tbps=r.achieved_tbps,
                )
                for r in results
            ],
            ceilings=ceilings_from_environment(env),
            timed_against=against,
        ),
    )


# --- baselines a new task version still lacks --------------------------------------------
