"""What moderators did to a submission or a run, with who and why."""

from django.conf import settings
from django.db import models
from django.db.models import Q

from core.models import BaseModel


class ModerationState(models.TextChoices):
    """Where a submission or a run stands with the moderators (docs/security.md)."""

    NONE = "", "not moderated"
    FLAGGED = "flagged", "flagged for review (held back from rankings)"
    HACKED = "hacked", "confirmed hack (hidden from rankings, evidence kept)"
    CLEARED = "cleared", "cleared"
    VERIFIED = "verified", "verified by the moderators"
    WITHDRAWN = "withdrawn", "withdrawn (hidden from rankings)"


# States that keep a result off every ranking and board.
UNRANKED_STATES = (ModerationState.FLAGGED, ModerationState.HACKED, ModerationState.WITHDRAWN)


class ModerationKind(models.TextChoices):
    FLAG = "flag", "flag"
    MARK_HACKED = "mark_hacked", "mark hacked"
    CLEAR = "clear", "clear"
    VERIFY = "verify", "verify"
    RERUN = "rerun", "re-run"
    WITHDRAW = "withdraw", "withdraw"


class ModerationAction(BaseModel):
    """One moderator's action on one submission or one run; never edited or deleted."""

    submission = models.ForeignKey(
        "submissions.Submission",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="moderation_actions",
    )
    run = models.ForeignKey(
        "runs.Run",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="moderation_actions",
    )
    kind = models.CharField(max_length=12, choices=ModerationKind.choices)
    reason = models.TextField()
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="moderation_actions"
    )
    state_after = models.CharField(max_length=10, choices=ModerationState.choices, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.CheckConstraint(
                condition=Q(submission__isnull=False, run__isnull=True)
                | Q(submission__isnull=True, run__isnull=False),
                name="moderation_action_one_target",
            ),
            models.CheckConstraint(condition=~Q(reason=""), name="moderation_action_has_reason"),
        ]

    def __str__(self) -> str:
        target = (
            f"submission #{self.submission_id}" if self.submission_id else f"run #{self.run_id}"
        )
        return f"{self.kind} {target}"
