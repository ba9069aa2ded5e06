from django.contrib import admin

from moderation.models import CellVerdict, ModerationAction


@admin.register(ModerationAction)
class ModerationActionAdmin(admin.ModelAdmin):
    """The log, read-only: actions are taken on the submission and run pages (and API)."""

    list_display = ("created_at", "kind", "submission", "run", "task", "verdict", "actor")
    list_filter = ("kind", "state_after")
    search_fields = ("=submission__id", "=run__id", "actor__username", "reason")
    readonly_fields = (
        "created_at",
        "kind",
        "submission",
        "run",
        "task",
        "verdict",
        "quote",
        "actor",
        "state_after",
        "reason",
    )
    fields = readonly_fields

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(CellVerdict)
class CellVerdictAdmin(admin.ModelAdmin):
    """Cell verdicts, read-only: moderators give them on the run page, which logs each."""

    list_display = ("run", "task", "verdict", "decided_by", "updated_at")
    list_filter = ("verdict",)
    list_select_related = ("run", "task", "decided_by")
    search_fields = ("=run__id", "task__slug", "reason", "quote")
    readonly_fields = tuple(f.name for f in CellVerdict._meta.fields if f.name != "id")

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
