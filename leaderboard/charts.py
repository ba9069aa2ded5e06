"""Plotly figures as plain dicts: rows in, figure out, no I/O (tested as data).

Pages hand a figure to the browser with `json_script`; static/js/charts.js
draws every `[data-figure]` element with the locally served plotly.js.
"""

from __future__ import annotations

import functools
import html
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ParamSpec

_P = ParamSpec("_P")

LEVELS = ("L1", "L2", "L3")
TIMES = "\u00d7"
_LEVEL_COLORS = {"L1": "#2f5fd0", "L2": "#1a7f37", "L3": "#9a6700"}
_MARGIN = {"l": 60, "r": 20, "t": 40, "b": 60}
_BASE_LAYOUT: dict[str, Any] = {
    "margin": _MARGIN,
    "paper_bgcolor": "#ffffff",
    "plot_bgcolor": "#ffffff",
    "font": {"family": "system-ui, sans-serif", "size": 12},
}
# Trace fields that carry names users choose (models, agents, run labels, usernames).
_LABEL_KEYS = ("name", "x", "y")


def _plain(value: Any) -> Any:
    if isinstance(value, str):
        return html.escape(value, quote=False)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def plain_labels(figure_of: Callable[_P, dict[str, Any]]) -> Callable[_P, dict[str, Any]]:
    """Plotly reads `<a href>`, `<b>`, `<span style>` in a label as markup: escape the
    labels of every trace, so a model named `<a href=…>` is shown as those characters."""

    @functools.wraps(figure_of)
    def figure(*args: _P.args, **kwargs: _P.kwargs) -> dict[str, Any]:
        drawn = figure_of(*args, **kwargs)
        for trace in drawn.get("data", []):
            for key in _LABEL_KEYS:
                if key in trace:
                    trace[key] = _plain(trace[key])
        return drawn

    return figure


@plain_labels
def workload_speedup_figure(
    *, rows: Sequence[Any], workloads: Sequence[str], top: int = 5
) -> dict[str, Any]:
    """Grouped bars: speedup over the reference per timed workload, one bar group per entry.

    `rows` are ranking rows (`owner`, `rank`, `speedup`, `workload_speedups`),
    best first; a dashed line marks the reference (speedup 1).
    """
    data = [
        {
            "type": "bar",
            "name": f"#{row.rank} {row.run_label or row.owner} ({row.speedup:.2f}{TIMES})",
            "x": list(workloads),
            "y": [row.workload_speedups.get(name) for name in workloads],
            "hovertemplate": "%{x}: %{y:.2f}" + TIMES + "<extra>%{fullData.name}</extra>",
        }
        for row in list(rows)[:top]
    ]
    return {
        "data": data,
        "layout": {
            **_BASE_LAYOUT,
            "title": {"text": "Speedup over the PyTorch reference per workload"},
            "barmode": "group",
            "xaxis": {"title": {"text": "workload"}, "type": "category"},
            "yaxis": {"title": {"text": f"speedup ({TIMES})"}, "rangemode": "tozero"},
            "shapes": [
                {
                    "type": "line",
                    "xref": "paper",
                    "x0": 0,
                    "x1": 1,
                    "y0": 1,
                    "y1": 1,
                    "line": {"dash": "dash", "color": "#5b6475", "width": 1},
                }
            ],
            "legend": {"orientation": "h", "y": -0.25},
        },
    }


@plain_labels
def property_dependency_figure(*, properties: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The design properties as a graph: one column per level, an arrow per dependency.

    Each property is a mapping with `key`, `level`, `title` and `depends_on`.
    """
    props = list(properties)
    position: dict[str, tuple[int, int]] = {}
    for column, level in enumerate(LEVELS):
        in_level = [p for p in props if p["level"] == level]
        for row, prop in enumerate(in_level):
            position[prop["key"]] = (column, -row)
    annotations = [
        {
            "x": position[prop["key"]][0],
            "y": position[prop["key"]][1],
            "ax": position[dep][0],
            "ay": position[dep][1],
            "xref": "x",
            "yref": "y",
            "axref": "x",
            "ayref": "y",
            "showarrow": True,
            "arrowhead": 2,
            "arrowsize": 1,
            "arrowwidth": 1,
            "arrowcolor": "#8a93a5",
            "standoff": 10,
            "startstandoff": 10,
            "text": "",
        }
        for prop in props
        if prop["key"] in position
        for dep in prop.get("depends_on", [])
        if dep in position
    ]
    data = []
    for level in LEVELS:
        in_level = [p for p in props if p["level"] == level and p["key"] in position]
        if not in_level:
            continue
        data.append(
            {
                "type": "scatter",
                "mode": "markers+text",
                "name": level,
                "x": [position[p["key"]][0] for p in in_level],
                "y": [position[p["key"]][1] for p in in_level],
                "text": [p["key"] for p in in_level],
                "hovertext": [p["title"] for p in in_level],
                "hoverinfo": "text",
                "textposition": "top center",
                "marker": {"size": 14, "color": _LEVEL_COLORS[level]},
            }
        )
    depth = max((-y for _, y in position.values()), default=0)
    return {
        "data": data,
        "layout": {
            **_BASE_LAYOUT,
            "title": {"text": "Design properties by level (arrows: prerequisite → dependent)"},
            "height": 180 + 70 * depth,
            "showlegend": False,
            "annotations": annotations,
            "xaxis": {
                "tickvals": list(range(len(LEVELS))),
                "ticktext": list(LEVELS),
                "range": [-0.5, len(LEVELS) - 0.5],
                "zeroline": False,
                "showgrid": False,
            },
            "yaxis": {
                "visible": False,
                "range": [-depth - 0.6, 0.6],
            },
        },
    }


def _ref_line(y: float) -> dict[str, Any]:
    return {
        "type": "line",
        "xref": "paper",
        "x0": 0,
        "x1": 1,
        "y0": y,
        "y1": y,
        "line": {"dash": "dash", "color": "#5b6475", "width": 1},
    }


@plain_labels
def matrix_figure(
    *, tasks: Sequence[str], runs: Sequence[str], cells: Sequence[Sequence[Any]]
) -> dict[str, Any]:
    """A task × run heat map of log2 task speedup; a cell without a speedup shows its status.

    `cells[i][j]` has `status` and `speedup` (None when the result does not count or
    was not timed) for task `i` and run `j`.
    """
    z: list[list[float | None]] = []
    text: list[list[str]] = []
    for row in cells:
        z.append([math.log2(c.speedup) if c.speedup else None for c in row])
        text.append(
            [
                f"{c.speedup:.2f}{TIMES}" if c.speedup else _STATUS_SHORT.get(c.status, c.status)
                for c in row
            ]
        )
    return {
        "data": [
            {
                "type": "heatmap",
                "x": list(runs),
                "y": list(tasks),
                "z": z,
                "text": text,
                "texttemplate": "%{text}",
                "hovertemplate": "%{y} · %{x}: %{text}<extra></extra>",
                "colorscale": "RdBu",
                "zmid": 0,
                "colorbar": {"title": {"text": "log2 speedup"}},
                "xgap": 1,
                "ygap": 1,
            }
        ],
        "layout": {
            **_BASE_LAYOUT,
            "title": {"text": "Task speedup per run (blank: no counting GPU result)"},
            "height": 160 + 22 * len(tasks),
            "margin": {"l": 160, "r": 20, "t": 40, "b": 140},
            "xaxis": {"type": "category", "tickangle": -45},
            "yaxis": {"type": "category", "autorange": "reversed"},
        },
    }


_STATUS_SHORT = {
    "incorrect": "wrong",
    "flagged": "flag",
    "compile_error": "compile",
    "runtime_error": "error",
    "timeout": "timeout",
    "out_of_memory": "OOM",
    "worker_error": "worker",
    "queued": "…",
    "running": "…",
    "missing": "—",
    "correct": "untimed",
}


@plain_labels
def level_scores_figure(
    *, rows: Sequence[Mapping[str, Any]], score: str = "implementation"
) -> dict[str, Any]:
    """Score per level (L1, L2, L3, combined), one bar group per run (_level_scores)."""
    return _level_scores(rows=rows, score=score)


def _level_scores(
    *, rows: Sequence[Mapping[str, Any]], score: str = "implementation"
) -> dict[str, Any]:
    """Score per level (L1, L2, L3, combined), one bar group per run, colored by condition.

    Each row has `label`, `condition` and `scores` ({"L1", "L2", "L3", "combined"}: 0–100
    or None).
    """
    keys = (*LEVELS, "combined")
    data = [
        {
            "type": "bar",
            "name": f"{row['label']} ({row['condition']})",
            "legendgroup": row["condition"],
            "x": list(keys),
            "y": [(row.get("scores") or {}).get(k) for k in keys],
            "hovertemplate": "%{x}: %{y:.0f}<extra>%{fullData.name}</extra>",
        }
        for row in rows
    ]
    title = "Implementation score" if score == "implementation" else "Discovery score"
    return {
        "data": data,
        "layout": {
            **_BASE_LAYOUT,
            "title": {"text": f"{title} per level (0–100, higher is better)"},
            "barmode": "group",
            "xaxis": {"type": "category"},
            "yaxis": {"title": {"text": "score"}, "range": [0, 100]},
            "legend": {"orientation": "h", "y": -0.2},
        },
    }


NOT_SCORED = "not scored"
EXAMPLE_TAG = "example data"
_BARGAP = 0.2


@plain_labels
def run_level_scores_figure(
    *,
    rows: Sequence[Mapping[str, Any]],
    score: str = "implementation",
    uplift: Mapping[str, float | None] | None = None,
) -> dict[str, Any]:
    """`level_scores_figure` as the run page draws it: the run and its twin side by side.

    Rows are as `level_scores_figure`'s, plus `is_example`; the run page passes the run
    without guidance first, so each level reads without → with. A level without a score
    (None) carries a "not scored" label where its bar would stand: plotly draws nothing
    for None, which would read as 0. `uplift` ({"L1", "L2", "L3", "combined"}: with −
    without, or None) is written under each level's name, and each score over its bar;
    example runs are tagged as example data in the legend and the title.
    """
    rows = [
        {**row, "label": f"{row['label']} · {EXAMPLE_TAG}"} if row.get("is_example") else row
        for row in rows
    ]
    figure = _level_scores(rows=rows, score=score)  # its labels escaped once, below
    for trace in figure["data"]:
        # The value over each bar: a score of 0 shows as "0", never as an empty slot.
        trace |= {"texttemplate": "%{y:.0f}", "textposition": "outside", "cliponaxis": False}
    keys = figure["data"][0]["x"] if figure["data"] else []
    layout = figure["layout"]
    layout["showlegend"] = True  # the legend names the run even when it is drawn alone
    # Grouped bars share (1 − bargap) of a category; bar i of n sits at this offset.
    width = (1 - _BARGAP) / max(len(rows), 1)
    layout["bargap"] = _BARGAP
    layout["annotations"] = [
        {
            "x": k + (i + 0.5) * width - (1 - _BARGAP) / 2,
            "y": 0,
            "xref": "x",
            "yref": "y",
            "yanchor": "bottom",
            "text": NOT_SCORED.replace(" ", "<br>"),
            "showarrow": False,
            "font": {"size": 11, "color": "#5b6475"},
        }
        for i, trace in enumerate(figure["data"])
        for k, value in enumerate(trace["y"])
        if value is None
    ]
    if uplift is not None:
        layout["xaxis"] |= {
            "tickvals": list(keys),
            "ticktext": [
                key if uplift.get(key) is None else f"{key}<br>uplift {uplift[key]:+.1f}"
                for key in keys
            ],
        }
    if any(row.get("is_example") for row in rows):
        layout["title"]["text"] += f" · {EXAMPLE_TAG}"
    return figure


@plain_labels
def fast_p_figure(*, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """fast_p curves: one line per run; each row has `label` and `fast_p` ([[p, share]…])."""
    data = [
        {
            "type": "scatter",
            "mode": "lines",
            "line": {"shape": "hv"},
            "name": row["label"],
            "x": [p for p, _ in row["fast_p"]],
            "y": [share for _, share in row["fast_p"]],
            "hovertemplate": "p=%{x:.2f}: %{y:.0%}<extra>%{fullData.name}</extra>",
        }
        for row in rows
    ]
    return {
        "data": data,
        "layout": {
            **_BASE_LAYOUT,
            "title": {"text": "fast_p: share of tasks correct and faster than p × the reference"},
            "xaxis": {"title": {"text": "speedup threshold p"}, "type": "log"},
            "yaxis": {"title": {"text": "fast_p"}, "range": [0, 1], "tickformat": ".0%"},
            "legend": {"orientation": "h", "y": -0.25},
        },
    }


@plain_labels
def speedup_distribution_figure(*, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Box plot of task speedups per run; each row has `label` and `speedups` (list)."""
    data = [
        {
            "type": "box",
            "name": row["label"],
            "y": list(row["speedups"]),
            "boxpoints": "all",
            "jitter": 0.4,
            "pointpos": 0,
            "hovertemplate": "%{y:.2f}" + TIMES + "<extra>%{fullData.name}</extra>",
        }
        for row in rows
    ]
    return {
        "data": data,
        "layout": {
            **_BASE_LAYOUT,
            "title": {"text": "Task speedups per run (correct tasks)"},
            "showlegend": False,
            "yaxis": {"title": {"text": f"task speedup ({TIMES}, log)"}, "type": "log"},
            "shapes": [_ref_line(1)],
        },
    }


@plain_labels
def sol_fraction_figure(*, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Share of the device's speed of light per workload: one bar group per run.

    Each row has `label` and `workloads` ({"task/workload": fraction 0–1 or None}).
    """
    names = sorted({name for row in rows for name in row["workloads"]})
    data = [
        {
            "type": "bar",
            "name": row["label"],
            "x": names,
            "y": [row["workloads"].get(n) for n in names],
            "hovertemplate": "%{x}: %{y:.0%}<extra>%{fullData.name}</extra>",
        }
        for row in rows
    ]
    return {
        "data": data,
        "layout": {
            **_BASE_LAYOUT,
            "title": {"text": "Fraction of the speed of light per workload (higher is better)"},
            "barmode": "group",
            "xaxis": {"type": "category", "tickangle": -45},
            "yaxis": {"title": {"text": "speed-of-light fraction"}, "tickformat": ".0%"},
            "margin": {**_MARGIN, "b": 160},
            "legend": {"orientation": "h", "y": 1.1},
        },
    }


@plain_labels
def property_misses_figure(*, rows: Sequence[Mapping[str, Any]], top: int = 10) -> dict[str, Any]:
    """The design properties runs miss most, per level: horizontal bars of the share of
    runs that implement each. Each row has `level`, `label` and `share` (0–1)."""
    data = []
    for level in LEVELS:
        in_level = sorted((r for r in rows if r["level"] == level), key=lambda r: r["share"])
        in_level = in_level[:top]
        if not in_level:
            continue
        data.append(
            {
                "type": "bar",
                "orientation": "h",
                "name": level,
                "x": [r["share"] for r in in_level],
                "y": [r["label"] for r in in_level],
                "marker": {"color": _LEVEL_COLORS[level]},
                "hovertemplate": "%{y}: implemented by %{x:.0%} of runs<extra>"
                + level
                + "</extra>",
            }
        )
    count = sum(len(d["y"]) for d in data)
    return {
        "data": data,
        "layout": {
            **_BASE_LAYOUT,
            "title": {"text": "Design properties missed most (share of runs implementing each)"},
            "height": 160 + 22 * count,
            "margin": {**_MARGIN, "l": 260},
            "xaxis": {"range": [0, 1], "tickformat": ".0%"},
            "yaxis": {"type": "category", "automargin": True},
        },
    }


@plain_labels
def headline_figure(*, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The home chart: Performance Score without and with guidance, one bar pair per
    model · agent. Each row has `label`, `without` and `with` (numbers or None)."""
    labels = [row["label"] for row in rows]
    return {
        "data": [
            {
                "type": "bar",
                "name": name,
                "x": labels,
                "y": [row[key] for row in rows],
                "hovertemplate": "%{x}: %{y:.2f}<extra>" + name + "</extra>",
            }
            for key, name in (("without", "without guidance"), ("with", "with guidance"))
        ],
        "layout": {
            **_BASE_LAYOUT,
            "title": {"text": "Performance Score without → with guidance (higher is better)"},
            "barmode": "group",
            "xaxis": {"type": "category"},
            "yaxis": {"title": {"text": "Performance Score"}, "rangemode": "tozero"},
            "shapes": [_ref_line(1)],
            "legend": {"orientation": "h", "y": -0.2},
        },
    }
