"""Catalog admin: read content is edited in place; measured content only through a new version."""

from __future__ import annotations

from urllib.parse import parse_qs

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode

from .guidance_text import guidance_diff_rows
from .models import DesignProperty, Guidance, GuidanceVersion, Task, TaskVersion, Workload
from .rendering import markdown_render
from .selectors import guidance_history
from .services import (
    MEASURED_FIELDS,
    WORKLOAD_FIELDS,
    guidance_version_record,
    task_version_update,
    task_version_validate,
)

# The measured columns of a version row (its workloads are rows of their own).
_VERSION_FIELDS = [field for field in MEASURED_FIELDS if field != "workloads"]
_SOURCE_FIELDS = ("reference_source", "expert_source", "baseline_source")


class GuidanceInline(admin.StackedInline):
    model = Guidance
    extra = 0
    fields = ["level", "depends_on", "text", "preview"]
    readonly_fields = ["preview"]

    @admin.display(description="Rendered preview")
    def preview(self, obj: Guidance):
        return markdown_render(obj.text) if obj.pk else "—"


class DesignPropertyInline(admin.TabularInline):
    model = DesignProperty
    extra = 0
    fields = [
        "position",
        "key",
        "level",
        "title",
        "description",
        "weight",
        "depends_on",
        "detector",
    ]


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = ["slug", "title", "category", "current_version", "position", "updated_at"]
    list_filter = ["category"]
    search_fields = ["slug", "title"]
    # The current version moves only through load_catalog or a new version (TaskVersion admin).
    readonly_fields = [
        "current_version",
        "new_version",
        "guidance_versions",
        "created_at",
        "updated_at",
    ]
    fields = ["slug", "title", "category", "position", "statement", *readonly_fields]
    inlines = [GuidanceInline, DesignPropertyInline]

    def get_list_display(self, request):
        return [*self.list_display, "new_version"]

    @admin.display(description="New version")
    def new_version(self, obj: Task):
        if obj.pk is None:
            return "—"
        url = reverse("admin:task_catalog_taskversion_add")
        return format_html(
            '<a href="{}?task={}">Add a version from v{}</a>',
            url,
            obj.pk,
            obj.current_version.number if obj.current_version else "—",
        )

    @admin.display(description="Guidance versions")
    def guidance_versions(self, obj: Task):
        if obj.pk is None:
            return "—"
        url = reverse("admin:task_catalog_guidanceversion_changelist")
        return format_html('<a href="{}?task__id__exact={}">History with diffs</a>', url, obj.pk)

    def save_related(self, request, form, formsets, change):
        # Guidance and properties are the inlines: snapshot them once all are saved.
        super().save_related(request, form, formsets, change)
        version, made = guidance_version_record(
            task=form.instance, source=GuidanceVersion.Source.ADMIN, author=request.user
        )
        if made:
            self.message_user(
                request, f"Saved as guidance v{version.number} ({version.short_hash})."
            )


@admin.register(GuidanceVersion)
class GuidanceVersionAdmin(admin.ModelAdmin):
    """Guidance versions are a record: shown with their diff, never edited or deleted."""

    list_display = ["__str__", "task", "number", "short_hash", "source", "author", "created_at"]
    list_filter = ["task", "source"]
    fields = ("task", "number", "content_hash", "source", "author", "created_at", "diff")
    readonly_fields = fields

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    @admin.display(description="Diff against the version before")
    def diff(self, obj: GuidanceVersion):
        entry = next(e for e in guidance_history(task=obj.task) if e.version.pk == obj.pk)
        return format_html(
            '<pre class="guidance-diff">{}</pre>',
            format_html_join(
                "\n",
                '<span class="diff-{}">{}</span>',
                guidance_diff_rows(entry.diff),
            ),
        )


def _task_filter(filters: str) -> str | None:
    """The task id of the list's "by task" filter, e.g. `task__id__exact=3`."""
    values = parse_qs(filters).get("task__id__exact") or [""]
    return values[0] if values[0].isdigit() else None


# A stored version's workloads, as the TaskVersion admin shows them.
_WORKLOAD_FIELDS = (
    "position",
    "name",
    "role",
    "hidden",
    "params",
    "flops_formula",
    "flops",
    "bytes_formula",
    "bytes",
)


class WorkloadInline(admin.TabularInline):
    model = Workload
    extra = 0
    can_delete = False
    # Both the same tuple: a version's workloads are shown, never edited.
    fields = readonly_fields = _WORKLOAD_FIELDS

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


class NewTaskVersionForm(forms.ModelForm):
    """Measured content of a new version; workloads are edited as a JSON list."""

    workloads = forms.JSONField(
        help_text=f"A list of the public workloads, each with {', '.join(WORKLOAD_FIELDS)} "
        "(formulas win over numbers; role is timed or check, hidden is false). Hidden "
        "workloads are drawn by each deployment from hidden_draws, never listed."
    )

    class Meta:
        model = TaskVersion
        fields = ["task", *_VERSION_FIELDS]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Source text is measured as it is: no stripped trailing newline.
        for name in _SOURCE_FIELDS:
            self.fields[name].strip = False

    def clean_workloads(self):
        workloads = self.cleaned_data["workloads"]
        if not isinstance(workloads, list) or not all(isinstance(w, dict) for w in workloads):
            raise ValidationError("Workloads must be a JSON list of objects.")
        return workloads

    def clean(self):
        data = super().clean()
        # Browsers send a textarea's lines ending in CRLF; the catalog's files end in LF.
        for name in _SOURCE_FIELDS:
            if isinstance(data.get(name), str):
                data[name] = data[name].replace("\r\n", "\n")
        if not self.errors and data.get("task") is not None:
            task_version_validate(task=data["task"], **measured_fields(data))
        return data


def measured_fields(data: dict) -> dict:
    return {field: data[field] for field in MEASURED_FIELDS}


@admin.register(TaskVersion)
class TaskVersionAdmin(admin.ModelAdmin):
    """Versions are immutable; "Add" makes a new version of a task from edited content.

    The add form is prefilled from the task's current version (`?task=<id>`);
    saving calls `task_version_update`, which keeps the current version when
    nothing measured changed.
    """

    list_display = ["__str__", "task", "number", "content_hash", "created_at"]
    list_filter = ["task"]
    inlines = [WorkloadInline]
    readonly_fields = ["task", "number", "content_hash", *_VERSION_FIELDS, "created_at"]

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def add_view(self, request, form_url="", extra_context=None):
        """A new version is always made from a task's current one: opened without
        `?task=`, the task comes from the list's filter, or the curator picks it first."""
        if request.method == "GET" and not request.GET.get("task"):
            task_id = _task_filter(request.GET.get("_changelist_filters", ""))
            if task_id is not None:
                return HttpResponseRedirect(f"{request.path}?{urlencode({'task': task_id})}")
            context = {
                **self.admin_site.each_context(request),
                "opts": self.model._meta,
                "title": "Add task version: choose the task",
                "tasks": Task.objects.select_related("current_version").order_by("slug"),
            }
            return TemplateResponse(request, "admin/task_catalog/choose_task.html", context)
        return super().add_view(request, form_url, extra_context)

    def get_readonly_fields(self, request, obj=None):
        return self.readonly_fields if obj is not None else []

    def get_inlines(self, request, obj):
        return self.inlines if obj is not None else []

    def get_form(self, request, obj=None, change=False, **kwargs):
        if obj is None:
            kwargs["form"] = NewTaskVersionForm
        return super().get_form(request, obj, change=change, **kwargs)

    def get_fields(self, request, obj=None):
        if obj is None:
            return [*NewTaskVersionForm.Meta.fields, "workloads"]
        return self.readonly_fields

    def get_changeform_initial_data(self, request):
        initial = super().get_changeform_initial_data(request)
        task = Task.objects.select_related("current_version").filter(pk=initial.get("task")).first()
        version = task.current_version if task else None
        if version is not None:
            # Every measured field: one left out would be saved empty in the new version.
            initial.update({field: getattr(version, field) for field in _VERSION_FIELDS})
            initial["workloads"] = [
                {key: getattr(w, key) for key in WORKLOAD_FIELDS} for w in version.workloads.all()
            ]
        return initial

    def save_model(self, request, obj, form, change):
        # The form's clean() ran task_version_validate, so this write does not fail on input.
        data = form.cleaned_data
        version = task_version_update(task=data["task"], **measured_fields(data))
        # The admin reports and redirects to the version the service chose.
        obj.pk = version.pk
        obj.refresh_from_db()
