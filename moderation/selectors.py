"""Reads of moderation: the log a page shows, and which results rankings may count."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from moderation.models import UNRANKED_STATES, ModerationAction
from runs.models import Run
from submissions.models import Submission


def moderation_actions_for(
    *, submission: Submission | None = None, run: Run | None = None
) -> QuerySet[ModerationAction]:
    """The actions on a submission (and on the run it belongs to) or on a run, newest first."""
    if submission is not None:
        where = Q(submission=submission)
        if submission.run_id:
            where |= Q(run_id=submission.run_id)
    elif run is not None:
        where = Q(run=run)
    else:
        return ModerationAction.objects.none()
    return ModerationAction.objects.filter(where).select_related("actor")


def submission_rankable_q(prefix: str = "") -> Q:
    """A filter for submissions a public ranking may count: published and not held back
    by the moderators (flagged, hacked, withdrawn). `prefix`: the path to the submission
    from the queried model, e.g. "submission__" from Evaluation."""
    return Q(**{f"{prefix}is_public": True}) & ~Q(**{f"{prefix}moderation__in": UNRANKED_STATES})


def run_rankable_q(prefix: str = "") -> Q:
    """The same filter for runs."""
    return Q(**{f"{prefix}is_public": True}) & ~Q(**{f"{prefix}moderation__in": UNRANKED_STATES})


def run_rankable(run: Run) -> bool:
    """`run_rankable_q` for a run already read (no query)."""
    return run.is_public and run.moderation not in UNRANKED_STATES
