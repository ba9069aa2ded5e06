import math

import pytest
import torch

from evaluator.harness.compare import compare_tensor
from evaluator.harness.fingerprints import fingerprint
from taskformat.spec import Tolerance

TOL = Tolerance(atol=1e-3, rtol=1e-2, rel_l2=1e-2)


def ref():
    torch.manual_seed(0)
    return torch.randn(64, 32)


@pytest.mark.parametrize(
    ("mutate", "ok", "fragment"),
    [
        (lambda r: r.clone(), True, ""),
        (lambda r: r * (1 + 5e-3), True, ""),
        (lambda r: r * (1 + 5e-2), False, "outside atol"),
        (lambda r: torch.zeros_like(r), False, "relative L2"),
        (
            lambda r: torch.where(torch.arange(r.numel()).reshape(r.shape) == 7, math.nan, r),
            False,
            "NaN",
        ),
        (
            lambda r: torch.where(torch.arange(r.numel()).reshape(r.shape) == 3, math.inf, r),
            False,
            "infinite",
        ),
        (lambda r: r[:, :16], False, "shape"),
        (lambda r: r.double(), False, "dtype"),
    ],
)
def test_compare_tensor_applies_tolerances_and_special_values(mutate, ok, fragment):
    r = ref()
    result = compare_tensor(mutate(r), r, TOL)
    assert result.ok is ok
    assert fragment in result.message


def test_compare_accepts_nan_and_inf_exactly_where_the_reference_has_them():
    r = ref()
    r[0, 0], r[1, 1] = math.nan, -math.inf
    out = r.clone()
    out[2, 2] += 1e-4
    assert compare_tensor(out, r, TOL).ok


def test_constant_output_fails_even_where_atol_alone_would_pass():
    r = torch.full((1000,), 1e-4) + torch.rand(1000) * 1e-4  # tiny values, all within atol of 0
    assert not compare_tensor(torch.zeros_like(r), r, TOL).ok


# fused_adamw's bounds: a first moment that cancels to 3e-6 in a one-element tensor, off by
# half an ulp of its 1e-2 terms (4.7e-10), is honest fp32; without a floor rel_l2 fails it.
ADAMW = Tolerance(atol=1e-8, rtol=1e-5, rel_l2=1e-6)
ADAMW_FLOOR = Tolerance(atol=1e-8, rtol=1e-5, rel_l2=1e-6, abs_l2=1e-9)
CANCELLED = torch.tensor([3e-6], dtype=torch.float64)


@pytest.mark.parametrize(
    ("tolerance", "out", "ref", "ok"),
    [
        (ADAMW, CANCELLED + 4.7e-10, CANCELLED, False),
        (ADAMW_FLOOR, CANCELLED + 4.7e-10, CANCELLED, True),
        (ADAMW_FLOOR, CANCELLED + 2e-9, CANCELLED, False),
        # the smallest second moment: zero passes atol, not the floored L2 bound
        (ADAMW_FLOOR, torch.zeros(1, dtype=torch.float64), torch.tensor([2.7e-9]).double(), False),
        # a constant output of a small, varied tensor
        (
            ADAMW_FLOOR,
            torch.full((64,), 5e-9).double(),
            5e-9 + 3e-9 * torch.randn(64, generator=torch.Generator().manual_seed(0)).double(),
            False,
        ),
        (
            ADAMW_FLOOR,
            torch.zeros(64).double(),
            3e-9 * torch.randn(64, generator=torch.Generator().manual_seed(0)).double(),
            False,
        ),
    ],
)
def test_an_absolute_floor_passes_cancellation_error_and_nothing_constant(tolerance, out, ref, ok):
    assert compare_tensor(out, ref, tolerance).ok is ok


def test_only_tasks_with_measured_cancellation_set_a_floor():
    # A floor lets an output's error be absolute where honest arithmetic cancels it
    # to near zero: fused_adamw's tiny updates, layernorm_bwd's dx on 1-2 columns.
    from taskformat.package import DEFAULT_CATALOG_DIR, iter_task_dirs, load_task

    floors = {
        folder.name: dtype
        for folder in iter_task_dirs(DEFAULT_CATALOG_DIR)
        for dtype, tolerance in load_task(folder).tolerances.items()
        if tolerance.abs_l2
    }
    assert floors == {"fused_adamw": "default", "layernorm_bwd": "bfloat16"}


def test_integer_outputs_must_match_exactly():
    r = torch.arange(100)
    assert compare_tensor(r.clone(), r, TOL).ok
    off = r.clone()
    off[5] += 1
    result = compare_tensor(off, r, TOL)
    assert not result.ok and "1 of 100 values differ" in result.message


def test_fingerprints_sample_the_same_positions_for_the_same_seed():
    r = ref()
    first, again = fingerprint([r], seed=1234), fingerprint([r.clone()], seed=1234)
    assert first == again
    assert len(first["values"]) == 32 and first["numel"] == r.numel()
    assert fingerprint([r], seed=99)["values"] != first["values"]


def test_fingerprint_counts_the_outputs_holding_non_finite_values():
    r = ref()
    r[0, 0] = math.nan
    other = ref()
    other[3, 3] = math.inf
    assert fingerprint([r, ref(), other], seed=1)["nonfinite_outputs"] == 2


def test_atol_rms_widens_each_element_by_a_share_of_the_reference_s_rms():
    # A large output beside a cancelled one: the honest error of the small one is an
    # ulp of the large terms, far above atol and rtol of its own value.
    ref = torch.tensor([1000.0, -1000.0, 0.5, 2.0])
    out = ref + torch.tensor([0.0, 0.0, 0.05, 0.0])
    strict = Tolerance(atol=1e-3, rtol=1e-3, rel_l2=1e-3)
    assert not compare_tensor(out, ref, strict).ok
    rms = float(ref.pow(2).mean().sqrt())  # about 707
    widened = Tolerance(atol=1e-3, rtol=1e-3, rel_l2=0.05, atol_rms=1e-4)
    assert compare_tensor(out, ref, widened).ok
    # Far beyond the share, and a sample judged against the whole output's RMS.
    assert not compare_tensor(ref + torch.tensor([0.0, 0.0, 0.5, 0.0]), ref, widened).ok
    sample_out, sample_ref = out[2:], ref[2:]
    assert not compare_tensor(sample_out, sample_ref, widened).ok
    assert compare_tensor(sample_out, sample_ref, widened, ref_rms=rms).ok
