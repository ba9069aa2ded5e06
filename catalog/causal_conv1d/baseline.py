"""The causal depthwise conv and SiLU written as one weighted sum over unfolded windows, compiled.

On CUDA each output's four taps are an unfolded view of the input (padded
with width - 1 zero steps in front), multiplied by the channel's weights,
summed, biased and passed through SiLU, under torch.compile, which turns it
into one fused Triton kernel reading x once and writing the output once, in
the channels-last layout the task uses. It is the fastest torch path measured
on an H200: 354, 689 and 354 µs on the timed workloads, against 2,611, 5,189
and 2,618 µs for the Mamba reference path (grouped F.conv1d on the transposed
input, then SiLU), 5.3-10.2 ms for a channels-last depthwise conv2d and
3.6-5.9 ms for eager shift-and-add. Compiling happens in the first call, in
process (compile_threads = 1: Inductor's worker pool would leave a thread and
a process running). On the CPU it runs the grouped F.conv1d path.
"""

import torch
import torch._inductor.config
import torch.nn as nn
import torch.nn.functional as F

# Compile in this process: torch.compile's first use otherwise starts a pool
# of compile workers, a subprocess and a Python thread that outlive the call.
torch._inductor.config.compile_threads = 1


def conv_unfold(x, weight, bias):
    width = weight.shape[1]
    windows = F.pad(x, (0, 0, width - 1, 0)).unfold(1, width, 1)  # (B, L, D, width)
    return F.silu((windows * weight).sum(-1) + bias)


def conv_grouped(x, weight, bias):
    seqlen, dim, width = x.shape[1], x.shape[2], weight.shape[1]
    y = F.conv1d(x.transpose(1, 2), weight.unsqueeze(1), bias, padding=width - 1, groups=dim)
    return F.silu(y[..., :seqlen]).transpose(1, 2)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        cuda = torch.get_default_device().type == "cuda"
        self.conv = torch.compile(conv_unfold, dynamic=False) if cuda else conv_grouped

    def forward(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return self.conv(x, weight, bias)
