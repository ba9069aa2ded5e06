"""Sparse (CSR) x dense matrix product: C = A @ B with A given by crow_indices, col_indices, values.

C[i, :] = sum_{k = crow[i]}^{crow[i+1]-1} values[k] * B[col[k], :]
The reference multiplies in fp64 and rounds once to the dtype of B.
(The loop over nnz chunks bounds memory; each chunk is one vectorised step.)
"""

import torch
import torch.nn as nn

# dist="default" draws the public inputs; "adversarial" (some hidden
# workloads) draws them so that the hazards the statement names are real.
DISTRIBUTIONS = ("default", "adversarial")


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(
        self,
        crow_indices: torch.Tensor,
        col_indices: torch.Tensor,
        values: torch.Tensor,
        dense: torch.Tensor,
    ) -> torch.Tensor:
        # Row by row from the definition, in fp64, with no sparse library in between
        # (cuSPARSE refuses some valid matrices, e.g. of one row, with "invalid value").
        rows = crow_indices.numel() - 1
        row_of = torch.repeat_interleave(
            torch.arange(rows, device=dense.device), crow_indices.diff().long()
        )
        out = torch.zeros(rows, dense.shape[1], dtype=torch.float64, device=dense.device)
        b = dense.double()
        for start in range(0, values.numel(), _CHUNK):
            part = slice(start, start + _CHUNK)
            products = values[part].double()[:, None] * b[col_indices[part].long()]
            out.index_add_(0, row_of[part], products)
        return out.to(dense.dtype)


# Entries per step: bounds the (entries x n) fp64 products held at once (256 MiB at n = 128).
_CHUNK = 1 << 18


def get_init_inputs(**params):
    return []


def _power_law_draws(n: int, count: int, exponent: float) -> torch.Tensor:
    """`count` indices in [0, n), index i drawn with probability w_i / sum(w).

    Zipf weights rank^-exponent over a random permutation of the indices: a
    few hubs take a large share of the draws, most indices very few. The
    weights are integers (2^32 rank^-exponent, rounded) and the draws invert
    their exact int64 running total, so one seed gives the same matrix in
    every process. torch.multinomial sums float weights with a GPU scan whose
    rounding changes from run to run; a draw near a bin edge then lands in
    the neighbouring row, and the process that computes the reference would
    see another matrix than the one the kernel was given.
    """
    ranks = torch.arange(1, n + 1, dtype=torch.float64)
    weights = torch.round(ranks**-exponent * 2.0**32).to(torch.int64)
    edges = torch.cumsum(weights[torch.randperm(n)], dim=0)
    draws = torch.randint(0, int(edges[-1]), (count,), dtype=torch.int64)
    return torch.searchsorted(edges, draws, right=True)


def get_inputs(kind, rows, cols, n, dtype, nnz=0, band=0, dist="default", **params):
    if dist not in DISTRIBUTIONS:
        raise ValueError(f"unknown input distribution {dist!r}")
    if dist == "adversarial":
        return _adversarial_inputs(kind, rows, cols, n, dtype, nnz, band)
    dt = getattr(torch, dtype)
    if kind == "uniform":
        # Every entry equally likely: row lengths are Poisson around nnz / rows.
        r = torch.randint(0, rows, (nnz,))
        c = torch.randint(0, cols, (nnz,))
    elif kind == "powerlaw":
        # A scale-free graph: out-degrees (row lengths) and in-degrees (column
        # popularity) both follow a power law; the largest row holds a few
        # percent of all nonzeros.
        r = _power_law_draws(rows, nnz, 0.8)
        c = _power_law_draws(cols, nnz, 0.8)
    elif kind == "banded":
        # Diagonals -band .. +band (a 1-D stencil / banded system), clipped at the edges.
        offsets = torch.arange(-band, band + 1)
        r = torch.arange(rows).repeat_interleave(2 * band + 1)
        c = r + offsets.repeat(rows)
        keep = (c >= 0) & (c < cols)
        r, c = r[keep], c[keep]
    else:
        raise ValueError(f"unknown sparsity kind {kind!r}")
    # CSR order: by row, then column (a column may repeat within a row: the
    # entries add, as in an unreduced edge list).
    order = torch.argsort(r.long() * cols + c.long())
    r, c = r[order], c[order]
    counts = torch.bincount(r, minlength=rows)
    crow = torch.zeros(rows + 1, dtype=torch.int64)
    crow[1:] = torch.cumsum(counts, dim=0)
    values = torch.randn(r.numel())
    dense = torch.randn(cols, n)
    return [crow, c.to(torch.int64).contiguous(), values.to(dt), dense.to(dt)]


def _adversarial_inputs(kind, rows, cols, n, dtype, nnz, band):
    # Half the nonzeros (banded kinds: as many as the band would hold) in one
    # row, the last, and the rest spread uniformly over a random tenth of the
    # other rows: nine rows in ten are empty and one row is as long as the
    # whole remainder of the matrix.
    if kind not in ("uniform", "powerlaw", "banded"):
        raise ValueError(f"unknown sparsity kind {kind!r}")
    dt = getattr(torch, dtype)
    total = min(rows * (2 * band + 1), rows * cols) if kind == "banded" else nnz
    long_count = (total + 1) // 2 if rows > 1 else total
    short_rows = torch.randperm(max(rows - 1, 1))[: max((rows - 1) // 10, 1)]
    r = torch.cat(
        [
            torch.full((long_count,), rows - 1, dtype=torch.int64),
            short_rows[torch.randint(0, short_rows.numel(), (total - long_count,))],
        ]
    )
    c = torch.randint(0, cols, (total,))
    order = torch.argsort(r * cols + c)
    r, c = r[order], c[order]
    counts = torch.bincount(r, minlength=rows)
    crow = torch.zeros(rows + 1, dtype=torch.int64)
    crow[1:] = torch.cumsum(counts, dim=0)
    values = torch.randn(total)
    dense = torch.randn(cols, n)
    return [crow, c.to(torch.int64).contiguous(), values.to(dt), dense.to(dt)]
