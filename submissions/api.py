"""REST API of submissions (token auth): upload, list one's own, read one with its evaluation."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.auth import authenticated_user
from evaluator.selectors import (
    RESULT_FIELDS,
    evaluation_job_view,
    evaluation_latest_for_submission,
    evaluation_view_for_viewer,
)
from submissions.models import Submission
from submissions.selectors import submission_get_for_viewer, submission_list_for_owner
from submissions.services import submission_upload
from task_catalog.models import Task

# Copied from the Evaluation row as they are; message, log and results go through
# evaluation_view_for_viewer, which hides hidden workloads from non-staff.
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
    ref_median_ms = serializers.FloatField(allow_null=True)
    speedup = serializers.FloatField(allow_null=True)
    achieved_tflops = serializers.FloatField(allow_null=True)
    achieved_tbps = serializers.FloatField(allow_null=True)
    sol_fraction = serializers.FloatField(allow_null=True)
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
            "created_at",
        )


class SubmissionListItemSerializer(SubmissionSerializer):
    status = serializers.CharField(source="latest_status", allow_null=True)

    class Meta(SubmissionSerializer.Meta):
        fields = (*SubmissionSerializer.Meta.fields, "status")


class SubmissionDetailSerializer(SubmissionSerializer):
    evaluation = serializers.SerializerMethodField()

    class Meta(SubmissionSerializer.Meta):
        fields = (*SubmissionSerializer.Meta.fields, "source", "evaluation")

    @extend_schema(responses=EvaluationSerializer(allow_null=True))
    def get_evaluation(self, submission: Submission) -> dict[str, Any] | None:
        evaluation = evaluation_latest_for_submission(submission=submission)
        if evaluation is None:
            return None
        view = evaluation_view_for_viewer(evaluation=evaluation, user=self.context["user"])
        data = {
            "id": evaluation.pk,
            **{f: getattr(evaluation, f) for f in EVALUATION_FIELDS},
            "message": view.message,
            "log": view.log,
            "results": view.results,
            "job": evaluation_job_view(evaluation=evaluation).as_dict(),
        }
        return EvaluationSerializer(data).data


class SubmissionCreateSerializer(serializers.Serializer):
    task = serializers.CharField(help_text="The task's slug.")
    file = serializers.FileField(required=False, help_text="Multipart upload of the .py file.")
    # The stubs see Field.source (a str) here; DRF's serializer metaclass moves declared
    # fields off the class, so the API's `source` field shadows nothing at run time.
    source = serializers.CharField(  # type: ignore[assignment]
        required=False, allow_blank=True, trim_whitespace=False, help_text="Or the source, as JSON."
    )
    filename = serializers.CharField(required=False, allow_blank=True, max_length=200)
    is_public = serializers.BooleanField(required=False, default=True)

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


class SubmissionListCreateApi(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(responses=SubmissionListItemSerializer(many=True))
    def get(self, request: Request) -> Response:
        paginator = PageNumberPagination()
        page = paginator.paginate_queryset(
            submission_list_for_owner(owner=authenticated_user(request.user)), request, view=self
        )
        return paginator.get_paginated_response(SubmissionListItemSerializer(page, many=True).data)

    @extend_schema(
        request=SubmissionCreateSerializer,
        responses={
            201: SubmissionDetailSerializer,
            200: OpenApiResponse(
                SubmissionDetailSerializer,
                description="The same file for the same task version was uploaded before.",
            ),
            400: OpenApiResponse(description="The upload was refused; the body says why."),
            503: OpenApiResponse(description="The database or the queue is unavailable."),
        },
    )
    def post(self, request: Request) -> Response:
        serializer = SubmissionCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        upload = data.get("file")
        if upload is not None:
            source: str | bytes = upload.read(settings.D2K_MAX_UPLOAD_BYTES + 1)
            filename = data.get("filename") or upload.name
        else:
            source, filename = data["source"], data.get("filename")
        try:
            upload = submission_upload(
                owner=authenticated_user(request.user),
                task=data["task"],
                source=source,
                filename=filename,
                is_public=data["is_public"],
            )
        except DjangoValidationError as exc:
            raise ValidationError(_validation_detail(exc)) from exc
        body = SubmissionDetailSerializer(upload.submission, context={"user": request.user}).data
        # The same file again is the submission already stored: 200 with its id.
        code = status.HTTP_201_CREATED if upload.created else status.HTTP_200_OK
        return Response(body, status=code)


class SubmissionDetailApi(APIView):
    permission_classes = [AllowAny]

    @extend_schema(responses=SubmissionDetailSerializer)
    def get(self, request: Request, pk: int) -> Response:
        submission = submission_get_for_viewer(user=request.user, pk=pk)
        return Response(SubmissionDetailSerializer(submission, context={"user": request.user}).data)
