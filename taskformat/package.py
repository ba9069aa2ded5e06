"""Reading a task package from disk (SPEC §3, format in `docs/task-format.md`).

A package is one folder:

    <slug>/task.toml        metadata, tolerances, workloads, guidance deps, properties
    <slug>/statement.md     the task statement (markdown)
    <slug>/reference.py     KernelBench-style Model / get_inputs / get_init_inputs
    <slug>/baseline.py      optional: the Model speedups are measured against
    <slug>/expert.py        the expert ModelNew
    <slug>/guidance/L1.md, L2.md, L3.md
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from . import detectors
from .counter_rules import CounterRuleError, counter_rule_validate
from .formula import FormulaError, evaluate_formula
from .hidden import HiddenDeclarationError, hidden_declaration_dict, hidden_declaration_parse
from .spec import (
    COMPUTE_DTYPES,
    DEFAULT_COMPUTE_DTYPE,
    GuidanceSpec,
    Level,
    PropertySpec,
    TaskSpec,
    Tolerance,
    WorkloadRole,
    WorkloadSpec,
)

DEFAULT_CATALOG_DIR = Path(__file__).resolve().parent.parent / "catalog"

# What is measured: a change to any of it makes a new catalog version, and the
# verdict names the hash of the content it was measured against.
MEASURED_FIELDS = (
    "reference_source",
    "expert_source",
    "tolerances",
    "forbidden_ops",
    "inplace",
    "seeds",
    "workloads",
    "baseline_source",
    "allowed_ops",
    "hidden_draws",
)
# Measured fields a package may leave out: hashed only when set, so a task
# without them keeps the hash it had before they existed.
OPTIONAL_FIELDS = ("baseline_source", "allowed_ops", "hidden_draws")
WORKLOAD_FIELDS = (
    "name",
    "role",
    "hidden",
    "params",
    "flops",
    "bytes",
    "flops_formula",
    "bytes_formula",
    "compute_dtype",
)


def measured_content(spec: TaskSpec) -> dict[str, Any]:
    """The measured content of a task package, in the catalog database's field names.

    The hidden workloads count by their declaration (`hidden_draws`), never by the
    workloads a secret drew from it: every deployment measures the same version.
    """
    return {
        "reference_source": spec.reference_source,
        "expert_source": spec.expert_source,
        "tolerances": {dtype: _tolerance_fields(t) for dtype, t in spec.tolerances.items()},
        "forbidden_ops": list(spec.forbidden_ops),
        "inplace": bool(spec.inplace),
        "seeds": int(spec.seeds),
        "workloads": [
            {
                "name": w.name,
                "role": str(w.role),
                "hidden": bool(w.hidden),
                "params": dict(w.params),
                "flops": float(w.flops),
                "bytes": float(w.bytes),
                "flops_formula": w.flops_formula,
                "bytes_formula": w.bytes_formula,
                "compute_dtype": w.compute_dtype,
            }
            for w in spec.workloads
            if not w.hidden
        ],
        "baseline_source": spec.baseline_source,
        "allowed_ops": list(spec.allowed_ops),
        "hidden_draws": hidden_declaration_dict(spec.hidden),
    }


def _tolerance_fields(tolerance: Tolerance) -> dict[str, float]:
    """A tolerance's measured fields; `abs_l2` only where set, so a task without a floor
    keeps the hash it had before the field existed."""
    fields = {"atol": tolerance.atol, "rtol": tolerance.rtol, "rel_l2": tolerance.rel_l2}
    optional = {"abs_l2": tolerance.abs_l2, "atol_rms": tolerance.atol_rms}
    return fields | {name: value for name, value in optional.items() if value}


def measured_content_hash(measured: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON of the measured content (key order irrelevant)."""
    canonical = {
        key: measured[key]
        for key in MEASURED_FIELDS
        if key not in OPTIONAL_FIELDS or measured.get(key)
    }
    canonical["workloads"] = [_workload_canonical(w) for w in measured["workloads"]]
    canonical["forbidden_ops"] = list(canonical["forbidden_ops"])
    payload = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(payload.encode()).hexdigest()


def _workload_canonical(workload: Mapping[str, Any]) -> dict[str, Any]:
    """A workload's hashed fields; the default compute dtype is left out, so a task that
    declares none keeps the hash it had before the field existed."""
    canonical = {key: workload.get(key) for key in WORKLOAD_FIELDS}
    if canonical["compute_dtype"] in (None, DEFAULT_COMPUTE_DTYPE):
        del canonical["compute_dtype"]
    return canonical


def compute_dtype_validate(value: Any, where: str) -> str:
    """`value` as a compute dtype (`COMPUTE_DTYPES`); TaskPackageError naming `where` if not."""
    if value not in COMPUTE_DTYPES:
        raise TaskPackageError(
            f"{where}: compute_dtype {value!r} is none of {', '.join(COMPUTE_DTYPES)}"
        )
    return str(value)


DETECTOR_KINDS = detectors.KINDS


class TaskPackageError(ValueError):
    """A task package on disk is missing a file or has an invalid field."""


def iter_task_dirs(catalog_dir: Path) -> Iterator[Path]:
    for child in sorted(Path(catalog_dir).iterdir()):
        if (child / "task.toml").is_file():
            yield child


def find_task_dir(catalog_dir: Path, slug: str) -> Path:
    path = Path(catalog_dir) / slug
    if not (path / "task.toml").is_file():
        known = ", ".join(p.name for p in iter_task_dirs(catalog_dir)) or "none"
        raise TaskPackageError(f"unknown task {slug!r} in {catalog_dir} (known: {known})")
    return path


def load_task(path: Path) -> TaskSpec:
    path = Path(path)
    try:
        meta = tomllib.loads((path / "task.toml").read_text())
    except FileNotFoundError as exc:
        raise TaskPackageError(f"{path}: no task.toml") from exc
    except tomllib.TOMLDecodeError as exc:
        raise TaskPackageError(f"{path / 'task.toml'}: {exc}") from exc

    def need(key: str) -> Any:
        if key not in meta:
            raise TaskPackageError(f"{path / 'task.toml'}: missing required field {key!r}")
        return meta[key]

    slug = need("slug")
    if slug != path.name:
        raise TaskPackageError(f"{path}: slug {slug!r} differs from the folder name")
    tolerances = {
        dtype: Tolerance(
            atol=float(t["atol"]),
            rtol=float(t["rtol"]),
            rel_l2=float(t["rel_l2"]),
            abs_l2=float(t.get("abs_l2", 0.0)),
            atol_rms=float(t.get("atol_rms", 0.0)),
        )
        for dtype, t in need("tolerances").items()
    }
    if "default" not in tolerances:
        raise TaskPackageError(f"{path / 'task.toml'}: tolerances need a 'default' entry")

    compute = compute_dtype_validate(
        meta.get("compute_dtype", DEFAULT_COMPUTE_DTYPE), str(path / "task.toml")
    )
    workloads = [
        *(_workload(path, w, WorkloadRole.TIMED, compute) for w in need("workloads")),
        *(_workload(path, w, WorkloadRole.CHECK, compute) for w in need("checks")),
    ]
    names = [w.name for w in workloads]
    if len(names) != len(set(names)):
        raise TaskPackageError(f"{path}: workload names must be unique, got {names}")

    guidance = []
    for level in Level:
        text_file = path / "guidance" / f"{level}.md"
        if not text_file.is_file():
            raise TaskPackageError(f"{path}: missing guidance/{level}.md")
        deps = meta.get("guidance", {}).get(str(level), {}).get("depends_on", [])
        guidance.append(
            GuidanceSpec(level=level, text=text_file.read_text(), depends_on=_levels(path, deps))
        )

    properties = tuple(_property(path, p) for p in meta.get("properties", []))
    _check_dependencies(path, guidance, properties)
    try:
        hidden = hidden_declaration_parse(meta.get("hidden"))
    except HiddenDeclarationError as exc:
        raise TaskPackageError(f"{path / 'task.toml'}: {exc}") from exc

    return TaskSpec(
        slug=slug,
        title=need("title"),
        category=need("category"),
        statement=_read(path, "statement.md"),
        tolerances=tolerances,
        forbidden_ops=tuple(meta.get("forbidden_ops", [])),
        allowed_ops=tuple(meta.get("allowed_ops", [])),
        workloads=tuple(workloads),
        hidden=hidden,
        guidance=tuple(guidance),
        properties=properties,
        reference_source=_read(path, "reference.py"),
        expert_source=_read(path, "expert.py"),
        baseline_source=_optional(path, "baseline.py"),
        inplace=bool(meta.get("inplace", False)),
        seeds=int(meta.get("seeds", 3)),
        notes=meta.get("notes", ""),
        directory=str(path),
    )


def _check_dependencies(
    path: Path, guidance: list[GuidanceSpec], properties: tuple[PropertySpec, ...]
) -> None:
    """A property builds on existing properties of its own or a lower level, without a
    cycle; a guidance level builds on lower levels only, and on exactly the lower levels
    that its properties name (when they name any)."""
    rank = {level: i for i, level in enumerate(Level)}
    level_of = {p.key: p.level for p in properties}
    for prop in properties:
        missing = set(prop.depends_on) - set(level_of)
        if missing:
            raise TaskPackageError(f"{path}: property {prop.key} depends on unknown {missing}")
        higher = [d for d in prop.depends_on if rank[level_of[d]] > rank[prop.level]]
        if higher:
            raise TaskPackageError(
                f"{path}: property {prop.key} ({prop.level}) depends on {higher} of a higher level"
            )
    edges = {p.key: p.depends_on for p in properties}
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(key: str, trail: tuple[str, ...]) -> None:
        if state.get(key) == 2:
            return
        if state.get(key) == 1:
            cycle = " -> ".join((*trail[trail.index(key) :], key))
            raise TaskPackageError(f"{path}: property dependencies form a cycle: {cycle}")
        state[key] = 1
        for dep in edges[key]:
            visit(dep, (*trail, key))
        state[key] = 2

    for key in edges:
        visit(key, ())
    for g in guidance:
        if any(rank[d] >= rank[g.level] for d in g.depends_on):
            raise TaskPackageError(
                f"{path}: guidance {g.level} may depend on lower levels only, got "
                f"{[str(d) for d in g.depends_on]}"
            )
        named = {
            level_of[d]
            for p in properties
            if p.level is g.level
            for d in p.depends_on
            if rank[level_of[d]] < rank[g.level]
        }
        if named and named != set(g.depends_on):
            raise TaskPackageError(
                f"{path}: guidance {g.level} depends on {sorted(map(str, g.depends_on))} but "
                f"its properties build on {sorted(map(str, named))}"
            )


def _read(path: Path, name: str) -> str:
    try:
        return (path / name).read_text()
    except FileNotFoundError as exc:
        raise TaskPackageError(f"{path}: missing {name}") from exc


def _optional(path: Path, name: str) -> str:
    file = path / name
    return file.read_text() if file.is_file() else ""


def _levels(path: Path, values: list[str]) -> tuple[Level, ...]:
    try:
        return tuple(Level(v) for v in values)
    except ValueError as exc:
        raise TaskPackageError(f"{path}: unknown guidance level in {values}") from exc


def _workload(
    path: Path, raw: dict[str, Any], role: WorkloadRole, compute_dtype: str
) -> WorkloadSpec:
    """One listed (public) workload; `compute_dtype` is the task's, which the workload's own
    overrides."""
    try:
        name, params = raw["name"], dict(raw["params"])
    except KeyError as exc:
        raise TaskPackageError(f"{path}: a {role} workload lacks {exc.args[0]!r}") from exc
    if "hidden" in raw:
        raise TaskPackageError(
            f"{path}: {role} workload {name} says `hidden`: every listed workload is public; "
            "hidden ones are drawn from [[hidden.cuda]] and [[hidden.interpret]] "
            "(docs/task-format.md)"
        )
    flops_formula = str(raw.get("flops", "0"))
    bytes_formula = str(raw.get("bytes", "0"))
    try:
        flops = evaluate_formula(flops_formula, params)
        nbytes = evaluate_formula(bytes_formula, params)
    except FormulaError as exc:
        raise TaskPackageError(f"{path}: workload {name}: {exc}") from exc
    if role is WorkloadRole.TIMED and nbytes <= 0:
        raise TaskPackageError(f"{path}: timed workload {name} needs a positive byte count")
    return WorkloadSpec(
        name=name,
        role=role,
        params=params,
        flops=flops,
        bytes=nbytes,
        flops_formula=flops_formula,
        bytes_formula=bytes_formula,
        compute_dtype=compute_dtype_validate(
            raw.get("compute_dtype", compute_dtype), f"{path}: workload {name}"
        ),
    )


def _property(path: Path, raw: dict[str, Any]) -> PropertySpec:
    try:
        detector = dict(raw.get("detector", {"kind": "manual"}))
        if detector.get("kind") not in DETECTOR_KINDS:
            raise TaskPackageError(
                f"{path}: property {raw.get('key')}: detector kind must be one of "
                f"{sorted(DETECTOR_KINDS)}"
            )
        counters = raw.get("counters")
        if counters is not None:
            try:
                counter_rule_validate(counters)
            except CounterRuleError as exc:
                raise TaskPackageError(f"{path}: property {raw.get('key')}: {exc}") from exc
            counters = dict(counters)
        return PropertySpec(
            key=raw["key"],
            level=Level(raw["level"]),
            title=raw["title"],
            description=raw.get("description", ""),
            weight=float(raw.get("weight", 1.0)),
            depends_on=tuple(raw.get("depends_on", [])),
            detector=detector,
            counters=counters,
        )
    except (KeyError, ValueError) as exc:
        if isinstance(exc, TaskPackageError):
            raise
        raise TaskPackageError(f"{path}: invalid property {raw!r}: {exc}") from exc
