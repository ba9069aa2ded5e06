"""Run an expert in Triton's interpreter with every uninitialised allocation poisoned.

    python -m tests.catalog.poisoned_interpret SLUG [EXPERT.py]   # a JSON line per check run

On a GPU the evaluator fills the memory the allocator hands out next with
NaN bytes, so an output that a kernel writes only in part, or an atomic
accumulator that was never zeroed, reads NaN or garbage. On the CPU large
allocations come from fresh, zeroed pages whatever was freed before, so the
same bugs read zeros and pass the interpreter. Here every torch.empty (and
empty_like, empty_strided, new_empty) the expert makes is filled with NaN
(floating dtypes) or a large garbage value (integers) before the kernel
sees it, and the outputs are compared with the reference's at the task's
tolerance, as the evaluator compares them.

Each public check workload runs on the inputs of both distributions (`dist`:
"default", the public inputs, and "adversarial", where the hazards the task's
statement names are real); each hidden one as it was drawn. One process, one
import of torch and Triton, for all of a task's checks.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any

os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from evaluator.harness.judge import _compare_all
from evaluator.harness.workload import as_tuple, load_module, make_inputs, make_model
from taskformat.package import DEFAULT_CATALOG_DIR
from taskformat.spec import Mode, TaskSpec
from tests.catalog.drawn import load_drawn

CPU = torch.device("cpu")
DISTRIBUTIONS = ("default", "adversarial")
aten = torch.ops.aten
EMPTY = {
    aten.empty.memory_format,
    aten.empty_strided.default,
    aten.empty_like.default,
    aten.new_empty.default,
    aten.new_empty_strided.default,
}


def poison(t: torch.Tensor) -> None:
    if t.dtype == torch.bool:
        t.fill_(True)
    elif t.is_floating_point() or t.is_complex():
        t.fill_(float("nan"))
    else:
        t.fill_(torch.iinfo(t.dtype).max // 3 if t.dtype != torch.uint8 else 0xA5)


class Poisoned(TorchDispatchMode):
    """Every uninitialised tensor is handed out full of NaN or garbage."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func in EMPTY and isinstance(out, torch.Tensor) and out.numel():
            poison(out)
        return out


def checks(task: TaskSpec) -> list[tuple[str, dict[str, Any]]]:
    """(workload name, params) of each check run: public ones on both distributions,
    hidden ones as drawn."""
    runs = []
    for workload in task.workloads_for(Mode.INTERPRET):
        if workload.hidden:
            runs.append((workload.name, dict(workload.params)))
        else:
            runs += [(workload.name, {**workload.params, "dist": d}) for d in DISTRIBUTIONS]
    return runs


def run(slug: str, expert_path: str = "") -> list[dict[str, Any]]:
    """The task's expert (or the file at expert_path) on every check run."""
    task = load_drawn(slug)
    reference = load_module(str(DEFAULT_CATALOG_DIR / slug / "reference.py"), f"ref_{slug}")
    expert_path = expert_path or str(DEFAULT_CATALOG_DIR / slug / "expert.py")
    expert = load_module(expert_path, f"expert_{slug}")
    results = []
    for name, params in checks(task):
        line: dict[str, Any] = {"workload": name, "dist": params.get("dist", "default")}
        try:
            with torch.no_grad():
                expected = as_tuple(
                    make_model(reference.Model, reference, params, 1, CPU)(
                        *make_inputs(reference, params, 1, CPU)
                    )
                )
                inputs = make_inputs(reference, params, 1, CPU)
                model = make_model(expert.ModelNew, reference, params, 1, CPU)
                with Poisoned():
                    got = as_tuple(model(*inputs))
            comparison = _compare_all(got, expected, task)
            line["status"] = "correct" if comparison.ok else "incorrect"
            line["message"] = comparison.message
        except Exception as exc:  # reported, not raised: every workload gets its line
            line["status"] = "error"
            line["message"] = f"{type(exc).__name__}: {exc}"[:2000]
            line["traceback"] = traceback.format_exc(limit=-3)[-2000:]
        results.append(line)
    return results


if __name__ == "__main__":
    for result in run(*sys.argv[1:3]):
        print(json.dumps(result), flush=True)
