import pytest
from django.urls import reverse

from evaluator.models import EvaluationStatus
from task_catalog.models import Workload
from tests.factories import (
    EvaluationFactory,
    SubmissionFactory,
    TaskVersionFactory,
    UserFactory,
    WorkloadFactory,
)

pytestmark = pytest.mark.django_db


def test_home_shows_catalog_size_and_latest_public_evaluations(client):
    version = TaskVersionFactory(task__title="Row-wise softmax")
    WorkloadFactory.create_batch(3, version=version)
    WorkloadFactory(version=version, role=Workload.Role.UNTIMED)
    public = EvaluationFactory(
        submission=SubmissionFactory(task_version=version, owner=UserFactory(username="alice")),
        status="incorrect",
    )
    private = EvaluationFactory(submission=SubmissionFactory(task_version=version, is_public=False))
    queued = EvaluationFactory(submission=SubmissionFactory(task_version=version), status="queued")

    response = client.get(reverse("leaderboard:home"))
    html = response.content.decode()

    assert response.status_code == 200
    assert "D2K-Bench" in html
    assert "<strong>1</strong> task" in html and "<strong>3</strong> timed workloads" in html
    assert f'href="/submissions/{public.submission_id}/"' in html
    assert "alice" in html and "status-incorrect" in html
    assert f"/submissions/{private.submission_id}/" not in html
    assert f"/submissions/{queued.submission_id}/" not in html


def test_home_invites_to_upload(client):
    html = client.get(reverse("leaderboard:home")).content.decode()
    assert reverse("accounts:signup") in html
    client.force_login(UserFactory())
    html = client.get(reverse("leaderboard:home")).content.decode()
    assert reverse("submissions:upload") in html


def test_home_query_count_is_pinned(client, django_assert_max_num_queries):
    for _ in range(5):
        EvaluationFactory()
    # the data version, catalog size, latest evaluations, the board's catalog version and
    # GPU, the published pairs' scores
    with django_assert_max_num_queries(5):
        assert client.get(reverse("leaderboard:home")).status_code == 200


def test_scoring_page_writes_out_every_formula_and_status(client):
    html = client.get(reverse("leaderboard:scoring")).content.decode()
    for name in [
        "Workload speedup",
        "Task speedup",
        "Correctness rate",
        "Performance Score",
        "Geomean speedup",
        "fast<sub>p</sub>",
        "Implementation score",
        "discovery score",
        "Guidance uplift",
        "Fraction of the expert",
        "The catalog's bar for its experts",
    ]:
        assert name in html
    for status in EvaluationStatus.values:
        assert f"status-{status}" in html


def test_scoring_page_says_speedups_are_against_the_tasks_baseline(client):
    html = client.get(reverse("leaderboard:scoring")).content.decode()

    assert "<code>speedup(w) = t_base(w) / t_sub(w)</code>" in html
    assert "The baseline is the task's <code>baseline.py</code> where it has one" in html
    assert "t_ref" not in html
