"""Depthwise causal 1-D convolution with SiLU, as in the Mamba block (kernel width 4).

out[b, t, d] = silu(bias[d] + sum_k weight[d, k] * x[b, t - (width - 1) + k, d]),
with x[b, s, d] = 0 for s < 0. Layout is channels-last (batch, seqlen, dim).
The reference computes in fp32 and rounds once to the input dtype.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

# dist="default" draws the public inputs; "adversarial" (some hidden
# workloads) draws them so that the hazards the statement names are real.
DISTRIBUTIONS = ("default", "adversarial")


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


def get_inputs(batch, seqlen, dim, dtype, width=4, dist="default", **params):
    if dist not in DISTRIBUTIONS:
        raise ValueError(f"unknown input distribution {dist!r}")
    if dist == "adversarial":
        return _adversarial_inputs(batch, seqlen, dim, dtype, width)
    dt = getattr(torch, dtype)
    # Activations from the block's input projection; conv weights at the scale
    # of a trained depthwise filter (fan-in = width) and a small bias.
    x = torch.randn(batch, seqlen, dim)
    weight = torch.randn(dim, width) / width**0.5
    bias = 0.1 * torch.randn(dim)
    return [x.to(dt), weight.to(dt), bias.to(dt)]


def _adversarial_inputs(batch, seqlen, dim, dtype, width):
    # Channel gains from 1e-2 to 1e2 and a pulse at both ends of every
    # sequence (the first and last steps 30 times larger): a kernel that
    # reads before the start of a sequence or past its end, or mixes two
    # sequences of the batch, picks up a pulse.
    dt = getattr(torch, dtype)
    gain = 10.0 ** (torch.rand(1, 1, dim) * 4.0 - 2.0)
    x = torch.randn(batch, seqlen, dim) * gain
    ends = (torch.arange(seqlen) == 0) | (torch.arange(seqlen) == seqlen - 1)
    x = torch.where(ends[None, :, None], 30.0 * x, x)
    weight = torch.randn(dim, width) / width**0.5
    bias = torch.randn(dim) * gain[0, 0]
    return [x.to(dt), weight.to(dt), bias.to(dt)]
