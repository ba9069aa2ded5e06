"""Typing help for views that only authenticated users reach."""

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, User


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
