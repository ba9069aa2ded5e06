"""The task format is Django-free and stands alone: the catalog and the harness import it,
it imports neither of them (nor any other package of the project)."""

from pathlib import Path

import taskformat
from tests.import_walk import imports_of_package, reaches

PACKAGE = Path(taskformat.__file__).parent
PROJECT_PACKAGES = sorted(
    p.name for p in PACKAGE.parent.iterdir() if (p / "__init__.py").is_file() and p != PACKAGE
)


def test_the_walk_knows_the_project_packages():
    assert {"evaluator", "task_catalog", "core", "d2kportal"} <= set(PROJECT_PACKAGES)


def test_taskformat_imports_no_django_and_no_other_package_of_the_project():
    forbidden = ["django", "rest_framework", *PROJECT_PACKAGES]
    offenders = [
        f"{path.relative_to(PACKAGE.parent)}: {name}"
        for path, name in imports_of_package(PACKAGE)
        if any(reaches(name, package) for package in forbidden)
    ]
    assert offenders == []
