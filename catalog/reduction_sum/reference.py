"""Sum reduction: the whole tensor (dim=None), each row (dim=1) or each column (dim=0)."""

import torch
import torch.nn as nn


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


def get_inputs(dtype, n=None, rows=None, cols=None, **params):
    if n is not None:
        # A total over many positive terms (losses, squared norms, counts):
        # uniform in [0, 2), mean 1, so the sum grows to ~n.
        x = torch.rand(n, dtype=torch.float32) * 2.0
    else:
        # Activations or gradients: zero-mean, unit variance; a row or column
        # sum is ~ +-sqrt(length), so dropping or doubling one element shows.
        x = torch.randn(rows, cols, dtype=torch.float32)
    return [x.to(getattr(torch, dtype))]
