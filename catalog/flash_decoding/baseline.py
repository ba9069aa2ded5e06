"""The eager PyTorch a practitioner runs: bf16 scaled_dot_product_attention, GQA by a view."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(
        self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor
    ) -> torch.Tensor:
        batch, q_heads, head_dim = q.shape
        kv_heads = k_cache.shape[1]
        # The G query heads of one kv head become G query rows against that kv
        # head's cache: no copy of K/V per query head. In the inputs' dtype.
        qg = q.view(batch, kv_heads, q_heads // kv_heads, head_dim)
        out = F.scaled_dot_product_attention(qg, k_cache, v_cache, scale=head_dim**-0.5)
        return out.reshape(batch, q_heads, head_dim)
