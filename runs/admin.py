from django.contrib import admin

from runs.models import Proposal, Run, ScanHit, Trace


class TraceInline(admin.TabularInline):
    model = Trace
    extra = 0
    can_delete = False
    show_change_link = True
    fields = ("task", "event_count", "turns_used", "final_submit_turn", "end_reason")
    readonly_fields = fields

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ("id", "model", "agent", "condition", "hardware", "state", "owner", "is_example")
    list_filter = ("state", "condition", "is_public", "is_example", "hardware")
    list_select_related = ("owner",)
    search_fields = ("=id", "model", "agent", "owner__username")
    readonly_fields = (
        "owner",
        "catalog_version",
        "state",
        "finished_at",
        "levels",
        "condition",
        "bundle_file",
        "bundle_bytes",
        "upload_options",
        "errors",
    )
    raw_id_fields = ("pair",)
    inlines = [TraceInline]


@admin.register(Trace)
class TraceAdmin(admin.ModelAdmin):
    list_display = ("id", "run", "task", "event_count", "turns_used", "raw_bytes", "stored_bytes")
    list_select_related = ("run", "task")
    search_fields = ("=run__id", "task__slug")
    exclude = ("pages", "redacted_pages")
    readonly_fields = tuple(
        f.name for f in Trace._meta.fields if f.name not in ("id", "pages", "redacted_pages")
    )


@admin.register(Proposal)
class ProposalAdmin(admin.ModelAdmin):
    list_display = ("id", "run", "task")
    list_select_related = ("run", "task")
    raw_id_fields = ("run",)


@admin.register(ScanHit)
class ScanHitAdmin(admin.ModelAdmin):
    """The scanners' hits, read-only: they are written on upload (runs.audit)."""

    list_display = ("run", "task", "rule", "line", "event_type", "quote")
    list_filter = ("rule",)
    list_select_related = ("run", "task")
    search_fields = ("=run__id", "task__slug", "quote")
    readonly_fields = tuple(f.name for f in ScanHit._meta.fields if f.name != "id")

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
