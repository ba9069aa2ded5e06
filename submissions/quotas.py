"""Per-user quotas on uploads: a day's uploads and the evaluations waiting in the queue.

Refusals name the wait: the API answers 429 with `Retry-After`, a page shows the
sentence. Staff are exempt, and infrastructure failures never count against a
user (a `worker_error` upload, an evaluation queued again after one).
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from accounts.models import User
from evaluator.models import Evaluation
from runs.models import Run
from submissions.models import Submission

WINDOW = timedelta(days=1)
# Queued evaluations drain at the workers' pace: a minute is the honest guess.
QUEUE_RETRY_AFTER_S = 60


class QuotaExceeded(Exception):
    def __init__(self, message: str, *, retry_after_s: int) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after_s = max(1, int(retry_after_s))


def _counted_uploads(user: User):
    since = timezone.now() - WINDOW
    lone = (
        Submission.objects.filter(owner=user, run__isnull=True, created_at__gte=since)
        .exclude(evaluations__status="worker_error")
        .values_list("created_at", flat=True)
    )
    runs = Run.objects.filter(owner=user, created_at__gte=since).values_list(
        "created_at", flat=True
    )
    return sorted([*lone, *runs])


def quota_check_upload(*, user: User, evaluations: int = 1) -> None:
    """Raise QuotaExceeded if `user` may not upload now one more item that queues
    `evaluations` evaluations."""
    if user.is_staff:
        return
    per_day = settings.D2K_QUOTA_UPLOADS_PER_DAY
    uploads = _counted_uploads(user)
    if len(uploads) >= per_day:
        oldest = uploads[len(uploads) - per_day]
        wait = (oldest + WINDOW - timezone.now()).total_seconds()
        raise QuotaExceeded(
            f"You uploaded {len(uploads)} times in the last 24 hours; the limit is {per_day}. "
            f"Try again in {_duration(wait)}.",
            retry_after_s=int(wait) + 1,
        )
    waiting_limit = settings.D2K_QUOTA_QUEUED_EVALUATIONS
    waiting = (
        Evaluation.objects.filter(submission__owner=user, status__in=("queued", "running"))
        # Queued again after a worker failure: our fault, not the user's.
        .exclude(Q(status="queued") & Q(attempts__gt=0))
        .count()
    )
    if waiting + evaluations > waiting_limit:
        raise QuotaExceeded(
            f"You have {waiting} evaluations waiting and this upload adds {evaluations}; "
            f"at most {waiting_limit} may wait at once. Try again once some have finished.",
            retry_after_s=QUEUE_RETRY_AFTER_S,
        )


def _duration(seconds: float) -> str:
    seconds = max(1, int(seconds))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"
