"""Writes of the evaluator app: queueing, running and reviewing evaluations."""

from evaluator.services.baselines import (
    EXPERT_USERNAME,
    BaselineImportError,
    BaselineImportReport,
    baseline_import,
)
from evaluator.services.evaluations import (
    MAX_ATTEMPTS,
    evaluation_create,
    evaluation_enqueue,
    evaluation_review,
    evaluation_run,
)
from evaluator.services.runner import (
    WorkerError,
    evaluation_command,
    evaluation_safety_timeout,
)

__all__ = [
    "EXPERT_USERNAME",
    "MAX_ATTEMPTS",
    "BaselineImportError",
    "BaselineImportReport",
    "WorkerError",
    "baseline_import",
    "evaluation_command",
    "evaluation_create",
    "evaluation_enqueue",
    "evaluation_review",
    "evaluation_run",
    "evaluation_safety_timeout",
]
