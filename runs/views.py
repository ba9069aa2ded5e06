from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from accounts.auth import authenticated_user
from accounts.models import User
from leaderboard.caching import fragment, versioned
from leaderboard.selectors.breakdowns import run_level_charts
from moderation.forms import CellVerdictForm, ModerationForm
from moderation.selectors import cell_verdicts_for, cell_verdicts_search, moderation_actions_for
from moderation.services import cell_verdict_set, moderation_act
from runformat import SCHEMAS, schema_load
from runs.audit import RedactionUnconfirmed, run_hits_by_task, scan_hits_search
from runs.forms import AuditSearchForm, BundleUploadForm, PairForm
from runs.models import Run, RunState
from runs.selectors import (
    EXAMPLE_LABEL,
    RunDetail,
    run_detail,
    run_get_for_viewer,
    run_list_for_viewer,
    run_pair_candidates,
    run_pair_for_viewer,
    trace_event_types,
    trace_get_for_viewer,
    trace_is_redacted_for,
    trace_page,
    trace_raw_open,
    viewer_sees_raw,
)
from runs.services import (
    BundleRejected,
    StorageFull,
    run_pair,
    run_unpair,
    run_upload,
    run_visibility_set,
)
from scoring.selectors import run_scores_view
from submissions.quotas import QuotaExceeded
from task_catalog.models import Task


def run_list(request: HttpRequest) -> HttpResponse:
    runs = run_list_for_viewer(user=request.user)[:200]
    return render(request, "runs/list.html", {"runs": runs})


@login_required
def upload(request: HttpRequest) -> HttpResponse:
    form = BundleUploadForm(request.POST or None, request.FILES or None)
    errors = []
    status = 400 if form.is_bound else 200
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data["bundle"].read()
        try:
            run = run_upload(
                owner=authenticated_user(request.user),
                data=data,
                is_public=form.cleaned_data["is_public"],
                confirm_redaction=form.cleaned_data["confirm_redaction"],
            )
        except BundleRejected as exc:
            errors = list(exc.errors)
        except QuotaExceeded as exc:
            form.add_error(None, exc.message)
            status = 429
        except StorageFull as exc:
            form.add_error(None, exc.message)
            status = 507
        else:
            queued = "its kernels are queued"
            if run.state == RunState.VALIDATING:
                queued = "its bundle is being validated; this page shows the outcome"
            messages.success(request, f"Run #{run.pk} is stored; {queued}.")
            return redirect("runs:detail", pk=run.pk)
    context = {
        "form": form,
        "errors": errors,
        "sync_limit": settings.D2K_RUN_SYNC_VALIDATION_BYTES,
    }
    return render(request, "runs/upload.html", context, status=status)


def detail(request: HttpRequest, pk: int) -> HttpResponse:
    run = run_get_for_viewer(user=request.user, pk=pk)
    if run.state in (RunState.VALIDATING, RunState.REJECTED):
        return render(request, "runs/validation.html", {"run": run})
    if viewer_sees_raw(user=request.user, run=run):
        # Its owner and the moderators: traces as uploaded, the scanners' hits, the forms.
        context = _detail_context(run=run, user=request.user, request=request)
        return render(request, "runs/detail.html", context)
    # Everyone else sees the same page, but for whether the twin is theirs to see; it is
    # kept once every kernel has its verdict (a claim or a hand-back of a job changes its
    # status without a new data version).
    pair = run_pair_for_viewer(user=request.user, run=run)
    page = versioned(
        name="run-page",
        key=f"{run.pk}:{pair.pk if pair else ''}",
        build=lambda: _public_page(user=request.user, pk=run.pk),
        keep=lambda page: bool(page["settled"]),
    )
    return render(request, "runs/detail.html", page)


def _public_page(*, user: User | AnonymousUser, pk: int) -> dict[str, object]:
    run = run_get_for_viewer(user=user, pk=pk)  # as of the version being built
    context = _detail_context(run=run, user=user)
    detail = context["detail"]
    assert isinstance(detail, RunDetail)
    return {
        "run": run,
        "has_charts": context["has_charts"],
        "content": fragment(template="runs/_detail.html", context=context),
        "settled": detail.state == RunState.COMPLETE
        and detail.pair_state in (None, RunState.COMPLETE),
    }


def _detail_context(
    *, run: Run, user: User | AnonymousUser, request: HttpRequest | None = None
) -> dict[str, object]:
    """The run page's context for `user`; without the request, the public's (nothing that
    only the owner and the moderators see, no form)."""
    detail = run_detail(run=run, user=user)
    scores = run_scores_view(run=run, pair=detail.pair)
    charts = run_level_charts(run=run, pair=detail.pair, scores=scores)
    context: dict[str, object] = {
        "detail": detail,
        "scores": scores,
        "charts": charts,
        "has_charts": bool(charts.figures),
        "run": run,
        "moderation_actions": moderation_actions_for(run=run),
        "is_owner": False,
        "verdicts": cell_verdicts_for(run=run),
        "hold_needs_review": settings.D2K_AUDIT_HOLD_NEEDS_REVIEW,
        "sees_raw": False,
    }
    if request is None:
        return context
    context["is_owner"] = request.user.is_authenticated and request.user.pk == run.owner_id
    context["sees_raw"] = viewer_sees_raw(user=request.user, run=run)
    if context["sees_raw"]:
        context["hits"] = run_hits_by_task(run=run)
    if context["is_owner"]:
        context["pair_form"] = PairForm(candidates=run_pair_candidates(run=run))
    if request.user.is_authenticated and request.user.is_staff:
        context["moderation_form"] = ModerationForm()
        context["verdict_form"] = CellVerdictForm()
    return context


@login_required
@require_POST
def verdict(request: HttpRequest, pk: int) -> HttpResponse:
    run = run_get_for_viewer(user=request.user, pk=pk)
    form = CellVerdictForm(request.POST)
    task = Task.objects.filter(slug=request.POST.get("task", "")).first()
    try:
        if not form.is_valid() or task is None:
            raise ValidationError("Choose a task and a verdict, and give a reason.")
        data = form.cleaned_data
        cell_verdict_set(
            actor=authenticated_user(request.user),
            run=run,
            task=task,
            verdict=data["verdict"],
            reason=data["reason"],
            quote=data["quote"],
            line=data["line"],
        )
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, f"{task.slug}: {data['verdict']}, logged.")
    anchor = f"#task-{task.slug}" if task else ""
    return redirect(reverse("runs:detail", args=[run.pk]) + anchor)


@login_required
def audit(request: HttpRequest) -> HttpResponse:
    if not request.user.is_staff:
        raise PermissionDenied("Only moderators search the scanners' hits.")
    form = AuditSearchForm(request.GET or None)
    rule = verdict_value = ""
    if form.is_valid():
        rule, verdict_value = form.cleaned_data["rule"], form.cleaned_data["verdict"]
    context = {
        "form": form,
        "hits": scan_hits_search(rule=rule, verdict=verdict_value)[:500],
        "cells": cell_verdicts_search(verdict=verdict_value, rule=rule)[:500],
        "rule": rule,
        "verdict": verdict_value,
    }
    return render(request, "runs/audit.html", context, status=200 if form.is_valid() else 400)


@login_required
@require_POST
def visibility(request: HttpRequest, pk: int) -> HttpResponse:
    run = run_get_for_viewer(user=request.user, pk=pk)
    is_public = request.POST.get("is_public") == "true"
    confirmed = request.POST.get("confirm_redaction") == "true"
    try:
        run_visibility_set(
            run=run,
            user=authenticated_user(request.user),
            is_public=is_public,
            confirm_redaction=confirmed,
        )
    except RedactionUnconfirmed as exc:
        context = {"run": run, "message": str(exc), "secrets": exc.secrets.hits}
        return render(request, "runs/publish_confirm.html", context, status=409)
    word = "published: everyone sees it" if is_public else "private: only you see it"
    messages.success(request, f"Run #{run.pk} and its kernels are {word}.")
    return redirect("runs:detail", pk=run.pk)


@login_required
@require_POST
def moderate(request: HttpRequest, pk: int) -> HttpResponse:
    run = run_get_for_viewer(user=request.user, pk=pk)
    user = authenticated_user(request.user)
    if not user.is_staff:
        raise PermissionDenied("Only moderators moderate results.")
    form = ModerationForm(request.POST)
    try:
        if not form.is_valid():
            raise ValidationError("Choose an action and give a reason.")
        action = moderation_act(actor=user, run=run, **form.cleaned_data)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, f"{action.get_kind_display().capitalize()}: logged.")
    return redirect("runs:detail", pk=run.pk)


@login_required
@require_POST
def pair(request: HttpRequest, pk: int) -> HttpResponse:
    run = run_get_for_viewer(user=request.user, pk=pk)
    user = authenticated_user(request.user)
    # Any of the owner's runs is accepted here, so that run_pair says why it refuses one.
    owned = Run.objects.filter(owner_id=run.owner_id).exclude(pk=run.pk)
    form = PairForm(request.POST, candidates=owned)
    try:
        if not form.is_valid():
            raise ValidationError("Choose one of your runs.")
        other = form.cleaned_data["other"]
        if other is None:
            run_unpair(run=run, user=user)
            messages.success(request, f"Run #{run.pk} is no longer paired.")
        else:
            run_pair(run=run, other=other, user=user)
            messages.success(request, f"Run #{run.pk} is paired with run #{other.pk}.")
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    return redirect("runs:detail", pk=run.pk)


def trace(request: HttpRequest, pk: int, task: str) -> HttpResponse:
    found = trace_get_for_viewer(user=request.user, run_pk=pk, task=task)
    event_type = request.GET.get("type") or None
    redacted = trace_is_redacted_for(user=request.user, trace=found)
    page = trace_page(
        trace=found, page=request.GET.get("page", 0), event_type=event_type, redacted=redacted
    )
    types = list(trace_event_types(trace=found))
    label = EXAMPLE_LABEL if found.run.is_example else None
    return render(
        request, "runs/trace.html", {"view": page, "types": types, "example_label": label}
    )


def trace_raw(request: HttpRequest, pk: int, task: str) -> FileResponse:
    found = trace_get_for_viewer(user=request.user, run_pk=pk, task=task)
    redacted = trace_is_redacted_for(user=request.user, trace=found)
    handle, filename = trace_raw_open(trace=found, redacted=redacted)
    return FileResponse(
        handle, as_attachment=True, filename=filename, content_type="application/gzip"
    )


def schema(request: HttpRequest, name: str) -> JsonResponse:
    if name not in SCHEMAS:
        raise Http404("No such schema.")
    return JsonResponse(schema_load(name), json_dumps_params={"indent": 2})
