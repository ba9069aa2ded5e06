"""The project's import graph, read from the code: module cycles, and the diagram of
which package imports which in docs/architecture.md.

    python -m d2kportal.importgraph            # print the diagram
    python -m d2kportal.importgraph --write    # put it in docs/architecture.md
    python -m d2kportal.importgraph --cycles   # list module import cycles (exit 1 if any)

A development tool (grimp comes with import-linter, in the dev extra); tests/test_imports.py
fails when the committed diagram is not the one the code draws, or on any cycle.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
START = "<!-- import graph: python -m d2kportal.importgraph --write -->"
END = "<!-- end of import graph -->"

# Every top-level package of the repository's code (the client's as installed).
PACKAGES = (
    "d2kportal",
    "core",
    "accounts",
    "moderation",
    "task_catalog",
    "submissions",
    "evaluator",
    "runs",
    "scoring",
    "leaderboard",
    "taskformat",
    "runformat",
    "d2k_client",
)


def graph_build() -> Any:
    """grimp's graph of PACKAGES (imports inside functions and TYPE_CHECKING included)."""
    import grimp

    return grimp.build_graph(*PACKAGES, include_external_packages=False, cache_dir=None)


def module_cycles(graph: Any) -> list[list[str]]:
    """Every set of modules that import each other in a circle, or a module importing
    itself."""
    edges = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    return [c for c in _components(edges) if len(c) > 1 or c[0] in edges[c[0]]]


def _components(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of `edges` (Tarjan's algorithm, iterative: the
    module graph is deeper than Python's recursion limit), each sorted, in sorted order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    # (node, children still to visit): the depth-first walk's own stack.
    work: list[tuple[str, list[str]]] = []

    def enter(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        work.append((node, sorted(edges[node], reverse=True)))

    for start in sorted(edges):
        if start in index:
            continue
        enter(start)
        while work:
            node, children = work[-1]
            if children:
                child = children.pop()
                if child not in index:
                    enter(child)
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                found.append(sorted(component))
    return sorted(found)


def _is_models(module: str) -> bool:
    parts = module.split(".")
    return "models" in parts or "migrations" in parts


def package_edges(graph: Any) -> dict[str, dict[str, bool]]:
    """package -> {imported package: whether only its models are imported}."""
    edges: dict[str, dict[str, bool]] = {p: {} for p in PACKAGES}
    for module in graph.modules:
        source = module.split(".")[0]
        for imported in graph.find_modules_directly_imported_by(module):
            target = imported.split(".")[0]
            if target == source:
                continue
            models_only = edges[source].get(target, True) and _is_models(imported)
            edges[source][target] = models_only
    return edges


def _depth(edges: dict[str, dict[str, bool]]) -> dict[str, int]:
    """How far above the bottom a package sits: 0 calls no other package's code, else
    one more than the deepest it calls; packages that call each other share a level."""
    code = {p: {t for t, models in ts.items() if not models} for p, ts in edges.items()}
    group = {p: tuple(c) for c in _components(code) for p in c}
    depth: dict[tuple[str, ...], int] = {}

    def visit(members: tuple[str, ...]) -> int:
        if members not in depth:
            below = {group[t] for p in members for t in code[p]} - {members}
            depth[members] = 1 + max(map(visit, below)) if below else 0
        return depth[members]

    return {p: visit(group[p]) for p in code}


def diagram(edges: dict[str, dict[str, bool]]) -> str:
    """One line per package, the top of the flow first (then the least imported): the
    packages whose code it calls, then (in brackets) those whose models alone it
    reads; `↔` marks a pair whose code calls each other (a page of one showing the
    other's rows)."""
    depth = _depth(edges)
    callers = {p: sum(1 for ts in edges.values() if p in ts) for p in PACKAGES}
    order = sorted(PACKAGES, key=lambda p: (-depth[p], callers[p], p))
    width = max(len(p) for p in PACKAGES)
    lines = []
    for package in order:
        targets = edges[package]
        calls = [
            f"{t}↔" if t in edges and package in edges[t] and not edges[t][package] else t
            for t in sorted(t for t, models in targets.items() if not models)
        ]
        reads = sorted(t for t, models in targets.items() if models)
        line = " ".join(calls) or "—"
        if reads:
            line += f"  (models of {' '.join(reads)})"
        lines.append(f"{package:<{width}}  → {line}")
    return "\n".join(lines)


def doc_block(text: str) -> str:
    return f"{START}\n\n```text\n{text}\n```\n\n{END}"


def doc_with_diagram(doc: str, text: str) -> str:
    """`doc` with the text between the markers replaced; ValueError without them."""
    start, end = doc.find(START), doc.find(END)
    if start < 0 or end < start:
        raise ValueError(f"{DOC.name} lacks the markers {START!r} … {END!r}")
    return doc[:start] + doc_block(text) + doc[end + len(END) :]


def _cycles_text(cycles: Iterable[list[str]]) -> str:
    return "\n".join(" ↔ ".join(c) for c in cycles)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m d2kportal.importgraph")
    parser.add_argument("--write", action="store_true", help=f"update {DOC.relative_to(ROOT)}")
    parser.add_argument("--cycles", action="store_true", help="list module import cycles")
    args = parser.parse_args(argv)
    graph = graph_build()
    if args.cycles:
        cycles = module_cycles(graph)
        print(_cycles_text(cycles) or "No import cycles.")
        return 1 if cycles else 0
    text = diagram(package_edges(graph))
    if args.write:
        DOC.write_text(doc_with_diagram(DOC.read_text(), text))
        print(f"Wrote the import graph into {DOC.relative_to(ROOT)}.")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
