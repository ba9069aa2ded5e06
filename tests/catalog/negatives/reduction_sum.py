"""Naive sum: one program per block of 4096 values, one fp32 atomic per block."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _naive_kernel(x_ptr, out_ptr, n_blocks, length, step_out, step_in, BLOCK: tl.constexpr):
    # Output j sums `length` values starting at j * step_out, spaced step_in apart; program
    # p adds block p % n_blocks of output p // n_blocks (one grid axis: a full sum has
    # 65,536 blocks, one more than a CUDA grid's second axis takes).
    p = tl.program_id(0)
    j = p // n_blocks
    k = (p % n_blocks) * BLOCK + tl.arange(0, BLOCK)
    mask = k < length
    v = tl.load(x_ptr + j * step_out + k * step_in, mask=mask, other=0.0).to(tl.float32)
    tl.atomic_add(out_ptr + j, tl.sum(v, axis=0))


class ModelNew(nn.Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        x = x.contiguous()
        if self.dim is None:
            n_out, length, step_out, step_in = 1, x.numel(), 0, 1
        elif self.dim == 1:
            n_out, length, step_out, step_in = x.shape[0], x.shape[1], x.shape[1], 1
        else:
            n_out, length, step_out, step_in = x.shape[1], x.shape[0], 1, x.shape[1]
        out = torch.zeros(n_out, dtype=torch.float32, device=x.device)
        BLOCK = 4096
        n_blocks = triton.cdiv(length, BLOCK)
        grid = (n_out * n_blocks,)
        _naive_kernel[grid](x, out, n_blocks, length, step_out, step_in, BLOCK=BLOCK)
        out = out.to(x.dtype)
        return out.view(()) if self.dim is None else out
