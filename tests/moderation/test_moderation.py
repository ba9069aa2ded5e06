"""Moderators flag, mark hacked, clear, verify, re-run and withdraw; each a logged action
the owner sees, and rankings follow."""

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.test import Client
from django.urls import reverse

from evaluator.models import Evaluation
from leaderboard.selectors import task_ranking
from moderation.models import ModerationAction
from moderation.services import moderation_act
from scoring.services import scores_refresh
from tests.factories import (
    EvaluationFactory,
    RunFactory,
    SubmissionFactory,
    UserFactory,
    WorkloadResultFactory,
    token_client,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff():
    return UserFactory(is_staff=True)


def _ranked(submission):
    return [row.submission_id for row in task_ranking(task=submission.task)]


@pytest.mark.parametrize(
    ("kind", "state", "ranks"),
    [
        ("flag", "flagged", False),
        ("mark_hacked", "hacked", False),
        ("withdraw", "withdrawn", False),
        ("clear", "cleared", True),
        ("verify", "verified", True),
    ],
)
def test_each_action_sets_the_state_logs_who_and_why_and_rankings_follow(staff, kind, state, ranks):
    evaluation = EvaluationFactory(status="correct", mode="cuda")
    WorkloadResultFactory(evaluation=evaluation)
    submission = evaluation.submission
    scores_refresh(submission_ids=[submission.pk])  # as the verdict's commit does
    assert _ranked(submission) == [submission.pk]
    action = moderation_act(actor=staff, kind=kind, reason="looked at it", submission=submission)
    submission.refresh_from_db()
    assert submission.moderation == state == action.state_after
    assert (action.actor, action.reason) == (staff, "looked at it")
    assert (_ranked(submission) == [submission.pk]) is ranks


def test_mark_hacked_on_a_flagged_evaluation_reviews_it_and_keeps_the_evidence(staff):
    evaluation = EvaluationFactory(status="flagged", review="pending", log="evidence")
    moderation_act(
        actor=staff, kind="mark_hacked", reason="timer patch", submission=evaluation.submission
    )
    evaluation.refresh_from_db()
    assert (evaluation.review, evaluation.review_note, evaluation.reviewed_by) == (
        "hacked",
        "timer patch",
        staff,
    )
    assert evaluation.log == "evidence"


def test_rerun_queues_a_fresh_evaluation(staff, django_capture_on_commit_callbacks):
    evaluation = EvaluationFactory(status="worker_error")
    with django_capture_on_commit_callbacks():
        moderation_act(
            actor=staff, kind="rerun", reason="GPU fault", submission=evaluation.submission
        )
    assert Evaluation.objects.filter(submission=evaluation.submission).count() == 2


def test_a_run_action_applies_to_each_kernel_and_is_logged_once(staff):
    run = RunFactory()
    kernels = [SubmissionFactory(run=run, owner=run.owner) for _ in range(2)]
    moderation_act(actor=staff, kind="withdraw", reason="wrong catalog", run=run)
    run.refresh_from_db()
    assert run.moderation == "withdrawn"
    assert {k.moderation for k in type(kernels[0]).objects.filter(run=run)} == {"withdrawn"}
    assert ModerationAction.objects.filter(run=run).count() == 1


@pytest.mark.parametrize(
    ("actor_staff", "kind", "reason", "error"),
    [
        (False, "flag", "x", PermissionDenied),
        (True, "delete", "x", ValidationError),
        (True, "flag", "  ", ValidationError),
    ],
)
def test_refused_actions(actor_staff, kind, reason, error):
    submission = SubmissionFactory()
    with pytest.raises(error):
        moderation_act(
            actor=UserFactory(is_staff=actor_staff), kind=kind, reason=reason, submission=submission
        )
    assert not ModerationAction.objects.exists()


def test_the_owner_sees_the_action_and_its_reason_on_the_page_but_not_who(staff):
    owner = UserFactory()
    submission = SubmissionFactory(owner=owner, is_public=False)
    moderation_act(actor=staff, kind="flag", reason="suspiciously fast", submission=submission)
    client = Client()
    client.force_login(owner)
    body = client.get(reverse("submissions:detail", args=[submission.pk])).content.decode()
    assert "suspiciously fast" in body and "by the moderators" in body
    assert staff.username not in body
    assert "Act (logged" not in body  # no moderation form for the owner


def test_staff_moderate_through_the_page_and_the_api(staff):
    submission = SubmissionFactory()
    client = Client()
    client.force_login(staff)
    response = client.post(
        reverse("submissions:moderate", args=[submission.pk]),
        {"kind": "verify", "reason": "re-timed by hand"},
    )
    assert response.status_code == 302
    api = token_client(staff, scopes=("moderate",))
    response = api.post(
        f"/api/submissions/{submission.pk}/moderation/",
        {"kind": "mark_hacked", "reason": "cached outputs"},
        format="json",
    )
    assert response.status_code == 201 and response.json()["state_after"] == "hacked"
    listed = api.get(f"/api/submissions/{submission.pk}/moderation/").json()
    assert [a["kind"] for a in listed] == ["mark_hacked", "verify"]


def test_a_user_cannot_moderate_on_the_page_or_the_api():
    owner = UserFactory()
    submission = SubmissionFactory(owner=owner)
    client = Client()
    client.force_login(owner)
    page = client.post(
        reverse("submissions:moderate", args=[submission.pk]), {"kind": "clear", "reason": "x"}
    )
    api = token_client(owner).post(
        f"/api/submissions/{submission.pk}/moderation/",
        {"kind": "clear", "reason": "x"},
        format="json",
    )
    assert page.status_code == api.status_code == 403
    assert not ModerationAction.objects.exists()


def test_staff_moderate_a_run_through_the_api(staff):
    run = RunFactory()
    response = token_client(staff, scopes=("moderate",)).post(
        f"/api/runs/{run.pk}/moderation/", {"kind": "flag", "reason": "odd traces"}, format="json"
    )
    assert response.status_code == 201
    run.refresh_from_db()
    assert run.moderation == "flagged"
