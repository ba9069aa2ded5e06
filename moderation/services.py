"""Moderators' actions on submissions and runs: each one a row with who and why.

`flag` holds a result back from rankings until a moderator decides;
`mark_hacked` hides it from rankings for good (the evidence stays: code, logs,
evaluations); `clear` and `verify` let it count (verify also says a moderator
checked it); `withdraw` takes it off every ranking; `rerun` queues a fresh
evaluation. A flagged evaluation's own review (evaluator.services
`evaluation_review`) follows `mark_hacked`, `clear` and `verify`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from accounts.models import User
from evaluator.models import Evaluation, EvaluationStatus, Review
from evaluator.services import evaluation_create, evaluation_review
from moderation.models import (
    AuditVerdict,
    CellVerdict,
    ModerationAction,
    ModerationKind,
    ModerationState,
)
from runs.models import Run, ScanHit
from scoring.services.version import scores_version_bump
from submissions.models import Submission
from task_catalog.models import Task

STATE_AFTER = {
    ModerationKind.FLAG: ModerationState.FLAGGED,
    ModerationKind.MARK_HACKED: ModerationState.HACKED,
    ModerationKind.CLEAR: ModerationState.CLEARED,
    ModerationKind.VERIFY: ModerationState.VERIFIED,
    ModerationKind.WITHDRAW: ModerationState.WITHDRAWN,
}
# What moderation_act does; a cell verdict is cell_verdict_set's.
ACTION_KINDS = tuple(k for k in ModerationKind.values if k != ModerationKind.CELL_VERDICT)
REVIEW_AFTER = {
    ModerationKind.MARK_HACKED: Review.HACKED,
    ModerationKind.CLEAR: Review.CLEARED,
    ModerationKind.VERIFY: Review.CLEARED,
}


def _apply(*, submission: Submission, kind: str, reason: str, actor: User) -> None:
    if kind == ModerationKind.RERUN:
        evaluation_create(submission=submission)
        return
    submission.moderation = STATE_AFTER[ModerationKind(kind)]
    submission.save(update_fields=["moderation", "updated_at"])
    decision = REVIEW_AFTER.get(ModerationKind(kind))
    latest = Evaluation.objects.filter(submission=submission).order_by("-created_at", "-pk").first()
    if decision and latest is not None and latest.status == EvaluationStatus.FLAGGED:
        evaluation_review(evaluation=latest, decision=decision, note=reason, reviewer=actor)


@transaction.atomic
def moderation_act(
    *,
    actor: User,
    kind: str,
    reason: str,
    submission: Submission | None = None,
    run: Run | None = None,
) -> ModerationAction:
    """One moderator's action on a submission or on a run (then on each of its kernels),
    logged with who and why. Staff only; a reason is required."""
    if not actor.is_staff:
        raise PermissionDenied("Only moderators (staff) moderate results.")
    if kind not in ACTION_KINDS:
        raise ValidationError({"kind": f"Unknown action {kind!r}."})
    reason = (reason or "").strip()
    if not reason:
        raise ValidationError({"reason": "Say why: the owner reads it on the page."})
    if (submission is None) == (run is None):
        raise ValidationError("Moderate one submission or one run.")
    if submission is not None:
        _apply(submission=submission, kind=kind, reason=reason, actor=actor)
    else:
        assert run is not None
        for kernel in Submission.objects.filter(run=run):
            _apply(submission=kernel, kind=kind, reason=reason, actor=actor)
        if kind != ModerationKind.RERUN:
            run.moderation = STATE_AFTER[ModerationKind(kind)]
            run.save(update_fields=["moderation", "updated_at"])
    target = submission if submission is not None else run
    action = ModerationAction(
        submission=submission,
        run=run,
        kind=kind,
        reason=reason,
        actor=actor,
        state_after=getattr(target, "moderation", ""),
    )
    action.full_clean()
    action.save()
    return action


# --- cell verdicts ----------------------------------------------------------------


def cells_nominate(*, run: Run, hits: Iterable[ScanHit]) -> list[CellVerdict]:
    """Put each cell with integrity hits in `needs_review` (the scanners' nomination,
    written on upload): the reason counts the hits per rule, the quote is the first
    hit's. A cell a moderator already decided keeps its verdict."""
    by_task: dict[int, list[ScanHit]] = {}
    for hit in hits:
        by_task.setdefault(hit.task_id, []).append(hit)
    decided = set(
        CellVerdict.objects.filter(run=run, task_id__in=by_task).values_list("task_id", flat=True)
    )
    rows = []
    for task_id, found in sorted(by_task.items()):
        if task_id in decided:
            continue
        rules = Counter(h.rule for h in found)
        first = min(found, key=lambda h: (h.line or 0, h.pk))
        reason = "Scanner hits: " + ", ".join(
            f"{rule} ×{n}" if n > 1 else rule for rule, n in sorted(rules.items())
        )
        rows.append(
            CellVerdict(
                run=run,
                task_id=task_id,
                verdict=AuditVerdict.NEEDS_REVIEW,
                quote=first.quote,
                line=first.line if first.trace_id else None,
                reason=reason + ".",
            )
        )
    return CellVerdict.objects.bulk_create(rows)


@transaction.atomic
def cell_verdict_set(
    *,
    actor: User,
    run: Run,
    task: Task,
    verdict: str,
    reason: str,
    quote: str = "",
    line: int | None = None,
) -> CellVerdict:
    """A moderator's verdict on one (run, task) cell, with the quote it rests on and the
    reason; logged in the moderation log. Staff only; a reason is required."""
    if not actor.is_staff:
        raise PermissionDenied("Only moderators (staff) give verdicts.")
    if verdict not in AuditVerdict.values:
        raise ValidationError({"verdict": f"Unknown verdict {verdict!r}."})
    reason, quote = (reason or "").strip(), (quote or "").strip()
    if not reason:
        raise ValidationError({"reason": "Say why: the page shows it beside the verdict."})
    if line is not None and line < 1:
        raise ValidationError({"line": "Lines are counted from 1."})
    touched = run.traces.filter(task=task).exists() or run.submissions.filter(task=task).exists()
    if not touched:
        raise ValidationError({"task": f"Run #{run.pk} has no kernel or trace for {task.slug}."})
    cell, _ = CellVerdict.objects.update_or_create(
        run=run,
        task=task,
        defaults={
            "verdict": verdict,
            "quote": quote,
            "reason": reason,
            "line": line,
            "decided_by": actor,
        },
    )
    cell.full_clean()
    action = ModerationAction(
        run=run,
        task=task,
        kind=ModerationKind.CELL_VERDICT,
        verdict=verdict,
        quote=quote,
        reason=reason,
        actor=actor,
        state_after=run.moderation,
    )
    action.full_clean()
    action.save()
    # Whether the cell ranks changed: cached rankings render afresh.
    scores_version_bump()
    return cell
