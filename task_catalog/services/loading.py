"""Writes of the task catalog: loading packages from disk, new versions, export.

What is measured (reference, expert, tolerances, forbidden ops, inplace, seeds
and every workload) is hashed; a different hash makes a new `TaskVersion`, so
results always keep the exact content they were measured against. What is read
(title, statement, guidance, properties) is edited in place on the `Task`;
guidance and properties are also kept as guidance versions (`guidance.py`), and
a load never overwrites an admin's newer guidance without saying so.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.db.models import Max

from taskformat.formula import FormulaError, evaluate_formula
from taskformat.hidden import (
    HiddenDeclarationError,
    hidden_declaration_dict,
    hidden_declaration_parse,
)
from taskformat.package import (
    MEASURED_FIELDS,
    WORKLOAD_FIELDS,
    TaskPackageError,
    compute_dtype_validate,
    iter_task_dirs,
    load_task,
    measured_content,
    measured_content_hash,
)
from taskformat.spec import DEFAULT_COMPUTE_DTYPE, TaskSpec, WorkloadRole

from ..models import DesignProperty, Guidance, GuidanceVersion, Task, TaskVersion, Workload
from .guidance import guidance_content_build, guidance_content_hash, guidance_version_record


class LoadAction:
    CREATED = "created"
    NEW_VERSION = "new version"
    SWITCHED = "switched to an existing version"
    UNCHANGED = "unchanged"


@dataclass(frozen=True)
class TaskLoadResult:
    slug: str
    action: str
    version: int
    # What happened to the guidance and properties: a sentence (GuidanceOutcome).
    guidance: str = ""
    # The disk's guidance was not loaded because an admin's edit is newer.
    guidance_kept: bool = False

    def __str__(self) -> str:
        head = f"{self.slug}: {self.action} (v{self.version})"
        return f"{head}; {self.guidance}" if self.guidance else head


@dataclass
class CatalogLoadReport:
    directory: Path
    results: list[TaskLoadResult] = field(default_factory=list)

    def count(self, action: str) -> int:
        return sum(1 for r in self.results if r.action == action)


# --- measured content -------------------------------------------------------


def _measured_from_version(version: TaskVersion) -> dict[str, Any]:
    return {
        "reference_source": version.reference_source,
        "expert_source": version.expert_source,
        "tolerances": version.tolerances,
        "forbidden_ops": list(version.forbidden_ops),
        "inplace": version.inplace,
        "seeds": version.seeds,
        "workloads": [
            {key: getattr(w, key) for key in WORKLOAD_FIELDS} for w in version.workloads.all()
        ],
        "baseline_source": version.baseline_source,
        "allowed_ops": list(version.allowed_ops),
        "hidden_draws": version.hidden_draws,
    }


def _workload_normalize(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A workload dict from the admin: formulas win over numbers, as on disk."""
    unknown = set(raw) - set(WORKLOAD_FIELDS) - {"position"}
    if unknown:
        raise ValidationError(f"workload {raw.get('name')!r}: unknown fields {sorted(unknown)}")
    try:
        name, role, params = str(raw["name"]), WorkloadRole(raw["role"]), dict(raw["params"])
    except (KeyError, ValueError, TypeError) as exc:
        raise ValidationError(f"workload {raw!r} needs a name, a valid role and params") from exc
    if role is WorkloadRole.UNTIMED or raw.get("hidden"):
        raise ValidationError(
            f"workload {name}: hidden workloads are not listed; they are drawn from the "
            "version's hidden_draws by each deployment's secret"
        )
    out: dict[str, Any] = {"name": name, "role": str(role), "hidden": False, "params": params}
    for kind in ("flops", "bytes"):
        formula = str(raw.get(f"{kind}_formula") or "")
        try:
            value = evaluate_formula(formula, params) if formula else float(raw.get(kind) or 0)
        except (FormulaError, ValueError, TypeError) as exc:
            raise ValidationError(f"workload {name}: {exc}") from exc
        out[kind], out[f"{kind}_formula"] = float(value), formula
    try:
        out["compute_dtype"] = compute_dtype_validate(
            raw.get("compute_dtype") or DEFAULT_COMPUTE_DTYPE, f"workload {name}"
        )
    except TaskPackageError as exc:
        raise ValidationError(str(exc)) from exc
    return out


def _version_for(task: Task, measured: dict[str, Any]) -> tuple[TaskVersion, str]:
    """The version holding `measured`, made (number + 1) when its hash is new."""
    digest = measured_content_hash(measured)
    current = task.current_version
    if current is not None and current.content_hash == digest:
        return current, LoadAction.UNCHANGED
    existing = task.versions.filter(content_hash=digest).first()
    if existing is not None:
        task.current_version = existing
        task.save(update_fields=["current_version", "updated_at"])
        return existing, LoadAction.SWITCHED

    number = (task.versions.aggregate(n=Max("number"))["n"] or 0) + 1
    version = TaskVersion(
        task=task,
        number=number,
        content_hash=digest,
        **{key: measured[key] for key in MEASURED_FIELDS if key != "workloads"},
    )
    version.full_clean()
    version.save()
    workloads = []
    for position, raw in enumerate(measured["workloads"]):
        workload = Workload(version=version, position=position, **raw)
        # `params` may legitimately be {} (a KernelBench problem without parameters).
        workload.full_clean(exclude=["version", "params"])
        workloads.append(workload)
    Workload.objects.bulk_create(workloads)
    action = LoadAction.CREATED if current is None else LoadAction.NEW_VERSION
    task.current_version = version
    task.save(update_fields=["current_version", "updated_at"])
    return version, action


# --- read (unversioned) content ----------------------------------------------


def _assign(instance: models.Model, values: Mapping[str, Any]) -> bool:
    changed = False
    for key, value in values.items():
        if getattr(instance, key) != value:
            setattr(instance, key, value)
            changed = True
    return changed


def _upsert_children(
    *,
    task: Task,
    model: type[Guidance] | type[DesignProperty],
    key: str,
    rows: Iterable[dict[str, Any]],
) -> None:
    existing = {getattr(obj, key): obj for obj in model.objects.filter(task=task)}
    seen = set()
    for values in rows:
        seen.add(values[key])
        obj = existing.get(values[key])
        if obj is None:
            obj = model(task=task, **values)
        elif not _assign(obj, values):
            continue
        # Guidance text may be empty in a fresh package.
        obj.full_clean(exclude=["text"])
        obj.save()
    stale = [obj.pk for k, obj in existing.items() if k not in seen]
    if stale:
        model.objects.filter(pk__in=stale).delete()


def _task_upsert_from_spec(spec: TaskSpec, *, guidance_from_disk: bool) -> TaskLoadResult:
    with transaction.atomic():
        task = Task.objects.select_for_update().filter(slug=spec.slug).first()
        values = {"title": spec.title, "category": spec.category, "statement": spec.statement}
        if task is None:
            task = Task(slug=spec.slug, **values)
            task.full_clean(exclude=["statement"])
            task.save()
        elif _assign(task, values):
            task.full_clean(exclude=["statement", "current_version"])
            task.save()
        version, action = _version_for(task, measured_content(spec))
        guidance_rows = [
            {"level": str(g.level), "text": g.text, "depends_on": [str(d) for d in g.depends_on]}
            for g in spec.guidance
        ]
        property_rows = [
            {
                "key": p.key,
                "level": str(p.level),
                "title": p.title,
                "description": p.description,
                "weight": p.weight,
                "depends_on": list(p.depends_on),
                "detector": dict(p.detector),
                "counters": dict(p.counters) if p.counters is not None else None,
                "position": position,
            }
            for position, p in enumerate(spec.properties)
        ]
        disk_hash = guidance_content_hash(
            guidance_content_build(guidance=guidance_rows, properties=property_rows)
        )
        kept = _guidance_kept(task=task, disk_hash=disk_hash, from_disk=guidance_from_disk)
        if kept is None:
            _upsert_children(task=task, model=Guidance, key="level", rows=guidance_rows)
            _upsert_children(task=task, model=DesignProperty, key="key", rows=property_rows)
            current, made = guidance_version_record(task=task, source=GuidanceVersion.Source.DISK)
            outcome = (
                f"guidance v{current.number} loaded from disk"
                if made
                else f"guidance unchanged (v{current.number})"
            )
        else:
            outcome = kept
    return TaskLoadResult(
        slug=spec.slug,
        action=action,
        version=version.number,
        guidance=outcome,
        guidance_kept=kept is not None,
    )


def _guidance_kept(*, task: Task, disk_hash: str, from_disk: bool) -> str | None:
    """Why the disk's guidance is not loaded over the database's, or None to load it.

    The database's guidance is kept when an admin edited it last and the disk
    holds either content the task has had before (the admin's edit is newer) or
    new content too (both changed: loaded only when `from_disk` is asked for, as
    a new version, so the admin's stays in the history).
    """
    versions = list(GuidanceVersion.objects.filter(task=task).select_related("author"))
    current = versions[0] if versions else None
    if current is None or current.source != GuidanceVersion.Source.ADMIN:
        return None
    if current.content_hash == disk_hash:
        return None
    by = f" by {current.author.username}" if current.author else ""
    known = [v for v in versions if v.content_hash == disk_hash]
    if known:
        return (
            f"guidance v{current.number} kept (edited in the admin{by}; the disk holds the "
            f"older v{known[0].number}: export_catalog writes the admin's to disk)"
        )
    if from_disk:
        return None
    return (
        f"guidance NOT loaded: v{current.number} was edited in the admin{by} and the disk's "
        "differs too; kept the admin's (load_catalog --guidance-from-disk loads the disk's "
        "as a new version, export_catalog writes the admin's to disk)"
    )


# --- public services -----------------------------------------------------------


def catalog_load(*, directory: Path, guidance_from_disk: bool = False) -> CatalogLoadReport:
    """Upsert every task folder of `directory`; idempotent.

    Every package is parsed before anything is written, so a broken folder
    (TaskPackageError) leaves the database as it was. A task whose guidance an
    admin edited since the last load keeps the admin's (`_guidance_kept`);
    `guidance_from_disk` loads the disk's where both changed.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise TaskPackageError(f"{directory}: no such catalog directory")
    specs = [load_task(path) for path in iter_task_dirs(directory)]
    report = CatalogLoadReport(directory=directory)
    for spec in specs:
        report.results.append(_task_upsert_from_spec(spec, guidance_from_disk=guidance_from_disk))
    return report


def task_version_validate(*, task: Task, **measured_fields: Any) -> dict[str, Any]:
    """The complete, normalised measured content after an edit; ValidationError if invalid.

    Fields not given are copied from the task's current version. Writes nothing.
    """
    unknown = set(measured_fields) - set(MEASURED_FIELDS)
    if unknown:
        raise ValidationError(f"not measured content: {sorted(unknown)}")
    # django-stubs rejects None in an exact lookup; Django makes it IS NULL (no row).
    current = TaskVersion.objects.filter(pk=task.current_version_id).first()  # type: ignore[misc]
    if current is not None:
        measured = _measured_from_version(current)
    else:
        measured = {
            "reference_source": "",
            "expert_source": "",
            "tolerances": {},
            "forbidden_ops": [],
            "inplace": False,
            "seeds": 3,
            "workloads": [],
            "baseline_source": "",
            "allowed_ops": [],
            "hidden_draws": {},
        }
    measured.update(measured_fields)
    if not isinstance(measured["workloads"], list | tuple):
        raise ValidationError("workloads must be a list")
    measured["workloads"] = [_workload_normalize(w) for w in measured["workloads"]]
    if not isinstance(measured["forbidden_ops"], list | tuple):
        raise ValidationError("forbidden_ops must be a list of aten op names")
    measured["forbidden_ops"] = [str(op) for op in measured["forbidden_ops"]]
    # An optional field left empty in a form arrives as None.
    measured["allowed_ops"] = measured["allowed_ops"] or []
    if not isinstance(measured["allowed_ops"], list | tuple):
        raise ValidationError("allowed_ops must be a list of aten op names")
    measured["allowed_ops"] = [str(op) for op in measured["allowed_ops"]]
    measured["baseline_source"] = str(measured["baseline_source"] or "")
    measured["hidden_draws"] = _hidden_draws_normalize(measured["hidden_draws"])
    _tolerances_check(measured["tolerances"])
    names = [w["name"] for w in measured["workloads"]]
    if len(names) != len(set(names)):
        raise ValidationError(f"workload names must be unique, got {names}")
    if not measured["reference_source"].strip():
        raise ValidationError("a version needs a reference.py source")
    return measured


def task_version_update(*, task: Task, **measured_fields: Any) -> TaskVersion:
    """Edit measured content: a changed hash makes a new current version.

    Fields not given are copied from the current version; `workloads` is a list
    of dicts (name, role timed or check, params, flops/bytes or their formulas)
    and `hidden_draws` the declaration the hidden workloads are drawn by. Older
    versions, and the submissions pointing at them, are never touched. The same
    content returns the current version unchanged.
    """
    with transaction.atomic():
        task = Task.objects.select_for_update().get(pk=task.pk)
        measured = task_version_validate(task=task, **measured_fields)
        version, _ = _version_for(task, measured)
    return version


def _hidden_draws_normalize(raw: Any) -> dict[str, Any]:
    """The hidden-workload declaration in its stored form; ValidationError naming the fault."""
    try:
        return hidden_declaration_dict(hidden_declaration_parse(raw or {}))
    except HiddenDeclarationError as exc:
        raise ValidationError(f"hidden_draws: {exc}") from exc


REQUIRED_TOLERANCE = frozenset({"atol", "rtol", "rel_l2"})
OPTIONAL_TOLERANCE = frozenset({"abs_l2", "atol_rms"})


def _tolerances_check(tolerances: Any) -> None:
    if not isinstance(tolerances, dict) or "default" not in tolerances:
        raise ValidationError("tolerances need a 'default' entry (atol, rtol, rel_l2)")
    for dtype, entry in tolerances.items():
        keys = set(entry) if isinstance(entry, dict) else set()
        if not REQUIRED_TOLERANCE <= keys <= REQUIRED_TOLERANCE | OPTIONAL_TOLERANCE:
            raise ValidationError(
                f"tolerances[{dtype!r}] needs exactly atol, rtol and rel_l2 "
                "(and optionally abs_l2, atol_rms)"
            )
        if not all(isinstance(v, int | float) and v >= 0 for v in entry.values()):
            raise ValidationError(f"tolerances[{dtype!r}] values must be non-negative numbers")
