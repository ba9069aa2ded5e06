"""fused_adamw's tolerances pass an honest fp32 step on every seed and fail a constant one.

The honest step is bench/adamw_false_failures.py's: the expert's fp32 arithmetic in its
order of operations, against the fp64 reference, by the evaluator's own comparison.
"""

import dataclasses

import pytest
import torch

from evaluator.harness.compare import compare_tensor
from evaluator.harness.workload import load_module
from taskformat.package import DEFAULT_CATALOG_DIR, load_task
from taskformat.spec import Mode
from tests.bench_scripts import bench_script

TASK = load_task(DEFAULT_CATALOG_DIR / "fused_adamw")
BENCH = bench_script("adamw_false_failures")


def test_an_honest_fp32_step_passes_on_2000_seeds_of_the_one_element_workload():
    found = BENCH.failures(TASK, BENCH.ONE_ELEMENT, range(2000))
    assert (found.seeds, found.by_output) == (0, {})


def test_without_its_floor_the_same_steps_fail():
    tolerances = {dtype: dataclasses.replace(t, abs_l2=0.0) for dtype, t in TASK.tolerances.items()}
    unfloored = dataclasses.replace(TASK, tolerances=tolerances)
    assert BENCH.failures(unfloored, BENCH.ONE_ELEMENT, range(200)).seeds > 0


@pytest.mark.parametrize("workload", [w.name for w in TASK.workloads_for(Mode.INTERPRET)])
@pytest.mark.parametrize("constant", ["zero", "mean"])
def test_a_constant_output_fails(workload, constant):
    [spec] = [w for w in TASK.workloads if w.name == workload]
    reference = load_module(str(DEFAULT_CATALOG_DIR / "fused_adamw" / "reference.py"), "adamw")
    tolerance = TASK.tolerance_for("float32")
    for seed in range(20):
        torch.manual_seed(seed)
        step, *tensors = reference.get_inputs(**spec.params)
        outputs = reference.Model(*reference.get_init_inputs(**spec.params))(step, *tensors)
        for ref in outputs:
            if constant == "mean" and ref.numel() == 1:
                continue  # a one-element tensor's mean is its value
            fill = 0.0 if constant == "zero" else float(ref.double().mean())
            assert not compare_tensor(torch.full_like(ref, fill), ref, tolerance).ok
