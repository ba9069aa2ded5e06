"""Expert W4A16 GEMV in Triton: fused int4 dequantisation, tensor cores, split-K.

Each program owns a block of output rows (N) and a contiguous run of the
128-wide groups of K. Per group it loads the packed words once, expands them
into nibbles with a vector of shifts, converts q - 8 to bf16 (exact), and
multiplies the tile by all M activation rows at once on tensor cores (M
padded to 16) with fp32 accumulation; the group's scale is applied to that
fp32 partial. K is split across programs so that even one activation row
fills every SM; a finish kernel adds the split partials and rounds to bf16.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

GROUP = 128
BLOCK_N = 64
PROGRAMS_PER_SM = 4


@triton.jit
def _w4a16_splitk(
    x_ptr,
    qw_ptr,
    sc_ptr,
    out_ptr,
    m_rows,
    n_cols,
    k_dim,
    groups_per_split,
    M_P: tl.constexpr,
    BN: tl.constexpr,
    G: tl.constexpr,
    UPCAST: tl.constexpr,
):
    pid_n = tl.program_id(0)
    split = tl.program_id(1)
    n = pid_n * BN + tl.arange(0, BN)
    n_ok = n < n_cols
    m = tl.arange(0, M_P)
    m_ok = m < m_rows
    words = tl.arange(0, G // 8)
    shifts = tl.arange(0, 8) * 4
    kk = tl.arange(0, G)
    n_groups = k_dim // G
    g_first = split * groups_per_split
    g_last = tl.minimum(g_first + groups_per_split, n_groups)
    qw_rows = qw_ptr + n.to(tl.int64)[:, None] * (k_dim // 8)
    acc = tl.zeros([BN, M_P], tl.float32)
    for g in range(g_first, g_last):
        packed = tl.load(qw_rows + g * (G // 8) + words[None, :], mask=n_ok[:, None], other=0)
        # Eight nibbles per word, low nibble first: (BN, G/8, 8) -> (BN, G).
        q = (packed[:, :, None] >> shifts[None, None, :]) & 0xF
        q = tl.reshape(q, [BN, G])
        # Through fp32: exact either way, and Triton's CPU interpreter converts
        # int straight to bf16 wrongly (it copies the integer bits).
        w = (q - 8).to(tl.float32).to(tl.bfloat16)
        xt = tl.load(
            x_ptr + m[None, :] * k_dim + (g * G + kk)[:, None], mask=m_ok[None, :], other=0.0
        )
        if UPCAST:  # CPU interpreter only: its bf16 tl.dot multiplies the raw bits
            w = w.to(tl.float32)
            xt = xt.to(tl.float32)
        part = tl.dot(w, xt)  # (BN, M_P), fp32 accumulation on the tensor cores
        s = tl.load(sc_ptr + n * n_groups + g, mask=n_ok, other=0.0).to(tl.float32)
        acc += part * s[:, None]
    dst = out_ptr + split * m_rows * n_cols + m[None, :] * n_cols + n[:, None]
    tl.store(dst, acc.to(out_ptr.dtype.element_ty), mask=n_ok[:, None] & m_ok[None, :])


@triton.jit
def _splits_finish(part_ptr, y_ptr, total, splits, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < total
    acc = tl.zeros([BLOCK], tl.float32)
    for s in range(0, splits):
        acc += tl.load(part_ptr + s * total + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, acc.to(y_ptr.dtype.element_ty), mask=mask)


def _num_sms(device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, qweight: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
        x, qweight, scales = x.contiguous(), qweight.contiguous(), scales.contiguous()
        m, k = x.shape
        n = qweight.shape[0]
        groups = k // GROUP
        y = torch.empty((m, n), dtype=x.dtype, device=x.device)
        row_blocks = triton.cdiv(n, BLOCK_N)
        # Split K until the grid holds a few programs per SM, at least one
        # group per program.
        wanted = triton.cdiv(_num_sms(x.device) * PROGRAMS_PER_SM, row_blocks)
        groups_per_split = triton.cdiv(groups, max(1, min(wanted, groups)))
        split_k = triton.cdiv(groups, groups_per_split)
        out = (
            y
            if split_k == 1
            else torch.empty((split_k, m, n), dtype=torch.float32, device=x.device)
        )
        _w4a16_splitk[(row_blocks, split_k)](
            x,
            qweight,
            scales,
            out,
            m,
            n,
            k,
            groups_per_split,
            M_P=max(16, triton.next_power_of_2(m)),
            BN=BLOCK_N,
            G=GROUP,
            UPCAST=(x.device.type == "cpu"),
            num_warps=4,
            num_stages=4,
        )
        if split_k > 1:
            total = m * n
            _splits_finish[(triton.cdiv(total, 1024),)](
                out, y, total, split_k, BLOCK=1024, num_warps=4
            )
        return y
