"""Every baseline.py is a practitioner's fast path: no Python loop, no wait for the GPU.

The baseline is what speedups are measured against, so a slow one inflates
every speedup of its task. Two properties every fast torch path has, checked
on each catalog baseline: its source has no Python loop (a loop in a baseline
walks a workload dimension or data: experts, sequences, steps; the work of a
fast path is tensor ops, whose loops run on the device), and its forward never
makes the host wait for the device (reading a value or a data-dependent size
back, the synchronisations that serialise launches). The source is read for
both; forward is also run on the CPU check workloads under a dispatch
recorder that catches the ops that read device data back to the host.
"""

import ast
from pathlib import Path

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from evaluator.harness.workload import load_module, make_inputs, make_model
from taskformat.package import DEFAULT_CATALOG_DIR, iter_task_dirs, load_task
from taskformat.spec import Mode
from tests.catalog.test_catalog_baselines import KNOWN_WRONG

BASELINES = [p.name for p in iter_task_dirs(DEFAULT_CATALOG_DIR) if (p / "baseline.py").is_file()]
# Methods that copy device data to the host, or whose output size depends on
# the data (the host must wait to allocate it).
HOST_SYNC_METHODS = {
    "item",
    "tolist",
    "cpu",
    "numpy",
    "nonzero",
    "argwhere",
    "masked_select",
    "unique",
    "unique_consecutive",
    "synchronize",
}
# The aten ops those reach at dispatch (item and friends: _local_scalar_dense).
HOST_SYNC_OPS = {
    "aten::_local_scalar_dense",
    "aten::nonzero",
    "aten::argwhere",
    "aten::masked_select",
    "aten::_unique",
    "aten::_unique2",
    "aten::unique_dim",
    "aten::unique_consecutive",
    "aten::equal",
    "aten::is_nonzero",
}
LOOPS = (ast.For, ast.AsyncFor, ast.While, ast.comprehension)


def loops_and_syncs(source: str) -> list[str]:
    """Each Python loop and host-synchronising call in `source`, with its line."""
    found = []
    for node in ast.walk(ast.parse(source)):
        line = getattr(node, "lineno", None) or getattr(getattr(node, "target", None), "lineno", 0)
        if isinstance(node, LOOPS):
            found.append(f"line {line}: a Python loop ({type(node).__name__})")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in HOST_SYNC_METHODS
        ):
            found.append(f"line {line}: .{node.func.attr}() waits for the device")
    return sorted(found, key=lambda text: int(text.split(":")[0].removeprefix("line ")))


class _Ops(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.add(f"aten::{func._schema.name.split('::')[-1]}")
        return func(*args, **(kwargs or {}))


def host_sync_ops(module, reference, params: dict) -> set[str]:
    """The host-synchronising aten ops one CPU call of module.Model makes."""
    cpu = torch.device("cpu")
    inputs = make_inputs(reference, params, 1234, cpu)
    model = make_model(module.Model, reference, params, 1234, cpu)
    recorder = _Ops()
    with torch.no_grad(), recorder:
        model(*inputs)
    return recorder.names & HOST_SYNC_OPS


@pytest.mark.parametrize("slug", BASELINES)
def test_baseline_source_has_no_python_loop_and_no_host_sync(slug):
    source = (DEFAULT_CATALOG_DIR / slug / "baseline.py").read_text(encoding="utf-8")
    assert loops_and_syncs(source) == []


@pytest.mark.parametrize(
    "slug",
    [
        pytest.param(s, marks=pytest.mark.xfail(reason=KNOWN_WRONG[s], strict=True))
        if s in KNOWN_WRONG
        else s
        for s in BASELINES
    ],
)
def test_baseline_forward_reads_nothing_back_to_the_host(slug):
    task_dir = DEFAULT_CATALOG_DIR / slug
    task = load_task(task_dir)
    reference = load_module(str(task_dir / "reference.py"), f"d2k_fair_reference_{slug}")
    baseline = load_module(str(task_dir / "baseline.py"), f"d2k_fair_baseline_{slug}")
    for workload in task.workloads_for(Mode.INTERPRET):
        assert host_sync_ops(baseline, reference, workload.params) == set(), workload.name


# The per-expert baseline grouped_gemm_moe had before torch._grouped_mm: what
# both checks exist to catch.
PER_EXPERT_LOOP = """
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, w, offsets):
        y = x.new_empty((x.shape[0], w.shape[2]))
        bounds = offsets.tolist()
        for e in range(w.shape[0]):
            start, end = bounds[e], bounds[e + 1]
            if end > start:
                y[start:end] = x[start:end] @ w[e]
        return y
"""


def test_the_source_check_finds_a_loop_over_experts_and_the_copy_of_their_bounds():
    assert loops_and_syncs(PER_EXPERT_LOOP) == [
        "line 8: .tolist() waits for the device",
        "line 9: a Python loop (For)",
    ]
    assert loops_and_syncs("xs = [t.item() for t in ts]\n") == [
        "line 1: .item() waits for the device",
        "line 1: a Python loop (comprehension)",
    ]


def test_the_runtime_check_finds_a_value_read_back_in_forward(tmp_path: Path):
    path = tmp_path / "baseline.py"
    path.write_text(PER_EXPERT_LOOP.replace("offsets.tolist()", "[int(o) for o in offsets]"))
    slug = "grouped_gemm_moe"
    task_dir = DEFAULT_CATALOG_DIR / slug
    reference = load_module(str(task_dir / "reference.py"), "d2k_fair_reference_offender")
    offender = load_module(str(path), "d2k_fair_offender")
    params = load_task(task_dir).workloads_for(Mode.INTERPRET)[0].params
    assert host_sync_ops(offender, reference, params) == {"aten::_local_scalar_dense"}
