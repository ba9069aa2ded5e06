"""How the CLI shows what the API answers: rich tables for people, JSON for scripts.

Whatever the server says (a verdict's message, a flag, a name, a table cell) may come from
a kernel or a run's manifest, so it reaches the terminal through `plain` only: as text,
never as markup, never as a terminal control."""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.markdown import Markdown
from rich.table import Table
from rich.text import Text

console = Console()
err_console = Console(stderr=True)

# An escape sequence whole (CSI, OSC such as an OSC 8 hyperlink, or a two-character one),
# so that no half of one is left to print; then any C0 or C1 control but newline and tab,
# and the bidirectional overrides that make a terminal show text in another order.
_ESCAPE_SEQUENCE = re.compile(
    r"\x1b(?:\[[0-?]*[ -/]*[@-~]?|\][^\x07\x1b\n]*(?:\x07|\x1b\\)?|[ -~]?)"
)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def plain(value: Any, style: str = "") -> Text:
    """`value` (from the server) as plain text in `style`: its markup shown as written, its
    escape sequences and control characters (but newline and tab) removed."""
    return Text(_CONTROL.sub("", _ESCAPE_SEQUENCE.sub("", str(value))), style=style)


def say(text: str) -> None:
    """A plain sentence on stderr: no markup, no highlighting, one unbroken line."""
    err_console.print(plain(text), highlight=False, soft_wrap=True)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def _cell(value: Any) -> Text:
    if value is None:
        return Text("—")
    if isinstance(value, float):
        return Text(f"{value:.4g}")
    if isinstance(value, list) and all(isinstance(v, int) for v in value):
        return plain(" ".join(f"#{v}" for v in value))  # run ids
    if isinstance(value, dict | list):
        return plain(json.dumps(value, sort_keys=True, ensure_ascii=False))
    return plain(value)


def table(title: str | None, rows: Iterable[dict[str, Any]], columns: list[str]) -> Table:
    out = Table(title=title, title_justify="left")
    for column in columns:
        out.add_column(plain(column))
    for row in rows:
        out.add_row(*(_cell(row.get(c)) for c in columns))
    return out


# The leaderboard's columns `d2k leaderboard` shows unless told (`--columns`), in order.
BOARD_COLUMNS = (
    "run_ids",
    "hardware",
    "model",
    "agent",
    "condition",
    "correctness_rate",
    "performance_score",
    "geomean_speedup",
    "geomean_n",
    "implementation",
    "discovery",
)
# Short headers for the default columns, so that more of them fit a terminal; `--columns`
# takes the API's keys (docs/client.md lists them).
BOARD_HEADERS = {
    "run_ids": "runs",
    "hardware": "GPU",
    "correctness_rate": "correct",
    "performance_score": "PS",
    "geomean_speedup": "geomean",
    "geomean_n": "N",
    "implementation": "impl",
    "discovery": "disc",
}
# A column's share of the table's frame: the separator and one space each side.
_COLUMN_FRAME = 3


def board_columns(rows: list[dict[str, Any]], chosen: list[str] | None) -> list[str]:
    """The columns to show: `chosen` (every key for ["all"]), else the default columns the
    rows have (every key where they have none of them). ValueError naming an unknown one."""
    keys: list[str] = []
    for row in rows:
        keys.extend(k for k in row if k not in keys)
    if chosen == ["all"]:
        return keys
    if chosen:
        unknown = [c for c in chosen if rows and c not in keys]
        if unknown:
            raise ValueError(
                f"unknown column(s) {', '.join(unknown)}; the leaderboard has: {', '.join(keys)}"
            )
        return chosen
    return [c for c in BOARD_COLUMNS if c in keys] or keys


def terminal_width() -> int:
    """The terminal's width as it is now: COLUMNS where the shell sets it, else the
    terminal's own size, else the console's (a rich Console reads COLUMNS only once)."""
    return shutil.get_terminal_size((console.width, 24)).columns


def fitted_columns(
    rows: list[dict[str, Any]], columns: list[str], width: int
) -> tuple[list[str], list[str]]:
    """The leading columns whose cells fit `width` characters unbroken, and those left out
    (the first column is always kept)."""
    kept: list[str] = []
    used = 1  # the table's left edge
    for index, column in enumerate(columns):
        header = BOARD_HEADERS.get(column, column)
        natural = max([len(header), *(len(_cell(row.get(column)).plain) for row in rows)])
        if index and used + natural + _COLUMN_FRAME > width:
            return kept, columns[index:]
        kept.append(column)
        used += natural + _COLUMN_FRAME
    return kept, []


def board_table(rows: list[dict[str, Any]], columns: list[str]) -> Table:
    """The leaderboard's rows: every cell on one line, numbers to the right."""
    out = Table(title="Leaderboard", title_justify="left")
    for column in columns:
        numeric = any(isinstance(row.get(column), int | float) for row in rows)
        out.add_column(
            plain(BOARD_HEADERS.get(column, column)),
            justify="right" if numeric else "left",
            no_wrap=True,
        )
    for row in rows:
        out.add_row(*(_cell(row.get(c)) for c in columns))
    return out


def task_show(task: dict[str, Any]) -> None:
    console.rule(plain(f"{task['slug']}: {task['title']} (v{task['version']}, {task['category']})"))
    # The catalog's markdown is rendered as markdown, once rid of terminal controls.
    console.print(Markdown(plain(task["statement"]).plain))
    console.print(
        table("Public workloads", task["workloads"], ["name", "role", "params", "flops", "bytes"])
    )
    for guidance in task["guidance"]:
        deps = ", ".join(guidance["depends_on"]) or "nothing"
        console.rule(plain(f"Guidance {guidance['level']} (builds on {deps})"))
        console.print(Markdown(plain(guidance["text"]).plain or "_(empty)_"))


RESULT_COLUMNS = ["name", "role", "status", "max_abs_err", "median_ms", "speedup", "message"]


def evaluation_show(submission: dict[str, Any]) -> None:
    evaluation = submission.get("evaluation")
    head = plain(
        f"Submission {submission['id']} · {submission['task']} v{submission['task_version']}"
    )
    if evaluation is None:
        console.print(Text.assemble(head, ": no evaluation yet"))
        return
    console.print(
        Text.assemble(
            head,
            ": ",
            plain(evaluation["status"], "bold"),
            plain(f" ({evaluation['mode']} mode)"),
        )
    )
    if evaluation.get("message"):
        console.print(plain(evaluation["message"]))
    if evaluation["results"]:
        console.print(table("Workloads", evaluation["results"], RESULT_COLUMNS))
    for flag in evaluation.get("flags") or []:
        console.print(plain(f"flag {flag.get('check')}: {flag.get('detail')}"))


def job_line(submission: dict[str, Any]) -> str:
    """One line of where an evaluation stands, for the live display (plain text)."""
    evaluation = submission.get("evaluation")
    if evaluation is None:
        return "waiting for the evaluation to be created"
    job = evaluation["job"]
    state = job["state"]
    if state == "queued" and job.get("queue_position") is not None:
        state = f"queued, {job['queue_position']} ahead"
    elif state == "running":
        state = f"running (attempt {job['attempt']}/{job['max_attempts']}) on {job['worker']}"
    return plain(f"{evaluation['status']}: {state} · {job['next_step']}").plain


def bundle_problems(run: dict[str, Any]) -> list[str]:
    """A rejected run's problems, one line each: `file:line: message`."""
    lines = []
    for error in run.get("errors") or []:
        where = ":".join(str(p) for p in (error.get("file"), error.get("line")) if p is not None)
        lines.append(f"{where or 'bundle'}: {error['message']}")
    return lines


def run_show(run: dict[str, Any]) -> None:
    console.print(
        Text.assemble(
            plain(f"Run {run['id']} · {run['model']} / {run['agent']} · "),
            plain(f"condition {run['condition']} · "),
            plain(run["state"], "bold"),
            plain(f" · {run['example_label']}" if run.get("example_label") else ""),
        )
    )
    if run["state"] in ("validating", "rejected"):
        said = {
            "validating": "The portal is validating the bundle; its kernels are queued after.",
            "rejected": "The portal rejected the bundle; nothing of it was kept:",
        }
        console.print(plain(said[run["state"]]))
        for error in run.get("errors") or []:
            where = ":".join(
                str(p) for p in (error.get("file"), error.get("line")) if p is not None
            )
            console.print(plain(f"  {where or 'bundle'}: {error['message']}"))
        console.print(plain(run["url"]))
        return
    rows = []
    for item in run["tasks"]:
        mine, twin = item["result"] or {}, item["pair_result"] or {}
        rows.append(
            {
                "task": item["task"],
                "status": mine.get("status"),
                "speedup": mine.get("speedup"),
                "submission": mine.get("submission"),
                "twin status": twin.get("status"),
                "twin speedup": twin.get("speedup"),
            }
        )
    scores = run.get("scores") or {}
    if scores.get("tasks_total") is not None:
        console.print(table("Scores", score_rows(scores), ["score", "this run", "twin", "uplift"]))
    else:
        console.print(plain("Scores: not computed yet (they are once its evaluations finish)."))
    console.print(table("Tasks", rows, list(rows[0]) if rows else ["task"]))
    console.print(plain(run["url"]))


def _percent(value: Any) -> str | None:
    return None if value is None else f"{100 * value:.1f}%"


def _times(value: Any) -> str | None:
    return None if value is None else f"{value:.2f}×"


def _signed(value: Any, fmt: str = "{:+.2f}") -> str | None:
    return None if value is None else fmt.format(value)


def score_rows(scores: dict[str, Any]) -> list[dict[str, Any]]:
    """The run page's headline scores as rows: this run, its twin and the uplift (with
    guidance − without; speed only when both runs were timed on one GPU)."""
    twin = scores.get("twin") or {}
    lift = scores.get("uplift") or {}

    def geomean(side: dict[str, Any]) -> str | None:
        g = side.get("geomean_speedup") or {}
        return None if g.get("value") is None else f"{g['value']:.2f}× (N={g.get('n')})"

    def correct(side: dict[str, Any]) -> str | None:
        if side.get("tasks_total") is None:
            return None
        rate = _percent(side.get("correctness_rate"))
        return f"{side.get('tasks_correct')}/{side['tasks_total']} ({rate})"

    def level(side: dict[str, Any], name: str) -> Any:
        value = (side.get(name) or {}).get("combined")
        return None if value is None else f"{value:.1f}"

    lift_level = {
        name: (lift.get(name) or {}).get("combined") for name in ("implementation", "discovery")
    }
    return [
        {
            "score": "correct tasks",
            "this run": correct(scores),
            "twin": correct(twin),
            "uplift": _signed(lift.get("correctness_rate"), "{:+.1%}"),
        },
        {
            "score": "Performance Score",
            "this run": _signed(scores.get("performance_score"), "{:.2f}"),
            "twin": _signed(twin.get("performance_score"), "{:.2f}"),
            "uplift": _signed(lift.get("performance_score")),
        },
        {
            "score": "geomean speedup",
            "this run": geomean(scores),
            "twin": geomean(twin),
            "uplift": _signed(lift.get("geomean_speedup"), "{:+.2f}×"),
        },
        {
            "score": "implementation (0–100)",
            "this run": level(scores, "implementation"),
            "twin": level(twin, "implementation"),
            "uplift": _signed(lift_level["implementation"], "{:+.1f}"),
        },
        {
            "score": "discovery (0–100)",
            "this run": level(scores, "discovery"),
            "twin": level(twin, "discovery"),
            "uplift": _signed(lift_level["discovery"], "{:+.1f}"),
        },
    ]
