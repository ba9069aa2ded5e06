"""Flash-attention forward in Triton.

One program owns a BLOCK_M tile of queries of one (batch, head) and keeps it in
registers while it streams BLOCK_N tiles of K and V through an online softmax
(running row max m_i and row sum l_i, rescaled by exp2(m_old - m_new)). Both
matrix products run on tensor cores with fp32 accumulation; P is fed to the
second product in bf16. The softmax scale and log2(e) are folded into a single
multiplier so every exponential is an exp2. For causal attention the K/V loop
stops at the diagonal (fully masked tiles are never loaded) and only the
diagonal tiles pay for the mask; the longest query tiles are scheduled first.
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
def _attn_inner(
    acc,
    l_i,
    m_i,
    q,
    k_base,
    v_base,
    stride_kn,
    stride_vn,
    qk_scale,
    seq_len,
    offs_m,
    offs_n,
    offs_d,
    lo,
    hi,
    BLOCK_N: tl.constexpr,
    MASKED: tl.constexpr,
    CAUSAL: tl.constexpr,
    DOT_FP32: tl.constexpr,
):
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_n
        k_ptrs = k_base + cols[None, :] * stride_kn + offs_d[:, None]  # K^T tile [D, BLOCK_N]
        v_ptrs = v_base + cols[:, None] * stride_vn + offs_d[None, :]  # V tile [BLOCK_N, D]
        if MASKED:  # noqa: SIM108 (constexpr branch: the unmasked load carries no predicate)
            k = tl.load(k_ptrs, mask=cols[None, :] < seq_len, other=0.0)
        else:
            k = tl.load(k_ptrs)
        qk = _mma(q, k, tl.zeros([q.shape[0], BLOCK_N], tl.float32), DOT_FP32)
        if MASKED:
            keep = cols[None, :] < seq_len
            if CAUSAL:
                keep = keep & (offs_m[:, None] >= cols[None, :])
            qk = tl.where(keep, qk, float("-inf"))
        # Online softmax in log2 units: scores * (sm_scale * log2 e) fused into one FMA.
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(qk * qk_scale - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        if MASKED:  # noqa: SIM108
            v = tl.load(v_ptrs, mask=cols[:, None] < seq_len, other=0.0)
        else:
            v = tl.load(v_ptrs)
        acc = _mma(p.to(v.dtype), v, acc, DOT_FP32)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def _attn_fwd(
    Q,
    K,
    V,
    Out,
    qk_scale,
    seq_len,
    n_heads,
    stride_qb,
    stride_qh,
    stride_qm,
    stride_kb,
    stride_kh,
    stride_kn,
    stride_vb,
    stride_vh,
    stride_vn,
    stride_ob,
    stride_oh,
    stride_om,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    CAUSAL: tl.constexpr,
    DOT_FP32: tl.constexpr,
):
    if CAUSAL:  # noqa: SIM108
        # Longest query tiles (most K/V tiles to visit) start first.
        start_m = tl.num_programs(0) - 1 - tl.program_id(0)
    else:
        start_m = tl.program_id(0)
    off_bh = tl.program_id(1)
    off_b = (off_bh // n_heads).to(tl.int64)
    off_h = (off_bh % n_heads).to(tl.int64)
    q_base = Q + off_b * stride_qb + off_h * stride_qh
    k_base = K + off_b * stride_kb + off_h * stride_kh
    v_base = V + off_b * stride_vb + off_h * stride_vh
    o_base = Out + off_b * stride_ob + off_h * stride_oh

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m[:, None] < seq_len
    # The Q tile is read once and stays resident for the whole K/V sweep.
    q = tl.load(q_base + offs_m[:, None] * stride_qm + offs_d[None, :], mask=row_ok, other=0.0)

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)

    if CAUSAL:
        full_hi = start_m * BLOCK_M  # tiles strictly below the diagonal: no mask at all
        hi = tl.minimum((start_m + 1) * BLOCK_M, seq_len)  # tiles past the diagonal are skipped
    else:
        full_hi = (seq_len // BLOCK_N) * BLOCK_N
        hi = seq_len
    acc, l_i, m_i = _attn_inner(
        acc,
        l_i,
        m_i,
        q,
        k_base,
        v_base,
        stride_kn,
        stride_vn,
        qk_scale,
        seq_len,
        offs_m,
        offs_n,
        offs_d,
        0,
        full_hi,
        BLOCK_N=BLOCK_N,
        MASKED=False,
        CAUSAL=CAUSAL,
        DOT_FP32=DOT_FP32,
    )
    acc, l_i, m_i = _attn_inner(
        acc,
        l_i,
        m_i,
        q,
        k_base,
        v_base,
        stride_kn,
        stride_vn,
        qk_scale,
        seq_len,
        offs_m,
        offs_n,
        offs_d,
        full_hi,
        hi,
        BLOCK_N=BLOCK_N,
        MASKED=True,
        CAUSAL=CAUSAL,
        DOT_FP32=DOT_FP32,
    )
    # Deferred normalisation: one division per output element, after the sweep.
    out = acc / l_i[:, None]
    tl.store(
        o_base + offs_m[:, None] * stride_om + offs_d[None, :],
        out.to(Out.dtype.element_ty),
        mask=row_ok,
    )


def _config(head_dim: int, causal: bool):
    """(BLOCK_M, BLOCK_N, num_warps, num_stages) for an H100/H200-class GPU.

    Measured on an H200 (Triton 3.6): 128 x 128 tiles with 8 warps and 3 stages
    at D = 128 (K + V tile 64 KB per stage); 64 x 64 tiles with 4 warps at D <= 64.
    BLOCK_M must be a multiple of BLOCK_N so the causal diagonal starts on a tile.
    """
    if head_dim <= 64:
        return 64, 64, 4, 3
    return 128, 128, 8, 3


class ModelNew(nn.Module):
    def __init__(self, causal: bool):
        super().__init__()
        self.causal = bool(causal)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        batch, heads, seq, head_dim = q.shape
        assert head_dim in (16, 32, 64, 128, 256), "head_dim must be a power of two in [16, 256]"
        out = torch.empty_like(q)
        if out.numel() == 0:
            return out
        block_m, block_n, warps, stages = _config(head_dim, self.causal)
        qk_scale = (head_dim**-0.5) * LOG2E
        grid = (triton.cdiv(seq, block_m), batch * heads)
        _attn_fwd[grid](
            q,
            k,
            v,
            out,
            qk_scale,
            seq,
            heads,
            q.stride(0),
            q.stride(1),
            q.stride(2),
            k.stride(0),
            k.stride(1),
            k.stride(2),
            v.stride(0),
            v.stride(1),
            v.stride(2),
            out.stride(0),
            out.stride(1),
            out.stride(2),
            BLOCK_M=block_m,
            BLOCK_N=block_n,
            HEAD_DIM=head_dim,
            CAUSAL=self.causal,
            DOT_FP32=q.device.type != "cuda",
            num_warps=warps,
            num_stages=stages,
        )
        return out
