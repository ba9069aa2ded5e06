"""What every ranking shares: which results count, and the geometric mean."""

from __future__ import annotations

import math
from collections.abc import Iterable

from evaluator.models import EvaluationStatus, Review


def evaluation_counts(*, status: str, review: str) -> bool:
    """Whether a result counts (as the scores' TaskScore.counts): correct, or flagged and
    cleared by an admin; a confirmed hack never does."""
    if review == Review.HACKED:
        return False
    return status == EvaluationStatus.CORRECT or (
        status == EvaluationStatus.FLAGGED and review == Review.CLEARED
    )


def geometric_mean(values: Iterable[float]) -> float:
    values = list(values)
    if not values or any(v <= 0 for v in values):
        raise ValueError("a geometric mean needs at least one positive value")
    return math.exp(sum(math.log(v) for v in values) / len(values))


def positive_geomean(values: Iterable[float | None]) -> float | None:
    """The geometric mean, or None when a value is missing or not positive."""
    values = list(values)
    if not values or any(v is None or v <= 0 for v in values):
        return None
    return geometric_mean(float(v) for v in values if v is not None)
