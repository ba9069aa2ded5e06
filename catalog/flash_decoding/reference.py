"""Decode attention: one query token per sequence against a full K/V cache, with GQA.

out[b, h, :] = sum_j softmax_j(q[b, h, :] . k[b, h // G, j, :] / sqrt(D)) * v[b, h // G, j, :]
where G = q_heads // kv_heads. The ground truth is computed in fp32.
"""

import torch
import torch.nn as nn

# dist="default" draws the public inputs; "adversarial" (some hidden
# workloads) draws them so that the hazards the statement names are real.
DISTRIBUTIONS = ("default", "adversarial")


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(
        self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor
    ) -> torch.Tensor:
        batch, q_heads, head_dim = q.shape
        kv_heads = k_cache.shape[1]
        group = q_heads // kv_heads
        # Query heads h = g_kv * group + r share kv head g_kv.
        qf = q.float().view(batch, kv_heads, group, head_dim)
        scores = torch.matmul(qf, k_cache.float().transpose(-1, -2)) * head_dim**-0.5
        probs = torch.softmax(scores, dim=-1)  # (B, Hkv, G, S)
        out = torch.matmul(probs, v_cache.float())  # (B, Hkv, G, D)
        return out.reshape(batch, q_heads, head_dim).to(q.dtype)


def get_init_inputs(**params):
    return []


def get_inputs(batch, q_heads, kv_heads, seq, head_dim, dtype, dist="default", **params):
    if dist not in DISTRIBUTIONS:
        raise ValueError(f"unknown input distribution {dist!r}")
    if dist == "adversarial":
        return _adversarial_inputs(batch, q_heads, kv_heads, seq, head_dim, dtype)
    dt = getattr(torch, dtype)
    # Scores with a spread of about 2.5: peaked attention rather than a flat average.
    q = (torch.randn(batch, q_heads, head_dim, dtype=torch.float32) * 2.5).to(dt)
    k = torch.randn(batch, kv_heads, seq, head_dim, dtype=dt)
    v = torch.randn(batch, kv_heads, seq, head_dim, dtype=dt)
    return [q, k, v]


def _adversarial_inputs(batch, q_heads, kv_heads, seq, head_dim, dtype):
    # Keys and queries share a per-(sequence, kv head) direction, so every
    # score carries an offset of about 20 sqrt(head_dim) (110 to 230): exp of
    # a raw score overflows fp32. Queries are four times the public scale, so
    # attention is nearly one-hot and the splits that miss the maximum must
    # be rescaled to almost nothing when they are combined.
    dt = getattr(torch, dtype)
    shared = torch.randn(batch, kv_heads, 1, head_dim)
    group = q_heads // kv_heads
    q = torch.randn(batch, q_heads, head_dim) * 10.0
    q = q + 4.5 * shared[:, :, 0].repeat_interleave(group, 1)
    k = torch.randn(batch, kv_heads, seq, head_dim) + 4.5 * shared
    v = torch.randn(batch, kv_heads, seq, head_dim, dtype=dt)
    return [q.to(dt), k.to(dt), v]
