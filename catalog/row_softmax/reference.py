"""Row-wise softmax: y[i, j] = exp(x[i, j]) / sum_k exp(x[i, k]) over the last dimension."""

import torch
import torch.nn as nn

# dist="default" draws the public inputs; "adversarial" (some hidden
# workloads) draws them so that the hazards the statement names are real.
DISTRIBUTIONS = ("default", "adversarial")


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_init_inputs(**params):
    return []


def get_inputs(rows, cols, dtype, strided=False, dist="default", **params):
    if dist not in DISTRIBUTIONS:
        raise ValueError(f"unknown input distribution {dist!r}")
    if dist == "adversarial":
        return _adversarial_inputs(rows, cols, dtype, strided)
    # Logits with a realistic spread: large enough that a kernel which skips
    # the max subtraction overflows in fp32 exp. A strided workload takes the
    # first `cols` columns of a wider buffer (a row stride of cols + 64).
    pad = 64 if strided else 0
    x = torch.randn(rows, cols + pad, dtype=torch.float32) * 4.0 + 60.0
    return [x.to(getattr(torch, dtype))[:, :cols]]


def _adversarial_inputs(rows, cols, dtype, strided):
    # Rows shifted far from the public ~60: every other row by +100 to +200
    # (exp of a raw logit overflows fp32), the others anywhere in [-100, 100)
    # (exp underflows to zero on the negative ones), with spreads from 0.01
    # (a nearly flat row) to 30 (a nearly one-hot row).
    pad = 64 if strided else 0
    high = torch.arange(rows).unsqueeze(1) % 2 == 0
    offset = torch.where(
        high, 100.0 + 100.0 * torch.rand(rows, 1), 200.0 * torch.rand(rows, 1) - 100.0
    )
    spread = 10.0 ** (3.5 * torch.rand(rows, 1) - 2.0)
    x = torch.randn(rows, cols + pad, dtype=torch.float32) * spread + offset
    return [x.to(getattr(torch, dtype))[:, :cols]]
