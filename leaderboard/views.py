from django.http import Http404
from django.shortcuts import render

from .documents import DocumentNotFound, document_render, documents_listed
from .selectors import catalog_size, evaluation_latest_public


def home(request):
    context = {
        "size": catalog_size(),
        "latest": evaluation_latest_public(limit=10),
    }
    return render(request, "leaderboard/home.html", context)


def scoring(request):
    return render(request, "leaderboard/scoring.html")


def document(request, slug: str):
    try:
        doc = document_render(slug=slug)
    except DocumentNotFound as exc:
        raise Http404("No such document.") from exc
    return render(
        request, "leaderboard/document.html", {"doc": doc, "documents": documents_listed()}
    )
