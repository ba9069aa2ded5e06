"""Reads of the submissions app. `submission_get_for_viewer` is the one way to a submission,
`submission_evaluation_for_viewer` the one way to what its evaluation shows."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from django.contrib.auth.models import AnonymousUser
from django.db.models import OuterRef, QuerySet, Subquery
from django.http import Http404

from accounts.models import User
from evaluator.models import Evaluation
from evaluator.selectors import EvaluationView, evaluation_view_for_viewer
from submissions.models import Submission

# What a hidden workload's row shows anyone but staff: that it is one, under its alias, and
# whether it passed. Every other field is blank, the ones to come included: each figure of a
# row (errors, times, speedups, rates) is set by the kernel's output or its timing, so a
# kernel that sees a hidden shape could write the shape into it.
HIDDEN_ROW_SHOWN = frozenset({"name", "role", "hidden", "status"})


def _can_view(*, user: User | AnonymousUser, submission: Submission) -> bool:
    if submission.is_public:
        return True
    if not user.is_authenticated:
        return False
    return user.is_staff or submission.owner_id == user.pk


def submission_get_for_viewer(*, user: User | AnonymousUser, pk: int | str) -> Submission:
    """The submission if `user` may see it: public ones to everyone, private ones to the
    owner and staff. Anything else, including a malformed id, is a 404 (never a 403, so
    a private submission's existence is not revealed)."""
    try:
        pk = int(pk)
    except (TypeError, ValueError) as exc:
        raise Http404("No such submission.") from exc
    submission = (
        Submission.objects.select_related("owner", "task", "task_version", "run")
        .filter(pk=pk)
        .first()
    )
    if submission is None or not _can_view(user=user, submission=submission):
        raise Http404("No such submission.")
    return submission


def _latest_evaluation(field: str) -> Subquery:
    latest = Evaluation.objects.filter(submission=OuterRef("pk")).order_by("-created_at", "-pk")
    return Subquery(latest.values(field)[:1])


def submission_list_for_owner(*, owner: User) -> QuerySet[Submission]:
    """The owner's submissions, newest first, each annotated with its latest evaluation's
    `latest_status`, `latest_evaluation_id` and `latest_message`: one query."""
    return (
        Submission.objects.filter(owner=owner)
        .select_related("owner", "task", "task_version")
        .annotate(
            latest_evaluation_id=_latest_evaluation("pk"),
            latest_status=_latest_evaluation("status"),
            latest_message=_latest_evaluation("message"),
        )
        .defer("source")
        .order_by("-created_at", "-pk")
    )


def _hidden_row_blanked(row: dict[str, Any]) -> dict[str, Any]:
    """The row with its shown fields; a text field blank, any other field None."""
    return {
        field: value if field in HIDDEN_ROW_SHOWN else ("" if isinstance(value, str) else None)
        for field, value in row.items()
    }


def submission_evaluation_for_viewer(
    *, evaluation: Evaluation, user: User | AnonymousUser
) -> EvaluationView:
    """The evaluation as `user` may see it on the submission's page and in its API: hidden
    workloads under an alias, with the owner's part of the log (evaluation_view_for_viewer),
    and for anyone but staff no figure on a hidden workload's row, its status only."""
    view = evaluation_view_for_viewer(evaluation=evaluation, user=user)
    if user.is_authenticated and user.is_staff:
        return view
    results = [_hidden_row_blanked(row) if row["hidden"] else row for row in view.results]
    return replace(view, results=results)
