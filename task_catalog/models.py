"""The task catalog: tasks, their measured versions, workloads, guidance, properties.

What is *measured* (reference, tolerances, forbidden ops, workloads) lives on
`TaskVersion` and never changes once a result points at it: an edit makes a new
version. What is *read* (statement, guidance, design properties) lives on `Task`;
guidance and design properties are the benchmark's treatment variable, so every
change to them is also kept as a `GuidanceVersion` (a snapshot with its hash).
"""

from django.conf import settings
from django.db import models
from django.db.models import Q

from core.models import BaseModel
from taskformat.spec import COMPUTE_DTYPES, DEFAULT_COMPUTE_DTYPE, WorkloadRole
from taskformat.spec import Level as SpecLevel

from .baseline_note import baseline_note


class Level(models.TextChoices):
    """The guidance levels (taskformat.spec.Level's values), labelled."""

    L1 = SpecLevel.L1.value, "L1 · algorithmic"
    L2 = SpecLevel.L2.value, "L2 · dataflow"
    L3 = SpecLevel.L3.value, "L3 · low-level"


class Task(BaseModel):
    slug = models.SlugField(max_length=64, unique=True)
    title = models.CharField(max_length=200)
    category = models.CharField(max_length=64, db_index=True)
    statement = models.TextField(help_text="Markdown.")
    position = models.PositiveIntegerField(default=0, help_text="Order in the catalog list.")
    current_version = models.ForeignKey(
        "TaskVersion",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
    )

    class Meta:
        ordering = ["position", "slug"]

    def __str__(self) -> str:
        return self.slug


class TaskVersion(BaseModel):
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    content_hash = models.CharField(max_length=64)
    reference_source = models.TextField()
    expert_source = models.TextField(blank=True)
    tolerances = models.JSONField(help_text='{"default": {"atol":…, "rtol":…, "rel_l2":…}, …}')
    forbidden_ops = models.JSONField(default=list, blank=True)
    inplace = models.BooleanField(default=False)
    seeds = models.PositiveSmallIntegerField(default=3)
    # Optional measured content (docs/task-format.md): the baseline speedups
    # are measured against, and aten ops beyond glue the task allows.
    baseline_source = models.TextField(blank=True, default="")
    allowed_ops = models.JSONField(default=list, blank=True)
    # How the hidden workloads are drawn (task.toml's `hidden` table), never the
    # workloads themselves: each deployment draws them from its own secret.
    hidden_draws = models.JSONField(
        default=dict,
        blank=True,
        help_text='{"cuda": [{"count": 1, "params": {…}}], "interpret": […]} '
        "(docs/task-format.md, Hidden workloads)",
    )

    class Meta:
        ordering = ["task", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["task", "number"], name="taskversion_unique_number"),
            models.UniqueConstraint(
                fields=["task", "content_hash"], name="taskversion_unique_hash"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.task_id and self.task.slug} v{self.number}"

    @property
    def baseline_note(self) -> str:
        """What baseline.py runs and why: its docstring's summary and first paragraph."""
        return baseline_note(self.baseline_source) if self.baseline_source else ""

    @property
    def timed_against(self) -> str:
        """The file submissions are timed against: baseline.py where the version has one."""
        return "baseline.py" if self.baseline_source else "reference.py"


class Workload(models.Model):
    class Role(models.TextChoices):
        """taskformat.spec.WorkloadRole's values, labelled."""

        TIMED = WorkloadRole.TIMED.value, "timed (public)"
        UNTIMED = WorkloadRole.UNTIMED.value, "untimed (correctness only)"
        CHECK = WorkloadRole.CHECK.value, "check (CPU interpreter)"

    version = models.ForeignKey(TaskVersion, on_delete=models.CASCADE, related_name="workloads")
    name = models.CharField(max_length=100)
    role = models.CharField(max_length=8, choices=Role.choices)
    hidden = models.BooleanField(default=False)
    params = models.JSONField()
    flops = models.FloatField(default=0)
    bytes = models.FloatField(default=0)
    flops_formula = models.CharField(max_length=200, blank=True)
    bytes_formula = models.CharField(max_length=200, blank=True)
    # The matrix unit whose measured rate its FLOPs count at (taskformat.spec.COMPUTE_DTYPES).
    compute_dtype = models.CharField(
        max_length=8, choices=[(d, d) for d in COMPUTE_DTYPES], default=DEFAULT_COMPUTE_DTYPE
    )
    position = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["version", "position"]
        constraints = [
            models.UniqueConstraint(fields=["version", "name"], name="workload_unique_name"),
            models.CheckConstraint(
                condition=~Q(role="untimed") | Q(hidden=True),
                name="workload_untimed_role_is_hidden",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def gflop(self) -> float:
        return self.flops / 1e9

    @property
    def megabytes(self) -> float:
        return self.bytes / 1e6


class Guidance(BaseModel):
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="guidance")
    level = models.CharField(max_length=2, choices=Level.choices)
    text = models.TextField(help_text="Markdown.")
    depends_on = models.JSONField(default=list, blank=True, help_text='Lower levels, e.g. ["L1"].')

    class Meta:
        ordering = ["task", "level"]
        verbose_name_plural = "guidance"
        constraints = [
            models.UniqueConstraint(fields=["task", "level"], name="guidance_unique_level"),
        ]

    def __str__(self) -> str:
        return f"{self.task_id and self.task.slug} {self.level}"


class DesignProperty(BaseModel):
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="properties")
    key = models.SlugField(max_length=64)
    level = models.CharField(max_length=2, choices=Level.choices)
    title = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    weight = models.FloatField(default=1.0)
    depends_on = models.JSONField(default=list, blank=True, help_text="Keys of other properties.")
    detector = models.JSONField(default=dict, blank=True, help_text='{"kind": "manual"} or a check')
    counters = models.JSONField(
        null=True,
        blank=True,
        help_text='A hardware-counter rule, e.g. {"kind": "traffic", "max_ratio": 1.3}.',
    )
    position = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["task", "level", "position"]
        verbose_name_plural = "design properties"
        constraints = [
            models.UniqueConstraint(fields=["task", "key"], name="property_unique_key"),
            models.CheckConstraint(condition=Q(weight__gt=0), name="property_weight_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.task_id and self.task.slug}:{self.key}"


class GuidanceVersion(BaseModel):
    """One state of a task's guidance texts and design properties, kept for good.

    A snapshot is made whenever either changes, from the admin or from disk
    (`load_catalog`); `content_hash` is what a run records as the guidance it was
    given. The newest version is the task's current guidance.
    """

    class Source(models.TextChoices):
        ADMIN = "admin", "edited in the admin"
        DISK = "disk", "loaded from disk (load_catalog)"

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="guidance_versions")
    number = models.PositiveIntegerField()
    content_hash = models.CharField(max_length=64, db_index=True)
    # {"guidance": [{level, text, depends_on}], "properties": [{key, level, title, …}]}
    content = models.JSONField()
    source = models.CharField(max_length=8, choices=Source.choices)
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="The admin who saved it; empty for a load from disk.",
    )

    class Meta:
        ordering = ["task", "-number"]
        constraints = [
            models.UniqueConstraint(
                fields=["task", "number"], name="guidanceversion_unique_number"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.task_id and self.task.slug} guidance v{self.number}"

    @property
    def short_hash(self) -> str:
        return self.content_hash[:12]
