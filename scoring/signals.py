"""Scores follow the evaluator's results: a stored verdict or a review recomputes the
scores of the submission it judged (scores are derived data, recomputed in full)."""

from typing import Any

from django.dispatch import receiver

from evaluator.models import Evaluation
from evaluator.signals import evaluation_result_changed
from scoring.services import scores_refresh


@receiver(evaluation_result_changed, sender=Evaluation)
def scores_follow_result(sender: type[Evaluation], submission_id: int, **kwargs: Any) -> None:
    scores_refresh(submission_ids=[submission_id])
