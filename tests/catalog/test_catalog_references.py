"""Every reference.py is a ground truth that does not depend on how a library reduces.

A bf16 or fp16 matrix product handed to cuBLAS may sum its K dimension in
slices and round each slice's partial sums to the output dtype before adding
them (split-K under PyTorch's default allow_bf16_reduced_precision_reduction
and allow_fp16_reduced_precision_reduction). Those partials carry an error
of a few units of the output dtype whatever the size of the result, so a
kernel that accumulates in fp32, as the statements ask, can fail against
such a reference on outputs near zero. The CPU backend never reduces that
way, so the class does not show in interpret mode: here every low-precision
product a reference makes is replaced by one that does, and the reference's
output must not change.
"""

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from evaluator.harness.workload import load_module, make_inputs, make_model
from taskformat.package import DEFAULT_CATALOG_DIR, iter_task_dirs
from taskformat.spec import Mode
from tests.catalog.drawn import load_drawn

TASKS = [p.name for p in iter_task_dirs(DEFAULT_CATALOG_DIR)]
CPU = torch.device("cpu")
aten = torch.ops.aten
LOW = (torch.bfloat16, torch.float16)


def _split_k(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b (a batch of them for 3-D operands) as two K halves, each rounded to the dtype."""
    half = a.shape[-1] // 2
    first = (a[..., :half].float() @ b[..., :half, :].float()).to(a.dtype)
    second = (a[..., half:].float() @ b[..., half:, :].float()).to(a.dtype)
    return (first.float() + second.float()).to(a.dtype)


PRODUCTS = {
    aten.mm.default,
    aten.bmm.default,
    aten.addmm.default,
    aten.baddbmm.default,
    aten.convolution.default,
    aten._scaled_dot_product_flash_attention_for_cpu.default,
}


class _ReducedPrecisionLibrary(TorchDispatchMode):
    """Counts the library's low-precision products; mm and addmm reduce with bf16/fp16 partials."""

    def __init__(self):
        super().__init__()
        self.products: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        operands = [a for a in args if isinstance(a, torch.Tensor)]
        if func not in PRODUCTS or not any(a.dtype in LOW for a in operands):
            return func(*args, **kwargs)
        self.products.append(f"{func} on {operands[0].dtype}")
        if func in (aten.mm.default, aten.bmm.default) and args[0].shape[-1] >= 2:
            return _split_k(args[0], args[1])
        if func in (aten.addmm.default, aten.baddbmm.default) and args[1].shape[-1] >= 2:
            product = _split_k(args[1], args[2]).float() * kwargs.get("alpha", 1)
            return (product + kwargs.get("beta", 1) * args[0].float()).to(args[1].dtype)
        return func(*args, **kwargs)


@pytest.mark.parametrize("slug", TASKS)
def test_reference_makes_no_low_precision_product_through_a_library(slug):
    task = load_drawn(slug)
    reference = load_module(str(DEFAULT_CATALOG_DIR / slug / "reference.py"), f"d2k_ref_{slug}")
    for workload in task.workloads_for(Mode.INTERPRET):
        inputs = make_inputs(reference, workload.params, 1234, CPU)
        model = make_model(reference.Model, reference, workload.params, 1234, CPU)
        library = _ReducedPrecisionLibrary()
        with torch.no_grad(), library:
            model(*inputs)
        # baseline.py is where the library call belongs.
        assert library.products == [], workload.name


def test_the_reduced_precision_library_changes_a_bf16_product():
    torch.manual_seed(0)
    a = torch.randn(64, 4096).to(torch.bfloat16)
    b = (torch.randn(4096, 64) * 4096**-0.5).to(torch.bfloat16)
    exact = (a.double() @ b.double()).to(torch.bfloat16)
    library = _ReducedPrecisionLibrary()
    with library:
        reduced = a @ b
        # An fp32 product of the same values is exact in its products and is
        # left alone: its rounding is the caller's.
        upcast = (a.float() @ b.float()).to(torch.bfloat16)
    assert library.products == ["aten.mm.default on torch.bfloat16"]
    # Two bf16 partials of O(1) err by more than an fp32 sum rounded once.
    wrong = (reduced.double() - exact.double()).abs()
    close = (upcast.double() - exact.double()).abs()
    assert wrong.max() > 4 * close.max()
