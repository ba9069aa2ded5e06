"""What reaches memory: the expressions whose values a launched kernel stores.

An idiom counts only where it is on the kernel's data path. `stored_nodes`
starts at every live `tl.store`/`tl.atomic_*` of reachable device code and
follows each argument back through assignments, the arguments callers pass
for parameters, and the values jit helper functions return. A reshape whose
result is dropped, an `int64` cast that no address uses or a `tl.dot` whose
product nothing stores is not in it.
"""

from __future__ import annotations

import ast

from taskformat.detectors.program import Func, Program

SINKS = frozenset(
    {
        "tl.store",
        ".store",
        "tl.atomic_add",
        "tl.atomic_max",
        "tl.atomic_min",
        "tl.atomic_cas",
        "tl.atomic_xchg",
        "tl.atomic_and",
        "tl.atomic_or",
        "tl.atomic_xor",
    }
)


def stored_nodes(program: Program) -> frozenset[int]:
    """Ids of the AST nodes whose values reach a store of reachable device code."""
    cached = program.cache.get("stored_nodes")
    if cached is None:
        cached = frozenset(_stored(program))
        program.cache["stored_nodes"] = cached
    return cached


def _stored(program: Program) -> set[int]:
    todo: list[tuple[ast.AST, Func | None]] = []
    for site in program.device_sites():
        if site.name in SINKS:
            todo += [(a, site.func) for a in site.node.args]
            todo += [(k.value, site.func) for k in site.node.keywords]
    seen: set[int] = set()
    expanded: set[int] = set()
    while todo:
        expr, owner = todo.pop()
        for node, where in program.closure(expr, owner):
            seen.add(id(node))
            if not isinstance(node, ast.Call) or id(node) in expanded:
                continue
            expanded.add(id(node))
            callee = program.funcs.get(ast.unparse(node.func))
            if callee is not None and callee.device:
                todo += [
                    (r.value, callee)
                    for r in ast.walk(callee.node)
                    if isinstance(r, ast.Return) and r.value is not None
                ]
            # A method chain `x.to(...)`, `x.reshape(...)`: the receiver flows on.
            if isinstance(node.func, ast.Attribute):
                todo.append((node.func.value, where))
    return seen


def feeds_store(program: Program, node: ast.AST) -> bool:
    return id(node) in stored_nodes(program)
