"""Top-k of every row: the k largest values in descending order and their column indices."""

import torch
import torch.nn as nn

# dist="default" draws the public inputs; "adversarial" (some hidden
# workloads) draws them so that the hazards the statement names are real.
DISTRIBUTIONS = ("default", "adversarial")


class Model(nn.Module):
    def __init__(self, k: int):
        super().__init__()
        self.k = k

    def forward(self, x: torch.Tensor):
        values, indices = torch.topk(x, self.k, dim=-1, largest=True, sorted=True)
        return values, indices


def get_init_inputs(k, **params):
    return [k]


def get_inputs(rows, cols, dtype="float32", dist="default", **params):
    if dist not in DISTRIBUTIONS:
        raise ValueError(f"unknown input distribution {dist!r}")
    if dist == "adversarial":
        return _adversarial_inputs(rows, cols, dtype)
    # Logit-like rows (normal, sigma 2) with no ties, so that values and
    # indices are unique: a random permutation of 0..cols-1 per row, jittered
    # by less than half a step, mapped through the normal quantile function.
    # Neighbouring values then differ by far more than one fp32 ulp.
    perm = torch.rand(rows, cols).argsort(dim=-1).to(torch.float64)
    u = (perm + 0.25 + 0.5 * torch.rand(rows, cols, dtype=torch.float64)) / cols
    x = torch.special.erfinv(2.0 * u - 1.0) * (2.0 * 2.0**0.5)
    return [x.to(getattr(torch, dtype))]


def _adversarial_inputs(rows, cols, dtype):
    # Still free of ties (the indices are compared exactly), but in orders and
    # spacings the public rows never have; row i is of kind i % 4: sorted
    # ascending, sorted descending, consecutive fp32 values (one ulp apart, of
    # either sign) in random order, and magnitudes from 1e-30 to 1e30 of
    # either sign in random order.
    kind = torch.arange(rows).unsqueeze(1) % 4
    perm = torch.rand(rows, cols).argsort(dim=-1)
    u = (perm.to(torch.float64) + 0.25 + 0.5 * torch.rand(rows, cols, dtype=torch.float64)) / cols
    normal = (torch.special.erfinv(2.0 * u - 1.0) * (2.0 * 2.0**0.5)).float()
    ascending = normal.sort(dim=-1).values
    sign = torch.where(torch.rand(rows, 1) < 0.5, -1.0, 1.0)
    start = (sign * (0.5 + 3.5 * torch.rand(rows, 1))).view(torch.int32)
    ulps = (start + perm.to(torch.int32)).view(torch.float32)
    wide = (sign * 10.0 ** (60.0 * u - 30.0)).float()
    x = torch.where(kind == 0, ascending, ascending.flip(-1))
    x = torch.where(kind == 2, ulps, x)
    x = torch.where(kind == 3, wide, x)
    return [x.to(getattr(torch, dtype))]
