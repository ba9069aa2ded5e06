"""Pages are cached under the data version and never stale: an evaluation, a review, a
moderation decision or a change of visibility shows on the very next request."""

import pytest
from django.urls import reverse

from evaluator.services import EXPERT_USERNAME, baseline_import, evaluation_review
from leaderboard.caching import versioned
from moderation.services import moderation_act
from runs.services import run_visibility_set
from scoring.selectors import scores_version
from scoring.services import scores_refresh
from tests.evaluator.test_baselines import gpu_verdict
from tests.factories import (
    EvaluationFactory,
    RunFactory,
    SubmissionFactory,
    UserFactory,
    WorkloadResultFactory,
    task_with_workloads,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def task():
    return task_with_workloads(task__slug="row_softmax", expert_source="class ModelNew: pass\n")


def page(client, url):
    response = client.get(url)
    assert response.status_code == 200
    return response.content.decode()


def ranked(task, *, owner, run=None, status="correct", review=""):
    submission = SubmissionFactory(
        owner=owner, task_version=task.current_version, run=run, source=f"# {owner}\n"
    )
    evaluation = EvaluationFactory(submission=submission, status=status, review=review)
    for name in ("bf16_4096x4096", "fp32_1024x50000"):
        WorkloadResultFactory(evaluation=evaluation, name=name, speedup=2.0)
    scores_refresh(submission_ids=[submission.pk])  # as the verdict's commit does
    return evaluation


def test_a_value_is_built_once_per_data_version():
    calls = []

    def build():
        calls.append(1)
        return {"n": len(calls)}

    assert versioned(name="t", key="k", build=build) == {"n": 1}
    assert versioned(name="t", key="k", build=build) == {"n": 1}
    assert versioned(name="t", key="other", build=build) == {"n": 2}
    before = scores_version()
    UserFactory()
    assert scores_version() != before
    assert versioned(name="t", key="k", build=build) == {"n": 3}


def test_a_finished_evaluation_shows_on_the_next_request(
    client, task, django_capture_on_commit_callbacks
):
    url = reverse("task_catalog:detail", args=[task.slug])
    assert "No ranked result yet" in page(client, url)

    with django_capture_on_commit_callbacks(execute=True):
        baseline_import(data={task.slug: gpu_verdict()}, source_label="fixture.json")

    html = page(client, url)
    assert f"<td>{EXPERT_USERNAME} " in html and "No ranked result yet" not in html


def test_an_admins_review_shows_on_the_next_request(
    client, task, django_capture_on_commit_callbacks
):
    flagged = ranked(task, owner=UserFactory(username="alice"), status="flagged", review="pending")
    url = reverse("task_catalog:detail", args=[task.slug])
    assert "<td>alice</td>" not in page(client, url)

    with django_capture_on_commit_callbacks(execute=True):
        evaluation_review(evaluation=flagged, decision="cleared", reviewer=UserFactory())

    assert "<td>alice</td>" in page(client, url)


def test_a_moderation_decision_shows_on_the_next_request(client, task):
    evaluation = ranked(task, owner=UserFactory(username="alice"))
    url = reverse("task_catalog:detail", args=[task.slug])
    assert "<td>alice</td>" in page(client, url)

    moderation_act(
        actor=UserFactory(is_staff=True),
        kind="flag",
        reason="a timer patch?",
        submission=evaluation.submission,
    )

    assert "<td>alice</td>" not in page(client, url)


def test_a_run_withdrawn_or_made_private_leaves_the_leaderboard_at_once(client, task):
    owner = UserFactory()
    withdrawn, private = RunFactory(owner=owner, model="m-withdrawn"), RunFactory(owner=owner)
    for run in (withdrawn, private):
        ranked(task, owner=owner, run=run)
    url = reverse("leaderboard:leaderboard")
    html = page(client, url)
    assert f'id="entry-{withdrawn.pk}"' in html and f'id="entry-{private.pk}"' in html

    moderation_act(actor=UserFactory(is_staff=True), kind="withdraw", reason="x", run=withdrawn)
    run_visibility_set(run=private, user=owner, is_public=False)

    html = page(client, url)
    assert f'id="entry-{withdrawn.pk}"' not in html and f'id="entry-{private.pk}"' not in html
