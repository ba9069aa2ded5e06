import pytest
from django.urls import reverse

from evaluator.models import Evaluation, Review
from tests.factories import EvaluationFactory, UserFactory, WorkloadResultFactory

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:evaluator_evaluation_changelist")


@pytest.fixture
def admin_client(client):
    admin = UserFactory(username="root", is_staff=True, is_superuser=True)
    client.force_login(admin)
    client.admin = admin
    return client


def test_changelist_filters_on_status_and_review(admin_client):
    flagged = EvaluationFactory(status="flagged", review=Review.PENDING)
    correct = EvaluationFactory(status="correct")
    response = admin_client.get(
        CHANGELIST, {"status__exact": "flagged", "review__exact": "pending"}
    )
    assert response.status_code == 200
    shown = {e.pk for e in response.context["cl"].result_list}
    assert shown == {flagged.pk}
    assert correct.pk not in shown


def test_change_page_shows_flags_environment_log_and_results_read_only(admin_client):
    evaluation = EvaluationFactory(
        status="flagged",
        review=Review.PENDING,
        flags=[{"check": "timer_patch", "detail": "torch.cuda.Event replaced"}],
        environment={"gpu": "NVIDIA H200"},
        log="<b>log line</b>",
    )
    WorkloadResultFactory(evaluation=evaluation, name="bf16_8192x1024")
    url = reverse("admin:evaluator_evaluation_change", args=[evaluation.pk])
    response = admin_client.get(url)
    body = response.content.decode()
    assert response.status_code == 200
    assert "timer_patch" in body and "NVIDIA H200" in body
    assert "&lt;b&gt;log line&lt;/b&gt;" in body
    assert "bf16_8192x1024" in body
    assert 'name="review_note"' not in body, "read-only"
    assert admin_client.post(url, {"review": "cleared"}).status_code == 403


@pytest.mark.parametrize(
    ("action", "decision"), [("mark_hacked", "hacked"), ("mark_cleared", "cleared")]
)
def test_review_actions_call_the_service(admin_client, action, decision):
    flagged = EvaluationFactory(status="flagged", review=Review.PENDING)
    correct = EvaluationFactory(status="correct")
    response = admin_client.post(
        CHANGELIST,
        {"action": action, "_selected_action": [flagged.pk, correct.pk]},
        follow=True,
    )
    assert response.status_code == 200
    flagged.refresh_from_db()
    correct.refresh_from_db()
    assert flagged.review == decision
    assert flagged.reviewed_by == admin_client.admin
    assert correct.review == Review.NONE
    messages = [str(m) for m in response.context["messages"]]
    assert any("1 evaluation(s) marked" in m for m in messages)
    assert any("only flagged results are reviewed" in m for m in messages)


def test_rerun_action_queues_a_new_evaluation(admin_client, django_capture_on_commit_callbacks):
    evaluation = EvaluationFactory(status="worker_error")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        admin_client.post(CHANGELIST, {"action": "rerun", "_selected_action": [evaluation.pk]})
    latest = Evaluation.objects.filter(submission=evaluation.submission).latest("pk")
    assert latest.pk != evaluation.pk
    assert latest.status == "queued"
    assert len(callbacks) == 1


def test_submission_admin_pages_render(admin_client):
    evaluation = EvaluationFactory()
    assert admin_client.get(reverse("admin:submissions_submission_changelist")).status_code == 200
    url = reverse("admin:submissions_submission_change", args=[evaluation.submission.pk])
    assert admin_client.get(url).status_code == 200
