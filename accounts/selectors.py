"""Reads of the accounts app."""

from django.contrib.auth.models import User
from rest_framework.authtoken.models import Token


def token_get(*, user: User) -> Token | None:
    return Token.objects.filter(user=user).first()
