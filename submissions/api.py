"""REST API of submissions (token auth): upload, list one's own, read one with its
evaluation and its design properties."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied, Throttled, ValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.auth import HasScope, authenticated_user
from core.pagination import paginated
from evaluator.models import Evaluation
from evaluator.selectors import (
    RESULT_FIELDS,
    evaluation_job_view,
    evaluation_latest_for_submission,
)
from leaderboard.selectors import evaluation_expert_fractions
from moderation.models import ModerationKind
from moderation.selectors import moderation_actions_for
from moderation.services import moderation_act
from scoring.api import PropertyResultSerializer
from scoring.selectors import submission_properties_view
from submissions.models import Submission
from submissions.quotas import QuotaExceeded
from submissions.selectors import (
    submission_evaluation_for_viewer,
    submission_get_for_viewer,
    submission_list_for_owner,
)
from submissions.services import submission_upload, submission_visibility_set
from task_catalog.models import Task

# Copied from the Evaluation row as they are; message, log and results go through
# submission_evaluation_for_viewer, which hides hidden workloads from non-staff.
EVALUATION_FIELDS = (
    "status",
    "is_finished",
    "mode",
    "flags",
    "review",
    "environment",
    "evaluator_version",
    "attempts",
    "created_at",
    "started_at",
    "finished_at",
)


class JobSerializer(serializers.Serializer):
    state = serializers.ChoiceField(choices=["queued", "running", "finished"])
    seconds_in_state = serializers.IntegerField(allow_null=True)
    attempt = serializers.IntegerField()
    max_attempts = serializers.IntegerField()
    worker = serializers.CharField(help_text="host:pid of the worker holding the evaluation.")
    heartbeat_at = serializers.DateTimeField(allow_null=True)
    lease_expires_at = serializers.DateTimeField(allow_null=True)
    queue_position = serializers.IntegerField(
        allow_null=True, help_text="Queued evaluations ahead of this one (while queued)."
    )
    next_step = serializers.CharField(help_text="What happens next, in one sentence.")


class WorkloadResultSerializer(serializers.Serializer):
    name = serializers.CharField()
    role = serializers.CharField()
    hidden = serializers.BooleanField()
    status = serializers.CharField()
    message = serializers.CharField()
    max_abs_err = serializers.FloatField(allow_null=True)
    rel_err = serializers.FloatField(allow_null=True)
    median_ms = serializers.FloatField(allow_null=True)
    ref_median_ms = serializers.FloatField(
        allow_null=True,
        help_text="Median of what speedups are measured against: the task's baseline.py "
        "where it has one, else its reference.py.",
    )
    speedup = serializers.FloatField(allow_null=True)
    achieved_tflops = serializers.FloatField(allow_null=True)
    achieved_tbps = serializers.FloatField(allow_null=True)
    sol_fraction = serializers.FloatField(allow_null=True)
    expert_fraction = serializers.FloatField(
        allow_null=True,
        help_text="The catalog's expert median on the same GPU and task version / this "
        "median; null where the expert has no result on that GPU (public timed workloads).",
    )
    timing = serializers.JSONField(allow_null=True)

    class Meta:
        fields = RESULT_FIELDS


class EvaluationSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.CharField()
    is_finished = serializers.BooleanField()
    mode = serializers.CharField()
    message = serializers.CharField()
    flags = serializers.JSONField()
    review = serializers.CharField()
    environment = serializers.JSONField()
    evaluator_version = serializers.CharField()
    attempts = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    log = serializers.CharField()
    results = WorkloadResultSerializer(many=True)
    job = JobSerializer()


class SubmissionSerializer(serializers.ModelSerializer):
    task: serializers.SlugRelatedField[Task] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )
    task_version = serializers.IntegerField(source="task_version.number", read_only=True)
    owner = serializers.CharField(source="owner.username", read_only=True)

    class Meta:
        model = Submission
        fields: tuple[str, ...] = (
            "id",
            "task",
            "task_version",
            "owner",
            "filename",
            "sha256",
            "is_public",
            "moderation",
            "created_at",
        )


class SubmissionListItemSerializer(SubmissionSerializer):
    status = serializers.CharField(source="latest_status", allow_null=True)

    class Meta(SubmissionSerializer.Meta):
        fields = (*SubmissionSerializer.Meta.fields, "status")


class SubmissionDetailSerializer(SubmissionSerializer):
    evaluation = serializers.SerializerMethodField()
    properties = serializers.SerializerMethodField(
        help_text="The task's design properties as the submission page shows them, by "
        "level (L1, L2, L3) and position: whether each is implemented in this code, by "
        "which source, with its rationale and evidence, and the other sources beside it."
    )

    class Meta(SubmissionSerializer.Meta):
        fields = (*SubmissionSerializer.Meta.fields, "source", "evaluation", "properties")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._evaluations: dict[int, Evaluation | None] = {}

    def _latest_evaluation(self, submission: Submission) -> Evaluation | None:
        # The evaluation and the properties (their counters note) read the same row: once.
        if submission.pk not in self._evaluations:
            self._evaluations[submission.pk] = evaluation_latest_for_submission(
                submission=submission
            )
        return self._evaluations[submission.pk]

    @extend_schema(responses=EvaluationSerializer(allow_null=True))
    def get_evaluation(self, submission: Submission) -> dict[str, Any] | None:
        evaluation = self._latest_evaluation(submission)
        if evaluation is None:
            return None
        view = submission_evaluation_for_viewer(evaluation=evaluation, user=self.context["user"])
        fractions = evaluation_expert_fractions(submission=submission, evaluation=evaluation)
        results = [
            {**r, "expert_fraction": None if r["hidden"] else fractions.get(r["name"])}
            for r in view.results
        ]
        data = {
            "id": evaluation.pk,
            **{f: getattr(evaluation, f) for f in EVALUATION_FIELDS},
            "message": view.message,
            "log": view.log,
            "results": results,
            "job": evaluation_job_view(evaluation=evaluation).as_dict(),
        }
        return EvaluationSerializer(data).data

    @extend_schema_field(PropertyResultSerializer(many=True))
    def get_properties(self, submission: Submission) -> list[dict[str, Any]]:
        levels = submission_properties_view(
            submission=submission, evaluation=self._latest_evaluation(submission)
        )
        rows = [view.as_dict() for level in levels for view in level.properties]
        # many=True makes a ListSerializer (data: a list); the stubs type it as the child's.
        return PropertyResultSerializer(rows, many=True).data  # type: ignore[return-value]


class SubmissionCreateSerializer(serializers.Serializer):
    task = serializers.CharField(help_text="The task's slug.")
    file = serializers.FileField(required=False, help_text="Multipart upload of the .py file.")
    # The stubs see Field.source (a str) here; DRF's serializer metaclass moves declared
    # fields off the class, so the API's `source` field shadows nothing at run time.
    source = serializers.CharField(  # type: ignore[assignment]
        required=False, allow_blank=True, trim_whitespace=False, help_text="Or the source, as JSON."
    )
    filename = serializers.CharField(required=False, allow_blank=True, max_length=200)
    is_public = serializers.BooleanField(
        required=False, default=False, help_text="Publish at once (default: private)."
    )

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        has_file, has_source = "file" in data, "source" in data
        if has_file == has_source:
            raise ValidationError(
                {"non_field_errors": ["Send either a `file` (multipart) or a `source` string."]}
            )
        return data


def _validation_detail(error: DjangoValidationError) -> Any:
    if hasattr(error, "error_dict"):
        return error.message_dict
    return {"non_field_errors": error.messages}


class VisibilitySerializer(serializers.Serializer):
    is_public = serializers.BooleanField(help_text="true publishes, false makes it private.")


class ModerationActionSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=ModerationKind.choices)
    reason = serializers.CharField()
    state_after = serializers.CharField(read_only=True)
    created_at = serializers.DateTimeField(read_only=True)


ERRORS = {
    400: OpenApiResponse(description="The request was refused; `detail` or the fields say why."),
    401: OpenApiResponse(description="No or an invalid token."),
    403: OpenApiResponse(description="The token lacks the scope, or the caller the right."),
    404: OpenApiResponse(description="No such submission, or not one the caller may see."),
}


def quota_refusal(exc: QuotaExceeded) -> Throttled:
    """429 with Retry-After (DRF's Throttled) and the quota's own sentence."""
    return Throttled(wait=exc.retry_after_s, detail=exc.message)


class SubmissionListCreateApi(APIView):
    def get_permissions(self) -> list[Any]:
        if self.request.method == "POST":
            return [HasScope("upload")]
        return [IsAuthenticated()]

    @extend_schema(
        operation_id="submissions_list",
        responses={
            200: paginated(SubmissionListItemSerializer, name="PaginatedSubmissionList"),
            401: ERRORS[401],
        },
    )
    def get(self, request: Request) -> Response:
        paginator = PageNumberPagination()
        page = paginator.paginate_queryset(
            submission_list_for_owner(owner=authenticated_user(request.user)), request, view=self
        )
        return paginator.get_paginated_response(SubmissionListItemSerializer(page, many=True).data)

    @extend_schema(
        request={
            "multipart/form-data": SubmissionCreateSerializer,
            "application/json": SubmissionCreateSerializer,
        },
        responses={
            201: SubmissionDetailSerializer,
            200: OpenApiResponse(
                SubmissionDetailSerializer,
                description="The same file for the same task version was uploaded before.",
            ),
            400: OpenApiResponse(description="The upload was refused; the body says why."),
            401: ERRORS[401],
            403: ERRORS[403],
            413: OpenApiResponse(description="The request body is over the size limit."),
            429: OpenApiResponse(description="Over a quota; Retry-After says when to retry."),
            503: OpenApiResponse(description="The database or the queue is unavailable."),
        },
    )
    def post(self, request: Request) -> Response:
        serializer = SubmissionCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        upload = data.get("file")
        size = None
        if upload is not None:
            source: str | bytes = upload.read(settings.D2K_MAX_UPLOAD_BYTES + 1)
            filename, size = data.get("filename") or upload.name, upload.size
        else:
            source, filename = data["source"], data.get("filename")
        try:
            upload = submission_upload(
                owner=authenticated_user(request.user),
                task=data["task"],
                source=source,
                filename=filename,
                is_public=data["is_public"],
                size=size,
            )
        except DjangoValidationError as exc:
            raise ValidationError(_validation_detail(exc)) from exc
        except QuotaExceeded as exc:
            raise quota_refusal(exc) from exc
        body = SubmissionDetailSerializer(upload.submission, context={"user": request.user}).data
        # The same file again is the submission already stored: 200 with its id.
        code = status.HTTP_201_CREATED if upload.created else status.HTTP_200_OK
        return Response(body, status=code)


class SubmissionDetailApi(APIView):
    """`GET`: the submission with its latest evaluation and its design properties.
    `PATCH {"is_public": …}`: the owner publishes or unpublishes it."""

    def get_permissions(self) -> list[Any]:
        return [AllowAny()] if self.request.method == "GET" else [HasScope("upload")]

    @extend_schema(responses={200: SubmissionDetailSerializer, 404: ERRORS[404]})
    def get(self, request: Request, pk: int) -> Response:
        submission = submission_get_for_viewer(user=request.user, pk=pk)
        return Response(SubmissionDetailSerializer(submission, context={"user": request.user}).data)

    @extend_schema(
        request=VisibilitySerializer,
        responses={200: SubmissionDetailSerializer, **ERRORS},
    )
    def patch(self, request: Request, pk: int) -> Response:
        submission = submission_get_for_viewer(user=request.user, pk=pk)
        serializer = VisibilitySerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            submission_visibility_set(
                submission=submission,
                user=authenticated_user(request.user),
                is_public=serializer.validated_data["is_public"],
            )
        except DjangoValidationError as exc:
            raise ValidationError(_validation_detail(exc)) from exc
        except DjangoPermissionDenied as exc:
            raise PermissionDenied(str(exc)) from exc
        return Response(SubmissionDetailSerializer(submission, context={"user": request.user}).data)


class SubmissionModerationApi(APIView):
    """`GET`: the moderators' actions on a submission the caller may see. `POST`: a
    moderator (staff) acts on it: flag, mark_hacked, clear, verify, rerun, withdraw."""

    def get_permissions(self) -> list[Any]:
        # A token needs the `moderate` scope: an `upload` or `judge` token of a staff user
        # does not moderate.
        return [AllowAny()] if self.request.method == "GET" else [HasScope("moderate")]

    @extend_schema(responses={200: ModerationActionSerializer(many=True), 404: ERRORS[404]})
    def get(self, request: Request, pk: int) -> Response:
        submission = submission_get_for_viewer(user=request.user, pk=pk)
        actions = moderation_actions_for(submission=submission)
        return Response(ModerationActionSerializer(actions, many=True).data)

    @extend_schema(
        request=ModerationActionSerializer,
        responses={201: ModerationActionSerializer, **ERRORS},
    )
    def post(self, request: Request, pk: int) -> Response:
        submission = submission_get_for_viewer(user=request.user, pk=pk)
        serializer = ModerationActionSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            action = moderation_act(
                actor=authenticated_user(request.user),
                submission=submission,
                **serializer.validated_data,
            )
        except DjangoValidationError as exc:
            raise ValidationError(_validation_detail(exc)) from exc
        except DjangoPermissionDenied as exc:
            raise PermissionDenied(str(exc)) from exc
        return Response(ModerationActionSerializer(action).data, status=status.HTTP_201_CREATED)
