import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from evaluator.models import Review
from submissions.models import Submission
from tests.factories import (
    EvaluationFactory,
    SubmissionFactory,
    UserFactory,
    WorkloadResultFactory,
)

pytestmark = pytest.mark.django_db

SOURCE = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    pass\n"
UPLOAD = reverse("submissions:upload")


@pytest.fixture
def user():
    return UserFactory()


@pytest.fixture
def signed_in(client, user):
    client.force_login(user)
    return client


# --- upload ---------------------------------------------------------------------------


def test_upload_requires_sign_in(client):
    response = client.get(UPLOAD)
    assert response.status_code == 302
    assert reverse("accounts:login") in response["Location"]


def test_upload_form_lists_the_catalogs_tasks(signed_in, eval_task_version):
    response = signed_in.get(UPLOAD)
    assert response.status_code == 200
    assert 'value="row_softmax"' in response.content.decode()


def test_uploading_a_file_creates_a_submission_and_shows_it(signed_in, user, eval_task_version):
    file = SimpleUploadedFile("fast.py", SOURCE.encode(), content_type="text/x-python")
    response = signed_in.post(UPLOAD, {"task": "row_softmax", "file": file, "is_public": "on"})

    submission = Submission.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("submissions:detail", args=[submission.pk])
    assert (submission.owner, submission.filename, submission.source) == (user, "fast.py", SOURCE)
    assert submission.is_public
    assert submission.evaluations.get().status == "queued"


def test_pasting_the_source_creates_a_private_submission(signed_in, eval_task_version):
    response = signed_in.post(UPLOAD, {"task": "row_softmax", "source": SOURCE})
    assert response.status_code == 302
    submission = Submission.objects.get()
    assert submission.source == SOURCE
    assert submission.filename == "kernel.py"
    assert not submission.is_public


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"task": "row_softmax"}, "Upload a .py file or paste the kernel"),
        ({"task": "nope", "source": SOURCE}, "Unknown task"),
        ({"task": "row_softmax", "source": "x=1", "file": b"x=1"}, "not both"),
        ({"task": "row_softmax", "file": b"\x00\x01\x02binary"}, "looks binary"),
        ({"task": "row_softmax", "file": b"\xff\xfe\xfd"}, "not UTF-8 text"),
        ({"task": "row_softmax", "file": b"   \n"}, "The file is empty."),
        ({"task": "row_softmax", "file": b"#" * 300}, "the limit is 200"),
        ({"task": "row_softmax", "source": "#" * 300}, "the limit is 200 bytes"),
    ],
)
def test_bad_uploads_show_the_error_in_the_form(
    signed_in, eval_task_version, settings, data, message
):
    settings.D2K_MAX_UPLOAD_BYTES = 200
    if isinstance(data.get("file"), bytes):
        data = {**data, "file": SimpleUploadedFile("k.py", data["file"])}
    response = signed_in.post(UPLOAD, data)
    assert response.status_code == 400
    assert message in response.content.decode()
    assert not Submission.objects.exists()


# --- my submissions ---------------------------------------------------------------------


def test_mine_lists_only_my_submissions_in_two_queries(signed_in, user, django_assert_num_queries):
    mine = SubmissionFactory.create_batch(3, owner=user)
    EvaluationFactory(submission=mine[0], status="incorrect")
    theirs = SubmissionFactory()

    with django_assert_num_queries(3):  # session, user, the list
        response = signed_in.get(reverse("submissions:mine"))

    body = response.content.decode()
    for submission in mine:
        assert reverse("submissions:detail", args=[submission.pk]) in body
    assert reverse("submissions:detail", args=[theirs.pk]) not in body
    assert "status-incorrect" in body


def test_mine_requires_sign_in(client):
    assert client.get(reverse("submissions:mine")).status_code == 302


# --- detail -------------------------------------------------------------------------------


@pytest.fixture
def finished(user):
    evaluation = EvaluationFactory(
        submission__owner=user,
        submission__source="def f():\n    return '<b>'\n",
        status="incorrect",
        mode="cuda",
        message="incorrect on hidden_3 and bf16_8192x1024",
        environment={
            "device": "NVIDIA H200",
            "torch": "2.13.0",
            "gpu_state_during": {
                "samples": 3,
                "sm_clock_mhz": {"min": 345.0, "median": 1755.0, "max": 1980.0},
                "throttle_reasons": {"sw_power_cap": 1},
                "note": "<i>",
            },
        },
        log="<script>alert(1)</script> hidden_3 failed",
        public_log="<script>alert(1)</script> public part",
        flags=[],
    )
    WorkloadResultFactory(
        evaluation=evaluation,
        name="bf16_8192x1024",
        status="incorrect",
        max_abs_err=0.25,
        rel_err=0.125,
        median_ms=0.5,
        ref_median_ms=1.0,
        sol_fraction=0.42,
        position=0,
    )
    WorkloadResultFactory(
        evaluation=evaluation,
        name="hidden_3",
        role="untimed",
        hidden=True,
        status="incorrect",
        message="wrong at row 332, col 70000",
        median_ms=None,
        ref_median_ms=None,
        speedup=None,
        position=1,
    )
    return evaluation


def _detail(client, submission):
    return client.get(reverse("submissions:detail", args=[submission.pk]))


def test_detail_shows_the_verdict_the_workloads_the_environment_and_the_code(
    client, finished, django_assert_num_queries
):
    # submission, the data version (the public's page of a finished evaluation is cached
    # under it), the submission again, latest evaluation, its results, the expert's results
    # on its GPU, the properties, their assessments, moderation
    with django_assert_num_queries(9):
        response = _detail(client, finished.submission)
    body = response.content.decode()
    assert response.status_code == 200
    assert "row_softmax" in body or finished.submission.task.slug in body
    assert finished.submission.sha256 in body
    assert 'class="status status-incorrect"' in body
    assert "bf16_8192x1024" in body
    assert "0.25" in body and "2.00×" in body and "42.0 %" in body
    assert "NVIDIA H200" in body
    # Nested values read as text, keys sorted (jsonb keeps no order), escaped.
    assert (
        "note &lt;i&gt;; samples 3; sm_clock_mhz 345.0–1980.0 (median 1755.0); "
        "throttle_reasons sw_power_cap 1"
    ) in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body
    assert "<script>alert" not in body
    assert "&lt;b&gt;" in body or "&#39;&lt;b&gt;&#39;" in body  # highlighted and escaped
    assert 'class="highlight' in body or "highlighttable" in body
    assert "status.js" not in body, "no polling once finished"


def test_detail_says_when_timed_calls_were_queued_slower_than_their_cover(client, finished):
    row = finished.results.get(name="bf16_8192x1024")
    row.timing = {"calls": 400, "host_bound_calls": 12, "cover_us": 480.0}
    row.save()
    body = _detail(client, finished.submission).content.decode()
    assert "12 of 400 timed calls took the host longer to queue than their launch cover" in body


def test_detail_hides_hidden_workload_names_from_non_staff(client, finished):
    body = _detail(client, finished.submission).content.decode()
    assert "hidden_3" not in body
    assert "hidden workload 1" in body
    assert "wrong at row 332" not in body


def test_detail_shows_hidden_workloads_to_staff(client, finished):
    client.force_login(UserFactory(is_staff=True))
    body = _detail(client, finished.submission).content.decode()
    assert "hidden_3" in body
    assert "wrong at row 332" in body


def test_a_queued_evaluation_polls_the_api_from_a_static_script(client, user):
    evaluation = EvaluationFactory(submission__owner=user, status="queued", finished_at=None)
    body = _detail(client, evaluation.submission).content.decode()
    api_url = reverse("submission-api-detail", args=[evaluation.submission.pk])
    assert f'data-status-url="{api_url}"' in body
    assert re.search(r'<script src="[^"]*js/status\.js"', body)
    assert not re.search(r"<script>(?!alert)", body), "no inline JavaScript"


def test_flagged_results_show_their_flags_and_review(client):
    evaluation = EvaluationFactory(
        status="flagged",
        review=Review.PENDING,
        flags=[{"check": "output_cache", "detail": "same output twice"}],
    )
    body = _detail(client, evaluation.submission).content.decode()
    assert "output_cache" in body and "same output twice" in body
    assert "pending review" in body


def test_someone_elses_private_submission_is_404(client):
    submission = SubmissionFactory(is_public=False)
    client.force_login(UserFactory())
    assert _detail(client, submission).status_code == 404


def test_my_private_submission_is_visible_to_me(signed_in, user):
    submission = SubmissionFactory(owner=user, is_public=False)
    response = _detail(signed_in, submission)
    assert response.status_code == 200
    assert "No evaluation yet" in response.content.decode()


def test_the_same_file_again_shows_the_stored_submission(signed_in, eval_task_version):
    data = {"task": "row_softmax", "source": SOURCE, "is_public": "on"}
    first = signed_in.post(UPLOAD, data)
    again = signed_in.post(UPLOAD, data, follow=True)
    assert first.status_code == 302
    assert again.redirect_chain[-1][0] == first["Location"]
    assert "You uploaded this file before" in again.content.decode()
    assert Submission.objects.count() == 1


def test_an_unavailable_database_shows_the_form_with_a_503_message(
    signed_in, eval_task_version, monkeypatch
):
    from django.db import OperationalError

    from submissions import views

    def locked(**kwargs):
        raise OperationalError("database is locked")

    monkeypatch.setattr(views, "submission_upload", locked)
    response = signed_in.post(UPLOAD, {"task": "row_softmax", "source": SOURCE})
    assert response.status_code == 503
    body = response.content.decode()
    assert "nothing was stored" in body and "<form" in body
    assert not Submission.objects.exists()


def test_an_unavailable_database_elsewhere_is_a_503_page_not_a_500(client, monkeypatch):
    from django.db import OperationalError

    from task_catalog import views

    def locked(*args, **kwargs):
        raise OperationalError("unable to open database file")

    monkeypatch.setattr(views, "render", locked)
    response = client.get(reverse("task_catalog:list"))
    assert response.status_code == 503
    assert "Unavailable for a moment" in response.content.decode()


def test_a_running_evaluation_shows_its_worker_attempt_and_next_step(client, user):
    from django.utils import timezone

    evaluation = EvaluationFactory(
        submission__owner=user,
        status="running",
        finished_at=None,
        worker="gpu-3:777",
        attempts=2,
        heartbeat_at=timezone.now(),
        lease_expires_at=timezone.now() + timezone.timedelta(seconds=60),
    )
    body = _detail(client, evaluation.submission).content.decode()
    assert "2 of 3" in body
    assert "Running on gpu-3:777 (attempt 2 of 3); last heartbeat 0 s ago." in body


def test_the_public_sees_the_log_up_to_the_first_hidden_workload_and_staff_all_of_it(client):
    evaluation = EvaluationFactory(
        submission__is_public=True,
        log="public line\nhidden_fp32_1x1: printed shape (1, 1)\n",
        public_log="public line\n",
    )
    body = _detail(client, evaluation.submission).content.decode()
    assert "public line" in body and "printed shape" not in body
    client.force_login(UserFactory(is_staff=True))
    assert "printed shape (1, 1)" in _detail(client, evaluation.submission).content.decode()
