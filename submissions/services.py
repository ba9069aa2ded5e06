"""Writes of the submissions app: accepting a kernel file and queueing its evaluation."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import PurePosixPath, PureWindowsPath
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from accounts.models import User
from core.sizes import too_large_message
from core.unavailable import ServiceUnavailable
from evaluator.services import broker_ping, evaluation_create
from submissions.models import Submission
from submissions.quotas import quota_enforce, quota_lock
from task_catalog.models import Task

if TYPE_CHECKING:
    from runs.models import Run

DEFAULT_FILENAME = "kernel.py"
MODEL_CLASS = "ModelNew"
_FILENAME_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


MAX_LINE_CHARS = 10_000
# Archives and compressed files someone may pick instead of the kernel (magic numbers).
_ARCHIVES = (
    (b"PK\x03\x04", "zip archive"),
    (b"PK\x05\x06", "zip archive"),
    (b"\x1f\x8b", "gzip file"),
    (b"BZh", "bzip2 file"),
    (b"\xfd7zXZ\x00", "xz file"),
    (b"7z\xbc\xaf\x27\x1c", "7-zip archive"),
)
# C0 controls but tab, newline, form feed and carriage return: no source file holds them.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")


def submission_source_clean(source: str | bytes, *, size: int | None = None) -> str:
    """The submitted text, or a ValidationError saying why it cannot be a text file
    we store (size, binary content, encoding, emptiness, a line no editor shows).

    `size`: the whole file's size when `source` is only its first bytes (a door reads
    one byte past the limit, never a 50 MB upload into memory)."""
    limit = settings.D2K_MAX_UPLOAD_BYTES
    raw = source if isinstance(source, bytes) else source.encode("utf-8", "surrogatepass")
    size = max(size or 0, len(raw))
    if size > limit:
        raise ValidationError(
            too_large_message(what="The file", size=size, limit=limit), code="too_large"
        )
    for signature, kind in _ARCHIVES:
        if raw.startswith(signature):
            raise ValidationError(
                f"The file is a {kind}, not a Python file: upload the kernel's .py file "
                "(a run's zip bundle is uploaded on /runs/new/ or with `d2k submit-run`).",
                code="binary",
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
    control = _CONTROL.search(text)
    if control is not None:
        where = text.count("\n", 0, control.start()) + 1
        raise ValidationError(
            f"The file is not a Python file: it holds the control character "
            f"U+{ord(control.group()):04X} on line {where}.",
            code="binary",
        )
    if not text.strip():
        raise ValidationError("The file is empty.", code="empty")
    for number, line in enumerate(text.splitlines(), start=1):
        if len(line) > MAX_LINE_CHARS:
            raise ValidationError(
                f"Line {number} is {len(line):,} characters long; a kernel's lines may be "
                f"at most {MAX_LINE_CHARS:,} (is it minified or generated data?).",
                code="line_too_long",
            )
    return text


def submission_structure_check(text: str) -> None:
    """A ValidationError when `text` cannot be a kernel file: a syntax error (with its
    line) or no `ModelNew` at module level. Checked in well under a second at a
    single upload; a run's kernels skip it, since an agent's broken final kernel is a
    result of the run (`compile_error`), not a reason to refuse the bundle."""
    try:
        module = ast.parse(text, filename="kernel.py")
    except SyntaxError as exc:
        where = f"line {exc.lineno}" + (f", column {exc.offset}" if exc.offset else "")
        raise ValidationError(
            f"Python syntax error at {where}: {exc.msg}.", code="syntax_error"
        ) from exc
    except (ValueError, RecursionError, MemoryError) as exc:  # e.g. nesting too deep
        raise ValidationError(
            f"The file cannot be parsed as Python: {exc}.", code="syntax_error"
        ) from exc
    if not any(_defines_model_new(node) for node in module.body):
        raise ValidationError(
            "The file defines no `ModelNew` at module level: a submission is a class "
            "`ModelNew(nn.Module)` with the task's constructor and forward signature.",
            code="no_model_new",
        )


def _defines_model_new(node: ast.stmt) -> bool:
    if isinstance(node, ast.ClassDef):
        return node.name == MODEL_CLASS
    if isinstance(node, ast.Assign | ast.AnnAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return any(isinstance(t, ast.Name) and t.id == MODEL_CLASS for t in targets)
    if isinstance(node, ast.ImportFrom | ast.Import):
        return any((alias.asname or alias.name) == MODEL_CLASS for alias in node.names)
    if isinstance(node, ast.If | ast.Try):
        # `if HAS_CUDA: class ModelNew … else: class ModelNew …`
        branches = [node.body, node.orelse]
        if isinstance(node, ast.Try):
            branches += [node.finalbody, *(h.body for h in node.handlers)]
        return any(_defines_model_new(child) for branch in branches for child in branch)
    return False


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
    is_public: bool = False,
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

    _queue_check()
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


def _queue_check() -> None:
    try:
        broker_ping()
    except Exception as exc:
        raise ServiceUnavailable(
            "The evaluation queue is unavailable right now, so nothing was stored. "
            "Try again in a minute."
        ) from exc


@dataclass(frozen=True)
class Upload:
    submission: Submission
    created: bool


def submission_upload(
    *,
    owner: User,
    task: Task | str,
    source: str | bytes,
    filename: str | None = DEFAULT_FILENAME,
    is_public: bool = False,
    size: int | None = None,
) -> Upload:
    """An upload of one kernel through a door (page or API): checked for what cannot be
    a kernel first, and the same file for the same task version by the same owner is
    the submission already stored (`created` False), never a second evaluation.
    Raises QuotaExceeded past the owner's quotas (submissions.quotas); then nothing is
    stored."""
    task = _task_resolve(task)
    try:
        text = submission_source_clean(source, size=size)
        submission_structure_check(text)
    except ValidationError as exc:
        raise ValidationError({"source": exc.messages}, code=exc.code) from exc
    existing = (
        Submission.objects.filter(
            run__isnull=True,
            owner=owner,
            task=task,
            task_version_id=task.current_version_id,
            sha256=Submission.digest(text),
        )
        .order_by("created_at", "pk")
        .first()
    )
    if existing is not None:
        return Upload(submission=existing, created=False)
    with transaction.atomic():
        quota_lock(owner=owner)
        submission = submission_create(
            owner=owner, task=task, source=text, filename=filename, is_public=is_public
        )
        quota_enforce(owner=owner, evaluations=1)
    return Upload(submission=submission, created=True)


def submission_visibility_set(*, submission: Submission, user: User, is_public: bool) -> Submission:
    """Publish or unpublish a submission: its owner (or staff) only; a kernel of a run
    follows its run."""
    if not (user.is_staff or submission.owner_id == user.pk):
        raise PermissionDenied("Only the owner publishes or unpublishes a submission.")
    if submission.run_id is not None:
        raise ValidationError(
            {"is_public": f"This kernel belongs to run #{submission.run_id}: publish the run."}
        )
    submission.is_public = is_public
    submission.save(update_fields=["is_public", "updated_at"])
    return submission
