"""LayerNorm forward with the one-pass variance E[x^2] - E[x]^2 in fp32 (cancellation)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _layernorm_one_pass(
    x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, cols, stride, eps, BLOCK: tl.constexpr
):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < cols
    x = tl.load(x_ptr + row * stride + offs, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / cols
    var = tl.sum(x * x, axis=0) / cols - mean * mean
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = (x - mean) * rstd * w + b
    tl.store(y_ptr + row * cols + offs, y.to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)


class ModelNew(nn.Module):
    def __init__(self, eps: float = 1e-5):
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor):
        rows, cols = x.shape
        y = torch.empty((rows, cols), dtype=x.dtype, device=x.device)
        mean = torch.empty(rows, dtype=torch.float32, device=x.device)
        rstd = torch.empty(rows, dtype=torch.float32, device=x.device)
        block = triton.next_power_of_2(cols)
        _layernorm_one_pass[(rows,)](
            x, weight, bias, y, mean, rstd, cols, x.stride(0), self.eps, BLOCK=block
        )
        return y, mean, rstd
