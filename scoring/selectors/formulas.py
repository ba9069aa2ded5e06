"""The benchmark's score formulas as pure functions over plain data (no database).

Each takes keyword arguments and returns a number (or None where the score is not
defined); the selectors gather the rows and call these, and the tests drive them
with tables computed by hand. The formulas are those shown on the scoring page.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

LEVELS = ("L1", "L2", "L3")
# fast_p is drawn at these thresholds: p = 0 is the correctness rate among timed tasks,
# p = 1 the share of tasks correct and faster than the baseline.
FAST_P_GRID = (0.0, 0.5, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0)


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


def geomean(values: Iterable[float]) -> float | None:
    """The geometric mean of positive values; None for none."""
    logs = [math.log(v) for v in values]
    return math.exp(sum(logs) / len(logs)) if logs else None


def task_speedup(*, workload_speedups: Sequence[float | None]) -> float | None:
    """Geomean of the timed workloads' speedups; None unless every one has a positive figure."""
    if not workload_speedups or any(s is None or s <= 0 for s in workload_speedups):
        return None
    return geomean(s for s in workload_speedups if s is not None)


def correctness_rate(*, outcomes: Sequence[TaskOutcome]) -> float | None:
    """Correct tasks / tasks in the run (a missing task is in `outcomes`, not counting)."""
    if not outcomes:
        return None
    return sum(o.counts for o in outcomes) / len(outcomes)


def performance_score(*, outcomes: Sequence[TaskOutcome]) -> float | None:
    """Mean over all tasks of the task speedup, a missing or incorrect task scoring 0."""
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
    return geomean(mine.values()), len(mine)


def fast_p(
    *, outcomes: Sequence[TaskOutcome], grid: Sequence[float] = FAST_P_GRID
) -> list[list[float]]:
    """[[p, fraction of tasks correct with speedup > p], …] over `grid`."""
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


def implementation_score(
    *, tasks: Sequence[tuple[Sequence[PropertyRow], Mapping[str, bool | None]]]
) -> dict[str, float | None]:
    """100 × credited weight / total weight, per level and combined, pooled over `tasks`
    (each: its properties and the effective value per key, empty for a missing kernel).
    A level no task has properties at is None. The discovery score is the same formula
    over proposed assessments."""
    earned = dict.fromkeys((*LEVELS, "combined"), 0.0)
    total = dict.fromkeys((*LEVELS, "combined"), 0.0)
    for properties, values in tasks:
        credits = property_credits(properties=properties, values=values)
        for row in properties:
            for bucket in (row.level, "combined"):
                total[bucket] += row.weight
                earned[bucket] += row.weight if credits[row.key] else 0.0
    return {b: (100.0 * earned[b] / total[b] if total[b] > 0 else None) for b in total}


def uplift(*, without: float | None, with_guidance: float | None) -> float | None:
    """with guidance − without guidance; None when either side is not defined."""
    if without is None or with_guidance is None:
        return None
    return with_guidance - without
