"""Moderators' actions on submissions and runs: each one a row with who and why.

`flag` holds a result back from rankings until a moderator decides;
`mark_hacked` hides it from rankings for good (the evidence stays: code, logs,
evaluations); `clear` and `verify` let it count (verify also says a moderator
checked it); `withdraw` takes it off every ranking; `rerun` queues a fresh
evaluation. A flagged evaluation's own review (evaluator.services
`evaluation_review`) follows `mark_hacked`, `clear` and `verify`.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from accounts.models import User
from evaluator.models import Evaluation, EvaluationStatus, Review
from evaluator.services import evaluation_create, evaluation_review
from moderation.models import ModerationAction, ModerationKind, ModerationState
from runs.models import Run
from submissions.models import Submission

STATE_AFTER = {
    ModerationKind.FLAG: ModerationState.FLAGGED,
    ModerationKind.MARK_HACKED: ModerationState.HACKED,
    ModerationKind.CLEAR: ModerationState.CLEARED,
    ModerationKind.VERIFY: ModerationState.VERIFIED,
    ModerationKind.WITHDRAW: ModerationState.WITHDRAWN,
}
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
    if kind not in ModerationKind.values:
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
