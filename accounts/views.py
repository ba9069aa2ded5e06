from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from accounts.forms import SignupForm
from accounts.selectors import token_get
from accounts.services import token_regenerate, user_create
from core.auth import authenticated_user


def signup(request: HttpRequest) -> HttpResponse:
    if request.user.is_authenticated:
        return redirect("accounts:profile")
    form = SignupForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = user_create(
            username=form.cleaned_data["username"],
            email=form.cleaned_data["email"],
            password=form.cleaned_data["password1"],
        )
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        messages.success(request, "Welcome! Your API token is below.")
        return redirect("accounts:profile")
    return render(request, "accounts/signup.html", {"form": form})


@login_required
def profile(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "accounts/profile.html",
        {"token": token_get(user=authenticated_user(request.user))},
    )


@login_required
@require_POST
def token_regenerate_view(request: HttpRequest) -> HttpResponse:
    token_regenerate(user=authenticated_user(request.user))
    messages.success(request, "A new API token was issued; the old one no longer works.")
    return redirect("accounts:profile")
