"""Agent runs: one campaign over the catalog, its traces and its proposals."""

from django.conf import settings
from django.db import models

from core.models import BaseModel
from moderation.models import ModerationState

DEFAULT_TURN_BUDGET = 350


class RunState(models.TextChoices):
    """Where a run stands (documented in docs/run-format.md)."""

    RECEIVING = "receiving"
    VALIDATING = "validating"
    REJECTED = "rejected"
    EVALUATING = "evaluating"
    COMPLETE = "complete"


# A run in these states is not (or not yet) an accepted run: it has no kernels, traces or
# proposals, its manifest fields are blank, and nothing derives its state from evaluations.
UNACCEPTED_STATES = frozenset({RunState.RECEIVING, RunState.VALIDATING, RunState.REJECTED})


class Run(BaseModel):
    """One agent campaign over the catalog's tasks under one condition."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="runs"
    )
    model = models.CharField(max_length=200, help_text="The LLM, e.g. `gpt-5-2026-08`.")
    agent = models.CharField(max_length=200, help_text="The agent harness.")
    levels = models.JSONField(default=list, blank=True, help_text='Guidance given: [] or "L1"…')
    condition = models.CharField(max_length=16, help_text="`none`, or the levels joined by +.")
    turn_budget = models.PositiveIntegerField(default=DEFAULT_TURN_BUDGET)
    hardware = models.CharField(max_length=200)
    catalog_version = models.CharField(
        max_length=16, help_text="Digest of the catalog's task versions at upload."
    )
    notes = models.TextField(blank=True)
    guidance_versions = models.JSONField(
        default=dict,
        blank=True,
        help_text='The guidance each task was given: {task slug: {"sha256", "number", "from"}}, '
        '"from" being "prompt" or "manifest" (the manifest\'s prompt_sha256 or guidance_sha256) '
        'or "upload" (current at upload).',
    )
    is_public = models.BooleanField(
        default=False, help_text="Private (owner and staff only) until the owner publishes it."
    )
    moderation = models.CharField(
        max_length=10, choices=ModerationState.choices, default=ModerationState.NONE, blank=True
    )
    is_example = models.BooleanField(
        default=False, help_text="Example data written by hand, not an agent's output."
    )
    state = models.CharField(max_length=12, choices=RunState.choices, default=RunState.RECEIVING)
    finished_at = models.DateTimeField(null=True, blank=True)
    # A bundle validated in the background (runs.services.run_bundle_receive): the stored
    # zip while the run is validating, and what the upload asked for once it is accepted.
    bundle_file = models.FileField(upload_to="runs/bundles/", max_length=300, blank=True)
    bundle_bytes = models.PositiveBigIntegerField(
        default=0, help_text="Size of the stored zip while it waits for validation."
    )
    upload_options = models.JSONField(
        default=dict, blank=True, help_text='{"is_public", "confirm_redaction"} of the upload.'
    )
    errors = models.JSONField(
        default=list,
        blank=True,
        help_text='A rejected bundle\'s problems: [{"file", "line", "message"}].',
    )
    pair = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["owner", "model", "agent", "catalog_version"])]

    def __str__(self) -> str:
        return f"run #{self.pk} {self.model} · {self.agent} · {self.condition}"

    @property
    def is_guided(self) -> bool:
        return bool(self.levels)


class Trace(BaseModel):
    """One task's agent log: the raw JSONL stored gzip-compressed in page-sized members,
    and the summary computed once at upload."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="traces")
    task = models.ForeignKey("task_catalog.Task", on_delete=models.PROTECT, related_name="+")
    file = models.FileField(upload_to="runs/traces/", max_length=300)
    raw_bytes = models.PositiveBigIntegerField(default=0)
    stored_bytes = models.PositiveBigIntegerField(default=0)
    # One entry per gzip member: {"offset", "length", "first_line", "lines", "types"}.
    pages = models.JSONField(default=list, blank=True)
    event_count = models.PositiveIntegerField(default=0)
    event_types = models.JSONField(default=dict, blank=True, help_text="{type: count}.")
    problems = models.JSONField(
        default=list, blank=True, help_text='The first problems: [{"line", "message"}].'
    )
    problem_count = models.PositiveIntegerField(
        default=0, help_text="Lines that break the schema, all of them (`problems` keeps 100)."
    )
    turns_used = models.PositiveIntegerField(null=True, blank=True)
    tool_calls = models.JSONField(default=dict, blank=True, help_text="{tool name: calls}.")
    tokens_in = models.PositiveBigIntegerField(default=0)
    tokens_out = models.PositiveBigIntegerField(default=0)
    wall_time_s = models.FloatField(null=True, blank=True)
    attempts_before_final = models.PositiveIntegerField(default=0)
    submit_lines = models.JSONField(default=list, blank=True, help_text="Lines of submits.")
    final_submit_turn = models.PositiveIntegerField(null=True, blank=True)
    final_submit_line = models.PositiveIntegerField(null=True, blank=True)
    end_reason = models.CharField(max_length=100, blank=True)
    # The public copy when the trace holds secrets (runs.scanners): the same lines with
    # each secret replaced, stored and paged like `file`; blank when nothing was replaced.
    redacted_file = models.FileField(upload_to="runs/traces/", max_length=300, blank=True)
    redacted_pages = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["run", "task__position", "task__slug"]
        constraints = [
            models.UniqueConstraint(fields=["run", "task"], name="trace_unique_run_task"),
        ]

    def __str__(self) -> str:
        return f"trace of {self.task_id} in run #{self.run_id}"

    @property
    def submit_count(self) -> int:
        return len(self.submit_lines)


class Proposal(BaseModel):
    """The design an agent proposed for a task before coding (markdown, rendered safely)."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="proposals")
    task = models.ForeignKey("task_catalog.Task", on_delete=models.PROTECT, related_name="+")
    text = models.TextField()

    class Meta:
        ordering = ["run", "task__position", "task__slug"]
        constraints = [
            models.UniqueConstraint(fields=["run", "task"], name="proposal_unique_run_task"),
        ]

    def __str__(self) -> str:
        return f"proposal for {self.task_id} in run #{self.run_id}"


class ScanHit(BaseModel):
    """One scanner rule's nomination in a trace or a proposal (runs.scanners): the line
    (the event, for a trace), its type and a short quote, secrets masked. A hit never
    changes a verdict by itself; integrity hits put their cell up for review."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="scan_hits")
    task = models.ForeignKey("task_catalog.Task", on_delete=models.PROTECT, related_name="+")
    trace = models.ForeignKey(
        Trace, on_delete=models.CASCADE, null=True, blank=True, related_name="scan_hits"
    )
    proposal = models.ForeignKey(
        Proposal, on_delete=models.CASCADE, null=True, blank=True, related_name="scan_hits"
    )
    rule = models.CharField(max_length=32, db_index=True)
    line = models.PositiveIntegerField(null=True, blank=True)
    event_type = models.CharField(max_length=64, blank=True)
    quote = models.CharField(max_length=300)

    class Meta:
        ordering = ["run", "task__position", "task__slug", "trace", "line", "pk"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(trace__isnull=False, proposal__isnull=True)
                | models.Q(trace__isnull=True, proposal__isnull=False),
                name="scan_hit_one_source",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.rule} at line {self.line} of {self.task_id} in run #{self.run_id}"

    @property
    def file(self) -> str:
        """The bundle file the hit is in."""
        kind = "traces" if self.trace_id else "proposals"
        return f"{kind}/{self.task.slug}.{'jsonl' if self.trace_id else 'md'}"
