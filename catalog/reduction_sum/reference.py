"""Sum reduction: the whole tensor (dim=None), each row (dim=1) or each column (dim=0)."""

import torch
import torch.nn as nn

# dist="default" draws the public inputs; "adversarial" (some hidden
# workloads) draws them so that the hazards the statement names are real.
DISTRIBUTIONS = ("default", "adversarial")


class Model(nn.Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Ground truth in float64, rounded once to the input dtype: the
        # tolerance then measures only the kernel's own rounding.
        wide = x.to(torch.float64)
        total = wide.sum() if self.dim is None else wide.sum(dim=self.dim)
        return total.to(x.dtype)


def get_init_inputs(dim=None, **params):
    return [dim]


def get_inputs(dtype, n=None, rows=None, cols=None, dist="default", **params):
    if dist not in DISTRIBUTIONS:
        raise ValueError(f"unknown input distribution {dist!r}")
    if dist == "adversarial":
        return _adversarial_inputs(dtype, n, rows, cols)
    if n is not None:
        # A total over many positive terms (losses, squared norms, counts):
        # uniform in [0, 2), mean 1, so the sum grows to ~n.
        x = torch.rand(n, dtype=torch.float32) * 2.0
    else:
        # Activations or gradients: zero-mean, unit variance; a row or column
        # sum is ~ +-sqrt(length), so dropping or doubling one element shows.
        x = torch.randn(rows, cols, dtype=torch.float32)
    return [x.to(getattr(torch, dtype))]


def _adversarial_inputs(dtype, n, rows, cols):
    # Many nearly equal terms: a constant from 1 to 10 plus a relative noise
    # of 1e-4 (1-D), and rows of such constants with either sign (2-D). The
    # sum grows to c * n while each term stays c: an fp32 running total
    # rounds every addition the same way and drifts, while a tree or blocked
    # sum keeps the error near one rounding.
    if n is not None:
        c = 1.0 + 9.0 * torch.rand((), dtype=torch.float32)
        x = c * (1.0 + 1e-4 * torch.randn(n, dtype=torch.float32))
    else:
        c = (1.0 + 9.0 * torch.rand(rows, 1)) * torch.where(torch.rand(rows, 1) < 0.5, -1.0, 1.0)
        x = c * (1.0 + 1e-4 * torch.randn(rows, cols, dtype=torch.float32))
    return [x.to(getattr(torch, dtype))]
