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
