"""The portal's user and the API tokens a user issues."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import AbstractUser
from django.db import models
from rest_framework_api_key.models import AbstractAPIKey, BaseAPIKeyManager


class User(AbstractUser):
    """Django's user plus an affiliation.

    The table keeps Django's name (`auth_user`, and `auth_user_groups`,
    `auth_user_user_permissions` for its many-to-many fields): a database made
    before the portal had its own user model adopts it without moving a row
    (docs/operations.md, "Adopting the custom user model").
    """

    affiliation = models.CharField(
        max_length=200, blank=True, help_text="Lab, company or university (shown on your results)."
    )

    class Meta(AbstractUser.Meta):
        db_table = "auth_user"


class Scope(models.TextChoices):
    """What an API token may do beyond reading what its user may read."""

    UPLOAD = "upload", "upload kernels and runs"
    JUDGE = "judge", "post implementation assessments (staff only)"
    MODERATE = "moderate", "flag, clear, withdraw or re-run anyone's results (staff only)"


# Scopes any user may put on a token; the rest only staff.
OPEN_SCOPES = frozenset({Scope.UPLOAD})


class ApiTokenManager(BaseAPIKeyManager):
    def get_usable_keys(self) -> models.QuerySet:
        return super().get_usable_keys().select_related("user")


class ApiToken(AbstractAPIKey):
    """A named API token: shown once when issued, stored as a SHA-512 hash of the key
    (djangorestframework-api-key), sent as `Authorization: Token <key>`."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    scopes = models.JSONField(default=list, blank=True, help_text='e.g. ["upload"].')
    last_used_at = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenManager()  # type: ignore[misc,assignment]

    class Meta(AbstractAPIKey.Meta):
        ordering = ("-created",)
        verbose_name = "API token"
        verbose_name_plural = "API tokens"

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…) of {self.user_id}"

    def has_scope(self, scope: str) -> bool:
        return scope in self.scopes
