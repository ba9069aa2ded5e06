"""LayerNorm forward in Triton.

One program owns one row. When the row fits in registers (up to 16384 values)
it is read from HBM once: mean and centred variance are two on-chip reductions
over the same registers, and the affine transform is fused into the store.
Longer rows merge per-chunk statistics with Welford/Chan updates in one sweep,
then normalise in a second sweep. Statistics are fp32; rstd uses rsqrt.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

MAX_FUSED_COLS = 16384
LOOP_BLOCK = 4096


@triton.jit
def _layernorm_fused(
    x_ptr,
    w_ptr,
    b_ptr,
    y_ptr,
    mean_ptr,
    rstd_ptr,
    stride_x,
    stride_y,
    n_cols,
    eps,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    # Two reductions over the same registers: exact mean, then centred variance.
    mean = tl.sum(x, axis=0) / n_cols
    xc = tl.where(mask, x - mean, 0.0)
    var = tl.sum(xc * xc, axis=0) / n_cols
    rstd = tl.rsqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    y = xc * rstd * w + b
    tl.store(y_ptr + row * stride_y + cols, y.to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)


@triton.jit
def _layernorm_welford(
    x_ptr,
    w_ptr,
    b_ptr,
    y_ptr,
    mean_ptr,
    rstd_ptr,
    stride_x,
    stride_y,
    n_cols,
    eps,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    cols = tl.arange(0, BLOCK)
    # Sweep 1: per-chunk mean and M2, merged into the running (count, mean, m2)
    # with Chan's parallel Welford update. One read of the row.
    count = 0.0
    mean = 0.0
    m2 = 0.0
    for start in range(0, n_cols, BLOCK):
        offs = start + cols
        mask = offs < n_cols
        x = tl.load(x_row + offs, mask=mask, other=0.0).to(tl.float32)
        n_b = tl.minimum(n_cols - start, BLOCK).to(tl.float32)
        mean_b = tl.sum(x, axis=0) / n_b
        xc = tl.where(mask, x - mean_b, 0.0)
        m2_b = tl.sum(xc * xc, axis=0)
        n_ab = count + n_b
        delta = mean_b - mean
        mean = mean + delta * (n_b / n_ab)
        m2 = m2 + m2_b + delta * delta * (count * n_b / n_ab)
        count = n_ab
    rstd = tl.rsqrt(m2 / n_cols + eps)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)
    # Sweep 2: normalise, apply the affine transform, write.
    for start in range(0, n_cols, BLOCK):
        offs = start + cols
        mask = offs < n_cols
        x = tl.load(x_row + offs, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(y_row + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def _num_warps(block: int, elem_bytes: int) -> int:
    # About 16 bytes per thread per load so every access is a 16-byte vector,
    # with the whole row spread across the program's warps.
    return max(1, min(8, block * elem_bytes // (16 * 32) // 2))


class ModelNew(nn.Module):
    def __init__(self, eps: float = 1e-5):
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor):
        # Launch glue kept minimal: host overhead matters for the ~15 µs shapes.
        n_cols = x.shape[-1]
        if not x.is_contiguous():
            x = x.contiguous()
        if not weight.is_contiguous():
            weight = weight.contiguous()
        if not bias.is_contiguous():
            bias = bias.contiguous()
        rows = x.numel() // n_cols if n_cols else 0
        y = torch.empty_like(x)
        mean = torch.empty(rows, dtype=torch.float32, device=x.device)
        rstd = torch.empty(rows, dtype=torch.float32, device=x.device)
        if rows == 0:
            return y, mean, rstd
        block = triton.next_power_of_2(n_cols)
        if block <= MAX_FUSED_COLS:
            _layernorm_fused[(rows,)](
                x,
                weight,
                bias,
                y,
                mean,
                rstd,
                n_cols,
                n_cols,
                n_cols,
                self.eps,
                BLOCK=block,
                num_warps=_num_warps(block, x.element_size()),
            )
        else:
            _layernorm_welford[(rows,)](
                x,
                weight,
                bias,
                y,
                mean,
                rstd,
                n_cols,
                n_cols,
                n_cols,
                self.eps,
                BLOCK=LOOP_BLOCK,
                num_warps=8,
            )
        return y, mean, rstd
