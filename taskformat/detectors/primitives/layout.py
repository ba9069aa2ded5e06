"""Tiles, broadcasts, program ids, masks and gathers."""

from __future__ import annotations

import ast
from typing import Any

from taskformat.detectors.primitives.common import (
    _depends_on,
    _is_program_id,
    _result,
)
from taskformat.detectors.program import Program
from taskformat.detectors.result import DetectorResult


def zeros_tile(program: Program, spec: dict[str, Any]) -> DetectorResult:
    rank, dtype = int(spec.get("rank", 2)), spec.get("dtype", "tl.float32")
    hits = []
    for site in program.device_sites():
        if site.name not in ("tl.zeros", "tl.full"):
            continue
        args, kw = site.node.args, {k.arg: k.value for k in site.node.keywords}
        shape = args[0] if args else kw.get("shape")
        pos = 1 if site.name == "tl.zeros" else 2
        kind = args[pos] if len(args) > pos else kw.get("dtype")
        if (
            isinstance(shape, ast.List | ast.Tuple)
            and len(shape.elts) == rank
            and kind is not None
            and program.canon(kind, True) == dtype
        ):
            hits.append(site.line)
    return _result(
        bool(hits),
        f"a {rank}-D {dtype} tile is allocated on chip",
        f"no {rank}-D {dtype} tile allocation",
        hits,
    )


def _form(node: ast.Subscript) -> str:
    elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    parts = []
    for e in elts:
        if isinstance(e, ast.Slice) and e.lower is None and e.upper is None and e.step is None:
            parts.append(":")
        elif isinstance(e, ast.Constant) and e.value is None:
            parts.append("None")
        else:
            parts.append("x")
    return ",".join(parts)


def subscript_none(program: Program, spec: dict[str, Any]) -> DetectorResult:
    """Broadcast indexing such as `[:, None]` and `[None, :]` in device code: tiles of
    more than one dimension built from 1-D ranges."""
    forms = spec.get("forms") or [":,None", "None,:"]
    seen: dict[str, str] = {}
    for func in program.device:
        for node, _ in func.nodes:
            if isinstance(node, ast.Subscript):
                seen.setdefault(_form(node).replace(" ", ""), ast.unparse(node))
    missing = [f for f in forms if f.replace(" ", "") not in seen]
    return _result(
        not missing,
        f"device code broadcasts with {', '.join(forms)}",
        f"device code never indexes {', '.join(missing)}",
        (seen[f] for f in forms if f in seen),
    )


def program_id(program: Program, spec: dict[str, Any]) -> DetectorResult:
    axes: dict[Any, str] = {}
    for site in program.device_sites():
        if site.name in ("tl.program_id", "tl.num_programs"):
            arg = (
                site.node.args[0]
                if site.node.args
                else next((k.value for k in site.node.keywords if k.arg == "axis"), None)
            )
            axes.setdefault(program.const(arg) if arg is not None else 0, site.line)
    value = len(axes) >= int(spec.get("min_axes", 1)) and (
        "axis" not in spec or spec["axis"] in axes
    )
    return _result(
        value,
        f"the grid uses axes {sorted(map(str, axes))}",
        f"the grid uses axes {sorted(map(str, axes))} only",
        axes.values(),
    )


def reversed_program_order(program: Program, spec: dict[str, Any]) -> DetectorResult:
    hits = []
    for func in program.device:
        for node, _ in func.nodes:
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub):
                right = _is_program_id(program, node.right, func)
                left = _depends_on(program, node.left, func, {"tl.program_id"})
                if right and not left and program.const(node.left, func) is None:
                    hits.append(ast.unparse(node))
    return _result(
        bool(hits),
        "programs index their work in reverse launch order",
        "program ids are used in launch order",
        hits,
    )


def unmasked_load(program: Program, spec: dict[str, Any]) -> DetectorResult:
    """A tl.load with no mask and no boundary check (a mask-free fast path), inside a
    loop when `in_loop`."""
    hits = [
        s.line
        for s in program.device_sites()
        if s.name == "tl.load"
        and (program.in_loop(s) or not spec.get("in_loop"))
        and len(s.node.args) < 2
        and not any(k.arg in ("mask", "boundary_check") for k in s.node.keywords)
    ]
    where = " in a loop" if spec.get("in_loop") else ""
    return _result(bool(hits), f"unmasked loads{where}", f"every load{where} is masked", hits)


def grouped_tile_order(program: Program, spec: dict[str, Any]) -> DetectorResult:
    """Grouped (swizzled) tile order: a program-id-derived index wrapped modulo a group
    size that is itself clamped with min() against the remaining tiles, or tl.swizzle2d."""
    hits = [s.line for s in program.device_sites() if s.name == "tl.swizzle2d"]
    for func in program.device:
        for node, _ in func.nodes:
            if (
                isinstance(node, ast.BinOp)
                and isinstance(node.op, ast.Mod | ast.FloorDiv)
                and _depends_on(program, node.right, func, {"tl.minimum"})
                and _depends_on(program, node.right, func, {"tl.program_id"})
            ):
                hits.append(ast.unparse(node))
    return _result(
        bool(hits),
        "tiles are visited in grouped (swizzled) order",
        "tiles are visited in plain row-major order",
        hits,
    )


def indirect_load(program: Program, spec: dict[str, Any]) -> DetectorResult:
    """A tl.load whose address depends on values another tl.load read (a gather through
    an index table); with `vector`, the index load itself reads a tile (tl.arange)."""
    hits = []
    for site in program.device_sites():
        if site.name != "tl.load" or not site.node.args:
            continue
        for node, owner in program.closure(site.node.args[0], site.func):
            if (
                isinstance(node, ast.Call)
                and node is not site.node
                and program.canon(node.func, True) == "tl.load"
                and node.args
            ) and (
                not spec.get("vector")
                or (owner is not None and _depends_on(program, node.args[0], owner, {"tl.arange"}))
            ):
                hits.append(site.line)
                break
    return _result(
        bool(hits),
        "loads gather through indices read by other loads",
        "no load's address depends on loaded indices",
        hits,
    )
