"""Repeated runs: the mean over attempts of a score, its 95 % bootstrap interval, the
paired interval of an uplift, and ranks that intervals leave tied.

Pure functions over `TaskParts` (a run's stored per-task numerators and denominators);
the bootstrap resamples tasks and attempts with replacement, from a seed drawn from
the runs' ids, so the same runs always give the same interval. `docs/scores.md`
states the method.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from scoring.formulas import LEVELS, TaskParts

RESAMPLES = 2000
CONFIDENCE = 0.95

Interval = tuple[float, float]


@dataclass(frozen=True)
class Metric:
    """A run score as Σ numerator / Σ denominator over tasks (or Σ numerator when `summed`),
    then `post` applied: every score the boards show has this shape."""

    key: str
    parts: Callable[[TaskParts], tuple[float, float]]
    post: Callable[[np.ndarray], np.ndarray] = np.asarray
    summed: bool = False


def _rate(p: TaskParts) -> tuple[float, float]:
    return float(p.counts), 1.0


def _performance(p: TaskParts) -> tuple[float, float]:
    return (p.speedup or 0.0) if p.counts else 0.0, 1.0


def _log_speedup(p: TaskParts) -> tuple[float, float]:
    if p.counts and p.speedup and p.speedup > 0:
        return math.log(p.speedup), 1.0
    return 0.0, 0.0


def _weights(name: str, bucket: str) -> Callable[[TaskParts], tuple[float, float]]:
    def parts(p: TaskParts) -> tuple[float, float]:
        got, total = getattr(p, name).get(bucket, (0.0, 0.0))
        return float(got), float(total)

    return parts


def _turns(p: TaskParts) -> tuple[float, float]:
    return float(p.turns or 0), 0.0


def _percent(x: np.ndarray) -> np.ndarray:
    return 100.0 * x


METRICS: tuple[Metric, ...] = (
    Metric("correctness_rate", _rate),
    Metric("performance_score", _performance),
    Metric("geomean_speedup", _log_speedup, np.exp),
    *(
        Metric(f"{name}{suffix}", _weights(name, bucket), _percent)
        for name in ("implementation", "discovery")
        for bucket, suffix in (("combined", ""), *((k, f"_{k}") for k in LEVELS))
    ),
    Metric("turns", _turns, summed=True),
)
METRIC_KEYS = tuple(m.key for m in METRICS)
SPEED_METRICS = frozenset({"performance_score", "geomean_speedup"})


def seed_of(*names: object) -> int:
    """A reproducible seed from the runs' ids (or any names)."""
    digest = hashlib.sha256("|".join(map(str, names)).encode()).digest()
    return int.from_bytes(digest[:8], "big")


def _matrix(
    attempts: Sequence[Sequence[TaskParts]], tasks: Sequence[str], metric: Metric
) -> tuple[np.ndarray, np.ndarray]:
    """Numerators and denominators, attempts × tasks; a task an attempt lacks is zero."""
    num = np.zeros((len(attempts), len(tasks)))
    den = np.zeros((len(attempts), len(tasks)))
    column = {t: i for i, t in enumerate(tasks)}
    for a, parts in enumerate(attempts):
        for p in parts:
            if p.task in column:
                num[a, column[p.task]], den[a, column[p.task]] = metric.parts(p)
    return num, den


def _ratio(total: np.ndarray, weight: np.ndarray, metric: Metric) -> np.ndarray:
    """The run score from its summed numerator and denominator; NaN where undefined."""
    if metric.summed:
        return total
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(weight > 0, total / np.where(weight > 0, weight, 1.0), np.nan)
    return metric.post(ratio)


def _point(num: np.ndarray, den: np.ndarray, metric: Metric) -> float | None:
    """The mean over attempts of each attempt's score (None when one has none)."""
    if num.shape[0] == 0:
        return None
    value = float(_ratio(num.sum(axis=1), den.sum(axis=1), metric).mean())
    return None if math.isnan(value) else value


def _multiplicity(picks: np.ndarray, size: int) -> np.ndarray:
    """Resamples × items: how often each resample drew each item."""
    rows = np.arange(picks.shape[0])[:, None] * size
    counts = np.bincount((rows + picks).ravel(), minlength=picks.shape[0] * size)
    return counts.reshape(picks.shape[0], size).astype(float)  # float: a BLAS product


def _resampled(
    num: np.ndarray, den: np.ndarray, metric: Metric, tasks: np.ndarray, attempts: np.ndarray
) -> np.ndarray:
    """Per resample: the mean over the drawn attempts of the score over the drawn tasks.
    `tasks`: resamples × tasks multiplicities; `attempts`: resamples × drawn attempt ids."""
    totals = tasks @ num.T  # resamples × attempts: each attempt's sums over the drawn tasks
    weights = tasks @ den.T
    drawn = np.take_along_axis(totals, attempts, axis=1), np.take_along_axis(weights, attempts, 1)
    return _ratio(*drawn, metric).mean(axis=1)


def _percentiles(samples: np.ndarray) -> Interval | None:
    samples = samples[~np.isnan(samples)]
    if samples.size == 0:
        return None
    tail = 100 * (1 - CONFIDENCE) / 2
    low, high = np.percentile(samples, [tail, 100 - tail])
    return float(low), float(high)


def _task_list(*sides: Sequence[Sequence[TaskParts]]) -> list[str]:
    return sorted({p.task for side in sides for parts in side for p in parts})


def entry_scores(
    *, attempts: Sequence[Sequence[TaskParts]], seed: int, resamples: int = RESAMPLES
) -> dict[str, tuple[float | None, Interval | None]]:
    """Per metric: the mean over attempts of the run score, and its 95 % bootstrap
    interval over tasks and attempts (None with fewer than two attempts, or when the
    score is undefined for an attempt)."""
    tasks = _task_list(attempts)
    rng = np.random.default_rng(seed)
    n_attempts, n_tasks = len(attempts), len(tasks)
    interval_possible = n_attempts >= 2 and n_tasks > 0
    if interval_possible:
        pick_attempts = rng.integers(0, n_attempts, size=(resamples, n_attempts))
        task_counts = _multiplicity(rng.integers(0, n_tasks, size=(resamples, n_tasks)), n_tasks)
    result: dict[str, tuple[float | None, Interval | None]] = {}
    for metric in METRICS:
        num, den = _matrix(attempts, tasks, metric)
        value = _point(num, den, metric)
        interval = None
        if interval_possible and value is not None:
            samples = _resampled(num, den, metric, task_counts, pick_attempts)
            interval = _percentiles(samples)
        result[metric.key] = (value, interval)
    return result


def _paired_geomean(
    counts: Sequence[np.ndarray], logs: Sequence[np.ndarray], tasks: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The paired geomean of each side over the drawn tasks correct in at least one drawn
    attempt of both sides (a task's log speedup: the mean over the side's correct drawn
    attempts), and N. `counts` and `logs` per side: (…, tasks) sums over the drawn
    attempts; `tasks`: (…, tasks) multiplicities of the drawn tasks."""
    both = (counts[0] > 0) & (counts[1] > 0)
    weight = tasks * both
    n = weight.sum(axis=-1)
    geomeans = []
    for c, lg in zip(counts, logs, strict=True):
        per_task = lg / np.maximum(c, 1)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean_log = np.where(n > 0, (per_task * weight).sum(axis=-1) / np.maximum(n, 1), np.nan)
        geomeans.append(np.exp(mean_log))
    return geomeans[0], geomeans[1], n


def paired_scores(
    *,
    without: Sequence[Sequence[TaskParts]],
    with_guidance: Sequence[Sequence[TaskParts]],
    seed: int,
    resamples: int = RESAMPLES,
) -> dict[str, dict[str, object]]:
    """Per metric: the value without and with guidance (means over attempts), the uplift
    (with − without) and its paired 95 % bootstrap interval: tasks are resampled once for
    both sides, attempts on each side apart. The geomean is the paired one (tasks correct
    on both sides), with `n`. The interval needs two attempts on each side."""
    tasks = _task_list(without, with_guidance)
    rng = np.random.default_rng(seed)
    sides = (without, with_guidance)
    n_tasks = len(tasks)
    interval_possible = all(len(side) >= 2 for side in sides) and n_tasks > 0
    if interval_possible:
        task_counts = _multiplicity(rng.integers(0, n_tasks, size=(resamples, n_tasks)), n_tasks)
        picks = [rng.integers(0, len(side), size=(resamples, len(side))) for side in sides]
    result: dict[str, dict[str, object]] = {}
    for metric in METRICS:
        mats = [_matrix(side, tasks, metric) for side in sides]
        entry: dict[str, object] = {}
        samples = None
        if metric.key == "geomean_speedup":
            once = np.ones(n_tasks)
            a, b, n = _paired_geomean(
                [den.sum(axis=0) for _, den in mats], [num.sum(axis=0) for num, _ in mats], once
            )
            points: list[float | None] = [float(a), float(b)]
            entry["n"] = int(n)
            if interval_possible:
                drawn = [_multiplicity(p, len(side)) for p, side in zip(picks, sides, strict=True)]
                sa, sb, _ = _paired_geomean(
                    [m @ den for m, (_, den) in zip(drawn, mats, strict=True)],
                    [m @ num for m, (num, _) in zip(drawn, mats, strict=True)],
                    task_counts,
                )
                samples = sb - sa
        else:
            points = [_point(num, den, metric) for num, den in mats]
            if interval_possible:
                values = [
                    _resampled(num, den, metric, task_counts, p)
                    for (num, den), p in zip(mats, picks, strict=True)
                ]
                samples = values[1] - values[0]
        clean = [None if v is None or math.isnan(v) else v for v in points]
        lift = None if clean[0] is None or clean[1] is None else clean[1] - clean[0]
        entry.update(
            without=clean[0],
            with_guidance=clean[1],
            uplift=lift,
            uplift_ci=_percentiles(samples) if samples is not None and lift is not None else None,
        )
        result[metric.key] = entry
    return result


def tied_ranks(
    intervals: Sequence[tuple[float | None, Interval | None]], *, higher_is_better: bool = True
) -> list[tuple[int | None, bool]]:
    """Per entry (value, interval): its rank, 1 + the number of entries whose whole
    interval lies beyond its own (a single run's interval is its value), and whether
    another entry's interval overlaps its own (tied). An entry without a value: (None,
    False)."""
    spans = [
        None if value is None else (interval or (value, value)) for value, interval in intervals
    ]
    ranks: list[tuple[int | None, bool]] = []
    for i, span in enumerate(spans):
        if span is None:
            ranks.append((None, False))
            continue
        better = tied = 0
        for j, other in enumerate(spans):
            if j == i or other is None:
                continue
            beyond = other[0] > span[1] if higher_is_better else other[1] < span[0]
            overlaps = other[0] <= span[1] and span[0] <= other[1]
            better += beyond
            tied += overlaps
        ranks.append((1 + better, tied > 0))
    return ranks
