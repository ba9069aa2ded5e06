"""The catalog with fewer check workloads, for the tests whose subject is the plumbing.

A test about the upload, the queue, a worker's death or a run's pages needs real
verdicts from the real evaluator, but not every check shape of every task: those are
what tests/catalog (every expert on every check workload) and tests/exploits prove.
`catalog_with_smallest_checks` copies the catalog and keeps, of each task's
interpret-mode check workloads, the smallest public one and the smallest hidden
one; everything else in the packages is unchanged.
"""

from __future__ import annotations

import math
import re
import shutil
import tomllib
from pathlib import Path

from taskformat.package import DEFAULT_CATALOG_DIR, load_task
from taskformat.spec import Mode

_TABLE = re.compile(r"^\[\[?[A-Za-z0-9_.]+\]\]?\s*$", re.M)


def _size(params: dict) -> int:
    """How big a check is: the product of its integer parameters (rows x cols, n, …)."""
    return math.prod(v for v in params.values() if isinstance(v, int) and not isinstance(v, bool))


def _smallest_check_names(checks: list[dict]) -> set[str]:
    kept = set()
    for hidden in (False, True):
        group = [c for c in checks if bool(c.get("hidden", False)) is hidden]
        if group:
            kept.add(min(group, key=lambda c: _size(c.get("params", {})))["name"])
    return kept


def _keep_checks(text: str, kept: set[str]) -> str:
    """task.toml's text without the [[checks]] tables whose name is not in `kept`."""
    starts = [m.start() for m in _TABLE.finditer(text)]
    pieces = [text[: starts[0]]] if starts else [text]
    for start, end in zip(starts, [*starts[1:], len(text)], strict=True):
        block = text[start:end]
        if block.startswith("[[checks]]"):
            name = tomllib.loads(block)["checks"][0]["name"]
            if name not in kept:
                continue
        pieces.append(block)
    return "".join(pieces)


def catalog_with_smallest_checks(destination: Path, tasks: list[str] | None = None) -> Path:
    """A copy of the catalog (or of `tasks` only) in `destination`, each task with its
    smallest public and smallest hidden check workload only; returns `destination`."""
    for source in sorted(DEFAULT_CATALOG_DIR.iterdir()):
        if not (source / "task.toml").is_file() or (tasks is not None and source.name not in tasks):
            continue
        target = destination / source.name
        shutil.copytree(source, target)
        toml = target / "task.toml"
        text = toml.read_text()
        kept = _smallest_check_names(tomllib.loads(text).get("checks", []))
        toml.write_text(_keep_checks(text, kept))
        checks = load_task(target).workloads_for(Mode.INTERPRET)
        assert {w.name for w in checks} == kept, (source.name, kept)
    return destination
