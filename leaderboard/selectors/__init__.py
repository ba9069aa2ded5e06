"""Every ranking, table and chart of the site is one selector here; the page, the API and
the CSV export of a table call the same one."""

from .common import evaluation_counts
from .experts import (
    BaselineRow,
    ExpertBaseline,
    ExpertTiming,
    evaluation_expert_fractions,
    expert_timings,
    task_expert_baseline,
)
from .hacks import evaluation_hacked_list, hacked_table
from .home import CatalogSize, catalog_size, evaluation_latest_public
from .matrix import (
    Cell,
    Comparison,
    Matrix,
    comparison_table,
    matrix_table,
    run_cells,
    run_comparison,
    run_filter_choices,
    run_filtered,
    task_run_matrix,
)
from .tasks import RankingRow, ranking_hardware, task_ranking

__all__ = [
    "BaselineRow",
    "CatalogSize",
    "Cell",
    "Comparison",
    "ExpertBaseline",
    "ExpertTiming",
    "Matrix",
    "RankingRow",
    "catalog_size",
    "comparison_table",
    "evaluation_counts",
    "evaluation_expert_fractions",
    "evaluation_hacked_list",
    "evaluation_latest_public",
    "expert_timings",
    "hacked_table",
    "matrix_table",
    "ranking_hardware",
    "run_cells",
    "run_comparison",
    "run_filter_choices",
    "run_filtered",
    "task_expert_baseline",
    "task_ranking",
    "task_run_matrix",
]
