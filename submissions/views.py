from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from core.auth import authenticated_user
from evaluator.selectors import evaluation_latest_for_submission, evaluation_view_for_viewer
from submissions.forms import UploadForm
from submissions.selectors import submission_get_for_viewer, submission_list_for_owner
from submissions.services import submission_create


@login_required
def upload(request: HttpRequest) -> HttpResponse:
    form = UploadForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        try:
            submission = submission_create(
                owner=authenticated_user(request.user), **form.submission_kwargs()
            )
        except ValidationError as exc:
            form.add_service_error(exc)
        else:
            messages.success(request, f"Submission #{submission.pk} is queued for evaluation.")
            return redirect("submissions:detail", pk=submission.pk)
    status = 400 if form.is_bound else 200
    return render(request, "submissions/upload.html", {"form": form}, status=status)


@login_required
def mine(request: HttpRequest) -> HttpResponse:
    submissions = submission_list_for_owner(owner=authenticated_user(request.user))
    return render(request, "submissions/mine.html", {"submissions": submissions})


def detail(request: HttpRequest, pk: int) -> HttpResponse:
    submission = submission_get_for_viewer(user=request.user, pk=pk)
    evaluation = evaluation_latest_for_submission(submission=submission)
    view = evaluation and evaluation_view_for_viewer(evaluation=evaluation, user=request.user)
    return render(
        request, "submissions/detail.html", {"submission": submission, "evaluation": view}
    )
