"""Evaluations are produced by workers, never typed in: the admin shows them read-only and
acts on them only through evaluator.services (review of flagged results, re-runs)."""

import json

from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.utils.html import format_html

from evaluator.models import Evaluation, Review, WorkloadResult
from evaluator.selectors import RESULT_FIELDS
from evaluator.services import evaluation_create, evaluation_review


class WorkloadResultInline(admin.TabularInline):
    model = WorkloadResult
    extra = 0
    can_delete = False
    fields = RESULT_FIELDS
    readonly_fields = fields

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Evaluation)
class EvaluationAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "submission",
        "task",
        "status",
        "review",
        "mode",
        "attempts",
        "worker",
        "created_at",
        "finished_at",
    )
    list_filter = ("status", "review", "mode")
    list_select_related = ("submission__task",)
    search_fields = ("=id", "submission__owner__username", "submission__task__slug", "message")
    date_hierarchy = "created_at"
    inlines = (WorkloadResultInline,)
    actions = ("mark_hacked", "mark_cleared", "rerun")
    fields = (
        "submission",
        "status",
        "message",
        "mode",
        "evaluator_version",
        "worker",
        "attempts",
        "started_at",
        "finished_at",
        "review",
        "review_note",
        "reviewed_by",
        "reviewed_at",
        "flags_pretty",
        "environment_pretty",
        "log_pretty",
    )
    readonly_fields = fields

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        # Viewable (and actionable through the list's actions), never edited by hand.
        return False

    @admin.display(description="task", ordering="submission__task__slug")
    def task(self, obj: Evaluation) -> str:
        return obj.submission.task.slug

    @admin.display(description="flags")
    def flags_pretty(self, obj: Evaluation) -> str:
        return format_html("<pre>{}</pre>", json.dumps(obj.flags, indent=2))

    @admin.display(description="environment")
    def environment_pretty(self, obj: Evaluation) -> str:
        return format_html("<pre>{}</pre>", json.dumps(obj.environment, indent=2, sort_keys=True))

    @admin.display(description="log")
    def log_pretty(self, obj: Evaluation) -> str:
        return format_html('<pre style="max-height:40em;overflow:auto">{}</pre>', obj.log)

    def _review(self, request, queryset, decision: str) -> None:
        done, skipped = 0, []
        for evaluation in queryset:
            try:
                evaluation_review(
                    evaluation=evaluation,
                    decision=decision,
                    note=f"{decision} in the admin by {request.user.get_username()}",
                    reviewer=request.user,
                )
                done += 1
            except ValidationError as exc:
                skipped.append(exc.messages[0])
        if done:
            self.message_user(request, f"{done} evaluation(s) marked {decision}.", messages.SUCCESS)
        for reason in skipped:
            self.message_user(request, reason, messages.WARNING)

    @admin.action(description="Confirm hack (hide from rankings, keep evidence)")
    def mark_hacked(self, request, queryset) -> None:
        self._review(request, queryset, Review.HACKED)

    @admin.action(description="Clear flag (result counts)")
    def mark_cleared(self, request, queryset) -> None:
        self._review(request, queryset, Review.CLEARED)

    @admin.action(description="Re-run: queue a new evaluation of the same submission")
    def rerun(self, request, queryset) -> None:
        submissions = {
            evaluation.submission for evaluation in queryset.select_related("submission")
        }
        for submission in submissions:
            evaluation_create(submission=submission)
        self.message_user(
            request, f"{len(submissions)} new evaluation(s) queued.", messages.SUCCESS
        )
