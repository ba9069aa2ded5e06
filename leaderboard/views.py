from django.shortcuts import render

from .selectors import catalog_size, evaluation_latest_public


def home(request):
    context = {
        "size": catalog_size(),
        "latest": evaluation_latest_public(limit=10),
    }
    return render(request, "leaderboard/home.html", context)


def scoring(request):
    return render(request, "leaderboard/scoring.html")
