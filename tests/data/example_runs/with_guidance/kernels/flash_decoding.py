"""Flash decoding (split-KV decode attention with GQA) in Triton.

Pass 1 splits every sequence's K/V cache into `num_splits` chunks, one program
per (batch, kv head, chunk). A program loads the whole group of query heads
that share its kv head (padded to BLOCK_H = 16 rows for the tensor cores),
streams its chunk of K/V in BLOCK_N tiles once with an online softmax in exp2
units, and writes a normalised fp32 partial output plus its log-sum-exp.
Pass 2 merges the partials of each (batch, query head) with weights
exp2(lse_i - max lse). The number of chunks is chosen on the host so that
batch x kv_heads x chunks fills every SM of the GPU.
"""

import functools

import torch
import torch.nn as nn
import triton
import triton.language as tl

LOG2E = 1.4426950408889634
MAX_SPLITS = 64
PROGRAMS_PER_SM = 4


@triton.jit
def _mma(a, b, acc, DOT_FP32: tl.constexpr):
    # Tensor-core product with fp32 accumulation. DOT_FP32 is set only off-GPU:
    # Triton's CPU interpreter mis-computes tl.dot on bf16 operands, so there the
    # (already bf16-rounded) operands are widened first; the numerics are the same.
    if DOT_FP32:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), acc)
    return tl.dot(a, b, acc)


@triton.jit
def _decode_split_kv(
    Q,
    K,
    V,
    Opart,
    Lse,
    qk_scale,
    seq_len,
    chunk,
    num_splits,
    stride_qb,
    stride_qh,
    stride_kb,
    stride_kh,
    stride_kn,
    stride_vb,
    stride_vh,
    stride_vn,
    KV_HEADS: tl.constexpr,
    GROUP: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_N: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    DOT_FP32: tl.constexpr,
):
    pid_bh = tl.program_id(0)
    split = tl.program_id(1)
    b = (pid_bh // KV_HEADS).to(tl.int64)
    kvh = (pid_bh % KV_HEADS).to(tl.int64)

    # GQA: all GROUP query heads of this kv head, padded to BLOCK_H MMA rows.
    offs_h = tl.arange(0, BLOCK_H)
    h_ok = offs_h < GROUP
    q_heads = kvh * GROUP + offs_h
    offs_d = tl.arange(0, HEAD_DIM)
    offs_n = tl.arange(0, BLOCK_N)
    q = tl.load(
        Q + b * stride_qb + q_heads[:, None] * stride_qh + offs_d[None, :],
        mask=h_ok[:, None],
        other=0.0,
    )

    k_base = K + b * stride_kb + kvh * stride_kh
    v_base = V + b * stride_vb + kvh * stride_vh
    start = split * chunk
    end = tl.minimum(start + chunk, seq_len)

    m_i = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, HEAD_DIM], tl.float32)
    for n0 in range(start, end, BLOCK_N):
        cols = n0 + offs_n
        ok = cols < end
        # K^T tile [D, BLOCK_N] and V tile [BLOCK_N, D]: each key row is D
        # contiguous elements, read with 16-byte vector loads.
        k = tl.load(
            k_base + cols[None, :] * stride_kn + offs_d[:, None], mask=ok[None, :], other=0.0
        )
        v = tl.load(
            v_base + cols[:, None] * stride_vn + offs_d[None, :], mask=ok[:, None], other=0.0
        )
        qk = _mma(q, k, tl.zeros([BLOCK_H, BLOCK_N], tl.float32), DOT_FP32)
        qk = tl.where(ok[None, :], qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(qk * qk_scale - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = _mma(p.to(v.dtype), v, acc * alpha[:, None], DOT_FP32)
        m_i = m_new

    # Every chunk holds at least one key, so l_i > 0 for the real heads.
    row = (b * KV_HEADS * GROUP + q_heads) * num_splits + split
    tl.store(
        Opart + row[:, None] * HEAD_DIM + offs_d[None, :], acc / l_i[:, None], mask=h_ok[:, None]
    )
    tl.store(Lse + row, m_i + tl.log2(l_i), mask=h_ok)


@triton.jit
def _combine_splits(
    Opart,
    Lse,
    Out,
    num_splits,
    stride_ob,
    stride_oh,
    Q_HEADS: tl.constexpr,
    BLOCK_S: tl.constexpr,
    HEAD_DIM: tl.constexpr,
):
    pid = tl.program_id(0)  # one (batch, query head)
    b = pid // Q_HEADS
    h = pid % Q_HEADS
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, HEAD_DIM)
    s_ok = offs_s < num_splits
    row = pid.to(tl.int64) * num_splits + offs_s
    lse = tl.load(Lse + row, mask=s_ok, other=float("-inf"))
    lse_max = tl.max(lse, 0)
    w = tl.exp2(lse - lse_max)  # log-sum-exp merge, in log2 units
    o = tl.load(Opart + row[:, None] * HEAD_DIM + offs_d[None, :], mask=s_ok[:, None], other=0.0)
    out = tl.sum(o * w[:, None], 0) / tl.sum(w, 0)
    tl.store(
        Out + b.to(tl.int64) * stride_ob + h * stride_oh + offs_d, out.to(Out.dtype.element_ty)
    )


@functools.cache
def _num_sms(device: torch.device) -> int:
    # Cached: the launch path is on the critical path of a ~140 us decode step.
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 132


def _config(batch, kv_heads, seq, head_dim, num_sms):
    """(BLOCK_N, chunk, num_splits, num_warps, num_stages) for the split-KV pass."""
    block_n = 64
    # Enough (batch, kv head, chunk) programs for about PROGRAMS_PER_SM per SM;
    # every chunk is a whole number of tiles and none is empty.
    n_tiles = triton.cdiv(seq, block_n)
    want = triton.cdiv(PROGRAMS_PER_SM * num_sms, batch * kv_heads)
    num_splits = max(1, min(want, n_tiles, MAX_SPLITS))
    chunk = triton.cdiv(n_tiles, num_splits) * block_n
    num_splits = triton.cdiv(seq, chunk)
    # K and V tiles of 64 x D bf16 per stage (32 KB at D = 128); two stages
    # keep several programs resident per SM (measured best on an H200).
    return block_n, chunk, num_splits, 4, 2


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(
        self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor
    ) -> torch.Tensor:
        q, k_cache, v_cache = q.contiguous(), k_cache.contiguous(), v_cache.contiguous()
        batch, q_heads, head_dim = q.shape
        _, kv_heads, seq, _ = k_cache.shape
        group = q_heads // kv_heads
        out = torch.empty_like(q)
        if out.numel() == 0:
            return out

        block_h = max(16, triton.next_power_of_2(group))
        block_n, chunk, num_splits, warps, stages = _config(
            batch, kv_heads, seq, head_dim, _num_sms(q.device)
        )

        o_part = torch.empty(
            batch * q_heads * num_splits, head_dim, dtype=torch.float32, device=q.device
        )
        lse = torch.empty(batch * q_heads * num_splits, dtype=torch.float32, device=q.device)
        dot_fp32 = q.device.type != "cuda"
        _decode_split_kv[(batch * kv_heads, num_splits)](
            q,
            k_cache,
            v_cache,
            o_part,
            lse,
            head_dim**-0.5 * LOG2E,
            seq,
            chunk,
            num_splits,
            q.stride(0),
            q.stride(1),
            k_cache.stride(0),
            k_cache.stride(1),
            k_cache.stride(2),
            v_cache.stride(0),
            v_cache.stride(1),
            v_cache.stride(2),
            KV_HEADS=kv_heads,
            GROUP=group,
            BLOCK_H=block_h,
            BLOCK_N=block_n,
            HEAD_DIM=head_dim,
            DOT_FP32=dot_fp32,
            num_warps=warps,
            num_stages=stages,
        )
        _combine_splits[(batch * q_heads,)](
            o_part,
            lse,
            out,
            num_splits,
            out.stride(0),
            out.stride(1),
            Q_HEADS=q_heads,
            BLOCK_S=triton.next_power_of_2(num_splits),
            HEAD_DIM=head_dim,
            num_warps=4,
        )
        return out
