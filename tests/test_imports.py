"""Imports run one way: the import-linter contracts hold, no modules import each other
in a circle, docs/architecture.md draws the package graph the code has, and the bench
scripts import the product, never its tests."""

import ast
from pathlib import Path

import pytest
from importlinter.application.use_cases import lint_imports
from importlinter.configuration import configure

from d2kportal import importgraph

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def graph():
    return importgraph.graph_build()


def test_the_import_contracts_hold(capsys):
    configure()  # what the lint-imports command does first
    kept = lint_imports(config_filename=str(ROOT / "pyproject.toml"), cache_dir=None, no_logo=True)
    assert kept, capsys.readouterr().out


def test_no_modules_import_each_other_in_a_circle(graph):
    assert importgraph.module_cycles(graph) == []


def test_a_cycle_is_found():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"d"}, "e": {"a"}}

    class Graph:
        modules = set(edges)

        def find_modules_directly_imported_by(self, module):
            return edges[module]

    assert importgraph.module_cycles(Graph()) == [["a", "b", "c"], ["d"]]


def test_the_architecture_page_draws_the_current_import_graph(graph):
    current = importgraph.diagram(importgraph.package_edges(graph))
    doc = importgraph.DOC.read_text()
    assert importgraph.doc_with_diagram(doc, current) == doc, (
        "docs/architecture.md's import graph is stale: run python -m d2kportal.importgraph --write"
    )


def _imported_packages(source: str) -> set[str]:
    """The top-level package of every absolute import in `source`, wherever it sits (in
    functions too)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_the_import_reader_finds_imports_inside_functions():
    source = "import os\n\ndef f():\n    from tests.data import x\n    import tests.y as y\n"
    assert _imported_packages(source) == {"os", "tests"}


def test_the_bench_scripts_import_only_the_product_not_its_tests():
    scripts = sorted((ROOT / "bench").rglob("*.py"))
    assert scripts
    wrong = [
        str(path.relative_to(ROOT))
        for path in scripts
        if "tests" in _imported_packages(path.read_text())
    ]
    assert wrong == [], "bench/ imports tests/: move what it needs into the product or bench/"
