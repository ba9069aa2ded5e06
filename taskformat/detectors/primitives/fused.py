"""One kernel that does several things: fusion, single reads."""

from __future__ import annotations

import ast
from typing import Any

from taskformat.detectors.primitives.common import _grid_stride, _result
from taskformat.detectors.program import LOADS, Func, Program, Site
from taskformat.detectors.result import DetectorResult


def _family(program: Program, kernel: Func) -> list[Func]:
    out = [kernel]
    for func in out:
        out += [
            s.callee
            for s in func.sites
            if s.callee is not None and s.callee.device and s.callee not in out
        ]
    return out


def _bases(program: Program, node: ast.AST, func: Func, kernel: Func, depth: int = 0) -> set[str]:
    """The pointer arguments of `kernel` a pointer expression is based on: followed
    through additions, subscripts, hints and names, never through multiplications."""
    if depth > 12:
        return set()
    if isinstance(node, ast.Name):
        if node.id in func.params:
            if func is kernel:
                return {node.id}
            return set().union(
                *(
                    _bases(program, v, f, kernel, depth + 1)
                    for v, f in program.bindings(func, node.id)
                    if f.device
                ),
                set(),
            )
        defs = func.defs.get(node.id, [])
        found = set().union(*(_bases(program, v, func, kernel, depth + 1) for v in defs), set())
        # A pointer read from memory (a table of addresses) is a root of its own.
        if not found and any(_loaded(program, v) for v in defs):
            return {node.id}
        return found
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub):
        return _bases(program, node.left, func, kernel, depth + 1) | _bases(
            program, node.right, func, kernel, depth + 1
        )
    if isinstance(node, ast.Subscript):
        return _bases(program, node.value, func, kernel, depth + 1)
    if isinstance(node, ast.IfExp):
        return _bases(program, node.body, func, kernel, depth + 1) | _bases(
            program, node.orelse, func, kernel, depth + 1
        )
    if isinstance(node, ast.Call):
        name = program.canon(node.func, True)
        base = next((k.value for k in node.keywords if k.arg in ("base", "pointer")), None)
        if name in (
            "tl.multiple_of",
            "tl.max_contiguous",
            "tl.advance",
            "tl.make_block_ptr",
            "tl.make_tensor_descriptor",
        ) or name.startswith("."):
            first = base or (node.args[0] if node.args else None)
            if name.startswith(".") and isinstance(node.func, ast.Attribute):
                first = node.func.value
            return _bases(program, first, func, kernel, depth + 1) if first is not None else set()
    return set()


def _loaded(program: Program, node: ast.AST) -> bool:
    return any(
        isinstance(n, ast.Call) and program.canon(n.func, True) in LOADS for n in ast.walk(node)
    )


def _roots(program: Program, site: Site, kernel: Func) -> set[str]:
    if isinstance(site.node.func, ast.Attribute) and site.name == ".load":
        return _bases(program, site.node.func.value, site.func, kernel)
    arg = (
        site.node.args[0]
        if site.node.args
        else next((k.value for k in site.node.keywords if k.arg == "pointer"), None)
    )
    return set() if arg is None else _bases(program, arg, site.func, kernel)


def kernel(program: Program, spec: dict[str, Any]) -> DetectorResult:
    """One launched kernel (with the jit functions it calls) that does all of: calls
    `calls`, stores to at least `stores_min` distinct pointer arguments, loads at least
    `loads_min`, and (`single_read`) loads each pointer argument at one site outside
    any loop."""
    want = set(spec.get("calls", []))
    for k in program.device:
        if not any(s.launch is k for s in program.launches):
            continue
        sites = [s for f in _family(program, k) for s in f.sites]
        if not want <= {s.name for s in sites}:
            continue
        stores = set().union(*(_roots(program, s, k) for s in sites if s.name == "tl.store"), set())
        loads = [s for s in sites if s.name in LOADS]
        per_ptr: dict[str, int] = {}
        for s in loads:
            for root in _roots(program, s, k):
                per_ptr[root] = per_ptr.get(root, 0) + 1
        if len(stores) < int(spec.get("stores_min", 0)) or len(per_ptr) < int(
            spec.get("loads_min", 0)
        ):
            continue
        most = spec.get("max_sites_per_pointer")
        if most is not None and (not per_ptr or max(per_ptr.values()) > int(most)):
            continue
        most = spec.get("max_loop_sites_per_pointer")
        if most is not None:
            looped: dict[str, int] = {}
            for s in loads:
                if program.in_loop(s):
                    for root in _roots(program, s, k):
                        looped[root] = looped.get(root, 0) + 1
            if not looped or max(looped.values()) > int(most):
                continue
        # Loads inside a loop over rows (a grid-stride loop) still read each row once.
        chunked = any(
            program.in_loop(s) and not all(_grid_stride(program, s.func, loop) for loop in s.loops)
            for s in loads
        )
        if spec.get("single_read") and (
            not per_ptr or any(n > 1 for n in per_ptr.values()) or chunked
        ):
            continue
        return _result(
            True,
            f"kernel {k.name} does it in one launch",
            "",
            [f"{k.name}: stores {sorted(stores)}, loads {per_ptr}"],
        )
    return _result(False, "", "no single launched kernel does all of it", [])
