"""A task's design properties judged from what ran: one finding per property.

`properties_assess` is what `python -m evaluator check --json` prints under
`properties` and what the portal stores as machine assessments: for each
property its `key`, `level`, `implemented` (True, False, or None where only a
judge or an admin can decide) and `evidence` (`kind`, one of
`detectors.EVIDENCE_KINDS`, and a short `excerpt`). The evidence is, strongest
first: the property's counter rule over the timed workloads' counters, the
PTX of the kernels that ran (a `compiled` detector), then the source,
restricted to the jit functions that ran (`launched`) and to the code their
launches reach.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from taskformat.counter_rules import counter_assess, counter_pass_failed
from taskformat.detectors import DetectorResult, assess
from taskformat.detectors.compiled import sass_opcodes
from taskformat.detectors.result import EVIDENCE_KINDS, strongest

JUDGED = "assessed by a judge or an admin"


@dataclass(frozen=True)
class PropertyFinding:
    key: str
    level: str
    implemented: bool | None
    kind: str | None  # an evidence kind; None where a judge or an admin decides
    excerpt: tuple[str, ...]
    rationale: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "level": self.level,
            "implemented": self.implemented,
            "evidence": {"kind": self.kind, "excerpt": list(self.excerpt)},
            "rationale": self.rationale,
        }


def declared_evidence(detector: Mapping[str, Any] | None, counters: Any = None) -> str | None:
    """The strongest evidence kind a property can be judged from: `counter` with a
    counter rule, `compiled_code` for a compiled detector, `source` for the other
    detectors, None for a manual one (a judge or an admin decides)."""
    kinds = ["counter"] if counters else []
    found = _detector_kind(detector or {"kind": "manual"})
    if found:
        kinds.append(found)
    return strongest(kinds) if kinds else None


def _detector_kind(detector: Mapping[str, Any]) -> str | None:
    kind = detector.get("kind", "manual")
    if kind == "manual":
        return None
    if kind == "compiled":
        return "executed_instruction" if sass_opcodes(detector) else "compiled_code"
    if kind in ("all", "any"):
        inner = [_detector_kind(d) for d in detector.get("of", [])]
        if not inner or any(k is None for k in inner):
            return None
        return strongest([k for k in inner if k])
    if kind == "not":
        return _detector_kind(detector.get("of", {}))
    return "source"


def property_judge(
    *,
    detector: Mapping[str, Any] | None,
    counters: Mapping[str, Any] | None,
    source: str,
    launched: Iterable[str] | None = None,
    compiled: Mapping[str, str] | None = None,
    timed: Sequence[Mapping[str, Any]] | None = None,
    failed_pass: str = "",
) -> DetectorResult | None:
    """One property's machine verdict: the counter rule's where it decides, else the
    detector's; None where neither can (a judge or an admin decides). `failed_pass`:
    why the counters pass that started read nothing; a counter rule then finds nothing."""
    if counters and failed_pass:
        return counter_pass_failed(failed_pass)
    if counters and timed:
        counted = counter_assess(counters, timed)
        if counted is not None:
            return counted
    return assess(
        dict(detector or {"kind": "manual"}), source, launched=launched, compiled=compiled
    )


def properties_assess(
    properties: Iterable[Any],
    source: str,
    *,
    launched: Iterable[str] | None = None,
    compiled: Mapping[str, str] | None = None,
    timed: Sequence[Mapping[str, Any]] | None = None,
    failed_pass: str = "",
) -> list[PropertyFinding]:
    """A finding per property (objects with `key`, `level`, `detector`, `counters`)."""
    launched = None if launched is None else frozenset(launched)
    out = []
    for prop in properties:
        result = property_judge(
            detector=prop.detector,
            counters=prop.counters,
            source=source,
            launched=launched,
            compiled=compiled,
            timed=timed,
            failed_pass=failed_pass,
        )
        level = str(prop.level)
        if result is None:
            out.append(PropertyFinding(prop.key, level, None, None, (), JUDGED))
        else:
            assert result.kind in EVIDENCE_KINDS
            out.append(
                PropertyFinding(
                    prop.key, level, result.value, result.kind, result.evidence, result.rationale
                )
            )
    return out
