"""Expert MoE permutation in Triton: a stable counting sort, then one pass over x.

1. `_block_counts`: each block of slots counts its experts on chip and writes
   one column of an experts x blocks table.
2. `_scan_table`: one program scans the table expert-major. It writes the
   expert offsets and the first row of every (expert, block).
3. `_block_ranks`: each block ranks its slots on chip, chunk by chunk: a
   slot's rank among the earlier slots of its expert (an equality matrix
   within the chunk plus running per-expert counts of earlier chunks) added
   to the (expert, block) base is its destination row, stable by
   construction.
4. `_scatter_rows`: token-major copy: a tile of x is loaded once and stored to
   the top_k destinations of its tokens with 16-byte vector accesses.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

SLOT_BLOCK = (256, 2048)  # bounds of the slots per block of the count and rank passes
RANK_CHUNK = 64  # slots ranked at once against each other
TABLE_TILE = 16384  # table entries per step of the scan
ROW_TILE_BYTES = 16384  # bytes of x per program step of the row copy


@triton.jit
def _block_counts(ids_ptr, counts_ptr, n, n_blocks, E_P: tl.constexpr, BLOCK: tl.constexpr):
    blk = tl.program_id(0)
    s = blk * BLOCK + tl.arange(0, BLOCK)
    valid = s < n
    e = tl.load(ids_ptr + s, mask=valid, other=0)
    hist = tl.histogram(e, E_P, mask=valid)
    tl.store(counts_ptr + tl.arange(0, E_P) * n_blocks + blk, hist)


@triton.jit
def _scan_table(
    counts_ptr, base_ptr, offsets_ptr, n, experts, n_blocks, E_P: tl.constexpr, NBC: tl.constexpr
):
    ex = tl.arange(0, E_P)
    bl = tl.arange(0, NBC)
    # Slots per expert, then the first row of each expert.
    total = tl.zeros([E_P], tl.int32)
    for b0 in range(0, n_blocks, NBC):
        cols = b0 + bl
        ptrs = ex[:, None] * n_blocks + cols[None, :]
        c = tl.load(counts_ptr + ptrs, mask=cols[None, :] < n_blocks, other=0)
        total += tl.sum(c, axis=1)
    start = tl.cumsum(total, axis=0) - total
    tl.store(offsets_ptr + ex, start, mask=ex < experts)
    tl.store(offsets_ptr + experts, n)
    # First row of each (expert, block): the table scanned expert-major.
    run = tl.zeros([E_P], tl.int32)
    for b0 in range(0, n_blocks, NBC):
        cols = b0 + bl
        ptrs = ex[:, None] * n_blocks + cols[None, :]
        in_table = cols[None, :] < n_blocks
        c = tl.load(counts_ptr + ptrs, mask=in_table, other=0)
        base = start[:, None] + run[:, None] + tl.cumsum(c, axis=1) - c
        tl.store(base_ptr + ptrs, base, mask=in_table)
        run += tl.sum(c, axis=1)


@triton.jit
def _block_ranks(
    ids_ptr,
    base_ptr,
    dest_ptr,
    n,
    n_blocks,
    E_P: tl.constexpr,
    BLOCK: tl.constexpr,
    C: tl.constexpr,
):
    blk = tl.program_id(0)
    ex = tl.arange(0, E_P)
    lane = tl.arange(0, C)
    earlier = lane[None, :] < lane[:, None]
    # Slots of each expert already ranked in earlier chunks of this block.
    seen = tl.zeros([E_P], tl.int32)
    for c0 in range(0, BLOCK, C):
        s = blk * BLOCK + c0 + lane
        valid = s < n
        e = tl.load(ids_ptr + s, mask=valid, other=-1)
        # Stable rank inside the chunk: earlier slots of the same expert.
        same = (e[:, None] == e[None, :]) & earlier
        rank = tl.sum(same.to(tl.int32), axis=1)
        onehot = e[:, None] == ex[None, :]
        rank += tl.sum(tl.where(onehot, seen[None, :], 0), axis=1)
        base = tl.load(base_ptr + e * n_blocks + blk, mask=valid, other=0)
        tl.store(dest_ptr + s, base + rank, mask=valid)
        seen += tl.sum(onehot.to(tl.int32), axis=0)


@triton.jit
def _scatter_rows(
    x_ptr,
    dest_ptr,
    out_ptr,
    tokens,
    hidden,
    TOP_K: tl.constexpr,
    TB: tl.constexpr,
    HB: tl.constexpr,
):
    t = tl.program_id(0) * TB + tl.arange(0, TB)
    c = tl.program_id(1) * HB + tl.arange(0, HB)
    c = tl.max_contiguous(tl.multiple_of(c, HB), HB)
    t_ok = t < tokens
    mask = t_ok[:, None] & (c[None, :] < hidden)
    rows = tl.load(x_ptr + t.to(tl.int64)[:, None] * hidden + c[None, :], mask=mask)
    for k in tl.static_range(TOP_K):
        d = tl.load(dest_ptr + t * TOP_K + k, mask=t_ok, other=0).to(tl.int64)
        tl.store(out_ptr + d[:, None] * hidden + c[None, :], rows, mask=mask)


def _num_sms(device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4


class ModelNew(nn.Module):
    def __init__(self, experts: int):
        super().__init__()
        self.experts = experts

    def forward(self, x: torch.Tensor, topk_ids: torch.Tensor):
        tokens, top_k = topk_ids.shape
        hidden = x.shape[1]
        n = tokens * top_k
        dev = x.device
        ids = topk_ids.contiguous().view(-1)
        permuted = torch.empty((n, hidden), dtype=x.dtype, device=dev)
        dest = torch.empty((tokens, top_k), dtype=torch.int32, device=dev)
        offsets = torch.empty(self.experts + 1, dtype=torch.int32, device=dev)

        # Enough blocks to give every SM a couple of ranking programs, each
        # block large enough that the experts x blocks table stays small.
        lo, hi = SLOT_BLOCK
        block = min(hi, max(lo, triton.next_power_of_2(triton.cdiv(n, 2 * _num_sms(dev)))))
        block = min(block, max(16, triton.next_power_of_2(n)))
        n_blocks = triton.cdiv(n, block)
        e_p = max(16, triton.next_power_of_2(self.experts))
        counts = torch.empty((e_p, n_blocks), dtype=torch.int32, device=dev)
        base = torch.empty((e_p, n_blocks), dtype=torch.int32, device=dev)
        _block_counts[(n_blocks,)](ids, counts, n, n_blocks, E_P=e_p, BLOCK=block, num_warps=8)
        nbc = min(triton.next_power_of_2(n_blocks), max(1, TABLE_TILE // e_p))
        _scan_table[(1,)](
            counts, base, offsets, n, self.experts, n_blocks, E_P=e_p, NBC=nbc, num_warps=8
        )
        _block_ranks[(n_blocks,)](
            ids,
            base,
            dest,
            n,
            n_blocks,
            E_P=e_p,
            BLOCK=block,
            C=min(RANK_CHUNK, block),
            num_warps=8,
        )

        hb = min(triton.next_power_of_2(hidden), 2048)
        tb = max(1, min(ROW_TILE_BYTES // (hb * x.element_size()), triton.next_power_of_2(tokens)))
        grid = (triton.cdiv(tokens, tb), triton.cdiv(hidden, hb))
        _scatter_rows[grid](
            x.contiguous(), dest, permuted, tokens, hidden, TOP_K=top_k, TB=tb, HB=hb, num_warps=4
        )
        return permuted, dest, offsets
