"""The catalog's tasks with their hidden workloads drawn, as a deployment's evaluator draws them.

The tests draw with secrets of their own (never a deployment's): what they
check on the drawn workloads holds for whatever a secret draws, and two
secrets show that.
"""

from __future__ import annotations

from pathlib import Path

from taskformat.hidden import task_with_hidden
from taskformat.package import DEFAULT_CATALOG_DIR, load_task
from taskformat.spec import TaskSpec

TEST_SECRETS = ("d2k-tests-hidden-secret-a", "d2k-tests-hidden-secret-b")


def load_drawn(where: str | Path, *, secret: str = TEST_SECRETS[0]) -> TaskSpec:
    """The task at `where` (a slug or a folder), its hidden workloads drawn from `secret`."""
    path = Path(where) if Path(where).is_dir() else DEFAULT_CATALOG_DIR / str(where)
    return task_with_hidden(load_task(path), secret=secret)
