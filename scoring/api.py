"""REST API of assessments: judges post their verdicts; anyone reads a task's rubric. The
submission API gives a submission's assessed properties with `PropertyResultSerializer`."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.permissions import AllowAny, BasePermission, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.auth import JUDGE_PERMISSION, HasScope, authenticated_user
from core.parsers import CheckedJSONParser
from scoring.models import AssessmentSource
from scoring.selectors import task_rubric
from scoring.services import AssessmentsInvalid, assessment_record


class IsJudge(BasePermission):
    message = f"Recording assessments needs the permission `{JUDGE_PERMISSION}`."

    def has_permission(self, request: Request, view: Any) -> bool:
        return bool(request.user and request.user.has_perm(JUDGE_PERMISSION))


ITEM = inline_serializer(
    "AssessmentItem",
    {
        "kind": serializers.ChoiceField(choices=["implemented", "proposed"]),
        "submission": serializers.IntegerField(required=False, help_text="For `implemented`."),
        "run": serializers.IntegerField(required=False, help_text="For `proposed`."),
        "task": serializers.CharField(required=False, help_text="Task slug, for `proposed`."),
        "property": serializers.CharField(help_text="The property's key."),
        "value": serializers.BooleanField(),
        "rationale": serializers.CharField(),
        "evidence": serializers.JSONField(required=False),
        "judge": serializers.CharField(required=False, help_text="The judge's model or name."),
    },
    many=True,
)


class PropertyOtherSerializer(serializers.Serializer):
    # The stubs see Field.source (a str) here; DRF's serializer metaclass moves declared
    # fields off the class, so a field named `source` shadows nothing at run time.
    source = serializers.ChoiceField(choices=AssessmentSource.choices)  # type: ignore[assignment]
    value = serializers.BooleanField(help_text="Implemented, in this source's view.")
    rationale = serializers.CharField()


class PropertyResultSerializer(serializers.Serializer):
    """One design property of a submission, as the submission's page shows it."""

    key = serializers.CharField()
    level = serializers.CharField()
    title = serializers.CharField()
    weight = serializers.FloatField()
    depends_on = serializers.ListField(
        child=serializers.CharField(), help_text="Keys of the properties it needs."
    )
    implemented = serializers.BooleanField(
        allow_null=True,
        help_text="The effective assessment's value; null: not assessed (counts as not "
        "implemented).",
    )
    credited = serializers.BooleanField(
        help_text="Implemented and every dependency implemented: the weight counts."
    )
    source = serializers.ChoiceField(  # type: ignore[assignment]
        choices=AssessmentSource.choices,
        allow_null=True,
        help_text="Who decided the effective assessment (precedence admin > judge > "
        "counters > detector); null when not assessed.",
    )
    judge = serializers.CharField(help_text="The judge's model or name, for a judge source.")
    rationale = serializers.CharField()
    evidence = serializers.JSONField(help_text="Snippets, names, figures: a list or an object.")
    evidence_kind = serializers.CharField(
        allow_null=True,
        help_text="What the effective machine assessment was drawn from: counter, "
        "executed_instruction, compiled_code or source; null for a judge's, an admin's or none.",
    )
    judge_assessed = serializers.BooleanField(
        help_text="No machine signature: only a judge or an admin can assess the property."
    )
    counters_note = serializers.CharField(
        help_text="Why the hardware counters could not decide a property with a counter "
        "rule; empty otherwise."
    )
    others = PropertyOtherSerializer(
        many=True, help_text="The other sources' assessments, kept beside the effective one."
    )


class AssessmentCreateApi(APIView):
    """Record judge assessments: a JSON list, all stored or none."""

    parser_classes = [CheckedJSONParser]
    permission_classes = [IsAuthenticated, IsJudge]

    def get_permissions(self):
        # A token must carry the judge scope too (a session needs only the permission).
        return [*super().get_permissions(), HasScope("judge")]

    @extend_schema(
        request=ITEM,
        responses={
            201: inline_serializer(
                "AssessmentsStored",
                {"stored": serializers.IntegerField(), "ids": serializers.ListField()},
            ),
            400: OpenApiResponse(description='{"detail", "errors": [{"index", "errors"}]}'),
        },
    )
    def post(self, request: Request) -> Response:
        try:
            stored = assessment_record(items=request.data, user=authenticated_user(request.user))
        except AssessmentsInvalid as exc:
            return Response(
                {"detail": "Nothing was stored: some items are invalid.", "errors": exc.errors},
                status=status.HTTP_400_BAD_REQUEST,
            )
        return Response(
            {"stored": len(stored), "ids": [a.pk for a in stored]}, status=status.HTTP_201_CREATED
        )


class TaskRubricApi(APIView):
    permission_classes = [AllowAny]

    @extend_schema(
        responses=OpenApiResponse(
            description="The task's design properties: key, level, title, weight, "
            "description, depends_on, implemented_when, detector, counters."
        )
    )
    def get(self, request: Request, slug: str) -> Response:
        return Response(task_rubric(slug=slug))
