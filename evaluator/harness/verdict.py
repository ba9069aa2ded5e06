"""The frozen dataclasses of a verdict, as they cross the harness boundary.

Nothing here imports Django or torch: a `Verdict` is what the orchestrator
reaches and what the portal stores; it serialises to plain JSON. The task it
is measured against is a `taskformat.spec.TaskSpec`.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import asdict, dataclass
from typing import Any

from taskformat.spec import WorkloadRole

EVALUATOR_VERSION = "0.6.10"


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
    # The reference's median timed again in a process that never imported the
    # submission. The speedup is taken against the faster of the two, so
    # nothing a submission does to the reference beside it can raise its score.
    clean_ref_median_ms: float | None = None

    @property
    def baseline_ms(self) -> float:
        """The reference time the speedup is measured against."""
        if self.clean_ref_median_ms is not None and self.clean_ref_median_ms > 0:
            return min(self.ref_median_ms, self.clean_ref_median_ms)
        return self.ref_median_ms

    @property
    def reference_host_bound(self) -> bool:
        """More than half the reference's timed calls outlasted their launch cover: its
        time is its host's (launches, copies to the host) as much as its GPU's."""
        return 2 * self.ref_host_bound_calls > self.ref_calls

    @property
    def speedup(self) -> float:
        return self.baseline_ms / self.median_ms if self.median_ms > 0 else 0.0

    @classmethod
    def from_dict(cls, data: Any) -> Measurement | None:
        """A workload's `timing` as the verdict JSON has it; None if it is not a whole one."""
        if not isinstance(data, dict):
            return None
        known = {f.name: f for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        for name, value in data.items():
            if name not in known or value is None:
                continue
            if name.endswith("_deciles"):
                if not isinstance(value, list | tuple) or not all(map(_is_number, value)):
                    return None
                values[name] = tuple(float(v) for v in value)
            elif _is_number(value):
                values[name] = int(value) if name.endswith("calls") else float(value)
            else:
                return None
        required = {n for n, f in known.items() if f.default is dataclasses.MISSING}
        return cls(**values) if required <= set(values) else None


def reference_host_bound_calls(timing: Any) -> tuple[int, int] | None:
    """(host-bound calls, calls) of a workload's `timing` whose reference was mostly bound
    by its host (`Measurement.reference_host_bound`), else None: its time, and the speedup,
    depend on the host's CPU as well as the GPU."""
    m = Measurement.from_dict(timing)
    if m is None or not m.reference_host_bound:
        return None
    return m.ref_host_bound_calls, m.ref_calls


@dataclass(frozen=True)
class WorkloadOutcome:
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
    # Hardware counters of one untimed call (counters.py), for timed workloads
    # of a correct cuda-mode verdict; None where none were read.
    counters: dict[str, Any] | None = None

    @property
    def speedup(self) -> float | None:
        return self.measurement.speedup if self.measurement else None

    @classmethod
    def from_dict(cls, data: Any) -> WorkloadOutcome:
        """One workload of the verdict JSON (`to_dict`). Raises ValueError if it is not one."""
        if not isinstance(data, dict) or not data.get("name"):
            raise ValueError("a workload has no name")
        try:
            status = Status(str(data.get("status")))
        except ValueError:
            raise ValueError(
                f"workload {data['name']!r} has an unknown status {data.get('status')!r}"
            ) from None
        return cls(
            name=str(data["name"]),
            role=_role(data.get("role")),
            hidden=bool(data.get("hidden", False)),
            status=status,
            message=str(data.get("message") or ""),
            max_abs_err=_number_or_none(data.get("max_abs_err")),
            rel_err=_number_or_none(data.get("rel_err")),
            measurement=Measurement.from_dict(data.get("timing")),
            achieved_tflops=_number_or_none(data.get("achieved_tflops")),
            achieved_tbps=_number_or_none(data.get("achieved_tbps")),
            sol_fraction=_number_or_none(data.get("sol_fraction")),
            counters=data["counters"] if isinstance(data.get("counters"), dict) else None,
        )

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        m = self.measurement
        data.pop("measurement")
        data["median_ms"] = m.median_ms if m else None
        data["ref_median_ms"] = m.baseline_ms if m else None
        data["speedup"] = m.speedup if m else None
        data["timing"] = asdict(m) if m else None
        return data


@dataclass(frozen=True)
class Verdict:
    status: Status
    message: str
    flags: tuple[dict[str, str], ...]
    workloads: tuple[WorkloadOutcome, ...]
    environment: dict[str, Any]
    log: str
    task: str = ""
    mode: str = ""
    evaluator_version: str = EVALUATOR_VERSION
    wall_seconds: float = 0.0
    # sha256 of the task's measured content (taskformat.package.measured_content_hash): the
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


def verdict_from_dict(data: Any) -> Verdict:
    """The verdict JSON that `python -m evaluator check --json` prints, read back.

    Raises ValueError naming what is wrong: not an object, an unknown status,
    no workload list, a workload without a name or with an unknown status, a
    workload named twice. Numbers stay as printed (non-finite ones included):
    whoever stores them decides what a NaN becomes.
    """
    if not isinstance(data, dict):
        raise ValueError("the verdict is not a JSON object")
    try:
        status = Status(str(data.get("status")))
    except ValueError:
        raise ValueError(f"unknown status {data.get('status')!r}") from None
    raw_workloads = data.get("workloads") or []
    if not isinstance(raw_workloads, list):
        raise ValueError("the verdict has no workload list")
    workloads = []
    for position, raw in enumerate(raw_workloads):
        if not isinstance(raw, dict) or not raw.get("name"):
            raise ValueError(f"workload #{position} has no name")
        workloads.append(WorkloadOutcome.from_dict(raw))
    names = [w.name for w in workloads]
    if len(names) != len(set(names)):
        raise ValueError(f"a workload name is repeated: {names}")
    environment = data.get("environment")
    return Verdict(
        status=status,
        message=str(data.get("message") or ""),
        flags=tuple(
            {"check": str(f.get("check", "")), "detail": str(f.get("detail", ""))}
            for f in data.get("flags") or []
            if isinstance(f, dict)
        ),
        workloads=tuple(workloads),
        environment=environment if isinstance(environment, dict) else {},
        log=str(data.get("log") or ""),
        task=str(data.get("task") or ""),
        mode=str(data.get("mode") or ""),
        evaluator_version=str(data.get("evaluator_version") or ""),
        wall_seconds=_number_or_none(data.get("wall_seconds")) or 0.0,
        task_hash=str(data.get("task_hash") or ""),
        public_log=str(data.get("public_log") or ""),
    )


# Role names an older evaluator printed, and what they are called now: `untimed` was
# `hidden` before evaluator 0.5.0.
_LEGACY_ROLES = {"hidden": WorkloadRole.UNTIMED}


def _role(value: Any) -> WorkloadRole:
    if isinstance(value, str) and value in _LEGACY_ROLES:
        return _LEGACY_ROLES[value]
    try:
        return WorkloadRole(value)
    except ValueError:
        # A role this evaluator does not know is kept as printed, for staff to see.
        return str(value or "")  # type: ignore[return-value]


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _number_or_none(value: Any) -> float | None:
    return float(value) if _is_number(value) else None


def environment_gpu(environment: Any) -> str:
    """The GPU a verdict's environment names, or '' (the interpreter's 'CPU …' is no GPU)."""
    if not isinstance(environment, dict):
        return ""
    for key in ("gpu", "device"):
        name = str(environment.get(key) or "").strip()
        if name and not name.upper().startswith("CPU"):
            return name
    return ""
