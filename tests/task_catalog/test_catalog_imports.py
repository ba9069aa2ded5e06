"""The catalog reads nothing from the evaluator: it reads task packages through `taskformat`,
and rankings and results are the leaderboard's."""

from pathlib import Path

import task_catalog
from tests.import_walk import imported_modules, imports_of_package, reaches

PACKAGE = Path(task_catalog.__file__).parent


def test_task_catalog_imports_nothing_from_the_evaluator():
    offenders = [
        f"{path.relative_to(PACKAGE.parent)}: {name}"
        for path, name in imports_of_package(PACKAGE)
        if reaches(name, "evaluator")
    ]
    assert offenders == []


def test_the_walk_sees_every_way_of_reaching_the_evaluator(tmp_path):
    module = tmp_path / "task_catalog" / "services" / "m.py"
    module.parent.mkdir(parents=True)
    module.write_text(
        "import importlib\n"
        "from evaluator.harness.verdict import Verdict\n"
        "import evaluator.selectors\n"
        "from ... import evaluator\n"
        "from ...evaluator.models import Evaluation\n"
        "from ..models import Task\n"
        "from taskformat.spec import TaskSpec\n"
        "importlib.import_module('evaluator.services')\n"
    )
    names = imported_modules(module, root=tmp_path)
    assert "task_catalog.models.Task" in names
    assert sorted({n for n in names if reaches(n, "evaluator")}) == [
        "evaluator",
        "evaluator.harness.verdict",
        "evaluator.harness.verdict.Verdict",
        "evaluator.models",
        "evaluator.models.Evaluation",
        "evaluator.selectors",
        "evaluator.services",
    ]
