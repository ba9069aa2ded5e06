"""Numeric intent: exp2 with log2(e), constants, centred moments."""

from __future__ import annotations

import ast
import re
from typing import Any

from taskformat.detectors.primitives.common import LN2, LOG2E, _near, _result
from taskformat.detectors.program import Func, Program
from taskformat.detectors.result import DetectorError, DetectorResult


def _is_log2e(program: Program, node: ast.AST, owner: Func | None) -> bool:
    if _near(program.const(node, owner), LOG2E):
        return True
    if isinstance(node, ast.Name) and owner is not None and node.id in owner.params:
        return any(_near(program.const(v, f), LOG2E) for v, f in program.bindings(owner, node.id))
    return False


def _scaled_by_log2e(program: Program, node: ast.AST, owner: Func | None) -> bool:
    if not isinstance(node, ast.BinOp):
        return False
    if isinstance(node.op, ast.Mult):
        return _is_log2e(program, node.left, owner) or _is_log2e(program, node.right, owner)
    if isinstance(node.op, ast.Div):
        return _near(program.const(node.right, owner), LN2)
    return False


_CUDA_EXP2 = re.compile(r"\b(exp2f?|__exp2f|h2exp2|hexp2)\s*\(|ex2\.approx")


_CUDA_LOG2E = re.compile(r"\b1\.44269504\d*f?\b|\bM_LOG2E\b")


def exp2_log2e(program: Program, spec: dict[str, Any]) -> DetectorResult:
    """tl.exp2 of a value that was multiplied by log2(e) (1.4426950..., or divided by
    ln 2), on the device or folded into a scale on the host, whatever its name."""
    hits = []
    for site in program.device_sites():
        if site.name != "tl.exp2" or not site.node.args:
            continue
        if any(
            _scaled_by_log2e(program, n, f)
            for n, f in program.closure(site.node.args[0], site.func)
        ):
            hits.append(site.line)
    cuda = bool(_CUDA_EXP2.search(program.cuda) and _CUDA_LOG2E.search(program.cuda))
    return _result(
        bool(hits) or cuda,
        "exp2 is applied to values pre-scaled by log2(e)",
        "no exp2 of a value scaled by log2(e) in reachable device code",
        hits or (["CUDA exp2 with a log2(e) constant"] if cuda else []),
    )


def centred_square(program: Program, spec: dict[str, Any]) -> DetectorResult:
    """tl.sum of d * d where d is a difference (x - mean): a centred second moment, not
    E[x^2] - mean^2; with `in_loop`, inside a loop."""
    hits = []
    for site in program.device_sites():
        if (
            site.name != "tl.sum"
            or not site.node.args
            or (spec.get("in_loop") and not program.in_loop(site))
        ):
            continue
        for node, owner in program.closure(site.node.args[0], site.func):
            if (
                owner is not site.func
                or not isinstance(node, ast.BinOp)
                or not isinstance(node.op, ast.Mult)
            ):
                continue
            if ast.unparse(node.left) == ast.unparse(node.right) and _is_difference(
                program, node.left, site.func
            ):
                hits.append(site.line)
                break
    return _result(
        bool(hits),
        "the second moment is summed over centred values",
        "no sum of squared differences",
        hits,
    )


def _is_difference(program: Program, node: ast.AST, func: Func, depth: int = 0) -> bool:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub):
        return True
    if isinstance(node, ast.Call) and program.canon(node.func, True) == "tl.where":
        return any(_is_difference(program, a, func, depth + 1) for a in node.args[1:])
    if isinstance(node, ast.Name) and depth < 4:
        return any(_is_difference(program, d, func, depth + 1) for d in func.defs.get(node.id, []))
    return False


def device_const(program: Program, spec: dict[str, Any]) -> DetectorResult:
    """A numeric constant with one of `values` (relative tolerance 1e-6) used in device
    code, written as a literal, a module constant or a launch argument, whatever its name."""
    targets = [float(v) for v in spec.get("values", [])]
    if not targets:
        raise DetectorError("device_const detector needs `values`")
    hits = []
    for func in program.device:
        for node, _ in func.nodes:
            if isinstance(node, ast.Constant | ast.Name | ast.BinOp | ast.UnaryOp):
                got = program.const(node, func)
                if any(_near(got, t) for t in targets):
                    hits.append(ast.unparse(node))
            if (
                isinstance(node, ast.Name)
                and node.id in func.params
                and any(
                    _near(program.const(v, f), t)
                    for v, f in program.bindings(func, node.id)
                    for t in targets
                )
            ):
                hits.append(node.id)
    return _result(
        bool(hits),
        f"device code uses the constant {targets}",
        f"device code never uses {targets}",
        hits,
    )
