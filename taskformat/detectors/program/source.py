"""The source as written: parsed once, its imports, functions, classes and module-level
definitions collected, and every call's name made canonical (`canon`). The base of
`Program`: the stages that follow (reachability, folding, loops) read what it holds."""

from __future__ import annotations

import ast
from typing import Any

from taskformat.detectors.program.syntax import MEMBER_FNS, Func, Site, dotted, record_defs

_PREFIXES = (
    ("triton.language.math.", "tl."),
    ("triton.language.core.", "tl."),
    ("triton.language.standard.", "tl."),
    ("triton.language.", "tl."),
)


class ProgramSource:
    """What every stage of a `Program` reads and writes, and the collection of the source."""

    # The kernel names the profiler saw (None: every launch counts).
    launched: frozenset[str] | None
    # (function, parameter) -> every value it takes at the reachable launches and calls.
    param_values: dict[tuple[str, str], frozenset[Any]]
    # Live code, reached from ModelNew: host functions, jit functions, kernel launches.
    host: list[Func]
    device: list[Func]
    launches: list[Site]
    # The CUDA/C++ text of load_inline, raw and without comments, and the jit functions
    # and CUDA kernels left out because the profiler saw them not run.
    cuda_raw: list[str]
    cuda: str
    unlaunched: list[str]

    def __init__(self, source: str) -> None:
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

    def canon(self, expr: ast.AST, device: bool) -> str:
        """The canonical name of a call's target: an imported name by its full path,
        Triton's functions as `tl.*` however imported (in device code, a tensor method
        of Triton's too), any other method as `.attr`; "" for what has no name."""
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
                record_defs(stmt, self.module_defs)

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
