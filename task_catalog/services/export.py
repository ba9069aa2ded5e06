"""Writing the catalog back to disk in the task-package format (docs/task-format.md).

The worker uses `task_version_write_package` to hand the evaluator the exact
task version a submission was made against; `export_catalog` writes them all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tomli_w

from taskformat.spec import DEFAULT_COMPUTE_DTYPE

from ..models import Level, Task, TaskVersion, Workload


def task_version_write_package(*, version: TaskVersion, directory: Path) -> Path:
    """Write `version` (and its task's read content) as directory/<slug>/ on disk."""
    task = version.task
    folder = Path(directory) / task.slug
    (folder / "guidance").mkdir(parents=True, exist_ok=True)
    workloads = list(version.workloads.all())
    guidance = {g.level: g for g in task.guidance.all()}
    meta: dict[str, Any] = {
        "slug": task.slug,
        "title": task.title,
        "category": task.category,
        "seeds": version.seeds,
        "inplace": version.inplace,
        "forbidden_ops": list(version.forbidden_ops),
        "tolerances": version.tolerances,
        "workloads": [_workload_toml(w) for w in workloads if w.role == Workload.Role.TIMED],
        # A version stored before hidden workloads were drawn may still list some: never
        # written (the package format has no place for them).
        "checks": [
            _workload_toml(w) for w in workloads if w.role == Workload.Role.CHECK and not w.hidden
        ],
        "hidden": version.hidden_draws,
        "guidance": {
            level: {"depends_on": list(guidance[level].depends_on)}
            for level in Level.values
            if level in guidance
        },
        "properties": [
            {
                "key": p.key,
                "level": p.level,
                "title": p.title,
                "description": p.description,
                "weight": p.weight,
                "depends_on": list(p.depends_on),
                "detector": p.detector or {"kind": "manual"},
                **({"counters": p.counters} if p.counters else {}),
            }
            for p in task.properties.all()
        ],
    }
    if not meta["hidden"]:
        del meta["hidden"]
    if version.allowed_ops:
        meta["allowed_ops"] = list(version.allowed_ops)
    (folder / "task.toml").write_text(tomli_w.dumps(meta))
    (folder / "statement.md").write_text(task.statement)
    (folder / "reference.py").write_text(version.reference_source)
    (folder / "expert.py").write_text(version.expert_source)
    if version.baseline_source:
        (folder / "baseline.py").write_text(version.baseline_source)
    for level in Level.values:
        text = guidance[level].text if level in guidance else ""
        (folder / "guidance" / f"{level}.md").write_text(text)
    return folder


def _workload_toml(workload: Workload) -> dict[str, Any]:
    return {
        "name": workload.name,
        "params": workload.params,
        "flops": workload.flops_formula or workload.flops,
        "bytes": workload.bytes_formula or workload.bytes,
        **(
            {"compute_dtype": workload.compute_dtype}
            if workload.compute_dtype != DEFAULT_COMPUTE_DTYPE
            else {}
        ),
    }


def catalog_export(*, directory: Path) -> list[Path]:
    """Write every task's current version as a package under `directory`."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tasks = (
        Task.objects.filter(current_version__isnull=False)
        .select_related("current_version")
        .prefetch_related("current_version__workloads", "guidance", "properties")
    )
    folders = []
    for task in tasks:
        version = task.current_version
        if version is None:  # excluded by the query's current_version__isnull=False
            raise RuntimeError(f"Task {task.slug!r} has no current version.")
        version.task = task  # keeps the prefetched guidance and properties
        folders.append(task_version_write_package(version=version, directory=directory))
    return folders
