from scoring.formulas import (
    correctness_rate,
    fast_p,
    geomean_speedup,
    implementation_score,
    performance_score,
    task_speedup,
    uplift,
)
from scoring.selectors.assessments import (
    assessment_effective,
    counters_not_read_reason,
    submission_properties_view,
    task_rubric,
)
from scoring.selectors.runs import run_score_data, run_scores_view, scores_uplift
from scoring.selectors.version import scores_version

__all__ = [
    "assessment_effective",
    "correctness_rate",
    "counters_not_read_reason",
    "fast_p",
    "geomean_speedup",
    "implementation_score",
    "performance_score",
    "run_score_data",
    "run_scores_view",
    "scores_uplift",
    "scores_version",
    "submission_properties_view",
    "task_rubric",
    "task_speedup",
    "uplift",
]
