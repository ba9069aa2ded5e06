from django.conf import settings
from django.db import models
from django.db.models import Q

from core.models import BaseModel
from evaluator.harness.verdict import Status
from task_catalog.models import Workload
from taskformat.spec import Mode

# The owner of the expert baselines' evaluations (imported, never uploaded: see
# evaluator.services.baselines); the leaderboard shows them as the expert rows.
EXPERT_USERNAME = "d2k-experts"


class EvaluationStatus(models.TextChoices):
    """Queue states, then the harness's verdicts (documented in docs/evaluator.md); each
    verdict's value is the harness's own (evaluator.harness.verdict.Status)."""

    QUEUED = "queued"
    RUNNING = "running"
    CORRECT = Status.CORRECT.value
    INCORRECT = Status.INCORRECT.value
    FLAGGED = Status.FLAGGED.value
    COMPILE_ERROR = Status.COMPILE_ERROR.value
    RUNTIME_ERROR = Status.RUNTIME_ERROR.value
    TIMEOUT = Status.TIMEOUT.value
    OUT_OF_MEMORY = Status.OUT_OF_MEMORY.value
    WORKER_ERROR = Status.WORKER_ERROR.value


FINISHED_STATUSES = frozenset(EvaluationStatus) - {
    EvaluationStatus.QUEUED,
    EvaluationStatus.RUNNING,
}


class EvaluationMode(models.TextChoices):
    """Where an evaluation ran (docs/evaluator.md); each value is the harness's own
    (taskformat.spec.Mode). Blank until a worker has run it."""

    INTERPRET = Mode.INTERPRET.value, "interpret (Triton's CPU interpreter: correctness only)"
    CUDA = Mode.CUDA.value, "cuda (timed on a GPU)"


class Review(models.TextChoices):
    """Admin review of a flagged result."""

    NONE = "", "not needed"
    PENDING = "pending", "pending review"
    HACKED = "hacked", "confirmed hack (hidden from rankings)"
    CLEARED = "cleared", "cleared"


class Evaluation(BaseModel):
    submission = models.ForeignKey(
        "submissions.Submission", on_delete=models.CASCADE, related_name="evaluations"
    )
    status = models.CharField(
        max_length=16, choices=EvaluationStatus.choices, default=EvaluationStatus.QUEUED
    )
    mode = models.CharField(max_length=10, blank=True, choices=EvaluationMode.choices)
    message = models.TextField(blank=True)
    flags = models.JSONField(default=list, blank=True)
    environment = models.JSONField(default=dict, blank=True)
    log = models.TextField(blank=True)
    # What the submission's owner and the public see: the log up to the first hidden
    # workload (the harness cuts it), never a hidden workload's own output.
    public_log = models.TextField(blank=True)
    evaluator_version = models.CharField(max_length=32, blank=True)
    hardware = models.CharField(
        max_length=200,
        blank=True,
        db_index=True,
        help_text="The GPU the verdict was timed on; blank when untimed.",
    )
    target_hardware = models.CharField(
        max_length=200,
        blank=True,
        db_index=True,
        help_text="The worker pool that must run it (a GPU name); blank: the default pool.",
    )
    # The job: the row is the queue's truth, the broker message only a wake-up call
    # (docs/operations.md). `worker` is host:pid of the process holding the lease.
    worker = models.CharField(max_length=200, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    state_changed_at = models.DateTimeField(null=True, blank=True)
    enqueued_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    review = models.CharField(max_length=8, choices=Review.choices, default=Review.NONE, blank=True)
    review_note = models.TextField(blank=True)
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    reviewed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["status", "lease_expires_at"], name="evaluation_job_idx")]
        constraints = [
            models.CheckConstraint(
                condition=~Q(review="pending") | Q(status="flagged"),
                name="evaluation_pending_review_is_flagged",
            ),
        ]

    def __str__(self) -> str:
        return f"evaluation #{self.pk} ({self.status})"

    @property
    def is_finished(self) -> bool:
        return self.status in FINISHED_STATUSES


class WorkloadResult(models.Model):
    evaluation = models.ForeignKey(Evaluation, on_delete=models.CASCADE, related_name="results")
    name = models.CharField(max_length=100)
    role = models.CharField(max_length=8, choices=Workload.Role.choices)
    hidden = models.BooleanField(default=False)
    status = models.CharField(max_length=16, choices=EvaluationStatus.choices)
    message = models.TextField(blank=True)
    max_abs_err = models.FloatField(null=True, blank=True)
    rel_err = models.FloatField(null=True, blank=True)
    median_ms = models.FloatField(null=True, blank=True)
    ref_median_ms = models.FloatField(null=True, blank=True)
    speedup = models.FloatField(null=True, blank=True)
    achieved_tflops = models.FloatField(null=True, blank=True)
    achieved_tbps = models.FloatField(null=True, blank=True)
    sol_fraction = models.FloatField(null=True, blank=True)
    timing = models.JSONField(null=True, blank=True)
    # Hardware counters read on a timed workload of a correct cuda verdict:
    # {"dram_bytes", "min_bytes", "tensor_share", "tool"}; null when none were read.
    counters = models.JSONField(null=True, blank=True)
    position = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["evaluation", "position"]
        constraints = [
            models.UniqueConstraint(fields=["evaluation", "name"], name="result_unique_workload"),
        ]

    def __str__(self) -> str:
        return f"{self.name}: {self.status}"


class WorkerState(models.TextChoices):
    """Whether a worker can take work (documented in docs/operations.md)."""

    OK = "ok"
    # Its scratch folder's disk or quota is full (ENOSPC, EDQUOT).
    DISK_FULL = "disk_full"
    # Its scratch folder cannot be written for another reason (read-only, permissions).
    SCRATCH_UNWRITABLE = "scratch_unwritable"


class WorkerBeat(models.Model):
    """One evaluation worker as it last reported itself: which pool it serves, on what GPU,
    and whether it is backing off (its scratch folder could not be written).

    Written by the worker every reaper round; read by /healthz and the operations docs.
    """

    worker = models.CharField(max_length=200, unique=True, help_text="host:pid")
    hardware = models.CharField(max_length=200, blank=True, db_index=True)
    gpu_uuid = models.CharField(max_length=100, blank=True)
    queue = models.CharField(max_length=200)
    started_at = models.DateTimeField()
    seen_at = models.DateTimeField(db_index=True)
    state = models.CharField(max_length=20, choices=WorkerState.choices, default=WorkerState.OK)
    state_reason = models.TextField(blank=True, help_text="The error that set the state.")
    # The worker's current back-off: it takes no evaluation before `backoff_until`; the
    # delay doubles on each failure that follows a back-off closely (evaluator.services.backoff).
    backoff_s = models.FloatField(default=0)
    backoff_until = models.DateTimeField(null=True, blank=True)
    slots = models.PositiveSmallIntegerField(
        default=1, help_text="How many evaluations the worker runs at once."
    )

    class Meta:
        ordering = ["hardware", "-seen_at"]

    def __str__(self) -> str:
        return f"{self.worker} ({self.hardware or 'default pool'})"
