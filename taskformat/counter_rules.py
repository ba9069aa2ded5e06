"""Design properties read from hardware counters instead of the source.

A counter rule is a small JSON-able dict stored with a property (`counters` in
task.toml), checked against the counters the GPU harness read for each timed
workload of a correct `cuda` verdict:

    {"kind": "traffic", "max_ratio": 1.3}   DRAM bytes moved / the workload's minimum
                                            bytes <= max_ratio on every workload
                                            (e.g. "a single HBM pass")
    {"kind": "tensor_share", "min": 0.5}    share of the kernel's math issued on tensor
                                            cores >= min on every workload (MMA used)

A workload's counters are `{"dram_bytes", "min_bytes", "tensor_share", "tool"}` or
None when they could not be read. A rule concludes only from counters that were
read for every timed workload: otherwise it returns None (never a guess).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from taskformat.detectors import DetectorResult

COUNTER_RULE_KINDS = frozenset({"traffic", "tensor_share"})


class CounterRuleError(ValueError):
    pass


def counter_rule_validate(rule: Mapping[str, Any]) -> None:
    """Raise CounterRuleError when `rule` is not one of the kinds above, well formed."""
    if not isinstance(rule, Mapping):
        raise CounterRuleError(f"a counter rule is a table, not {rule!r}")
    kind = rule.get("kind")
    fields = {"traffic": "max_ratio", "tensor_share": "min"}
    if kind not in fields:
        raise CounterRuleError(f"counter rule kind must be one of {sorted(COUNTER_RULE_KINDS)}")
    limit = rule.get(fields[kind])
    if isinstance(limit, bool) or not isinstance(limit, int | float) or not math.isfinite(limit):
        raise CounterRuleError(f"counter rule {kind!r} needs a number {fields[kind]!r}")
    if limit <= 0 or (kind == "tensor_share" and limit > 1):
        raise CounterRuleError(f"counter rule {kind!r}: {fields[kind]} out of range ({limit})")
    unknown = set(rule) - {"kind", fields[kind]}
    if unknown:
        raise CounterRuleError(f"counter rule {kind!r}: unknown keys {sorted(unknown)}")


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def traffic_ratio(counters: Mapping[str, Any] | None) -> float | None:
    """DRAM bytes moved / minimum bytes, or None when either is missing or not positive."""
    if not isinstance(counters, Mapping):
        return None
    moved, minimum = _number(counters.get("dram_bytes")), _number(counters.get("min_bytes"))
    if moved is None or minimum is None or moved < 0 or minimum <= 0:
        return None
    return moved / minimum


def counter_assess(
    rule: Mapping[str, Any], workloads: Sequence[Mapping[str, Any]]
) -> DetectorResult | None:
    """The rule's conclusion over the timed workloads (`{"name", "counters"}` each), or
    None when some workload's counters were not read (or there are no workloads)."""
    counter_rule_validate(rule)
    if not workloads:
        return None
    kind = rule["kind"]
    figures: list[tuple[str, float, str]] = []
    for workload in workloads:
        counters = workload.get("counters")
        if kind == "traffic":
            figure = traffic_ratio(counters)
        else:
            figure = (
                _number(counters.get("tensor_share")) if isinstance(counters, Mapping) else None
            )
        if figure is None:
            return None
        tool = str(counters.get("tool") or "") if isinstance(counters, Mapping) else ""
        figures.append((str(workload.get("name", "?")), figure, tool))
    if kind == "traffic":
        limit = float(rule["max_ratio"])
        value = all(f <= limit for _, f, _ in figures)
        worst = max(f for _, f, _ in figures)
        evidence = tuple(f"{n}: traffic ×{f:.2f} of minimum ({t})" for n, f, t in figures)
        rationale = (
            f"DRAM traffic at most ×{worst:.2f} of the minimum bytes on every workload "
            f"(the rule allows ×{limit:g})"
            if value
            else f"DRAM traffic reaches ×{worst:.2f} of the minimum bytes (the rule allows "
            f"×{limit:g})"
        )
        return DetectorResult(value=value, rationale=rationale, evidence=evidence, kind="counter")
    minimum = float(rule["min"])
    value = all(f >= minimum for _, f, _ in figures)
    lowest = min(f for _, f, _ in figures)
    evidence = tuple(f"{n}: tensor-core share {f:.0%} ({t})" for n, f, t in figures)
    rationale = (
        f"tensor-core share of the math at least {lowest:.0%} on every workload "
        f"(the rule asks {minimum:.0%})"
        if value
        else f"tensor-core share of the math falls to {lowest:.0%} (the rule asks {minimum:.0%})"
    )
    return DetectorResult(value=value, rationale=rationale, evidence=evidence, kind="counter")


def counter_pass_failed(note: str) -> DetectorResult:
    """A counter rule's finding where the submission's counters pass started and read
    nothing (`note` says why): no counter shows the property, and the source may not
    stand in for the counters a submission kept from being read."""
    return DetectorResult(
        value=False,
        rationale=f"no counter shows it: its counters pass read nothing ({note})",
        evidence=(note,),
        kind="counter",
    )
