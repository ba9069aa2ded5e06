"""REST API of runs (token auth): upload a bundle, read a run with its twin, and its traces
(`runs.api.traces`)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import HttpRequest
from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.auth import HasScope, authenticated_user
from core.pagination import paginated
from core.sizes import too_large_message
from moderation.models import CellVerdict
from moderation.selectors import cell_verdicts_for, moderation_actions_for
from moderation.services import moderation_act
from runformat import BundleError
from runs.api.traces import trace_summary_data
from runs.audit import RedactionUnconfirmed
from runs.models import Run, RunState
from runs.selectors import (
    RunDetail,
    TaskResult,
    run_detail,
    run_get_for_viewer,
    run_list_for_viewer,
)
from runs.services import (
    BundleRejected,
    StorageFull,
    run_upload,
    run_visibility_set,
)
from scoring.selectors import run_scores_view
from submissions.api import (
    ERRORS,
    ModerationActionSerializer,
    quota_refusal,
)
from submissions.quotas import QuotaExceeded

ERROR_BODY = inline_serializer(
    "RunBundleErrors",
    {
        "errors": serializers.ListField(
            child=inline_serializer(
                "RunBundleError",
                {
                    "file": serializers.CharField(allow_null=True),
                    "line": serializers.IntegerField(allow_null=True),
                    "message": serializers.CharField(),
                },
            )
        )
    },
)


class RunUploadSerializer(serializers.Serializer):
    bundle = serializers.FileField(help_text="The run bundle (zip), see docs/run-format.md.")
    is_public = serializers.BooleanField(required=False, default=False)
    confirm_redaction = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Publish a bundle whose traces or proposals hold secrets: the public sees "
        "them redacted (docs/security.md). Without it such a public upload is a 400 that "
        "lists each secret.",
    )


class RunVisibilitySerializer(serializers.Serializer):
    is_public = serializers.BooleanField()
    confirm_redaction = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Publish a run that holds secrets, the public seeing them redacted; "
        "without it such a publish is a 409 that lists each secret.",
    )


class _NotABoolean(ValueError):
    pass


def _flag(request: Request, name: str) -> bool:
    try:
        return bool(serializers.BooleanField().to_internal_value(request.POST.get(name, False)))
    except serializers.ValidationError as exc:
        raise _NotABoolean(f"`{name}` must be true or false.") from exc


def _errors(errors: list[BundleError] | tuple[BundleError, ...]) -> Response:
    return Response({"errors": [e.as_dict() for e in errors]}, status=status.HTTP_400_BAD_REQUEST)


def _result(result: TaskResult | None, request: HttpRequest) -> dict[str, Any] | None:
    if result is None:
        return None
    trace = result.trace
    return {
        "status": result.status,
        "is_finished": result.is_finished,
        "speedup": result.speedup,
        "speedup_comparable": result.comparable,
        "submission": result.submission_id,
        "submission_url": request.build_absolute_uri(
            reverse("submission-api-detail", args=[result.submission_id])
        )
        if result.submission_id
        else None,
        "trace": None if trace is None else trace_summary_data(trace, request),
        "proposal_html": str(result.proposal) if result.proposal is not None else None,
    }


def _verdict(cell: CellVerdict | None) -> dict[str, Any] | None:
    if cell is None:
        return None
    return {
        "verdict": cell.verdict,
        "quote": cell.quote,
        "reason": cell.reason,
        "line": cell.line,
        "reviewed": cell.decided_by_id is not None,
        "updated_at": cell.updated_at,
    }


def run_detail_data(detail: RunDetail, request: HttpRequest) -> dict[str, Any]:
    """The JSON of `GET /api/runs/<id>/`: what the run page shows."""
    run = detail.run
    verdicts = cell_verdicts_for(run=run)
    return {
        "id": run.pk,
        "url": request.build_absolute_uri(reverse("runs:detail", args=[run.pk])),
        "owner": run.owner.username,
        "model": run.model,
        "agent": run.agent,
        "levels": run.levels,
        "condition": run.condition,
        "turn_budget": run.turn_budget,
        "hardware": run.hardware,
        "catalog_version": run.catalog_version,
        "notes": run.notes,
        "guidance_versions": run.guidance_versions,
        "is_public": run.is_public,
        "moderation": run.moderation,
        "is_example": run.is_example,
        "example_label": detail.example_label,
        "state": detail.state,
        "errors": run.errors,
        "created_at": run.created_at,
        "finished_at": run.finished_at,
        "pair": detail.pair.pk if detail.pair else None,
        "pair_state": detail.pair_state,
        "correct": detail.correct,
        "progress": detail.progress.as_dict() if detail.progress else None,
        "scores": run_scores_view(run=run, pair=detail.pair).as_dict(),
        "tasks": [
            {
                "task": row.task.slug,
                "verdict": _verdict(verdicts.get(row.task.pk)),
                "result": _result(row.mine, request),
                "pair_result": _result(row.twin, request),
            }
            for row in detail.rows
        ],
    }


class RunListItemSerializer(serializers.ModelSerializer):
    owner = serializers.CharField(source="owner.username", read_only=True)
    pair = serializers.IntegerField(source="pair_id", allow_null=True, read_only=True)

    class Meta:
        model = Run
        fields = (
            "id",
            "owner",
            "model",
            "agent",
            "condition",
            "levels",
            "turn_budget",
            "hardware",
            "catalog_version",
            "state",
            "is_public",
            "moderation",
            "is_example",
            "pair",
            "created_at",
            "finished_at",
        )


class RunListCreateApi(APIView):
    """`GET`: the runs the caller may see, newest first. `POST`: upload a bundle."""

    parser_classes = [MultiPartParser, FormParser]

    def get_permissions(self) -> list[Any]:
        return [AllowAny()] if self.request.method == "GET" else [HasScope("upload")]

    @extend_schema(
        operation_id="runs_list",
        responses=paginated(RunListItemSerializer, name="PaginatedRunList"),
    )
    def get(self, request: Request) -> Response:
        paginator = PageNumberPagination()
        page = paginator.paginate_queryset(
            run_list_for_viewer(user=request.user), request, view=self
        )
        return paginator.get_paginated_response(RunListItemSerializer(page, many=True).data)

    @extend_schema(
        request={"multipart/form-data": RunUploadSerializer},
        responses={
            201: inline_serializer(
                "RunCreated", {"id": serializers.IntegerField(), "url": serializers.URLField()}
            ),
            202: OpenApiResponse(
                inline_serializer(
                    "RunValidating",
                    {
                        "id": serializers.IntegerField(),
                        "url": serializers.URLField(),
                        "api_url": serializers.URLField(),
                        "state": serializers.CharField(),
                    },
                ),
                description="A bundle over D2K_RUN_SYNC_VALIDATION_BYTES: stored, and "
                "validated in the background. Poll `api_url` until `state` is no longer "
                "`validating`: then `evaluating` (accepted as after a 201) or `rejected` with "
                "`errors`, the problems a 400 would have listed.",
            ),
            400: OpenApiResponse(ERROR_BODY, description="Every problem of the bundle."),
            401: ERRORS[401],
            403: ERRORS[403],
            413: OpenApiResponse(description="The request body is over the size limit."),
            429: OpenApiResponse(description="Over a quota; Retry-After says when to retry."),
            507: OpenApiResponse(description="The server's disk is full; nothing was stored."),
        },
    )
    def post(self, request: Request) -> Response:
        upload = request.FILES.get("bundle")
        if upload is None:
            message = "Send the run bundle (a zip) as the multipart field `bundle`."
            return _errors([BundleError(None, None, message)])
        try:
            is_public = _flag(request, "is_public")
            confirm_redaction = _flag(request, "confirm_redaction")
        except _NotABoolean as exc:
            return _errors([BundleError(None, None, str(exc))])
        limit = settings.D2K_RUN_BUNDLE_MAX_BYTES
        if upload.size > limit:
            message = too_large_message(what="The bundle", size=upload.size, limit=limit)
            return _errors([BundleError(None, None, message)])
        data = upload.read(limit + 1)
        try:
            run = run_upload(
                owner=authenticated_user(request.user),
                data=data,
                is_public=is_public,
                confirm_redaction=confirm_redaction,
            )
        except BundleRejected as exc:
            return _errors(exc.errors)
        except QuotaExceeded as exc:
            raise quota_refusal(exc) from exc
        except StorageFull as exc:
            return Response({"detail": exc.message}, status=status.HTTP_507_INSUFFICIENT_STORAGE)
        url = request.build_absolute_uri(reverse("runs:detail", args=[run.pk]))
        if run.state == RunState.VALIDATING:
            api_url = request.build_absolute_uri(reverse("run-api-detail", args=[run.pk]))
            body = {"id": run.pk, "url": url, "api_url": api_url, "state": run.state}
            return Response(body, status=status.HTTP_202_ACCEPTED)
        return Response({"id": run.pk, "url": url}, status=status.HTTP_201_CREATED)


class RunDetailApi(APIView):
    """`GET`: the run. `PATCH {"is_public": …}`: the owner publishes or unpublishes it
    (with its kernels)."""

    def get_permissions(self) -> list[Any]:
        return [AllowAny()] if self.request.method == "GET" else [HasScope("upload")]

    @extend_schema(
        responses=OpenApiResponse(
            description="The run page as JSON: the manifest, the derived state, `pair` (the "
            "twin's id), `scores` (the run's scores, its `twin`'s and the `uplift`, see "
            "docs/scores.md), and per task `verdict` (the moderators' cell verdict with its "
            "quote and reason, null before any), `result` and `pair_result` (status, speedup, "
            "submission, proposal HTML, and the trace summary with its links: `url` the "
            "trace page, `api_url` its events, `raw_api_url` the uploaded file). While the "
            "run is `evaluating`, `progress` says where its evaluations stand (null "
            "otherwise): `total`, `finished`, `running`, `waiting`; `hardware` (the pool); "
            "`queue_position` (the pool's evaluations ahead of its first waiting one, 0 "
            "while one of its own runs, null when none waits); `eta_seconds` to its last "
            "verdict and how it was estimated: `per_evaluation_s` (median time of one "
            "evaluation), `slots` (evaluations the pool's live workers run at once) and "
            "`basis` (null `eta_seconds`: why there is no estimate).",
        )
    )
    def get(self, request: Request, pk: int) -> Response:
        run = run_get_for_viewer(user=request.user, pk=pk)
        return Response(run_detail_data(run_detail(run=run, user=request.user), request))

    @extend_schema(
        request=RunVisibilitySerializer,
        responses={
            200: OpenApiResponse(),
            409: OpenApiResponse(
                description="The run holds secrets and `confirm_redaction` was not sent: "
                "`detail` says so, `secrets` lists each (file, line, masked quote)."
            ),
            **ERRORS,
        },
    )
    def patch(self, request: Request, pk: int) -> Response:
        run = run_get_for_viewer(user=request.user, pk=pk)
        serializer = RunVisibilitySerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            run_visibility_set(
                run=run,
                user=authenticated_user(request.user),
                is_public=serializer.validated_data["is_public"],
                confirm_redaction=serializer.validated_data["confirm_redaction"],
            )
        except DjangoPermissionDenied as exc:
            raise PermissionDenied(str(exc)) from exc
        except RedactionUnconfirmed as exc:
            secrets = [{"file": h.file, "line": h.line, "quote": h.quote} for h in exc.secrets.hits]
            return Response(
                {"detail": str(exc), "secrets": secrets}, status=status.HTTP_409_CONFLICT
            )
        return Response(run_detail_data(run_detail(run=run, user=request.user), request))


class RunModerationApi(APIView):
    """`GET`: the moderators' actions on a run the caller may see. `POST`: a moderator
    (staff) acts on the run and each of its kernels."""

    def get_permissions(self) -> list[Any]:
        # A token needs the `moderate` scope: an `upload` or `judge` token of a staff user
        # does not moderate.
        return [AllowAny()] if self.request.method == "GET" else [HasScope("moderate")]

    @extend_schema(responses={200: ModerationActionSerializer(many=True), 404: ERRORS[404]})
    def get(self, request: Request, pk: int) -> Response:
        run = run_get_for_viewer(user=request.user, pk=pk)
        return Response(ModerationActionSerializer(moderation_actions_for(run=run), many=True).data)

    @extend_schema(
        request=ModerationActionSerializer, responses={201: ModerationActionSerializer, **ERRORS}
    )
    def post(self, request: Request, pk: int) -> Response:
        run = run_get_for_viewer(user=request.user, pk=pk)
        serializer = ModerationActionSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            action = moderation_act(
                actor=authenticated_user(request.user), run=run, **serializer.validated_data
            )
        except DjangoValidationError as exc:
            raise ValidationError(exc.messages) from exc
        except DjangoPermissionDenied as exc:
            raise PermissionDenied(str(exc)) from exc
        return Response(ModerationActionSerializer(action).data, status=status.HTTP_201_CREATED)
