"""API tokens: issued on the profile page, shown once, stored hashed, scoped, revocable."""

import pytest
from django.core import mail
from django.core.exceptions import ValidationError
from django.urls import reverse
from rest_framework.test import APIClient

from accounts.models import ApiToken
from accounts.services import token_issue, token_revoke
from tests.factories import UserFactory, token_client

pytestmark = pytest.mark.django_db

LIST = "/api/submissions/"


def _issue(client, name="laptop", scopes=("upload",)):
    form = client.get(reverse("accounts:profile")).context["token_form"]
    return client.post(
        reverse("accounts:token_create"),
        {"name": name, "scopes": list(scopes), "issue_id": form.initial["issue_id"]},
    )


def test_a_reload_of_the_page_that_showed_a_token_issues_no_second_one(client):
    user = UserFactory()
    client.force_login(user)
    form = client.get(reverse("accounts:profile")).context["token_form"]
    sent = {"name": "laptop", "scopes": ["upload"], "issue_id": form.initial["issue_id"]}
    assert client.post(reverse("accounts:token_create"), sent).status_code == 200
    again = client.post(reverse("accounts:token_create"), sent, follow=True)
    assert ApiToken.objects.filter(user=user).count() == 1
    assert "already answered" in again.content.decode()
    # A form without an issue id of this session issues nothing either.
    client.post(reverse("accounts:token_create"), {**sent, "issue_id": "forged"})
    assert ApiToken.objects.filter(user=user).count() == 1


def test_a_token_is_shown_once_and_stored_only_as_a_hash(client):
    user = UserFactory()
    client.force_login(user)
    response = _issue(client)
    assert response.status_code == 200
    key = response.context["issued"].key
    assert key in response.content.decode()
    token = ApiToken.objects.get(user=user)
    assert key not in token.hashed_key and token.hashed_key.startswith("sha512$$")
    # The profile page afterwards lists the token by name and prefix, never the key.
    page = client.get(reverse("accounts:profile")).content.decode()
    assert "laptop" in page and token.prefix in page and key not in page


def test_the_token_authenticates_the_api_and_records_its_last_use(client):
    user = UserFactory()
    api = token_client(user)
    assert ApiToken.objects.get(user=user).last_used_at is None
    assert api.get(LIST).status_code == 200
    assert ApiToken.objects.get(user=user).last_used_at is not None


def test_a_revoked_token_is_401_with_the_same_message_as_a_wrong_one(client):
    user = UserFactory()
    api = token_client(user)
    token = ApiToken.objects.get(user=user)
    client.force_login(user)
    assert client.get(reverse("accounts:token_revoke", args=[token.pk])).status_code == 405
    response = client.post(reverse("accounts:token_revoke", args=[token.pk]), follow=True)
    assert "is revoked" in response.content.decode()
    revoked = api.get(LIST)
    wrong = APIClient(HTTP_AUTHORIZATION="Token abc.def").get(LIST)
    assert revoked.status_code == wrong.status_code == 401
    assert revoked.json() == wrong.json() == {"detail": "Invalid token."}


def test_nobody_revokes_someone_elses_token(client):
    owner, other = UserFactory(), UserFactory()
    issued = token_issue(user=owner, name="bot")
    client.force_login(other)
    client.post(reverse("accounts:token_revoke", args=[issued.token.pk]))
    assert not ApiToken.objects.get(pk=issued.token.pk).revoked
    with pytest.raises(ValidationError):
        token_revoke(user=other, token_id=issued.token.pk)


@pytest.mark.parametrize(
    ("staff", "scopes", "allowed"),
    [
        (False, ["upload"], True),
        (False, ["judge"], False),
        (False, ["upload", "judge"], False),
        (True, ["upload", "judge"], True),
        (False, ["root"], False),
    ],
)
def test_only_staff_hold_the_judge_scope(staff, scopes, allowed):
    user = UserFactory(is_staff=staff)
    if allowed:
        assert token_issue(user=user, name="x", scopes=scopes).token.scopes == sorted(scopes)
    else:
        with pytest.raises(ValidationError):
            token_issue(user=user, name="x", scopes=scopes)


def test_the_judge_scope_is_not_offered_to_a_user_and_refused_if_posted(client):
    client.force_login(UserFactory())
    page = client.get(reverse("accounts:profile")).content.decode()
    assert 'value="upload"' in page and 'value="judge"' not in page
    assert _issue(client, scopes=["judge"]).status_code == 400
    assert not ApiToken.objects.exists()


@pytest.mark.parametrize("name", ["", " ", "x" * 51])
def test_a_token_needs_a_short_name(client, name):
    client.force_login(UserFactory())
    assert _issue(client, name=name).status_code == 400
    assert not ApiToken.objects.exists()


def test_a_read_only_token_cannot_upload(eval_task_version):
    user = UserFactory()
    body = {"task": "row_softmax", "source": "class ModelNew:\n    pass\n"}
    response = token_client(user, scopes=()).post(LIST, body, format="json")
    assert response.status_code == 403
    assert "upload" in response.json()["detail"]


def test_an_inactive_users_token_is_refused():
    user = UserFactory()
    api = token_client(user)
    user.is_active = False
    user.save()
    assert api.get(LIST).status_code == 401


def test_the_profile_saves_email_and_affiliation(client):
    user = UserFactory()
    client.force_login(user)
    response = client.post(
        reverse("accounts:profile"), {"email": "new@example.org", "affiliation": "ETH"}
    )
    assert response.status_code == 302
    user.refresh_from_db()
    assert (user.email, user.affiliation) == ("new@example.org", "ETH")
    UserFactory(email="taken@example.org")
    response = client.post(reverse("accounts:profile"), {"email": "taken@example.org"})
    assert response.status_code == 400 and "already exists" in response.content.decode()


def test_password_reset_sends_a_link_that_sets_a_new_password(client):
    user = UserFactory(email="ada@example.org")
    response = client.post(reverse("accounts:password_reset"), {"email": "ada@example.org"})
    assert response.status_code == 302
    assert len(mail.outbox) == 1
    link = next(w for w in mail.outbox[0].body.split() if "/password/reset/" in w)
    path = link.split("://", 1)[1].split("/", 1)[1]
    form = client.get(f"/{path}", follow=True)
    assert form.status_code == 200 and "Choose a new password" in form.content.decode()
    done = client.post(
        form.redirect_chain[-1][0],
        {"new_password1": "a-fresh-passphrase-9", "new_password2": "a-fresh-passphrase-9"},
    )
    assert done.status_code == 302
    user.refresh_from_db()
    assert user.check_password("a-fresh-passphrase-9")


def test_password_reset_for_an_unknown_address_says_the_same_and_sends_nothing(client):
    response = client.post(reverse("accounts:password_reset"), {"email": "nobody@example.org"})
    assert response.status_code == 302
    assert response["Location"] == reverse("accounts:password_reset_done")
    assert not mail.outbox


@pytest.mark.parametrize(
    "name", ["login", "signup", "password_reset", "password_reset_done", "password_reset_complete"]
)
def test_account_pages_use_the_site_layout_and_csrf(client, name):
    response = client.get(reverse(f"accounts:{name}"))
    body = response.content.decode()
    assert response.status_code == 200
    assert "site-header" in body
    if '<form class="stacked"' in body:
        assert "csrfmiddlewaretoken" in body


def test_api_token_command_refuses_a_scope_the_user_may_not_hold(db):
    from django.core.management import CommandError, call_command

    UserFactory(username="bot")
    with pytest.raises(CommandError, match="staff"):
        call_command("api_token", "bot", "--scope", "judge")
