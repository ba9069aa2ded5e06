"""What a detector returns."""

from __future__ import annotations

from dataclasses import dataclass, field


class DetectorError(ValueError):
    pass


@dataclass(frozen=True)
class DetectorResult:
    """What a detector concluded about one property of one source: the value, why, and
    the code it saw (short snippets or names), for the assessment it becomes."""

    value: bool
    rationale: str
    evidence: tuple[str, ...] = field(default_factory=tuple)
