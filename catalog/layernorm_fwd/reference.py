"""LayerNorm forward over the last dimension, returning y and the saved per-row statistics.

y[i, j] = (x[i, j] - mean_i) * rstd_i * weight[j] + bias[j], with
mean_i = mean_j x[i, j] and rstd_i = 1 / sqrt(mean_j (x[i, j] - mean_i)^2 + eps).
"""

import torch
import torch.nn as nn

# dist="default" draws the public inputs; "adversarial" (some hidden
# workloads) draws them so that the hazards the statement names are real.
DISTRIBUTIONS = ("default", "adversarial")


class Model(nn.Module):
    def __init__(self, eps: float = 1e-5):
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor):
        # native_layer_norm accumulates in fp32 and returns the per-row mean and
        # rstd that a training forward saves for the backward pass. On CUDA the
        # statistics of a bf16 input come back in fp32; the CPU kernel rounds them
        # to bf16, so there (interpreter checks only) the reference runs in fp32.
        if x.device.type == "cpu" and x.dtype != torch.float32:
            y, mean, rstd = torch.native_layer_norm(
                x.float(), [x.shape[-1]], weight.float(), bias.float(), self.eps
            )
            y = y.to(x.dtype)
        else:
            y, mean, rstd = torch.native_layer_norm(x, [x.shape[-1]], weight, bias, self.eps)
        return y, mean.float().reshape(-1), rstd.float().reshape(-1)


def get_init_inputs(**params):
    return [1e-5]


def get_inputs(rows, cols, dtype, strided=False, dist="default", **params):
    if dist not in DISTRIBUTIONS:
        raise ValueError(f"unknown input distribution {dist!r}")
    if dist == "adversarial":
        return _adversarial_inputs(rows, cols, dtype, strided)
    dt = getattr(torch, dtype)
    # Activations with a per-row offset and scale (as after a residual stream),
    # affine parameters near their trained values (weight ~ 1, bias ~ 0). A
    # strided workload's x is the first `cols` columns of a fused projection's
    # output, three times as wide (a row stride of 3 * cols).
    offset = torch.randn(rows, 1) * 0.5
    scale = torch.rand(rows, 1) * 1.5 + 0.5
    x = torch.randn(rows, 3 * cols if strided else cols) * scale + offset
    weight = 1.0 + 0.1 * torch.randn(cols)
    bias = 0.1 * torch.randn(cols)
    return [x.to(dt)[:, :cols], weight.to(dt), bias.to(dt)]


def _adversarial_inputs(rows, cols, dtype, strided):
    # Rows whose offset is 30 to 60 times their spread (spreads from 0.1 to
    # 10, offsets of either sign): E[x^2] - E[x]^2 in fp32 cancels to noise
    # there, while x - mean keeps every digit.
    dt = getattr(torch, dtype)
    spread = 10.0 ** (torch.rand(rows, 1) * 2.0 - 1.0)
    ratio = 10.0 ** (torch.rand(rows, 1) * 0.3 + 1.5)
    sign = torch.where(torch.rand(rows, 1) < 0.5, -1.0, 1.0)
    x = torch.randn(rows, 3 * cols if strided else cols) * spread + sign * ratio * spread
    weight = 1.0 + 0.1 * torch.randn(cols)
    bias = 0.1 * torch.randn(cols)
    return [x.to(dt)[:, :cols], weight.to(dt), bias.to(dt)]
