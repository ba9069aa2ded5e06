"""Writes of the accounts app: sign-up and API tokens."""

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import transaction
from rest_framework.authtoken.models import Token


@transaction.atomic
def user_create(*, username: str, email: str, password: str) -> User:
    """A new user with a usable password and an API token ready on the profile page."""
    user = get_user_model()(username=username, email=email)
    user.set_password(password)
    user.full_clean()
    user.save()
    Token.objects.create(user=user)
    return user


@transaction.atomic
def token_regenerate(*, user: User) -> Token:
    """Revoke the user's API token (if any) and issue a new one."""
    Token.objects.filter(user=user).delete()
    return Token.objects.create(user=user)


@transaction.atomic
def bot_user_create(*, username: str) -> User:
    """A user that signs in with an API token only (no usable password): a lab's upload bot."""
    user = get_user_model()(username=username)
    user.set_unusable_password()
    user.full_clean()
    user.save()
    return user
