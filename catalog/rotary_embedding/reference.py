"""Rotary position embedding (GPT-NeoX half-split convention) applied in place to q and k.

For each token t with position p = positions[t], each head, and i < D/2:
    out[i]       = x[i] * cos[p, i] - x[i + D/2] * sin[p, i]
    out[i + D/2] = x[i + D/2] * cos[p, i] + x[i] * sin[p, i]
"""

import torch
import torch.nn as nn

MAX_POSITIONS = 8192
ROPE_BASE = 10000.0


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(
        self,
        positions: torch.Tensor,
        q: torch.Tensor,
        k: torch.Tensor,
        cos_cache: torch.Tensor,
        sin_cache: torch.Tensor,
    ):
        half = q.shape[-1] // 2
        cos = cos_cache[positions].unsqueeze(1)  # (tokens, 1, D/2), fp32
        sin = sin_cache[positions].unsqueeze(1)

        def rotate(x: torch.Tensor) -> torch.Tensor:
            x1 = x[..., :half].float()
            x2 = x[..., half:].float()
            return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).to(x.dtype)

        q.copy_(rotate(q))
        k.copy_(rotate(k))
        return q, k


def get_init_inputs(**params):
    return []


def get_inputs(tokens, heads, kv_heads, head_dim, dtype, **params):
    dt = getattr(torch, dtype)
    # Tokens of a mixed prefill batch: any position in the cache is valid.
    positions = torch.randint(0, MAX_POSITIONS, (tokens,), dtype=torch.int64)
    q = torch.randn(tokens, heads, head_dim).to(dt)
    k = torch.randn(tokens, kv_heads, head_dim).to(dt)
    # The precomputed rotary table, as a model builds it once at load time.
    inv_freq = 1.0 / (ROPE_BASE ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    angles = torch.outer(torch.arange(MAX_POSITIONS, dtype=torch.float64), inv_freq)
    cos_cache = angles.cos().float()
    sin_cache = angles.sin().float()
    return [positions, q, k, cos_cache, sin_cache]
