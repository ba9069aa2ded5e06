"""Inclusive prefix sum (cumsum) along the last dimension of a 1-D or 2-D fp32 tensor."""

import torch
import torch.nn as nn

# dist="default" draws the public inputs; "adversarial" (some hidden
# workloads) draws them so that the hazards the statement names are real.
DISTRIBUTIONS = ("default", "adversarial")


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Ground truth in float64, rounded once to fp32: the tolerance then
        # measures only the kernel's own fp32 rounding error.
        return torch.cumsum(x.to(torch.float64), dim=-1).to(x.dtype)


def get_init_inputs(**params):
    return []


def get_inputs(dtype="float32", n=None, rows=None, cols=None, dist="default", **params):
    if dist not in DISTRIBUTIONS:
        raise ValueError(f"unknown input distribution {dist!r}")
    if dist == "adversarial":
        return _adversarial_inputs(dtype, (n,) if n is not None else (rows, cols))
    # 1-D workloads give `n`, row workloads give `rows` and `cols`.
    shape = (n,) if n is not None else (rows, cols)
    # Noisy positive increments (mean 1, a few percent negative), such as
    # per-token lengths or probability masses: the running sum grows to ~n,
    # which is where a careless fp32 accumulation loses the small terms.
    x = torch.randn(shape, dtype=torch.float32) * 0.5 + 1.0
    return [x.to(getattr(torch, dtype))]


def _adversarial_inputs(dtype, shape):
    # Increments of every magnitude: a per-row mean from 1e-3 to 1e3 with a
    # relative spread of 0.5, and one element in a thousand a spike a
    # thousand times the mean: after a spike the running sum's ulp is larger
    # than many increments.
    rows = shape[0] if len(shape) == 2 else 1
    mean = 10.0 ** (torch.rand(rows, 1, dtype=torch.float32) * 6.0 - 3.0)
    x = (torch.randn(rows, shape[-1], dtype=torch.float32) * 0.5 + 1.0) * mean
    spike = torch.rand(rows, shape[-1]) < 1e-3
    x = torch.where(spike, 1000.0 * mean, x)
    return [x.reshape(shape).to(getattr(torch, dtype))]
