"""Naive LayerNorm forward: sum and sum-of-squares sweep, a normalise sweep to an fp32
scratch buffer, then a separate elementwise kernel for the affine transform."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _naive_stats_normalize(x_ptr, xhat_ptr, mean_ptr, inv_ptr, n_cols, eps, BLOCK: tl.constexpr):
    r = tl.program_id(axis=0)
    offs = tl.arange(0, BLOCK)
    s = 0.0
    sq = 0.0
    for start in range(0, n_cols, BLOCK):
        v = tl.load(x_ptr + r * n_cols + start + offs, mask=start + offs < n_cols, other=0.0)
        v = v.to(tl.float32)
        s += tl.sum(v, 0)
        sq += tl.sum(v * v, 0)
    mu = s / n_cols
    var = sq / n_cols - mu * mu
    inv = 1.0 / tl.sqrt(var + eps)
    tl.store(mean_ptr + r, mu)
    tl.store(inv_ptr + r, inv)
    for start in range(0, n_cols, BLOCK):
        m = start + offs < n_cols
        v = tl.load(x_ptr + r * n_cols + start + offs, mask=m, other=0.0).to(tl.float32)
        tl.store(xhat_ptr + r * n_cols + start + offs, (v - mu) * inv, mask=m)


@triton.jit
def _naive_affine(xhat_ptr, w_ptr, b_ptr, y_ptr, n_cols, n_total, BLOCK: tl.constexpr):
    offs = tl.program_id(axis=0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n_total
    xh = tl.load(xhat_ptr + offs, mask=m, other=0.0)
    wv = tl.load(w_ptr + offs % n_cols, mask=m, other=0.0).to(tl.float32)
    bv = tl.load(b_ptr + offs % n_cols, mask=m, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs, xh * wv + bv, mask=m)


class ModelNew(nn.Module):
    def __init__(self, eps=1e-5):
        super().__init__()
        self.eps = eps

    def forward(self, x, weight, bias):
        x = x.contiguous()
        rows, n = x.shape
        xhat = torch.empty(rows, n, dtype=torch.float32, device=x.device)
        mean = torch.empty(rows, dtype=torch.float32, device=x.device)
        inv = torch.empty(rows, dtype=torch.float32, device=x.device)
        _naive_stats_normalize[(rows,)](x, xhat, mean, inv, n, self.eps, BLOCK=256)
        y = torch.empty_like(x)
        _naive_affine[(triton.cdiv(rows * n, 1024),)](
            xhat, weight, bias, y, n, rows * n, BLOCK=1024
        )
        return y, mean, inv
