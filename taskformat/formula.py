"""Safe evaluation of the FLOP and byte formulas of a task package.

A formula is an arithmetic expression over the workload's parameters, e.g.
`2 * M * N * K` or `rows * cols * (2 * esize)`, where `esize` is the size in
bytes of the workload's `dtype`. Only numbers, names, + - * / // % ** and
parentheses are allowed, plus min/max/ceil/log2: a formula can never run code.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping
from typing import Any

DTYPE_SIZES = {
    "float64": 8,
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "int64": 8,
    "int32": 4,
    "int16": 2,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
}

_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_FUNCS: dict[str, Callable[..., Any]] = {
    "min": min,
    "max": max,
    "ceil": math.ceil,
    "log2": math.log2,
    "sum": sum,
}


class FormulaError(ValueError):
    pass


def formula_names(params: Mapping[str, Any]) -> dict[str, Any]:
    names = dict(params)
    if "dtype" in params and "esize" not in names:
        names["esize"] = DTYPE_SIZES.get(str(params["dtype"]), 4)
    return names


def evaluate_formula(expression: str | float | int, params: Mapping[str, Any]) -> float:
    if isinstance(expression, int | float):
        return float(expression)
    names = formula_names(params)
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as exc:
        raise FormulaError(f"formula {expression!r} is not an expression: {exc.msg}") from exc
    return float(_eval(tree.body, names, expression))


def _eval(node: ast.AST, names: Mapping[str, Any], src: str) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in names:
            raise FormulaError(f"formula {src!r} uses unknown name {node.id!r}")
        return names[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return _BINOPS[type(node.op)](_eval(node.left, names, src), _eval(node.right, names, src))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval(node.operand, names, src)
    if isinstance(node, ast.List | ast.Tuple):
        return [_eval(e, names, src) for e in node.elts]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCS
        and not node.keywords
    ):
        return _FUNCS[node.func.id](*(_eval(a, names, src) for a in node.args))
    raise FormulaError(f"formula {src!r} may only use arithmetic on workload parameters")
