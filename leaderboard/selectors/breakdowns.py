"""The breakdown charts' rows: per-level scores, fast_p, speedup spread, speed of light
per workload and the design properties runs miss most (4 queries for any number of runs);
and the run page's per-level charts (no query: they draw the scores the page read)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from evaluator.models import WorkloadResult
from moderation.selectors import run_rankable
from runs.models import Run
from scoring.models import SOURCE_PRECEDENCE, Assessment, AssessmentKind, RunScore, TaskScore
from scoring.selectors.runs import RunScoresView
from task_catalog.models import Workload

from ..charts import run_level_scores_figure
from ..filters import Filters
from .board import run_records
from .entries import board_scope

CHART_RUNS = 8


@dataclass(frozen=True)
class Breakdowns:
    runs: list[dict[str, Any]]
    implementation: list[dict[str, Any]]
    discovery: list[dict[str, Any]]
    fast_p: list[dict[str, Any]]
    speedups: list[dict[str, Any]]
    sol: list[dict[str, Any]]
    misses: list[dict[str, Any]]


def _label(row: dict[str, Any]) -> str:
    return f"#{row['run_id']} {row['model']} · {row['condition']}"


def leaderboard_breakdowns(*, filters: Filters, run_ids: list[int] | None = None) -> Breakdowns:
    """The chosen runs (`run_ids`, else the first `CHART_RUNS` of the filtered leaderboard
    on its first GPU) and every breakdown chart's rows for them."""
    rows = run_records(filters=board_scope(filters=filters))
    if run_ids:
        chosen = [r for r in rows if r["run_id"] in set(run_ids)]
    else:
        gpu = rows[0]["hardware"] if rows else ""
        chosen = [r for r in rows if r["hardware"] == gpu][:CHART_RUNS]
    ids = [r["run_id"] for r in chosen]
    labels = {r["run_id"]: _label(r) for r in chosen}
    fast_p = dict(RunScore.objects.filter(run_id__in=ids).values_list("run_id", "fast_p"))
    speedups: dict[int, list[float]] = defaultdict(list)
    evaluations: dict[int, tuple[int, str]] = {}
    for run_id, speedup, counts, evaluation_id, slug in TaskScore.objects.filter(
        run_id__in=ids
    ).values_list("run_id", "speedup", "counts", "evaluation_id", "task__slug"):
        if counts and speedup:
            speedups[run_id].append(speedup)
            if evaluation_id:
                evaluations[evaluation_id] = (run_id, slug)
    sol: dict[int, dict[str, float | None]] = defaultdict(dict)
    for evaluation_id, name, fraction in WorkloadResult.objects.filter(
        evaluation_id__in=list(evaluations), role=Workload.Role.TIMED, hidden=False
    ).values_list("evaluation_id", "name", "sol_fraction"):
        run_id, slug = evaluations[evaluation_id]
        sol[run_id][f"{slug}/{name}"] = fraction
    return Breakdowns(
        runs=chosen,
        # A run without the figure is left out of its chart (a chart of none says why).
        implementation=[
            _levels(r, "implementation") for r in chosen if r["implementation"] is not None
        ],
        discovery=[_levels(r, "discovery") for r in chosen if r["discovery"] is not None],
        fast_p=[{"label": labels[i], "fast_p": fast_p[i]} for i in ids if fast_p.get(i)],
        speedups=[{"label": labels[i], "speedups": speedups[i]} for i in ids if speedups.get(i)],
        sol=[{"label": labels[i], "workloads": sol[i]} for i in ids if sol.get(i)],
        misses=property_implemented_shares(run_ids=ids),
    )


def _levels(row: dict[str, Any], name: str) -> dict[str, Any]:
    scores = {"combined": row[name]}
    if name == "implementation":
        scores |= {k: row[f"implementation_{k}"] for k in ("L1", "L2", "L3")}
    return {"label": _label(row), "condition": row["condition"], "scores": scores}


def property_implemented_shares(*, run_ids: list[int]) -> list[dict[str, Any]]:
    """Per design property: the share of the runs (with a kernel for its task) whose kernel
    implements it, by the effective assessment (admin > judge > counters > detector)."""
    rank: dict[str, int] = {str(source): i for i, source in enumerate(SOURCE_PRECEDENCE)}
    effective: dict[tuple[int, int], tuple[int, bool]] = {}
    meta: dict[int, tuple[str, str]] = {}
    rows = Assessment.objects.filter(
        kind=AssessmentKind.IMPLEMENTED, submission__run_id__in=run_ids
    ).values_list(
        "submission__run_id",
        "property_id",
        "property__level",
        "property__key",
        "task__slug",
        "source",
        "value",
    )
    for run_id, prop, level, key, slug, source, value in rows:
        meta[prop] = (level, f"{slug}: {key}")
        current = effective.get((run_id, prop))
        if current is None or rank[source] < current[0]:
            effective[(run_id, prop)] = (rank[source], value)
    implemented: dict[int, list[bool]] = defaultdict(list)
    for (_, prop), (_, value) in effective.items():
        implemented[prop].append(value)
    return [
        {"level": meta[p][0], "label": meta[p][1], "share": sum(v) / len(v)}
        for p, v in implemented.items()
    ]


@dataclass(frozen=True)
class RunCharts:
    figures: list[tuple[str, dict[str, Any]]]  # (element id, figure)
    # The charted runs the breakdowns page shows (public, not held back), when the run is one.
    breakdown_ids: list[int]


def run_level_charts(*, run: Run, pair: Run | None, scores: RunScoresView) -> RunCharts:
    """The run page's implementation and discovery scores per level: the run and, beside it,
    its twin (the run without guidance first), from the scores the page already read.

    A chart is drawn only where some level of some charted run has a score, and none at
    all while the run's own scores are not computed.
    """
    if scores.mine is None:
        return RunCharts(figures=[], breakdown_ids=[])
    sides = [(run, scores.mine, "this run")]
    if pair is not None and scores.twin is not None:
        sides.append((pair, scores.twin, "twin"))
    sides.sort(key=lambda side: side[0].condition != "none")
    figures = []
    for name in ("implementation", "discovery"):
        rows = [
            {
                "label": f"#{r.pk} {who}",
                "condition": r.condition,
                "is_example": r.is_example,
                "scores": data[name],
            }
            for r, data, who in sides
        ]
        if all(value is None for row in rows for value in row["scores"].values()):
            continue
        uplift = scores.uplift[name] if scores.uplift else None
        figures.append(
            (f"run-{name}", run_level_scores_figure(rows=rows, score=name, uplift=uplift))
        )
    ranked = [r.pk for r, _, _ in sides if run_rankable(r)] if figures and run_rankable(run) else []
    return RunCharts(figures=figures, breakdown_ids=ranked)
