"""The tasks a run is scored over: those of the catalog version it was made for."""

from __future__ import annotations

import hashlib

from django.db.models import Q

from runs.models import Proposal, Run, Trace
from scoring.models import CatalogVersion
from submissions.models import Submission
from task_catalog.models import Task, TaskVersion


def catalog_digest() -> tuple[str, list[str]]:
    """The catalog as it is now: a short digest of every task's current version hash
    (two runs uploaded against the same task versions share it), and the tasks' slugs."""
    rows = sorted(
        Task.objects.filter(current_version__isnull=False).values_list(
            "slug", "current_version__content_hash"
        )
    )
    digest = hashlib.sha256("\n".join(f"{s}:{h}" for s, h in rows).encode())
    return digest.hexdigest()[:12], [slug for slug, _ in rows]


def run_catalog_tasks(*, run: Run) -> list[Task]:
    """The tasks of the run's catalog version (pinned when it was made; for a run made
    before versions were pinned, the tasks that had a version when it was uploaded), and
    any task the run touched; in catalog order. A task added later is never one of them."""
    pinned = CatalogVersion.objects.filter(digest=run.catalog_version).first()
    if pinned is not None:
        in_version = Q(slug__in=pinned.tasks)
    else:
        digest, slugs = catalog_digest()
        if digest == run.catalog_version:
            in_version = Q(slug__in=slugs)
        else:
            existed = TaskVersion.objects.filter(created_at__lte=run.created_at)
            in_version = Q(pk__in=existed.values("task_id"))
    touched = (
        Q(pk__in=Submission.objects.filter(run=run).values("task_id"))
        | Q(pk__in=Trace.objects.filter(run=run).values("task_id"))
        | Q(pk__in=Proposal.objects.filter(run=run).values("task_id"))
    )
    return list(Task.objects.filter(in_version | touched).order_by("position", "slug"))
