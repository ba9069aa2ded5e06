"""LayerNorm backward over the last dimension from the saved per-row statistics.

Given dy, x, weight and the forward's saved mean and rstd:
  xhat = (x - mean) * rstd
  dx   = rstd * (weight * dy - mean_j(weight * dy * xhat) * xhat - mean_j(weight * dy))
  dweight = sum_i dy * xhat,   dbias = sum_i dy
The reference computes in fp32 and rounds each output once to the input dtype.
"""

import torch
import torch.nn as nn

# dist="default" draws the public inputs; "adversarial" (some hidden
# workloads) draws them so that the hazards the statement names are real.
DISTRIBUTIONS = ("default", "adversarial")


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(
        self,
        dy: torch.Tensor,
        x: torch.Tensor,
        weight: torch.Tensor,
        mean: torch.Tensor,
        rstd: torch.Tensor,
    ):
        dt = x.dtype
        dy32, x32, w32 = dy.float(), x.float(), weight.float()
        xhat = (x32 - mean[:, None]) * rstd[:, None]
        wdy = w32 * dy32
        c1 = (xhat * wdy).mean(dim=1, keepdim=True)
        c2 = wdy.mean(dim=1, keepdim=True)
        dx = (wdy - xhat * c1 - c2) * rstd[:, None]
        dweight = (dy32 * xhat).sum(dim=0)
        dbias = dy32.sum(dim=0)
        return dx.to(dt), dweight.to(weight.dtype), dbias.to(weight.dtype)


def get_init_inputs(**params):
    return []


def get_inputs(rows, cols, dtype, dist="default", **params):
    if dist not in DISTRIBUTIONS:
        raise ValueError(f"unknown input distribution {dist!r}")
    if dist == "adversarial":
        return _adversarial_inputs(rows, cols, dtype)
    dt = getattr(torch, dtype)
    # Forward activations with a per-row offset and scale (a residual stream),
    # weight near its trained value, and the statistics the forward saved for
    # exactly this x (fp32, biased variance, eps = 1e-5).
    offset = torch.randn(rows, 1) * 0.5
    scale = torch.rand(rows, 1) * 1.5 + 0.5
    x = (torch.randn(rows, cols) * scale + offset).to(dt)
    x32 = x.float()
    mean = x32.mean(dim=1)
    rstd = torch.rsqrt(((x32 - mean[:, None]) ** 2).mean(dim=1) + 1e-5)
    weight = (1.0 + 0.1 * torch.randn(cols)).to(dt)
    # Upstream gradient: unit scale (as after loss scaling), some rows larger.
    dy = (torch.randn(rows, cols) * (torch.rand(rows, 1) * 1.5 + 0.25)).to(dt)
    return [dy, x, weight, mean, rstd]


def _adversarial_inputs(rows, cols, dtype):
    # Rows whose offset is 30 to 60 times their spread (spreads from 0.1 to
    # 10): x_hat must come from x - mean, and the statistics are those the
    # forward saves for exactly this x. dy spans 1e-3 to 1e3 from row to row.
    dt = getattr(torch, dtype)
    spread = 10.0 ** (torch.rand(rows, 1) * 2.0 - 1.0)
    ratio = 10.0 ** (torch.rand(rows, 1) * 0.3 + 1.5)
    sign = torch.where(torch.rand(rows, 1) < 0.5, -1.0, 1.0)
    x = (torch.randn(rows, cols) * spread + sign * ratio * spread).to(dt)
    x32 = x.float()
    mean = x32.mean(dim=1)
    rstd = torch.rsqrt(((x32 - mean[:, None]) ** 2).mean(dim=1) + 1e-5)
    weight = (1.0 + 0.1 * torch.randn(cols)).to(dt)
    dy = (torch.randn(rows, cols) * 10.0 ** (torch.rand(rows, 1) * 6.0 - 3.0)).to(dt)
    return [dy, x, weight, mean, rstd]
