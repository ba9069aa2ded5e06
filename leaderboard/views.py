from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from runs.selectors import run_get_for_viewer

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
from .filters import Filters, filters_parse
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
    LEADERBOARD_COLUMNS,
    PAIR_SORT_KEYS,
    SORT_KEYS,
    expert_reference_rows,
    headline_chart_rows,
    home_headline,
    leaderboard_pairs,
    leaderboard_table,
    pairs_table,
)
from .selectors.breakdowns import leaderboard_breakdowns
from .tables import EXPORT_FORMATS, table_headers, table_response


def _export(request: HttpRequest) -> str:
    value = request.GET.get("format", "")
    return value if value in EXPORT_FORMATS else ""


def home(request):
    return render(request, "leaderboard/home.html", versioned(name="home", key="", build=_home))


def _home() -> dict:
    headline = home_headline()
    figure = headline_figure(rows=headline_chart_rows(headline)) if headline else None
    context = {
        "latest": evaluation_latest_public(limit=10),
        "headline": headline,
        "figure": figure,
    }
    results = fragment(template="leaderboard/_home_results.html", context=context)
    return {"size": catalog_size(), "results": results, "figure": figure is not None}


def leaderboard(request: HttpRequest) -> HttpResponse:
    filters, form = filters_parse(request.GET, sort_keys=SORT_KEYS)
    if form.errors:
        context = {"form": form, "filters": filters, "choices": run_filter_choices()}
        return render(request, "leaderboard/leaderboard.html", context, status=400)
    if export := _export(request):
        table = versioned(
            name="leaderboard-table",
            key=filters.query(),
            build=lambda: leaderboard_table(filters=filters),
        )
        return table_response(table=table, export=export)
    page = versioned(name="leaderboard", key=filters.query(), build=lambda: _board(filters))
    context = {"form": form, "filters": filters, **page}
    return render(request, "leaderboard/leaderboard.html", context)


def _board(filters: Filters) -> dict:
    table = leaderboard_table(filters=filters)
    groups = _by_gpu(table.rows, expert_reference_rows(hardware=filters.hardware))
    context = {
        "filters": filters,
        "groups": groups,
        "headers": table_headers(
            columns=LEADERBOARD_COLUMNS, filters=filters, default=DEFAULT_SORT
        ),
        "figure": level_scores_figure(rows=_chart_rows(groups)),
        "audit": leaderboard_entry_audit(rows=table.rows),
    }
    board = fragment(template="leaderboard/_board.html", context=context)
    return {"choices": run_filter_choices(), "board": board}


def paired(request: HttpRequest) -> HttpResponse:
    filters, form = filters_parse(request.GET, sort_keys=PAIR_SORT_KEYS)
    if form.errors:
        context = {"form": form, "filters": filters, "choices": run_filter_choices()}
        return render(request, "leaderboard/paired.html", context, status=400)
    if export := _export(request):
        table = versioned(
            name="paired-table", key=filters.query(), build=lambda: pairs_table(filters=filters)
        )
        return table_response(table=table, export=export)
    page = versioned(name="paired", key=filters.query(), build=lambda: _pairs(filters))
    context = {"form": form, "filters": filters, **page}
    return render(request, "leaderboard/paired.html", context)


def _pairs(filters: Filters) -> dict:
    pairs = leaderboard_pairs(filters=filters)
    sides = [side for p in pairs for side in (p.without, p.with_guidance)]
    context = {"filters": filters, "pairs": pairs, "audit": leaderboard_entry_audit(rows=sides)}
    board = fragment(template="leaderboard/_pairs.html", context=context)
    return {"choices": run_filter_choices(), "board": board}


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
    context["figures"] = [
        ("implementation", level_scores_figure(rows=found.implementation)),
        ("discovery", level_scores_figure(rows=found.discovery, score="discovery")),
        ("fast-p", fast_p_figure(rows=found.fast_p)),
        ("speedups", speedup_distribution_figure(rows=found.speedups)),
        ("sol", sol_fraction_figure(rows=found.sol)),
        ("misses", property_misses_figure(rows=found.misses)),
    ]
    return render(request, "leaderboard/charts.html", context)


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
            "label": f"#{r['run_id']} {r['model']}",
            "condition": r["condition"],
            "scores": {k: r[f"implementation_{k}"] for k in ("L1", "L2", "L3")}
            | {"combined": r["implementation"]},
        }
        for r in rows
    ]


def matrix(request: HttpRequest) -> HttpResponse:
    filters, form = filters_parse(request.GET)
    if form.errors:
        context = {"form": form, "choices": run_filter_choices()}
        return render(request, "leaderboard/matrix.html", context, status=400)
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


def document(request, slug: str):
    try:
        doc = document_render(slug=slug)
    except DocumentNotFound as exc:
        raise Http404("No such document.") from exc
    return render(
        request, "leaderboard/document.html", {"doc": doc, "documents": documents_listed()}
    )
