"""Fingerprints of every check workload's inputs, drawn on the CPU from one seed.

    python -m tests.catalog.default_prints > tests/catalog/default_input_prints.json

The pinned file holds the prints of the inputs the public generators drew
before `get_inputs` took a `dist` parameter; `dist="default"` (and no `dist`)
must keep drawing those (test_catalog_input_distributions.py; floating values
compared at bf16 precision, which the machine's CPU math cannot move). A
task whose public inputs change on purpose is a new version: re-pin then.
"""

from __future__ import annotations

import json

import torch

from evaluator.harness.workload import load_module, make_inputs
from taskformat.package import DEFAULT_CATALOG_DIR, iter_task_dirs, load_task
from taskformat.spec import Mode
from tests.catalog.input_fingerprints import fingerprint

SEED = 20251201
CPU = torch.device("cpu")


def check_prints(**extra: object) -> dict[str, list]:
    """Workload -> prints of its inputs, with `extra` added to every workload's params."""
    prints: dict[str, list] = {}
    for path in iter_task_dirs(DEFAULT_CATALOG_DIR):
        task = load_task(path)
        reference = load_module(str(path / "reference.py"), f"d2k_default_prints_{task.slug}")
        for workload in task.workloads_for(Mode.INTERPRET):
            inputs = make_inputs(reference, {**workload.params, **extra}, SEED, CPU)
            prints[f"{task.slug}/{workload.name}"] = [fingerprint(_rounded(t)) for t in inputs]
    return prints


def _rounded(value: object) -> object:
    """Floating tensors rounded to bf16 precision first: the pinned file is compared
    across machines, whose CPU math (exp, log) can differ in the last fp32 bit; a
    regenerated distribution differs in far more than that."""
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.to(torch.bfloat16).to(value.dtype)
    return value


if __name__ == "__main__":
    prints = check_prints()
    print(
        "{\n" + ",\n".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in prints.items()) + "\n}"
    )
