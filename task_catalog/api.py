"""Read-only, public API of the catalog. Hidden workloads never appear here."""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import generics, serializers
from rest_framework.permissions import AllowAny

from leaderboard.api import ExpertBaselineSerializer
from leaderboard.selectors import task_expert_baseline

from .models import DesignProperty, Guidance, Task, Workload
from .selectors import task_get_public, task_list, task_public_workloads


class WorkloadSerializer(serializers.ModelSerializer):
    class Meta:
        model = Workload
        fields = ["name", "role", "params", "flops", "bytes", "flops_formula", "bytes_formula"]


class GuidanceSerializer(serializers.ModelSerializer):
    depends_on = serializers.ListField(child=serializers.CharField())

    class Meta:
        model = Guidance
        fields = ["level", "text", "depends_on"]


class DesignPropertySerializer(serializers.ModelSerializer):
    depends_on = serializers.ListField(child=serializers.CharField())
    detector = serializers.DictField()

    class Meta:
        model = DesignProperty
        fields = ["key", "level", "title", "description", "weight", "depends_on", "detector"]


class TaskSummarySerializer(serializers.ModelSerializer):
    version = serializers.IntegerField(source="current_version.number")
    timed_workloads = serializers.IntegerField()
    url = serializers.HyperlinkedIdentityField(
        view_name="task-api-detail", lookup_field="slug", read_only=True
    )

    class Meta:
        model = Task
        fields = ["slug", "title", "category", "version", "timed_workloads", "url"]


class TaskDetailSerializer(serializers.ModelSerializer):
    version = serializers.IntegerField(source="current_version.number")
    workloads = serializers.SerializerMethodField()
    baseline = serializers.SerializerMethodField(
        help_text="The expert implementation's latest GPU result on this version, or null."
    )
    guidance = GuidanceSerializer(many=True)
    properties = DesignPropertySerializer(many=True)

    class Meta:
        model = Task
        fields = [
            "slug",
            "title",
            "category",
            "statement",
            "version",
            "workloads",
            "guidance",
            "properties",
            "baseline",
        ]

    @extend_schema(responses=WorkloadSerializer(many=True))
    def get_workloads(self, task: Task) -> list[dict]:
        # Only the public workloads the selector prefetched: never role=hidden nor hidden checks.
        # many=True makes a ListSerializer (data: a list); the stubs type it as the child's.
        return WorkloadSerializer(task_public_workloads(task), many=True).data  # type: ignore[return-value]

    @extend_schema_field(ExpertBaselineSerializer(allow_null=True))
    def get_baseline(self, task: Task) -> dict | None:
        baseline = task_expert_baseline(task=task)
        return None if baseline is None else ExpertBaselineSerializer(baseline).data


class TaskListAPI(generics.ListAPIView):
    """Tasks of the catalog with their current version number."""

    serializer_class = TaskSummarySerializer
    permission_classes = [AllowAny]
    filterset_fields = ["category"]

    def get_queryset(self):
        return task_list()


class TaskDetailAPI(generics.RetrieveAPIView):
    """One task: statement, public workloads, guidance by level, design properties and the
    expert's GPU baseline."""

    serializer_class = TaskDetailSerializer
    permission_classes = [AllowAny]
    queryset = Task.objects.none()  # for the schema; get_object goes through the selector

    def get_object(self) -> Task:
        task = task_get_public(slug=self.kwargs["slug"])
        if task is None:
            raise Http404(f"No task {self.kwargs['slug']!r} in the catalog.")
        return task
