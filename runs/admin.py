from django.contrib import admin

from runs.models import Proposal, Run, Trace


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
    readonly_fields = ("owner", "catalog_version", "state", "finished_at", "levels", "condition")
    raw_id_fields = ("pair",)
    inlines = [TraceInline]


@admin.register(Trace)
class TraceAdmin(admin.ModelAdmin):
    list_display = ("id", "run", "task", "event_count", "turns_used", "raw_bytes", "stored_bytes")
    list_select_related = ("run", "task")
    search_fields = ("=run__id", "task__slug")
    exclude = ("pages",)
    readonly_fields = tuple(f.name for f in Trace._meta.fields if f.name not in ("id", "pages"))


@admin.register(Proposal)
class ProposalAdmin(admin.ModelAdmin):
    list_display = ("id", "run", "task")
    list_select_related = ("run", "task")
    raw_id_fields = ("run",)
