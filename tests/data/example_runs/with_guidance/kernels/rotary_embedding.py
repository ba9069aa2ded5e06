"""Rotary embedding (half-split / NeoX layout) in Triton.

One launch rotates q and k in place. Each program owns one token (and, when
tokens are few, one group of its heads): it reads the token's position once,
loads its cos and sin rows (D/2 fp32 values) once, and broadcasts them over a
[heads, D/2] tile of q and then of k. Each lane owns a
pair (i, i + D/2): the two halves are two contiguous vector loads, both outputs
are computed in fp32 from them and stored back to the same addresses.
"""

import torch.nn as nn
import triton
import triton.language as tl

TILE_ELEMS = 2048  # elements per half-tile (heads x D/2) per loop iteration
MIN_PROGRAMS = 2048  # about 16 programs per SM on a 132-SM H100/H200


@triton.jit
def _rope_qk_fused(
    pos_ptr,
    q_ptr,
    k_ptr,
    cos_ptr,
    sin_ptr,
    stride_qt,
    stride_qh,
    stride_kt,
    stride_kh,
    n_q_heads,
    n_k_heads,
    n_groups,
    HALF: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_H: tl.constexpr,
):
    tok = tl.program_id(0).to(tl.int64)
    grp = tl.program_id(1)
    pos = tl.load(pos_ptr + tok).to(tl.int64)
    d = tl.arange(0, BLOCK_D)
    d_mask = d < HALF
    # cos/sin of this token: loaded once, shared by every head of q and k.
    c = tl.load(cos_ptr + pos * HALF + d, mask=d_mask, other=0.0)[None, :]
    s = tl.load(sin_ptr + pos * HALF + d, mask=d_mask, other=0.0)[None, :]
    hh = tl.arange(0, BLOCK_H)

    q_tok = q_ptr + tok * stride_qt
    for h0 in range(grp * BLOCK_H, n_q_heads, n_groups * BLOCK_H):
        heads = h0 + hh
        m = (heads < n_q_heads)[:, None] & d_mask[None, :]
        p1 = q_tok + heads[:, None] * stride_qh + d[None, :]
        x1 = tl.load(p1, mask=m, other=0.0).to(tl.float32)
        x2 = tl.load(p1 + HALF, mask=m, other=0.0).to(tl.float32)
        tl.store(p1, (x1 * c - x2 * s).to(q_ptr.dtype.element_ty), mask=m)
        tl.store(p1 + HALF, (x2 * c + x1 * s).to(q_ptr.dtype.element_ty), mask=m)

    k_tok = k_ptr + tok * stride_kt
    for h0 in range(grp * BLOCK_H, n_k_heads, n_groups * BLOCK_H):
        heads = h0 + hh
        m = (heads < n_k_heads)[:, None] & d_mask[None, :]
        p1 = k_tok + heads[:, None] * stride_kh + d[None, :]
        x1 = tl.load(p1, mask=m, other=0.0).to(tl.float32)
        x2 = tl.load(p1 + HALF, mask=m, other=0.0).to(tl.float32)
        tl.store(p1, (x1 * c - x2 * s).to(k_ptr.dtype.element_ty), mask=m)
        tl.store(p1 + HALF, (x2 * c + x1 * s).to(k_ptr.dtype.element_ty), mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, positions, q, k, cos_cache, sin_cache):
        tokens, n_q_heads, head_dim = q.shape
        n_k_heads = k.shape[1]
        half = head_dim // 2
        if tokens == 0:
            return q, k
        # In place needs the caller's tensors: rows of a head must be contiguous.
        assert q.stride(2) == 1 and k.stride(2) == 1
        block_d = triton.next_power_of_2(half)
        block_h = min(
            triton.next_power_of_2(max(n_q_heads, n_k_heads)), max(1, TILE_ELEMS // block_d)
        )
        # Few tokens (or many heads per token): split the heads of a token into
        # groups over a second grid axis until there are enough programs to
        # fill the SMs several times over.
        while (
            block_h > 1
            and block_h * block_d > 512
            and (tokens * triton.cdiv(max(n_q_heads, n_k_heads), block_h) < MIN_PROGRAMS)
        ):
            block_h //= 2
        n_groups = triton.cdiv(max(n_q_heads, n_k_heads), block_h)
        # ~16 elements per thread per half-load: 16-byte vectors for bf16 and
        # two 16-byte vectors for fp32.
        num_warps = max(1, min(8, block_h * block_d // 512))
        _rope_qk_fused[(tokens, n_groups)](
            positions,
            q,
            k,
            cos_cache,
            sin_cache,
            q.stride(0),
            q.stride(1),
            k.stride(0),
            k.stride(1),
            n_q_heads,
            n_k_heads,
            n_groups,
            HALF=half,
            BLOCK_D=block_d,
            BLOCK_H=block_h,
            num_warps=num_warps,
        )
        return q, k
