from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from accounts.auth import authenticated_user
from accounts.models import User
from core.unavailable import UNAVAILABLE, unavailable_message
from evaluator.selectors import (
    evaluation_job_view,
    evaluation_latest_for_submission,
)
from leaderboard.caching import fragment, versioned
from leaderboard.selectors import evaluation_expert_fractions
from moderation.forms import ModerationForm
from moderation.selectors import moderation_actions_for
from moderation.services import moderation_act
from runs.selectors import EXAMPLE_LABEL
from scoring.selectors import submission_properties_view
from submissions.forms import UploadForm
from submissions.models import Submission
from submissions.quotas import QuotaExceeded
from submissions.selectors import (
    submission_evaluation_for_viewer,
    submission_get_for_viewer,
    submission_list_for_owner,
)
from submissions.services import submission_upload, submission_visibility_set


@login_required
def upload(request: HttpRequest) -> HttpResponse:
    form = UploadForm(request.POST or None, request.FILES or None)
    status = 200
    if request.method == "POST" and form.is_valid():
        try:
            upload = submission_upload(
                owner=authenticated_user(request.user), **form.submission_kwargs()
            )
        except ValidationError as exc:
            form.add_service_error(exc)
        except QuotaExceeded as exc:
            form.add_error(None, exc.message)
            status = 429
        except UNAVAILABLE as exc:
            form.add_error(None, unavailable_message(exc))
            status = 503
        else:
            submission = upload.submission
            if upload.created:
                messages.success(request, f"Submission #{submission.pk} is queued for evaluation.")
            else:
                messages.info(
                    request, f"You uploaded this file before: submission #{submission.pk}."
                )
            return redirect("submissions:detail", pk=submission.pk)
    if form.is_bound and status == 200:
        status = 400
    return render(request, "submissions/upload.html", {"form": form}, status=status)


@login_required
def mine(request: HttpRequest) -> HttpResponse:
    submissions = submission_list_for_owner(owner=authenticated_user(request.user))
    return render(request, "submissions/mine.html", {"submissions": submissions})


def detail(request: HttpRequest, pk: int) -> HttpResponse:
    submission = submission_get_for_viewer(user=request.user, pk=pk)
    user = request.user
    if not user.is_staff and user.pk != submission.owner_id:
        # Everyone but its owner and the moderators sees the same page; it is kept once the
        # evaluation has its verdict (before, it follows the job, whose queue states change
        # without a new data version).
        page = versioned(
            name="submission-page",
            key=str(submission.pk),
            build=lambda: _public_page(user=user, pk=submission.pk),
            keep=lambda page: not page["live"],
        )
        return render(request, "submissions/detail.html", page)
    context = _detail_context(submission=submission, user=user)
    if user.is_authenticated and user.is_staff:
        context["moderation_form"] = ModerationForm()
    return render(request, "submissions/detail.html", context)


def _public_page(*, user: User | AnonymousUser, pk: int) -> dict[str, object]:
    submission = submission_get_for_viewer(user=user, pk=pk)  # as of the version being built
    context = _detail_context(submission=submission, user=user)
    content = fragment(template="submissions/_detail.html", context=context)
    return {"submission": submission, "live": context["live"], "content": content}


def _detail_context(*, submission: Submission, user: User | AnonymousUser) -> dict[str, object]:
    evaluation = evaluation_latest_for_submission(submission=submission)
    view = evaluation and submission_evaluation_for_viewer(evaluation=evaluation, user=user)
    job = evaluation and evaluation_job_view(evaluation=evaluation)
    fractions = evaluation and evaluation_expert_fractions(
        submission=submission, evaluation=evaluation
    )
    return {
        "submission": submission,
        "evaluation": view,
        "live": evaluation is not None and not evaluation.is_finished,
        "job": job,
        "expert_fractions": fractions or {},
        "levels": submission_properties_view(submission=submission, evaluation=evaluation),
        "moderation_actions": moderation_actions_for(submission=submission),
        "is_owner": user.is_authenticated and user.pk == submission.owner_id,
        "example_label": EXAMPLE_LABEL if submission.run and submission.run.is_example else None,
    }


@login_required
@require_POST
def visibility(request: HttpRequest, pk: int) -> HttpResponse:
    submission = submission_get_for_viewer(user=request.user, pk=pk)
    is_public = request.POST.get("is_public") == "true"
    try:
        submission_visibility_set(
            submission=submission, user=authenticated_user(request.user), is_public=is_public
        )
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        word = "published: everyone sees it" if is_public else "private: only you see it"
        messages.success(request, f"Submission #{submission.pk} is {word}.")
    return redirect("submissions:detail", pk=submission.pk)


@login_required
@require_POST
def moderate(request: HttpRequest, pk: int) -> HttpResponse:
    submission = submission_get_for_viewer(user=request.user, pk=pk)
    user = authenticated_user(request.user)
    if not user.is_staff:
        raise PermissionDenied("Only moderators moderate results.")
    form = ModerationForm(request.POST)
    try:
        if not form.is_valid():
            raise ValidationError("Choose an action and give a reason.")
        action = moderation_act(actor=user, submission=submission, **form.cleaned_data)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, f"{action.get_kind_display().capitalize()}: logged.")
    return redirect("submissions:detail", pk=submission.pk)
