"""The run leaderboard, its paired view and the home headline, read from the scores the
`scoring` app materialises (one query per table whatever the number of runs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import F, Q, QuerySet

from evaluator.models import EXPERT_USERNAME
from moderation.selectors import run_rankable_q
from scoring.models import RunScore, TaskScore
from scoring.selectors.runs import scores_uplift
from task_catalog.models import Task

from ..filters import Filters
from ..tables import Column, Table
from .common import geometric_mean

LEVEL_KEYS = ("L1", "L2", "L3")

LEADERBOARD_COLUMNS = (
    Column("run_id", "Run"),
    Column("hardware", "GPU", "The GPU the run's kernels were timed on."),
    Column("model", "Model"),
    Column("agent", "Agent"),
    Column("condition", "Condition", "Guidance given: none, or the levels."),
    Column("owner", "Owner"),
    Column("catalog_version", "Catalog", "Digest of the catalog's task versions at upload."),
    Column("finished_at", "Finished"),
    Column("is_example", "Example", "Generated or hand-written example data, not an agent's."),
    Column(
        "correctness_rate",
        "Correct",
        "Correct tasks / tasks in the run (flagged results count once cleared).",
        "higher",
        True,
    ),
    Column(
        "performance_score",
        "Performance Score",
        "Mean task speedup over all tasks of the catalog version; a missing or "
        "incorrect task scores 0.",
        "higher",
        True,
    ),
    Column(
        "geomean_speedup",
        "Geomean",
        "Geometric mean of the task speedups over the tasks correct in both runs of the pair "
        "(a single run: its correct tasks).",
        "higher",
        True,
    ),
    Column("geomean_n", "N", "Tasks in the geometric mean.", "", True),
    Column(
        "implementation",
        "Impl.",
        "Implementation score: 100 × implemented property weight / total weight.",
        "higher",
        True,
    ),
    *(
        Column(f"implementation_{k}", f"Impl. {k}", f"Implementation score at {k}.", "higher", True)
        for k in LEVEL_KEYS
    ),
    Column(
        "discovery",
        "Discovery",
        "The implementation formula applied to the designs the agent proposed.",
        "higher",
        True,
    ),
    *(
        Column(f"discovery_{k}", f"Disc. {k}", f"Discovery score at {k}.", "higher", True)
        for k in LEVEL_KEYS
    ),
    Column("turns", "Turns", "Agent turns used over all tasks.", "lower", True),
)
SORT_KEYS = frozenset(c.key for c in LEADERBOARD_COLUMNS)
DEFAULT_SORT = "-performance_score"


def _runs_filter(runs: QuerySet[Any], filters: Filters, prefix: str = "run__") -> QuerySet[Any]:
    runs = runs.filter(run_rankable_q(prefix))
    for name in ("condition", "model", "agent", "catalog_version"):
        if value := getattr(filters, name):
            runs = runs.filter(**{f"{prefix}{name}": value})
    if filters.since:
        runs = runs.filter(**{f"{prefix}finished_at__date__gte": filters.since})
    if filters.until:
        runs = runs.filter(**{f"{prefix}finished_at__date__lte": filters.until})
    return runs


def _score_record(score: RunScore) -> dict[str, Any]:
    run = score.run
    implementation = score.implementation or {}
    discovery = score.discovery or {}
    return {
        "run_id": run.pk,
        "hardware": score.hardware,
        "model": run.model,
        "agent": run.agent,
        "condition": run.condition,
        "owner": run.owner.get_username(),
        "catalog_version": run.catalog_version,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "is_example": run.is_example,
        "is_reference": False,
        "timed": score.timed,
        "correctness_rate": score.correctness_rate,
        "performance_score": score.performance_score,
        "geomean_speedup": score.geomean_speedup,
        "geomean_n": score.geomean_n,
        "implementation": implementation.get("combined"),
        **{f"implementation_{k}": implementation.get(k) for k in LEVEL_KEYS},
        "discovery": discovery.get("combined"),
        **{f"discovery_{k}": discovery.get(k) for k in LEVEL_KEYS},
        "turns": score.turns,
        "tasks_total": score.tasks_total,
        "tasks_correct": score.tasks_correct,
    }


def _sorted(rows: list[dict[str, Any]], sort: str) -> list[dict[str, Any]]:
    key = sort.removeprefix("-")
    descending = sort.startswith("-")
    present = [r for r in rows if r.get(key) is not None]
    missing = [r for r in rows if r.get(key) is None]
    present.sort(key=lambda r: (r[key], -r["run_id"]), reverse=descending)
    # Rows without the value go last whatever the direction; GPUs stay apart.
    ordered = present + missing
    ordered.sort(key=lambda r: (r["hardware"] == "", r["hardware"]))
    return ordered


def leaderboard_rows(*, filters: Filters) -> list[dict[str, Any]]:
    """One row per public run with its scores, grouped by GPU (untimed runs last), sorted
    within a GPU by `filters.sort` (default: Performance Score, best first). One query."""
    scores = _runs_filter(RunScore.objects.all(), filters)
    if filters.hardware:
        scores = scores.filter(hardware=filters.hardware)
    scores = scores.select_related("run__owner")
    rows = [_score_record(s) for s in scores]
    return _sorted(rows, filters.sort or DEFAULT_SORT)


def leaderboard_table(*, filters: Filters) -> Table:
    return Table(
        name="leaderboard", columns=LEADERBOARD_COLUMNS, rows=leaderboard_rows(filters=filters)
    )


# --- expert reference rows -------------------------------------------------------------


def expert_reference_rows(*, hardware: str = "") -> list[dict[str, Any]]:
    """The catalog's expert implementations as one reference row per GPU, scored like a
    run over the catalog's current task versions (2 queries)."""
    total = Task.objects.filter(current_version__isnull=False).count()
    scores = TaskScore.objects.filter(
        submission__owner__username=EXPERT_USERNAME,
        submission__task_version_id=F("submission__task__current_version_id"),
    ).exclude(hardware="")
    if hardware:
        scores = scores.filter(hardware=hardware)
    per_gpu: dict[str, list[TaskScore]] = {}
    for score in scores.order_by("hardware", "task_id", "-pk"):
        per_gpu.setdefault(score.hardware, []).append(score)
    rows = []
    for gpu, items in per_gpu.items():
        best: dict[int, TaskScore] = {}
        for item in items:
            best.setdefault(item.task_id, item)
        counted = [s for s in best.values() if s.counts and s.speedup]
        speedups = [float(s.speedup) for s in counted if s.speedup]
        rows.append(
            {
                "run_id": None,
                "hardware": gpu,
                "model": "expert implementations",
                "agent": EXPERT_USERNAME,
                "condition": "reference",
                "owner": EXPERT_USERNAME,
                "catalog_version": "",
                "finished_at": None,
                "is_example": False,
                "is_reference": True,
                "timed": True,
                "correctness_rate": len(counted) / total if total else None,
                "performance_score": sum(speedups) / total if total else None,
                "geomean_speedup": geometric_mean(speedups) if speedups else None,
                "geomean_n": len(speedups),
                "implementation": None,
                **{f"implementation_{k}": None for k in LEVEL_KEYS},
                "discovery": None,
                "turns": None,
                "tasks_total": total,
                "tasks_correct": len(counted),
            }
        )
    return rows


# --- the paired view --------------------------------------------------------------------

PAIR_METRICS = (
    ("correctness_rate", "Correct", "higher"),
    ("performance_score", "Performance Score", "higher"),
    ("geomean_speedup", "Geomean", "higher"),
    ("implementation", "Impl.", "higher"),
    ("implementation_L1", "Impl. L1", "higher"),
    ("implementation_L2", "Impl. L2", "higher"),
    ("implementation_L3", "Impl. L3", "higher"),
    ("discovery", "Discovery", "higher"),
    ("discovery_L1", "Disc. L1", "higher"),
    ("discovery_L2", "Disc. L2", "higher"),
    ("discovery_L3", "Disc. L3", "higher"),
    ("turns", "Turns", "lower"),
)
PAIR_COLUMNS = (
    Column("hardware", "GPU"),
    Column("model", "Model"),
    Column("agent", "Agent"),
    Column("without_run_id", "Run without"),
    Column("with_run_id", "Run with"),
    Column("with_condition", "Guidance", "The levels given to the guided run."),
    Column("is_example", "Example"),
    *(
        column
        for key, label, direction in PAIR_METRICS
        for column in (
            Column(f"{key}_without", f"{label} without", "", direction, True),
            Column(f"{key}_with", f"{label} with", "", direction, True),
            Column(f"{key}_uplift", f"{label} uplift", "with − without guidance", direction, True),
        )
    ),
    Column("geomean_n", "N", "Tasks correct in both runs (the geomean's N).", "", True),
)


@dataclass(frozen=True)
class Pair:
    without: dict[str, Any]
    with_guidance: dict[str, Any]
    uplift: dict[str, Any]

    @property
    def record(self) -> dict[str, Any]:
        a, b, u = self.without, self.with_guidance, self.uplift
        record = {
            "hardware": b["hardware"] or a["hardware"],
            "model": a["model"],
            "agent": a["agent"],
            "without_run_id": a["run_id"],
            "with_run_id": b["run_id"],
            "with_condition": b["condition"],
            "is_example": a["is_example"] or b["is_example"],
            "geomean_n": b["geomean_n"],
        }
        for key, _, _ in PAIR_METRICS:
            record[f"{key}_without"] = a[key]
            record[f"{key}_with"] = b[key]
            record[f"{key}_uplift"] = u.get(key)
        return record


def _uplift_flat(without: RunScore, with_guidance: RunScore) -> dict[str, Any]:
    nested = scores_uplift(without=without, with_guidance=with_guidance)
    flat = {k: v for k, v in nested.items() if not isinstance(v, dict)}
    flat["implementation"] = nested["implementation"].get("combined")
    for k in LEVEL_KEYS:
        flat[f"implementation_{k}"] = nested["implementation"].get(k)
    flat["discovery"] = nested["discovery"].get("combined")
    for k in LEVEL_KEYS:
        flat[f"discovery_{k}"] = nested["discovery"].get(k)
    return flat


def leaderboard_pairs(*, filters: Filters) -> list[Pair]:
    """Each public pair (a run without guidance and its guided twin), with the uplift per
    metric; speed uplifts only when both runs were timed on the same GPU. One query."""
    scores = _runs_filter(
        RunScore.objects.filter(run__condition="none", run__pair__isnull=False),
        Filters(**{**filters.__dict__, "condition": ""}),
    ).filter(run_rankable_q("run__pair__"), run__pair__score__isnull=False)
    if filters.condition:
        scores = scores.filter(run__pair__condition=filters.condition)
    if filters.hardware:
        scores = scores.filter(
            Q(hardware=filters.hardware) | Q(run__pair__score__hardware=filters.hardware)
        )
    scores = scores.select_related("run__owner", "run__pair__owner", "run__pair__score")
    pairs = []
    for score in scores:
        twin = score.run.pair.score
        twin.run = score.run.pair
        pairs.append(
            Pair(
                without=_score_record(score),
                with_guidance=_score_record(twin),
                uplift=_uplift_flat(score, twin),
            )
        )
    sort = filters.sort or "-performance_score_with"
    records = _sorted(
        [{**p.record, "run_id": p.without["run_id"], "_pair": p} for p in pairs], sort
    )
    return [r["_pair"] for r in records]


def pairs_table(*, filters: Filters) -> Table:
    rows = [p.record for p in leaderboard_pairs(filters=filters)]
    return Table(name="leaderboard-paired", columns=PAIR_COLUMNS, rows=rows)


PAIR_SORT_KEYS = frozenset(c.key for c in PAIR_COLUMNS)


def home_headline(*, limit: int = 20) -> list[tuple[str, list[Pair]]]:
    """The home page's headline: every published pair, per GPU (the best `limit` per GPU by
    Performance Score with guidance). One query."""
    groups: dict[str, list[Pair]] = {}
    for pair in leaderboard_pairs(filters=Filters()):
        gpu = pair.record["hardware"]
        if len(groups.setdefault(gpu, [])) < limit:
            groups[gpu].append(pair)
    return list(groups.items())


def headline_chart_rows(groups: list[tuple[str, list[Pair]]], *, top: int = 8) -> list[dict]:
    """The home chart's bars: Performance Score without and with guidance per pair."""
    return [
        {
            "label": f"{p.without['model']} · {p.without['agent']} ({gpu})",
            "without": p.without["performance_score"],
            "with": p.with_guidance["performance_score"],
        }
        for gpu, pairs in groups
        for p in pairs[:top]
    ]
