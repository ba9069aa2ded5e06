import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import OperationalError
from django.urls import reverse
from rest_framework.test import APIClient

from core.unavailable import ServiceUnavailable
from submissions import api as submissions_api
from submissions.models import Submission
from tests.factories import (
    EvaluationFactory,
    SubmissionFactory,
    UserFactory,
    WorkloadResultFactory,
    api_token_key,
)

pytestmark = pytest.mark.django_db

SOURCE = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    pass\n"
LIST = reverse("submission-api-list")


def detail_url(pk):
    return reverse("submission-api-detail", args=[pk])


@pytest.fixture
def user():
    return UserFactory()


@pytest.fixture
def api(user):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_key(user)}")
    return client


def test_multipart_upload_is_201_with_the_queued_submission(api, user, eval_task_version):
    file = SimpleUploadedFile("fast.py", SOURCE.encode())
    response = api.post(LIST, {"task": "row_softmax", "file": file}, format="multipart")

    assert response.status_code == 201, response.content
    body = response.json()
    submission = Submission.objects.get()
    assert body["id"] == submission.pk
    assert body["task"] == "row_softmax"
    assert body["task_version"] == eval_task_version.number
    assert body["owner"] == user.username
    assert body["filename"] == "fast.py"
    assert body["sha256"] == Submission.digest(SOURCE)
    assert body["evaluation"]["status"] == "queued"
    assert body["evaluation"]["is_finished"] is False


def test_json_upload_is_201_and_may_be_private(api, eval_task_version):
    response = api.post(
        LIST,
        {"task": "row_softmax", "source": SOURCE, "filename": "x.py", "is_public": False},
        format="json",
    )
    assert response.status_code == 201, response.content
    submission = Submission.objects.get()
    assert (submission.filename, submission.source, submission.is_public) == ("x.py", SOURCE, False)


@pytest.mark.parametrize(
    ("payload", "field", "message"),
    [
        ({"task": "nope", "source": SOURCE}, "task", "Unknown task 'nope'."),
        ({"task": "row_softmax", "source": ""}, "source", "The file is empty."),
        ({"task": "row_softmax", "source": "#" * 500}, "source", "the limit is 200 bytes"),
        ({"task": "row_softmax"}, "non_field_errors", "either a `file`"),
        (
            {"task": "row_softmax", "source": "x", "file": b"x"},
            "non_field_errors",
            "either a `file`",
        ),
        ({"task": "row_softmax", "file": b"\x00\x01binary"}, "source", "looks binary"),
        ({"task": "row_softmax", "file": b"#" * 500}, "source", "the limit is 200 bytes"),
        ({"task": "row_softmax", "file": b""}, "file", "empty"),
        ({"source": SOURCE}, "task", "required"),
    ],
)
def test_bad_uploads_are_400_with_a_clear_message(
    api, eval_task_version, settings, payload, field, message
):
    settings.D2K_MAX_UPLOAD_BYTES = 200
    if "file" in payload:
        payload = {**payload, "file": SimpleUploadedFile("k.py", payload["file"])}
    response = api.post(LIST, payload, format="multipart")
    assert response.status_code == 400
    assert message in " ".join(response.json()[field])
    assert not Submission.objects.exists()


def test_upload_without_credentials_is_401(eval_task_version):
    response = APIClient().post(LIST, {"task": "row_softmax", "source": SOURCE}, format="json")
    assert response.status_code == 401


def test_a_wrong_token_is_401(eval_task_version):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-token")
    assert client.get(LIST).status_code == 401


def test_list_is_only_the_callers_own(api, user):
    mine = SubmissionFactory(owner=user)
    EvaluationFactory(submission=mine, status="correct")
    SubmissionFactory()
    body = APIClient().get(LIST)
    assert body.status_code == 401
    body = api.get(LIST).json()
    assert body["count"] == 1
    assert body["results"][0]["id"] == mine.pk
    assert body["results"][0]["status"] == "correct"
    assert "source" not in body["results"][0]


def test_detail_has_the_latest_evaluation_with_its_workloads(api, user, django_assert_num_queries):
    evaluation = EvaluationFactory(
        submission__owner=user, status="correct", environment={"device": "NVIDIA H200"}
    )
    WorkloadResultFactory(evaluation=evaluation, name="bf16_8192x1024", sol_fraction=0.5)
    WorkloadResultFactory(evaluation=evaluation, name="hidden_big", hidden=True, role="hidden")

    api.get(LIST)  # the token's first use writes `last_used_at` (at most once a minute)
    # token+user, submission, evaluation, its results, the expert's results on its GPU
    with django_assert_num_queries(5):
        response = api.get(detail_url(evaluation.submission.pk))

    body = response.json()
    assert response.status_code == 200
    assert body["source"] == evaluation.submission.source
    assert body["evaluation"]["status"] == "correct"
    assert body["evaluation"]["environment"] == {"device": "NVIDIA H200"}
    results = body["evaluation"]["results"]
    assert [r["name"] for r in results] == ["bf16_8192x1024", "hidden workload 1"]
    assert results[0]["sol_fraction"] == 0.5
    assert results[0]["speedup"] == 2.0


def test_detail_of_a_public_submission_is_open_to_anyone():
    submission = SubmissionFactory(is_public=True)
    response = APIClient().get(detail_url(submission.pk))
    assert response.status_code == 200
    assert response.json()["evaluation"] is None


def test_detail_of_someone_elses_private_submission_is_404(api):
    submission = SubmissionFactory(is_public=False)
    assert api.get(detail_url(submission.pk)).status_code == 404
    assert APIClient().get(detail_url(submission.pk)).status_code == 404


def test_staff_see_private_submissions_and_hidden_names(user):
    evaluation = EvaluationFactory(submission__is_public=False)
    WorkloadResultFactory(evaluation=evaluation, name="hidden_big", hidden=True, role="hidden")
    client = APIClient()
    client.force_authenticate(UserFactory(is_staff=True))
    body = client.get(detail_url(evaluation.submission.pk)).json()
    assert body["evaluation"]["results"][0]["name"] == "hidden_big"


def test_the_schema_documents_the_submission_endpoints(client):
    response = client.get(reverse("api-schema"))
    assert response.status_code == 200
    assert b"/api/submissions/{id}/" in response.content


def test_the_same_file_again_is_200_with_the_stored_submissions_id(api, eval_task_version):
    first = api.post(LIST, {"task": "row_softmax", "source": SOURCE}, format="json")
    again = api.post(LIST, {"task": "row_softmax", "source": SOURCE}, format="json")
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["id"] == first.json()["id"]
    assert Submission.objects.count() == 1


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("import torch\ndef f(:\n", "Python syntax error at line 2"),
        ("class Model:\n    pass\n", "defines no `ModelNew`"),
    ],
)
def test_a_file_that_cannot_be_a_kernel_is_400_at_upload(api, eval_task_version, source, message):
    response = api.post(LIST, {"task": "row_softmax", "source": source}, format="json")
    assert response.status_code == 400
    assert message in response.json()["source"][0]
    assert not Submission.objects.exists()


@pytest.mark.parametrize(
    "error",
    [
        OperationalError("database is locked"),
        ServiceUnavailable("The evaluation queue is unavailable right now, so nothing was stored."),
    ],
)
def test_an_unavailable_database_or_queue_is_503_in_json_not_500(
    api, eval_task_version, monkeypatch, error
):
    def unavailable(**kwargs):
        raise error

    monkeypatch.setattr(submissions_api, "submission_upload", unavailable)
    response = api.post(LIST, {"task": "row_softmax", "source": SOURCE}, format="json")
    assert response.status_code == 503
    assert "nothing was stored" in response.json()["detail"]
    assert response["Retry-After"] == "30"


def test_a_queue_that_does_not_answer_stores_nothing(api, eval_task_version, monkeypatch):
    from submissions import services

    def down():
        raise ConnectionError("connection refused")

    monkeypatch.setattr(services, "broker_ping", down)
    response = api.post(LIST, {"task": "row_softmax", "source": SOURCE}, format="json")
    assert response.status_code == 503
    assert "queue is unavailable" in response.json()["detail"]
    assert not Submission.objects.exists()


def test_the_detail_shows_the_jobs_state_and_what_happens_next(api, user):
    evaluation = EvaluationFactory(
        submission=SubmissionFactory(owner=user), status="queued", finished_at=None
    )
    job = api.get(detail_url(evaluation.submission.pk)).json()["evaluation"]["job"]
    assert job["state"] == "queued"
    assert job["attempt"] == 0 and job["max_attempts"] == 3
    assert job["next_step"] == "Waiting for a worker (next in line)."
