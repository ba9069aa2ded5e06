"""The catalog reads nothing from the evaluator: rankings and results are the leaderboard's."""

import ast
from pathlib import Path

import task_catalog

ROOT = Path(task_catalog.__file__).parent
# The Django-free harness parses task packages for the loader and the standalone CLI alike;
# the evaluator's models, selectors and services are what the catalog must not reach.
ALLOWED = ("evaluator.harness",)


def imported_modules(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
            names += [f"{node.module}.{alias.name}" for alias in node.names]
    return names


def reaches_evaluator(name: str) -> bool:
    if name != "evaluator" and not name.startswith("evaluator."):
        return False
    return not any(name == a or name.startswith(f"{a}.") for a in ALLOWED)


def test_task_catalog_imports_nothing_from_the_evaluator():
    offenders = [
        f"{path.relative_to(ROOT.parent)}: {name}"
        for path in sorted(ROOT.rglob("*.py"))
        for name in imported_modules(path)
        if reaches_evaluator(name)
    ]
    assert offenders == []


def test_the_walk_sees_a_forbidden_import_and_allows_the_harness(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        "from evaluator.models import Evaluation\nimport evaluator.selectors\n"
        "from evaluator.harness.spec import TaskSpec\n"
    )
    assert sorted(n for n in imported_modules(module) if reaches_evaluator(n)) == [
        "evaluator.models",
        "evaluator.models.Evaluation",
        "evaluator.selectors",
    ]
