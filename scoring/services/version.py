"""Changing the data version on every write that a ranking, table or chart can show.

The receivers below are the one place that sees every such write, whichever door it
came through (services, the admin, a management command, a cascade delete): a
cached page that missed one would be stale. The stamp changes inside the writer's
transaction, so it is visible exactly when the data is: a reader that sees the new
stamp also sees the new rows. Writes that no page shows (a worker's heartbeat or
lease, which are queryset updates) send no signal and leave the stamp alone.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models.signals import post_delete, post_save

from evaluator.models import Evaluation
from moderation.models import CellVerdict, ModerationAction
from runs.models import Proposal, Run, Trace
from scoring.models import RunScore, ScoresVersion, TaskScore
from scoring.selectors.version import ROW
from submissions.models import Submission
from task_catalog.models import (
    DesignProperty,
    Guidance,
    GuidanceVersion,
    Task,
    TaskVersion,
    Workload,
)

# Everything the cached pages read: scores, what decides whether a row ranks (visibility,
# moderation, verdicts and reviews), the catalog around them, and what the public view of
# a run page shows besides (its traces, proposals, cell verdicts and moderation log: the
# admin may edit a proposal, and a moderation action need not save a run or a kernel).
# Workload results are written in the verdict's transaction (its Evaluation save);
# assessments reach a cached page only through the scores their refresh writes (which
# changes the version first). Neither needs a receiver, and their tables keep Django's fast
# delete.
WATCHED = (
    RunScore,
    TaskScore,
    Run,
    Submission,
    Evaluation,
    Task,
    TaskVersion,
    Workload,
    DesignProperty,
    Guidance,
    GuidanceVersion,
    Trace,
    Proposal,
    CellVerdict,
    ModerationAction,
)


def scores_version_bump() -> str:
    """A new data version; every page cached under the old one renders afresh."""
    stamp = uuid.uuid4().hex
    if not ScoresVersion.objects.filter(pk=ROW).update(stamp=stamp):
        ScoresVersion.objects.update_or_create(pk=ROW, defaults={"stamp": stamp})
    return stamp


def _changed(sender: type, **kwargs: Any) -> None:
    scores_version_bump()


def _user_changed(sender: type, update_fields: frozenset[str] | None = None, **kwargs: Any) -> None:
    # A sign-in writes `last_login` only: no page shows it. A new username shows everywhere.
    if update_fields is None or set(update_fields) - {"last_login"}:
        scores_version_bump()


def scores_version_watch() -> None:
    """Connect the receivers (scoring.apps, once per process)."""
    for model in WATCHED:
        for signal in (post_save, post_delete):
            signal.connect(_changed, sender=model, dispatch_uid=f"scores-version-{model.__name__}")
    user = get_user_model()
    post_save.connect(_user_changed, sender=user, dispatch_uid="scores-version-user")
    post_delete.connect(_changed, sender=user, dispatch_uid="scores-version-user-delete")
