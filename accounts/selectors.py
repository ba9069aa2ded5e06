"""Reads of the accounts app."""

from django.contrib.auth.models import AbstractBaseUser
from rest_framework.authtoken.models import Token


def token_get(*, user: AbstractBaseUser) -> Token | None:
    return Token.objects.filter(user=user).first()
