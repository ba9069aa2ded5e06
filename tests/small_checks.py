"""The catalog with fewer check workloads, for the tests whose subject is the plumbing.

A test about the upload, the queue, a worker's death or a run's pages needs real
verdicts from the real evaluator, but not every check shape of every task: those are
what tests/catalog (every expert on every check workload) and tests/exploits prove.
`catalog_with_smallest_checks` copies the catalog and keeps, of each task's
interpret-mode check workloads, the smallest public one and the hidden draw that
draws the smallest one (once); everything else in the packages is unchanged.
"""

from __future__ import annotations

import math
import shutil
import tomllib
from pathlib import Path
from typing import Any

import tomli_w

from taskformat.hidden import hidden_declaration_parse, hidden_draw
from taskformat.package import DEFAULT_CATALOG_DIR, load_task
from taskformat.spec import HiddenDeclaration, Mode

# What the sizes of the hidden draws are compared by: a draw's ranges are narrow, so
# the smallest under one secret is the smallest under any.
SIZING_SECRET = "d2k-tests-small-checks"


def _size(params: dict) -> int:
    """How big a check is: the product of its integer parameters (rows x cols, n, …)."""
    return math.prod(v for v in params.values() if isinstance(v, int) and not isinstance(v, bool))


def _smallest_hidden_draw(meta: dict[str, Any], slug: str) -> dict[str, Any]:
    """The `hidden` table with the one interpret draw that draws the smallest workload."""
    draws = meta.get("hidden", {}).get("interpret", [])
    if not draws:
        return {}
    sizes = []
    for draw in draws:
        one = hidden_declaration_parse({"interpret": [{**draw, "count": 1}]})
        [workload] = hidden_draw(one, secret=SIZING_SECRET, slug=slug)
        sizes.append(_size(workload.params))
    smallest = draws[sizes.index(min(sizes))]
    return {"interpret": [{**smallest, "count": 1}]}


def catalog_with_smallest_checks(destination: Path, tasks: list[str] | None = None) -> Path:
    """A copy of the catalog (or of `tasks` only) in `destination`, each task with its
    smallest public check workload and one small hidden one only; returns `destination`."""
    for source in sorted(DEFAULT_CATALOG_DIR.iterdir()):
        if not (source / "task.toml").is_file() or (tasks is not None and source.name not in tasks):
            continue
        target = destination / source.name
        shutil.copytree(source, target)
        toml = target / "task.toml"
        meta = tomllib.loads(toml.read_text())
        meta["checks"] = [min(meta["checks"], key=lambda c: _size(c.get("params", {})))]
        meta["hidden"] = _smallest_hidden_draw(meta, source.name)
        if not meta["hidden"]:
            del meta["hidden"]
        toml.write_text(tomli_w.dumps(meta))
        task = load_task(target)
        assert [w.name for w in task.workloads_for(Mode.INTERPRET)] == [meta["checks"][0]["name"]]
        assert task.hidden == HiddenDeclaration() or task.hidden.count(Mode.INTERPRET) == 1
    return destination
