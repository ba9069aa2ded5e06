"""Guidance versions: every change to a task's guidance or design properties is kept.

The content of a version is a snapshot of the task's `Guidance` and
`DesignProperty` rows in canonical form (`guidance_text`), so the same texts and
properties always hash alike, whoever saved them.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Max

from accounts.models import User

from ..guidance_text import PROPERTY_FIELDS, guidance_content_build, guidance_content_hash
from ..models import DesignProperty, Guidance, GuidanceVersion, Task
from ..selectors import guidance_version_current


def guidance_content(*, task: Task) -> dict[str, Any]:
    """The task's guidance and properties as they are stored now (a version's content)."""
    return guidance_content_build(
        guidance=Guidance.objects.filter(task=task).values("level", "text", "depends_on"),
        properties=DesignProperty.objects.filter(task=task).values(*PROPERTY_FIELDS),
    )


def guidance_version_record(
    *, task: Task, source: str, author: User | None = None
) -> tuple[GuidanceVersion, bool]:
    """Snapshot the task's guidance and properties; a new version only when they changed.

    Returns the current version and whether it was made now. Call it inside the
    transaction that changed the rows.
    """
    content = guidance_content(task=task)
    digest = guidance_content_hash(content)
    current = guidance_version_current(task=task)
    if current is not None and current.content_hash == digest:
        return current, False
    number = (GuidanceVersion.objects.filter(task=task).aggregate(n=Max("number"))["n"] or 0) + 1
    version = GuidanceVersion(
        task=task,
        number=number,
        content_hash=digest,
        content=content,
        source=source,
        author=author,
    )
    version.full_clean(exclude=["task", "author"])
    version.save()
    return version, True
