"""Read-only, public API of the catalog. Hidden workloads never appear here."""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
)
from rest_framework import generics, serializers, status
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from leaderboard.api import ExpertBaselineSerializer
from leaderboard.selectors import task_expert_baseline

from .models import DesignProperty, Guidance, Task, Workload
from .prompts import prompt_levels_parse, task_prompt
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
    reference_source = serializers.CharField(
        source="current_version.reference_source",
        help_text="The version's PyTorch reference (reference.py): what outputs are checked "
        "against.",
    )
    seeds = serializers.IntegerField(
        source="current_version.seeds",
        help_text="Fresh secret seeds drawn per workload per evaluation (a count).",
    )
    inplace = serializers.BooleanField(
        source="current_version.inplace", help_text="The output is written in place."
    )
    forbidden_ops = serializers.ListField(
        source="current_version.forbidden_ops",
        child=serializers.CharField(),
        help_text="Library ops a submission may not call: those that compute the answer.",
    )
    timed_against = serializers.CharField(
        source="current_version.timed_against",
        help_text="What speedups are measured against: `baseline.py` where the version has "
        "one, else `reference.py`.",
    )
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
            "reference_source",
            "seeds",
            "inplace",
            "forbidden_ops",
            "timed_against",
            "workloads",
            "guidance",
            "properties",
            "baseline",
        ]

    @extend_schema(responses=WorkloadSerializer(many=True))
    def get_workloads(self, task: Task) -> list[dict]:
        # Only the public workloads the selector prefetched: nothing marked hidden, no untimed one.
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
    """One task: statement, the current version's reference and measurement settings,
    public workloads, guidance by level, design properties and the expert's GPU baseline."""

    serializer_class = TaskDetailSerializer
    permission_classes = [AllowAny]
    queryset = Task.objects.none()  # for the schema; get_object goes through the selector

    def get_object(self) -> Task:
        task = task_get_public(slug=self.kwargs["slug"])
        if task is None:
            raise Http404(f"No task {self.kwargs['slug']!r} in the catalog.")
        return task


class TaskPromptSerializer(serializers.Serializer):
    task = serializers.CharField(source="slug")
    version = serializers.IntegerField(help_text="The catalog version of the task.")
    content_hash = serializers.CharField(
        help_text="sha256 of the version's measured content (what results are tied to)."
    )
    levels = serializers.ListField(child=serializers.CharField())
    condition = serializers.CharField(help_text="`none`, or the levels joined by `+`.")
    sha256 = serializers.CharField(
        help_text="sha256 of `text` (UTF-8): what a run manifest's `prompt_sha256` records."
    )
    text = serializers.CharField(help_text="The prompt, markdown.")
    guidance_sha256 = serializers.CharField(
        source="guidance.sha256",
        help_text="sha256 of the task's guidance version (guidance texts and design "
        "properties): what a run records as the guidance it was given.",
    )
    guidance_version = serializers.IntegerField(
        source="guidance.number",
        allow_null=True,
        help_text="The guidance version's number (the task page's guidance history).",
    )


class TaskPromptAPI(APIView):
    """The task prompt an agent harness gives its model: statement, reference, public
    workloads, the submission contract, and the guidance of the chosen levels (last)."""

    permission_classes = [AllowAny]

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "levels",
                OpenApiTypes.STR,
                description="Comma-separated guidance levels, e.g. `L1,L2`; none for the "
                "run without guidance.",
            )
        ],
        responses={
            200: TaskPromptSerializer,
            400: OpenApiResponse(description="An unknown guidance level."),
            404: OpenApiResponse(description="No such task."),
        },
    )
    def get(self, request: Request, slug: str) -> Response:
        try:
            levels = prompt_levels_parse(request.query_params.get("levels"))
        except ValueError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
        task = task_get_public(slug=slug)
        if task is None:
            raise Http404(f"No task {slug!r} in the catalog.")
        return Response(TaskPromptSerializer(task_prompt(task=task, levels=levels)).data)
