"""Naive residual add + RMSNorm: an elementwise add kernel, a per-row statistics kernel
that writes 1/rms to HBM, and an elementwise normalise-and-scale kernel."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _naive_add(x_ptr, r_ptr, h_ptr, n_total, BLOCK: tl.constexpr):
    offs = tl.program_id(axis=0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n_total
    a = tl.load(x_ptr + offs, mask=m, other=0.0).to(tl.float32)
    b = tl.load(r_ptr + offs, mask=m, other=0.0).to(tl.float32)
    tl.store(h_ptr + offs, a + b, mask=m)


@triton.jit
def _naive_stats(h_ptr, inv_ptr, n_cols, eps, BLOCK: tl.constexpr):
    i = tl.program_id(axis=0)
    offs = tl.arange(0, BLOCK)
    ss = 0.0
    for start in range(0, n_cols, BLOCK):
        v = tl.load(h_ptr + i * n_cols + start + offs, mask=start + offs < n_cols, other=0.0)
        v = v.to(tl.float32)
        ss += tl.sum(v * v, 0)
    tl.store(inv_ptr + i, 1.0 / tl.sqrt(ss / n_cols + eps))


@triton.jit
def _naive_scale(h_ptr, inv_ptr, w_ptr, y_ptr, n_cols, n_total, BLOCK: tl.constexpr):
    offs = tl.program_id(axis=0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n_total
    v = tl.load(h_ptr + offs, mask=m, other=0.0).to(tl.float32)
    s = tl.load(inv_ptr + offs // n_cols, mask=m, other=0.0)
    g = tl.load(w_ptr + offs % n_cols, mask=m, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs, v * s * g, mask=m)


class ModelNew(nn.Module):
    def __init__(self, eps=1e-6):
        super().__init__()
        self.eps = eps

    def forward(self, x, residual, weight):
        n = x.shape[-1]
        total = x.numel()
        rows = total // n
        x = x.contiguous()
        residual = residual.contiguous()
        h = torch.empty_like(x)
        _naive_add[(triton.cdiv(total, 1024),)](x, residual, h, total, BLOCK=1024)
        inv = torch.empty(rows, dtype=torch.float32, device=x.device)
        _naive_stats[(rows,)](h, inv, n, self.eps, BLOCK=256)
        y = torch.empty_like(x)
        _naive_scale[(triton.cdiv(total, 1024),)](h, inv, weight, y, n, total, BLOCK=1024)
        return y, h
