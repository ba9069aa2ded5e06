"""Per-task tables: the ranking per GPU, the expert baseline, the task × run matrix."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Prefetch, Q

from evaluator.harness.spec import environment_gpu
from evaluator.models import FINISHED_STATUSES, Evaluation, WorkloadResult
from evaluator.services.baselines import EXPERT_USERNAME
from moderation.selectors import run_rankable_q, submission_rankable_q
from scoring.models import TaskScore
from task_catalog.models import Task, Workload

from .common import positive_geomean


@dataclass(frozen=True)
class RankingRow:
    rank: int
    hardware: str
    owner: str
    submission_id: int
    evaluation_id: int
    speedup: float
    status: str
    run_id: int | None = None
    run_label: str = ""
    is_example: bool = False
    is_expert: bool = False
    workload_speedups: dict[str, float] = field(default_factory=dict)
    finished_at: datetime | None = None


def task_ranking(
    *, task: Task, hardware: str | None = None, limit: int | None = None
) -> list[RankingRow]:
    """The best counting result per entrant on the task's current version, ranked per GPU
    (2 queries). An entrant is a run, or an owner for kernels uploaded alone.

    Read from the materialised TaskScores (scoring), which the leaderboard's run scores
    are computed from too: a submission ranks with its latest finished verdict when it
    counts (correct, or flagged and cleared; never a confirmed hack) and was timed in
    cuda mode on a named GPU with a positive speedup on every public timed workload;
    task speedup = their geometric mean. Only public submissions of public runs rank.

    Rows come grouped by hardware (by name), ranked within it: results timed on
    different GPUs are never ranked together. `limit` caps the rows per GPU.
    """
    if task.current_version_id is None:
        return []
    scores = TaskScore.objects.filter(
        Q(run__isnull=True) | run_rankable_q("run__"),
        submission_rankable_q("submission__"),
        task_id=task.pk,
        submission__task_version_id=task.current_version_id,
        counts=True,
        speedup__gt=0,
    ).exclude(hardware="")
    if hardware is not None:
        scores = scores.filter(hardware=hardware)
    candidates = scores.values(
        "evaluation_id",
        "hardware",
        "status",
        "speedup",
        "submission_id",
        "evaluation__finished_at",
        "submission__owner_id",
        "submission__owner__username",
        "run_id",
        "run__model",
        "run__agent",
        "run__condition",
        "run__is_example",
    ).order_by("evaluation__finished_at", "evaluation_id")
    best: dict[tuple[Any, ...], Any] = {}
    for row in candidates:
        run_id = row["run_id"]
        entrant = ("run", run_id) if run_id else ("owner", row["submission__owner_id"])
        key = (row["hardware"], *entrant)
        # Earlier results win ties: the rows are ordered by finish time.
        if key not in best or row["speedup"] > best[key]["speedup"]:
            best[key] = row
    per_gpu: dict[str, list[Any]] = defaultdict(list)
    for row in sorted(best.values(), key=lambda r: (-r["speedup"], r["evaluation_id"])):
        if limit is None or len(per_gpu[row["hardware"]]) < limit:
            per_gpu[row["hardware"]].append(row)
    chosen = [row for gpu in sorted(per_gpu) for row in per_gpu[gpu]]
    speedups: dict[int, dict[str, Any]] = defaultdict(dict)
    results = WorkloadResult.objects.filter(
        evaluation_id__in=[row["evaluation_id"] for row in chosen],
        role=Workload.Role.TIMED,
        hidden=False,
    ).order_by("position")
    for evaluation_id, name, speedup in results.values_list("evaluation_id", "name", "speedup"):
        speedups[evaluation_id][name] = speedup
    ranks: dict[str, int] = defaultdict(int)
    rows = []
    for row in chosen:
        ranks[row["hardware"]] += 1
        rows.append(
            RankingRow(
                rank=ranks[row["hardware"]],
                hardware=row["hardware"],
                owner=row["submission__owner__username"],
                submission_id=row["submission_id"],
                evaluation_id=row["evaluation_id"],
                speedup=row["speedup"],
                status=row["status"],
                run_id=row["run_id"],
                run_label=_run_label(row),
                is_example=bool(row["run__is_example"]),
                is_expert=row["submission__owner__username"] == EXPERT_USERNAME,
                workload_speedups=speedups[row["evaluation_id"]],
                finished_at=row["evaluation__finished_at"],
            )
        )
    return rows


def _run_label(row: Any) -> str:
    if not row["run_id"]:
        return ""
    parts = ("run__model", "run__agent", "run__condition")
    return " · ".join(str(row[p]) for p in parts)


def ranking_hardware(rows: list[RankingRow]) -> list[tuple[str, list[RankingRow]]]:
    """A ranking's rows as (GPU, rows) groups, in the order they came."""
    groups: dict[str, list[RankingRow]] = {}
    for row in rows:
        groups.setdefault(row.hardware, []).append(row)
    return list(groups.items())


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
        gpu=evaluation.hardware or environment_gpu(env),
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
        geomean_speedup=positive_geomean(r.speedup for r in results),
        geomean_sol_percent=_scaled(positive_geomean(r.sol_fraction for r in results), 100),
    )
