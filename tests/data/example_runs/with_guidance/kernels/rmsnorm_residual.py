"""Fused residual add + RMSNorm in Triton.

h = x + residual and y = h * rsqrt(mean(h^2) + eps) * weight in one kernel: each
row is read once (x and residual), kept in registers, and both outputs are
written from the same registers. Programs are persistent over rows: the grid is
capped at a few programs per SM and each program loads the weight once, then
strides over rows. Rows longer than the register budget take a two-sweep path
(add, store h and accumulate sum of squares; then re-read h and normalise).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

MAX_FUSED_COLS = 8192
LOOP_BLOCK = 4096


@triton.jit
def _add_rmsnorm_fused(
    x_ptr,
    res_ptr,
    w_ptr,
    y_ptr,
    h_ptr,
    n_rows,
    n_cols,
    n_prog,
    eps,
    BLOCK: tl.constexpr,
):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    # The gain is the same for every row: load it once per persistent program.
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    for row in range(pid, n_rows, n_prog):
        off = tl.cast(row, tl.int64) * n_cols
        x = tl.load(x_ptr + off + cols, mask=mask, other=0.0).to(tl.float32)
        r = tl.load(res_ptr + off + cols, mask=mask, other=0.0).to(tl.float32)
        # The new residual stream, rounded once to the storage dtype; the norm
        # is taken of exactly the values that are stored.
        h = (x + r).to(h_ptr.dtype.element_ty)
        tl.store(h_ptr + off + cols, h, mask=mask)
        hf = h.to(tl.float32)
        rstd = tl.rsqrt(tl.sum(hf * hf, axis=0) / n_cols + eps)
        tl.store(y_ptr + off + cols, (hf * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _add_rmsnorm_looped(
    x_ptr,
    res_ptr,
    w_ptr,
    y_ptr,
    h_ptr,
    n_cols,
    eps,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    off = row * n_cols
    cols = tl.arange(0, BLOCK)
    # Sweep 1: add, store the residual, accumulate the sum of squares per lane.
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + cols
        mask = offs < n_cols
        x = tl.load(x_ptr + off + offs, mask=mask, other=0.0).to(tl.float32)
        r = tl.load(res_ptr + off + offs, mask=mask, other=0.0).to(tl.float32)
        h = (x + r).to(h_ptr.dtype.element_ty)
        tl.store(h_ptr + off + offs, h, mask=mask)
        hf = h.to(tl.float32)
        acc += hf * hf
    rstd = tl.rsqrt(tl.sum(acc, axis=0) / n_cols + eps)
    # Sweep 2: re-read h (written by this program, usually still in L2), scale, store y.
    for start in range(0, n_cols, BLOCK):
        offs = start + cols
        mask = offs < n_cols
        hf = tl.load(h_ptr + off + offs, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + off + offs, (hf * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def _num_warps(block: int, elem_bytes: int) -> int:
    # About one or two 16-byte vectors per thread per tensor.
    return max(1, min(16, block * elem_bytes // (16 * 32) // 2))


_SM_COUNT: dict = {}


def _num_sms(device: torch.device) -> int:
    if device.type != "cuda":
        return 1  # CPU interpreter: behave like a single SM
    key = device.index if device.index is not None else torch.cuda.current_device()
    if key not in _SM_COUNT:
        _SM_COUNT[key] = torch.cuda.get_device_properties(key).multi_processor_count
    return _SM_COUNT[key]


class ModelNew(nn.Module):
    def __init__(self, eps: float = 1e-6):
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor):
        # Launch glue kept minimal: host overhead matters for the ~20 µs shapes.
        n_cols = x.shape[-1]
        if not x.is_contiguous():
            x = x.contiguous()
        if not residual.is_contiguous():
            residual = residual.contiguous()
        if not weight.is_contiguous():
            weight = weight.contiguous()
        rows = x.numel() // n_cols if n_cols else 0
        y = torch.empty_like(x)
        h = torch.empty_like(x)
        if rows == 0:
            return y, h
        block = triton.next_power_of_2(n_cols)
        if block <= MAX_FUSED_COLS:
            num_warps = _num_warps(block, x.element_size())
            # Small batches (decode): a persistent grid of ~32 resident warps per
            # SM; each program loads the weight once and strides over its rows.
            # Large batches: one program per row; with many waves the hardware
            # scheduler overlaps rows better than a serial loop inside a program
            # (measured ~3-4% faster on H200 for the prefill shapes).
            per_sm = max(1, 32 // num_warps)
            resident = _num_sms(x.device) * per_sm
            n_prog = min(rows, resident) if rows <= 4 * resident else rows
            _add_rmsnorm_fused[(n_prog,)](
                x,
                residual,
                weight,
                y,
                h,
                rows,
                n_cols,
                n_prog,
                self.eps,
                BLOCK=block,
                num_warps=num_warps,
            )
        else:
            _add_rmsnorm_looped[(rows,)](
                x,
                residual,
                weight,
                y,
                h,
                n_cols,
                self.eps,
                BLOCK=LOOP_BLOCK,
                num_warps=8,
            )
        return y, h
