"""Loops: carried values, online rescaling, tile products, bounds and strides."""

from __future__ import annotations

import ast
from typing import Any

from taskformat.detectors.primitives.common import (
    _depends_on,
    _device_loops,
    _is_dot,
    _mentions,
    _names,
    _result,
    carried,
    dotted_name,
)
from taskformat.detectors.program import LOADS, Func, Program
from taskformat.detectors.result import DetectorResult


def carried_call(program: Program, spec: dict[str, Any]) -> DetectorResult:
    names = _names(spec)
    hits = []
    for func, loop in _device_loops(program):
        values = carried(func, loop)
        for site in func.sites:
            if (
                loop in site.loops
                and site.name in names
                and any(_mentions(a, values) for a in site.node.args)
            ):
                hits.append(site.line)
    what = "/".join(sorted(names))
    return _result(
        bool(hits),
        f"a loop-carried value is updated through {what}",
        f"no loop-carried value passes through {what}",
        hits,
    )


def _max_derived(program: Program, func: Func, loop: ast.stmt, values: set[str]) -> set[str]:
    derived: set[str] = set()
    for _ in range(3):
        for stmt in ast.walk(loop):
            if not isinstance(stmt, ast.Assign):
                continue
            calls = [n for n in ast.walk(stmt.value) if isinstance(n, ast.Call)]
            if any(
                program.canon(c.func, True) == "tl.maximum"
                and any(_mentions(a, values | derived) for a in c.args)
                for c in calls
            ) or (isinstance(stmt.value, ast.Name) and stmt.value.id in derived):
                derived |= {
                    n.id for t in stmt.targets for n in ast.walk(t) if isinstance(n, ast.Name)
                }
    return derived


def online_rescale(program: Program, spec: dict[str, Any]) -> DetectorResult:
    """exp/exp2(old - new) where `old` is a loop-carried maximum and `new` comes from
    tl.maximum(old, ...) in the same loop: the online softmax correction factor."""
    hits = []
    for func, loop in _device_loops(program):
        values = carried(func, loop)
        new = _max_derived(program, func, loop, values)
        old = values | {
            n.id
            for s in ast.walk(loop)
            if isinstance(s, ast.Assign) and isinstance(s.value, ast.Name) and s.value.id in values
            for t in s.targets
            for n in ast.walk(t)
            if isinstance(n, ast.Name)
        }
        if not new:
            continue
        for site in func.sites:
            if (
                loop not in site.loops
                or site.name not in ("tl.exp", "tl.exp2")
                or not site.node.args
            ):
                continue
            for sub in ast.walk(site.node.args[0]):
                if isinstance(sub, ast.BinOp) and isinstance(sub.op, ast.Sub):
                    a, b = sub.left, sub.right
                    if (_mentions(a, old) and _mentions(b, new)) or (
                        _mentions(a, new) and _mentions(b, old)
                    ):
                        hits.append(site.line)
    return _result(
        bool(hits),
        "a running maximum is carried through the loop and the running values are rescaled"
        " by exp(m_old - m_new)",
        "no exp(m_old - m_new) rescale of a loop-carried running maximum",
        hits,
    )


def _is_cast(program: Program, node: ast.AST) -> bool:
    """`x.to(dtype)` / `tl.cast(x, dtype)` to a narrower type than fp32."""
    if not isinstance(node, ast.Call):
        return False
    name = program.canon(node.func, True)
    args = [*node.args, *[k.value for k in node.keywords]]
    if name == "tl.cast":
        args = args[1:]
    return name in (".to", "tl.cast") and not any(
        program.canon(a, True) == "tl.float32" for a in args
    )


def dot_accumulate(program: Program, spec: dict[str, Any]) -> DetectorResult:
    """A tile product (tl.dot, or a jit helper returning one) inside a loop that loads
    tiles, accumulated into a loop-carried value."""
    hits = []
    for func in program.device:
        for site in func.sites:
            if not site.loops or not _is_dot(program, site) or not program.is_load_loop_site(site):
                continue
            if spec.get("cast_operand") and not any(
                _is_cast(program, a) for a in site.node.args[:2]
            ):
                continue
            values = set().union(*(carried(func, loop) for loop in site.loops))
            stmt = site.stmt
            if isinstance(stmt, ast.AugAssign) and _mentions(stmt.target, values):
                hits.append(site.line)
            elif isinstance(stmt, ast.Assign) and any(_mentions(t, values) for t in stmt.targets):
                target = {
                    n.id for t in stmt.targets for n in ast.walk(t) if isinstance(n, ast.Name)
                }
                if any(
                    _mentions(a, target)
                    for a in [*site.node.args, *[k.value for k in site.node.keywords]]
                ) or (isinstance(stmt.value, ast.BinOp) and _mentions(stmt.value, target)):
                    hits.append(site.line)
    return _result(
        bool(hits),
        "tile products in the loop that loads tiles accumulate into a carried tile",
        "no tl.dot accumulating into a loop-carried tile inside a loop that loads",
        hits,
    )


def grid_stride_loop(program: Program, spec: dict[str, Any]) -> DetectorResult:
    """A device loop that starts at the program id and strides by the grid size (or a
    run-time stride): persistent programs."""
    hits = []
    for func, loop in _device_loops(program):
        if isinstance(loop, ast.For) and isinstance(loop.iter, ast.Call):
            args = loop.iter.args
            if program.canon(loop.iter.func, True) in ("range", "tl.range") and len(args) >= 3:
                start, step = args[0], args[2]
                if (
                    _depends_on(program, start, func, {"tl.program_id"})
                    and program.const(step, func) is None
                ):
                    hits.append(ast.unparse(loop.iter))
            # `for it in range(iters): start = pid + it * nprog`: the stride in the body.
            target = loop.target.id if isinstance(loop.target, ast.Name) else ""
            for node in ast.walk(loop):
                if (
                    isinstance(node, ast.Assign)
                    and target
                    and any(
                        isinstance(n, ast.Name) and n.id == target for n in ast.walk(node.value)
                    )
                    and _depends_on(program, node.value, func, {"tl.num_programs"})
                    and _depends_on(program, node.value, func, {"tl.program_id"})
                ):
                    hits.append(ast.unparse(node))
        elif isinstance(loop, ast.While):
            for node in ast.walk(loop):
                if isinstance(node, ast.AugAssign) and _depends_on(
                    program, node.value, func, {"tl.num_programs"}
                ):
                    hits.append(ast.unparse(node))
    return _result(
        bool(hits),
        "programs stride over the work (persistent grid)",
        "no grid-stride loop over the work",
        hits,
    )


def _for_stop(loop: ast.stmt) -> ast.expr | None:
    if isinstance(loop, ast.For) and isinstance(loop.iter, ast.Call) and loop.iter.args:
        args = loop.iter.args
        return args[1] if len(args) >= 2 else args[0]
    if isinstance(loop, ast.While):
        return loop.test
    return None


def loop_bound(program: Program, spec: dict[str, Any]) -> DetectorResult:
    """A device loop whose trip count depends on `on`: "program_id" (each program
    sweeps its own range: split/partitioned or causal-clipped loops) or "load" (a
    bound read from memory: group offsets, sequence lengths)."""
    on = spec.get("on", "program_id")
    names = {"tl.program_id"} if on == "program_id" else set(LOADS)
    hits = []
    for func, loop in _device_loops(program):
        stop = _for_stop(loop)
        if stop is None:
            continue
        exprs = [stop]
        if (
            isinstance(loop, ast.For)
            and isinstance(loop.iter, ast.Call)
            and len(loop.iter.args) >= 2
        ):
            exprs.append(loop.iter.args[0])
        if spec.get("loads") and loop is not None and id(loop) not in program.load_loops:
            continue
        if any(_depends_on(program, e, func, names) for e in exprs):
            hits.append(ast.unparse(stop))
    return _result(
        bool(hits), f"a loop's bounds depend on {on}", f"no loop bound depends on {on}", hits
    )


def carried_accumulate(program: Program, spec: dict[str, Any]) -> DetectorResult:
    """A tile (tl.zeros/tl.full before the loop) accumulated with += inside a loop that
    loads: per-lane partial results kept in registers across the sweep."""
    hits = []
    for func, loop in _device_loops(program):
        if id(loop) not in program.load_loops:
            continue
        values = carried(func, loop)
        for stmt in ast.walk(loop):
            target: ast.expr | None = None
            if isinstance(stmt, ast.AugAssign) and isinstance(stmt.op, ast.Add):
                target = stmt.target
            elif (
                isinstance(stmt, ast.Assign)
                and len(stmt.targets) == 1
                and isinstance(stmt.value, ast.BinOp)
                and isinstance(stmt.value.op, ast.Add)
            ):
                target = (
                    stmt.targets[0]
                    if _mentions(stmt.value, {dotted_name(stmt.targets[0])})
                    else None
                )
            name = dotted_name(target) if target is not None else ""
            if name in values and any(
                isinstance(d, ast.Call) and program.canon(d.func, True) in ("tl.zeros", "tl.full")
                for d in func.defs.get(name, [])
            ):
                hits.append(ast.unparse(stmt))
    return _result(
        bool(hits),
        "a register tile accumulates across the loop",
        "no tile accumulator carried through a loop that loads",
        hits,
    )


def dot_scaled(program: Program, spec: dict[str, Any]) -> DetectorResult:
    """A tile product multiplied by another value (per-block scales) inside the loop that
    loads the tiles: the product is rescaled after the MMA, not the operands before."""
    hits = []
    for func in program.device:
        dots = {
            id(s.node) for s in func.sites if _is_dot(program, s) and program.is_load_loop_site(s)
        }
        dot_names = {
            n.id
            for s in func.sites
            if id(s.node) in dots and isinstance(s.stmt, ast.Assign)
            for t in s.stmt.targets
            for n in ast.walk(t)
            if isinstance(n, ast.Name)
        }
        for node, loops in func.nodes:
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult) and loops:
                for side in (node.left, node.right):
                    if id(side) in dots or (isinstance(side, ast.Name) and side.id in dot_names):
                        hits.append(ast.unparse(node))
    return _result(
        bool(hits),
        "the tile product is scaled after the MMA",
        "no tile product is rescaled inside the K loop",
        hits,
    )
