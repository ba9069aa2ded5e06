"""Histogram of integer values: counts[b] = #{i : x[i] == b} for b in [0, bins)."""

import math

import torch
import torch.nn as nn

# dist="default" draws the public inputs; "adversarial" (some hidden
# workloads) draws them so that the hazards the statement names are real.
DISTRIBUTIONS = ("default", "adversarial")


class Model(nn.Module):
    def __init__(self, bins: int):
        super().__init__()
        self.bins = bins

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.bincount(x, minlength=self.bins).to(torch.int32)


def get_init_inputs(bins, **params):
    return [bins]


def get_inputs(n, bins, dtype, dist="default", **params):
    if dist not in DISTRIBUTIONS:
        raise ValueError(f"unknown input distribution {dist!r}")
    if dist == "adversarial":
        return _adversarial_inputs(n, bins, dtype)
    # Heavy-tailed (Zipf-like, s = 1) values as in token ids or the bytes of
    # text: P(v) ~ log((v + 2) / (v + 1)), so bin 0 alone gets 1/log2(bins + 1)
    # of all values and a few hot bins take most of the updates. Every value
    # lies in [0, bins).
    u = torch.rand(n, dtype=torch.float32)
    v = torch.exp(u * math.log(bins + 1)).floor_().sub_(1.0).clamp_(0, bins - 1)
    return [v.to(getattr(torch, dtype))]


def _adversarial_inputs(n, bins, dtype):
    # Nine values in ten on the last bin (one counter takes nearly every
    # update: its count passes 2^15 from n = 2^16 on), the rest uniform over
    # every bin.
    hot = torch.rand(n) < 0.9
    v = torch.where(hot, bins - 1, torch.randint(0, bins, (n,)))
    return [v.to(getattr(torch, dtype))]
