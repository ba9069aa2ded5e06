from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from runs.selectors import run_get_for_viewer

from .charts import matrix_figure
from .documents import DocumentNotFound, document_render, documents_listed
from .filters import filters_parse
from .selectors import (
    catalog_size,
    comparison_table,
    evaluation_latest_public,
    hacked_table,
    matrix_table,
    run_comparison,
    run_filter_choices,
    task_run_matrix,
)
from .tables import EXPORT_FORMATS, table_response


def _export(request: HttpRequest) -> str:
    value = request.GET.get("format", "")
    return value if value in EXPORT_FORMATS else ""


def home(request):
    context = {
        "size": catalog_size(),
        "latest": evaluation_latest_public(limit=10),
    }
    return render(request, "leaderboard/home.html", context)


def matrix(request: HttpRequest) -> HttpResponse:
    filters, form = filters_parse(request.GET)
    if form.errors:
        context = {"form": form, "choices": run_filter_choices()}
        return render(request, "leaderboard/matrix.html", context, status=400)
    found = task_run_matrix(filters=filters)
    if export := _export(request):
        return table_response(table=matrix_table(matrix=found), export=export)
    figure = matrix_figure(
        tasks=[t.slug for t in found.tasks],
        runs=[f"#{r.pk} {r.model} · {r.condition}" for r in found.runs],
        cells=[cells for _, cells in found.rows],
    )
    context = {
        "form": form,
        "filters": filters,
        "choices": run_filter_choices(),
        "matrix": found,
        "figure": figure,
        "previous_query": filters.query(page=found.page - 1),
        "next_query": filters.query(page=found.page + 1),
    }
    return render(request, "leaderboard/matrix.html", context)


def compare(request: HttpRequest) -> HttpResponse:
    if not request.GET.get("a") or not request.GET.get("b"):
        return render(request, "leaderboard/compare.html", {"missing": True}, status=400)
    a = run_get_for_viewer(user=request.user, pk=request.GET["a"])
    b = run_get_for_viewer(user=request.user, pk=request.GET["b"])
    comparison = run_comparison(a=a, b=b)
    if export := _export(request):
        return table_response(table=comparison_table(comparison=comparison), export=export)
    return render(request, "leaderboard/compare.html", {"comparison": comparison})


def hacks(request: HttpRequest) -> HttpResponse:
    table = hacked_table(hardware=request.GET.get("hardware", ""))
    if export := _export(request):
        return table_response(table=table, export=export)
    return render(request, "leaderboard/hacks.html", {"table": table})


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
