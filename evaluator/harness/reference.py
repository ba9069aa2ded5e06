"""The reference's outputs, computed in the parent from the seeds the parent issued.

Never in the submission's process: the child never sees a reference output.
The judge compares the child's outputs with these, whole (correctness calls)
or at a fingerprint's sampled positions (timed, batch, audit, profiled calls).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from taskformat.spec import Mode, TaskSpec

from .workload import as_tuple, load_module, make_inputs, make_model


class ReferenceOutputs:
    """The task's reference.py, loaded once, and its outputs for a workload's seed."""

    def __init__(self, task: TaskSpec, mode: Mode):
        path = str(Path(task.directory) / "reference.py")
        self.module = load_module(path, f"d2k_reference_{task.slug}")
        self.device = torch.device("cuda" if mode is Mode.CUDA else "cpu")

        self._models: dict[str, torch.nn.Module] = {}

    def outputs(self, params: dict, seed: int, model_seed: int) -> tuple:
        inputs = make_inputs(self.module, params, seed, self.device)
        key = json.dumps([params, model_seed], sort_keys=True, default=str)
        if key not in self._models:
            self._models[key] = make_model(
                self.module.Model, self.module, params, model_seed, self.device
            )
        with torch.no_grad():
            return as_tuple(self._models[key](*inputs))
