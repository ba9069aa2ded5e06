from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.shortcuts import render

from runs.selectors import catalog_version_current, run_get_for_viewer

from .caching import fragment, versioned
from .charts import (
    fast_p_figure,
    headline_figure,
    level_scores_figure,
    matrix_figure,
    property_misses_figure,
    sol_fraction_figure,
    speedup_distribution_figure,
)
from .documents import DocumentNotFound, document_render, documents_listed
from .filters import FilterForm, Filters, filters_parse, form_errors
from .paper import PAPER_SCORES, paper_table, table_latex
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
from .selectors.audit import leaderboard_entry_audit
from .selectors.board import (
    DEFAULT_SORT,
    PAGE_COLUMNS,
    PAIR_SORT_KEYS,
    SCORE_COLUMNS,
    SORT_KEYS,
    expert_reference_rows,
    headline_chart_rows,
    home_headline,
    leaderboard_pairs,
    leaderboard_table,
    pairs_table,
)
from .selectors.breakdowns import leaderboard_breakdowns
from .selectors.entries import board_scope
from .selectors.experts import baselines_pending
from .tables import EXPORT_FORMATS, table_headers, table_response


def _export(request: HttpRequest) -> str:
    value = request.GET.get("format", "")
    return value if value in EXPORT_FORMATS else ""


def _refused(request: HttpRequest, *, form, template: str, context: dict) -> HttpResponse:
    """A 400 for invalid filters, in the format asked for: JSON `{"detail": …}` for
    `format=json`, one line of text for `format=csv`, else the page with its form."""
    export = _export(request)
    if export == "json":
        return JsonResponse({"detail": form_errors(form)}, status=400)
    if export == "csv":
        return HttpResponse(form_errors(form) + "\n", content_type="text/plain", status=400)
    return render(request, template, context, status=400)


def home(request):
    return render(request, "leaderboard/home.html", versioned(name="home", key="", build=_home))


def _home() -> dict:
    scope = board_scope(filters=Filters())
    headline = home_headline(filters=scope)
    bars = headline_chart_rows(headline)
    figure = headline_figure(rows=bars) if bars else None
    context = {
        "latest": evaluation_latest_public(limit=10),
        "headline": headline,
        # The experts' figures are the current catalog's: beside its board only.
        "reference": (
            expert_reference_rows(hardware=scope.hardware)
            if scope.hardware and scope.catalog_version == catalog_version_current()
            else []
        ),
        "scope": scope,
        "figure": figure,
        "no_figure": (
            "No chart: no pair of entries was timed on this GPU and catalog version."
            if headline and not bars
            else ""
        ),
    }
    results = fragment(template="leaderboard/_home_results.html", context=context)
    return {"size": catalog_size(), "results": results, "figure": figure is not None}


def leaderboard(request: HttpRequest) -> HttpResponse:
    filters, form = filters_parse(request.GET, sort_keys=SORT_KEYS)
    if form.errors:
        context = {"form": form, "filters": filters, "choices": run_filter_choices()}
        return _refused(
            request, form=form, template="leaderboard/leaderboard.html", context=context
        )
    if export := _export(request):
        table = versioned(
            name="leaderboard-table",
            key=filters.query(),
            build=lambda: leaderboard_table(filters=board_scope(filters=filters)),
        )
        return table_response(table=table, export=export)
    page = versioned(name="leaderboard", key=filters.query(), build=lambda: _board(filters))
    context = {"form": _scoped(form, page.get("scope", filters)), "filters": filters, **page}
    return render(request, "leaderboard/leaderboard.html", context)


def _board(asked: Filters) -> dict:
    filters = board_scope(filters=asked)
    table = leaderboard_table(filters=filters)
    references = []
    if filters.catalog_version == catalog_version_current():
        references = expert_reference_rows(hardware=filters.hardware)
    groups = _by_gpu(table.rows, references)
    chart = _chart_rows(groups)
    context = {
        "filters": filters,
        "groups": groups,
        "headers": table_headers(columns=PAGE_COLUMNS, filters=filters, default=DEFAULT_SORT),
        "score_keys": [c.key for c in SCORE_COLUMNS],
        "figure": level_scores_figure(rows=chart) if chart else None,
        "pending": _pending_by_gpu(hardware=filters.hardware),
        "audit": leaderboard_entry_audit(rows=table.rows),
    }
    board = fragment(template="leaderboard/_board.html", context=context)
    return {"choices": run_filter_choices(), "board": board, "scope": filters}


def paired(request: HttpRequest) -> HttpResponse:
    filters, form = filters_parse(request.GET, sort_keys=PAIR_SORT_KEYS)
    if form.errors:
        context = {"form": form, "filters": filters, "choices": run_filter_choices()}
        return _refused(request, form=form, template="leaderboard/paired.html", context=context)
    if export := _export(request):
        table = versioned(
            name="paired-table",
            key=filters.query(),
            build=lambda: pairs_table(filters=board_scope(filters=filters)),
        )
        return table_response(table=table, export=export)
    page = versioned(name="paired", key=filters.query(), build=lambda: _pairs(filters))
    context = {"form": _scoped(form, page.get("scope", filters)), "filters": filters, **page}
    return render(request, "leaderboard/paired.html", context)


def _pairs(asked: Filters) -> dict:
    filters = board_scope(filters=asked)
    pairs = leaderboard_pairs(filters=filters)
    sides = [
        {"run_ids": p[key], "hardware": p["hardware"]}
        for p in pairs
        for key in ("without_run_ids", "with_run_ids")
    ]
    context = {
        "filters": filters,
        "pairs": pairs,
        "score_columns": SCORE_COLUMNS,
        "audit": leaderboard_entry_audit(rows=sides),
    }
    board = fragment(template="leaderboard/_pairs.html", context=context)
    return {"choices": run_filter_choices(), "board": board, "scope": filters}


def paper(request: HttpRequest) -> HttpResponse:
    filters, form = filters_parse(request.GET, sort_keys=PAIR_SORT_KEYS)
    if form.errors:
        context = {"form": form, "filters": filters, "choices": run_filter_choices()}
        return render(request, "leaderboard/paper.html", context, status=400)
    export = request.GET.get("format", "")
    if export and export not in (*EXPORT_FORMATS, "latex"):
        context = {"form": form, "filters": filters, "choices": run_filter_choices()}
        form.add_error(None, f"format: one of csv, json, latex, not {export!r}.")
        return render(request, "leaderboard/paper.html", context, status=400)
    table = versioned(
        name="paper-table",
        key=filters.query(),
        build=lambda: paper_table(filters=board_scope(filters=filters)),
    )
    if export == "latex":
        response = HttpResponse(table_latex(table.rows), content_type="application/x-latex")
        response["Content-Disposition"] = 'attachment; filename="paper.tex"'
        return response
    if export:
        return table_response(table=table, export=export)
    context = {
        "form": form,
        "filters": board_scope(filters=filters),
        "rows": table.rows,
        "scores": PAPER_SCORES,
        "choices": run_filter_choices(),
    }
    return render(request, "leaderboard/paper.html", context)


def charts(request: HttpRequest) -> HttpResponse:
    filters, form = filters_parse(request.GET, sort_keys=SORT_KEYS)
    context: dict = {"form": form, "filters": filters, "choices": run_filter_choices()}
    try:
        run_ids = [int(i) for i in request.GET.get("runs", "").split(",") if i.strip()]
    except ValueError:
        form.add_error(None, "runs: a comma-separated list of run ids.")
    if form.errors:
        return render(request, "leaderboard/charts.html", context, status=400)
    found = leaderboard_breakdowns(filters=filters, run_ids=run_ids)
    context["runs"] = found.runs
    # A chart with nothing to draw says why in words instead of drawing empty axes.
    charts_and_data = [
        (
            "implementation",
            found.implementation,
            "none of these runs has an implementation score",
            lambda: level_scores_figure(rows=found.implementation),
        ),
        (
            "discovery",
            found.discovery,
            "nobody has assessed these runs' proposals yet",
            lambda: level_scores_figure(rows=found.discovery, score="discovery"),
        ),
        (
            "fast-p",
            found.fast_p,
            "none of these runs was timed on a GPU",
            lambda: fast_p_figure(rows=found.fast_p),
        ),
        (
            "speedups",
            found.speedups,
            "none of these runs has a correct task timed on a GPU",
            lambda: speedup_distribution_figure(rows=found.speedups),
        ),
        (
            "sol",
            found.sol,
            "no correct task of these runs has a speed-of-light fraction",
            lambda: sol_fraction_figure(rows=found.sol),
        ),
        (
            "misses",
            found.misses,
            "no property was assessed on these runs' kernels",
            lambda: property_misses_figure(rows=found.misses),
        ),
    ]
    context["figures"] = [(name, draw(), "") for name, rows, _, draw in charts_and_data if rows]
    context["empty_charts"] = [
        (name, f"No chart: {why}.") for name, rows, why, _ in charts_and_data if not rows
    ]
    return render(request, "leaderboard/charts.html", context)


def _scoped(form: FilterForm, scope: Filters) -> FilterForm:
    """The filter form showing the board's catalog version and GPU (those asked for, or
    the defaults board_scope chose), so the form says what the board compares."""
    data = QueryDict(mutable=True)
    data.update(form.data)
    for name in ("catalog_version", "hardware"):
        if not data.get(name) and getattr(scope, name):
            data[name] = getattr(scope, name)
    scoped = FilterForm(data, sort_keys=form.sort_keys)
    scoped.is_valid()
    return scoped


def _pending_by_gpu(*, hardware: str) -> list[tuple[str, list]]:
    """GPUs where a task's new version still lacks its expert baseline: the reference
    row there leaves those tasks out until the expert is re-measured."""
    by_gpu: dict[str, list] = {}
    for item in baselines_pending():
        if not hardware or item.gpu == hardware:
            by_gpu.setdefault(item.gpu, []).append(item)
    return sorted(by_gpu.items())


def _by_gpu(rows, references) -> list[dict]:
    groups: dict[str, dict] = {}
    for ref in references:
        groups.setdefault(ref["hardware"], {"gpu": ref["hardware"], "rows": [], "references": []})
        groups[ref["hardware"]]["references"].append(ref)
    for row in rows:
        groups.setdefault(row["hardware"], {"gpu": row["hardware"], "rows": [], "references": []})
        groups[row["hardware"]]["rows"].append(row)
    return sorted(groups.values(), key=lambda g: (g["gpu"] == "", g["gpu"]))


def _chart_rows(groups: list[dict], top: int = 8) -> list[dict]:
    rows: list[dict] = next((g["rows"] for g in groups if g["rows"]), [])[:top]
    return [
        {
            "label": f"#{r['run_ids'][0]} {r['model']}",
            "condition": r["condition"],
            "scores": {k: r[f"implementation_{k}"] for k in ("L1", "L2", "L3")}
            | {"combined": r["implementation"]},
        }
        for r in rows
        if r["implementation"] is not None
    ]


def matrix(request: HttpRequest) -> HttpResponse:
    filters, form = filters_parse(request.GET)
    if form.errors:
        context = {"form": form, "choices": run_filter_choices()}
        return _refused(request, form=form, template="leaderboard/matrix.html", context=context)
    if export := _export(request):
        found = task_run_matrix(filters=filters)
        return table_response(table=matrix_table(matrix=found), export=export)
    page = versioned(name="matrix", key=filters.query(), build=lambda: _matrix(filters))
    context = {"form": form, "filters": filters, **page}
    return render(request, "leaderboard/matrix.html", context)


def _matrix(filters: Filters) -> dict:
    found = task_run_matrix(filters=filters)
    figure = matrix_figure(
        tasks=[t.slug for t in found.tasks],
        runs=[f"#{r.pk} {r.model} · {r.condition}" for r in found.runs],
        cells=[cells for _, cells in found.rows],
    )
    context = {
        "filters": filters,
        "matrix": found,
        "figure": figure,
        "previous_query": filters.query(page=found.page - 1),
        "next_query": filters.query(page=found.page + 1),
    }
    board = fragment(template="leaderboard/_matrix.html", context=context)
    return {"choices": run_filter_choices(), "board": board, "per_page": len(found.runs)}


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


def documents(request):
    """The index of the project's documents."""
    return render(request, "leaderboard/documents.html", {"documents": documents_listed()})


def document(request, slug: str):
    try:
        doc = document_render(slug=slug)
    except DocumentNotFound as exc:
        raise Http404("No such document.") from exc
    return render(
        request, "leaderboard/document.html", {"doc": doc, "documents": documents_listed()}
    )
