"""Every baseline.py (the timed PyTorch side) computes its task's answer, to its dtype's precision.

The baseline is what speedups are measured against: the library call a
practitioner makes in the workload's own dtype, never checked by the
harness. It must compute the same function as the ground truth, but it
rounds its intermediates and results to that dtype where the reference and a
submission may not, so it is held to the task's tolerance widened to a few
units of roundoff of the narrowest floating dtype among the task's tensors
(a baseline that computes the wrong thing is off by far more). The
submission's tolerance is the task's own and is not widened. Checked on the
check workloads (public and hidden), on the CPU.
"""

import pytest
import torch

from evaluator.harness.compare import compare_tensor, dtype_name
from evaluator.harness.workload import as_tuple, load_module, make_inputs, make_model
from taskformat.package import DEFAULT_CATALOG_DIR, iter_task_dirs
from taskformat.spec import Mode, Tolerance
from tests.catalog.drawn import load_drawn

WITH_BASELINE = [
    p.name for p in iter_task_dirs(DEFAULT_CATALOG_DIR) if (p / "baseline.py").is_file()
]
CPU = torch.device("cpu")

# Baselines that cannot be checked on the CPU (strict: the mark fails once they
# can, so it cannot outlive the fix).
KNOWN_WRONG = {
    "layernorm_bwd": "the CPU native_layer_norm_backward rejects bf16 x with fp32 mean/rstd",
}
# Unit roundoff (half an ulp at 1) of the dtypes a baseline may compute in.
UNIT_ROUNDOFF = {torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11, torch.float32: 2.0**-24}
# A library call in a narrow dtype rounds its operands, products, partial sums
# and result. Each rounding of the terms of a length-K sum errs by u times the
# terms, which add up like the result itself: the error scales with the
# output's rms (whatever K), and its tail over thousands of values reaches a
# few times that. Elementwise: ELEMENT_ROUNDINGS units (atol in units of the
# reference's rms); overall: NORM_ROUNDINGS units of relative L2 error.
ELEMENT_ROUNDINGS = 8
NORM_ROUNDINGS = 2


def baseline_tolerance(
    task_tolerance: Tolerance, tensors: list, expected: torch.Tensor
) -> Tolerance:
    """The task's tolerance widened to the roundoff of the narrowest dtype among `tensors`."""
    dtypes = {t.dtype for t in tensors if isinstance(t, torch.Tensor)} & set(UNIT_ROUNDOFF)
    u = max((UNIT_ROUNDOFF[d] for d in dtypes), default=0.0)
    rms = float(expected.double().square().mean().sqrt()) if expected.numel() else 0.0
    return Tolerance(
        atol=max(task_tolerance.atol, ELEMENT_ROUNDINGS * u * rms),
        rtol=max(task_tolerance.rtol, ELEMENT_ROUNDINGS * u),
        rel_l2=max(task_tolerance.rel_l2, NORM_ROUNDINGS * u),
    )


def _outputs(module, reference, params: dict, seed: int) -> tuple:
    # Fresh inputs for each side: in-place tasks write their result into them.
    inputs = make_inputs(reference, params, seed, CPU)
    model = make_model(module.Model, reference, params, seed, CPU)
    with torch.no_grad():
        return tuple(
            t.clone() if isinstance(t, torch.Tensor) else t for t in as_tuple(model(*inputs))
        )


def test_the_tasks_whose_reference_upcasts_or_loops_have_a_baseline():
    assert {
        "cross_entropy_fwd",
        "flash_attention_fwd",
        "flash_decoding",
        "gemm_bf16",
        "gemm_bias_gelu",
        "grouped_gemm_moe",
        "paged_attention_decode",
        "prefix_scan",
        "rotary_embedding",
    } <= set(WITH_BASELINE)


@pytest.mark.parametrize(
    "slug",
    [
        pytest.param(s, marks=pytest.mark.xfail(reason=KNOWN_WRONG[s], strict=True))
        if s in KNOWN_WRONG
        else s
        for s in WITH_BASELINE
    ],
)
def test_baseline_matches_the_reference_on_every_check_workload(slug):
    task_dir = DEFAULT_CATALOG_DIR / slug
    task = load_drawn(task_dir)
    reference = load_module(str(task_dir / "reference.py"), f"d2k_test_reference_{slug}")
    baseline = load_module(str(task_dir / "baseline.py"), f"d2k_test_baseline_{slug}")
    for workload in task.workloads_for(Mode.INTERPRET):
        expected = _outputs(reference, reference, workload.params, seed=1234)
        got = _outputs(baseline, reference, workload.params, seed=1234)
        inputs = make_inputs(reference, workload.params, 1234, CPU)
        assert len(got) == len(expected), workload.name
        for index, (g, e) in enumerate(zip(got, expected, strict=True)):
            tolerance = baseline_tolerance(
                task.tolerance_for(dtype_name(e.dtype)), [*inputs, *expected], e
            )
            c = compare_tensor(g, e, tolerance)
            assert c.ok, f"{workload.name} output {index}: {c.message}"


def test_a_bf16_baseline_gets_bf16_roundings_and_an_fp32_one_keeps_the_task_tolerance():
    task = Tolerance(atol=1e-4, rtol=1e-4, rel_l2=2e-5)
    bf16 = [torch.zeros(2, dtype=torch.bfloat16), torch.zeros(2, dtype=torch.float32)]
    expected = torch.full((4,), 2.0)
    assert baseline_tolerance(task, bf16, expected) == Tolerance(
        atol=2**-4, rtol=2**-5, rel_l2=2**-7
    )
    fp32 = [torch.zeros(2), torch.zeros(2, dtype=torch.int64)]
    assert baseline_tolerance(task, fp32, expected) == task


def test_the_baseline_tolerance_still_rejects_a_baseline_that_computes_something_else():
    # The loss of a bf16 F.cross_entropy passes; the same call without the row
    # maximum's log-sum-exp (a plain -logit) does not.
    torch.manual_seed(0)
    logits = (torch.randn(64, 1000) * 3).to(torch.bfloat16)
    targets = torch.randint(0, 1000, (64,))
    truth = torch.nn.functional.cross_entropy(logits.float(), targets, reduction="none")
    task = Tolerance(atol=1e-4, rtol=1e-4, rel_l2=2e-5)
    tolerance = baseline_tolerance(task, [logits, truth], truth)
    bf16 = torch.nn.functional.cross_entropy(logits, targets, reduction="none").float()
    assert compare_tensor(bf16, truth, tolerance).ok
    wrong = -logits.float().gather(1, targets[:, None])[:, 0]
    assert not compare_tensor(wrong, truth, tolerance).ok
