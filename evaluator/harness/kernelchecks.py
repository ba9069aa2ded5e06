"""What ran in a call: torch's ops and the GPU's kernels, against what a submission may run.

A submission computes its task in kernels of its own (its Triton JIT
functions, its `load_inline` `__global__`s). Torch's glue (allocation, views,
copies, fills, casts) may carry their data; a compute op, a library's kernel
or a call made of glue alone is flagged (`compute_op`, `forbidden_op`,
`library_kernel`, `glue_work`).
"""

from __future__ import annotations

import ast
import re

from taskformat.spec import TaskSpec, WorkloadSpec

from . import honesty
from .protocol import Observed, flag


def judge_ops(task: TaskSpec, spec: WorkloadSpec, ops: list[str], seen: Observed) -> None:
    """Flag every aten op the call made that is not glue: by allow-list, not by deny-list.

    An op the task names in `forbidden_ops` computes its very answer
    (`forbidden_op`); any other compute op is torch doing work the kernel was
    to do (`compute_op`). Each is named once per workload.
    """
    used = honesty.disallowed_ops(ops, task.allowed_ops)
    forbidden = sorted(set(used) & set(task.forbidden_ops))
    other = sorted(set(used) - set(task.forbidden_ops))
    found = []
    if forbidden:
        why = "a library op that computes this task's answer"
        found.append(flag("forbidden_op", f"{spec.name}: called {', '.join(forbidden)} ({why})"))
    if other:
        why = "torch compute ops; only allocation, views, copies, fills and casts are allowed"
        found.append(flag("compute_op", f"{spec.name}: called {', '.join(other)} ({why})"))
    seen.flags += [f for f in found if f not in seen.flags]


# Kernels a submission may run without compiling them: copies, fills and
# casts (torch's glue kernels), and the copy and set engines' records.
GLUE_KERNEL = re.compile(
    r"copy|Copy|fill|Fill|zero|Zero|Memcpy|Memset|memcpy|memset|CatArrayBatched|"
    r"cast|Cast|contiguous"
)
# The harness's own kernels (cover.py, and torch.cuda._sleep where the cover
# could not be loaded), which run inside an audit call's window.
HARNESS_KERNELS = ("d2k_cover", "spin_kernel")


def own_kernel_names(source: str) -> set[str]:
    """The kernels the submission declares: its Triton JIT functions and CUDA `__global__`s.

    A Triton kernel runs under its function's name (a function decorated
    with `triton.jit`, possibly under `autotune` or `heuristics`); a
    `load_inline` kernel under its `__global__` function's (demangled, with
    namespaces, template arguments and parameters), declared in a string
    the submission compiles. Only declarations count: a library kernel's
    name in a comment, a docstring or a variable declares nothing. A
    library's kernel (cuBLAS, CuPy, Inductor) is named by the library.
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and any(
            "jit" in ast.unparse(decorator) for decorator in node.decorator_list
        ):
            names.add(node.name)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            code = _LAUNCH_BOUNDS.sub(" ", _C_COMMENT.sub(" ", node.value))
            names.update(match.group(1) for match in _GLOBAL_KERNEL.finditer(code))
    return names


_C_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
_LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\s*\([^)]*\)")
_GLOBAL_KERNEL = re.compile(r"__global__[^;{(]*?\b([A-Za-z_][A-Za-z0-9_]*)\s*\(")


def kernel_base_name(kernel: str) -> str:
    """`void ns::name<T>(float*, int)` -> `name`: the kernel's own identifier."""
    text = kernel.strip()
    if text.startswith("void "):
        text = text[5:]
    text = text.split("(", 1)[0]
    depth, head = 0, []
    for char in text:
        depth += char == "<"
        if depth == 0:
            head.append(char)
        depth -= char == ">"
    return "".join(head).rsplit("::", 1)[-1].strip()


def library_kernels(kernels: list[str], own: set[str]) -> list[str]:
    """The kernels that are neither the submission's own nor glue, nor the harness's."""
    return sorted(
        k
        for k in kernels
        if isinstance(k, str)
        and kernel_base_name(k) not in own
        and not GLUE_KERNEL.search(k)
        and not any(name in k for name in HARNESS_KERNELS)
    )


def judge_glue(spec: WorkloadSpec, kernels: list[str], own: set[str], seen: Observed) -> None:
    """Flag a call of a correct workload whose every kernel was torch's glue (`glue_work`).

    Glue carries a kernel's data; it does not do its task. Judged only where
    the workload's outputs were right: a call that ran no kernel of its own
    and returned a wrong answer (nothing written, a view of an input) is
    `incorrect`, and the harness's own copy of its outputs is glue too.
    """
    kernels = [k for k in kernels or [] if isinstance(k, str)]
    ran = [k for k in kernels if not any(name in k for name in HARNESS_KERNELS)]
    if not ran or any(kernel_base_name(k) in own for k in ran):
        return
    if any(f.get("check") == "glue_work" for f in seen.flags):
        return
    shown = ", ".join(sorted({k[:80] for k in ran})[:4])
    seen.flags.append(
        flag("glue_work", f"{spec.name}: ran no kernel of its own, only torch's glue ({shown})")
    )


def judge_kernels(spec: WorkloadSpec, kernels: list[str], own: set[str], seen: Observed) -> None:
    kernels = [k for k in kernels or [] if isinstance(k, str)]
    found = library_kernels(kernels, own)
    if not found:
        return
    shown = ", ".join(name[:160] for name in found[:8])
    detail = f"{spec.name}: ran GPU kernels it did not compile: {shown}"
    if not any(f == {"check": "library_kernel", "detail": detail} for f in seen.flags):
        seen.flags.append(flag("library_kernel", detail))
