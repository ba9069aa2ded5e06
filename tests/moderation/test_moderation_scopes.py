"""A staff user's token does what its scopes say, nothing more: moderating needs the
`moderate` scope, uploading `upload`, judging `judge` (one test per scope)."""

import pytest
from django.core.exceptions import ValidationError

from accounts.models import Scope
from accounts.services import token_issue
from moderation.models import ModerationAction
from tests.factories import RunFactory, SubmissionFactory, UserFactory, token_client

pytestmark = pytest.mark.django_db

FLAG = {"kind": "flag", "reason": "looks cached"}


@pytest.fixture
def staff():
    # A superuser holds the judge permission as well: every door is open to its session.
    return UserFactory(is_staff=True, is_superuser=True)


def _doors(api) -> dict[str, int]:
    """The status of each scoped door for `api`: 403 when the token lacks the scope, and
    otherwise what the door answers (moderation acts: 201; empty bodies: 400)."""
    submission, run = SubmissionFactory(), RunFactory()
    return {
        "moderate submission": api.post(
            f"/api/submissions/{submission.pk}/moderation/", FLAG, format="json"
        ).status_code,
        "moderate run": api.post(
            f"/api/runs/{run.pk}/moderation/", FLAG, format="json"
        ).status_code,
        "upload kernel": api.post("/api/submissions/", {}, format="json").status_code,
        "upload run": api.post("/api/runs/", {}, format="multipart").status_code,
        "judge": api.post("/api/assessments/", [], format="json").status_code,
    }


def _expected(scope: str) -> dict[str, int]:
    def door(needs: str, passed: int) -> int:
        return passed if scope == needs else 403

    return {
        "moderate submission": door("moderate", 201),
        "moderate run": door("moderate", 201),
        "upload kernel": door("upload", 400),
        "upload run": door("upload", 400),
        "judge": door("judge", 400),
    }


@pytest.mark.parametrize("scope", Scope.values)
def test_a_staff_token_with_one_scope_passes_only_that_scopes_doors(staff, scope):
    assert _doors(token_client(staff, scopes=(scope,))) == _expected(scope)
    assert ModerationAction.objects.exists() == (scope == "moderate")


def test_a_staff_token_without_moderate_is_told_which_scope_it_lacks(staff):
    response = token_client(staff, scopes=("upload", "judge")).post(
        f"/api/runs/{RunFactory().pk}/moderation/", FLAG, format="json"
    )
    assert response.status_code == 403
    assert response.json() == {"detail": "This needs an API token with the `moderate` scope."}


def test_a_demoted_moderators_token_stops_moderating(staff):
    api = token_client(staff, scopes=("moderate",))
    staff.is_staff = False
    staff.save()
    response = api.post(f"/api/runs/{RunFactory().pk}/moderation/", FLAG, format="json")
    assert response.status_code == 403
    assert response.json() == {"detail": "Only staff may use the `moderate` scope."}
    assert not ModerationAction.objects.exists()


def test_only_staff_are_issued_the_moderate_scope(client):
    user = UserFactory()
    with pytest.raises(ValidationError, match="Only staff"):
        token_issue(user=user, name="bot", scopes=("moderate",))
    client.force_login(user)
    assert b'value="moderate"' not in client.get("/accounts/profile/").content
    client.force_login(UserFactory(is_staff=True))
    assert b'value="moderate"' in client.get("/accounts/profile/").content
