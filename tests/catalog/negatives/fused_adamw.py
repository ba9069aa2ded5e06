"""Naive AdamW: three kernels per tensor (each moment, then the parameter), powers per element."""

import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _first_moment(m_ptr, g_ptr, n, beta1, BLOCK: tl.constexpr):
    offs = tl.program_id(axis=0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    g = tl.load(g_ptr + offs, mask=mask)
    m = tl.load(m_ptr + offs, mask=mask)
    tl.store(m_ptr + offs, beta1 * m + (1.0 - beta1) * g, mask=mask)


@triton.jit
def _second_moment(v_ptr, g_ptr, n, beta2, BLOCK: tl.constexpr):
    offs = tl.program_id(axis=0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    g = tl.load(g_ptr + offs, mask=mask)
    v = tl.load(v_ptr + offs, mask=mask)
    tl.store(v_ptr + offs, beta2 * v + (1.0 - beta2) * g * g, mask=mask)


@triton.jit
def _param(p_ptr, m_ptr, v_ptr, n, step, lr, beta1, beta2, eps, wd, BLOCK: tl.constexpr):
    offs = tl.program_id(axis=0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    p = tl.load(p_ptr + offs, mask=mask)
    m = tl.load(m_ptr + offs, mask=mask)
    v = tl.load(v_ptr + offs, mask=mask)
    bc1 = 1.0 - tl.exp(step * tl.log(beta1))
    bc2 = 1.0 - tl.exp(step * tl.log(beta2))
    p = p * (1.0 - lr * wd)
    p = p - lr * (m / bc1) / (tl.sqrt(v / bc2) + eps)
    tl.store(p_ptr + offs, p, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, lr, beta1, beta2, eps, weight_decay):
        super().__init__()
        self.hp = (lr, beta1, beta2, eps, weight_decay)

    def forward(self, step, *tensors):
        lr, beta1, beta2, eps, wd = self.hp
        n = len(tensors) // 4
        ps, gs, ms, vs = tensors[:n], tensors[n : 2 * n], tensors[2 * n : 3 * n], tensors[3 * n :]
        BLOCK = 1024
        for p, g, m, v in zip(ps, gs, ms, vs, strict=True):
            size = p.numel()
            grid = (triton.cdiv(size, BLOCK),)
            _first_moment[grid](m, g, size, beta1, BLOCK=BLOCK)
            _second_moment[grid](v, g, size, beta2, BLOCK=BLOCK)
            _param[grid](p, m, v, size, float(step), lr, beta1, beta2, eps, wd, BLOCK=BLOCK)
        return (*ps, *ms, *vs)
