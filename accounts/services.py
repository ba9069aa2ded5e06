"""Writes of the accounts app: sign-up, the profile, and API tokens."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import cast

from django.core.exceptions import ValidationError
from django.db import transaction

from accounts.auth import scope_allowed
from accounts.models import ApiToken, Scope, User

TOKEN_NAME_MAX = 50


@transaction.atomic
def user_create(*, username: str, email: str, password: str, affiliation: str = "") -> User:
    """A new user with a usable password (API tokens are issued on the profile page)."""
    user = User(username=username, email=email, affiliation=affiliation)
    user.set_password(password)
    user.full_clean()
    user.save()
    return user


def user_profile_update(*, user: User, email: str, affiliation: str) -> User:
    user.email = email
    user.affiliation = affiliation
    user.full_clean()
    user.save(update_fields=["email", "affiliation"])
    return user


@transaction.atomic
def bot_user_create(*, username: str) -> User:
    """A user that signs in with an API token only (no usable password): a lab's upload bot."""
    user = User(username=username)
    user.set_unusable_password()
    user.full_clean()
    user.save()
    return user


@dataclass(frozen=True)
class IssuedToken:
    """A token just issued: `key` is shown this once and never again."""

    token: ApiToken
    key: str


def token_issue(*, user: User, name: str, scopes: Iterable[str] = (Scope.UPLOAD,)) -> IssuedToken:
    """A new API token for `user` with `scopes`; a scope the user may not hold (`judge`
    for a non-staff user) is a ValidationError."""
    name = (name or "").strip()
    if not name:
        raise ValidationError({"name": "Give the token a name (e.g. the machine it lives on)."})
    if len(name) > TOKEN_NAME_MAX:
        raise ValidationError({"name": f"At most {TOKEN_NAME_MAX} characters."})
    wanted = sorted(set(scopes))
    for scope in wanted:
        if scope not in Scope.values:
            raise ValidationError({"scopes": f"Unknown scope {scope!r}."})
        if not scope_allowed(user=user, scope=scope):
            raise ValidationError({"scopes": f"Only staff may hold the {scope!r} scope."})
    token, key = ApiToken.objects.create_key(user=user, name=name, scopes=wanted)
    return IssuedToken(token=cast(ApiToken, token), key=key)


def token_revoke(*, user: User, token_id: str) -> ApiToken:
    """Revoke one of `user`'s tokens (for good); someone else's token is not found."""
    token = ApiToken.objects.filter(user=user, pk=token_id, revoked=False).first()
    if token is None:
        raise ValidationError("No such token.")
    token.revoked = True
    token.save(update_fields=["revoked"])
    return token


@transaction.atomic
def token_reissue(*, user: User, name: str, scopes: Iterable[str] = (Scope.UPLOAD,)) -> IssuedToken:
    """Revoke `user`'s tokens called `name` and issue a new one (the `api_token` command)."""
    ApiToken.objects.filter(user=user, name=name, revoked=False).update(revoked=True)
    return token_issue(user=user, name=name, scopes=scopes)
