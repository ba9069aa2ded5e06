"""What the code computes before it runs: constant folding, and the values a jit
function's parameters take at every reachable launch and call (a constant, a default, an
autotune config's values), folded into its branches so that a branch false for every
value passed is dead."""

from __future__ import annotations

import ast
import itertools
import math
from typing import Any

from taskformat.detectors.bindings import MISSING, argument, config_values, signature_defaults
from taskformat.detectors.program.source import ProgramSource
from taskformat.detectors.program.syntax import Func

# At most this many combinations of known parameter values are tried on a branch.
MAX_COMBINATIONS = 64
_MATH = {"math.e": math.e, "math.pi": math.pi, "math.inf": math.inf}

_BINOPS = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
    ast.Pow: lambda a, b: a**b,
}


_COMPARE = {
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
}


class ConstantFolding(ProgramSource):
    # A parameter's value while `branch` tries one combination; the recursion depth of `const`.
    _override: dict[str, Any]
    _const_depth: int

    def const(self, expr: ast.AST | None, func: Func | None = None):
        """The value `expr` folds to (numbers, bools, module constants, `math`), or None."""
        if expr is None or self._const_depth > 20:
            return None
        self._const_depth += 1
        try:
            return _fold(self, expr, func)
        finally:
            self._const_depth -= 1

    def branch(self, test: ast.expr, func: Func | None) -> bool | None:
        """Whether a branch condition holds: True or False when it does (or does not) for
        every combination of the values its function's parameters take, else None."""
        cond = self.const(test)
        if cond is not None:
            return bool(cond)
        if func is None or not self.param_values:
            return None
        names = sorted(
            {
                n.id
                for n in ast.walk(test)
                if isinstance(n, ast.Name) and (func.name, n.id) in self.param_values
            }
        )
        if not names:
            return None
        choices = [sorted(self.param_values[(func.name, n)], key=repr) for n in names]
        if math.prod(len(c) for c in choices) > MAX_COMBINATIONS:
            return None
        outcomes = set()
        for combo in itertools.product(*choices):
            self._override = dict(zip(names, combo, strict=True))
            try:
                got = self.const(test)
            finally:
                self._override = {}
            if got is None:
                return None
            outcomes.add(bool(got))
        return outcomes.pop() if len(outcomes) == 1 else None

    def _param_env(self) -> dict[tuple[str, str], frozenset[Any]]:
        """For each reachable jit function, the parameters every reachable launch and
        call fixes to known constants (or the function's default, or its autotune
        configs), with the set of values they take. A parameter the function reassigns,
        or one any call leaves unknown, is left out."""
        env: dict[tuple[str, str], frozenset[Any]] = {}
        for func in self.device:
            sites = [
                s
                for f in [*self.host, *self.device]
                for s in f.sites
                if func in (s.callee, s.launch)
            ]
            if not sites:
                continue
            assigned = {
                n.id
                for n in ast.walk(func.node)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
            }
            defaults = {} if func.supplied else signature_defaults(func.node.args)
            configured = config_values(func.configs)
            for index, param in enumerate(func.params):
                if param in assigned:
                    continue
                if param in configured:
                    found: set[Any] | None = set(configured[param])
                else:
                    found = set()
                    for site in sites:
                        expr = argument(site.node, index, param)
                        value = (
                            defaults.get(param)
                            if expr is MISSING
                            else (None if expr is None else self.const(expr, site.func))
                        )
                        if value is None:
                            found = None
                            break
                        found.add(value)
                if found:
                    env[(func.name, param)] = frozenset(found)
        return env


def _fold(program: ConstantFolding, expr: ast.AST, func: Func | None) -> Any:
    if isinstance(expr, ast.Constant):
        return expr.value if isinstance(expr.value, int | float | bool) else None
    if isinstance(expr, ast.UnaryOp | ast.Compare | ast.BoolOp | ast.BinOp):
        return _fold_operator(program, expr, func)
    if isinstance(expr, ast.Name):
        return _fold_name(program, expr, func)
    if isinstance(expr, ast.Attribute):
        return _MATH.get(program.canon(expr, False))
    if isinstance(expr, ast.Call):
        return _fold_call(program, expr, func)
    return None


def _fold_operator(
    program: ConstantFolding, expr: ast.UnaryOp | ast.Compare | ast.BoolOp | ast.BinOp, func
) -> Any:
    if isinstance(expr, ast.UnaryOp):
        value = program.const(expr.operand, func)
        if value is None:
            return None
        if isinstance(expr.op, ast.Not):
            return not value
        return -value if isinstance(expr.op, ast.USub) else value
    if isinstance(expr, ast.Compare) and type(expr.ops[0]) in _COMPARE and len(expr.ops) == 1:
        left, right = program.const(expr.left, func), program.const(expr.comparators[0], func)
        if left is None or right is None:
            return None
        return _COMPARE[type(expr.ops[0])](left, right)
    if isinstance(expr, ast.BoolOp):
        got = [program.const(v, func) for v in expr.values]
        if isinstance(expr.op, ast.And):
            if any(g is not None and not g for g in got):
                return False
            return None if any(g is None for g in got) else True
        if any(g is not None and g for g in got):
            return True
        return None if any(g is None for g in got) else False
    if isinstance(expr, ast.BinOp) and type(expr.op) in _BINOPS:
        left, right = program.const(expr.left, func), program.const(expr.right, func)
        if left is None or right is None:
            return None
        try:
            return _BINOPS[type(expr.op)](left, right)
        except (ArithmeticError, ValueError, TypeError):
            return None
    return None


def _fold_name(program: ConstantFolding, expr: ast.Name, func: Func | None) -> Any:
    if expr.id == "TYPE_CHECKING":
        return False
    if expr.id in program._override:
        return program._override[expr.id]
    if func is not None and expr.id in func.defs:
        values, owner = func.defs[expr.id], func
    elif func is not None and expr.id in func.params:
        known = program.param_values.get((func.name, expr.id))
        return next(iter(known)) if known is not None and len(known) == 1 else None
    else:
        values, owner = program.module_defs.get(expr.id, []), None
    return program.const(values[0], owner) if len(values) == 1 else None


_FUNCTIONS = {
    "math.log": math.log,
    "math.log2": math.log2,
    "math.exp": math.exp,
    "math.sqrt": math.sqrt,
}


def _fold_call(program: ConstantFolding, expr: ast.Call, func: Func | None) -> Any:
    name = program.canon(expr.func, False)
    args = [program.const(a, func) for a in expr.args]
    if name.endswith("constexpr") and len(args) == 1:
        return args[0]
    if any(a is None for a in args) or not args or name not in _FUNCTIONS:
        return None
    try:
        return _FUNCTIONS[name](*args)
    except (ValueError, TypeError):
        return None
