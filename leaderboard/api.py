"""Read-only API of the rankings: the same selectors as the pages."""

from __future__ import annotations

from collections.abc import Mapping

from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers
from rest_framework.permissions import AllowAny
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from task_catalog.selectors import task_get_public

from .caching import versioned
from .filters import filters_parse, form_errors
from .paper import paper_table, table_latex
from .selectors import task_ranking
from .selectors.board import PAIR_SORT_KEYS, SORT_KEYS, leaderboard_table, pairs_table
from .selectors.entries import board_scope
from .tables import CSVRenderer


class BaselineRowSerializer(serializers.Serializer):
    name = serializers.CharField()
    ref_us = serializers.FloatField(
        allow_null=True, help_text="Median of what the expert was timed against, µs."
    )
    expert_us = serializers.FloatField(allow_null=True, help_text="Expert median, µs.")
    speedup = serializers.FloatField(
        allow_null=True, help_text="Time of what it was timed against / expert time."
    )
    sol_percent = serializers.FloatField(allow_null=True, help_text="% of speed of light.")
    tflops = serializers.FloatField(allow_null=True)
    tbps = serializers.FloatField(allow_null=True)
    ref_host_bound = serializers.BooleanField(
        help_text="Most of the baseline's timed calls outlasted their launch cover: its time, "
        "and the speedup, depend on the host's CPU as well as the GPU."
    )


class CatalogBarSerializer(serializers.Serializer):
    meets = serializers.BooleanField(
        allow_null=True, help_text="Whether the expert meets the catalog's bar; null: not judged."
    )
    sentence = serializers.CharField(help_text="What it reaches, in one line (markdown).")


class ExpertBaselineSerializer(serializers.Serializer):
    owner = serializers.CharField()
    submission_id = serializers.IntegerField()
    evaluation_id = serializers.IntegerField()
    status = serializers.CharField()
    gpu = serializers.CharField()
    driver = serializers.CharField()
    torch = serializers.CharField()
    triton = serializers.CharField()
    cuda = serializers.CharField()
    evaluator_version = serializers.CharField()
    finished_at = serializers.DateTimeField()
    timed_against = serializers.ChoiceField(
        choices=["baseline.py", "reference.py"],
        help_text="The task's baseline.py where it has one, else its reference.py.",
    )
    rows = BaselineRowSerializer(many=True, help_text="Public timed workloads.")
    geomean_speedup = serializers.FloatField(allow_null=True)
    geomean_sol_percent = serializers.FloatField(allow_null=True)
    catalog_bar = CatalogBarSerializer()


class RankingRowSerializer(serializers.Serializer):
    rank = serializers.IntegerField(help_text="Rank among the results on the same GPU.")
    hardware = serializers.CharField(help_text="The GPU the result was timed on.")
    owner = serializers.CharField()
    run_id = serializers.IntegerField(allow_null=True)
    run_label = serializers.CharField()
    is_example = serializers.BooleanField(help_text="Generated or hand-written example data.")
    is_expert = serializers.BooleanField()
    status = serializers.CharField(help_text="`correct`, or `flagged` when cleared by an admin.")
    submission_id = serializers.IntegerField()
    evaluation_id = serializers.IntegerField()
    speedup = serializers.FloatField(help_text="Geometric mean of the timed workloads' speedups.")
    workload_speedups = serializers.DictField(child=serializers.FloatField())
    finished_at = serializers.DateTimeField()
    expert_fraction = serializers.FloatField(
        allow_null=True,
        help_text="Task speedup / the expert's on the same GPU; null where it has none there.",
    )


@extend_schema(
    parameters=[
        OpenApiParameter("hardware", OpenApiTypes.STR, description="Only results on this GPU.")
    ]
)
class TaskRankingAPI(generics.ListAPIView):
    """Best counting cuda-mode result per run or user on the task's current version,
    ranked per GPU (results on different GPUs are never ranked together)."""

    serializer_class = RankingRowSerializer
    permission_classes = [AllowAny]
    pagination_class = None
    filter_backends: list = []

    def get_queryset(self):
        task = task_get_public(slug=self.kwargs["slug"])
        if task is None:
            raise Http404(f"No task {self.kwargs['slug']!r} in the catalog.")
        return task_ranking(task=task, hardware=self.request.query_params.get("hardware"))


class LeaderboardAPI(APIView):
    """One row per entry (the runs of one model, agent and condition) of one catalog
    version on one GPU kind (the newest version and its most common GPU unless
    `catalog_version` and `hardware` say), with `attempts`, each score `M` and `M_ci`
    ([low, high], null with one attempt), `rank` and `tied`; the same filters as the
    page. `?format=csv` answers the same rows as `text/csv`."""

    permission_classes = [AllowAny]
    renderer_classes = [JSONRenderer, CSVRenderer]

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request):
        filters, form = filters_parse(request.query_params, sort_keys=SORT_KEYS)
        if form.errors:
            return Response({"detail": form_errors(form)}, status=400)
        table = versioned(
            name="leaderboard-table",
            key=filters.query(),
            build=lambda: leaderboard_table(filters=board_scope(filters=filters)),
        )
        return Response(table.records())


class LeaderboardPairedAPI(APIView):
    """The paired view: each entry without guidance beside each guided entry of the same
    model, agent, catalog version and GPU kind, with per score `M` the uplift `M_uplift`
    and its paired bootstrap interval `uplift_M_ci`. Same filters as the leaderboard;
    `?format=csv` for CSV."""

    permission_classes = [AllowAny]
    renderer_classes = [JSONRenderer, CSVRenderer]

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request):
        filters, form = filters_parse(request.query_params, sort_keys=PAIR_SORT_KEYS)
        if form.errors:
            return Response({"detail": form_errors(form)}, status=400)
        table = versioned(
            name="paired-table",
            key=filters.query(),
            build=lambda: pairs_table(filters=board_scope(filters=filters)),
        )
        return Response(table.records())


class LatexRenderer(BaseRenderer):
    """`?format=latex` on the paper table: its rows as a LaTeX (booktabs) table."""

    media_type = "application/x-latex"
    format = "latex"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        if isinstance(data, Mapping):  # an error: {"detail": ...}
            return f"% {data.get('detail', '')}\n"
        return table_latex(list(data or []))


class LeaderboardPaperAPI(APIView):
    """The paper's table for the entries the filters choose (the leaderboard's filters):
    per model, agent and guidance, each score without and with guidance, the uplift and
    `uplift_<M>_ci`. `?format=csv` for CSV, `?format=latex` for a LaTeX table."""

    permission_classes = [AllowAny]
    renderer_classes = [JSONRenderer, CSVRenderer, LatexRenderer]

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request):
        filters, form = filters_parse(request.query_params, sort_keys=PAIR_SORT_KEYS)
        if form.errors:
            return Response({"detail": form_errors(form)}, status=400)
        table = versioned(
            name="paper-table",
            key=filters.query(),
            build=lambda: paper_table(filters=board_scope(filters=filters)),
        )
        return Response(table.records())
