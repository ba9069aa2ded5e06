"""The modules a package's source imports, read with `ast` (nothing is imported to find them).

Relative imports are resolved against the file's own package, so `from ..evaluator import x`
counts as importing `evaluator`; `importlib.import_module("…")` and `__import__("…")` with a
literal name count too.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path


def imported_modules(path: Path, *, root: Path) -> list[str]:
    """Every absolute module name `path` imports (with `module.name` for each `from` name);
    `root` is the folder that holds the top-level package `path` belongs to."""
    package = list(path.relative_to(root).with_suffix("").parts[:-1])
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: max(len(package) - node.level + 1, 0)] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            if module:
                names.append(module)
            names += [f"{module}.{alias.name}".lstrip(".") for alias in node.names]
        elif isinstance(node, ast.Call) and (name := _dynamic_import(node)):
            names.append(name)
    return names


def _dynamic_import(call: ast.Call) -> str | None:
    """The literal module name of an `import_module("…")` or `__import__("…")` call."""
    func = call.func
    called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if called not in ("import_module", "__import__") or not call.args:
        return None
    first = call.args[0]
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None


def imports_of_package(package_dir: Path) -> Iterator[tuple[Path, str]]:
    """(file, imported module) for every module of the package folder, sorted by file."""
    for path in sorted(package_dir.rglob("*.py")):
        for name in imported_modules(path, root=package_dir.parent):
            yield path, name


def reaches(name: str, package: str) -> bool:
    return name == package or name.startswith(f"{package}.")
