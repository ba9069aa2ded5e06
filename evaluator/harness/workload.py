"""How a task's reference module turns a workload and a seed into inputs and models.

The sandboxed child (to run the submission) and the orchestrator (to compute
the reference outputs it judges against) both call these, so the two sides
draw the same inputs by construction, not by keeping two copies in step.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType
from typing import Any

import torch


def load_module(path: str, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def as_tuple(value: Any) -> tuple:
    """A forward's result as a tuple of outputs."""
    return tuple(value) if isinstance(value, tuple | list) else (value,)


def make_inputs(reference: ModuleType, params: dict, seed: int, device: torch.device) -> list:
    torch.manual_seed(seed)
    with torch.device(device):
        return list(reference.get_inputs(**params))


def make_model(
    cls: type, reference: ModuleType, params: dict, seed: int, device: torch.device
) -> torch.nn.Module:
    """`cls` (the reference's Model or a submission's ModelNew) from the task's init inputs."""
    torch.manual_seed(seed)
    with torch.device(device):
        return cls(*reference.get_init_inputs(**params))
