"""Scaled dot-product attention forward, optionally causal.

out[b, h, i, :] = sum_j softmax_j(q[b, h, i] . k[b, h, j] / sqrt(D) + mask[i, j]) * v[b, h, j, :]
with mask[i, j] = -inf for j > i when causal. The ground truth is computed in fp32.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, causal: bool):
        super().__init__()
        self.causal = causal

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        # fp32 inputs: every product, the softmax and the P @ V sum stay in fp32;
        # only the result is rounded to the input dtype.
        out = F.scaled_dot_product_attention(
            q.float(), k.float(), v.float(), is_causal=self.causal, scale=q.shape[-1] ** -0.5
        )
        return out.to(q.dtype)


def get_init_inputs(causal, **params):
    return [bool(causal)]


def get_inputs(batch, heads, seq, head_dim, dtype, **params):
    dt = getattr(torch, dtype)
    shape = (batch, heads, seq, head_dim)
    # Scores q.k/sqrt(D) with a standard deviation of about 2.5: peaked attention
    # rows (as in trained models) rather than a near-uniform average.
    q = (torch.randn(shape, dtype=torch.float32) * 1.6).to(dt)
    k = (torch.randn(shape, dtype=torch.float32) * 1.6).to(dt)
    v = torch.randn(shape, dtype=torch.float32).to(dt)
    return [q, k, v]
