import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import OperationalError
from django.urls import reverse
from rest_framework.test import APIClient

from core.unavailable import ServiceUnavailable
from scoring.models import Assessment
from submissions import api as submissions_api
from submissions.models import Submission
from tests.factories import (
    DesignPropertyFactory,
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
    WorkloadResultFactory(evaluation=evaluation, name="hidden_big", hidden=True, role="untimed")

    api.get(LIST)  # the token's first use writes `last_used_at` (at most once a minute)
    # token+user, submission, evaluation, its results, the expert's results on its GPU,
    # the task's properties, their assessments
    with django_assert_num_queries(7):
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
    WorkloadResultFactory(evaluation=evaluation, name="hidden_big", hidden=True, role="untimed")
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


def assess(submission, key, source, value, **fields):
    return Assessment.objects.create(
        kind="implemented",
        source=source,
        property=submission.task.properties.get(key=key),
        task=submission.task,
        submission=submission,
        value=value,
        **fields,
    )


@pytest.fixture
def assessed(user):
    """A private, finished submission whose task has four properties: one implemented by
    the detector alone, one by a judge over the detector, one with a counter rule nobody
    assessed, and one implemented on a dependency that is not."""
    evaluation = EvaluationFactory(
        submission__owner=user, submission__is_public=False, environment={"counters": "no ncu"}
    )
    submission = evaluation.submission
    task = submission.task
    DesignPropertyFactory(task=task, key="max", level="L1", weight=1.0, position=0)
    DesignPropertyFactory(
        task=task, key="online", level="L1", weight=2.0, depends_on=["max"], position=1
    )
    DesignPropertyFactory(
        task=task, key="fused", level="L3", weight=1.0, depends_on=["single_pass"], position=0
    )
    DesignPropertyFactory(
        task=task,
        key="single_pass",
        level="L2",
        weight=2.0,
        counters={"kind": "traffic", "max_ratio": 1.3},
        position=0,
    )
    assess(
        submission,
        "max",
        "detector",
        True,
        rationale="tl.max found",
        evidence=["tl.max(x, 0)"],
        evidence_kind="source",
    )
    assess(submission, "online", "detector", False, rationale="no running sum")
    assess(
        submission,
        "online",
        "judge",
        True,
        rationale="keeps a running max and sum",
        evidence={"line": 12},
        judge="judge-model-7",
        who=UserFactory(username="the-judges-account"),
    )
    assess(submission, "fused", "detector", True, rationale="one kernel")
    return submission


def test_detail_has_the_design_properties_as_the_page_shows_them(
    api, assessed, django_assert_num_queries
):
    api.get(LIST)  # the token's first use writes `last_used_at` (at most once a minute)
    # token+user, submission, evaluation, its results, the task's properties, their
    # assessments: as many whatever the number of properties and assessments
    with django_assert_num_queries(6):
        response = api.get(detail_url(assessed.pk))

    assert response.status_code == 200
    properties = {p["key"]: p for p in response.json()["properties"]}
    assert list(properties) == ["max", "online", "single_pass", "fused"]  # L1, L2, L3
    assert properties["max"] == {
        "key": "max",
        "level": "L1",
        "title": "max",
        "weight": 1.0,
        "depends_on": [],
        "implemented": True,
        "credited": True,
        "source": "detector",
        "judge": "",
        "rationale": "tl.max found",
        "evidence": ["tl.max(x, 0)"],
        "evidence_kind": "source",
        "judge_assessed": True,  # the factory's properties declare no detector
        "counters_note": "",
        "others": [],
    }
    online = properties["online"]
    assert (online["implemented"], online["credited"]) == (True, True)
    assert (online["source"], online["judge"]) == ("judge", "judge-model-7")
    assert online["depends_on"] == ["max"] and online["evidence"] == {"line": 12}
    assert online["others"] == [
        {"source": "detector", "value": False, "rationale": "no running sum"}
    ]
    single_pass = properties["single_pass"]
    assert (single_pass["implemented"], single_pass["source"]) == (None, None)  # not assessed
    assert single_pass["credited"] is False
    assert single_pass["counters_note"] == "counters not read: no ncu"
    fused = properties["fused"]
    assert (fused["implemented"], fused["credited"]) == (True, False)  # its dependency is not


def test_detail_properties_say_what_the_submission_page_says(client, user, assessed):
    client.force_login(user)
    page = client.get(reverse("submissions:detail", args=[assessed.pk])).content.decode()
    api = APIClient()
    api.force_authenticate(user)
    for row in api.get(detail_url(assessed.pk)).json()["properties"]:
        assert f'id="property-{row["key"]}"' in page
        assert row["rationale"] in page and row["counters_note"] in page


def test_detail_properties_never_name_who_recorded_an_assessment(assessed):
    client = APIClient()
    client.force_authenticate(assessed.owner)
    body = client.get(detail_url(assessed.pk)).json()
    assert "the-judges-account" not in str(body)
    assert all("who" not in row for row in body["properties"])


def test_a_private_submissions_properties_are_404_to_others(assessed):
    other = APIClient()
    other.force_authenticate(UserFactory())
    for client in (APIClient(), other):
        response = client.get(detail_url(assessed.pk))
        assert response.status_code == 404
        assert "keeps a running max" not in response.content.decode()


def test_a_task_without_properties_gives_an_empty_list():
    submission = SubmissionFactory(is_public=True)
    assert APIClient().get(detail_url(submission.pk)).json()["properties"] == []


def test_the_schema_describes_the_submissions_properties(client):
    schema = client.get(reverse("api-schema") + "?format=json").json()
    components = schema["components"]["schemas"]
    field = components["SubmissionDetail"]["properties"]["properties"]
    assert "design properties as the submission page shows them" in field["description"]
    assert field["items"]["$ref"] == "#/components/schemas/PropertyResult"
    documented = components["PropertyResult"]["properties"]
    assert "not assessed" in documented["implemented"]["description"]
    assert {"key", "level", "weight", "implemented", "source", "evidence", "others"} <= set(
        documented
    )
