"""Inclusive prefix sum (cumsum) along the last dimension of a 1-D or 2-D fp32 tensor."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Ground truth in float64, rounded once to fp32: the tolerance then
        # measures only the kernel's own fp32 rounding error.
        return torch.cumsum(x.to(torch.float64), dim=-1).to(x.dtype)


def get_init_inputs(**params):
    return []


def get_inputs(dtype="float32", n=None, rows=None, cols=None, **params):
    # 1-D workloads give `n`, row workloads give `rows` and `cols`.
    shape = (n,) if n is not None else (rows, cols)
    # Noisy positive increments (mean 1, a few percent negative), such as
    # per-token lengths or probability masses: the running sum grows to ~n,
    # which is where a careless fp32 accumulation loses the small terms.
    x = torch.randn(shape, dtype=torch.float32) * 0.5 + 1.0
    return [x.to(getattr(torch, dtype))]
