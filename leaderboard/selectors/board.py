"""The run leaderboard, its paired view and the home headline, read from the scores the
`scoring` app materialises (one query per table whatever the number of runs)."""

from __future__ import annotations

from typing import Any

from django.db.models import BooleanField, ExpressionWrapper, F, Q

from evaluator.models import EXPERT_USERNAME
from scoring.formulas import LEVELS, geomean
from scoring.intervals import METRIC_KEYS
from scoring.models import TaskScore
from task_catalog.models import Task

from ..filters import Filters
from ..tables import Column, Table
from .entries import board_entries, board_entries_scores, entry_pairs, pair_record, ranked

LEVEL_KEYS = LEVELS

SCORE_COLUMNS = (
    Column(
        "correctness_rate",
        "Correct",
        "Correct tasks / tasks of the catalog version (flagged results count once cleared); "
        "shown in %.",
        "higher",
        True,
    ),
    Column(
        "performance_score",
        "Performance Score",
        "Mean task speedup over all tasks of the catalog version; a missing, failed, flagged "
        "or unevaluated task scores 0.",
        "higher",
        True,
    ),
    Column(
        "geomean_speedup",
        "Geomean",
        "Geometric mean of the task speedups over each attempt's correct tasks.",
        "higher",
        True,
    ),
    Column(
        "implementation",
        "Impl.",
        "Implementation score: 100 × implemented property weight / total weight (%).",
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
        "The implementation formula applied to the designs the agent proposed (%).",
        "higher",
        True,
    ),
    *(
        Column(f"discovery_{k}", f"Disc. {k}", f"Discovery score at {k}.", "higher", True)
        for k in LEVEL_KEYS
    ),
    Column("turns", "Turns", "Agent turns used over all tasks.", "lower", True),
)
LEADERBOARD_COLUMNS = (
    Column("rank", "Rank", "1 + the entries whose interval lies wholly above; = marks a tie."),
    Column("tied", "Tied", "Another entry's interval overlaps this one's."),
    Column("run_ids", "Runs", "The runs (attempts) of this entry."),
    Column("attempts", "Attempts", "Runs of the same model, agent, condition, catalog, GPU."),
    Column("hardware", "GPU", "The GPU the runs' kernels were timed on."),
    Column("model", "Model"),
    Column("agent", "Agent"),
    Column("condition", "Condition", "Guidance given: none, or the levels."),
    Column("owner", "Owner"),
    Column("catalog_version", "Catalog", "Digest of the catalog's task versions at upload."),
    Column("finished_at", "Finished"),
    Column("is_example", "Example", "Generated or hand-written example data, not an agent's."),
    *(
        column
        for score in SCORE_COLUMNS
        for column in (
            score,
            Column(
                f"{score.key}_ci",
                f"{score.label} 95 % interval",
                "[low, high]; null with one attempt.",
            ),
        )
    ),
    Column("geomean_n", "N", "Tasks in the geometric mean (mean over attempts).", "", True),
)
PAGE_COLUMNS = (
    *(c for c in LEADERBOARD_COLUMNS if c.key in ("model", "agent", "condition", "attempts")),
    *(c for c in LEADERBOARD_COLUMNS if c.key in ("owner", "finished_at")),
    *SCORE_COLUMNS,
)
SORT_KEYS = frozenset(c.key for c in SCORE_COLUMNS) | {"model", "agent", "condition", "attempts"}
DEFAULT_SORT = "-performance_score"


def _sorted(rows: list[dict[str, Any]], sort: str) -> list[dict[str, Any]]:
    key = sort.removeprefix("-")
    descending = sort.startswith("-")
    present = [r for r in rows if r.get(key) is not None]
    missing = [r for r in rows if r.get(key) is None]
    present.sort(
        key=lambda r: (r[key], r.get("run_ids") or r.get("with_run_ids")), reverse=descending
    )
    return present + missing  # rows without the value last, whatever the direction


def leaderboard_rows(*, filters: Filters) -> list[dict[str, Any]]:
    """One row per entry (the runs of one model, agent and condition) on the board of the
    filters' catalog version and GPU kind, with its scores, their intervals and its rank
    (by the sort score, ties where intervals overlap), sorted by `filters.sort` (default:
    Performance Score, best first). One query."""
    sort = filters.sort or DEFAULT_SORT
    rows = board_entries(filters=filters)
    score = sort.removeprefix("-") if sort.removeprefix("-") in METRIC_KEYS else "performance_score"
    direction = next(c.direction for c in SCORE_COLUMNS if c.key == score)
    ranked(rows, key=score, higher=direction == "higher")
    return _sorted(rows, sort)


def run_records(*, filters: Filters) -> list[dict[str, Any]]:
    """One record per run on the board of `filters` (for the per-run breakdown charts):
    its stored scores, best Performance Score first. One query."""
    records = []
    for entry in board_entries_scores(filters=filters):
        run = entry.run
        implementation, discovery = entry.implementation or {}, entry.discovery or {}
        records.append(
            {
                "run_id": run.pk,
                "hardware": entry.hardware,
                "model": run.model,
                "condition": run.condition,
                "is_example": run.is_example,
                "performance_score": entry.performance_score,
                "implementation": implementation.get("combined"),
                **{f"implementation_{k}": implementation.get(k) for k in LEVEL_KEYS},
                "discovery": discovery.get("combined"),
                **{f"discovery_{k}": discovery.get(k) for k in LEVEL_KEYS},
            }
        )
    return _sorted(records, "-performance_score")


def leaderboard_table(*, filters: Filters) -> Table:
    return Table(
        name="leaderboard", columns=LEADERBOARD_COLUMNS, rows=leaderboard_rows(filters=filters)
    )


# --- expert reference rows -------------------------------------------------------------


def expert_reference_rows(*, hardware: str = "") -> list[dict[str, Any]]:
    """The catalog's expert implementations as one reference row per GPU, scored like a
    run over the catalog's current task versions (2 queries).

    Beside it, `earlier`: the same figures with each task that has an expert score on
    an earlier version counted by its newest such score (the others by their current
    one), so that a change of baselines shows how far it moved the reference; None
    where no task's expert was measured under another version on that GPU.
    """
    total = Task.objects.filter(current_version__isnull=False).count()
    scores = (
        TaskScore.objects.filter(submission__owner__username=EXPERT_USERNAME)
        .exclude(hardware="")
        .annotate(
            is_current=ExpressionWrapper(
                Q(submission__task_version_id=F("submission__task__current_version_id")),
                output_field=BooleanField(),
            )
        )
    )
    if hardware:
        scores = scores.filter(hardware=hardware)
    per_gpu: dict[str, tuple[dict[int, TaskScore], dict[int, TaskScore]]] = {}
    for score in scores.order_by("hardware", "task_id", "-pk"):
        current, earlier = per_gpu.setdefault(score.hardware, ({}, {}))
        (current if score.is_current else earlier).setdefault(score.task_id, score)
    rows = []
    for gpu, (current, earlier) in per_gpu.items():
        if not current:
            continue
        before = {**current, **earlier}
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
                **_reference_figures(list(current.values()), total),
                "implementation": None,
                **{f"implementation_{k}": None for k in LEVEL_KEYS},
                "discovery": None,
                "turns": None,
                "earlier": (
                    {**_reference_figures(list(before.values()), total), "tasks": len(earlier)}
                    if earlier
                    else None
                ),
            }
        )
    return rows


def _reference_figures(scores: list[TaskScore], total: int) -> dict[str, Any]:
    """Correctness, Performance Score and geomean of one expert score per task, over the
    catalog's `total` tasks (a task without a score counts as missing)."""
    speedups = [float(s.speedup) for s in scores if s.counts and s.speedup]
    return {
        "correctness_rate": len(speedups) / total if total else None,
        "performance_score": sum(speedups) / total if total else None,
        "geomean_speedup": geomean(speedups),
        "geomean_n": len(speedups),
        "tasks_total": total,
        "tasks_correct": len(speedups),
    }


# --- the paired view --------------------------------------------------------------------

PAIR_COLUMNS = (
    Column("hardware", "GPU"),
    Column("model", "Model"),
    Column("agent", "Agent"),
    Column("catalog_version", "Catalog"),
    Column("without_run_ids", "Runs without"),
    Column("with_run_ids", "Runs with"),
    Column("attempts_without", "Attempts without"),
    Column("attempts_with", "Attempts with"),
    Column("with_condition", "Guidance", "The levels given to the guided runs."),
    Column("is_example", "Example"),
    *(
        column
        for score in SCORE_COLUMNS
        for column in (
            Column(f"{score.key}_without", f"{score.label} without", "", score.direction, True),
            Column(f"{score.key}_with", f"{score.label} with", "", score.direction, True),
            Column(
                f"{score.key}_uplift",
                f"{score.label} uplift",
                "with − without guidance",
                score.direction,
                True,
            ),
            Column(
                f"uplift_{score.key}_ci",
                f"{score.label} uplift 95 % interval",
                "Paired bootstrap [low, high]; null unless both sides have two attempts.",
            ),
        )
    ),
    Column("geomean_n", "N", "Tasks correct on both sides (the paired geomean's N).", "", True),
)
PAIR_SORT_KEYS = frozenset(c.key for c in PAIR_COLUMNS if c.numeric) | {
    "model",
    "agent",
    "with_condition",
}


def leaderboard_pairs(*, filters: Filters) -> list[dict[str, Any]]:
    """Each entry without guidance beside each guided entry of the same model, agent,
    catalog version and GPU kind, with the uplift per score and its paired interval."""
    rows = [pair_record(p) for p in entry_pairs(filters=filters)]
    return _sorted(rows, filters.sort or "-performance_score_with")


def pairs_table(*, filters: Filters) -> Table:
    return Table(
        name="leaderboard-paired", columns=PAIR_COLUMNS, rows=leaderboard_pairs(filters=filters)
    )


def home_headline(*, filters: Filters, limit: int = 20) -> list[dict[str, Any]]:
    """The home page's headline: the best `limit` pairs of the board's catalog version
    and GPU kind by Performance Score with guidance."""
    return leaderboard_pairs(filters=filters)[:limit]


def headline_chart_rows(pairs: list[dict[str, Any]], *, top: int = 8) -> list[dict]:
    """The home chart's bars: Performance Score without and with guidance per pair, for
    the pairs whose runs were timed."""
    return [
        {
            "label": f"{p['model']} · {p['agent']} ({p['with_condition']})",
            "without": p["performance_score_without"],
            "with": p["performance_score_with"],
        }
        for p in pairs[:top]
        if p["performance_score_without"] is not None and p["performance_score_with"] is not None
    ]
