"""What every ranking shares: which results count (scoring.formulas decides)."""

from __future__ import annotations

from scoring.formulas import counts_for_scoring


def evaluation_counts(*, status: str, review: str) -> bool:
    """Whether a result counts (as the scores' TaskScore.counts): correct, or flagged and
    cleared by an admin; a confirmed hack never does."""
    return counts_for_scoring(status=status, review=review)
