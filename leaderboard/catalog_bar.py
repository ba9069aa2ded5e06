"""The catalog's bar for its experts: whether an expert meets it, and what it reaches.

The catalog asks each expert implementation to beat its baseline on the geometric mean
of its timed workloads. Where it cannot, a compute-bound expert (GEMMs, attention,
convolutions: the baseline is a vendor library) meets the bar at 90 % of the baseline's
speed, and a memory-bound expert at 80 % of the measured speed of light on its largest
workload.

Which of the two a task is comes from its workloads as measured, not from a list: a
workload is FLOP-bound when its FLOPs at the measured matrix ceiling of the unit that does
its work (bf16, or fp8 for a workload the task declares so) take longer than its minimum
bytes at the measured bandwidth ceiling (the term that sets its speed of light), and a
task is compute-bound when any of its timed workloads is. Its largest
workload is the one with the longest speed-of-light time.

Standard library only: `bench/baselines_md.py` writes the same sentence from the JSON
verdicts, without Django.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scoring.formulas import task_speedup

LIBRARY_SHARE = 0.9
SOL_SHARE = 0.8


@dataclass(frozen=True)
class BarWorkload:
    """One public timed workload of the expert's verdict."""

    name: str
    speedup: float | None
    median_ms: float | None
    sol_fraction: float | None
    achieved_tflops: float | None
    achieved_tbps: float | None

    @classmethod
    def from_mapping(cls, data: Any) -> BarWorkload:
        """From a verdict's workload (JSON) or anything with the same keys."""

        def number(key: str) -> float | None:
            value = data.get(key)
            if isinstance(value, bool) or not isinstance(value, int | float):
                return None
            return float(value) if math.isfinite(value) else None

        return cls(
            name=str(data.get("name") or ""),
            speedup=number("speedup"),
            median_ms=number("median_ms"),
            sol_fraction=number("sol_fraction"),
            achieved_tflops=number("achieved_tflops"),
            achieved_tbps=number("achieved_tbps"),
        )


@dataclass(frozen=True)
class Ceilings:
    """The device ceilings the speed of light was measured against."""

    tflops: float  # the bf16 matrix rate
    tbps: float
    # Other matrix units' rates (fp8) and the workloads whose FLOPs run on them.
    unit_tflops: Mapping[str, float] = field(default_factory=dict)
    workload_units: Mapping[str, str] = field(default_factory=dict)

    def tflops_for(self, workload: str) -> float | None:
        """The matrix rate of the unit doing `workload`'s work, None where it was not measured."""
        unit = self.workload_units.get(workload, "bf16")
        return self.tflops if unit == "bf16" else self.unit_tflops.get(unit)


@dataclass(frozen=True)
class CatalogBar:
    meets: bool | None  # None: the data cannot tell
    sentence: str


def ceilings_from_environment(environment: Any) -> Ceilings | None:
    """The ceilings a verdict's environment records (`ceilings`, and `compute_dtypes`: the
    unit each workload's FLOPs count against, bf16 where it names none), or None."""
    ceilings = environment.get("ceilings") if isinstance(environment, dict) else None
    if not isinstance(ceilings, dict):
        return None
    tflops, tbps = _positive(ceilings.get("peak_tflops_bf16")), _positive(ceilings.get("peak_tbps"))
    if tflops is None or tbps is None:
        return None
    units = {
        key.removeprefix("peak_tflops_"): rate
        for key, value in ceilings.items()
        if key.startswith("peak_tflops_") and (rate := _positive(value)) is not None
    }
    dtypes = environment.get("compute_dtypes")
    return Ceilings(
        tflops=tflops,
        tbps=tbps,
        unit_tflops={unit: rate for unit, rate in units.items() if unit != "bf16"},
        workload_units=(
            {str(name): str(unit) for name, unit in dtypes.items()}
            if isinstance(dtypes, dict)
            else {}
        ),
    )


def _positive(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and value > 0 else None


def catalog_bar(
    *,
    status: str,
    workloads: Sequence[BarWorkload],
    ceilings: Ceilings | None,
    timed_against: str = "",
) -> CatalogBar:
    """One sentence: whether the expert meets the catalog's bar, with the figures it reaches."""
    if status != "correct":
        return CatalogBar(False, f"Below the catalog's bar: the expert's GPU run is {status}.")
    speedup = task_speedup(workload_speedups=[w.speedup for w in workloads])
    if speedup is None:
        return CatalogBar(None, "Not judged: a timed workload of the expert has no speedup.")
    over = f" over `{timed_against}`" if timed_against else ""
    if speedup > 1:
        sentence = f"Meets the catalog's bar: beats its baseline (geomean {speedup:.2f}×{over})."
        return CatalogBar(True, sentence)
    ratio = f"{speedup:.2f}× of its baseline's speed" + (
        f" (`{timed_against}`)" if timed_against else ""
    )
    largest = _largest_sol(workloads, ceilings)
    bound_by_flops = compute_bound(workloads, ceilings)
    if bound_by_flops is None or largest is None:
        return CatalogBar(
            None,
            f"Not judged: {ratio}, and no speed of light was measured to tell a compute-bound "
            "task from a memory-bound one.",
        )
    if bound_by_flops:
        if speedup >= LIBRARY_SHARE:
            return CatalogBar(
                True,
                f"Meets the catalog's bar: {ratio}, at least the {LIBRARY_SHARE:.0%} of the "
                "library's speed asked of a compute-bound task.",
            )
        return CatalogBar(
            False,
            f"Below the catalog's bar: {ratio}, under the {LIBRARY_SHARE:.0%} asked of a "
            f"compute-bound task; {largest[1]}.",
        )
    if largest[0] >= SOL_SHARE:
        return CatalogBar(
            True,
            f"Meets the catalog's bar: {largest[1]}, at least the {SOL_SHARE:.0%} asked of a "
            f"memory-bound task; {ratio}.",
        )
    return CatalogBar(
        False,
        f"Below the catalog's bar: {ratio}; {largest[1]}, under the {SOL_SHARE:.0%} asked of "
        "a memory-bound task.",
    )


def _flop_bound(workload: BarWorkload, ceilings: Ceilings) -> bool | None:
    tflops = ceilings.tflops_for(workload.name)
    if workload.achieved_tflops is None or workload.achieved_tbps is None or tflops is None:
        return None
    return workload.achieved_tflops / tflops > workload.achieved_tbps / ceilings.tbps


def compute_bound(workloads: Sequence[BarWorkload], ceilings: Ceilings | None) -> bool | None:
    """Whether any workload is bound by its FLOPs at the measured ceilings (a compute-bound
    task), or None where a ceiling or a workload's rate is missing."""
    if ceilings is None:
        return None
    bounds = [_flop_bound(w, ceilings) for w in workloads]
    return None if None in bounds else any(bounds)


def _largest_sol(
    workloads: Sequence[BarWorkload], ceilings: Ceilings | None
) -> tuple[float, str] | None:
    """The speed-of-light fraction on the workload with the longest speed-of-light time,
    and the words that say so."""
    if ceilings is None:
        return None
    timed = [w for w in workloads if w.sol_fraction is not None and w.median_ms is not None]
    if not timed or len(timed) != len(workloads):
        return None
    largest = max(timed, key=lambda w: (w.sol_fraction or 0) * (w.median_ms or 0))
    fraction = largest.sol_fraction or 0.0
    by = "FLOPs" if _flop_bound(largest, ceilings) else "bytes"
    return fraction, (
        f"{fraction:.0%} of speed of light on its largest workload by {by} (`{largest.name}`)"
    )
