"""The program a submission runs, as detectors see it.

`Program(source)` parses the source with `ast` (so comments, and docstrings and
strings that nothing executes, never count), starts at `ModelNew.forward` (and
`ModelNew.__init__`, which the harness runs too) and follows what they call:
module functions, methods, `autograd.Function.apply`, `@triton.jit` kernels
launched as `kernel[grid](...)` and the jit functions those call, and the
CUDA/C++ sources handed to `torch.utils.cpp_extension.load_inline`. Branches
whose condition folds to a constant (`if False:`) and code after a `return` are
dead. Code in jit functions is *device* code; the rest is *host* code.

What ran, not what is written: a jit function's parameter that every reachable
launch and call fixes (a constant, a default, an autotune config's values) is
folded into its branches, so a branch false for every value passed is dead; and
given `launched` (the kernel names the profiler saw), a jit function launched
under no such name is not reached at all.
"""

from __future__ import annotations

import ast
import itertools
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from taskformat.detectors.bindings import MISSING, argument, config_values, signature_defaults
from taskformat.detectors.cuda import drop_kernels, strip_c

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
_PREFIXES = (
    ("triton.language.math.", "tl."),
    ("triton.language.core.", "tl."),
    ("triton.language.standard.", "tl."),
    ("triton.language.", "tl."),
)
_INLINE = frozenset({"torch.utils.cpp_extension.load_inline", "cupy.RawKernel", "cupy.RawModule"})
_MATH = {"math.e": math.e, "math.pi": math.pi, "math.inf": math.inf}


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


# At most this many combinations of known parameter values are tried on a branch.
MAX_COMBINATIONS = 64


class Program:
    def __init__(self, source: str, launched: Iterable[str] | None = None):
        self.launched = None if launched is None else frozenset(launched)
        # (function, parameter) -> every value it takes at the reachable launches and calls.
        self.param_values: dict[tuple[str, str], frozenset[Any]] = {}
        self._override: dict[str, Any] = {}
        self._scanning: Func | None = None
        self.unlaunched: list[str] = []
        # Facts the primitives derive and share (dataflow.stored_nodes).
        self.cache: dict[str, Any] = {}
        self.ok = True
        try:
            self.tree = ast.parse(source)
        except SyntaxError:
            self.ok = False
            self.tree = ast.Module(body=[], type_ignores=[])
        self.aliases: dict[str, str] = {}
        self.module_defs: dict[str, list[ast.expr]] = {}
        self.funcs: dict[str, Func] = {}
        self.classes: dict[str, ast.ClassDef] = {}
        self._const_depth = 0
        self._collect_module()
        self.module = Func(
            node=ast.FunctionDef(
                name="<module>",
                args=ast.arguments(
                    posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]
                ),
                body=[
                    s for s in self.tree.body if not isinstance(s, ast.FunctionDef | ast.ClassDef)
                ],
                decorator_list=[],
            ),
            name="<module>",
            cls=None,
            device=False,
            params=[],
            constexpr=set(),
        )
        self._build()
        # Fold what the launches fix into the kernels' branches, until nothing changes
        # (a branch found dead can hide the only launch that passed another value).
        for _ in range(3):
            known = self._param_env()
            if known == self.param_values:
                break
            self.param_values = known
            self._build()

    def _build(self) -> None:
        for func in [*self.funcs.values(), self.module]:
            func.defs, func.sites, func.loops, func.nodes = {}, [], [], []
            self._scan(func)
        self.host: list[Func] = []
        self.device: list[Func] = []
        self.launches: list[Site] = []
        self.cuda_raw: list[str] = []
        self.unlaunched = []
        self._reach()
        self.cuda = strip_c("\n".join(self.cuda_raw))
        if self.launched is not None:
            self.cuda, dropped = drop_kernels(self.cuda, self.launched)
            self.unlaunched += dropped
        self._loop_facts()

    # -- collection -------------------------------------------------------------------------

    def canon(self, expr: ast.AST, device: bool) -> str:
        name = dotted(expr)
        if not name:
            return "." + expr.attr if isinstance(expr, ast.Attribute) else ""
        head, _, rest = name.partition(".")
        if head in self.aliases:
            name = self.aliases[head] + (f".{rest}" if rest else "")
        elif rest:
            attr = name.rsplit(".", 1)[-1]
            return f"tl.{attr}" if device and attr in MEMBER_FNS else f".{attr}"
        for old, new in _PREFIXES:
            if name.startswith(old):
                name = new + name[len(old) :]
                break
        if name.startswith("triton.") and name.count(".") > 1 and device:
            name = "tl." + name.rsplit(".", 1)[-1]
        if name.startswith("cupy.") and name.count(".") > 1:
            name = "cupy." + name.rsplit(".", 1)[-1]
        if device and name in ("min", "max") and name not in self.funcs:
            return {"min": "tl.minimum", "max": "tl.maximum"}[name]
        return name

    def _collect_module(self) -> None:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    self.aliases[(a.asname or a.name).split(".")[0]] = (
                        a.name if a.asname else a.name.split(".")[0]
                    )
            elif isinstance(node, ast.ImportFrom) and node.module:
                for a in node.names:
                    self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        for stmt in self.tree.body:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                self._add_func(stmt, None)
            elif isinstance(stmt, ast.ClassDef):
                self.classes[stmt.name] = stmt
                for item in stmt.body:
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                        self._add_func(item, stmt.name)
            else:
                _record_defs(stmt, self.module_defs)

    def _add_func(self, node: ast.FunctionDef | ast.AsyncFunctionDef, cls: str | None) -> None:
        device = False
        supplied = False
        configs: list[ast.Call] = []
        for dec in node.decorator_list:
            target = dec.func if isinstance(dec, ast.Call) else dec
            name = self.canon(target, False)
            if name.endswith(".jit") or name == "jit":
                device = name.startswith("triton") or name == "jit" or name.startswith("tl")
            elif name == "triton.autotune" and isinstance(dec, ast.Call):
                cfg = next((k.value for k in dec.keywords if k.arg == "configs"), None)
                cfg = cfg or (dec.args[0] if dec.args else None)
                if isinstance(cfg, ast.List | ast.Tuple):
                    configs = [c for c in cfg.elts if isinstance(c, ast.Call)]
                else:
                    supplied = True
            else:
                supplied = True
        args = node.args
        params = [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]]
        if cls and params and params[0] in ("self", "cls", "ctx"):
            params = params[1:]
        constexpr = {
            a.arg
            for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]
            if a.annotation is not None and dotted(a.annotation).endswith("constexpr")
        }
        qual = f"{cls}.{node.name}" if cls else node.name
        self.funcs[qual] = Func(node, qual, cls, device, params, constexpr, configs, supplied)

    def _scan(self, func: Func) -> None:
        current: list[ast.stmt | None] = [None]

        def visit(node: ast.AST, loops: tuple[ast.stmt, ...]) -> None:
            func.nodes.append((node, loops))
            if isinstance(node, ast.Call):
                name = self.canon(node.func, func.device)
                func.sites.append(Site(node, name, func, loops, current[0]))

        self._scanning = func
        for stmt, _ in self.live(func.node.body, (), visit):
            current[0] = stmt
            _record_defs(stmt, func.defs)
            if isinstance(stmt, LOOPS):
                func.loops.append(stmt)

    def live(self, stmts, loops, visit) -> Iterator[tuple[ast.stmt, tuple[ast.stmt, ...]]]:
        """Yield the live statements of `stmts` with their enclosing loops, calling
        `visit(node, loops)` for every expression node in live code."""
        for stmt in stmts:
            yield stmt, loops
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                continue
            if isinstance(stmt, ast.If):
                _visit_all(stmt.test, loops, visit)
                cond = self.branch(stmt.test, self._scanning)
                if cond is None or cond:
                    yield from self.live(stmt.body, loops, visit)
                if cond is None or not cond:
                    yield from self.live(stmt.orelse, loops, visit)
            elif isinstance(stmt, LOOPS):
                if isinstance(stmt, ast.While):
                    if self.branch(stmt.test, self._scanning) is False:
                        continue
                    _visit_all(stmt.test, (*loops, stmt), visit)
                else:
                    _visit_all(stmt.iter, loops, visit)
                    _visit_all(stmt.target, (*loops, stmt), visit)
                yield from self.live(stmt.body, (*loops, stmt), visit)
                yield from self.live(stmt.orelse, loops, visit)
            elif isinstance(stmt, ast.With | ast.AsyncWith):
                for item in stmt.items:
                    _visit_all(item.context_expr, loops, visit)
                yield from self.live(stmt.body, loops, visit)
            elif isinstance(stmt, ast.Try):
                for block in (stmt.body, *[h.body for h in stmt.handlers], stmt.orelse):
                    yield from self.live(block, loops, visit)
                yield from self.live(stmt.finalbody, loops, visit)
            else:
                _visit_all(stmt, loops, visit)
            if isinstance(stmt, ast.Return | ast.Raise | ast.Continue | ast.Break):
                return

    # -- reachability -----------------------------------------------------------------------

    def _resolve(self, site: Site) -> None:
        func, call = site.func, site.node
        if isinstance(call.func, ast.Subscript):
            for name in self._names_behind(call.func.value, func):
                target = self.funcs.get(name)
                if target and target.device:
                    site.launch = target
            return
        if isinstance(call.func, ast.Name):
            name = call.func.id
            if name in self.classes:
                site.callee = self.funcs.get(f"{name}.forward") or self.funcs.get(
                    f"{name}.__call__"
                )
                init = self.funcs.get(f"{name}.__init__")
                if init and init not in self.host:
                    self.host.append(init)
            else:
                site.callee = self.funcs.get(name)
            return
        if isinstance(call.func, ast.Attribute):
            owner, attr = dotted(call.func.value), call.func.attr
            if owner in ("self", "cls") and func.cls:
                site.callee = self.funcs.get(f"{func.cls}.{attr}") or self._member(func.cls, attr)
            elif owner in self.classes:
                site.callee = self.funcs.get(f"{owner}.{'forward' if attr == 'apply' else attr}")

    def _member(self, cls: str, attr: str) -> Func | None:
        """`self.attr(...)` where `__init__` set `self.attr = SomeModule(...)`."""
        for func in self.funcs.values():
            if func.cls != cls:
                continue
            for node in ast.walk(func.node):
                if (
                    isinstance(node, ast.Assign)
                    and any(dotted(t) == f"self.{attr}" for t in node.targets)
                    and isinstance(node.value, ast.Call)
                    and dotted(node.value.func) in self.classes
                ):
                    name = dotted(node.value.func)
                    return self.funcs.get(f"{name}.forward") or self.funcs.get(f"{name}.__call__")
        return None

    def _names_behind(self, expr: ast.expr, func: Func, depth: int = 0) -> set[str]:
        """Function names an expression may evaluate to (through local assignments)."""
        names: set[str] = set()
        for node in ast.walk(expr):
            if isinstance(node, ast.Name):
                if node.id in self.funcs:
                    names.add(node.id)
                elif depth < 3:
                    for value in func.defs.get(node.id, []) + self.module_defs.get(node.id, []):
                        names |= self._names_behind(value, func, depth + 1)
        return names

    def _reach(self) -> None:
        roots = [self.funcs.get(f"ModelNew.{m}") for m in ("forward", "__init__")]
        if roots[0] is None:
            return
        self.host = [self.module, *[r for r in roots if r]]
        i = 0
        while i < len(self.host):
            for site in self.host[i].sites:
                self._resolve(site)
                if site.callee and not site.callee.device and site.callee not in self.host:
                    self.host.append(site.callee)
                if site.launch and not self._was_launched(site.launch):
                    self.unlaunched.append(site.launch.name)
                    site.launch = None
                if site.launch:
                    self.launches.append(site)
                    if site.launch not in self.device:
                        self.device.append(site.launch)
                if site.name in _INLINE:
                    self.cuda_raw += self._inline_sources(site)
            i += 1
        i = 0
        while i < len(self.device):
            func = self.device[i]
            for site in func.sites:
                if isinstance(site.node.func, ast.Name):
                    target = self.funcs.get(site.node.func.id)
                    if target and target.device:
                        site.callee = target
            # Jit functions called, or passed on (a combine function of tl.reduce).
            for node, _ in func.nodes:
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                    target = self.funcs.get(node.id)
                    if target and target.device and target not in self.device:
                        self.device.append(target)
            i += 1

    def _was_launched(self, kernel: Func) -> bool:
        return self.launched is None or kernel.name in self.launched

    # -- what the launches fix ----------------------------------------------------------------

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

    def _inline_sources(self, site: Site) -> list[str]:
        call = site.node
        exprs = [k.value for k in call.keywords if k.arg in ("cpp_sources", "cuda_sources", "code")]
        if site.name == "torch.utils.cpp_extension.load_inline":
            exprs += call.args[1:3]
        else:
            exprs += call.args[:1]
        return [self.string(e, site.func) for e in exprs]

    def string(self, expr: ast.expr, func: Func | None, depth: int = 0) -> str:
        """The text a string-valued expression holds, as far as it is static."""
        if depth > 8:
            return ""
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            return expr.value
        if isinstance(expr, ast.JoinedStr):
            return "".join(self.string(v, func, depth + 1) for v in expr.values)
        if isinstance(expr, ast.FormattedValue):
            return self.string(expr.value, func, depth + 1)
        if isinstance(expr, ast.List | ast.Tuple):
            return "\n".join(self.string(e, func, depth + 1) for e in expr.elts)
        if isinstance(expr, ast.BinOp):
            return self.string(expr.left, func, depth + 1) + self.string(
                expr.right, func, depth + 1
            )
        if isinstance(expr, ast.Call):
            parts = list(expr.args) + [k.value for k in expr.keywords]
            if isinstance(expr.func, ast.Attribute):
                parts.insert(0, expr.func.value)
            return "\n".join(self.string(e, func, depth + 1) for e in parts)
        if isinstance(expr, ast.Name):
            values = (func.defs.get(expr.id) if func else None) or self.module_defs.get(expr.id, [])
            return "\n".join(self.string(v, func, depth + 1) for v in values)
        return ""

    # -- loops --------------------------------------------------------------------------------

    def _loop_facts(self) -> None:
        loads = {f: any(s.name in LOADS for s in f.sites) for f in self.device}
        for _ in range(len(self.device)):
            for f in self.device:
                loads[f] = loads[f] or any(
                    s.callee is not None and loads.get(s.callee) for s in f.sites
                )
        self._func_loads = loads
        self.load_loops: set[int] = set()
        for f in self.device:
            for site in f.sites:
                if site.name in LOADS or (site.callee is not None and loads.get(site.callee)):
                    self.load_loops |= {id(loop) for loop in site.loops}
        in_loop = dict.fromkeys(self.device, False)
        in_load_loop = dict.fromkeys(self.device, False)
        for _ in range(len(self.device)):
            for f in self.device:
                for site in f.sites:
                    if site.callee is None:
                        continue
                    if site.loops or in_loop[f]:
                        in_loop[site.callee] = True
                    if self.is_load_loop_site(site, in_load_loop):
                        in_load_loop[site.callee] = True
        self._in_loop, self._in_load_loop = in_loop, in_load_loop

    def is_load_loop_site(self, site: Site, inherited: dict[Func, bool] | None = None) -> bool:
        inherited = self._in_load_loop if inherited is None else inherited
        return any(id(loop) in self.load_loops for loop in site.loops) or inherited.get(
            site.func, False
        )

    def in_loop(self, site: Site) -> bool:
        return bool(site.loops) or self._in_loop.get(site.func, False)

    # -- queries ------------------------------------------------------------------------------

    def device_sites(self) -> Iterator[Site]:
        for func in self.device:
            yield from func.sites

    def host_sites(self) -> Iterator[Site]:
        for func in self.host:
            yield from func.sites

    def const(self, expr: ast.AST | None, func: Func | None = None):
        """The value `expr` folds to (numbers, bools, module constants, `math`), or None."""
        if expr is None or self._const_depth > 20:
            return None
        self._const_depth += 1
        try:
            return _fold(self, expr, func)
        finally:
            self._const_depth -= 1

    def bindings(self, func: Func, param: str) -> list[tuple[ast.expr, Func]]:
        """Expressions passed for `param` of `func` at its reachable calls and launches."""
        out: list[tuple[ast.expr, Func]] = []
        if param not in func.params:
            return out
        index = func.params.index(param)
        callers = self.device if func.device else self.host
        sites = [s for f in [*callers, *self.host] for s in f.sites if func in (s.callee, s.launch)]
        for site in dict.fromkeys(sites):
            args = site.node.args
            if index < len(args) and not any(isinstance(a, ast.Starred) for a in args[: index + 1]):
                out.append((args[index], site.func))
            out += [(k.value, site.func) for k in site.node.keywords if k.arg == param]
        for cfg in func.configs:
            if cfg.args and isinstance(cfg.args[0], ast.Dict):
                for key, value in zip(cfg.args[0].keys, cfg.args[0].values, strict=False):
                    if isinstance(key, ast.Constant) and key.value == param:
                        out.append((value, func))
        return out

    def closure(self, expr: ast.AST, func: Func | None) -> list[tuple[ast.AST, Func | None]]:
        """Every expression node `expr` depends on, following names to their assignments,
        parameters to what callers pass, and module names to their values."""
        seen: set[int] = set()
        out: list[tuple[ast.AST, Func | None]] = []
        todo: list[tuple[ast.AST, Func | None]] = [(expr, func)]
        while todo and len(out) < 5000:
            node, owner = todo.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            for sub in ast.walk(node):
                out.append((sub, owner))
                if not isinstance(sub, ast.Name) or not isinstance(sub.ctx, ast.Load):
                    continue
                if owner is not None and sub.id in owner.defs:
                    todo += [(v, owner) for v in owner.defs[sub.id]]
                if owner is not None and sub.id in owner.params:
                    todo += self.bindings(owner, sub.id)
                elif sub.id in self.module_defs and (owner is None or sub.id not in owner.defs):
                    todo += [(v, None) for v in self.module_defs[sub.id]]
        return out


def _visit_all(node: ast.AST, loops, visit) -> None:
    for sub in ast.walk(node):
        visit(sub, loops)


def _record_defs(stmt: ast.stmt, defs: dict[str, list[ast.expr]]) -> None:
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


def _fold(program: Program, expr: ast.AST, func: Func | None):
    if isinstance(expr, ast.Constant):
        return expr.value if isinstance(expr.value, int | float | bool) else None
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
    if isinstance(expr, ast.Name):
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
    name = program.canon(expr.func if isinstance(expr, ast.Call) else expr, False)
    if isinstance(expr, ast.Attribute):
        return _MATH.get(name)
    if isinstance(expr, ast.Call):
        args = [program.const(a, func) for a in expr.args]
        if name.endswith("constexpr") and len(args) == 1:
            return args[0]
        if any(a is None for a in args) or not args:
            return None
        fn = {
            "math.log": math.log,
            "math.log2": math.log2,
            "math.exp": math.exp,
            "math.sqrt": math.sqrt,
        }
        try:
            return fn[name](*args) if name in fn else None
        except (ValueError, TypeError):
            return None
    return None
