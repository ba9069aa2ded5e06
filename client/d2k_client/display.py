"""How the CLI shows what the API answers: rich tables for people, JSON for scripts.

Whatever the server says (a verdict's message, a flag, a name, a table cell) may come from
a kernel or a run's manifest, so it reaches the terminal through `plain` only: as text,
never as markup, never as a terminal control."""

from __future__ import annotations

import json
import re
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


def rows_table(rows: list[dict[str, Any]], title: str | None = None) -> Table:
    """A table of whatever keys the rows have (the first row's order)."""
    columns: list[str] = []
    for row in rows:
        columns.extend(k for k in row if k not in columns)
    return table(title, rows, columns)


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


def run_show(run: dict[str, Any]) -> None:
    console.print(
        Text.assemble(
            plain(f"Run {run['id']} · {run['model']} / {run['agent']} · "),
            plain(f"condition {run['condition']} · "),
            plain(run["state"], "bold"),
            plain(f" · {run['example_label']}" if run.get("example_label") else ""),
        )
    )
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
    console.print(table("Tasks", rows, list(rows[0]) if rows else ["task"]))
    console.print(plain(run["url"]))
