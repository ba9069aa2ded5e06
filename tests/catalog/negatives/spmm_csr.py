"""Naive CSR SpMM: one program per row, one nonzero (one dense row) at a time."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _naive_kernel(crow_ptr, col_ptr, val_ptr, b_ptr, c_ptr, n_dense, BLOCK_N: tl.constexpr):
    r = tl.program_id(axis=0)
    offs_n = tl.arange(0, BLOCK_N)
    mask_n = offs_n < n_dense
    start = tl.load(crow_ptr + r)
    end = tl.load(crow_ptr + r + 1)
    acc = tl.zeros([BLOCK_N], tl.float32)
    for k in range(start, end):
        j = tl.load(col_ptr + k)
        v = tl.load(val_ptr + k)
        b = tl.load(b_ptr + j * n_dense + offs_n, mask=mask_n, other=0.0)
        acc += v * b
    tl.store(c_ptr + r * n_dense + offs_n, acc, mask=mask_n)


class ModelNew(nn.Module):
    def forward(self, crow_indices, col_indices, values, dense):
        dense = dense.contiguous()
        rows, n = crow_indices.numel() - 1, dense.shape[1]
        out = torch.empty((rows, n), dtype=dense.dtype, device=dense.device)
        _naive_kernel[(rows,)](
            crow_indices, col_indices, values, dense, out, n, BLOCK_N=triton.next_power_of_2(n)
        )
        return out
