"""Run a kernel in Triton's interpreter on every check workload, drawn from each input distribution.

    python -m tests.catalog.adversarial_interpret SLUG [KERNEL.py]   # a JSON line per run

Every task's `get_inputs` takes `dist`: "default" draws the public inputs,
"adversarial" draws them so that the hazards the task's statement names are
real (hidden workloads use it). The kernel (the task's expert, or the file
given) is compared with the reference at the task's tolerance, as the
evaluator compares them, on the inputs of both distributions.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any

os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported

import torch

from evaluator.harness.judge import _compare_all
from evaluator.harness.workload import as_tuple, load_module, make_inputs, make_model
from taskformat.package import DEFAULT_CATALOG_DIR, load_task
from taskformat.spec import Mode

CPU = torch.device("cpu")
DISTRIBUTIONS = ("default", "adversarial")
SEED = 1


def judge(task, reference, kernel, params: dict) -> dict[str, Any]:
    """Status and message of the kernel against the reference on one workload's inputs."""
    with torch.no_grad():
        expected = as_tuple(
            make_model(reference.Model, reference, params, SEED, CPU)(
                *make_inputs(reference, params, SEED, CPU)
            )
        )
        model = make_model(kernel.ModelNew, reference, params, SEED, CPU)
        got = as_tuple(model(*make_inputs(reference, params, SEED, CPU)))
    comparison = _compare_all(got, expected, task)
    return {"status": "correct" if comparison.ok else "incorrect", "message": comparison.message}


def run(slug: str, kernel_path: str = "") -> list[dict[str, Any]]:
    """The task's expert (or the file at kernel_path) on every check workload and distribution."""
    task = load_task(DEFAULT_CATALOG_DIR / slug)
    reference = load_module(str(DEFAULT_CATALOG_DIR / slug / "reference.py"), f"ref_{slug}")
    kernel_path = kernel_path or str(DEFAULT_CATALOG_DIR / slug / "expert.py")
    kernel = load_module(kernel_path, f"kernel_{slug}")
    results = []
    for workload in task.workloads_for(Mode.INTERPRET):
        for dist in DISTRIBUTIONS:
            line: dict[str, Any] = {"workload": workload.name, "dist": dist}
            try:
                line |= judge(task, reference, kernel, {**workload.params, "dist": dist})
            except Exception as exc:  # reported, not raised: every workload gets its line
                line["status"] = "error"
                line["message"] = f"{type(exc).__name__}: {exc}"[:2000]
                line["traceback"] = traceback.format_exc(limit=-3)[-2000:]
            results.append(line)
    return results


if __name__ == "__main__":
    for result in run(*sys.argv[1:3]):
        print(json.dumps(result), flush=True)
