"""Expert CSR SpMM in Triton: equal nonzero ranges per program (nnz splitting).

The nonzeros are cut into equal ranges of NNZ_PER; program p owns the rows
whose first nonzero falls in its range (found by two binary searches over the
row pointers), so a 40k-nonzero hub row and a run of one-nonzero rows cost
the same per program. Each row is a row-wise (Gustavson) product: a block of
nonzeros gathers BLOCK_K whole rows of B as one [BLOCK_K, n] tile, scales them
by the values and accumulates them in a 2-D fp32 register tile that is reduced
and stored once per row. A row that runs past the end of the range is
finished by the following programs: each writes its share of that row to a
carry buffer, and a small fix-up kernel adds the carries into C.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

TILE_ELEMS = 4096  # gathered [BLOCK_K, BLOCK_N] tile per step
MIN_NNZ_PER, MAX_NNZ_PER = 256, 4096
PROGRAMS_PER_SM = 8


@triton.jit
def _lower_bound(crow_ptr, n_rows, target, n_iter):
    # Smallest r in [0, n_rows] with crow[r] >= target (crow is nondecreasing).
    lo = 0
    hi = n_rows
    for _ in range(n_iter):
        mid = (lo + hi) // 2
        less = tl.load(crow_ptr + mid) < target
        active = lo < hi
        lo = tl.where(active & less, mid + 1, lo)
        hi = tl.where(active & less, hi, tl.where(active, mid, hi))
    return lo


@triton.jit
def _row_segment(
    col_ptr,
    val_ptr,
    b_ptr,
    seg_lo,
    seg_hi,
    n_dense,
    offs_n,
    mask_n,
    BLOCK_K: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    acc = tl.zeros([BLOCK_K, BLOCK_N], tl.float32)
    for k0 in range(seg_lo, seg_hi, BLOCK_K):
        k = k0 + tl.arange(0, BLOCK_K)
        mask_k = k < seg_hi
        cols = tl.load(col_ptr + k, mask=mask_k, other=0).to(tl.int64)
        vals = tl.load(val_ptr + k, mask=mask_k, other=0.0).to(tl.float32)
        b = tl.load(
            b_ptr + cols[:, None] * n_dense + offs_n[None, :],
            mask=mask_k[:, None] & mask_n[None, :],
            other=0.0,
        ).to(tl.float32)
        acc += vals[:, None] * b
    return tl.sum(acc, axis=0)


@triton.jit
def _spmm_nnz_split(
    crow_ptr,
    col_ptr,
    val_ptr,
    b_ptr,
    c_ptr,
    carry_ptr,
    carry_row_ptr,
    n_rows,
    nnz,
    n_dense,
    nnz_per,
    n_iter,
    BLOCK_K: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    pid = tl.program_id(0)
    lo = pid.to(tl.int64) * nnz_per
    hi = tl.minimum(lo + nnz_per, nnz)
    # The last program also owns the trailing empty rows (crow[r] == nnz).
    own_hi = tl.where(hi >= nnz, nnz + 1, hi)
    offs_n = tl.arange(0, BLOCK_N)
    offs_n = tl.max_contiguous(tl.multiple_of(offs_n, BLOCK_N), BLOCK_N)
    mask_n = offs_n < n_dense
    r_first = _lower_bound(crow_ptr, n_rows, lo, n_iter)
    r_end = _lower_bound(crow_ptr, n_rows, own_hi, n_iter)
    # Carry: the row that started before this range and runs into it.
    carry_row = pid * 0 - 1
    if r_first > 0:
        start_first = tl.load(crow_ptr + r_first)
        if start_first > lo:
            part = _row_segment(
                col_ptr,
                val_ptr,
                b_ptr,
                lo,
                tl.minimum(start_first, hi),
                n_dense,
                offs_n,
                mask_n,
                BLOCK_K,
                BLOCK_N,
            )
            tl.store(carry_ptr + pid.to(tl.int64) * n_dense + offs_n, part, mask=mask_n)
            carry_row = r_first - 1
    tl.store(carry_row_ptr + pid, carry_row)
    # Owned rows: everything from the row's first nonzero up to the range end;
    # what lies beyond comes back through the next programs' carries.
    for r in range(r_first, r_end):
        seg_lo = tl.load(crow_ptr + r)
        seg_hi = tl.minimum(tl.load(crow_ptr + r + 1), hi)
        row = _row_segment(
            col_ptr, val_ptr, b_ptr, seg_lo, seg_hi, n_dense, offs_n, mask_n, BLOCK_K, BLOCK_N
        )
        # 64-bit row offset (r itself may be a plain integer loop counter).
        r64 = r_first.to(tl.int64) + (r - r_first)
        tl.store(
            c_ptr + r64 * n_dense + offs_n,
            row.to(c_ptr.dtype.element_ty),
            mask=mask_n,
        )


@triton.jit
def _add_carries(c_ptr, carry_ptr, carry_row_ptr, n_dense, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    row = tl.load(carry_row_ptr + pid)
    if row >= 0:
        offs_n = tl.arange(0, BLOCK_N)
        mask_n = offs_n < n_dense
        part = tl.load(carry_ptr + pid.to(tl.int64) * n_dense + offs_n, mask=mask_n)
        # Several programs may carry into the same (hub) row.
        tl.atomic_add(c_ptr + row.to(tl.int64) * n_dense + offs_n, part, mask=mask_n, sem="relaxed")


def _num_sms(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4


def launch_shape(n_rows: int, nnz: int, n_dense: int, sms: int) -> tuple[int, int, int, int, int]:
    """(BLOCK_N, BLOCK_K, nonzeros per program, programs, binary-search steps)."""
    block_n = triton.next_power_of_2(n_dense)
    block_k = max(8, min(32, TILE_ELEMS // block_n))
    # Equal nonzero ranges, several per SM; a multiple of the gather block.
    target = triton.cdiv(max(nnz, 1), sms * PROGRAMS_PER_SM)
    nnz_per = max(MIN_NNZ_PER, min(MAX_NNZ_PER, triton.cdiv(target, block_k) * block_k))
    n_progs = max(1, triton.cdiv(nnz, nnz_per))
    # The search interval [0, n_rows] halves each step until it is empty.
    n_iter = max(1, (n_rows + 1).bit_length())
    return block_n, block_k, nnz_per, n_progs, n_iter


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, crow_indices, col_indices, values, dense):
        crow = crow_indices.contiguous()
        cols, vals, dense = col_indices.contiguous(), values.contiguous(), dense.contiguous()
        n_rows, n_dense = crow.numel() - 1, dense.shape[1]
        nnz = cols.numel()
        if dense.dtype != torch.float32:
            raise ValueError("the carry fix-up adds in fp32: dense must be float32")
        c = torch.empty((n_rows, n_dense), dtype=dense.dtype, device=dense.device)
        if n_rows == 0 or n_dense == 0:
            return c
        block_n, block_k, nnz_per, n_progs, n_iter = launch_shape(
            n_rows, nnz, n_dense, _num_sms(dense.device)
        )
        carry = torch.empty((n_progs, n_dense), dtype=torch.float32, device=dense.device)
        carry_row = torch.empty(n_progs, dtype=torch.int32, device=dense.device)
        _spmm_nnz_split[(n_progs,)](
            crow,
            cols,
            vals,
            dense,
            c,
            carry,
            carry_row,
            n_rows,
            nnz,
            n_dense,
            nnz_per,
            n_iter,
            BLOCK_K=block_k,
            BLOCK_N=block_n,
            num_warps=4,
        )
        _add_carries[(n_progs,)](c, carry, carry_row, n_dense, BLOCK_N=block_n, num_warps=4)
        return c
