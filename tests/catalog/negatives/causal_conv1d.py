"""Naive causal conv1d: one program per (time step, channel block), SiLU in a second kernel."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _conv_kernel(x_ptr, w_ptr, b_ptr, out_ptr, seqlen, dim, BLOCK: tl.constexpr):
    bt = tl.program_id(axis=0)
    t = bt % seqlen
    offs = tl.program_id(axis=1) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < dim
    acc = tl.load(b_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    for k in tl.static_range(4):
        s = t - 3 + k
        xv = tl.load(x_ptr + (bt - 3 + k) * dim + offs, mask=mask & (offs * 0 + s >= 0), other=0.0)
        wv = tl.load(w_ptr + offs * 4 + k, mask=mask, other=0.0)
        acc += xv.to(tl.float32) * wv.to(tl.float32)
    tl.store(out_ptr + bt * dim + offs, acc, mask=mask)


@triton.jit
def _silu_kernel(a_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(axis=0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, (a / (1.0 + tl.exp(-a))).to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x, weight, bias):
        x, weight, bias = x.contiguous(), weight.contiguous(), bias.contiguous()
        batch, seqlen, dim = x.shape
        acc = torch.empty(x.shape, dtype=torch.float32, device=x.device)
        out = torch.empty_like(x)
        BLOCK = 128
        _conv_kernel[(batch * seqlen, triton.cdiv(dim, BLOCK))](
            x, weight, bias, acc, seqlen, dim, BLOCK=BLOCK
        )
        n = x.numel()
        _silu_kernel[(triton.cdiv(n, 1024),)](acc, out, n, BLOCK=1024)
        return out
