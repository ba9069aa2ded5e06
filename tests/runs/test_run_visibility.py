"""Runs: private until published, on the page, the API, the list and the traces."""

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from tests.factories import RunFactory, UserFactory, token_client

pytestmark = pytest.mark.django_db

CAN_SEE_PRIVATE = {"anonymous": False, "other": False, "owner": True, "staff": True}


def _user(kind, owner):
    return {
        "anonymous": None,
        "other": UserFactory(),
        "owner": owner,
        "staff": UserFactory(is_staff=True),
    }[kind]


@pytest.mark.parametrize("viewer", list(CAN_SEE_PRIVATE))
@pytest.mark.parametrize(
    "url",
    [
        "/runs/{pk}/",
        "/api/runs/{pk}/",
        "/api/runs/{pk}/moderation/",
        "/runs/{pk}/traces/row_softmax/",
        "/runs/{pk}/traces/row_softmax/raw/",
    ],
)
def test_a_private_run_is_seen_by_its_owner_and_staff_only(viewer, url):
    owner = UserFactory()
    run = RunFactory(owner=owner, is_public=False, notes="SECRET_NOTES")
    user = _user(viewer, owner)
    client = token_client(user) if url.startswith("/api/") and user else APIClient()
    if not url.startswith("/api/"):
        client = Client()
        if user:
            client.force_login(user)
    response = client.get(url.format(pk=run.pk))
    if CAN_SEE_PRIVATE[viewer]:
        # The trace does not exist: a 404 for everyone, the others are 200.
        assert response.status_code == (404 if "traces" in url else 200)
    else:
        assert response.status_code == 404
        assert "SECRET_NOTES" not in response.content.decode()


@pytest.mark.parametrize("viewer", list(CAN_SEE_PRIVATE))
def test_the_run_list_shows_a_private_run_to_its_owner_and_staff_only(viewer):
    owner = UserFactory()
    run = RunFactory(owner=owner, is_public=False)
    user = _user(viewer, owner)
    client = token_client(user) if user else APIClient()
    ids = [r["id"] for r in client.get("/api/runs/").json()["results"]]
    assert (run.pk in ids) is CAN_SEE_PRIVATE[viewer]


def test_the_owner_publishes_a_run_on_its_page():
    owner = UserFactory()
    run = RunFactory(owner=owner, is_public=False)
    client = Client()
    client.force_login(owner)
    client.post(reverse("runs:visibility", args=[run.pk]), {"is_public": "true"})
    run.refresh_from_db()
    assert run.is_public
    assert Client().get(f"/runs/{run.pk}/").status_code == 200


def test_someone_else_cannot_publish_a_run():
    run = RunFactory(is_public=True)
    response = token_client(UserFactory()).patch(
        f"/api/runs/{run.pk}/", {"is_public": False}, format="json"
    )
    assert response.status_code == 403
