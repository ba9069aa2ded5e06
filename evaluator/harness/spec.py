"""The frozen dataclasses that cross the harness boundary.

Nothing here imports Django or torch: a `TaskSpec` is read from a task package
on disk, a `Verdict` is what the orchestrator reaches and what the portal
stores. Both serialise to plain JSON.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import Any

EVALUATOR_VERSION = "0.2.0"


class Status(enum.StrEnum):
    """The verdict of an evaluation. `docs/evaluator.md` explains each one."""

    CORRECT = "correct"
    INCORRECT = "incorrect"
    FLAGGED = "flagged"
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    OUT_OF_MEMORY = "out_of_memory"
    WORKER_ERROR = "worker_error"


class Mode(enum.StrEnum):
    INTERPRET = "interpret"
    CUDA = "cuda"


class Level(enum.StrEnum):
    L1 = "L1"
    L2 = "L2"
    L3 = "L3"


class WorkloadRole(enum.StrEnum):
    """Which part of the protocol a workload takes part in.

    `timed`: the public, timed workloads of the benchmark (cuda mode).
    `hidden`: correctness only, never shown to agents (cuda mode).
    `check`: small shapes for Triton's CPU interpreter (interpret mode);
    a check workload may itself be hidden.
    """

    TIMED = "timed"
    HIDDEN = "hidden"
    CHECK = "check"


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float
    # Relative L2 error ‖out − ref‖ / ‖ref‖ must also stay below this: an
    # elementwise atol alone lets a constant output pass where values are small.
    rel_l2: float


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
    inplace: bool = False
    # Optional baseline.py: what speedups are measured against (its `Model`,
    # on reference.py's inputs) where the reference is not the fastest
    # library code; correctness is always against reference.py.
    baseline_source: str = ""
    seeds: int = 3
    # aten ops beyond allocation, views, copies, fills and casts that this
    # task lets a submission call (honesty.ALLOWED_OPS is the base list).
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


@dataclass(frozen=True)
class Measurement:
    """Device times of one workload, in milliseconds, as timed in one process."""

    median_ms: float
    iqr_ms: float
    min_ms: float
    calls: int
    ref_median_ms: float
    ref_iqr_ms: float
    ref_calls: int
    cold_start_ms: float
    # Minimum, deciles and maximum of the per-call times, for the spread.
    sub_deciles: tuple[float, ...] = ()
    ref_deciles: tuple[float, ...] = ()
    # Per call over a back-to-back batch without flushes: includes launch overhead.
    back_to_back_ms: float | None = None
    # The launch covers (µs) of the last timing phase, sized to how long the
    # host takes to queue each side's call, and the timed calls whose
    # queueing outlasted their cover (their times may hold host time).
    cover_us: float | None = None
    ref_cover_us: float | None = None
    host_bound_calls: int = 0
    ref_host_bound_calls: int = 0

    @property
    def speedup(self) -> float:
        return self.ref_median_ms / self.median_ms if self.median_ms > 0 else 0.0


@dataclass(frozen=True)
class WorkloadResult:
    name: str
    role: WorkloadRole
    hidden: bool
    status: Status
    message: str = ""
    max_abs_err: float | None = None
    rel_err: float | None = None
    measurement: Measurement | None = None
    achieved_tflops: float | None = None
    achieved_tbps: float | None = None
    sol_fraction: float | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        m = self.measurement
        data.pop("measurement")
        data["median_ms"] = m.median_ms if m else None
        data["ref_median_ms"] = m.ref_median_ms if m else None
        data["speedup"] = m.speedup if m else None
        data["timing"] = asdict(m) if m else None
        return data


@dataclass(frozen=True)
class Verdict:
    status: Status
    message: str
    flags: tuple[dict[str, str], ...]
    workloads: tuple[WorkloadResult, ...]
    environment: dict[str, Any]
    log: str
    task: str = ""
    mode: str = ""
    evaluator_version: str = EVALUATOR_VERSION
    wall_seconds: float = 0.0
    # sha256 of the task's measured content (package.measured_content_hash): the
    # catalog version a result belongs to is the one with this hash.
    task_hash: str = ""
    # The log as its owner may read it: what the submission printed before
    # the first hidden workload reached it (redact.py). `log` is all of it.
    public_log: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": str(self.status),
            "message": self.message,
            "flags": [dict(f) for f in self.flags],
            "workloads": [w.to_dict() for w in self.workloads],
            "environment": self.environment,
            "log": self.log,
            "task": self.task,
            "mode": self.mode,
            "evaluator_version": self.evaluator_version,
            "wall_seconds": self.wall_seconds,
            "task_hash": self.task_hash,
            "public_log": self.public_log,
        }


def environment_gpu(environment: Any) -> str:
    """The GPU a verdict's environment names, or '' (the interpreter's 'CPU …' is no GPU)."""
    if not isinstance(environment, dict):
        return ""
    for key in ("gpu", "device"):
        name = str(environment.get(key) or "").strip()
        if name and not name.upper().startswith("CPU"):
            return name
    return ""
