"""Reads of moderation: the log a page shows, and which results rankings may count."""

from __future__ import annotations

from django.conf import settings
from django.db.models import Exists, OuterRef, Q, QuerySet

from moderation.models import UNRANKED_STATES, AuditVerdict, CellVerdict, ModerationAction
from runs.models import Run, ScanHit
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
    return ModerationAction.objects.filter(where).select_related("actor", "task")


def held_verdicts() -> tuple[str, ...]:
    """Cell verdicts that keep a cell off the rankings: `reward_hack` and `contaminated`
    always, `needs_review` unless the deployment sets D2K_AUDIT_HOLD_NEEDS_REVIEW off."""
    held = [AuditVerdict.REWARD_HACK, AuditVerdict.CONTAMINATED]
    if settings.D2K_AUDIT_HOLD_NEEDS_REVIEW:
        held.append(AuditVerdict.NEEDS_REVIEW)
    return tuple(str(v) for v in held)


def submission_rankable_q(prefix: str = "") -> Q:
    """A filter for submissions a public ranking may count: published, not held back
    by the moderators (flagged, hacked, withdrawn) and not a held cell of its run
    (`held_verdicts`). `prefix`: the path to the submission from the queried model,
    e.g. "submission__" from Evaluation."""
    held_cell = CellVerdict.objects.filter(
        run=OuterRef(f"{prefix}run"), task=OuterRef(f"{prefix}task"), verdict__in=held_verdicts()
    )
    return (
        Q(**{f"{prefix}is_public": True})
        & ~Q(**{f"{prefix}moderation__in": UNRANKED_STATES})
        & ~Q(Exists(held_cell))
    )


def run_rankable_q(prefix: str = "") -> Q:
    """The same filter for runs: a run with a held cell does not rank (its scores
    aggregate that cell) until the cell is reviewed."""
    held_cell = CellVerdict.objects.filter(run=OuterRef(f"{prefix}pk"), verdict__in=held_verdicts())
    return (
        Q(**{f"{prefix}is_public": True})
        & ~Q(**{f"{prefix}moderation__in": UNRANKED_STATES})
        & ~Q(Exists(held_cell))
    )


def run_rankable(run: Run) -> bool:
    """`run_rankable_q` for a run already read, without a query: its visibility and
    moderation state only (a held cell is `run_rankable_q`'s; the run page's
    breakdowns link, its one caller, links to a page that applies it)."""
    return run.is_public and run.moderation not in UNRANKED_STATES


def cell_verdicts_for(*, run: Run) -> dict[int, CellVerdict]:
    """The run's cell verdicts by task id."""
    return {
        c.task_id: c
        for c in CellVerdict.objects.filter(run=run).select_related("decided_by", "task")
    }


def cell_verdicts_search(*, verdict: str = "", rule: str = "") -> QuerySet[CellVerdict]:
    """Staff's search across runs: every cell with `verdict` (any when blank) whose
    traces hit scanner `rule` (any cell when blank), newest runs first."""
    cells = CellVerdict.objects.select_related("run__owner", "task", "decided_by")
    if verdict:
        cells = cells.filter(verdict=verdict)
    if rule:
        hit = ScanHit.objects.filter(run=OuterRef("run"), task=OuterRef("task"), rule=rule)
        cells = cells.filter(Exists(hit))
    return cells.order_by("-run_id", "task__slug")
