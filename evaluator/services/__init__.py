"""Writes of the evaluator app: queueing, running and reviewing evaluations."""

from evaluator.services.baselines import (
    EXPERT_USERNAME,
    BaselineImportError,
    BaselineImportReport,
    baseline_import,
    expert_remeasure_queue,
)
from evaluator.services.evaluations import (
    evaluation_create,
    evaluation_review,
    evaluation_run,
    evaluation_run_next,
)
from evaluator.services.jobs import broker_ping, evaluation_enqueue
from evaluator.services.reaping import evaluation_reap
from evaluator.services.runner import (
    WorkerError,
    evaluation_command,
    evaluation_safety_timeout,
)
from evaluator.services.worker import worker_serve, worker_start

__all__ = [
    "EXPERT_USERNAME",
    "BaselineImportError",
    "BaselineImportReport",
    "WorkerError",
    "baseline_import",
    "broker_ping",
    "evaluation_command",
    "evaluation_create",
    "evaluation_enqueue",
    "evaluation_reap",
    "evaluation_review",
    "evaluation_run",
    "evaluation_run_next",
    "evaluation_safety_timeout",
    "expert_remeasure_queue",
    "worker_serve",
    "worker_start",
]
