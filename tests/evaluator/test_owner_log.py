"""The owner's evaluator log leaves out the torch profiler's own `USDT:` lines."""

import pytest
from django.urls import reverse

from evaluator.harness.verdict import verdict_from_dict
from evaluator.services.evaluations import evaluation_verdict_write, owner_log_clean
from tests.factories import EvaluationFactory

PROFILED = "kernel says hi\nUSDT: probe ready (libkineto)\n  USDT: probe 2\nkernel says bye\n"


def test_profiler_lines_are_left_out_and_counted():
    assert owner_log_clean(PROFILED) == (
        "kernel says hi\nkernel says bye\n[2 torch-profiler USDT line(s) left out]\n"
    )
    assert owner_log_clean("no probes\n") == "no probes\n"


@pytest.mark.django_db
def test_the_owner_sees_the_log_without_them_and_staff_keeps_the_full_log(client):
    evaluation = EvaluationFactory(status="queued", submission__is_public=False)
    verdict = verdict_from_dict(
        {
            "status": "correct",
            "mode": "interpret",
            "workloads": [],
            "log": PROFILED,
            "public_log": PROFILED,
        }
    )
    evaluation_verdict_write(evaluation=evaluation, verdict=verdict)

    assert "USDT" not in evaluation.public_log.replace("USDT line(s)", "")
    assert evaluation.log == PROFILED
    client.force_login(evaluation.submission.owner)
    page = client.get(reverse("submissions:detail", args=[evaluation.submission_id]))
    html = page.content.decode()
    assert "kernel says bye" in html and "probe ready" not in html
