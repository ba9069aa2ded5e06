"""Importing the expert implementations' GPU verdicts (docs/baselines.json) as results.

`bench/gpu_check.py experts` runs every catalog expert through the real evaluator on
a GPU and writes {task_slug: verdict}. Each verdict becomes one public Submission of
the task version's expert source, owned by the inactive system user `d2k-experts`,
with one Evaluation stored by the worker's own store function: the portal shows
expert numbers exactly as it shows anyone's.
"""

from __future__ import annotations

import hashlib
import json
import statistics
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction

from accounts.models import User
from evaluator.harness.verdict import Verdict, environment_gpu
from evaluator.models import EXPERT_USERNAME, Evaluation, EvaluationStatus
from evaluator.services.evaluations import evaluation_create, evaluation_verdict_write
from evaluator.services.jobs import evaluation_enqueue
from evaluator.services.runner import WorkerError, _verdict_parse
from submissions.models import Submission
from task_catalog.models import Task, TaskVersion, Workload

EXPERT_FILENAME = "expert.py"
# Evaluation.worker of an imported verdict: where it came from, and its content hash.
WORKER_PREFIX = "import sha256:"


class BaselineImportError(ValueError):
    """The file holds a verdict the portal must not show (not a GPU run, or unreadable)."""


@dataclass(frozen=True)
class BaselineLine:
    slug: str
    outcome: str  # created | unchanged | unknown task | skipped
    detail: str = ""
    evaluation_id: int | None = None

    def __str__(self) -> str:
        where = f" (evaluation #{self.evaluation_id})" if self.evaluation_id else ""
        return f"{self.slug}: {self.outcome}{where}{': ' if self.detail else ''}{self.detail}"


@dataclass(frozen=True)
class BaselineImportReport:
    source_label: str
    lines: list[BaselineLine] = field(default_factory=list)

    def count(self, outcome: str) -> int:
        return sum(1 for line in self.lines if line.outcome == outcome)


def baseline_import(*, data: dict[str, Any], source_label: str) -> BaselineImportReport:
    """Store each verdict of `data` ({task_slug: verdict}) as the expert's result.

    Every verdict is checked before anything is written: one that is not a cuda-mode
    verdict naming its GPU raises BaselineImportError and nothing is imported.
    Unknown slugs, tasks without a current version and verdicts whose workloads are
    not the current version's are reported and skipped. Importing the same verdict
    for the same task version and expert source again creates nothing.
    """
    if not isinstance(data, dict):
        raise BaselineImportError(
            f"{source_label} is not a JSON object of task slug -> verdict "
            "(as `bench/gpu_check.py experts` writes it)."
        )
    verdicts = {slug: _verdict_checked(slug, raw) for slug, raw in data.items()}
    tasks = Task.objects.filter(slug__in=list(verdicts)).select_related("current_version")
    tasks_by_slug = {task.slug: task for task in tasks}
    lines = []
    expert: User | None = None
    for slug, (verdict, digest) in verdicts.items():
        task = tasks_by_slug.get(slug)
        if task is None:
            lines.append(BaselineLine(slug, "unknown task", "no such task in the catalog"))
            continue
        if task.current_version is None:
            lines.append(BaselineLine(slug, "skipped", "the task has no current version"))
            continue
        mismatch = _version_mismatch(version=task.current_version, verdict=verdict)
        if mismatch:
            lines.append(BaselineLine(slug, "skipped", mismatch))
            continue
        expert = expert or _expert_user()
        lines.append(
            _baseline_store(
                version=task.current_version,
                verdict=verdict,
                digest=digest,
                expert=expert,
                source_label=source_label,
            )
        )
    return BaselineImportReport(source_label=source_label, lines=lines)


def _verdict_checked(slug: str, raw: Any) -> tuple[Verdict, str]:
    if not isinstance(raw, dict):
        raise BaselineImportError(f"The entry for {slug!r} is not a verdict object.")
    mode = raw.get("mode")
    if mode != "cuda":
        raise BaselineImportError(
            f"The verdict for {slug!r} was produced in {mode or 'no'} mode, not on a GPU "
            "(cuda mode): the portal shows only real GPU numbers."
        )
    if not environment_gpu(raw.get("environment")):
        raise BaselineImportError(
            f"The verdict for {slug!r} does not name the GPU it ran on "
            "(environment.gpu is missing): the portal shows GPU numbers only with their GPU."
        )
    if raw.get("task") and raw["task"] != slug:
        raise BaselineImportError(
            f"The verdict filed under {slug!r} is a verdict for task {raw['task']!r}."
        )
    try:
        verdict = _verdict_parse(json.dumps(raw))
    except WorkerError as exc:
        raise BaselineImportError(f"The verdict for {slug!r} is not readable: {exc}") from exc
    canonical = json.dumps(raw, sort_keys=True, separators=(",", ":"), default=str)
    return verdict, hashlib.sha256(canonical.encode()).hexdigest()


def _version_mismatch(*, version: TaskVersion, verdict: Verdict) -> str:
    # A verdict is tied to the version that produced it: a file measured before the
    # measured content changed must not be filed under the new version. Verdicts
    # name the hash of what they measured; older ones are matched on workloads.
    if verdict.task_hash and verdict.task_hash != version.content_hash:
        return (
            f"it measured other content than v{version.number} (task hash "
            f"{verdict.task_hash[:12]}, the version's is {version.content_hash[:12]}): "
            "re-measure the expert on a GPU"
        )
    expected = set(
        version.workloads.exclude(role=Workload.Role.CHECK).values_list("name", flat=True)
    )
    got = {result.name for result in verdict.workloads}
    if got == expected:
        return ""
    return (
        f"its workloads are not those of v{version.number} "
        f"(missing {sorted(expected - got)}, unknown {sorted(got - expected)})"
    )


def _expert_user() -> User:
    user_model = get_user_model()
    user = user_model.objects.filter(**{user_model.USERNAME_FIELD: EXPERT_USERNAME}).first()
    if user is None:
        user = user_model(**{user_model.USERNAME_FIELD: EXPERT_USERNAME}, is_active=False)
        user.set_unusable_password()
        user.full_clean()
        user.save()
    return user


def _baseline_store(
    *,
    version: TaskVersion,
    verdict: Verdict,
    digest: str,
    expert: User,
    source_label: str,
) -> BaselineLine:
    slug = version.task.slug
    with transaction.atomic():
        submission = _expert_submission(version=version, expert=expert)
        existing = Evaluation.objects.filter(
            submission=submission, worker__startswith=f"{WORKER_PREFIX}{digest}"
        ).first()
        if existing is not None:
            return BaselineLine(slug, "unchanged", _summary(verdict), existing.pk)
        evaluation = evaluation_create(submission=submission, enqueue=False)
        evaluation.worker = f"{WORKER_PREFIX}{digest} {source_label}"[:200]
        evaluation_verdict_write(evaluation=evaluation, verdict=verdict)
    return BaselineLine(slug, "created", _summary(verdict), evaluation.pk)


def _expert_submission(*, version: TaskVersion, expert: User) -> Submission:
    """The public submission of the version's expert source (made on first use)."""
    source = version.expert_source
    submission = Submission.objects.filter(
        owner=expert, task_version=version, sha256=Submission.digest(source)
    ).first()
    if submission is None:
        submission = Submission(
            owner=expert,
            task=version.task,
            task_version=version,
            filename=EXPERT_FILENAME,
            source=source,
            sha256=Submission.digest(source),
            is_public=True,
        )
        submission.full_clean()
        submission.save()
    return submission


def expert_remeasure_queue(*, task: Task, hardware: str) -> BaselineLine:
    """Queue the expert implementation of the task's current version for an evaluation by
    the workers of the `hardware` pool (its new baseline there); an evaluation of it
    already queued or running on that pool is left to finish, not doubled."""
    version = TaskVersion.objects.filter(pk=task.current_version_id).first()  # type: ignore[misc]
    if version is None or not version.expert_source.strip():
        return BaselineLine(task.slug, "skipped", "the current version has no expert.py")
    with transaction.atomic():
        submission = _expert_submission(version=version, expert=_expert_user())
        waiting = Evaluation.objects.filter(
            submission=submission,
            target_hardware=hardware,
            status__in=[EvaluationStatus.QUEUED, EvaluationStatus.RUNNING],
        ).first()
        if waiting is not None:
            return BaselineLine(
                task.slug, "already queued", f"v{version.number} on {hardware}", waiting.pk
            )
        evaluation = evaluation_create(submission=submission, enqueue=False)
        evaluation.target_hardware = hardware
        evaluation.save(update_fields=["target_hardware", "updated_at"])
        evaluation_enqueue(evaluation_id=evaluation.pk, hardware=hardware)
    return BaselineLine(task.slug, "queued", f"v{version.number} on {hardware}", evaluation.pk)


def _summary(verdict: Verdict) -> str:
    speedups = [
        r.speedup
        for r in verdict.workloads
        if r.role == Workload.Role.TIMED and r.speedup is not None and r.speedup > 0
    ]
    gpu = environment_gpu(verdict.environment)
    if not speedups:
        return f"{verdict.status} on {gpu}, no timed workload"
    return (
        f"{verdict.status} on {gpu}, geomean speedup "
        f"{statistics.geometric_mean(speedups):.2f}x over {len(speedups)} timed workloads"
    )
