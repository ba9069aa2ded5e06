"""The benchmark's score formulas: pure functions over plain data (no database).

Every page, API, export and chart computes a score through these functions; the
selectors and services only gather rows. `docs/scores.md` states each formula and
the tests drive them with tables worked out by hand. The intervals over repeated
runs are in `scoring.intervals`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from evaluator.harness.verdict import Status
from taskformat.spec import Level

LEVELS: tuple[str, ...] = tuple(level.value for level in Level)
BUCKETS: tuple[str, ...] = (*LEVELS, "combined")
# fast_p is drawn at these thresholds: p = 0 is the correctness rate among timed tasks,
# p = 1 the share of tasks correct and faster than the baseline.
FAST_P_GRID = (0.0, 0.5, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0)
# An admin's review of a flagged result (evaluator.models.Review's values).
REVIEW_CLEARED = "cleared"
REVIEW_HACKED = "hacked"


@dataclass(frozen=True)
class TaskOutcome:
    """One task of a run as the scores see it. `counts`: correct for scoring (correct,
    or flagged and cleared); `speedup`: the task speedup, None when untimed."""

    task: str
    counts: bool
    speedup: float | None = None


@dataclass(frozen=True)
class PropertyRow:
    key: str
    level: str
    weight: float
    depends_on: tuple[str, ...] = ()


@dataclass(frozen=True)
class TaskParts:
    """One task of one run, as the numerators and denominators every run score is
    built from (stored as `RunScore.tasks`, resampled by the bootstrap).
    `implementation` / `discovery`: per bucket, [credited weight, total weight]."""

    task: str
    counts: bool
    speedup: float | None = None
    implementation: Mapping[str, Sequence[float]] = field(default_factory=dict)
    discovery: Mapping[str, Sequence[float]] = field(default_factory=dict)
    turns: int | None = None


def geomean(values: Iterable[float | None]) -> float | None:
    """The geometric mean of positive values; None for none (or for a value ≤ 0)."""
    logs = []
    for v in values:
        if v is None or v <= 0:
            return None
        logs.append(math.log(v))
    return math.exp(sum(logs) / len(logs)) if logs else None


def counts_for_scoring(*, status: str, review: str = "") -> bool:
    """Correct for scoring: `correct`, or `flagged` and cleared by an admin; a confirmed
    hack, an unreviewed flag, any other verdict and an unevaluated kernel never count."""
    if review == REVIEW_HACKED:
        return False
    return status == Status.CORRECT or (status == Status.FLAGGED and review == REVIEW_CLEARED)


def task_speedup(*, workload_speedups: Sequence[float | None]) -> float | None:
    """Geomean of the public timed workloads' speedups; None unless every one has a
    positive figure (a task is timed as a whole or not at all)."""
    if not workload_speedups or any(s is None or s <= 0 for s in workload_speedups):
        return None
    return geomean(s for s in workload_speedups if s is not None)


def correctness_rate(*, outcomes: Sequence[TaskOutcome]) -> float | None:
    """Correct tasks / tasks of the run's catalog version (a missing, failed, flagged or
    unevaluated task is in `outcomes`, not counting). None for an empty catalog."""
    if not outcomes:
        return None
    return sum(o.counts for o in outcomes) / len(outcomes)


def performance_score(*, outcomes: Sequence[TaskOutcome]) -> float | None:
    """Mean over all tasks of the task speedup, a task that does not count scoring 0
    (so a run with nothing correct scores 0). None for an empty catalog."""
    if not outcomes:
        return None
    return sum(o.speedup or 0.0 for o in outcomes if o.counts) / len(outcomes)


def geomean_speedup(
    *, outcomes: Sequence[TaskOutcome], twin: Sequence[TaskOutcome] | None = None
) -> tuple[float | None, int]:
    """Geomean of task speedups over the tasks correct in both runs of a pair (over the
    correct tasks for a single run, `twin` None), with the number of tasks N."""
    mine = {o.task: o.speedup for o in outcomes if o.counts and o.speedup}
    if twin is not None:
        theirs = {o.task for o in twin if o.counts}
        mine = {task: s for task, s in mine.items() if task in theirs}
    return geomean(v for v in mine.values() if v is not None), len(mine)


def fast_p(
    *, outcomes: Sequence[TaskOutcome], grid: Sequence[float] = FAST_P_GRID
) -> list[list[float]]:
    """[[p, fraction of tasks correct with speedup > p], …] over `grid` (all 0 when
    nothing is correct; [] for an empty catalog)."""
    if not outcomes:
        return []
    total = len(outcomes)
    return [
        [p, sum(1 for o in outcomes if o.counts and o.speedup and o.speedup > p) / total]
        for p in grid
    ]


def property_credits(
    *, properties: Sequence[PropertyRow], values: Mapping[str, bool | None]
) -> dict[str, bool]:
    """Per key, whether the property earns its weight: assessed as present, and every
    property it depends on earning its weight too (transitively; a cycle earns nothing)."""
    by_key = {p.key: p for p in properties}
    memo: dict[str, bool] = {}

    def credit(key: str, seen: frozenset[str]) -> bool:
        if key in memo:
            return memo[key]
        row = by_key.get(key)
        if row is None or key in seen or not values.get(key):
            result = False
        else:
            result = all(credit(dep, seen | {key}) for dep in row.depends_on)
        memo[key] = result
        return result

    return {p.key: credit(p.key, frozenset()) for p in properties}


def implementation_parts(
    *, properties: Sequence[PropertyRow], values: Mapping[str, bool | None]
) -> dict[str, list[float]]:
    """One task's [credited weight, total weight] per level and combined, from its
    properties and the effective value per key (empty for a missing kernel)."""
    parts = {b: [0.0, 0.0] for b in BUCKETS}
    credits = property_credits(properties=properties, values=values)
    for row in properties:
        for bucket in (row.level, "combined"):
            parts[bucket][1] += row.weight
            parts[bucket][0] += row.weight if credits[row.key] else 0.0
    return parts


def pooled_score(parts: Iterable[Mapping[str, Sequence[float]]]) -> dict[str, float | None]:
    """100 × credited weight / total weight per bucket, pooled over tasks' parts; a
    bucket no task has weight at is None."""
    earned = dict.fromkeys(BUCKETS, 0.0)
    total = dict.fromkeys(BUCKETS, 0.0)
    for task in parts:
        for bucket in BUCKETS:
            got, out_of = task.get(bucket, (0.0, 0.0))
            earned[bucket] += got
            total[bucket] += out_of
    return {b: (100.0 * earned[b] / total[b] if total[b] > 0 else None) for b in BUCKETS}


def implementation_score(
    *, tasks: Sequence[tuple[Sequence[PropertyRow], Mapping[str, bool | None]]]
) -> dict[str, float | None]:
    """100 × credited weight / total weight, per level and combined, pooled over `tasks`
    (each: its properties and the effective value per key, empty for a missing kernel).
    A level no task has properties at is None. The discovery score is the same formula
    over proposed assessments."""
    return pooled_score(
        implementation_parts(properties=properties, values=values) for properties, values in tasks
    )


def uplift(*, without: float | None, with_guidance: float | None) -> float | None:
    """with guidance − without guidance; None when either side is not defined."""
    if without is None or with_guidance is None:
        return None
    return with_guidance - without
