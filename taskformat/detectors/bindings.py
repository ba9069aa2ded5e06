"""What a call passes for a jit function's parameters: the expressions at a launch or
call, the signature's defaults, an autotune decorator's configs (program.Program
folds them into the function's branches)."""

from __future__ import annotations

import ast
from typing import Any

MISSING = ast.Constant(value=None)


def argument(call: ast.Call, index: int, param: str) -> ast.expr | None:
    """The expression a call passes for parameter `index`/`param`; MISSING when it
    passes none; None when it cannot be told (`*args`, `**kwargs`)."""
    for k in call.keywords:
        if k.arg == param:
            return k.value
        if k.arg is None:
            return None
    args = call.args
    if any(isinstance(a, ast.Starred) for a in args[: index + 1]):
        return None
    return args[index] if index < len(args) else MISSING


def signature_defaults(args: ast.arguments) -> dict[str, Any]:
    positional = [*args.posonlyargs, *args.args]
    pairs = list(
        zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True)
    )
    pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d]
    return {
        a.arg: d.value
        for a, d in pairs
        if isinstance(d, ast.Constant) and isinstance(d.value, int | float | bool)
    }


def config_values(configs: list[ast.Call]) -> dict[str, list[Any]]:
    """Parameter -> the constant each autotune config (`triton.Config(...)`) gives it
    (every config must)."""
    out: dict[str, list[Any]] = {}
    dicts = [c.args[0] for c in configs if c.args and isinstance(c.args[0], ast.Dict)]
    if not dicts or len(dicts) != len(configs):
        return out
    for cfg in dicts:
        for key, value in zip(cfg.keys, cfg.values, strict=False):
            if isinstance(key, ast.Constant) and isinstance(value, ast.Constant):
                out.setdefault(str(key.value), []).append(value.value)
    return {k: v for k, v in out.items() if len(v) == len(dicts)}
