"""Plotly figures as plain dicts: rows in, figure out, no I/O (tested as data).

Pages hand a figure to the browser with `json_script`; static/js/charts.js
draws every `[data-figure]` element with the locally served plotly.js.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

LEVELS = ("L1", "L2", "L3")
TIMES = "\u00d7"
_LEVEL_COLORS = {"L1": "#2f5fd0", "L2": "#1a7f37", "L3": "#9a6700"}
_BASE_LAYOUT = {
    "margin": {"l": 60, "r": 20, "t": 40, "b": 60},
    "paper_bgcolor": "#ffffff",
    "plot_bgcolor": "#ffffff",
    "font": {"family": "system-ui, sans-serif", "size": 12},
}


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
            "name": f"#{row.rank} {row.owner} ({row.speedup:.2f}{TIMES})",
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
