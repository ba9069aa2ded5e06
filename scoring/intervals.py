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
    post: Callable[[float], float] = float
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


def _percent(x: float) -> float:
    return 100.0 * x


METRICS: tuple[Metric, ...] = (
    Metric("correctness_rate", _rate),
    Metric("performance_score", _performance),
    Metric("geomean_speedup", _log_speedup, math.exp),
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


def _values(num: np.ndarray, den: np.ndarray, metric: Metric) -> np.ndarray:
    """Per attempt (last axis summed over tasks): the run score, NaN where undefined."""
    total = num.sum(axis=-1)
    if metric.summed:
        return total
    weight = den.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(weight > 0, total / np.where(weight > 0, weight, 1.0), np.nan)
    return np.vectorize(metric.post, otypes=[float])(ratio) if ratio.size else ratio


def _mean_over_attempts(values: np.ndarray) -> np.ndarray:
    """The mean over the attempt axis; NaN when an attempt has no value (the score is
    then not defined for that set of attempts)."""
    return values.mean(axis=-1)


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
        pick_tasks = rng.integers(0, n_tasks, size=(resamples, n_tasks))
    result: dict[str, tuple[float | None, Interval | None]] = {}
    for metric in METRICS:
        num, den = _matrix(attempts, tasks, metric)
        point = _mean_over_attempts(_values(num, den, metric)) if n_attempts else np.nan
        value = None if np.isnan(point) else float(point)
        interval = None
        if interval_possible and value is not None:
            rows = pick_attempts[:, :, None], pick_tasks[:, None, :]
            samples = _mean_over_attempts(_values(num[rows], den[rows], metric))
            interval = _percentiles(samples)
        result[metric.key] = (value, interval)
    return result


def _paired_geomean(
    counts: Sequence[np.ndarray], logs: Sequence[np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The paired geomean of each side over the tasks correct in at least one attempt of
    both sides (a task's log speedup: the mean over the side's correct attempts), and N.
    Arrays are (…, attempts, tasks); the results (…)."""
    correct = [c.sum(axis=-2) for c in counts]
    both = (correct[0] > 0) & (correct[1] > 0)
    n = both.sum(axis=-1)
    geomeans = []
    for c, lg in zip(correct, logs, strict=True):
        per_task = lg.sum(axis=-2) / np.maximum(c, 1)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean_log = np.where(n > 0, (per_task * both).sum(axis=-1) / np.maximum(n, 1), np.nan)
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
    on both sides), with `geomean_n`. The interval needs two attempts on each side."""
    tasks = _task_list(without, with_guidance)
    rng = np.random.default_rng(seed)
    sides = (without, with_guidance)
    n_tasks = len(tasks)
    interval_possible = all(len(side) >= 2 for side in sides) and n_tasks > 0
    if interval_possible:
        pick_tasks = rng.integers(0, n_tasks, size=(resamples, n_tasks))
        picks = [rng.integers(0, len(side), size=(resamples, len(side))) for side in sides]
    result: dict[str, dict[str, object]] = {}
    for metric in METRICS:
        mats = [_matrix(side, tasks, metric) for side in sides]
        if metric.key == "geomean_speedup":
            counts = [den for _, den in mats]
            logs = [num for num, _ in mats]
            a, b, n = _paired_geomean(counts, logs)
            points = [float(a), float(b)]
            entry: dict[str, object] = {"n": int(n)}
            if interval_possible:
                idx = [(p[:, :, None], pick_tasks[:, None, :]) for p in picks]
                sa, sb, _ = _paired_geomean(
                    [c[i] for c, i in zip(counts, idx, strict=True)],
                    [lg[i] for lg, i in zip(logs, idx, strict=True)],
                )
                samples = sb - sa
        else:
            points = [
                float(_mean_over_attempts(_values(num, den, metric))) if len(side) else math.nan
                for (num, den), side in zip(mats, sides, strict=True)
            ]
            entry = {}
            if interval_possible:
                values = [
                    _mean_over_attempts(
                        _values(
                            num[p[:, :, None], pick_tasks[:, None, :]],
                            den[p[:, :, None], pick_tasks[:, None, :]],
                            metric,
                        )
                    )
                    for (num, den), p in zip(mats, picks, strict=True)
                ]
                samples = values[1] - values[0]
        clean = [None if math.isnan(v) else v for v in points]
        lift = None if None in clean else clean[1] - clean[0]  # type: ignore[operator]
        entry.update(
            without=clean[0],
            with_guidance=clean[1],
            uplift=lift,
            uplift_ci=_percentiles(samples) if interval_possible and lift is not None else None,
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
