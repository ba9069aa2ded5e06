from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from evaluator.models import EvaluationStatus
from tests.evaluator.fake_cli import verdict_dict
from tests.factories import SubmissionFactory

pytestmark = pytest.mark.django_db


def test_evaluate_submission_runs_now_and_prints_the_verdict_line(fake_cli, eval_task_version):
    submission = SubmissionFactory(task_version=eval_task_version)
    fake_cli.reply({"stdout": "garbage"}, verdict_dict("correct", message="all good"))
    out = StringIO()

    call_command("evaluate_submission", str(submission.pk), stdout=out)

    evaluation = submission.evaluations.get()
    assert evaluation.status == EvaluationStatus.CORRECT
    assert evaluation.attempts == 2, "worker errors are retried in the same process"
    line = out.getvalue().strip()
    assert line.startswith(f"evaluation #{evaluation.pk} of submission #{submission.pk}")
    assert "correct — 2/2 workloads correct — mode interpret — all good" in line


def test_evaluate_submission_of_an_unknown_id_fails_cleanly(db):
    with pytest.raises(CommandError, match="No submission #424242"):
        call_command("evaluate_submission", "424242")
