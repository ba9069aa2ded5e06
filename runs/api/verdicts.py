"""REST API of a run's cell verdicts: `GET` what the run page shows, `POST` a moderator's
verdict on one task (the run page's form, for scripts)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.auth import HasScope, authenticated_user
from moderation.models import AuditVerdict
from moderation.selectors import cell_verdicts_for
from moderation.services import cell_verdict_set
from runs.selectors import run_get_for_viewer
from task_catalog.models import Task


class CellVerdictSerializer(serializers.Serializer):
    task = serializers.SlugField(help_text="The task's slug: the cell is (this run, the task).")
    verdict = serializers.ChoiceField(choices=AuditVerdict.choices)
    reason = serializers.CharField(help_text="Why; the public run page shows it.")
    quote = serializers.CharField(
        required=False, allow_blank=True, default="", help_text="The evidence, quoted."
    )
    line = serializers.IntegerField(
        required=False, allow_null=True, default=None, min_value=1, max_value=2**31 - 1
    )
    reviewed = serializers.BooleanField(
        read_only=True, help_text="False for the scanners' nomination."
    )
    updated_at = serializers.DateTimeField(read_only=True)


def _cell(cell: Any) -> dict[str, Any]:
    return {
        "task": cell.task.slug,
        "verdict": cell.verdict,
        "reason": cell.reason,
        "quote": cell.quote,
        "line": cell.line,
        "reviewed": cell.decided_by_id is not None,
        "updated_at": cell.updated_at,
    }


class RunVerdictsApi(APIView):
    """`GET`: the cell verdicts of a run the caller may see. `POST`: a moderator (staff)
    gives one cell its verdict, logged in the moderation log."""

    def get_permissions(self) -> list[Any]:
        return [AllowAny()] if self.request.method == "GET" else [HasScope("moderate")]

    @extend_schema(
        responses={
            200: CellVerdictSerializer(many=True),
            404: OpenApiResponse(description="No such run, or not one the caller may see."),
        }
    )
    def get(self, request: Request, pk: int) -> Response:
        run = run_get_for_viewer(user=request.user, pk=pk)
        cells = sorted(cell_verdicts_for(run=run).values(), key=lambda c: c.task.slug)
        return Response([_cell(c) for c in cells])

    @extend_schema(
        request=CellVerdictSerializer,
        responses={
            201: CellVerdictSerializer,
            400: OpenApiResponse(description="A field is wrong, or the run has no such task."),
            401: OpenApiResponse(description="No or an invalid token."),
            403: OpenApiResponse(
                description="The caller is not a moderator (staff), or its token lacks the "
                "`moderate` scope."
            ),
            404: OpenApiResponse(description="No such run, or not one the caller may see."),
        },
    )
    def post(self, request: Request, pk: int) -> Response:
        run = run_get_for_viewer(user=request.user, pk=pk)
        serializer = CellVerdictSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        task = Task.objects.filter(slug=data["task"]).first()
        if task is None:
            raise ValidationError({"task": f"No task {data['task']!r} in the catalog."})
        try:
            cell = cell_verdict_set(
                actor=authenticated_user(request.user),
                run=run,
                task=task,
                verdict=data["verdict"],
                reason=data["reason"],
                quote=data["quote"],
                line=data["line"],
            )
        except DjangoPermissionDenied as exc:
            raise PermissionDenied(str(exc)) from exc
        except DjangoValidationError as exc:
            raise ValidationError(
                exc.message_dict if hasattr(exc, "error_dict") else exc.messages
            ) from exc
        return Response(_cell(cell), status=status.HTTP_201_CREATED)
