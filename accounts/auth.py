"""API authentication by token, token scopes, and typing help for authenticated views.

A client sends `Authorization: Token <key>`; the key is one of the user's
`accounts.ApiToken`s, stored hashed (djangorestframework-api-key). A token
carries scopes: `HasScope("upload")` on a view lets a request through only if
its token has the scope (a browser session, which has no token, has every scope
its user may hold). Staff-only scopes (`judge`, `moderate`) also need the user to
be staff when the request is made, so a token outlives no demotion.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, cast

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.utils import timezone
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from accounts.models import OPEN_SCOPES, ApiToken, Scope, User

# A token's `last_used_at` is written at most this often (not one write per request).
LAST_USED_RESOLUTION = timedelta(minutes=1)


JUDGE_PERMISSION = "scoring.add_judge_assessment"


def scope_allowed(*, user: Any, scope: str) -> bool:
    """Whether `user` may hold `scope` at all (on a token or through a session)."""
    if not (user and user.is_authenticated and user.is_active):
        return False
    if scope not in Scope.values:
        return False
    if scope in OPEN_SCOPES or user.is_staff:
        return True
    # A judge bot need not be staff: the judge permission admits it.
    return scope == "judge" and bool(user.has_perm(JUDGE_PERMISSION))


class ApiTokenAuthentication(TokenAuthentication):
    """`Authorization: Token <key>` against the hashed `ApiToken`s; `request.auth` is the
    token. An unknown, revoked or expired key is a 401 with one message for all three."""

    keyword = "Token"

    def authenticate_credentials(self, key: str) -> tuple[User, ApiToken]:
        try:
            token = cast(ApiToken, ApiToken.objects.get_from_key(key))
        except (ApiToken.DoesNotExist, ValueError) as exc:
            raise exceptions.AuthenticationFailed("Invalid token.") from exc
        if token.has_expired or not token.user.is_active:
            raise exceptions.AuthenticationFailed("Invalid token.")
        now = timezone.now()
        if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
            token.last_used_at = now
        return token.user, token


class HasScope(BasePermission):
    """A DRF permission: `permission_classes = [HasScope("judge")]`.

    Passes for an authenticated user who may hold the scope, and, when the request
    came with a token, only if that token carries the scope."""

    def __init__(self, scope: str) -> None:
        if scope not in Scope.values:
            raise ValueError(f"Unknown scope {scope!r}; known: {', '.join(Scope.values)}.")
        self.scope = scope
        self.message = f"This needs an API token with the `{scope}` scope."

    def __call__(self) -> HasScope:
        # DRF instantiates each entry of permission_classes; an instance stands for itself.
        return self

    def has_permission(self, request: Request, view: Any) -> bool:
        if not scope_allowed(user=request.user, scope=self.scope):
            if self.scope not in OPEN_SCOPES:
                self.message = f"Only staff may use the `{self.scope}` scope."
            return False
        token = request.auth
        if isinstance(token, ApiToken):
            return token.has_scope(self.scope)
        return True


def authenticated_user(user: AbstractBaseUser | AnonymousUser) -> User:
    """`user` (a request's user) as the concrete User model.

    For views behind `login_required` or DRF's `IsAuthenticated`, where the user is
    always a saved `User` (the project's AUTH_USER_MODEL): this only narrows the type.
    Reaching it with anyone else is a wiring mistake in the view, reported loudly.
    """
    if not isinstance(user, User):
        raise TypeError(
            f"Expected an authenticated User, got {type(user).__name__}: "
            "is the view missing login_required / IsAuthenticated?"
        )
    return user
