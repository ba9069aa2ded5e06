"""Design properties read from hardware counters instead of the source.

A counter rule is a small JSON-able dict stored with a property (`counters` in
task.toml), checked against the counters the GPU harness read for each timed
workload of a correct `cuda` verdict:

    {"kind": "traffic", "max_ratio": 1.3}   DRAM bytes moved / the workload's minimum
                                            bytes <= max_ratio on every workload
                                            (e.g. "a single HBM pass")
    {"kind": "tensor_share", "min": 0.5}    share of the kernel's math issued on tensor
                                            cores >= min on every workload (MMA used)
      "max_instructions_per_flop": 0.002    and, where given, instructions executed per
                                            FLOP of the workload at most that: the
                                            products are not (also) done on the CUDA
                                            cores, whose floor is 1/128 (a warp's FMA)

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
    optional = {"max_instructions_per_flop"} if kind == "tensor_share" else set()
    for key in optional & set(rule):
        value = rule[key]
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
            raise CounterRuleError(f"counter rule {kind!r}: {key} must be in (0, 1), not {value!r}")
    unknown = set(rule) - {"kind", fields[kind]} - optional
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
    return _tensor_share(rule, workloads, figures)


def _tensor_share(
    rule: Mapping[str, Any],
    workloads: Sequence[Mapping[str, Any]],
    figures: list[tuple[str, float, str]],
) -> DetectorResult | None:
    """The tensor_share rule: the share, and where the rule bounds them, the instructions
    executed per FLOP of the workload (None where they cannot be read)."""
    minimum = float(rule["min"])
    evidence = [f"{n}: tensor-core share {f:.0%} ({t})" for n, f, t in figures]
    value = all(f >= minimum for _, f, _ in figures)
    lowest = min(f for _, f, _ in figures)
    rationale = (
        f"tensor-core share of the math at least {lowest:.0%} on every workload "
        f"(the rule asks {minimum:.0%})"
        if value
        else f"tensor-core share of the math falls to {lowest:.0%} (the rule asks {minimum:.0%})"
    )
    bound = rule.get("max_instructions_per_flop")
    if bound is None:
        return DetectorResult(value, rationale, tuple(evidence), kind="counter")
    rates = []
    for workload in workloads:
        counters = workload.get("counters")
        executed = _number(counters.get("instructions")) if isinstance(counters, Mapping) else None
        flops = _number(workload.get("flops"))
        if executed is None or flops is None or flops <= 0:
            return None
        rates.append(executed / flops)
    evidence += [
        f"{name}: {rate:.2e} instructions per FLOP"
        for (name, _, _), rate in zip(figures, rates, strict=True)
    ]
    if value and max(rates) > float(bound):
        value = False
        rationale = (
            f"{max(rates):.2e} instructions per FLOP of the workload: the products run on the "
            f"CUDA cores too (the rule allows {float(bound):g}; a warp's FMA does 64-128 FLOPs)"
        )
    return DetectorResult(value, rationale, tuple(evidence), kind="counter")


# The notes of a counters pass that never started: the worker reads counters for no one.
NOT_PROFILED = {
    "interpret": "not read: interpret mode runs no GPU kernel",
    "off": "not read: switched off (--no-counters)",
    "incorrect": "not read: counters are read for correct verdicts only",
    "untimed": "not read: the task has no timed workload",
    "no_ncu": "not read: Nsight Compute (ncu) is not installed on this worker",
    "unneeded": "not read: no design property of this task has a counter rule, and its "
    "timing needs none (counters: needed)",
}


def pass_failed(note: str) -> bool:
    """Whether `note` is of a counters pass that started and read nothing (killed, its
    call failed, ncu's table missing). Its counter rules then find nothing implemented:
    a pass a submission can make fail must not hand them back to the source."""
    return note.startswith("not read") and note not in NOT_PROFILED.values()


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
