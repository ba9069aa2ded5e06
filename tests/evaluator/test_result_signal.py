"""The evaluator's one hook to the rest of the portal: `evaluation_result_changed`,
sent once a stored verdict or an admin's review has committed, and what listens."""

import pytest

from evaluator.models import Evaluation, EvaluationStatus
from evaluator.services import evaluation_review
from evaluator.services.evaluations import evaluation_verdict_write
from evaluator.services.runner import worker_error_verdict
from evaluator.signals import evaluation_result_changed
from runs.models import RunState
from scoring.models import TaskScore
from tests.factories import EvaluationFactory, RunFactory, SubmissionFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def heard():
    calls = []

    def listen(sender, **kwargs):
        calls.append((sender, kwargs))

    evaluation_result_changed.connect(listen)
    yield calls
    evaluation_result_changed.disconnect(listen)


def test_a_stored_verdict_is_announced_once_after_commit(heard, django_capture_on_commit_callbacks):
    run = RunFactory(state=RunState.EVALUATING)
    evaluation = EvaluationFactory(
        submission=SubmissionFactory(run=run), status=EvaluationStatus.RUNNING, finished_at=None
    )
    verdict = worker_error_verdict(evaluation=evaluation, reason="the GPU fell off", log="")
    with django_capture_on_commit_callbacks(execute=True):
        evaluation_verdict_write(evaluation=evaluation, verdict=verdict)
        assert heard == []  # nothing before the commit
    assert heard == [
        (
            Evaluation,
            {
                "signal": evaluation_result_changed,
                "evaluation_id": evaluation.pk,
                "submission_id": evaluation.submission_id,
                "run_id": run.pk,
                "change": "verdict",
            },
        )
    ]
    # runs.signals listens: the run's only evaluation finished, so the run did.
    run.refresh_from_db()
    assert run.state == RunState.COMPLETE


def test_a_review_is_announced_and_scoring_recomputes(heard, django_capture_on_commit_callbacks):
    evaluation = EvaluationFactory(status=EvaluationStatus.FLAGGED, review="pending")
    with django_capture_on_commit_callbacks(execute=True):
        evaluation_review(
            evaluation=evaluation, decision="cleared", reviewer=UserFactory(is_staff=True)
        )
    assert [(kw["change"], kw["run_id"]) for _, kw in heard] == [("review", None)]
    # scoring.signals listens: the cleared verdict counts now, so it has a score.
    assert TaskScore.objects.filter(submission=evaluation.submission).exists()
