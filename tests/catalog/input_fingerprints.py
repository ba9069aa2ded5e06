"""Fingerprints of every workload's inputs as get_inputs draws them on a device.

    python -m tests.catalog.input_fingerprints [cuda|cpu]   # one JSON object: workload -> prints

Run twice in two processes: the prints must be equal, as the evaluator needs
(the submission's process and the one that computes the reference each draw
the inputs from the same seed). A print is the dtype, shape and strides of a
tensor and a 64-bit integer hash of its bytes, computed on the device.
"""

from __future__ import annotations

import json
import sys

import torch

from evaluator.harness.workload import load_module, make_inputs
from taskformat.package import DEFAULT_CATALOG_DIR, iter_task_dirs
from tests.catalog.drawn import load_drawn

SEED = 20251201


def fingerprint(value: object) -> object:
    if not isinstance(value, torch.Tensor):
        return repr(value)
    raw = value.detach().contiguous().reshape(-1).view(torch.uint8)
    raw = torch.cat([raw, raw.new_zeros(-raw.numel() % 8)])
    words = raw.view(torch.int64)
    weights = torch.arange(words.numel(), device=words.device, dtype=torch.int64) * 2654435761 + 1
    digest = int((words * weights).sum()) if words.numel() else 0  # wraps: exact and ordered
    return [str(value.dtype), list(value.shape), list(value.stride()), digest]


def fingerprints(device: torch.device) -> dict[str, list]:
    prints: dict[str, list] = {}
    for path in iter_task_dirs(DEFAULT_CATALOG_DIR):
        task = load_drawn(path)
        reference = load_module(str(path / "reference.py"), f"d2k_prints_{task.slug}")
        for workload in task.workloads:
            inputs = make_inputs(reference, workload.params, SEED, device)
            prints[f"{task.slug}/{workload.name}"] = [fingerprint(t) for t in inputs]
            del inputs
            if device.type == "cuda":
                torch.cuda.empty_cache()
    return prints


if __name__ == "__main__":
    print(json.dumps(fingerprints(torch.device(sys.argv[1] if len(sys.argv) > 1 else "cuda"))))
