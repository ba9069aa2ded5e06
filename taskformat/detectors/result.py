"""What a detector returns."""

from __future__ import annotations

from dataclasses import dataclass, field

# Where a verdict's evidence comes from, strongest first: hardware counters of the
# profiled call, instructions the kernels executed in it, the compiled code of the
# kernels that ran, their source (restricted to what the launches reach).
EVIDENCE_KINDS = ("counter", "executed_instruction", "compiled_code", "source")


class DetectorError(ValueError):
    pass


@dataclass(frozen=True)
class DetectorResult:
    """What a detector concluded about one property of one source: the value, why, and
    the code it saw (short snippets or names), for the assessment it becomes."""

    value: bool
    rationale: str
    evidence: tuple[str, ...] = field(default_factory=tuple)
    kind: str = "source"  # one of EVIDENCE_KINDS


def strongest(kinds: list[str]) -> str:
    """The strongest of these evidence kinds (EVIDENCE_KINDS order)."""
    return min(kinds, key=EVIDENCE_KINDS.index) if kinds else "source"
