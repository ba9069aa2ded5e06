import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

PASSWORD = "correct-horse-battery"


def test_signup_creates_the_user_with_an_affiliation_and_signs_them_in(client):
    response = client.post(
        reverse("accounts:signup"),
        {
            "username": "ada",
            "email": "ada@example.org",
            "password1": "x7!lovelace-engine",
            "password2": "x7!lovelace-engine",
            "affiliation": "Analytical Engines Ltd",
        },
    )
    assert response.status_code == 302
    assert response["Location"] == reverse("accounts:profile")
    user = get_user_model().objects.get(username="ada")
    assert user.email == "ada@example.org"
    assert user.check_password("x7!lovelace-engine")
    assert user.affiliation == "Analytical Engines Ltd"
    profile = client.get(reverse("accounts:profile"))
    assert "Analytical Engines Ltd" in profile.content.decode()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"email": "taken@example.org"}, "already exists"),
        ({"password2": "something-else-1"}, "didn"),
        ({"email": "not-an-email"}, "valid email"),
        ({"username": ""}, "required"),
    ],
)
def test_signup_errors_are_shown_in_the_form(client, data, message):
    UserFactory(username="someone", email="taken@example.org")
    form = {
        "username": "ada",
        "email": "ada@example.org",
        "password1": "x7!lovelace-engine",
        "password2": "x7!lovelace-engine",
        **data,
    }
    response = client.post(reverse("accounts:signup"), form)
    assert response.status_code == 400
    assert message in response.content.decode()
    assert not get_user_model().objects.filter(username="ada").exists()


def test_sign_in_and_sign_out_by_post(client):
    user = UserFactory(username="grace")
    response = client.post(reverse("accounts:login"), {"username": "grace", "password": PASSWORD})
    assert response.status_code == 302
    assert client.get(reverse("accounts:profile")).status_code == 200

    assert client.get(reverse("accounts:logout")).status_code == 405
    assert client.post(reverse("accounts:logout")).status_code == 302
    assert client.get(reverse("accounts:profile")).status_code == 302
    assert user.pk


def test_a_wrong_password_is_refused_with_a_message(client):
    UserFactory(username="grace")
    response = client.post(reverse("accounts:login"), {"username": "grace", "password": "nope"})
    assert response.status_code == 200
    assert "Please enter a correct username and password" in response.content.decode()


def test_login_and_signup_pages_render(client):
    assert client.get(reverse("accounts:login")).status_code == 200
    assert client.get(reverse("accounts:signup")).status_code == 200


def test_profile_requires_sign_in(client):
    response = client.get(reverse("accounts:profile"))
    assert response.status_code == 302
    assert reverse("accounts:login") in response["Location"]
