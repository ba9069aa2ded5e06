"""The frozen dataclasses of a task package, as `package.load_task` reads it.

Nothing here imports Django or torch: a `TaskSpec` is what the catalog loader
stores and what the evaluator harness evaluates against, the same type on
both sides.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class Mode(enum.StrEnum):
    """Where an evaluation runs; it picks the task's workloads (`TaskSpec.workloads_for`)."""

    INTERPRET = "interpret"
    CUDA = "cuda"


class Level(enum.StrEnum):
    L1 = "L1"
    L2 = "L2"
    L3 = "L3"


class WorkloadRole(enum.StrEnum):
    """Which part of the protocol a workload takes part in.

    `timed`: checked for correctness and timed (cuda mode).
    `untimed`: checked for correctness only, never timed (cuda mode). The hidden
    cuda workloads, drawn from the task's `HiddenDeclaration` with a deployment's
    secret (taskformat.hidden), have this role; whether a workload is hidden is its
    own flag (`WorkloadSpec.hidden`).
    `check`: small shapes for Triton's CPU interpreter (interpret mode); the
    hidden check workloads are drawn the same way.
    """

    TIMED = "timed"
    UNTIMED = "untimed"
    CHECK = "check"


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float
    # Relative L2 error ‖out − ref‖ / ‖ref‖ must also stay below this: an
    # elementwise atol alone lets a constant output pass where values are small.
    rel_l2: float
    # An absolute floor under that bound, as the error's rms: ‖out − ref‖ may
    # reach abs_l2·√n however small ‖ref‖ is, for an output that honest
    # arithmetic can cancel to near zero. 0 (the default): no floor. A constant
    # output still fails wherever the reference varies by more than abs_l2.
    abs_l2: float = 0.0
    # An elementwise allowance as a share of the reference output's RMS, beside
    # atol: for outputs whose elements honest arithmetic can cancel from terms
    # far larger than themselves (a block-scaled fp8 GEMM accumulates each block
    # at the tensor cores' precision). 0 (the default): none.
    atol_rms: float = 0.0


# The matrix units whose rate the worker measures (`peak_tflops_<dtype>` in its
# ceilings): a workload's FLOPs count at the rate of the one that does its work.
COMPUTE_DTYPES = ("bf16", "fp8")
DEFAULT_COMPUTE_DTYPE = "bf16"


@dataclass(frozen=True)
class WorkloadSpec:
    name: str
    role: WorkloadRole
    params: dict[str, Any]
    hidden: bool = False
    flops: float = 0.0
    bytes: float = 0.0
    flops_formula: str = ""
    bytes_formula: str = ""
    compute_dtype: str = DEFAULT_COMPUTE_DTYPE


@dataclass(frozen=True)
class ParamRule:
    """How one parameter of a hidden workload is drawn (docs/task-format.md).

    Exactly one form: a fixed `value`; one of `choice`; or an integer between
    `low` and `high` (numbers, or formulas over the parameters drawn before
    it), a multiple of `multiple_of` (a number or formula), never a multiple
    of `not_multiple_of`, odd, or prime.
    """

    name: str
    value: Any = None
    choice: tuple[Any, ...] = ()
    low: int | str | None = None
    high: int | str | None = None
    multiple_of: int | str | None = None
    not_multiple_of: int | None = None
    odd: bool = False
    prime: bool = False

    @property
    def is_range(self) -> bool:
        return self.low is not None


@dataclass(frozen=True)
class HiddenDraw:
    """`count` hidden workloads drawn by the same rules."""

    params: tuple[ParamRule, ...]
    count: int = 1


@dataclass(frozen=True)
class HiddenDeclaration:
    """How a task's hidden workloads are drawn, per mode; never the workloads themselves."""

    cuda: tuple[HiddenDraw, ...] = ()
    interpret: tuple[HiddenDraw, ...] = ()

    def draws_for(self, mode: Mode) -> tuple[HiddenDraw, ...]:
        return self.interpret if mode is Mode.INTERPRET else self.cuda

    def count(self, mode: Mode) -> int:
        return sum(d.count for d in self.draws_for(mode))


@dataclass(frozen=True)
class GuidanceSpec:
    level: Level
    text: str
    depends_on: tuple[Level, ...] = ()


@dataclass(frozen=True)
class PropertySpec:
    key: str
    level: Level
    title: str
    description: str
    weight: float
    depends_on: tuple[str, ...] = ()
    detector: dict[str, Any] = field(default_factory=lambda: {"kind": "manual"})
    counters: dict[str, Any] | None = None


@dataclass(frozen=True)
class TaskSpec:
    slug: str
    title: str
    category: str
    statement: str
    tolerances: dict[str, Tolerance]
    forbidden_ops: tuple[str, ...]
    workloads: tuple[WorkloadSpec, ...]
    guidance: tuple[GuidanceSpec, ...]
    properties: tuple[PropertySpec, ...]
    reference_source: str
    expert_source: str
    # How the hidden workloads are drawn; `workloads` holds drawn ones only
    # after taskformat.hidden.task_with_hidden (never from a package on disk).
    hidden: HiddenDeclaration = HiddenDeclaration()
    inplace: bool = False
    # Optional baseline.py: what speedups are measured against (its `Model`,
    # on reference.py's inputs) where the reference is not the fastest
    # library code; correctness is always against reference.py.
    baseline_source: str = ""
    seeds: int = 3
    # aten ops beyond allocation, views, copies, fills and casts that this
    # task lets a submission call (evaluator.harness.honesty.ALLOWED_OPS is the base list).
    allowed_ops: tuple[str, ...] = ()
    notes: str = ""
    directory: str = ""

    def workloads_for(self, mode: Mode) -> tuple[WorkloadSpec, ...]:
        if mode is Mode.INTERPRET:
            return tuple(w for w in self.workloads if w.role is WorkloadRole.CHECK)
        return tuple(w for w in self.workloads if w.role is not WorkloadRole.CHECK)

    def tolerance_for(self, dtype: str) -> Tolerance:
        try:
            return self.tolerances[dtype]
        except KeyError:
            return self.tolerances["default"]
