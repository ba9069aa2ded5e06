"""Design-property detectors: checks over the program a submission runs.

A detector is a small JSON-able dict stored with a task's property, e.g.
`{"kind": "dot_accumulate"}` or `{"kind": "device_call", "names": ["tl.exp2"]}`;
`docs/task-format.md` lists every kind. Detectors read the source (through
`Program`: what `ModelNew.forward` reaches, device code apart from host code);
they never run it.

    {"kind": "manual"}                       judged later: None
    {"kind": "all" | "any", "of": [...]}     combinations
    {"kind": "not", "of": detector}
    {"kind": "compiled", "ptx": [...],       the SASS executed, else the compiled code of
     "sass": [...], "source": detector}      the launched kernels (compiled.py), else
                                             the source detector
    any primitive of `primitives.PRIMITIVES`

`launched` (the kernel names the profiler saw) restricts the program to the
jit functions that ran; `compiled` maps a launched kernel's name to its PTX.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

from taskformat.detectors.compiled import compiled_assess, executed_assess
from taskformat.detectors.primitives import PRIMITIVES
from taskformat.detectors.program import Program
from taskformat.detectors.result import (
    EVIDENCE_KINDS,
    DetectorError,
    DetectorResult,
    strongest,
)

KINDS = frozenset({"manual", "all", "any", "not", "compiled", *PRIMITIVES})

__all__ = [
    "EVIDENCE_KINDS",
    "KINDS",
    "DetectorError",
    "DetectorResult",
    "Program",
    "assess",
    "detect",
    "implementation_score",
]


@lru_cache(maxsize=64)
def _program(source: str, launched: frozenset[str] | None) -> Program:
    return Program(source, launched)


def assess(
    detector: dict[str, Any],
    source: str,
    *,
    launched: Iterable[str] | None = None,
    compiled: Mapping[str, str] | None = None,
    executed: Mapping[str, Mapping[str, int]] | None = None,
) -> DetectorResult | None:
    """The detector's result with its rationale and evidence; None for properties
    judged by hand (or combinations that include one). `executed`: per launched
    kernel, the SASS opcodes executed in the profiled call and their counts."""
    program = _program(source, None if launched is None else frozenset(launched))
    return _assess(detector, program, compiled or {}, executed or {})


def detect(
    detector: dict[str, Any], source: str, *, launched: Iterable[str] | None = None
) -> bool | None:
    """True/False when the property is (not) implemented by `source`; None for manual ones."""
    result = assess(detector, source, launched=launched)
    return None if result is None else result.value


def _assess(
    detector: dict[str, Any],
    program: Program,
    compiled: Mapping[str, str],
    executed: Mapping[str, Mapping[str, int]] | None = None,
) -> DetectorResult | None:
    executed = executed or {}
    if not isinstance(detector, Mapping):
        raise DetectorError(f"a detector is a table, not {detector!r}")
    kind = detector.get("kind", "manual")
    if kind == "manual":
        return None
    if kind == "compiled":
        counted = executed_assess(detector, program, executed) if executed else None
        if counted is not None:
            return counted
        if compiled:
            return compiled_assess(detector, program, compiled)
        return _assess(detector.get("source", {"kind": "manual"}), program, compiled)
    if kind in ("all", "any"):
        inner = detector.get("of")
        if not isinstance(inner, list) or not inner:
            raise DetectorError(f"{kind} detector needs a non-empty list `of`")
        results = [_assess(d, program, compiled, executed) for d in inner]
        if any(r is None for r in results):
            return None
        done = [r for r in results if r is not None]
        value = all(r.value for r in done) if kind == "all" else any(r.value for r in done)
        deciding = [r for r in done if r.value == value]
        return DetectorResult(
            value=value,
            rationale="; ".join(r.rationale for r in deciding),
            evidence=tuple(e for r in deciding for e in r.evidence)[:4],
            kind=strongest([r.kind for r in deciding]),
        )
    if kind == "not":
        inner_result = _assess(detector.get("of", {}), program, compiled, executed)
        if inner_result is None:
            return None
        return DetectorResult(
            value=not inner_result.value,
            rationale=f"not: {inner_result.rationale}",
            evidence=inner_result.evidence,
            kind=inner_result.kind,
        )
    primitive = PRIMITIVES.get(kind)
    if primitive is None:
        raise DetectorError(f"unknown detector kind {kind!r}")
    if not program.ok:
        return DetectorResult(value=False, rationale="the source does not parse")
    if "ModelNew.forward" not in program.funcs:
        return DetectorResult(value=False, rationale="no ModelNew.forward to start from")
    return primitive(program, dict(detector))


def implementation_score(
    properties: Iterable[Mapping[str, Any]], results: Mapping[str, bool | None]
) -> float:
    """100 x (weight of implemented properties) / (total weight). A property counts when
    its result is True and every listed property it depends on counts too (a dependency
    missing from `properties`, e.g. a manual one left out, does not hold it back)."""
    props = {p["key"]: p for p in properties}
    memo: dict[str, bool] = {}

    def counts(key: str, stack: tuple[str, ...] = ()) -> bool:
        if key not in memo:
            prop = props.get(key)
            memo[key] = bool(
                prop is not None
                and key not in stack
                and results.get(key) is True
                and all(counts(d, (*stack, key)) for d in prop.get("depends_on", ()) if d in props)
            )
        return memo[key]

    total = sum(float(p.get("weight", 1.0)) for p in props.values())
    if total <= 0:
        return 0.0
    return 100.0 * sum(float(p.get("weight", 1.0)) for k, p in props.items() if counts(k)) / total
