"""The per-task ranking per GPU (the expert baseline is in `experts`)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Q

from evaluator.models import EXPERT_USERNAME, WorkloadResult
from moderation.selectors import run_rankable_q, submission_rankable_q
from scoring.models import TaskScore
from task_catalog.models import Task, Workload

from .experts import expert_timings


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
    expert_fraction: float | None = None


def task_ranking(
    *, task: Task, hardware: str | None = None, limit: int | None = None
) -> list[RankingRow]:
    """The best counting result per entrant on the task's current version, ranked per GPU
    (3 queries; 1 when nothing ranks). An entrant is a run, or an owner for kernels
    uploaded alone.

    Read from the materialised TaskScores (scoring), which the leaderboard's run scores
    are computed from too: a submission ranks with its latest finished verdict when it
    counts (correct, or flagged and cleared; never a confirmed hack) and was timed in
    cuda mode on a named GPU with a positive speedup on every public timed workload;
    task speedup = their geometric mean. Only public submissions of public runs rank.

    Rows come grouped by hardware (by name), ranked within it: results timed on
    different GPUs are never ranked together. `limit` caps the rows per GPU. Each row's
    `expert_fraction` is its task speedup over the expert's on the same GPU (None where
    the expert has no timed result there).
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
    experts = (
        expert_timings(task_version_id=task.current_version_id, hardware=hardware) if chosen else {}
    )
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
                expert_fraction=(
                    expert.task_fraction(speedup=row["speedup"])
                    if (expert := experts.get(row["hardware"]))
                    else None
                ),
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
