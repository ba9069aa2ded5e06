"""Design-property detectors: checks over a submission's source code.

A detector is a small JSON-able dict stored with the property:

    {"kind": "manual"}                                  judged later, returns None
    {"kind": "regex", "pattern": "...", "min_count": 1} a regular expression over the source
    {"kind": "call", "names": ["tl.dot"], "within_loop": true}
                                                        a call of one of these dotted names
                                                        (optionally inside a for/while loop)
    {"kind": "all" | "any", "of": [detector, ...]}      combinations
    {"kind": "not", "of": detector}

Detectors read the source; they never run it.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any


class DetectorError(ValueError):
    pass


@dataclass(frozen=True)
class DetectorResult:
    """What a detector concluded about one property of one source: the value, why, and
    the code it saw (short snippets or names), for the assessment it becomes."""

    value: bool
    rationale: str
    evidence: tuple[str, ...] = field(default_factory=tuple)


def assess(detector: dict[str, Any], source: str) -> DetectorResult | None:
    """The detector's result with its rationale; None for properties judged by hand."""
    value = detect(detector, source)
    if value is None:
        return None
    kind = detector.get("kind", "manual")
    verb = "found" if value else "not found"
    return DetectorResult(value=value, rationale=f"{kind} detector: pattern {verb} in the source")


def detect(detector: dict[str, Any], source: str) -> bool | None:
    """True/False when the property is (not) visible in `source`; None for manual ones."""
    kind = detector.get("kind", "manual")
    if kind == "manual":
        return None
    if kind == "regex":
        try:
            found = re.findall(detector["pattern"], source, flags=re.MULTILINE)
        except re.error as exc:
            raise DetectorError(f"bad regex {detector.get('pattern')!r}: {exc}") from exc
        return len(found) >= int(detector.get("min_count", 1))
    if kind == "call":
        return _has_call(source, set(detector["names"]), bool(detector.get("within_loop")))
    if kind in ("all", "any"):
        results = [detect(d, source) for d in detector["of"]]
        if any(r is None for r in results):
            return None
        return all(results) if kind == "all" else any(results)
    if kind == "not":
        inner = detect(detector["of"], source)
        return None if inner is None else not inner
    raise DetectorError(f"unknown detector kind {kind!r}")


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else node.attr
    return ""


def _has_call(source: str, names: set[str], within_loop: bool) -> bool:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False

    def visit(node: ast.AST, in_loop: bool) -> bool:
        if isinstance(node, ast.Call):
            name = _dotted(node.func).replace("triton.language.", "tl.")
            # Match the full dotted name or its tail, so `tl.exp2` also finds
            # `triton.language.exp2` written out and `exp2` imported by name.
            tail = name.rsplit(".", 1)[-1]
            hit = name in names or any(n.rsplit(".", 1)[-1] == tail == name for n in names)
            if hit and (in_loop or not within_loop):
                return True
        loop = in_loop or isinstance(node, ast.For | ast.While | ast.AsyncFor)
        return any(visit(child, loop) for child in ast.iter_child_nodes(node))

    return visit(tree, False)
