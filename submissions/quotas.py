"""Per-owner quotas on uploads, enforced in the transaction that stores the upload.

Three limits (docs/security.md): uploads in the last 24 hours, evaluations waiting in
the queue, and bytes stored (kernel sources, compressed traces, and run bundles waiting
for their validation). A door calls
`quota_lock` first thing in its transaction and `quota_enforce` after its inserts:
the lock (the owner's user row, `SELECT … FOR UPDATE` on PostgreSQL; SQLite's
IMMEDIATE transactions let one writer in at a time) makes uploads of one owner take
turns, so each counts every upload committed before it, its own rows included, and a
burst of parallel uploads stops exactly at the limit. A refusal rolls the whole
upload back. Staff are exempt, and infrastructure failures never count against a
user (a `worker_error` upload, an evaluation queued again after one).
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db.models import Q, Sum
from django.db.models.functions import Length
from django.utils import timezone

from accounts.models import User
from core.quotas import QuotaExceeded, quota_duration
from evaluator.models import Evaluation
from runs.models import Run, RunState, Trace
from submissions.models import Submission

WINDOW = timedelta(days=1)
# Queued evaluations drain at the workers' pace: a minute is the honest guess.
QUEUE_RETRY_AFTER_S = 60
# Stored bytes go down only when the owner deletes something: a day is the honest answer.
STORAGE_RETRY_AFTER_S = 24 * 3600


def quota_lock(*, owner: User) -> None:
    """Make the owner's uploads take turns until the current transaction ends."""
    if not owner.is_staff:
        list(User.objects.select_for_update().filter(pk=owner.pk).values_list("pk", flat=True))


def _upload_times(owner: User) -> list:
    since = timezone.now() - WINDOW
    lone = (
        Submission.objects.filter(owner=owner, run__isnull=True, created_at__gte=since)
        .exclude(evaluations__status="worker_error")
        .values_list("created_at", flat=True)
    )
    # A bundle rejected in the background counts as little as one refused at once (400).
    runs = (
        Run.objects.filter(owner=owner, created_at__gte=since)
        .exclude(state=RunState.REJECTED)
        .values_list("created_at", flat=True)
    )
    return sorted([*lone, *runs])


def _waiting(owner: User) -> int:
    return (
        Evaluation.objects.filter(submission__owner=owner, status__in=("queued", "running"))
        # Queued again after a worker failure: our fault, not the user's.
        .exclude(Q(status="queued") & Q(attempts__gt=0))
        .count()
    )


def owner_stored_bytes(*, owner: User) -> int:
    """What the owner's uploads take on the server: kernel sources, stored traces, and
    the zips of run bundles waiting for their validation."""
    sources = Submission.objects.filter(owner=owner).aggregate(n=Sum(Length("source")))["n"]
    traces = Trace.objects.filter(run__owner=owner).aggregate(n=Sum("stored_bytes"))["n"]
    waiting = Run.objects.filter(owner=owner).aggregate(n=Sum("bundle_bytes"))["n"]
    return (sources or 0) + (traces or 0) + (waiting or 0)


def quota_enforce(*, owner: User, evaluations: int) -> None:
    """Raise QuotaExceeded if the owner is over a quota with the upload just stored in
    this transaction (which queued `evaluations` evaluations); call after quota_lock."""
    if owner.is_staff:
        return
    per_day = settings.D2K_QUOTA_UPLOADS_PER_DAY
    uploads = _upload_times(owner)
    if len(uploads) > per_day:
        oldest = uploads[len(uploads) - 1 - per_day]
        wait = (oldest + WINDOW - timezone.now()).total_seconds()
        raise QuotaExceeded(
            f"You uploaded {len(uploads) - 1} times in the last 24 hours; the limit is "
            f"{per_day}. Try again in {quota_duration(wait)}.",
            retry_after_s=int(wait) + 1,
        )
    limit = settings.D2K_QUOTA_QUEUED_EVALUATIONS
    waiting = _waiting(owner)
    if waiting > limit:
        raise QuotaExceeded(
            f"You have {waiting - evaluations} evaluations waiting and this upload adds "
            f"{evaluations}; at most {limit} may wait at once. Try again once some have "
            "finished.",
            retry_after_s=QUEUE_RETRY_AFTER_S,
        )
    stored_limit = settings.D2K_QUOTA_STORED_BYTES
    stored = owner_stored_bytes(owner=owner)
    if stored > stored_limit:
        raise QuotaExceeded(
            f"With this upload your kernels and traces would take {stored:,} bytes; the "
            f"limit is {stored_limit:,} bytes. Ask the portal's staff for more room.",
            retry_after_s=STORAGE_RETRY_AFTER_S,
        )
