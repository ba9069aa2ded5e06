"""Linear layer with fused bias and tanh-GELU: y = gelu_tanh(x @ w + bias), bf16 in and out."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        # Ground truth in fp32, as the statement asks: exact products, fp32
        # sums, the bias and GELU in fp32, one rounding to bf16. The unfused
        # bf16 library calls a practitioner writes are baseline.py.
        z = torch.addmm(bias.float(), x.float(), w.float())
        return F.gelu(z, approximate="tanh").to(x.dtype)


def get_init_inputs(**params):
    return []


def get_inputs(M, N, K, dtype="bfloat16", **params):
    dt = getattr(torch, dtype)
    # Unit-scale activations, weights scaled by 1/sqrt(K) and a bias of 0.5
    # spread: pre-activations are about N(0, 1.1), so GELU is exercised on both
    # its nearly-linear positive side and its saturating negative side.
    x = torch.randn(M, K, dtype=torch.float32).to(dt)
    w = (torch.randn(K, N, dtype=torch.float32) * K**-0.5).to(dt)
    bias = (torch.randn(N, dtype=torch.float32) * 0.5).to(dt)
    return [x, w, bias]
