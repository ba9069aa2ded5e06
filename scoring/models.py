"""Assessments of design properties and the materialised scores of submissions and runs.

An assessment says whether one property is implemented in one submission's code
(`implemented`) or present in the design a run proposed for a task (`proposed`).
Several sources may assess the same thing; all are kept, and the one of highest
precedence (admin > judge > counters > detector) is the effective one.
"""

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.utils import timezone

from core.models import BaseModel


class AssessmentKind(models.TextChoices):
    IMPLEMENTED = "implemented", "implemented in the code"
    PROPOSED = "proposed", "proposed in the design"


class AssessmentSource(models.TextChoices):
    DETECTOR = "detector", "detector (reads the source)"
    COUNTERS = "counters", "hardware counters"
    JUDGE = "judge", "judge (a model or a person, through the API)"
    ADMIN = "admin", "admin"


# Highest first: the effective assessment is the first source present.
SOURCE_PRECEDENCE = (
    AssessmentSource.ADMIN,
    AssessmentSource.JUDGE,
    AssessmentSource.COUNTERS,
    AssessmentSource.DETECTOR,
)


class Assessment(BaseModel):
    """One source's verdict on one property: of a submission's code, or of a run's proposal."""

    kind = models.CharField(max_length=12, choices=AssessmentKind.choices)
    source = models.CharField(max_length=10, choices=AssessmentSource.choices)
    property = models.ForeignKey(
        "task_catalog.DesignProperty", on_delete=models.CASCADE, related_name="assessments"
    )
    task = models.ForeignKey("task_catalog.Task", on_delete=models.CASCADE, related_name="+")
    submission = models.ForeignKey(
        "submissions.Submission",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="assessments",
    )
    run = models.ForeignKey(
        "runs.Run", on_delete=models.CASCADE, null=True, blank=True, related_name="assessments"
    )
    value = models.BooleanField(help_text="Implemented (or proposed): yes or no.")
    rationale = models.TextField(blank=True)
    evidence = models.JSONField(default=list, blank=True, help_text="Snippets, names, figures.")
    evidence_kind = models.CharField(
        max_length=24,
        blank=True,
        help_text="What a machine assessment was drawn from: counter, executed_instruction, "
        "compiled_code or source (blank for a judge's or an admin's).",
    )
    judge = models.CharField(max_length=200, blank=True, help_text="The judge's model or name.")
    who = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    assessed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["task", "property__level", "property__position", "source"]
        permissions = [("add_judge_assessment", "Can record judge assessments through the API")]
        constraints = [
            models.CheckConstraint(
                condition=(
                    Q(kind="implemented", submission__isnull=False, run__isnull=True)
                    | Q(kind="proposed", submission__isnull=True, run__isnull=False)
                ),
                name="assessment_target_matches_kind",
            ),
            models.CheckConstraint(
                condition=~Q(kind="proposed") | Q(source__in=["judge", "admin"]),
                name="assessment_proposed_by_judge_or_admin",
            ),
            models.UniqueConstraint(
                fields=["submission", "property", "source"],
                condition=Q(kind="implemented"),
                name="assessment_unique_implemented",
            ),
            models.UniqueConstraint(
                fields=["run", "task", "property", "source"],
                condition=Q(kind="proposed"),
                name="assessment_unique_proposed",
            ),
        ]

    def __str__(self) -> str:
        target = (
            f"submission #{self.submission_id}" if self.submission_id else f"run #{self.run_id}"
        )
        return f"{self.kind} {self.property_id} of {target} by {self.source}: {self.value}"

    def clean(self) -> None:
        submission = self.submission if self.submission_id else None
        if submission is not None and self.task_id and submission.task_id != self.task_id:
            raise ValidationError({"task": "The task must be the submission's task."})
        if self.property_id and self.task_id and self.property.task_id != self.task_id:
            raise ValidationError({"property": "The property must be one of the task's."})


class TaskScore(BaseModel):
    """One submission's figures as the scores use them (refreshed with every change)."""

    submission = models.OneToOneField(
        "submissions.Submission", on_delete=models.CASCADE, related_name="score"
    )
    run = models.ForeignKey(
        "runs.Run", on_delete=models.CASCADE, null=True, blank=True, related_name="task_scores"
    )
    task = models.ForeignKey("task_catalog.Task", on_delete=models.CASCADE, related_name="+")
    evaluation = models.ForeignKey(
        "evaluator.Evaluation", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    hardware = models.CharField(max_length=200, blank=True, db_index=True)
    status = models.CharField(max_length=16, help_text="The latest finished verdict, or queued.")
    counts = models.BooleanField(
        default=False, help_text="Correct for scoring: correct, or flagged and cleared."
    )
    speedup = models.FloatField(null=True, blank=True, help_text="Task geomean; null untimed.")
    sol_fraction = models.FloatField(null=True, blank=True)
    implementation = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["run", "task"]

    def __str__(self) -> str:
        return f"score of submission #{self.submission_id}"


class RunScore(BaseModel):
    """A run's scores, materialised for the leaderboard (refreshed with every change)."""

    run = models.OneToOneField("runs.Run", on_delete=models.CASCADE, related_name="score")
    hardware = models.CharField(max_length=200, blank=True, db_index=True)
    timed = models.BooleanField(default=False)
    untimed_reason = models.CharField(max_length=300, blank=True)
    tasks_total = models.PositiveIntegerField(default=0)
    tasks_correct = models.PositiveIntegerField(default=0)
    correctness_rate = models.FloatField(null=True, blank=True)
    performance_score = models.FloatField(null=True, blank=True)
    geomean_speedup = models.FloatField(null=True, blank=True)
    geomean_n = models.PositiveIntegerField(default=0)
    fast_p = models.JSONField(null=True, blank=True, help_text="[[p, fraction], …].")
    implementation = models.JSONField(default=dict, blank=True)
    discovery = models.JSONField(default=dict, blank=True)
    turns = models.PositiveIntegerField(null=True, blank=True)
    tokens = models.PositiveBigIntegerField(null=True, blank=True)
    tasks = models.JSONField(
        default=list,
        blank=True,
        help_text="Per task of the run's catalog version: the parts every score is built "
        "from (scoring.formulas.TaskParts), for the intervals over repeated runs.",
    )
    kernels = models.PositiveIntegerField(default=0, help_text="Kernels the run submitted.")
    pending = models.PositiveIntegerField(
        default=0, help_text="Kernels whose evaluation has not finished yet."
    )
    refreshed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-refreshed_at"]

    def __str__(self) -> str:
        return f"scores of run #{self.run_id}"


class CatalogVersion(models.Model):
    """The tasks of one catalog version (`Run.catalog_version`, a digest of the task
    versions), pinned when a run is made for it: a run is scored over these tasks,
    whatever the catalog holds later."""

    digest = models.CharField(max_length=16, unique=True)
    tasks = models.JSONField(default=list, help_text="The tasks' slugs.")
    pinned_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-pinned_at"]

    def __str__(self) -> str:
        return f"catalog {self.digest} ({len(self.tasks)} tasks)"


class ScoresVersion(models.Model):
    """One row whose `stamp` changes with every write a ranking, table or chart can show
    (scores, verdicts, visibility, moderation, the catalog): pages cache what they
    render under it (leaderboard.caching), so a cached table is never older than the
    data. A random stamp, not a counter: a rolled-back or re-created row never brings
    back a stamp that named other data."""

    stamp = models.CharField(max_length=32)

    def __str__(self) -> str:
        return f"scores version {self.stamp}"
