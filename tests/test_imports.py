"""Imports run one way: the import-linter contracts hold, no modules import each other
in a circle, and docs/architecture.md draws the package graph the code has."""

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
