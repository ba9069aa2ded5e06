"""Expert 2-D transpose in Triton: tiles staged on chip, coalesced on both sides.

Each program moves one tile: it loads the tile with the input's row as the
fast axis, transposes it in registers (the compiler lowers this to a
shared-memory layout conversion with a swizzled, conflict-free layout), and
stores it with the output's row as the fast axis, so both HBM streams are
coalesced. The tile is sized in bytes (256-byte runs on both sides), tiles
are numbered in groups so the read and write fronts stay compact, and shapes
that divide the tile take a mask-free path with 16-byte vector accesses.
Strided inputs are read through their strides, in the same single pass.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

RUN_BYTES = 256  # contiguous bytes per tile row, on the read and the write side
GROUP_TILES = 8  # tile rows per group of the launch order


@triton.jit
def _transpose_tiles(
    x_ptr,
    y_ptr,
    rows,
    cols,
    stride_r,
    stride_c,
    BR: tl.constexpr,
    BC: tl.constexpr,
    GROUP: tl.constexpr,
    EVEN: tl.constexpr,
):
    pid = tl.program_id(0)
    tiles_r = tl.cdiv(rows, BR)
    tiles_c = tl.cdiv(cols, BC)
    # Grouped order: GROUP tile rows are swept together, column tile by column
    # tile, so the programs in flight read a compact block of x and write a
    # compact block of y.
    per_group = GROUP * tiles_c
    first_r = (pid // per_group) * GROUP
    group_rows = tl.minimum(tiles_r - first_r, GROUP)
    tile_r = first_r + (pid % per_group) % group_rows
    tile_c = (pid % per_group) // group_rows

    r = (tile_r * BR + tl.arange(0, BR)).to(tl.int64)
    c = (tile_c * BC + tl.arange(0, BC)).to(tl.int64)
    src = x_ptr + r[:, None] * stride_r + c[None, :] * stride_c
    if EVEN:
        tile = tl.load(src, eviction_policy="evict_first")
    else:
        in_bounds = (r[:, None] < rows) & (c[None, :] < cols)
        tile = tl.load(src, mask=in_bounds, other=0.0, eviction_policy="evict_first")
    out = tl.trans(tile)  # (BC, BR): the output row is now the fast axis
    dst = y_ptr + c[:, None] * rows + r[None, :]
    if EVEN:
        tl.store(dst, out)
    else:
        tl.store(dst, out, mask=(c[:, None] < cols) & (r[None, :] < rows))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows, cols = x.shape
        y = torch.empty((cols, rows), dtype=x.dtype, device=x.device)
        if rows == 0 or cols == 0:
            return y
        side = RUN_BYTES // x.element_size()  # 64 fp32 or 128 bf16 values
        # Degenerate shapes (one row or one column) need no exchange: keep the
        # long side of the tile wide and the short one small.
        br = min(side, max(16, triton.next_power_of_2(rows)))
        bc = min(side, max(16, triton.next_power_of_2(cols)))
        tiles = triton.cdiv(rows, br) * triton.cdiv(cols, bc)
        even = rows % br == 0 and cols % bc == 0
        _transpose_tiles[(tiles,)](
            x,
            y,
            rows,
            cols,
            x.stride(0),
            x.stride(1),
            BR=br,
            BC=bc,
            GROUP=GROUP_TILES,
            EVEN=even,
            num_warps=8 if br * bc * x.element_size() >= 16384 else 4,
        )
        return y
