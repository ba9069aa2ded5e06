"""Private until published: every viewer on every door (page, API, moderation log), and
identical 404s for what does not exist and what the viewer may not see."""

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from tests.factories import (
    EvaluationFactory,
    RunFactory,
    SubmissionFactory,
    UserFactory,
    WorkloadResultFactory,
    token_client,
)

pytestmark = pytest.mark.django_db

SOURCE = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    pass\n"
VIEWERS = ("anonymous", "other", "owner", "staff")
CAN_SEE_PRIVATE = {"anonymous": False, "other": False, "owner": True, "staff": True}


def _client(kind, owner, api=False):
    user = {"anonymous": None, "other": UserFactory(), "owner": owner}.get(kind)
    if kind == "staff":
        user = UserFactory(is_staff=True)
    if api:
        return token_client(user) if user else APIClient()
    from django.test import Client

    client = Client()
    if user:
        client.force_login(user)
    return client


def test_uploads_are_private_by_default_on_the_page_and_the_api(eval_task_version, client):
    owner = UserFactory()
    client.force_login(owner)
    page = client.get(reverse("submissions:upload")).content.decode()
    assert 'name="is_public"' in page and "checked" not in page.split('name="is_public"')[1][:40]
    response = token_client(owner).post(
        "/api/submissions/", {"task": "row_softmax", "source": SOURCE}, format="json"
    )
    assert response.status_code == 201 and response.json()["is_public"] is False


@pytest.mark.parametrize("viewer", VIEWERS)
@pytest.mark.parametrize("door", ["page", "api", "moderation_api"])
def test_a_private_submission_is_seen_by_its_owner_and_staff_only(viewer, door):
    owner = UserFactory()
    submission = SubmissionFactory(owner=owner, is_public=False, source="SECRET_KERNEL = 1\n")
    EvaluationFactory(submission=submission, log="SECRET_LOG", public_log="SECRET_LOG")
    url = {
        "page": reverse("submissions:detail", args=[submission.pk]),
        "api": f"/api/submissions/{submission.pk}/",
        "moderation_api": f"/api/submissions/{submission.pk}/moderation/",
    }[door]
    response = _client(viewer, owner, api=door != "page").get(url)
    if CAN_SEE_PRIVATE[viewer]:
        assert response.status_code == 200
        if door != "moderation_api":
            assert "SECRET_KERNEL" in response.content.decode()
    else:
        assert response.status_code == 404
        assert "SECRET" not in response.content.decode()


@pytest.mark.parametrize("door", ["page", "api"])
def test_a_private_submission_and_a_missing_one_get_the_same_404(door):
    private = SubmissionFactory(is_public=False)
    missing = private.pk + 1000
    client = _client("other", None, api=door == "api")
    base = "/submissions/{}/" if door == "page" else "/api/submissions/{}/"
    a, b = client.get(base.format(private.pk)), client.get(base.format(missing))
    assert a.status_code == b.status_code == 404
    assert a.content == b.content
    assert "Using the URLconf" not in a.content.decode()  # never Django's debug page


@pytest.mark.parametrize(
    ("viewer", "expected"),
    [("anonymous", 401), ("other", 404), ("owner", 200), ("staff", 200)],
)
def test_the_owner_publishes_through_patch(viewer, expected):
    owner = UserFactory()
    submission = SubmissionFactory(owner=owner, is_public=False)
    client = _client(viewer, owner, api=True)
    response = client.patch(
        f"/api/submissions/{submission.pk}/", {"is_public": True}, format="json"
    )
    assert response.status_code == expected
    submission.refresh_from_db()
    assert submission.is_public is (expected == 200)
    if expected == 200:
        assert APIClient().get(f"/api/submissions/{submission.pk}/").status_code == 200


def test_another_user_cannot_unpublish_a_public_submission():
    submission = SubmissionFactory(is_public=True)
    response = token_client(UserFactory()).patch(
        f"/api/submissions/{submission.pk}/", {"is_public": False}, format="json"
    )
    assert response.status_code == 403
    submission.refresh_from_db()
    assert submission.is_public


@pytest.mark.parametrize("body", [{}, {"is_public": "maybe"}, {"is_public": None}])
def test_patch_with_a_bad_body_is_400(body):
    owner = UserFactory()
    submission = SubmissionFactory(owner=owner, is_public=False)
    response = token_client(owner).patch(f"/api/submissions/{submission.pk}/", body, format="json")
    assert response.status_code == 400


def test_the_page_toggle_publishes_and_unpublishes(client):
    owner = UserFactory()
    submission = SubmissionFactory(owner=owner, is_public=False)
    client.force_login(owner)
    url = reverse("submissions:visibility", args=[submission.pk])
    assert (
        "Publish"
        in client.get(reverse("submissions:detail", args=[submission.pk])).content.decode()
    )
    client.post(url, {"is_public": "true"})
    submission.refresh_from_db()
    assert submission.is_public
    client.post(url, {"is_public": "false"})
    submission.refresh_from_db()
    assert not submission.is_public


def test_a_kernel_of_a_run_follows_its_run():
    owner = UserFactory()
    run = RunFactory(owner=owner, is_public=False)
    submission = SubmissionFactory(owner=owner, run=run, is_public=False)
    response = token_client(owner).patch(
        f"/api/submissions/{submission.pk}/", {"is_public": True}, format="json"
    )
    assert response.status_code == 400 and "publish the run" in str(response.json())
    response = token_client(owner).patch(f"/api/runs/{run.pk}/", {"is_public": True}, format="json")
    assert response.status_code == 200
    submission.refresh_from_db()
    assert submission.is_public


def test_the_owner_sees_no_hidden_workload_name_in_the_message_or_results():
    owner = UserFactory()
    submission = SubmissionFactory(owner=owner, is_public=False)
    evaluation = EvaluationFactory(
        submission=submission,
        status="incorrect",
        message="incorrect on check_hidden_4: mismatch",
        log="full log check_hidden_4",
        public_log="public part",
    )
    WorkloadResultFactory(
        evaluation=evaluation,
        name="check_hidden_4",
        hidden=True,
        role="check",
        message="shape (1000, 777) differs",
    )
    for client in (_client("owner", owner, api=True), _client("owner", owner)):
        url = f"/api/submissions/{submission.pk}/"
        if not hasattr(client, "credentials"):
            url = reverse("submissions:detail", args=[submission.pk])
        body = client.get(url).content.decode()
        assert "1000x777" not in body and "(1000, 777)" not in body and "full log" not in body
    staff = _client("staff", owner, api=True).get(f"/api/submissions/{submission.pk}/")
    assert "check_hidden_4" in staff.content.decode()


def test_a_private_submission_never_shows_on_the_home_page_or_in_rankings(client):
    evaluation = EvaluationFactory(submission__is_public=False, submission__filename="mine.py")
    body = client.get(reverse("leaderboard:home")).content.decode()
    assert f"/submissions/{evaluation.submission.pk}/" not in body


# A hidden workload's figures as a kernel that saw the shape 4097 x 3001 could set them
# (through its output's error, or its time), and each as the submission page prints it.
HIDDEN_FIGURES = {
    "max_abs_err": (0.000417, "0.000417"),
    "rel_err": (0.000301, "0.000301"),
    "median_ms": (0.4097, "0.4097"),
    "ref_median_ms": (0.3001, "0.3001"),
    "speedup": (40.97, "40.97×"),
    "sol_fraction": (0.4321, "43.2 %"),
    "achieved_tflops": (409.7, None),
    "achieved_tbps": (3.001, None),
}


@pytest.fixture
def hidden_row_submission():
    """A public submission whose hidden workload failed, with every figure set."""
    owner = UserFactory()
    evaluation = EvaluationFactory(submission__owner=owner, submission__is_public=True)
    WorkloadResultFactory(evaluation=evaluation, name="bf16_8192x1024", max_abs_err=0.5)
    WorkloadResultFactory(
        evaluation=evaluation,
        name="hidden_3",
        role="untimed",
        hidden=True,
        status="incorrect",
        timing={"calls": 4097},
        **{field: value for field, (value, _) in HIDDEN_FIGURES.items()},
    )
    return evaluation.submission


@pytest.mark.parametrize("viewer", ["anonymous", "owner", "staff"])
def test_a_hidden_rows_figures_reach_staff_only_in_the_api(viewer, hidden_row_submission):
    client = _client(viewer, hidden_row_submission.owner, api=True)

    body = client.get(f"/api/submissions/{hidden_row_submission.pk}/").json()

    public, hidden = body["evaluation"]["results"]
    assert (public["status"], hidden["status"]) == ("correct", "incorrect")
    assert public["max_abs_err"] == 0.5 and public["median_ms"] == 1.0
    figures = {field: hidden[field] for field in HIDDEN_FIGURES}
    if viewer == "staff":
        assert figures == {field: value for field, (value, _) in HIDDEN_FIGURES.items()}
        assert hidden["timing"] == {"calls": 4097}
    else:
        assert hidden == {
            **dict.fromkeys(hidden),
            "name": "hidden workload 1",
            "role": "untimed",
            "hidden": True,
            "status": "incorrect",
            "message": "",
        }


@pytest.mark.parametrize("viewer", ["anonymous", "owner", "staff"])
def test_a_hidden_rows_figures_reach_staff_only_on_the_page(viewer, hidden_row_submission):
    client = _client(viewer, hidden_row_submission.owner)
    name = "hidden_3" if viewer == "staff" else "hidden workload 1"

    html = client.get(reverse("submissions:detail", args=[hidden_row_submission.pk])).content
    [hidden_row] = [row for row in html.decode().split("<tr>") if f"<td>{name}" in row]

    assert "status-incorrect" in hidden_row
    figures = [shown for _, shown in HIDDEN_FIGURES.values() if shown]
    printed = [shown for shown in figures if shown in hidden_row]
    assert printed == (figures if viewer == "staff" else [])
