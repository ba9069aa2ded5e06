import hashlib

from django.conf import settings
from django.db import models

from core.models import BaseModel
from moderation.models import ModerationState


class Submission(BaseModel):
    """One kernel file for one task, pinned to the task version it was uploaded against."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="submissions"
    )
    task = models.ForeignKey("task_catalog.Task", on_delete=models.PROTECT, related_name="+")
    task_version = models.ForeignKey(
        "task_catalog.TaskVersion", on_delete=models.PROTECT, related_name="submissions"
    )
    filename = models.CharField(max_length=200, default="kernel.py")
    source = models.TextField()
    sha256 = models.CharField(max_length=64, db_index=True)
    is_public = models.BooleanField(
        default=False, help_text="Private (owner and staff only) until the owner publishes it."
    )
    moderation = models.CharField(
        max_length=10, choices=ModerationState.choices, default=ModerationState.NONE, blank=True
    )
    run = models.ForeignKey(
        "runs.Run", on_delete=models.CASCADE, null=True, blank=True, related_name="submissions"
    )

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            # One kernel per task per run; lone submissions are not constrained.
            models.UniqueConstraint(
                fields=["run", "task"],
                condition=models.Q(run__isnull=False),
                name="submission_unique_run_task",
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.filename}"

    @staticmethod
    def digest(source: str) -> str:
        return hashlib.sha256(source.encode()).hexdigest()
