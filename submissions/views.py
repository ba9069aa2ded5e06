from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from core.auth import authenticated_user
from core.unavailable import UNAVAILABLE, unavailable_message
from evaluator.selectors import (
    evaluation_job_view,
    evaluation_latest_for_submission,
    evaluation_view_for_viewer,
)
from scoring.selectors import submission_properties_view
from submissions.forms import UploadForm
from submissions.selectors import submission_get_for_viewer, submission_list_for_owner
from submissions.services import submission_upload


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
    evaluation = evaluation_latest_for_submission(submission=submission)
    view = evaluation and evaluation_view_for_viewer(evaluation=evaluation, user=request.user)
    job = evaluation and evaluation_job_view(evaluation=evaluation)
    levels = submission_properties_view(submission=submission, evaluation=evaluation)
    return render(
        request,
        "submissions/detail.html",
        {"submission": submission, "evaluation": view, "job": job, "levels": levels},
    )
