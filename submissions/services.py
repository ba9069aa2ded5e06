"""Writes of the submissions app: accepting a kernel file and queueing its evaluation."""

from __future__ import annotations

import re
from pathlib import PurePosixPath, PureWindowsPath
from typing import TYPE_CHECKING

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction

from evaluator.services import evaluation_create
from submissions.models import Submission
from task_catalog.models import Task

if TYPE_CHECKING:
    from runs.models import Run

DEFAULT_FILENAME = "kernel.py"
_FILENAME_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def submission_source_clean(source: str | bytes) -> str:
    """The submitted text, or a ValidationError saying why it cannot be a kernel file.

    A Python syntax error is deliberately *not* rejected here: the evaluator
    reports it as `compile_error` with its line, which is where users look.
    """
    limit = settings.D2K_MAX_UPLOAD_BYTES
    raw = source if isinstance(source, bytes) else source.encode("utf-8", "surrogatepass")
    if len(raw) > limit:
        raise ValidationError(
            f"The file is {len(raw):,} bytes; the limit is {limit:,} bytes.", code="too_large"
        )
    if b"\x00" in raw:
        raise ValidationError("The file looks binary; upload a Python source file.", code="binary")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValidationError(
            f"The file is not UTF-8 text (invalid byte at offset {exc.start}).", code="not_utf8"
        ) from exc
    text = text.removeprefix("\ufeff")
    if not text.strip():
        raise ValidationError("The file is empty.", code="empty")
    return text


def submission_filename_clean(filename: str | None) -> str:
    """A safe base name for display and for the evaluator's temp file (never a path)."""
    name = (filename or "").replace("\x00", "")
    name = PureWindowsPath(PurePosixPath(name).name).name
    name = _FILENAME_UNSAFE.sub("_", name).strip("._")[:200]
    if not name:
        return DEFAULT_FILENAME
    if not name.endswith(".py"):
        name = f"{name[:197]}.py"
    return name


def _task_resolve(task: Task | str | None) -> Task:
    if isinstance(task, Task):
        return task
    found = Task.objects.select_related("current_version").filter(slug=task or "").first()
    if found is None:
        raise ValidationError({"task": f"Unknown task {task!r}."}, code="unknown_task")
    return found


def submission_create(
    *,
    owner: User,
    task: Task | str,
    source: str | bytes,
    filename: str | None = DEFAULT_FILENAME,
    is_public: bool = True,
    run: Run | None = None,
) -> Submission:
    """Store a kernel file pinned to the task's current version and queue its evaluation.

    `task` is a Task or its slug. Raises ValidationError for unknown tasks and for
    empty, binary, non-UTF-8 or oversized files. `run`: the agent run it belongs to.
    """
    task = _task_resolve(task)
    if task.current_version_id is None:
        raise ValidationError(
            {"task": f"Task {task.slug!r} has no version loaded yet."}, code="no_version"
        )
    try:
        text = submission_source_clean(source)
    except ValidationError as exc:
        raise ValidationError({"source": exc.messages}, code=exc.code) from exc

    with transaction.atomic():
        submission = Submission(
            owner=owner,
            task=task,
            task_version_id=task.current_version_id,
            filename=submission_filename_clean(filename),
            source=text,
            sha256=Submission.digest(text),
            is_public=is_public,
            run=run,
        )
        submission.full_clean()
        submission.save()
        # Queued now, enqueued on commit (evaluator.services.evaluation_enqueue): the
        # worker gets the evaluation's primary key once the rows are visible to it.
        evaluation_create(submission=submission)
    return submission
