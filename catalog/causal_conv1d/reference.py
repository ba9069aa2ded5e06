"""Depthwise causal 1-D convolution with SiLU, as in the Mamba block (kernel width 4).

out[b, t, d] = silu(bias[d] + sum_k weight[d, k] * x[b, t - (width - 1) + k, d]),
with x[b, s, d] = 0 for s < 0. Layout is channels-last (batch, seqlen, dim).
The reference computes in fp32 and rounds once to the input dtype.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        seqlen, width = x.shape[1], weight.shape[1]
        xf, wf = x.float(), weight.float()
        acc = bias.float().expand_as(xf).clone()
        for k in range(width):
            shift = width - 1 - k
            # x delayed by `shift` steps, zeros before the start of the sequence.
            delayed = F.pad(xf, (0, 0, shift, 0))[:, :seqlen]
            acc = acc + wf[:, k] * delayed
        return F.silu(acc).to(x.dtype)


def get_init_inputs(**params):
    return []


def get_inputs(batch, seqlen, dim, dtype, width=4, **params):
    dt = getattr(torch, dtype)
    # Activations from the block's input projection; conv weights at the scale
    # of a trained depthwise filter (fan-in = width) and a small bias.
    x = torch.randn(batch, seqlen, dim)
    weight = torch.randn(dim, width) / width**0.5
    bias = 0.1 * torch.randn(dim)
    return [x.to(dt), weight.to(dt), bias.to(dt)]
