"""Reads of the task catalog that feed pages and the API.

Hidden workloads (marked hidden, and every workload of role `untimed`) never leave
this module through a public selector: `workload_public_filter` is the one gate.
Results and rankings are the leaderboard's (`leaderboard.selectors`).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Prefetch, Q, QuerySet

from .guidance_text import guidance_diff, guidance_diff_rows
from .models import DesignProperty, Guidance, GuidanceVersion, Level, Task, Workload

PUBLIC_WORKLOADS = Q(hidden=False) & ~Q(role=Workload.Role.UNTIMED)


def workload_public_filter(queryset: QuerySet[Workload]) -> QuerySet[Workload]:
    return queryset.filter(PUBLIC_WORKLOADS)


def task_list() -> QuerySet[Task]:
    """Catalog rows in one query: current version, timed workload and per-level property counts."""
    counts = {
        "timed_workloads": Count(
            "current_version__workloads",
            filter=Q(current_version__workloads__role=Workload.Role.TIMED),
            distinct=True,
        ),
        "property_count": Count("properties", distinct=True),
    }
    for level in Level.values:
        counts[f"properties_{level}"] = Count(
            "properties", filter=Q(properties__level=level), distinct=True
        )
    return (
        Task.objects.filter(current_version__isnull=False)
        .select_related("current_version")
        .annotate(**counts)
        .order_by("position", "slug")
    )


def task_get_public(*, slug: str) -> Task | None:
    """One task with its current version, public workloads, guidance and properties (4 queries).

    The public workloads are on `task.public_workloads`; the version's full
    workload list is deliberately not prefetched.
    """
    return (
        Task.objects.filter(slug=slug, current_version__isnull=False)
        .select_related("current_version")
        .prefetch_related(
            Prefetch(
                "current_version__workloads",
                queryset=workload_public_filter(Workload.objects.order_by("position")),
                to_attr="public_workloads",
            ),
            Prefetch("guidance", queryset=Guidance.objects.order_by("level")),
            Prefetch(
                "properties", queryset=DesignProperty.objects.order_by("level", "position", "pk")
            ),
        )
        .first()
    )


def task_public_workloads(task: Task) -> list[Workload]:
    return list(getattr(task.current_version, "public_workloads", []))


# --- guidance versions ------------------------------------------------------------


def guidance_version_current(*, task: Task) -> GuidanceVersion | None:
    """The task's newest guidance version (its current guidance), or None before the first."""
    return GuidanceVersion.objects.filter(task=task).order_by("-number").first()


def guidance_version_by_hash(*, task: Task, sha256: str) -> GuidanceVersion | None:
    """The newest guidance version of the task with that content hash."""
    return (
        GuidanceVersion.objects.filter(task=task, content_hash=sha256).order_by("-number").first()
    )


@dataclass(frozen=True)
class GuidanceHistoryEntry:
    version: GuidanceVersion
    diff: list[str]

    @property
    def rows(self) -> list[tuple[str, str]]:
        return guidance_diff_rows(self.diff)


def guidance_history(*, task: Task) -> list[GuidanceHistoryEntry]:
    """Every guidance version of the task, newest first, each with its diff against the
    one before it (one query)."""
    versions = list(
        GuidanceVersion.objects.filter(task=task).select_related("author").order_by("number")
    )
    entries = [
        GuidanceHistoryEntry(
            version=version,
            diff=guidance_diff(
                old=before.content if before is not None else None,
                new=version.content,
                old_name=f"v{before.number}" if before is not None else "(none)",
                new_name=f"v{version.number}",
            ),
        )
        for before, version in zip([None, *versions], versions, strict=False)
    ]
    return entries[::-1]
