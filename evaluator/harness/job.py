"""What the orchestrator hands the child, and what it records of an evaluation: frozen dataclasses.

`Job` is the child's job file: the mode, the paths and the timing settings,
and no seed or workload (the child asks for each when it is due: protocol.Dealer).
`Plan` is what the Dealer issued, per workload (`PlannedWorkload`), as the
reader of the result pipe and the judge check it. `CleanReference` is what the
clean run (the reference timed in a process that never imports the
submission) reports. Each crosses a process or JSON boundary through
`dataclasses.asdict` and comes back through its `from_dict`, which refuses
unknown keys: a field renamed on one side only fails loudly.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


def _fields_of(cls: type, data: Mapping[str, Any]) -> dict[str, Any]:
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"unknown {cls.__name__} field(s): {', '.join(unknown)}")
    return dict(data)


@dataclass(frozen=True)
class TimingSettings:
    """The timing protocol's settings (docs/evaluator.md, Timing): the defaults are production's."""

    warmup_calls: int = 3
    warmup_s: float = 0.1
    # Timed calls a side, unless the time budget runs out first (checked at
    # the end of each phase, whatever the count).
    max_calls: int = 400
    budget_s: float = 1.5
    # A first phase that outruns the budget on its own ends after this many
    # calls a side (one phase then, so every phase still weighs the same).
    slow_calls: int = 5
    batch_ms: float = 60.0
    batch_memory_bytes: int = 8 * 1024**3
    # Timing phases a workload's calls are split into (up to max_calls /
    # phases calls each), each with new models and a warm-up of its own:
    # a phase draws a state that moves a short call by about 1 µs, so the
    # figure pools forty of them (docs/lab/benchmarks-history.md, series 8 and 9).
    phases: int = 40

    @property
    def calls_per_phase(self) -> int:
        return -(-self.max_calls // self.phases)

    def with_overrides(self, overrides: Mapping[str, float] | None) -> TimingSettings:
        """These settings with `overrides` (for experiments) checked and applied.

        Raises ValueError naming the problem: an unknown key, a value that is
        not a finite number >= 0, or no phase. Each value takes the type of
        the setting it replaces.
        """
        known = {f.name: type(getattr(self, f.name)) for f in dataclasses.fields(self)}
        changes: dict[str, Any] = {}
        for key, value in (overrides or {}).items():
            if key not in known:
                raise ValueError(f"unknown timing setting {key!r}; known: {', '.join(known)}")
            if not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
                raise ValueError(
                    f"timing setting {key} must be a finite number >= 0, not {value!r}"
                )
            changes[key] = known[key](value)
        settings = dataclasses.replace(self, **changes)
        if settings.phases < 1:
            raise ValueError("timing setting phases must be at least 1")
        return settings

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TimingSettings:
        return cls(**_fields_of(cls, data))


@dataclass(frozen=True)
class Job:
    """The child's job file. Paths are as the child sees them (inside the sandbox)."""

    mode: str
    reference: str
    out_dir: str
    inplace: bool
    seeds: int
    timing: TimingSettings
    # "" where the task has no baseline.py: the reference is then timed.
    baseline: str = ""
    # "" in a clean run, which times the baseline alone.
    submission: str = ""
    # Set only by the protocol test, which runs cuda mode's message flow on
    # the CPU with CUDA's timing calls faked.
    device: str = ""
    # A profiling pass (counters.py): one untimed call of each timed workload.
    profile: bool = False

    @property
    def clean(self) -> bool:
        return not self.submission

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Job:
        fields = _fields_of(cls, data)
        fields["timing"] = TimingSettings.from_dict(fields.get("timing", {}))
        return cls(**fields)


@dataclass(frozen=True)
class PlannedWorkload:
    """One workload of the plan; its seeds are filled in by the Dealer's record as issued."""

    name: str
    params: dict[str, Any]
    timed: bool
    hidden: bool
    seeds: tuple[int, ...] = ()
    # The seed a timed call's models are built from: the first correctness seed.
    model_seed: int = 0
    calls: tuple[int, ...] = ()
    samples: tuple[int, ...] = ()
    audits: tuple[int, ...] = ()


@dataclass(frozen=True)
class Plan:
    """What the Dealer issued: the steps in order, and per workload every seed by purpose."""

    workloads: tuple[PlannedWorkload, ...]
    steps: tuple[tuple[str, str], ...]
    seeds: int
    # (host monotonic clock, seed) of every seed, as it was drawn.
    issued_at: tuple[tuple[float, int], ...] = ()
    clean: bool = False

    def workload(self, name: str) -> PlannedWorkload:
        return next(w for w in self.workloads if w.name == name)


@dataclass(frozen=True)
class CleanReference:
    """The clean run's report: the baseline's median per timed workload, and what went wrong."""

    ref_median_ms: dict[str, float] = field(default_factory=dict)
    problem: str = ""
    # Seconds since the clean process timed it, and whether it is a measurement of the
    # same baseline on the same GPU made for an earlier evaluation (cleanreference.REUSE_S).
    age_s: float = 0.0
    reused: bool = False
