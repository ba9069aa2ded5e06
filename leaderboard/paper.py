"""The paper's headline table: per model and agent, each score without → with guidance
and the uplift with its paired 95 % interval, for the entries a board's filters choose.
The page, the API, the CSV and the LaTeX table are the same rows (`paper_table`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .filters import Filters
from .selectors.board import SCORE_COLUMNS, leaderboard_pairs
from .tables import Column, Table

PAPER_SCORES = tuple(c for c in SCORE_COLUMNS if c.key != "turns")
PAPER_COLUMNS = (
    Column("model", "Model"),
    Column("agent", "Agent"),
    Column("with_condition", "Guidance", "The levels given to the guided runs."),
    Column("hardware", "GPU"),
    Column("catalog_version", "Catalog"),
    Column("without_run_ids", "Runs without"),
    Column("with_run_ids", "Runs with"),
    Column("attempts_without", "Attempts without"),
    Column("attempts_with", "Attempts with"),
    Column("is_example", "Example"),
    *(
        column
        for score in PAPER_SCORES
        for column in (
            Column(f"{score.key}_without", f"{score.label} without", "", score.direction, True),
            Column(f"{score.key}_with", f"{score.label} with", "", score.direction, True),
            Column(f"{score.key}_uplift", f"{score.label} uplift", "", score.direction, True),
            Column(f"uplift_{score.key}_ci", f"{score.label} uplift 95 % interval"),
        )
    ),
    Column("geomean_n", "N", "Tasks correct on both sides (the paired geomean's N).", "", True),
)


def paper_table(*, filters: Filters) -> Table:
    """One row per pair of entries (model, agent, guidance) on the filters' board."""
    return Table(name="paper", columns=PAPER_COLUMNS, rows=leaderboard_pairs(filters=filters))


# --- LaTeX -----------------------------------------------------------------------------

_PERCENT = ("correctness_rate", "implementation", "discovery")


def _number(value: float, key: str, *, sign: bool = False) -> str:
    scale = 100.0 if key == "correctness_rate" else 1.0
    plus = "+" if sign else ""
    if key.startswith(_PERCENT):
        return f"{scale * value:{plus}.1f}"
    return f"{value:{plus}.2f}"


def _cell(row: Mapping[str, Any], key: str) -> str:
    a, b = row.get(f"{key}_without"), row.get(f"{key}_with")
    if a is None or b is None:
        return "--"
    text = f"{_number(a, key)} $\\to$ {_number(b, key)}"
    lift = row.get(f"{key}_uplift")
    if lift is not None:
        text += f" ({_number(lift, key, sign=True)}"
        ci = row.get(f"uplift_{key}_ci")
        if ci:
            low, high = ci
            text += f" [{_number(low, key, sign=True)}, {_number(high, key, sign=True)}]"
        text += ")"
    return text


def _escape(text: str) -> str:
    for char, escaped in (
        ("\\", r"\textbackslash{}"),
        ("&", r"\&"),
        ("%", r"\%"),
        ("_", r"\_"),
        ("#", r"\#"),
        ("$", r"\$"),
        ("{", r"\{"),
        ("}", r"\}"),
    ):
        text = text.replace(char, escaped)
    return text


def table_latex(rows: Sequence[Mapping[str, Any]]) -> str:
    """The rows as a LaTeX (booktabs) table: a cell is `without → with (uplift [low,
    high])`; rates and 0–100 scores in %, their uplifts in points."""
    heads = [
        "Model",
        "Guidance",
        "Correct (\\%)",
        "Perf.\\ Score",
        "Geomean (N)",
        *(f"Impl.\\ {k} (\\%)" for k in ("L1", "L2", "L3")),
        "Impl.\\ (\\%)",
        "Disc.\\ (\\%)",
    ]
    keys = (
        "correctness_rate",
        "performance_score",
        "geomean_speedup",
        "implementation_L1",
        "implementation_L2",
        "implementation_L3",
        "implementation",
        "discovery",
    )
    lines = [
        "% D2K paper table: without -> with guidance (uplift [95 % paired bootstrap interval])",
        "\\begin{tabular}{ll" + "r" * len(keys) + "}",
        "\\toprule",
        " & ".join(heads) + " \\\\",
        "\\midrule",
    ]
    for row in rows:
        cells = [_cell(row, key) for key in keys]
        cells[2] += f" ({row.get('geomean_n', 0)})"
        name = f"{_escape(str(row['model']))} / {_escape(str(row['agent']))}"
        if row.get("is_example"):
            name += " (example)"
        attempts = f"{row['attempts_without']}/{row['attempts_with']} att."
        lines.append(
            " & ".join([f"{name}, {attempts}", _escape(str(row["with_condition"])), *cells])
            + " \\\\"
        )
    lines += ["\\bottomrule", "\\end{tabular}", ""]
    return "\n".join(lines)
