"""The pieces of a program detectors name: functions, call sites, and the syntax helpers
every stage shares (dotted names, the definitions a statement makes)."""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field

LOOPS = (ast.For, ast.While, ast.AsyncFor)
# Triton functions that are also tensor methods: `x.exp2()` is `tl.exp2(x)`.
MEMBER_FNS = frozenset(
    [
        "abs",
        "argmax",
        "argmin",
        "associative_scan",
        "broadcast_to",
        "cast",
        "cumprod",
        "cumsum",
        "exp",
        "exp2",
        "flip",
        "histogram",
        "log",
        "log2",
        "max",
        "min",
        "permute",
        "ravel",
        "reduce",
        "reshape",
        "sigmoid",
        "softmax",
        "sort",
        "sqrt",
        "sum",
        "trans",
        "view",
        "xor_sum",
    ]
)
LOADS = frozenset({"tl.load", ".load", "tl.async_copy"})


def dotted(node: ast.AST) -> str:
    """`a.b.c` for a chain of names and attributes, else ""."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


@dataclass(eq=False)
class Func:
    node: ast.FunctionDef | ast.AsyncFunctionDef
    name: str
    cls: str | None
    device: bool
    params: list[str]
    constexpr: set[str]
    configs: list[ast.Call] = field(default_factory=list)  # triton.Config(...) of autotune
    # A decorator that may supply parameters the launch leaves out (heuristics, an
    # autotune whose configs are not a literal list): no default can be trusted.
    supplied: bool = False
    defs: dict[str, list[ast.expr]] = field(default_factory=dict)
    sites: list[Site] = field(default_factory=list)
    loops: list[ast.stmt] = field(default_factory=list)
    nodes: list[tuple[ast.AST, tuple[ast.stmt, ...]]] = field(default_factory=list)


@dataclass(eq=False)
class Site:
    """One call in live code of a function."""

    node: ast.Call
    name: str  # canonical: "tl.dot", ".to" for a method, "f" for a plain name
    func: Func
    loops: tuple[ast.stmt, ...]  # enclosing loops inside `func`
    stmt: ast.stmt | None = None  # the statement it lies in
    callee: Func | None = None  # the user function it calls
    launch: Func | None = None  # the kernel of `kernel[grid](...)`

    @property
    def line(self) -> str:
        return ast.unparse(self.node)[:160]


Visit = Callable[[ast.AST, tuple[ast.stmt, ...]], None]


def visit_all(node: ast.AST, loops: tuple[ast.stmt, ...], visit: Visit) -> None:
    for sub in ast.walk(node):
        visit(sub, loops)


def record_defs(stmt: ast.stmt, defs: dict[str, list[ast.expr]]) -> None:
    """Add what `stmt` assigns to `defs` (name -> every expression assigned to it)."""

    def bind(target: ast.expr, value: ast.expr) -> None:
        if isinstance(target, ast.Name):
            defs.setdefault(target.id, []).append(value)
        elif isinstance(target, ast.Tuple | ast.List):
            if isinstance(value, ast.Tuple | ast.List) and len(value.elts) == len(target.elts):
                for t, v in zip(target.elts, value.elts, strict=True):
                    bind(t, v)
            else:
                for i, t in enumerate(target.elts):
                    bind(t, ast.Subscript(value=value, slice=ast.Constant(i), ctx=ast.Load()))

    if isinstance(stmt, ast.Assign):
        for target in stmt.targets:
            bind(target, stmt.value)
    elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
        bind(stmt.target, stmt.value)
    elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
        defs.setdefault(stmt.target.id, []).append(
            ast.BinOp(left=ast.Name(stmt.target.id, ast.Load()), op=stmt.op, right=stmt.value)
        )
    elif isinstance(stmt, ast.For | ast.AsyncFor):
        bind(stmt.target, stmt.iter)
