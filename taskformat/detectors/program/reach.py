"""What runs: the host functions `ModelNew.forward` (and `__init__`) reach, the kernels
they launch as `kernel[grid](...)` and the jit functions those call, the CUDA/C++ sources
handed to `load_inline`; given `launched` (the kernel names the profiler saw), a jit
function launched under no such name is not reached at all."""

from __future__ import annotations

import ast

from taskformat.detectors.program.source import ProgramSource
from taskformat.detectors.program.syntax import Func, Site, dotted

_INLINE = frozenset({"torch.utils.cpp_extension.load_inline", "cupy.RawKernel", "cupy.RawModule"})


class Reachability(ProgramSource):
    def _reach(self) -> None:
        """Walk from `ModelNew.forward` and `__init__` through what they call: the host
        functions, the kernels they launch (only those the profiler saw, given `launched`)
        and the jit functions those call or pass on."""
        roots = [self.funcs.get(f"ModelNew.{m}") for m in ("forward", "__init__")]
        if roots[0] is None:
            return
        self.host = [self.module, *[r for r in roots if r]]
        self._reach_host()
        self._reach_device()

    def _reach_host(self) -> None:
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

    def _reach_device(self) -> None:
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
