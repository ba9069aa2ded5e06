"""Reads of the accounts app."""

from django.db.models import QuerySet

from accounts.models import ApiToken, User


def token_list_for_user(*, user: User) -> QuerySet[ApiToken]:
    """The user's tokens that still work, newest first (the key itself is never stored)."""
    return ApiToken.objects.filter(user=user, revoked=False).order_by("-created", "-pk")
