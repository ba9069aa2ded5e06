"""The eager PyTorch a practitioner runs: one vectorised page gather, then masked bf16 SDPA."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(
        self,
        q: torch.Tensor,
        key_cache: torch.Tensor,
        value_cache: torch.Tensor,
        block_table: torch.Tensor,
        context_lens: torch.Tensor,
    ) -> torch.Tensor:
        batch, q_heads, head_dim = q.shape
        _, block_size, kv_heads, _ = key_cache.shape
        max_blocks = block_table.shape[1]
        slots = max_blocks * block_size
        # Gather every sequence's pages in one indexing op (B, blocks, bs, Hkv, D)
        # and lay them out as (B, Hkv, slots, D); slots past a sequence's length
        # are masked out of the softmax. No host sync, no per-sequence loop.
        pages = block_table.long()
        k = key_cache[pages].reshape(batch, slots, kv_heads, head_dim).transpose(1, 2)
        v = value_cache[pages].reshape(batch, slots, kv_heads, head_dim).transpose(1, 2)
        valid = torch.arange(slots, device=q.device)[None, :] < context_lens[:, None]
        qg = q.view(batch, kv_heads, q_heads // kv_heads, head_dim)
        out = F.scaled_dot_product_attention(
            qg, k, v, attn_mask=valid[:, None, None, :], scale=head_dim**-0.5
        )
        return out.reshape(batch, q_heads, head_dim)
