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
    CELL_VERDICT = "cell_verdict", "cell verdict"


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
    # A cell verdict's entry: the task of the (run, task) cell, the verdict and its quote.
    task = models.ForeignKey(
        "task_catalog.Task", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    verdict = models.CharField(max_length=16, blank=True)
    quote = models.TextField(blank=True)
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
            models.CheckConstraint(
                condition=~Q(kind="cell_verdict")
                | Q(run__isnull=False, task__isnull=False) & ~Q(verdict=""),
                name="moderation_action_cell_verdict_names_its_cell",
            ),
        ]

    def __str__(self) -> str:
        target = (
            f"submission #{self.submission_id}" if self.submission_id else f"run #{self.run_id}"
        )
        return f"{self.kind} {target}"


class AuditVerdict(models.TextChoices):
    """What the moderators concluded about one (run, task) cell (docs/security.md)."""

    CLEAN = "clean", "clean"
    REWARD_HACK = "reward_hack", "reward hack"
    CONTAMINATED = "contaminated", "contaminated"
    INFRA = "infra", "infrastructure problem"
    NEEDS_REVIEW = "needs_review", "needs review"


class CellVerdict(BaseModel):
    """The verdict on one task of one run, with the quote it rests on and the reason.
    Written by a moderator (`decided_by`), or set to `needs_review` by the scanners
    on upload (`decided_by` empty); each moderator's change is a ModerationAction."""

    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="cell_verdicts")
    task = models.ForeignKey("task_catalog.Task", on_delete=models.PROTECT, related_name="+")
    verdict = models.CharField(max_length=16, choices=AuditVerdict.choices)
    quote = models.TextField(blank=True, help_text="The evidence, quoted from the trace.")
    reason = models.TextField()
    line = models.PositiveIntegerField(
        null=True, blank=True, help_text="The trace line (event) the quote comes from."
    )
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )

    class Meta:
        ordering = ["run", "task__position", "task__slug"]
        constraints = [
            models.UniqueConstraint(fields=["run", "task"], name="cell_verdict_unique_cell"),
            models.CheckConstraint(condition=~Q(reason=""), name="cell_verdict_has_reason"),
        ]
        indexes = [models.Index(fields=["verdict", "run"])]

    def __str__(self) -> str:
        return f"{self.verdict}: {self.task_id} of run #{self.run_id}"
