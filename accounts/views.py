import secrets

from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from accounts.auth import authenticated_user
from accounts.forms import ProfileForm, SignupForm, TokenForm
from accounts.selectors import token_list_for_user
from accounts.services import token_issue, token_revoke, user_create, user_profile_update


def signup(request: HttpRequest) -> HttpResponse:
    if request.user.is_authenticated:
        return redirect("accounts:profile")
    form = SignupForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = user_create(
            username=form.cleaned_data["username"],
            email=form.cleaned_data["email"],
            password=form.cleaned_data["password1"],
            affiliation=form.cleaned_data.get("affiliation", ""),
        )
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        messages.success(request, "Welcome! Issue an API token below to upload from scripts.")
        return redirect("accounts:profile")
    status = 400 if form.is_bound else 200
    return render(request, "accounts/signup.html", {"form": form}, status=status)


# How many token forms of one session can be answered (a few open tabs).
_ISSUE_IDS_KEPT = 10


def _token_form_fresh(request: HttpRequest, user) -> TokenForm:
    """An empty token form with an issue id that this session can use once."""
    issue_id = secrets.token_urlsafe(16)
    request.session["token_issue_ids"] = [
        *request.session.get("token_issue_ids", [])[-(_ISSUE_IDS_KEPT - 1) :],
        issue_id,
    ]
    return TokenForm(user=user, initial={"issue_id": issue_id})


def _profile(request: HttpRequest, status: int = 200, **context: object) -> HttpResponse:
    user = authenticated_user(request.user)
    context.setdefault("profile_form", ProfileForm(instance=user))
    if "token_form" not in context:
        context["token_form"] = _token_form_fresh(request, user)
    context["tokens"] = token_list_for_user(user=user)
    return render(request, "accounts/profile.html", context, status=status)


@login_required
def profile(request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        return _profile(request)
    user = authenticated_user(request.user)
    form = ProfileForm(request.POST, instance=user)
    if not form.is_valid():
        user.refresh_from_db()
        return _profile(request, profile_form=form, status=400)
    user_profile_update(
        user=user, email=form.cleaned_data["email"], affiliation=form.cleaned_data["affiliation"]
    )
    messages.success(request, "Your profile is saved.")
    return redirect("accounts:profile")


@login_required
@require_POST
def token_create(request: HttpRequest) -> HttpResponse:
    user = authenticated_user(request.user)
    form = TokenForm(request.POST, user=user)
    open_ids = request.session.get("token_issue_ids", [])
    if request.POST.get("issue_id") not in open_ids:
        messages.info(
            request,
            "That form was already answered (a page reload sends it again): a token is "
            "shown only once. Issue a new one below if you need it.",
        )
        return redirect("accounts:profile")
    if not form.is_valid():
        return _profile(request, token_form=form, status=400)
    try:
        issued = token_issue(
            user=user, name=form.cleaned_data["name"], scopes=form.cleaned_data["scopes"]
        )
    except ValidationError as exc:
        for message in exc.messages:
            form.add_error(None, message)
        return _profile(request, token_form=form, status=400)
    request.session["token_issue_ids"] = [i for i in open_ids if i != form.cleaned_data["issue_id"]]
    # The key is shown in this response only: it is stored hashed.
    return _profile(request, issued=issued)


@login_required
@require_POST
def token_revoke_view(request: HttpRequest, token_id: str) -> HttpResponse:
    try:
        token = token_revoke(user=authenticated_user(request.user), token_id=token_id)
    except ValidationError:
        messages.error(request, "No such token.")
    else:
        messages.success(request, f"Token “{token.name}” is revoked; it no longer works.")
    return redirect("accounts:profile")
