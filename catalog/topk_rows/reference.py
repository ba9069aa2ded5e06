"""Top-k of every row: the k largest values in descending order and their column indices."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, k: int):
        super().__init__()
        self.k = k

    def forward(self, x: torch.Tensor):
        values, indices = torch.topk(x, self.k, dim=-1, largest=True, sorted=True)
        return values, indices


def get_init_inputs(k, **params):
    return [k]


def get_inputs(rows, cols, dtype="float32", **params):
    # Logit-like rows (normal, sigma 2) with no ties, so that values and
    # indices are unique: a random permutation of 0..cols-1 per row, jittered
    # by less than half a step, mapped through the normal quantile function.
    # Neighbouring values then differ by far more than one fp32 ulp.
    perm = torch.rand(rows, cols).argsort(dim=-1).to(torch.float64)
    u = (perm + 0.25 + 0.5 * torch.rand(rows, cols, dtype=torch.float64)) / cols
    x = torch.special.erfinv(2.0 * u - 1.0) * (2.0 * 2.0**0.5)
    return [x.to(getattr(torch, dtype))]
