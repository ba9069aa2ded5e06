"""Helpers the primitives share: results, loop-carried names, dependencies, constants."""

from __future__ import annotations

import ast
import math
from collections.abc import Iterable
from typing import Any

from taskformat.detectors.program import Func, Program, Site
from taskformat.detectors.result import DetectorError, DetectorResult

LOG2E = 1.0 / math.log(2.0)


LN2 = math.log(2.0)


TILE_SHAPES = frozenset({"tl.zeros", "tl.full", "tl.arange"})


def _result(value: bool, yes: str, no: str, evidence: Iterable[str] = ()) -> DetectorResult:
    return DetectorResult(value=value, rationale=yes if value else no, evidence=tuple(evidence)[:3])


def _names(spec: dict[str, Any]) -> set[str]:
    names = spec.get("names")
    if not isinstance(names, list) or not names:
        raise DetectorError(f"{spec.get('kind')} detector needs a non-empty list `names`")
    return set(names)


def _near(value: Any, target: float) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isclose(value, target, rel_tol=1e-6)
    )


def _assigned_in(loop: ast.stmt) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(loop):
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                out |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
    return out


def carried(func: Func, loop: ast.stmt) -> set[str]:
    """Names a loop reads and reassigns that also hold a value from before it."""
    inside = {id(n) for n in ast.walk(loop)}
    names = _assigned_in(loop)
    read = {n.id for n in ast.walk(loop) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    read |= {
        n.target.id
        for n in ast.walk(loop)
        if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name)
    }
    out = set()
    for name in names & read:
        outside = [
            v
            for v in func.defs.get(name, [])
            if id(v) not in inside and id(getattr(v, "right", None)) not in inside
        ]
        if outside or name in func.params:
            out.add(name)
    return out


def _mentions(node: ast.AST, names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node))


def _device_loops(program: Program) -> Iterable[tuple[Func, ast.stmt]]:
    for func in program.device:
        for loop in func.loops:
            yield func, loop


def _is_dot(program: Program, site: Site, depth: int = 0) -> bool:
    if site.name == "tl.dot":
        return True
    callee = site.callee
    if callee is None or not callee.device or depth > 3:
        return False
    returns = [
        n for n in ast.walk(callee.node) if isinstance(n, ast.Return) and n.value is not None
    ]
    return any(
        s.name == "tl.dot" or (s.callee is not None and _is_dot(program, s, depth + 1))
        for s in callee.sites
        if any(s.node in set(ast.walk(r)) for r in returns)
    )


def values(program: Program, node: ast.AST, owner: Func | None, depth: int = 0) -> set[Any] | None:
    """The constants an expression may take, or None when one is only known at run time."""
    value = program.const(node, owner)
    if value is not None:
        return {value}
    if depth > 6:
        return None
    if isinstance(node, ast.BoolOp):
        out: set[Any] = set()
        for operand in node.values:
            if _defaults_to_none(operand, owner):
                continue
            got = values(program, operand, owner, depth + 1)
            if got is None:
                return None
            out |= got
        return out
    if isinstance(node, ast.IfExp):
        a, b = (
            values(program, node.body, owner, depth + 1),
            values(program, node.orelse, owner, depth + 1),
        )
        return None if a is None or b is None else a | b
    if isinstance(node, ast.Name) and owner is not None and node.id in owner.defs:
        out = set()
        for v in owner.defs[node.id]:
            got = values(program, v, owner, depth + 1)
            if got is None:
                return None
            out |= got
        return out
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        return _element_values(program, node.value, node.slice.value, owner, depth + 1)
    return None


def _element_values(
    program: Program, node: ast.AST, index: Any, owner: Func | None, depth: int
) -> set[Any] | None:
    """The constants element `index` of a tuple-valued expression may take."""
    if not isinstance(index, int) or depth > 6:
        return None
    if isinstance(node, ast.Tuple):
        return (
            values(program, node.elts[index], owner, depth + 1) if index < len(node.elts) else None
        )
    options: list[tuple[ast.AST, Func | None]] = []
    if isinstance(node, ast.BoolOp):
        options = [(v, owner) for v in node.values if not _defaults_to_none(v, owner)]
    elif isinstance(node, ast.IfExp):
        options = [(node.body, owner), (node.orelse, owner)]
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in program.funcs
    ):
        callee = program.funcs[node.func.id]
        options = [
            (r.value, callee)
            for r in ast.walk(callee.node)
            if isinstance(r, ast.Return) and r.value is not None
        ]
    out: set[Any] = set()
    for option, where in options:
        got = _element_values(program, option, index, where, depth + 1)
        if got is None:
            return None
        out |= got
    return out or None


def _defaults_to_none(node: ast.AST, owner: Func | None) -> bool:
    """A parameter that defaults to None (an optional override the callers leave out)."""
    if not isinstance(node, ast.Name) or owner is None or node.id not in owner.params:
        return False
    args = owner.node.args
    positional = [*args.posonlyargs, *args.args]
    pairs = list(
        zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True)
    )
    pairs += [
        (a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None
    ]
    return any(
        a.arg == node.id and isinstance(d, ast.Constant) and d.value is None for a, d in pairs
    )


def _depends_on(program: Program, node: ast.AST, func: Func, names: set[str]) -> bool:
    return any(
        isinstance(n, ast.Call) and program.canon(n.func, True) in names
        for n, _ in program.closure(node, func)
    )


def _is_program_id(program: Program, node: ast.AST, func: Func, depth: int = 0) -> bool:
    """`tl.program_id(...)` itself (or a name bound to it, or its `.to(...)`)."""
    if isinstance(node, ast.Call):
        name = program.canon(node.func, True)
        if name == "tl.program_id":
            return True
        return (
            name == ".to"
            and isinstance(node.func, ast.Attribute)
            and _is_program_id(program, node.func.value, func, depth + 1)
        )
    if isinstance(node, ast.Name) and depth < 4:
        defs = func.defs.get(node.id, [])
        return bool(defs) and all(_is_program_id(program, d, func, depth + 1) for d in defs)
    return False


def _grid_stride(program: Program, func: Func, loop: ast.stmt) -> bool:
    if not isinstance(loop, ast.For) or not isinstance(loop.iter, ast.Call) or not loop.iter.args:
        return False
    return len(loop.iter.args) >= 2 and _depends_on(
        program, loop.iter.args[0], func, {"tl.program_id"}
    )


def dotted_name(node: ast.AST | None) -> str:
    return node.id if isinstance(node, ast.Name) else ""
