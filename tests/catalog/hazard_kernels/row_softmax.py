"""Row softmax without the max subtraction: exp of the raw logits (the overflow hazard)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _softmax_raw_exp(x_ptr, y_ptr, cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < cols
    x = tl.load(x_ptr + row * stride + offs, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x)
    y = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * cols + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows, cols = x.shape
        y = torch.empty((rows, cols), dtype=x.dtype, device=x.device)
        block = triton.next_power_of_2(cols)
        _softmax_raw_exp[(rows,)](x, y, cols, x.stride(0), BLOCK=block)
        return y
