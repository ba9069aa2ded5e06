"""Paged decode attention (GQA, block-table KV cache) in Triton.

Pass 1: one program per (sequence, kv head, partition of PARTITION tokens).
Partitions past a sequence's context length exit at once. A program holds the
whole group of query heads sharing its kv head (padded to BLOCK_H = 16 MMA
rows), walks its partition BLOCK_N tokens (several pages) at a time, maps the
tile's logical token positions to physical rows through the block table, and
keeps an online softmax in exp2 units. The page ids of the next tile are loaded
before the current tile is consumed, so the dependent block-table load is off
the critical path. Each program writes an fp32 partial output and its
log-sum-exp.
Pass 2: one program per (sequence, query head) merges that sequence's
partitions with weights exp2(lse_i - max lse).
The grid comes from the block table's shape: no host synchronisation.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

LOG2E = 1.4426950408889634


@triton.jit
def _mma(a, b, acc, DOT_FP32: tl.constexpr):
    # Tensor-core product with fp32 accumulation. DOT_FP32 is set only off-GPU:
    # Triton's CPU interpreter mis-computes tl.dot on bf16 operands, so there the
    # (already bf16-rounded) operands are widened first; the numerics are the same.
    if DOT_FP32:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), acc)
    return tl.dot(a, b, acc)


@triton.jit
def _paged_partition(
    Q,
    KC,
    VC,
    BlockTable,
    ContextLens,
    Opart,
    Lse,
    qk_scale,
    max_parts,
    stride_qb,
    stride_qh,
    stride_kp,
    stride_ks,
    stride_kh,
    stride_vp,
    stride_vs,
    stride_vh,
    stride_bt,
    KV_HEADS: tl.constexpr,
    GROUP: tl.constexpr,
    BLOCK_H: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    PAGE_SIZE: tl.constexpr,
    BLOCK_N: tl.constexpr,
    PARTITION: tl.constexpr,
    DOT_FP32: tl.constexpr,
):
    pid_bh = tl.program_id(0)
    part = tl.program_id(1)
    b = pid_bh // KV_HEADS
    kvh = (pid_bh % KV_HEADS).to(tl.int64)
    ctx_len = tl.load(ContextLens + b)
    start = part * PARTITION
    if start >= ctx_len:
        return  # this sequence is shorter: nothing to do
    end = tl.minimum(start + PARTITION, ctx_len)

    offs_h = tl.arange(0, BLOCK_H)
    h_ok = offs_h < GROUP
    q_heads = kvh * GROUP + offs_h
    offs_d = tl.arange(0, HEAD_DIM)
    offs_n = tl.arange(0, BLOCK_N)
    q = tl.load(
        Q + b.to(tl.int64) * stride_qb + q_heads[:, None] * stride_qh + offs_d[None, :],
        mask=h_ok[:, None],
        other=0.0,
    )
    bt_row = BlockTable + b.to(tl.int64) * stride_bt

    # Block-table indirection for a whole tile of tokens: logical token -> (page, slot).
    tok = start + offs_n
    pages = tl.load(bt_row + tok // PAGE_SIZE, mask=tok < end, other=0)

    m_i = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, HEAD_DIM], tl.float32)
    for n0 in range(start, end, BLOCK_N):
        tok = n0 + offs_n
        ok = tok < end
        slot = tok % PAGE_SIZE
        page64 = pages.to(tl.int64)
        k_row = page64 * stride_kp + slot * stride_ks + kvh * stride_kh
        v_row = page64 * stride_vp + slot * stride_vs + kvh * stride_vh
        k = tl.load(
            KC + k_row[None, :] + offs_d[:, None], mask=ok[None, :], other=0.0
        )  # [D, BLOCK_N]
        v = tl.load(
            VC + v_row[:, None] + offs_d[None, :], mask=ok[:, None], other=0.0
        )  # [BLOCK_N, D]
        # Prefetch the page ids of the next tile while this tile is in flight.
        next_tok = tok + BLOCK_N
        pages = tl.load(bt_row + next_tok // PAGE_SIZE, mask=next_tok < end, other=0)

        qk = _mma(q, k, tl.zeros([BLOCK_H, BLOCK_N], tl.float32), DOT_FP32)
        qk = tl.where(ok[None, :], qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(qk * qk_scale - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = _mma(p.to(v.dtype), v, acc * alpha[:, None], DOT_FP32)
        m_i = m_new

    row = (b.to(tl.int64) * KV_HEADS * GROUP + q_heads) * max_parts + part
    tl.store(
        Opart + row[:, None] * HEAD_DIM + offs_d[None, :], acc / l_i[:, None], mask=h_ok[:, None]
    )
    tl.store(Lse + row, m_i + tl.log2(l_i), mask=h_ok)


@triton.jit
def _combine_partitions(
    Opart,
    Lse,
    ContextLens,
    Out,
    max_parts,
    stride_ob,
    stride_oh,
    Q_HEADS: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    PARTITION: tl.constexpr,
    BLOCK_P: tl.constexpr,
):
    pid = tl.program_id(0)  # one (sequence, query head)
    b = pid // Q_HEADS
    h = pid % Q_HEADS
    n_parts = tl.cdiv(tl.load(ContextLens + b), PARTITION)
    offs_p = tl.arange(0, BLOCK_P)
    offs_d = tl.arange(0, HEAD_DIM)
    base = pid.to(tl.int64) * max_parts
    m = float("-inf")
    w_sum = 0.0
    acc = tl.zeros([HEAD_DIM], tl.float32)
    for p0 in range(0, n_parts, BLOCK_P):
        idx = p0 + offs_p
        ok = idx < n_parts
        lse = tl.load(Lse + base + idx, mask=ok, other=float("-inf"))
        m_new = tl.maximum(m, tl.max(lse, 0))
        w = tl.exp2(lse - m_new)  # log-sum-exp merge, in log2 units
        o = tl.load(
            Opart + (base + idx)[:, None] * HEAD_DIM + offs_d[None, :], mask=ok[:, None], other=0.0
        )
        rescale = tl.exp2(m - m_new)
        acc = acc * rescale + tl.sum(o * w[:, None], 0)
        w_sum = w_sum * rescale + tl.sum(w, 0)
        m = m_new
    out = acc / w_sum
    tl.store(
        Out + b.to(tl.int64) * stride_ob + h * stride_oh + offs_d, out.to(Out.dtype.element_ty)
    )


def _config(batch, kv_heads, head_dim, page_size, max_tokens):
    """(PARTITION, BLOCK_N, num_warps, num_stages) for the partition pass."""
    # Large partitions (fewer partials to merge) as long as batch x kv heads x
    # partitions still gives several programs per SM for a half-full table.
    target = 4 * 132
    partition = 2048
    while partition > 512 and batch * kv_heads * max_tokens < 2 * target * partition:
        partition //= 2
    block_n = max(64, page_size)
    # K and V tiles of 64 tokens x D bf16 per stage: 32 KB at D = 128.
    return partition, block_n, 4, 3


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q, key_cache, value_cache, block_table, context_lens):
        q = q.contiguous()
        block_table = block_table.contiguous()
        context_lens = context_lens.contiguous()
        batch, q_heads, head_dim = q.shape
        _, page_size, kv_heads, _ = key_cache.shape
        group = q_heads // kv_heads
        out = torch.empty_like(q)
        if out.numel() == 0:
            return out

        # Grid from the table's width (an upper bound on every context length),
        # never from context_lens on the host, which would synchronise.
        max_tokens = block_table.shape[1] * page_size
        partition, block_n, warps, stages = _config(
            batch, kv_heads, head_dim, page_size, max_tokens
        )
        max_parts = triton.cdiv(max_tokens, partition)
        block_h = max(16, triton.next_power_of_2(group))

        o_part = torch.empty(
            batch * q_heads * max_parts, head_dim, dtype=torch.float32, device=q.device
        )
        lse = torch.empty(batch * q_heads * max_parts, dtype=torch.float32, device=q.device)
        _paged_partition[(batch * kv_heads, max_parts)](
            q,
            key_cache,
            value_cache,
            block_table,
            context_lens,
            o_part,
            lse,
            head_dim**-0.5 * LOG2E,
            max_parts,
            q.stride(0),
            q.stride(1),
            key_cache.stride(0),
            key_cache.stride(1),
            key_cache.stride(2),
            value_cache.stride(0),
            value_cache.stride(1),
            value_cache.stride(2),
            block_table.stride(0),
            KV_HEADS=kv_heads,
            GROUP=group,
            BLOCK_H=block_h,
            HEAD_DIM=head_dim,
            PAGE_SIZE=page_size,
            BLOCK_N=block_n,
            PARTITION=partition,
            DOT_FP32=q.device.type != "cuda",
            num_warps=warps,
            num_stages=stages,
        )
        _combine_partitions[(batch * q_heads,)](
            o_part,
            lse,
            context_lens,
            out,
            max_parts,
            out.stride(0),
            out.stride(1),
            Q_HEADS=q_heads,
            HEAD_DIM=head_dim,
            PARTITION=partition,
            BLOCK_P=32,
            num_warps=4,
        )
        return out
