from django.contrib import admin

from moderation.models import ModerationAction


@admin.register(ModerationAction)
class ModerationActionAdmin(admin.ModelAdmin):
    """The log, read-only: actions are taken on the submission and run pages (and API)."""

    list_display = ("created_at", "kind", "submission", "run", "actor", "state_after")
    list_filter = ("kind", "state_after")
    search_fields = ("=submission__id", "=run__id", "actor__username", "reason")
    readonly_fields = ("created_at", "kind", "submission", "run", "actor", "state_after", "reason")
    fields = readonly_fields

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
