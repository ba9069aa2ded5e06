from django.contrib import admin

from evaluator.models import Evaluation
from submissions.models import Submission


class EvaluationInline(admin.TabularInline):
    model = Evaluation
    extra = 0
    can_delete = False
    show_change_link = True
    fields = ("status", "review", "mode", "attempts", "created_at", "finished_at")
    readonly_fields = fields

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Submission)
class SubmissionAdmin(admin.ModelAdmin):
    list_display = ("id", "task", "owner", "filename", "is_public", "created_at")
    list_filter = ("is_public", "task")
    list_select_related = ("task", "owner")
    search_fields = ("=id", "owner__username", "task__slug", "sha256", "filename")
    readonly_fields = (
        "owner",
        "task",
        "task_version",
        "filename",
        "sha256",
        "source",
        "created_at",
    )
    fields = ("is_public", *readonly_fields)
    inlines = (EvaluationInline,)

    def has_add_permission(self, request) -> bool:
        return False
