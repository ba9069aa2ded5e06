"""Sum by atomically adding every element to one fp32 total per output.

Each addition to the total rounds; with terms of random size the roundings
cancel out, with many nearly equal terms they all go the same way and drift.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _sum_atomic(x_ptr, y_ptr, length, stride_out, stride_in, BLOCK: tl.constexpr):
    out = tl.program_id(0)
    idx = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = idx < length
    v = tl.load(x_ptr + out * stride_out + idx * stride_in, mask=mask, other=0.0)
    tl.atomic_add(y_ptr + out + idx * 0, v.to(tl.float32), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.dim is None:
            view = x.reshape(1, -1)
        elif self.dim == 1:
            view = x
        else:
            view = x.t()
        outs, length = view.shape
        total = torch.zeros(outs, dtype=torch.float32, device=x.device)
        grid = (outs, triton.cdiv(length, 1024))
        _sum_atomic[grid](x, total, length, view.stride(0), view.stride(1), BLOCK=1024)
        y = total.to(x.dtype)
        return y.reshape(()) if self.dim is None else y
