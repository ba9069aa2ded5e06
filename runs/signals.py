"""A trace's file goes when its row goes (a run deleted in the admin takes its traces),
and so does a run's bundle waiting for validation; a run's state follows its
evaluations' verdicts; each worker's round sends again a lost validation."""

from typing import Any

from django.core.files.storage import default_storage
from django.db import transaction
from django.db.models.signals import post_delete
from django.dispatch import receiver

from evaluator.models import Evaluation
from evaluator.signals import VERDICT, evaluation_result_changed, worker_round
from runs.models import Run, Trace
from runs.services import run_refresh_state, run_validation_resume


@receiver(post_delete, sender=Trace)
def trace_file_delete(sender: type[Trace], instance: Trace, **kwargs: Any) -> None:
    name = instance.file.name
    if name:
        # Only once the deletion is committed: a rolled-back delete keeps its file.
        transaction.on_commit(lambda: default_storage.delete(name))


@receiver(post_delete, sender=Run)
def run_bundle_file_delete(sender: type[Run], instance: Run, **kwargs: Any) -> None:
    name = instance.bundle_file.name
    if name:
        transaction.on_commit(lambda: default_storage.delete(name))


@receiver(worker_round)
def run_validation_resend(sender: None, **kwargs: Any) -> None:
    run_validation_resume()


@receiver(evaluation_result_changed, sender=Evaluation)
def run_state_follow_verdict(
    sender: type[Evaluation], run_id: int | None, change: str, **kwargs: Any
) -> None:
    """A verdict stored for one of a run's submissions may finish the run."""
    if run_id is not None and change == VERDICT:
        run_refresh_state(run_id=run_id)
