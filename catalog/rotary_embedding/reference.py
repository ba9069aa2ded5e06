"""Rotary position embedding (GPT-NeoX half-split convention) applied in place to q and k.

For each token t with position p = positions[t], each head, and i < D/2:
    out[i]       = x[i] * cos[p, i] - x[i + D/2] * sin[p, i]
    out[i + D/2] = x[i + D/2] * cos[p, i] + x[i] * sin[p, i]
"""

import torch
import torch.nn as nn

# dist="default" draws the public inputs; "adversarial" (some hidden
# workloads) draws them so that the hazards the statement names are real.
DISTRIBUTIONS = ("default", "adversarial")

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


def get_inputs(tokens, heads, kv_heads, head_dim, dtype, dist="default", **params):
    if dist not in DISTRIBUTIONS:
        raise ValueError(f"unknown input distribution {dist!r}")
    if dist == "adversarial":
        return _adversarial_inputs(tokens, heads, kv_heads, head_dim, dtype)
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


def _adversarial_inputs(tokens, heads, kv_heads, head_dim, dtype):
    # Positions at the ends of the cache (0 and MAX_POSITIONS - 1) and just
    # inside them, repeated and in descending order, and q, k with
    # per-token gains from 1e-2 to 1e2: the rotation angle is largest at the
    # last position, where a table indexed past its end or an angle
    # recomputed in low precision is furthest off.
    dt = getattr(torch, dtype)
    ends = torch.tensor([MAX_POSITIONS - 1, 0, MAX_POSITIONS - 2, 1], dtype=torch.int64)
    positions = torch.where(
        torch.arange(tokens) % 2 == 0,
        ends[torch.randint(0, 4, (tokens,))],
        torch.randint(0, MAX_POSITIONS, (tokens,)).sort(descending=True).values,
    )
    gain = 10.0 ** (torch.rand(tokens, 1, 1) * 4.0 - 2.0)
    q = (torch.randn(tokens, heads, head_dim) * gain).to(dt)
    k = (torch.randn(tokens, kv_heads, head_dim) * gain).to(dt)
    inv_freq = 1.0 / (ROPE_BASE ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    angles = torch.outer(torch.arange(MAX_POSITIONS, dtype=torch.float64), inv_freq)
    return [positions, q, k, angles.cos().float(), angles.sin().float()]
