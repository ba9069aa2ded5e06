"""Every task's inputs are the same in every process for one seed, on the GPU too.

The sandboxed child draws the inputs it calls the submission on and the
orchestrator draws them again, in another process, to compute the reference
(evaluator.harness.workload.make_inputs). An op whose CUDA result varies from
run to run for the same arguments (a float prefix sum by a decoupled
look-back scan, float atomics, a write of several values to one place) gives
the two processes different inputs: the kernel is then judged against the
answer to another problem. The CPU backend runs these ops deterministically,
so the class never shows in interpret mode; the tests below find the ops by
name and argument on the CPU, where the values can be read.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from evaluator.harness.workload import load_module, make_inputs
from taskformat.package import DEFAULT_CATALOG_DIR, iter_task_dirs
from taskformat.spec import Mode
from tests.catalog.drawn import load_drawn

ROOT = Path(__file__).resolve().parents[2]
TASKS = [p.name for p in iter_task_dirs(DEFAULT_CATALOG_DIR)]
CPU = torch.device("cpu")
aten = torch.ops.aten

# Ops whose CUDA kernels are nondeterministic whatever the values (the list of
# torch.use_deterministic_algorithms, plus torch.multinomial, which samples by
# a float prefix sum of the weights: cumsum's scan on the GPU).
ALWAYS = {
    aten.multinomial.default: "samples through a float prefix sum of the weights",
    aten.histc.default: "counts with float atomics",
    aten.median.dim: "picks among tied values' indices in any order",
    aten.kthvalue.default: "picks among tied values' indices in any order",
    aten.nll_loss_forward.default: "reduces with float atomics",
}
# Ops nondeterministic only for floating-point data (integer sums are exact).
FLOATING = {
    aten.cumsum.default: "a float prefix sum (a decoupled look-back scan on the GPU)",
    aten.cumsum_.default: "a float prefix sum (a decoupled look-back scan on the GPU)",
    aten.cumprod.default: "a float prefix product",
    aten.logcumsumexp.default: "a float prefix log-sum-exp",
    aten.index_add.default: "float atomics",
    aten.index_add_.default: "float atomics",
    aten.scatter_add.default: "float atomics",
    aten.scatter_add_.default: "float atomics",
    aten.scatter_reduce.two: "float atomics",
    aten.scatter_reduce_.two: "float atomics",
    aten.index_reduce.default: "float atomics",
    aten.index_reduce_.default: "float atomics",
}
INDEX_PUT = {aten.index_put.default, aten.index_put_.default, aten._index_put_impl_.default}


def _has_repeats(indices: list) -> bool:
    """Whether advanced-indexing index tensors name one position more than once."""
    tensors = [i for i in indices if i is not None]
    if not tensors:
        return False
    if any(t.dtype == torch.bool for t in tensors):
        return False  # a mask names each position at most once
    flat = torch.stack([t.reshape(-1).long() for t in torch.broadcast_tensors(*tensors)], dim=1)
    return torch.unique(flat, dim=0).shape[0] < flat.shape[0]


class _Nondeterministic(TorchDispatchMode):
    """Records the ops, among those dispatched, whose CUDA result may vary between runs."""

    def __init__(self):
        super().__init__()
        self.found: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        first = args[0] if args else None
        floating = isinstance(first, torch.Tensor) and (
            first.is_floating_point() or first.is_complex()
        )
        if func in ALWAYS:
            self.found.append(f"{func}: {ALWAYS[func]}")
        elif func in FLOATING and floating:
            self.found.append(f"{func} on {first.dtype}: {FLOATING[func]}")
        elif func in INDEX_PUT:
            accumulate = args[3] if len(args) > 3 else kwargs.get("accumulate", False)
            if accumulate and floating:
                self.found.append(f"{func} accumulating {first.dtype}: float atomics")
            elif not accumulate and _has_repeats(list(args[1])):
                self.found.append(f"{func}: writes several values to one element")
        elif func is aten.bincount.default and (args[1:2] or [None])[0] is not None:
            self.found.append(f"{func} with weights: float atomics")
        return func(*args, **kwargs)


def nondeterministic_ops(reference, params: dict) -> list[str]:
    with _Nondeterministic() as mode:
        make_inputs(reference, params, 1234, CPU)
    return sorted(set(mode.found))


@pytest.mark.parametrize("slug", TASKS)
def test_inputs_are_drawn_without_ops_whose_gpu_result_varies_between_runs(slug):
    task = load_drawn(slug)
    reference = load_module(str(DEFAULT_CATALOG_DIR / slug / "reference.py"), f"d2k_inputs_{slug}")
    for workload in task.workloads_for(Mode.INTERPRET):
        assert nondeterministic_ops(reference, workload.params) == [], workload.name


def test_the_recorder_finds_a_sampler_a_float_scan_and_a_repeated_write():
    class Reference:
        @staticmethod
        def get_inputs(**params):
            weights = torch.rand(8)
            draws = torch.multinomial(weights, 100, replacement=True)
            edges = torch.cumsum(weights, 0)
            counts = torch.cumsum(torch.bincount(draws, minlength=8), 0)  # integers: exact
            x = torch.zeros(8)
            x[torch.tensor([1, 2])] = torch.tensor([1.0, 2.0])  # distinct places: fine
            x[torch.tensor([3, 3])] = torch.tensor([1.0, 2.0])  # one place, two values
            return [edges, counts, x]

    found = nondeterministic_ops(Reference, {})
    assert [f.split(":")[0] for f in found] == [
        "aten.cumsum.default on torch.float32",
        "aten.index_put_.default",
        "aten.multinomial.default",
    ]


def _prints_in_a_new_process(device: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "tests.catalog.input_fingerprints", device],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_every_workload_draws_the_same_inputs_in_two_processes_on_the_gpu():
    first, second = _prints_in_a_new_process("cuda"), _prints_in_a_new_process("cuda")
    assert list(first) == list(second)
    assert [name for name in first if first[name] != second[name]] == []
