"""Fused residual add + RMSNorm (the pre-norm step of a transformer block).

h = x + residual                      (rounded to the input dtype: the new residual stream)
y = h / sqrt(mean(h^2) + eps) * weight
Returns (y, h).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, eps: float = 1e-6):
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor):
        h = x + residual
        # rms_norm accumulates in fp32 and rounds once to the input dtype.
        y = F.rms_norm(h, (h.shape[-1],), weight, self.eps)
        return y, h


def get_init_inputs(**params):
    return [1e-6]


def get_inputs(batch, tokens, hidden, dtype, strided=False, **params):
    dt = getattr(torch, dtype)
    # x: the sublayer output about to be added; residual: the residual stream,
    # whose scale grows with depth; weight: a trained RMSNorm gain near 1. A
    # strided workload's x is the first half of a wider output (a token stride
    # of 2 * hidden).
    x = torch.randn(batch, tokens, 2 * hidden if strided else hidden) * 0.5
    residual = torch.randn(batch, tokens, hidden) * (torch.rand(batch, tokens, 1) * 3.0 + 0.5)
    weight = 1.0 + 0.1 * torch.randn(hidden)
    return [x.to(dt)[..., :hidden], residual.to(dt), weight.to(dt)]
