"""REST API of a run's traces: a page of events as the trace page shows it, and the raw file.

Both go through `trace_get_for_viewer`, as the pages do: a private run's traces are
the owner's (by token or session) and staff's, a 404 to anyone else.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.http import FileResponse, HttpRequest
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.permissions import AllowAny
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from runs.models import Trace
from runs.scanners import problems_redacted
from runs.selectors import (
    EXAMPLE_LABEL,
    TracePage,
    trace_event_types,
    trace_get_for_viewer,
    trace_is_redacted_for,
    trace_page,
    trace_raw_open,
)
from runs.traces import KNOWN_TYPES, MALFORMED, OTHER, PAGE_LINES, TraceEvent

NOT_FOUND = OpenApiResponse(
    description="No such run, not one the caller may see, or no trace of this task in it."
)


def _problems(trace: Trace, request: HttpRequest) -> list[dict[str, Any]]:
    """The trace's problems; their messages redacted where the caller reads the redacted
    copy (a schema message may quote a value)."""
    if trace.redacted_file and trace_is_redacted_for(user=request.user, trace=trace):
        return problems_redacted(trace.problems)
    return trace.problems


def trace_summary_data(trace: Trace, request: HttpRequest) -> dict[str, Any]:
    """A trace's summary with its links: the `trace` of a task result in
    `GET /api/runs/<id>/`, and the `trace` of each page of events."""
    args = [trace.run_id, trace.task.slug]
    return {
        "url": request.build_absolute_uri(reverse("runs:trace", args=args)),
        "api_url": request.build_absolute_uri(reverse("run-api-trace", args=args)),
        "raw_api_url": request.build_absolute_uri(reverse("run-api-trace-raw", args=args)),
        "events": trace.event_count,
        "problem_count": trace.problem_count,
        "turns_used": trace.turns_used,
        "tool_calls": trace.tool_calls,
        "tokens_in": trace.tokens_in,
        "tokens_out": trace.tokens_out,
        "wall_time_s": trace.wall_time_s,
        "attempts_before_final": trace.attempts_before_final,
        "submits": trace.submit_count,
        "final_submit_turn": trace.final_submit_turn,
        "end_reason": trace.end_reason,
    }


class TraceProblemSerializer(serializers.Serializer):
    line = serializers.IntegerField(help_text="The line of the trace file (from 1).")
    message = serializers.CharField(help_text="What is wrong with the line.")


class TraceSummarySerializer(serializers.Serializer):
    url = serializers.URLField(help_text="The trace page.")
    api_url = serializers.URLField(help_text="The trace's events: `GET /api/runs/<id>/traces/…`.")
    raw_api_url = serializers.URLField(help_text="The trace as uploaded, gzip-compressed.")
    events = serializers.IntegerField(help_text="Events (non-blank lines) in the trace.")
    problem_count = serializers.IntegerField(
        help_text="Lines that break the trace schema; the trace's pages (`api_url`) show each "
        "on its line."
    )
    turns_used = serializers.IntegerField(allow_null=True)
    tool_calls = serializers.DictField(
        child=serializers.IntegerField(), help_text="Calls per tool name."
    )
    tokens_in = serializers.IntegerField()
    tokens_out = serializers.IntegerField()
    wall_time_s = serializers.FloatField(allow_null=True, help_text="Last minus first `ts`.")
    attempts_before_final = serializers.IntegerField(
        help_text="Compile or test tool calls before the final kernel was first submitted."
    )
    submits = serializers.IntegerField(help_text="Submit events.")
    final_submit_turn = serializers.IntegerField(
        allow_null=True, help_text="The turn at which the final kernel was first submitted."
    )
    end_reason = serializers.CharField(help_text="The `reason` of the `end` event, or empty.")


class TraceDetailSerializer(TraceSummarySerializer):
    problems = TraceProblemSerializer(
        many=True,
        help_text="The first 100 lines that break the trace schema (`problem_count` counts "
        "them all).",
    )
    event_types = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="Events per type, in the order the page's type filter offers them.",
    )
    submit_lines = serializers.ListField(
        child=serializers.IntegerField(), help_text="The lines of the submit events."
    )
    final_submit_line = serializers.IntegerField(
        allow_null=True, help_text="The line where the final kernel was first submitted."
    )


# Declared inline: a serializer class cannot have a field named `data` for mypy.
TRACE_EVENT = inline_serializer(
    "TraceEvent",
    {
        "line": serializers.IntegerField(help_text="The event's line in the trace file (from 1)."),
        "type": serializers.CharField(
            help_text="The event's `type`; `malformed` for a line that is not a JSON object."
        ),
        "turn": serializers.IntegerField(allow_null=True, help_text="The event's `turn`, if any."),
        "is_final": serializers.BooleanField(
            help_text="This submit is where the final kernel was first submitted."
        ),
        "data": serializers.DictField(
            help_text="The event object as uploaded; `{}` for a line that is not one."
        ),
        "raw": serializers.CharField(
            help_text="What the page shows of an event of an unknown type or with a problem: "
            "the line (malformed) or the event as indented JSON, at most 4,000 characters; "
            "empty otherwise."
        ),
        "problem": serializers.CharField(help_text="Why the line breaks the schema, or empty."),
        "diff": serializers.CharField(
            allow_null=True,
            help_text="For a submit: the unified diff of its source against the previous "
            "submit (empty for the first submit or an unchanged one); null for other events.",
        ),
    },
    many=True,
)


class TraceRunSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    api_url = serializers.URLField(help_text="`GET /api/runs/<id>/`.")
    model = serializers.CharField()
    agent = serializers.CharField()
    condition = serializers.CharField()
    turn_budget = serializers.IntegerField()


class TracePageSerializer(serializers.Serializer):
    run = TraceRunSerializer(help_text="The run, as the page's heading names it.")
    task = serializers.CharField(help_text="The task's slug.")
    example_label = serializers.CharField(
        allow_null=True, help_text="Set on an example run written by hand."
    )
    trace = TraceDetailSerializer()
    redacted = serializers.BooleanField(
        help_text="True when the events come from the redacted copy: the trace holds secrets "
        "and the caller is neither its owner nor staff (docs/security.md)."
    )
    type = serializers.CharField(allow_null=True, help_text="The type filter, or null.")
    page = serializers.IntegerField(help_text="This page, counted from 0 as on the page.")
    pages = serializers.IntegerField(help_text="Pages of this view (at least 1).")
    count = serializers.IntegerField(help_text="Events over all pages of this view.")
    final_page = serializers.IntegerField(
        allow_null=True,
        help_text="The unfiltered page that holds the final kernel's first submit, or null.",
    )
    next = serializers.URLField(allow_null=True, help_text="The next page, or null.")
    previous = serializers.URLField(allow_null=True, help_text="The previous page, or null.")
    page_url = serializers.URLField(help_text="This page on the site.")
    events = TRACE_EVENT


class TraceQuerySerializer(serializers.Serializer):
    page = serializers.IntegerField(
        min_value=0,
        default=0,
        help_text="The page, counted from 0 as on the trace page.",
        error_messages={
            "invalid": "A page is a whole number, counted from 0.",
            "min_value": "Pages are counted from 0.",
        },
    )
    type = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        help_text="Only the events of this type, paged over (as the page's filter): one of "
        "the trace's `event_types` or of the schema's "
        f"({', '.join((*KNOWN_TYPES, MALFORMED))}); `{OTHER}` gathers the unknown types past "
        "the first 20.",
    )

    def validate_type(self, value: str) -> str:
        allowed = self.context["types"]
        if value and value not in allowed:
            raise serializers.ValidationError(
                f"Unknown event type {value!r}: use one of {', '.join(allowed)}."
            )
        return value


def _event(event: TraceEvent, *, final_line: int | None) -> dict[str, Any]:
    return {
        "line": event.line,
        "type": event.type,
        "turn": event.turn,
        "is_final": event.line == final_line,
        "data": event.data,
        "raw": event.raw,
        "problem": event.problem,
        "diff": event.diff,
    }


def trace_page_data(view: TracePage, request: HttpRequest) -> dict[str, Any]:
    """The JSON of `GET /api/runs/<id>/traces/<task>/`: what the trace page shows."""
    trace, run = view.trace, view.trace.run
    args = [trace.run_id, trace.task.slug]

    def query(page: int) -> str:
        params: dict[str, Any] = {"page": page}
        if view.event_type:
            params["type"] = view.event_type
        return urlencode(params)

    def api_page(page: int) -> str:
        return request.build_absolute_uri(f"{reverse('run-api-trace', args=args)}?{query(page)}")

    return {
        "run": {
            "id": run.pk,
            "api_url": request.build_absolute_uri(reverse("run-api-detail", args=[run.pk])),
            "model": run.model,
            "agent": run.agent,
            "condition": run.condition,
            "turn_budget": run.turn_budget,
        },
        "task": trace.task.slug,
        "example_label": EXAMPLE_LABEL if run.is_example else None,
        "trace": {
            **trace_summary_data(trace, request),
            "problems": _problems(trace, request),
            "event_types": trace_event_types(trace=trace),
            "submit_lines": trace.submit_lines,
            "final_submit_line": trace.final_submit_line,
        },
        "redacted": view.redacted,
        "type": view.event_type,
        "page": view.page,
        "pages": view.page_count,
        "count": view.count,
        "final_page": view.final_page,
        "next": api_page(view.page + 1) if view.has_next else None,
        "previous": api_page(view.page - 1) if view.has_previous else None,
        "page_url": request.build_absolute_uri(
            f"{reverse('runs:trace', args=args)}?{query(view.page)}"
        ),
        "events": [_event(e, final_line=trace.final_submit_line) for e in view.events],
    }


class RunTraceApi(APIView):
    """`GET`: one page of a trace's events, as the trace page pages and filters them."""

    permission_classes = [AllowAny]

    @extend_schema(
        parameters=[TraceQuerySerializer],
        responses={
            200: OpenApiResponse(
                TracePageSerializer,
                description=f"One page of the trace page as JSON: {PAGE_LINES} lines of the "
                f"trace a page ({PAGE_LINES} events of the type with `type`), each event with "
                "its line, its data and, for a submit, its diff against the previous one; the "
                "trace summary; `next` and `previous` links.",
            ),
            400: OpenApiResponse(
                description="`page` is not a whole number from 0, or `type` is not an event "
                "type of the trace or of the schema; the field says why."
            ),
            404: OpenApiResponse(
                description="No such run, not one the caller may see, no trace of this task "
                "in it, or a page past the last one."
            ),
        },
    )
    def get(self, request: Request, pk: int, task: str) -> Response:
        trace = trace_get_for_viewer(user=request.user, run_pk=pk, task=task)
        types = [*trace_event_types(trace=trace)]
        types += [t for t in (*KNOWN_TYPES, MALFORMED) if t not in types]
        params = TraceQuerySerializer(data=request.query_params, context={"types": types})
        params.is_valid(raise_exception=True)
        data = params.validated_data
        view = trace_page(
            trace=trace,
            page=data["page"],
            event_type=data["type"] or None,
            redacted=trace_is_redacted_for(user=request.user, trace=trace),
        )
        if view.is_past_end:
            raise NotFound(
                f"Page {view.page} is past the last page: this view of the trace has "
                f"{view.page_count} page(s), counted from 0."
            )
        return Response(trace_page_data(view, request))


class FirstRendererNegotiation(BaseContentNegotiation):
    """The raw file is gzip whatever the request's Accept header asks; an error is JSON."""

    def select_parser(self, request: Request, parsers: Any) -> Any:
        return parsers[0]

    def select_renderer(self, request: Request, renderers: Any, format_suffix: Any = None) -> Any:
        return renderers[0], renderers[0].media_type


class RunTraceRawApi(APIView):
    """`GET`: the trace as uploaded, gzip-compressed (the page's download)."""

    permission_classes = [AllowAny]
    renderer_classes = [JSONRenderer]
    content_negotiation_class = FirstRendererNegotiation

    @extend_schema(
        responses={
            (200, "application/gzip"): OpenApiResponse(
                OpenApiTypes.BINARY,
                description="The trace file as uploaded, gzip-compressed (`gunzip` gives the "
                "original bytes back), as `run<id>-<task>.jsonl.gz`; to anyone but the owner "
                "and staff, the redacted copy of a trace that holds secrets, as "
                "`run<id>-<task>.redacted.jsonl.gz`.",
            ),
            404: NOT_FOUND,
        },
    )
    def get(self, request: Request, pk: int, task: str) -> FileResponse:
        trace = trace_get_for_viewer(user=request.user, run_pk=pk, task=task)
        redacted = trace_is_redacted_for(user=request.user, trace=trace)
        handle, filename = trace_raw_open(trace=trace, redacted=redacted)
        return FileResponse(
            handle, as_attachment=True, filename=filename, content_type="application/gzip"
        )
