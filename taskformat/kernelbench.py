"""A KernelBench problem file as a task package (docs/task-format.md), Django-free.

A KernelBench problem is one Python file: `class Model(nn.Module)`, `get_inputs()`,
`get_init_inputs()` and module-level size constants. It becomes a task of one
problem size: `reference.py` is the file unchanged (its functions take no
parameters, so the workloads' `params` are `{}`), one timed workload for the GPU
and the same shape as the check workload for Triton's CPU interpreter. Bytes moved
are counted by running the problem on PyTorch's meta device (shapes only, no data).
"""

from __future__ import annotations

import ast
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomli_w

SLUG_PREFIX = "kb-"
CATEGORY = "kernelbench"
# KernelBench compares with atol = rtol = 1e-2; half-precision outputs get more room.
TOLERANCES = {
    "default": {"atol": 1e-2, "rtol": 1e-2, "rel_l2": 1e-2},
    "float16": {"atol": 5e-2, "rtol": 5e-2, "rel_l2": 2e-2},
    "bfloat16": {"atol": 5e-2, "rtol": 5e-2, "rel_l2": 2e-2},
}
REQUIRED = ("Model", "get_inputs", "get_init_inputs")


class KernelBenchError(ValueError):
    """The file is not a KernelBench problem (one line, names the file)."""


@dataclass(frozen=True)
class KernelBenchProblem:
    slug: str
    title: str
    source: str
    docstring: str
    constants: dict[str, Any]


def _slug(path: Path) -> tuple[str, str]:
    """`level1/19_ReLU.py` → ("kb-l1-19-relu", "KernelBench L1 #19: ReLU")."""
    level = re.fullmatch(r"level(\d+)", path.parent.name)
    match = re.fullmatch(r"(\d+)_(.+)", path.stem)
    number, name = (match.group(1), match.group(2)) if match else ("", path.stem)
    words = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    parts = [f"l{level.group(1)}" if level else "", number, words]
    slug = SLUG_PREFIX + "-".join(p for p in parts if p)
    if len(slug) > 64:
        slug = slug[:64].rstrip("-")
    where = " ".join(
        p for p in (f"L{level.group(1)}" if level else "", f"#{number}" if number else "") if p
    )
    title = f"KernelBench {where}: {name.replace('_', ' ')}".replace(
        "KernelBench : ", "KernelBench: "
    )
    return slug, title


def kernelbench_parse(path: Path) -> KernelBenchProblem:
    """Read a problem file without running it."""
    path = Path(path)
    try:
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source, filename=str(path))
    except (OSError, UnicodeDecodeError, SyntaxError) as exc:
        raise KernelBenchError(f"{path}: {exc}") from exc
    defined = {n.name for n in tree.body if isinstance(n, ast.ClassDef | ast.FunctionDef)}
    missing = [name for name in REQUIRED if name not in defined]
    if missing:
        raise KernelBenchError(f"{path}: not a KernelBench problem (no {', '.join(missing)})")
    model = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model")
    docstring = ast.get_docstring(model) or ast.get_docstring(tree) or ""
    constants: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                try:
                    value = ast.literal_eval(node.value)
                except (ValueError, SyntaxError):
                    continue
                if isinstance(value, int | float | str | bool | tuple | list):
                    constants[target.id] = value
    slug, title = _slug(path)
    return KernelBenchProblem(
        slug=slug, title=title, source=source, docstring=docstring, constants=constants
    )


def kernelbench_bytes(source: str) -> tuple[int, str]:
    """(bytes of the inputs and outputs, the first floating output dtype) on the meta device."""
    import torch

    namespace: dict[str, Any] = {"__name__": "kernelbench_problem"}
    with torch.device("meta"):
        exec(compile(source, "reference.py", "exec"), namespace)
        inputs = list(namespace["get_inputs"]())
        model = namespace["Model"](*namespace["get_init_inputs"]())
        out = model(*inputs)
    outputs = list(out) if isinstance(out, tuple | list) else [out]
    tensors = [t for t in (*inputs, *outputs) if isinstance(t, torch.Tensor)]
    dtypes = [str(t.dtype).removeprefix("torch.") for t in outputs if isinstance(t, torch.Tensor)]
    return sum(t.numel() * t.element_size() for t in tensors), (dtypes or ["float32"])[0]


def _statement(problem: KernelBenchProblem, dtype: str) -> str:
    sizes = "\n".join(f"- `{k} = {v!r}`" for k, v in problem.constants.items())
    return (
        f"{problem.docstring.strip() or 'Implement the operator of the reference `Model`.'}\n\n"
        "This task is a KernelBench problem: implement `ModelNew` with the constructor "
        "and `forward` of the reference `Model` below, at its one problem size"
        + (f":\n\n{sizes}\n\n" if sizes else ".\n\n")
        + f"The output's dtype is `{dtype}`; tolerances follow it (KernelBench's 1e-2 "
        "for float32).\n"
    )


def kernelbench_package_write(problem: KernelBenchProblem, catalog_dir: Path) -> Path:
    """Write `catalog_dir/<slug>/` (task.toml, statement.md, reference.py, …); returns it."""
    try:
        nbytes, dtype = kernelbench_bytes(problem.source)
    except Exception as exc:  # the problem's own code failed: report it, in one line
        message = f"{problem.slug}: the problem does not run on meta tensors: {exc}"
        raise KernelBenchError(message) from exc
    folder = Path(catalog_dir) / problem.slug
    (folder / "guidance").mkdir(parents=True, exist_ok=True)
    meta = {
        "slug": problem.slug,
        "title": problem.title,
        "category": CATEGORY,
        "seeds": 3,
        "notes": "Imported from a KernelBench problem file by manage.py import_kernelbench.",
        "tolerances": TOLERANCES,
        "workloads": [{"name": "problem", "params": {}, "flops": "0", "bytes": str(nbytes)}],
        "checks": [{"name": "problem_check", "params": {}}],
    }
    tomllib.loads(tomli_w.dumps(meta))  # what load_task will read back
    files = {
        "task.toml": tomli_w.dumps(meta),
        "statement.md": _statement(problem, dtype),
        "reference.py": problem.source,
        "expert.py": "# KernelBench problems come without an expert implementation.\n",
        **{f"guidance/L{n}.md": "" for n in (1, 2, 3)},
    }
    for name, text in files.items():
        target = folder / name
        if not target.is_file() or target.read_text() != text:
            target.write_text(text)
    return folder
