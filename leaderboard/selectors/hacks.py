"""Confirmed hacks: results an admin marked `hacked`, listed apart with their evidence."""

from __future__ import annotations

from django.db.models import QuerySet

from evaluator.models import Evaluation, Review

from ..tables import Column, Table


def evaluation_hacked_list(*, hardware: str = "") -> QuerySet[Evaluation]:
    """Public results confirmed as hacks, newest review first (one query)."""
    hacked = Evaluation.objects.filter(review=Review.HACKED, submission__is_public=True)
    if hardware:
        hacked = hacked.filter(hardware=hardware)
    return hacked.select_related(
        "submission__owner", "submission__task", "submission__run"
    ).order_by("-reviewed_at", "-pk")


HACK_COLUMNS = (
    Column("evaluation_id", "Evaluation"),
    Column("submission_id", "Submission"),
    Column("task", "Task"),
    Column("owner", "User"),
    Column("run_id", "Run"),
    Column("hardware", "GPU"),
    Column("status", "Verdict"),
    Column("flags", "Checks that fired", "The honesty checks that fired, with their detail."),
    Column("review_note", "Review note", "What the reviewing admin found."),
    Column("reviewed_at", "Reviewed"),
)


def hacked_table(*, hardware: str = "") -> Table:
    rows = [
        {
            "evaluation_id": e.pk,
            "submission_id": e.submission_id,
            "task": e.submission.task.slug,
            "owner": e.submission.owner.get_username(),
            "run_id": e.submission.run_id,
            "hardware": e.hardware,
            "status": e.status,
            "flags": "; ".join(
                f"{f.get('check', '')}: {f.get('detail', '')}" if isinstance(f, dict) else str(f)
                for f in (e.flags or [])
            ),
            "review_note": e.review_note,
            "reviewed_at": e.reviewed_at.isoformat() if e.reviewed_at else None,
        }
        for e in evaluation_hacked_list(hardware=hardware)
    ]
    return Table(name="confirmed-hacks", columns=HACK_COLUMNS, rows=rows)
