from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from accounts.auth import authenticated_user
from scoring.models import Assessment, RunScore, TaskScore
from scoring.services import assessment_admin_delete, assessment_admin_save


@admin.register(Assessment)
class AssessmentAdmin(admin.ModelAdmin):
    """Saving records an admin assessment (the source of highest precedence); editing a
    detector, counters or judge row leaves it and stores the admin's own beside it."""

    list_display = ("id", "kind", "task", "property", "submission", "run", "source", "value")
    list_filter = ("kind", "source", "value")
    list_select_related = ("task", "property")
    search_fields = ("=submission__id", "=run__id", "task__slug", "property__key")
    raw_id_fields = ("submission", "run", "property", "task")
    fields = (
        "kind",
        "task",
        "property",
        "submission",
        "run",
        "value",
        "rationale",
        "evidence",
        "source",
        "judge",
        "who",
        "assessed_at",
    )
    readonly_fields = ("source", "judge", "who", "assessed_at")

    def save_model(self, request: HttpRequest, obj: Assessment, form: Any, change: bool) -> None:
        assessment_admin_save(assessment=obj, user=authenticated_user(request.user))

    def delete_model(self, request: HttpRequest, obj: Assessment) -> None:
        assessment_admin_delete(assessment=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Assessment]) -> None:
        for obj in queryset:
            assessment_admin_delete(assessment=obj)


class _ReadOnly(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(TaskScore)
class TaskScoreAdmin(_ReadOnly):
    list_display = ("submission", "run", "task", "status", "counts", "speedup", "hardware")
    list_filter = ("counts", "status", "hardware")
    list_select_related = ("task",)


@admin.register(RunScore)
class RunScoreAdmin(_ReadOnly):
    list_display = (
        "run",
        "hardware",
        "timed",
        "correctness_rate",
        "performance_score",
        "geomean_speedup",
        "geomean_n",
        "refreshed_at",
    )
    list_filter = ("timed", "hardware")
