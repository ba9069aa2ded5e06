"""Fused residual add + RMSNorm (the pre-norm step of a transformer block).

h = x + residual                      (rounded to the input dtype: the new residual stream)
y = h / sqrt(mean(h^2) + eps) * weight
Returns (y, h).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

# dist="default" draws the public inputs; "adversarial" (some hidden
# workloads) draws them so that the hazards the statement names are real.
DISTRIBUTIONS = ("default", "adversarial")


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


def get_inputs(batch, tokens, hidden, dtype, strided=False, dist="default", **params):
    if dist not in DISTRIBUTIONS:
        raise ValueError(f"unknown input distribution {dist!r}")
    if dist == "adversarial":
        return _adversarial_inputs(batch, tokens, hidden, dtype, strided)
    dt = getattr(torch, dtype)
    # x: the sublayer output about to be added; residual: the residual stream,
    # whose scale grows with depth; weight: a trained RMSNorm gain near 1. A
    # strided workload's x is the first half of a wider output (a token stride
    # of 2 * hidden).
    x = torch.randn(batch, tokens, 2 * hidden if strided else hidden) * 0.5
    residual = torch.randn(batch, tokens, hidden) * (torch.rand(batch, tokens, 1) * 3.0 + 0.5)
    weight = 1.0 + 0.1 * torch.randn(hidden)
    return [x.to(dt)[..., :hidden], residual.to(dt), weight.to(dt)]


def _adversarial_inputs(batch, tokens, hidden, dtype, strided):
    # Row scales from 1e-3 to 1e2 (on the smallest rows mean(h^2) is about
    # eps), and a quarter of the rows where x nearly cancels the residual
    # stream, so h keeps only the few bits that survive the rounding to the
    # input dtype and the statistic must be taken over that rounded h.
    dt = getattr(torch, dtype)
    scale = 10.0 ** (torch.rand(batch, tokens, 1) * 5.0 - 3.0)
    residual = torch.randn(batch, tokens, hidden) * scale
    x = torch.randn(batch, tokens, 2 * hidden if strided else hidden) * scale * 0.5
    cancel = torch.rand(batch, tokens, 1) < 0.25
    near = -residual + 0.01 * scale * torch.randn(batch, tokens, hidden)
    x[..., :hidden] = torch.where(cancel, near, x[..., :hidden])
    weight = 1.0 + 0.1 * torch.randn(hidden)
    return [x.to(dt)[..., :hidden], residual.to(dt), weight.to(dt)]
