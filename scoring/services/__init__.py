from scoring.services.assessments import (
    AssessmentsInvalid,
    assessment_admin_delete,
    assessment_admin_save,
    assessment_record,
)
from scoring.services.machine import assessments_machine_refresh, evaluation_counts
from scoring.services.scores import (
    run_score_refresh,
    scores_refresh,
    scores_refresh_all,
    task_score_refresh,
)
from scoring.services.version import scores_version_bump

__all__ = [
    "AssessmentsInvalid",
    "assessment_admin_delete",
    "assessment_admin_save",
    "assessment_record",
    "assessments_machine_refresh",
    "evaluation_counts",
    "run_score_refresh",
    "scores_refresh",
    "scores_refresh_all",
    "scores_version_bump",
    "task_score_refresh",
]
