"""KernelBench problem files imported as a catalog namespace of their own (`kb-…` tasks)."""

from __future__ import annotations

from pathlib import Path

from taskformat.kernelbench import kernelbench_package_write, kernelbench_parse

from .loading import CatalogLoadReport, catalog_load


def kernelbench_import(*, path: Path, catalog_dir: Path) -> CatalogLoadReport:
    """Turn every problem file under `path` (a file or a folder, e.g. KernelBench/level1)
    into a task package in `catalog_dir`, then upsert that folder like the catalog
    (idempotent: an unchanged problem is `unchanged`, a changed one a new version).

    Every file is parsed and written before anything reaches the database.
    """
    path = Path(path)
    files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
    problems = [kernelbench_parse(file) for file in files if file.name != "__init__.py"]
    for problem in problems:
        kernelbench_package_write(problem, catalog_dir)
    return catalog_load(directory=catalog_dir)
