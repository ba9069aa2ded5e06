"""Eager causal conv1d as the Mamba reference path runs it: grouped conv1d, then SiLU."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        seqlen, dim, width = x.shape[1], x.shape[2], weight.shape[1]
        y = F.conv1d(x.transpose(1, 2), weight.unsqueeze(1), bias, padding=width - 1, groups=dim)
        return F.silu(y[..., :seqlen]).transpose(1, 2)
