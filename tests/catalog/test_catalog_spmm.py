"""spmm_csr: the expert's equal-nonzero split stores every row once and counts every nonzero once,
at the launch shape of an H200 and on the rows the generators draw.

The interpreter runs the check shapes with a few programs; on the GPU the
power-law workloads run a thousand programs, hub rows span dozens of them,
and the row search runs a number of steps the host computes from the row
count. The kernel's partition is replayed here, vectorised over programs,
with the expert's own launch shape: its bounded binary search, the rows each
program stores and the carries the fix-up adds.
"""

import pytest
import torch

from evaluator.harness.workload import load_module, make_inputs
from taskformat.package import DEFAULT_CATALOG_DIR
from taskformat.spec import Mode, WorkloadRole
from tests.catalog.drawn import load_drawn

SLUG = "spmm_csr"
H200_SMS = 132
TASK = load_drawn(SLUG)
EXPERT = load_module(str(DEFAULT_CATALOG_DIR / SLUG / "expert.py"), "d2k_spmm_expert")
REFERENCE = load_module(str(DEFAULT_CATALOG_DIR / SLUG / "reference.py"), "d2k_spmm_reference")


def _lower_bound(crow: torch.Tensor, targets: torch.Tensor, n_iter: int) -> torch.Tensor:
    """The kernel's _lower_bound: n_iter halving steps over [0, n_rows], one per program."""
    lo = torch.zeros_like(targets)
    hi = torch.full_like(targets, crow.numel() - 1)
    for _ in range(n_iter):
        mid = (lo + hi) // 2
        less = crow[mid] < targets
        active = lo < hi
        lo = torch.where(active & less, mid + 1, lo)
        hi = torch.where(active & less, hi, torch.where(active, mid, hi))
    return lo


def _segments(crow: torch.Tensor, nnz: int, sms: int, n_dense: int):
    """(row, start, end) of every partial row the kernel sums: stored rows, then carries."""
    n_rows = crow.numel() - 1
    _, _, nnz_per, n_progs, n_iter = EXPERT.launch_shape(n_rows, nnz, n_dense, sms)
    lo = torch.arange(n_progs, dtype=torch.int64) * nnz_per
    hi = torch.clamp(lo + nnz_per, max=nnz)
    own_hi = torch.where(hi >= nnz, nnz + 1, hi)
    r_first = _lower_bound(crow, lo, n_iter)
    r_end = _lower_bound(crow, own_hi, n_iter)
    # The search itself is exact at this row count.
    assert torch.equal(r_first, torch.searchsorted(crow, lo))
    assert torch.equal(r_end, torch.clamp(torch.searchsorted(crow, own_hi), max=n_rows))
    # Stored rows: program p stores rows r_first[p] .. r_end[p] - 1, each once.
    owners = torch.repeat_interleave(torch.arange(n_progs), r_end - r_first)
    rows = torch.cat(
        [torch.arange(a, b) for a, b in zip(r_first.tolist(), r_end.tolist(), strict=True)]
    )
    assert torch.equal(rows, torch.arange(n_rows)), "rows not stored exactly once"
    stored = (rows, crow[rows], torch.minimum(crow[rows + 1], hi[owners]))
    # Carries: the row that runs into a range from before it.
    start_first = crow[r_first]
    carried = (r_first > 0) & (start_first > lo)
    carries = (
        r_first[carried] - 1,
        lo[carried],
        torch.minimum(start_first[carried], hi[carried]),
    )
    return [torch.cat(parts) for parts in zip(stored, carries, strict=True)]


def _check_partition(crow: torch.Tensor, nnz: int, sms: int, n_dense: int) -> None:
    row, start, end = _segments(crow, nnz, sms, n_dense)
    assert bool((start <= end).all())
    # Each partial row lies inside its row ...
    assert bool((crow[row] <= start).all() and (end <= crow[row + 1]).all())
    # ... and together they cover every nonzero exactly once.
    edges = torch.zeros(nnz + 1, dtype=torch.int64)
    edges.index_add_(0, start, torch.ones_like(start))
    edges.index_add_(0, end, -torch.ones_like(end))
    assert bool((torch.cumsum(edges, 0)[:nnz] == 1).all()), "a nonzero counted twice or never"


POWER_LAW = [
    w for w in TASK.workloads if w.params["kind"] == "powerlaw" and w.role is not WorkloadRole.CHECK
]


@pytest.mark.parametrize("workload", POWER_LAW, ids=lambda w: w.name)
def test_every_row_is_stored_once_and_every_nonzero_counted_once_on_the_gpu(workload):
    crow, cols, _, _ = make_inputs(REFERENCE, workload.params, 1234, torch.device("cpu"))
    counts = crow[1:] - crow[:-1]
    nnz_per = EXPERT.launch_shape(crow.numel() - 1, cols.numel(), workload.params["n"], H200_SMS)[2]
    # The shape the GPU failed on: hub rows across many programs, empty rows between.
    assert int(counts.max()) > 10 * nnz_per and int((counts == 0).sum()) > 0
    _check_partition(crow, cols.numel(), H200_SMS, workload.params["n"])


@pytest.mark.parametrize("workload", TASK.workloads_for(Mode.INTERPRET), ids=lambda w: w.name)
def test_every_row_is_stored_once_and_every_nonzero_counted_once_in_the_interpreter(workload):
    crow, cols, _, _ = make_inputs(REFERENCE, workload.params, 1234, torch.device("cpu"))
    _check_partition(crow, cols.numel(), 4, workload.params["n"])


@pytest.mark.parametrize("slug", ["spmm_csr", "grouped_gemm_moe"])
def test_power_law_draws_fall_in_proportion_to_their_weights(slug):
    reference = load_module(str(DEFAULT_CATALOG_DIR / slug / "reference.py"), f"d2k_draws_{slug}")
    n, count, exponent = 50, 400_000, 0.8
    torch.manual_seed(7)
    draws = reference._power_law_draws(n, count, exponent)
    assert draws.dtype == torch.int64 and int(draws.min()) >= 0 and int(draws.max()) < n
    # Sorted by frequency, the counts follow rank^-exponent (the ranks are shuffled
    # over the indices, which sorting undoes).
    observed = torch.bincount(draws, minlength=n).sort(descending=True).values.double()
    weights = torch.arange(1, n + 1, dtype=torch.float64) ** -exponent
    expected = count * weights / weights.sum()
    assert bool(((observed - expected).abs() <= 5 * expected.sqrt() + 5).all())
    # The same seed draws the same indices.
    torch.manual_seed(7)
    assert torch.equal(reference._power_law_draws(n, count, exponent), draws)
