"""Paged decode attention (vLLM-style KV cache of fixed-size pages) with GQA.

For sequence b with n = context_lens[b] tokens, token t lives in page
block_table[b, t // block_size], slot t % block_size, of key_cache / value_cache
(num_blocks, block_size, kv_heads, head_dim). Query head h uses kv head h // G.

out[b, h, :] = sum_{t < n} softmax_t(q[b, h, :] . K_b[t, h // G, :] / sqrt(D)) * V_b[t, h // G, :]

The ground truth is computed in fp32, one sequence at a time with a vectorised
page gather.
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
        self,
        q: torch.Tensor,
        key_cache: torch.Tensor,
        value_cache: torch.Tensor,
        block_table: torch.Tensor,
        context_lens: torch.Tensor,
    ) -> torch.Tensor:
        _, q_heads, head_dim = q.shape
        _, block_size, kv_heads, _ = key_cache.shape
        group = q_heads // kv_heads
        scale = head_dim**-0.5
        out = torch.empty_like(q)
        for b, n in enumerate(context_lens.tolist()):
            n_pages = (n + block_size - 1) // block_size
            pages = block_table[b, :n_pages].long()
            k = key_cache[pages].reshape(n_pages * block_size, kv_heads, head_dim)[:n].float()
            v = value_cache[pages].reshape(n_pages * block_size, kv_heads, head_dim)[:n].float()
            qb = q[b].float().view(kv_heads, group, head_dim)
            scores = torch.matmul(qb, k.permute(1, 2, 0)) * scale  # (Hkv, G, n)
            probs = torch.softmax(scores, dim=-1)
            ob = torch.matmul(probs, v.permute(1, 0, 2))  # (Hkv, G, D)
            out[b] = ob.reshape(q_heads, head_dim).to(q.dtype)
        return out


def get_init_inputs(**params):
    return []


def get_inputs(
    batch,
    q_heads,
    kv_heads,
    head_dim,
    block_size,
    min_len,
    len_step,
    dtype,
    dist="default",
    **params,
):
    if dist not in DISTRIBUTIONS:
        raise ValueError(f"unknown input distribution {dist!r}")
    if dist == "adversarial":
        return _adversarial_inputs(
            batch, q_heads, kv_heads, head_dim, block_size, min_len, len_step, dtype
        )
    dt = getattr(torch, dtype)
    # Context lengths min_len + i * len_step (i < batch), dealt to the sequences
    # in a random order: a deterministic mix of short and long sequences.
    lens = min_len + len_step * torch.arange(batch, dtype=torch.int64)
    lens = lens[torch.randperm(batch)]
    pages_per_seq = (lens + block_size - 1) // block_size
    used = int(pages_per_seq.sum())
    max_blocks = int(pages_per_seq.max())
    # A pool with some spare pages; the used pages are scattered over it in a
    # random order, as after many allocations and frees.
    num_blocks = used + used // 8 + 1
    phys = torch.randperm(num_blocks)[:used]
    first = torch.cumsum(pages_per_seq, 0) - pages_per_seq
    j = torch.arange(max_blocks, dtype=torch.int64)
    idx = (first[:, None] + j[None, :]).clamp(max=used - 1)
    filler = torch.randint(0, num_blocks, (batch, max_blocks))  # valid but unused entries
    block_table = torch.where(j[None, :] < pages_per_seq[:, None], phys[idx], filler).to(
        torch.int32
    )

    # Every slot of every page holds data (also past a sequence's end), so a
    # kernel that ignores context_lens reads wrong values, not zeros.
    key_cache = torch.randn(num_blocks, block_size, kv_heads, head_dim, dtype=dt)
    value_cache = torch.randn(num_blocks, block_size, kv_heads, head_dim, dtype=dt)
    q = (torch.randn(batch, q_heads, head_dim, dtype=torch.float32) * 2.5).to(dt)
    return [q, key_cache, value_cache, block_table.contiguous(), lens.to(torch.int32)]


def _adversarial_inputs(batch, q_heads, kv_heads, head_dim, block_size, min_len, len_step, dtype):
    # Context lengths of 1 token, of exactly one and of one page and one
    # token, and of the batch's longest (min_len + (batch - 1) * len_step),
    # dealt in a random order; pages scattered over the pool in a random
    # order. Keys and queries share a per-kv-head direction, so every score
    # carries an offset of about 20 sqrt(head_dim) (110 to 230): exp of a raw
    # score overflows fp32, and only the maximum's neighbours keep any weight.
    dt = getattr(torch, dtype)
    longest = min_len + len_step * (batch - 1)
    cycle = torch.tensor([1, longest, block_size, block_size + 1], dtype=torch.int64)
    lens = cycle[torch.arange(batch) % 4][torch.randperm(batch)]
    pages_per_seq = (lens + block_size - 1) // block_size
    used = int(pages_per_seq.sum())
    max_blocks = int(pages_per_seq.max())
    num_blocks = used + used // 8 + 1
    phys = torch.randperm(num_blocks)[:used]
    first = torch.cumsum(pages_per_seq, 0) - pages_per_seq
    j = torch.arange(max_blocks, dtype=torch.int64)
    idx = (first[:, None] + j[None, :]).clamp(max=used - 1)
    filler = torch.randint(0, num_blocks, (batch, max_blocks))
    block_table = torch.where(j[None, :] < pages_per_seq[:, None], phys[idx], filler).to(
        torch.int32
    )
    shared = torch.randn(kv_heads, head_dim)
    key_cache = torch.randn(num_blocks, block_size, kv_heads, head_dim) + 4.5 * shared
    value_cache = torch.randn(num_blocks, block_size, kv_heads, head_dim, dtype=dt)
    group = q_heads // kv_heads
    q = torch.randn(batch, q_heads, head_dim) * 2.5 + 4.5 * shared.repeat_interleave(group, 0)
    return [q.to(dt), key_cache.to(dt), value_cache, block_table.contiguous(), lens.to(torch.int32)]
