"""`Program`: the source collected, what runs reached from `ModelNew`, the launches'
constants folded into the kernels' branches, and the queries detectors ask of it."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from typing import Any

from taskformat.detectors.cuda import drop_kernels, strip_c
from taskformat.detectors.program.folding import ConstantFolding
from taskformat.detectors.program.loops import LoopFacts
from taskformat.detectors.program.reach import Reachability
from taskformat.detectors.program.syntax import (
    LOOPS,
    Func,
    Site,
    Visit,
    record_defs,
    visit_all,
)


class Program(ConstantFolding, Reachability, LoopFacts):
    def __init__(self, source: str, launched: Iterable[str] | None = None):
        self.launched = None if launched is None else frozenset(launched)
        self.param_values = {}
        self._override = {}
        self._const_depth = 0
        self._scanning: Func | None = None
        self.unlaunched = []
        # Facts the primitives derive and share (dataflow.stored_nodes).
        self.cache: dict[str, Any] = {}
        super().__init__(source)
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
        self.host, self.device, self.launches, self.cuda_raw = [], [], [], []
        self.unlaunched = []
        self._reach()
        self.cuda = strip_c("\n".join(self.cuda_raw))
        if self.launched is not None:
            self.cuda, dropped = drop_kernels(self.cuda, self.launched)
            self.unlaunched += dropped
        self._loop_facts()

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
            record_defs(stmt, func.defs)
            if isinstance(stmt, LOOPS):
                func.loops.append(stmt)

    def live(
        self, stmts: list[ast.stmt], loops: tuple[ast.stmt, ...], visit: Visit
    ) -> Iterator[tuple[ast.stmt, tuple[ast.stmt, ...]]]:
        """Yield the live statements of `stmts` with their enclosing loops, calling
        `visit(node, loops)` for every expression node in live code."""
        for stmt in stmts:
            yield stmt, loops
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                continue
            if isinstance(stmt, ast.If):
                visit_all(stmt.test, loops, visit)
                cond = self.branch(stmt.test, self._scanning)
                if cond is None or cond:
                    yield from self.live(stmt.body, loops, visit)
                if cond is None or not cond:
                    yield from self.live(stmt.orelse, loops, visit)
            elif isinstance(stmt, LOOPS):
                if isinstance(stmt, ast.While):
                    if self.branch(stmt.test, self._scanning) is False:
                        continue
                    visit_all(stmt.test, (*loops, stmt), visit)
                else:
                    visit_all(stmt.iter, loops, visit)
                    visit_all(stmt.target, (*loops, stmt), visit)
                yield from self.live(stmt.body, (*loops, stmt), visit)
                yield from self.live(stmt.orelse, loops, visit)
            elif isinstance(stmt, ast.With | ast.AsyncWith):
                for item in stmt.items:
                    visit_all(item.context_expr, loops, visit)
                yield from self.live(stmt.body, loops, visit)
            elif isinstance(stmt, ast.Try):
                for block in (stmt.body, *[h.body for h in stmt.handlers], stmt.orelse):
                    yield from self.live(block, loops, visit)
                yield from self.live(stmt.finalbody, loops, visit)
            else:
                visit_all(stmt, loops, visit)
            if isinstance(stmt, ast.Return | ast.Raise | ast.Continue | ast.Break):
                return

    # -- queries ------------------------------------------------------------------------------

    def device_sites(self) -> Iterator[Site]:
        for func in self.device:
            yield from func.sites

    def host_sites(self) -> Iterator[Site]:
        for func in self.host:
            yield from func.sites

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
